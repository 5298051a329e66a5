/*
 * cnn_exec_slice.c - FORWARD and BACKWARD of a slice of one convolutional
 * or connected layer on the CPU (cnn.proto, cnn_layout.h): over input
 * channels [c0, c1) (ICP) or output channels [c0, c1) (OCP).
 *
 * ICP:
 * The slice runs as a one-layer cnn_cpu stage with c1 - c0 input channels
 * and a linear activation (cnn_cpu_slice_create, kept in the stage pool);
 * the rest is plain loops here. FORWARD packs the slice's channels of the
 * layer's whole input into the slot's stash, runs the stage on them (the
 * biases are the block's in the last slice, zeros in the others), adds the
 * previous slice's partial sums and, in the last slice of a layer with an
 * activation (ReLU, leaky, logistic), applies it and keeps the output for
 * BACKWARD's derivative. BACKWARD makes dz (the last slice: the output
 * error through the activation's derivative, taken from that output; the
 * others are given it), re-runs the stage's forward pass from the stash
 * (as whole stages do, cnn_exec.c), runs EB and PG with dz, and adds the
 * weight gradients (and the last slice's bias gradients) into the block.
 *
 * OCP: the slice runs as a one-layer cnn_cpu stage with c1 - c0 output
 * channels and the layer's activation (cnn_cpu_ocp_slice_create). FORWARD
 * stashes the whole input, runs the stage and lays its channels between
 * the previous slice's and zeros; BACKWARD picks its channels of the
 * output error, re-runs the forward pass from the stash, then EB and PG.
 *
 * An inference FORWARD (cnn.proto) computes the same (a slice holds no
 * batch normalisation or dropout) from a scratch copy and leaves the slot
 * alone. A batch-normalized layer is never sliced (cnn_task.c).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_cpu.h"
#include "cnn_stage_pool.h"
#include "cnn_task.h"
#include "ember/ember_errors.h"

static float *region(uint8_t *state, uint64_t off) {
  return (float *)(void *)(state + off);
}

static cnn_state_header *header(uint8_t *state) {
  return (cnn_state_header *)(void *)state;
}

static const cnn_layer *layer_of(const cnn_task *t) {
  size_t n;
  return &cnn_net_layers(t->net, &n)[t->first];
}

/* A float view of an input block: the block itself when aligned, else a
 * copy in *tmp (freed by the caller). NULL when out of memory. */
static const float *floats_of(const acc_block *b, float **tmp) {
  *tmp = NULL;
  if (((uintptr_t)b->data % sizeof(float)) == 0)
    return (const float *)(const void *)b->data;
  *tmp = malloc(b->size ? b->size : 1);
  if (*tmp) memcpy(*tmp, b->data, b->size);
  return *tmp;
}

/* The activation of the last ICP slice, and its derivative from the
 * output y (cnn_ref.h). */
static float activate(cnn_activation act, float z) {
  switch (act) {
  case CNN_ACT_RELU: return z > 0 ? z : 0;
  case CNN_ACT_LEAKY: return z > 0 ? z : (float)CNN_LEAKY_SLOPE * z;
  case CNN_ACT_LOGISTIC: return 1.0f / (1.0f + expf(-z));
  case CNN_ACT_LINEAR: break;
  }
  return z;
}

static float activation_grad(cnn_activation act, float y, float dy) {
  switch (act) {
  case CNN_ACT_RELU: return y > 0 ? dy : 0;
  case CNN_ACT_LEAKY: return y > 0 ? dy : (float)CNN_LEAKY_SLOPE * dy;
  case CNN_ACT_LOGISTIC: return dy * y * (1.0f - y);
  case CNN_ACT_LINEAR: break;
  }
  return dy;
}

static int no_memory(char *err, size_t err_len) {
  snprintf(err, err_len, "out of memory");
  return EMBER_ENOMEM;
}

/* The pool's key of the slice's stage. */
static cnn_pool_key slice_key(const cnn_task *t) {
  return (cnn_pool_key){t->text, t->text_len, t->first, t->end, t->batch,
                        t->layout.c1 - t->layout.c0, t->layout.ocp};
}

/* The slice's cnn_cpu stage from the pool, holding the block's weights,
 * and its biases (an ICP slice but the last: zeros). */
static int load_slice(const cnn_task *t, uint8_t *state, cnn_cpu_stage **out,
                      char *err, size_t err_len) {
  cnn_pool_key k = slice_key(t);
  int rc = cnn_stage_pool_take(t->net, &k, t->app, out, err, err_len);
  if (rc) return rc;
  const cnn_layout *L = &t->layout;
  const float *p = region(state, L->params_off);
  float *zeros = NULL;
  const float *b = p + L->weights;
  if (L->icp && !L->icp_last)
    b = zeros = calloc(layer_of(t)->biases + 1, sizeof *b);
  rc = b ? cnn_cpu_stage_set_params(*out, t->first, p, b) : EMBER_ENOMEM;
  free(zeros);
  if (rc) {
    snprintf(err, err_len, "layer %u: cannot load the slice's parameters",
             t->first);
    cnn_stage_pool_discard(*out);
    *out = NULL;
  }
  return rc;
}

