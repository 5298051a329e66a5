/*
 * cnn_exec.c - running a cnn task on its state block (cnn_task_run).
 *
 * The state block is the truth between tasks (cnn_layout.h). FORWARD and
 * BACKWARD build a cnn_cpu stage for the task, load the parameters from
 * the block, run, and put back what changed (the stash, the gradients);
 * INIT, UPDATE, GET_PARAMS and SET_PARAMS work on the block's floats
 * directly, UPDATE with the same single-precision arithmetic, in the same
 * order, as cnn_cpu_stage_update() (never the rolling statistics of a
 * batch normalisation). A training FORWARD puts the rolling statistics
 * the stage moved back into the block and keeps its dropout key with its
 * slot; BACKWARD recomputes the stage's inner activations from the
 * stashed input with that key (cnn_pass.h: CNN_MODE_RECOMPUTE) before it
 * runs EB and PG. An inference FORWARD runs the evaluation pass and keeps
 * nothing. ICP and OCP slices' FORWARD and BACKWARD are
 * cnn_exec_slice.c's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_cpu.h"
#include "cnn_stage_pool.h"
#include "cnn_task.h"
#include "ember/ember_errors.h"

static cnn_state_header *header(uint8_t *state) {
  return (cnn_state_header *)state;
}

static float *region(uint8_t *state, uint64_t off) {
  return (float *)(state + off);
}

static int canceled(const atomic_int *cancel) {
  return cancel && atomic_load(cancel);
}

/* cnn_cpu's update, on the block's canonical floats */
static void sgd(float *w, float *v, float *g, uint64_t n, float scale,
                float lr, float momentum, float decay) {
  for (uint64_t i = 0; i < n; i++) {
    v[i] = momentum * v[i] + g[i] * scale + decay * w[i];
    w[i] -= lr * v[i];
    g[i] = 0;
  }
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

/* The pool's key of the task's stage. */
static cnn_pool_key pool_key(const cnn_task *t) {
  return (cnn_pool_key){t->text, t->text_len, t->first, t->end, t->batch,
                        0, 0};
}

/* A cnn_cpu stage holding the block's parameters, from the pool. */
static int load_stage(const cnn_task *t, uint8_t *state, cnn_cpu_stage **out,
                      char *err, size_t err_len) {
  cnn_pool_key k = pool_key(t);
  int rc = cnn_stage_pool_take(t->net, &k, t->app, out, err, err_len);
  if (rc) return rc;
  size_t n;
  const cnn_layer *layers = cnn_net_layers(t->net, &n);
  const float *p = region(state, t->layout.params_off);
  CNN_FOR_PARAM_LAYERS(t, layers, i, off) {
    rc = cnn_cpu_stage_set_layer(*out, i, p + off);
    if (rc) {
      snprintf(err, err_len, "layer %u: cannot load parameters", i);
      cnn_stage_pool_discard(*out);
      *out = NULL;
      return rc;
    }
  }
  return 0;
}

/* Back to the pool after a task; destroyed after a failure (its state is
 * unknown). */
static void put_stage(const cnn_task *t, cnn_cpu_stage *s, int rc) {
  cnn_pool_key k = pool_key(t);
  if (rc)
    cnn_stage_pool_discard(s);
  else
    cnn_stage_pool_give(&k, s);
}

/* After a training FORWARD: the rolling statistics the stage moved, back
 * into the block. */
static int store_rolling(const cnn_task *t, uint8_t *state, cnn_cpu_stage *s,
                         char *err, size_t err_len) {
  size_t n;
  const cnn_layer *layers = cnn_net_layers(t->net, &n);
  float *p = region(state, t->layout.params_off);
  CNN_FOR_PARAM_LAYERS(t, layers, i, off) {
    if (!layers[i].batch_norm) continue;
    float *scales = p + off + layers[i].weights + layers[i].biases;
    if (cnn_cpu_stage_get_norm(s, i, scales, scales + layers[i].scales)) {
      snprintf(err, err_len, "layer %u: cannot read the rolling "
               "statistics", i);
      return EMBER_EINTERNAL;
    }
  }
  return 0;
}

/* The slot's record of its FORWARD's dropout key (a stage with dropout),
 * or NULL. */
static cnn_slot_pass *slot_pass(const cnn_task *t, uint8_t *state) {
  const cnn_layout *L = &t->layout;
  if (!L->pass_stride) return NULL;
  return (cnn_slot_pass *)(void *)(state + L->pass_off +
                                   t->slot * L->pass_stride);
}

static int run_forward(const cnn_task *t, uint8_t *state,
                       const acc_block *inputs, acc_mut_block *outputs,
                       size_t n_outputs, Ember__Cnn__Result *res, char *err,
                       size_t err_len) {
  const cnn_layout *L = &t->layout;
  const uint8_t *labels = L->last ? inputs[1].data : NULL;
  uint32_t classes = L->last ? cnn_net_classes(t->net) : 0;
  if (labels)
    for (uint32_t i = 0; i < t->batch; i++)
      if (labels[i] >= classes) {
        snprintf(err, err_len, "label %u of sample %u is not below %u",
                 labels[i], i, classes);
        return EMBER_EFORMAT;
      }
  float *tmp_in, *tmp_out = NULL;
  const float *in = floats_of(&inputs[0], &tmp_in);
  float *out = n_outputs ? (float *)(void *)outputs[0].data : NULL;
  if (L->last && !out) /* the probabilities, to count correct answers */
    out = tmp_out = malloc((size_t)L->out_elems * sizeof(float));
  cnn_cpu_stage *s = NULL;
  int rc = EMBER_ENOMEM;
  if (in && (out || !L->last)) rc = load_stage(t, state, &s, err, err_len);
  else snprintf(err, err_len, "out of memory");
  double loss = 0;
  cnn_pass pass = cnn_task_forward_pass(t, header(state)->updates);
  if (!rc) {
    rc = cnn_cpu_stage_forward_pass(s, in, out, labels,
                                    L->last ? &loss : NULL, &pass);
    if (rc) snprintf(err, err_len, "forward failed (%s)", ember_errname(rc));
  }
  if (!rc && pass.mode == CNN_MODE_TRAIN && t->batch_norm)
    rc = store_rolling(t, state, s, err, err_len);
  if (!rc && !t->inference) { /* kept for BACKWARD */
    memcpy(state + L->stash_off + t->slot * L->stash_stride, in,
           (size_t)L->in_elems * sizeof(float));
    if (labels)
      memcpy(state + L->labels_off + t->slot * L->labels_stride, labels,
             t->batch);
    cnn_slot_pass *sp = slot_pass(t, state);
    if (sp) *sp = (cnn_slot_pass){pass.seed, pass.step, pass.sample0, 0};
    header(state)->flags |= 1u << t->slot;
  }
  if (!rc && L->last) cnn_task_score(res, loss, out, labels, t->batch, classes);
  put_stage(t, s, rc);
  free(tmp_in);
  free(tmp_out);
  return rc;
}

static int run_backward(const cnn_task *t, uint8_t *state,
                        const acc_block *inputs, acc_mut_block *outputs,
                        size_t n_outputs, char *err, size_t err_len) {
  const cnn_layout *L = &t->layout;
  if (!(header(state)->flags & (1u << t->slot))) {
    snprintf(err, err_len, "BACKWARD on slot %u without a FORWARD there "
             "since INIT, SET_PARAMS or its last BACKWARD", t->slot);
    return EMBER_ESTATE;
  }
  float *tmp_dout = NULL;
  const float *dout = NULL;
  if (!L->last) {
    dout = floats_of(&inputs[0], &tmp_dout);
    if (!dout) {
      snprintf(err, err_len, "out of memory");
      return EMBER_ENOMEM;
    }
  }
  float *din = n_outputs ? (float *)(void *)outputs[0].data : NULL;
  size_t n;
  const cnn_layer *layers = cnn_net_layers(t->net, &n);
  uint64_t most = 0;
  for (uint32_t i = t->first; i < t->end; i++)
    if (cnn_layer_params(&layers[i]) > most)
      most = cnn_layer_params(&layers[i]);
  float *g = malloc((size_t)(most ? most : 1) * sizeof *g);
  cnn_cpu_stage *s = NULL;
  int rc = g ? load_stage(t, state, &s, err, err_len) : EMBER_ENOMEM;
  if (!g) snprintf(err, err_len, "out of memory");
  if (!rc) {
    const float *in = region(state, L->stash_off + t->slot * L->stash_stride);
    const uint8_t *labels =
        L->last ? state + L->labels_off + t->slot * L->labels_stride : NULL;
    cnn_pass pass = cnn_task_slot_pass(slot_pass(t, state));
    rc = cnn_cpu_stage_forward_pass(s, in, NULL, labels, NULL, &pass);
    if (!rc) rc = cnn_cpu_stage_backward(s, dout, din);
    if (rc) snprintf(err, err_len, "backward failed (%s)",
                     ember_errname(rc));
  }
  float *grads = region(state, L->grads_off);
  if (!rc) CNN_FOR_PARAM_LAYERS(t, layers, i, off) {
    rc = cnn_cpu_stage_get_layer_grads(s, i, g);
    if (rc) {
      snprintf(err, err_len, "layer %u: cannot read gradients", i);
      break;
    }
    uint64_t count = cnn_layer_params(&layers[i]);
    for (uint64_t k = 0; k < count; k++) grads[off + k] += g[k];
  }
  if (!rc) header(state)->flags &= ~(1u << t->slot);
  put_stage(t, s, rc);
  free(g);
  free(tmp_dout);
  return rc;
}

/* BACKWARD's output error from its pieces (cnn.proto error_channels:
 * per sample, piece j's run of pieces[j] x piece_unit floats after the
 * runs before it) or its addends (error_addends: summed in block order).
 * *joined is malloc'd; the caller frees it. */
static int join_error(const cnn_task *t, const acc_block *inputs,
                      float **joined, char *err, size_t err_len) {
  uint64_t total = t->layout.out_elems, per_sample = total / t->batch;
  float *all = malloc((size_t)total * sizeof *all);
  if (!all) {
    snprintf(err, err_len, "out of memory");
    return EMBER_ENOMEM;
  }
  if (t->n_addends) {
    memcpy(all, inputs[0].data, (size_t)total * sizeof *all);
    for (uint32_t j = 1; j < t->n_addends; j++) {
      const float *x = (const float *)inputs[j].data;
      for (uint64_t i = 0; i < total; i++) all[i] += x[i];
    }
    *joined = all;
    return 0;
  }
  uint64_t at = 0;
  for (uint32_t j = 0; j < t->n_pieces; j++) {
    uint64_t run = t->pieces[j] * t->piece_unit;
    for (uint32_t b = 0; b < t->batch; b++)
      memcpy(all + b * per_sample + at,
             inputs[j].data + b * run * sizeof *all,
             (size_t)run * sizeof *all);
    at += run;
  }
  *joined = all;
  return 0;
}

int cnn_task_run(const cnn_task *t, uint8_t *state, const acc_block *inputs,
                 size_t n_inputs, acc_mut_block *outputs, size_t n_outputs,
                 const atomic_int *cancel, Ember__Cnn__Result *res,
                 char *err, size_t err_len) {
  (void)n_inputs;
  if (canceled(cancel)) {
    snprintf(err, err_len, "canceled");
    return EMBER_ECANCELED;
  }
  if ((uintptr_t)state % sizeof(float)) {
    snprintf(err, err_len, "state block not aligned for floats");
    return EMBER_EINTERNAL;
  }
  size_t n;
  const cnn_layer *layers = cnn_net_layers(t->net, &n);
  const cnn_layout *L = &t->layout;
  float *p = region(state, L->params_off);
  size_t pbytes = (size_t)L->params * sizeof(float);
  int rc = 0;
  if (t->op != EMBER__CNN__OP__INIT && t->op != EMBER__CNN__OP__SET_PARAMS) {
    rc = cnn_task_check_stamp(t, header(state), err, err_len);
    if (rc) return rc;
  }
  switch (t->op) {
  case EMBER__CNN__OP__INIT:
    memset(state, 0, (size_t)L->total);
    cnn_task_stamp(t, header(state));
    cnn_task_init_params(t, p);
    break;
  case EMBER__CNN__OP__SET_PARAMS:
    memset(state, 0, (size_t)L->total);
    cnn_task_stamp(t, header(state));
    memcpy(p, inputs[0].data, pbytes);
    break;
  case EMBER__CNN__OP__GET_PARAMS:
    if (n_outputs) memcpy(outputs[0].data, p, pbytes);
    break;
  case EMBER__CNN__OP__UPDATE: {
    float *v = region(state, L->momentum_off), *g = region(state, L->grads_off);
    float scale = 1.0f / (float)t->accumulated;
    if (L->icp || L->ocp) { /* a slice: its weights, then its biases */
      sgd(p, v, g, L->weights, scale, (float)t->learning_rate,
          (float)t->momentum, (float)t->decay);
      sgd(p + L->weights, v + L->weights, g + L->weights, L->biases, scale,
          (float)t->learning_rate, (float)t->momentum, 0.0f);
    } else CNN_FOR_PARAM_LAYERS(t, layers, i, off) {
      /* weights with decay; biases and scales without; not the rolling
       * statistics */
      uint64_t w = layers[i].weights;
      sgd(p + off, v + off, g + off, w, scale, (float)t->learning_rate,
          (float)t->momentum, (float)t->decay);
      sgd(p + off + w, v + off + w, g + off + w,
          layers[i].biases + layers[i].scales, scale,
          (float)t->learning_rate, (float)t->momentum, 0.0f);
    }
    header(state)->updates++;
    break;
  }
  case EMBER__CNN__OP__FORWARD:
    if (L->icp)
      rc = cnn_icp_forward(t, state, inputs, outputs, n_outputs, err,
                           err_len);
    else if (L->ocp)
      rc = cnn_ocp_forward(t, state, inputs, outputs, n_outputs, err,
                           err_len);
    else
      rc = run_forward(t, state, inputs, outputs, n_outputs, res, err,
                       err_len);
    break;
  case EMBER__CNN__OP__BACKWARD: {
    float *joined = NULL;
    acc_block one;
    if (t->n_pieces || t->n_addends) {
      rc = join_error(t, inputs, &joined, err, err_len);
      if (rc) return rc;
      one = (acc_block){(const uint8_t *)joined,
                        (size_t)L->out_elems * sizeof(float)};
      inputs = &one;
    }
    if (L->icp)
      rc = cnn_icp_backward(t, state, inputs, outputs, n_outputs, err,
                            err_len);
    else if (L->ocp)
      rc = cnn_ocp_backward(t, state, inputs, outputs, n_outputs, err,
                            err_len);
    else
      rc = run_backward(t, state, inputs, outputs, n_outputs, err,
                        err_len);
    free(joined);
    break;
  }
  default:
    snprintf(err, err_len, "unknown op %d", (int)t->op);
    return EMBER_EINTERNAL;
  }
  if (!rc) {
    res->has_updates = 1;
    res->updates = header(state)->updates;
  }
  return rc;
}