static void put_slice(const cnn_task *t, cnn_cpu_stage *s, int rc) {
  cnn_pool_key k = slice_key(t);
  if (rc)
    cnn_stage_pool_discard(s);
  else
    cnn_stage_pool_give(&k, s);
}

/* The slice's stage, loaded from the block, run forward on the stash
 * (its input) into z (its output). */
static int forward_slice(const cnn_task *t, uint8_t *state,
                         const uint8_t *stash, float *z, char *err,
                         size_t err_len) {
  cnn_cpu_stage *s = NULL;
  int rc = load_slice(t, state, &s, err, err_len);
  if (rc) return rc;
  rc = cnn_cpu_stage_forward(s, (const float *)(const void *)stash, z, NULL,
                             NULL);
  if (rc) snprintf(err, err_len, "forward failed (%s)", ember_errname(rc));
  put_slice(t, s, rc);
  return rc;
}

int cnn_icp_forward(const cnn_task *t, uint8_t *state,
                    const acc_block *inputs, acc_mut_block *outputs,
                    size_t n_outputs, char *err, size_t err_len) {
  const cnn_layout *L = &t->layout;
  const cnn_layer *l = layer_of(t);
  /* the slice's channels, packed, into the slot's stash (an inference's
   * into scratch) */
  uint8_t *scratch = NULL, *stash = state + L->stash_off +
                                    t->slot * L->stash_stride;
  if (t->inference &&
      !(stash = scratch = malloc((size_t)L->stash_elems * sizeof(float) + 1)))
    return no_memory(err, err_len);
  size_t sample = (size_t)(L->in_elems / t->batch) * sizeof(float);
  size_t part = (size_t)(L->stash_elems / t->batch) * sizeof(float);
  size_t skip = (size_t)(L->c0 * L->unit) * sizeof(float);
  for (uint32_t n = 0; n < t->batch; n++)
    memcpy(stash + n * part, inputs[0].data + n * sample + skip, part);
  size_t outs = (size_t)L->out_elems;
  float *tmp_out = NULL, *tmp_prev = NULL;
  float *z = n_outputs ? (float *)(void *)outputs[0].data : NULL;
  if (!z) z = tmp_out = malloc(outs * sizeof *z);
  const float *prev = L->c0 ? floats_of(&inputs[1], &tmp_prev) : NULL;
  if (!z || (L->c0 && !prev)) {
    free(tmp_out);
    free(tmp_prev);
    free(scratch);
    return no_memory(err, err_len);
  }
  int rc = forward_slice(t, state, stash, z, err, err_len);
  if (!rc) {
    if (prev)
      for (size_t i = 0; i < outs; i++) z[i] += prev[i];
    if (L->icp_last && l->act != CNN_ACT_LINEAR) {
      for (size_t i = 0; i < outs; i++) z[i] = activate(l->act, z[i]);
      if (!t->inference)
        memcpy(state + L->kept_off + t->slot * L->kept_stride, z,
               outs * sizeof *z);
    }
    if (!t->inference) header(state)->flags |= 1u << t->slot;
  }
  free(tmp_out);
  free(tmp_prev);
  free(scratch);
  return rc;
}

/* EMBER_ESTATE unless the slot holds a FORWARD. */
static int check_slot(const cnn_task *t, uint8_t *state, char *err,
                      size_t err_len) {
  if (header(state)->flags & (1u << t->slot)) return 0;
  snprintf(err, err_len, "BACKWARD on slot %u without a FORWARD there "
           "since INIT, SET_PARAMS or its last BACKWARD", t->slot);
  return EMBER_ESTATE;
}

/* What every slice's BACKWARD ends with: the slice's stage re-runs the
 * slot's FORWARD from the stash, then EB and PG with dz, the error at its
 * output (din: the error at its input, or NULL); its gradients are added
 * into the block (the biases' after the weights' in both: L->params =
 * weights + biases, none in an ICP slice but the last) and the slot is
 * free again. */
static int backward_from_stash(const cnn_task *t, uint8_t *state,
                               const float *dz, float *din, char *err,
                               size_t err_len) {
  const cnn_layout *L = &t->layout;
  float *g = malloc((size_t)(L->weights + layer_of(t)->biases) * sizeof *g);
  if (!g) return no_memory(err, err_len);
  cnn_cpu_stage *s = NULL;
  int rc = load_slice(t, state, &s, err, err_len);
  if (!rc) {
    const float *in = region(state, L->stash_off + t->slot * L->stash_stride);
    rc = cnn_cpu_stage_forward(s, in, NULL, NULL, NULL);
    if (!rc) rc = cnn_cpu_stage_backward(s, dz, din);
    if (rc) snprintf(err, err_len, "backward failed (%s)",
                     ember_errname(rc));
  }
  if (!rc) {
    rc = cnn_cpu_stage_get_grads(s, t->first, g, g + L->weights);
    if (rc) snprintf(err, err_len, "layer %u: cannot read gradients",
                     t->first);
  }
  if (!rc) {
    float *grads = region(state, L->grads_off);
    for (uint64_t k = 0; k < L->params; k++) grads[k] += g[k];
    header(state)->flags &= ~(1u << t->slot);
  }
  put_slice(t, s, rc);
  free(g);
  return rc;
}

int cnn_icp_backward(const cnn_task *t, uint8_t *state,
                     const acc_block *inputs, acc_mut_block *outputs,
                     size_t n_outputs, char *err, size_t err_len) {
  const cnn_layout *L = &t->layout;
  const cnn_layer *l = layer_of(t);
  int rc = check_slot(t, state, err, err_len);
  if (rc) return rc;
  size_t outs = (size_t)L->out_elems;
  float *tmp_dy = NULL, *tmp_dz = NULL;
  const float *dy = floats_of(&inputs[0], &tmp_dy);
  /* dz: what the other slices are given; the last slice makes it */
  const float *dz = dy;
  float *dz_out = n_outputs > 1 ? (float *)(void *)outputs[1].data : NULL;
  if (dy && L->icp_last && l->act != CNN_ACT_LINEAR) {
    float *d = dz_out ? dz_out : (tmp_dz = malloc(outs * sizeof *d));
    const float *y = region(state, L->kept_off + t->slot * L->kept_stride);
    if (d)
      for (size_t i = 0; i < outs; i++)
        d[i] = activation_grad(l->act, y[i], dy[i]);
    dz = d;
  } else if (dy && dz_out) {
    memcpy(dz_out, dy, outs * sizeof *dz_out);
  }
  if (!dy || !dz) {
    rc = no_memory(err, err_len);
  } else {
    float *din = n_outputs ? (float *)(void *)outputs[0].data : NULL;
    rc = backward_from_stash(t, state, dz, din, err, err_len);
  }
  free(tmp_dy);
  free(tmp_dz);
  return rc;
}

int cnn_ocp_forward(const cnn_task *t, uint8_t *state,
                    const acc_block *inputs, acc_mut_block *outputs,
                    size_t n_outputs, char *err, size_t err_len) {
  const cnn_layout *L = &t->layout;
  uint8_t *scratch = NULL, *stash = state + L->stash_off +
                                    t->slot * L->stash_stride;
  if (t->inference &&
      !(stash = scratch = malloc((size_t)L->in_elems * sizeof(float) + 1)))
    return no_memory(err, err_len);
  memcpy(stash, inputs[0].data, (size_t)L->in_elems * sizeof(float));
  size_t per_sample = (size_t)(L->out_elems / t->batch);
  size_t before = (size_t)(L->c0 * L->unit), own = (size_t)((L->c1 - L->c0) *
                                                             L->unit);
  float *z = malloc((size_t)t->batch * own * sizeof *z);
  float *tmp_prev = NULL;
  const float *prev = L->c0 ? floats_of(&inputs[1], &tmp_prev) : NULL;
  if (!z || (L->c0 && !prev)) {
    free(z);
    free(tmp_prev);
    free(scratch);
    return no_memory(err, err_len);
  }
  int rc = forward_slice(t, state, stash, z, err, err_len);
  if (!rc && n_outputs) {
    /* per sample: the previous slices' channels, its own, zeros after */
    float *y = (float *)(void *)outputs[0].data;
    for (uint32_t n = 0; n < t->batch; n++) {
      float *row = y + n * per_sample;
      if (prev) memcpy(row, prev + n * per_sample, before * sizeof *row);
      else memset(row, 0, before * sizeof *row);
      memcpy(row + before, z + n * own, own * sizeof *row);
      memset(row + before + own, 0,
             (per_sample - before - own) * sizeof *row);
    }
  }
  if (!rc && !t->inference) header(state)->flags |= 1u << t->slot;
  free(z);
  free(tmp_prev);
  free(scratch);
  return rc;
}

int cnn_ocp_backward(const cnn_task *t, uint8_t *state,
                     const acc_block *inputs, acc_mut_block *outputs,
                     size_t n_outputs, char *err, size_t err_len) {
  const cnn_layout *L = &t->layout;
  int rc = check_slot(t, state, err, err_len);
  if (rc) return rc;
  size_t per_sample = (size_t)(L->out_elems / t->batch);
  size_t before = (size_t)(L->c0 * L->unit), own = (size_t)((L->c1 - L->c0) *
                                                             L->unit);
  /* its channels of the output error, packed */
  float *dy = malloc((size_t)t->batch * own * sizeof *dy);
  if (!dy) return no_memory(err, err_len);
  for (uint32_t n = 0; n < t->batch; n++)
    memcpy(dy + n * own,
           inputs[0].data + (n * per_sample + before) * sizeof *dy,
           own * sizeof *dy);
  float *din = n_outputs ? (float *)(void *)outputs[0].data : NULL;
  rc = backward_from_stash(t, state, dy, din, err, err_len);
  free(dy);
  return rc;
}
