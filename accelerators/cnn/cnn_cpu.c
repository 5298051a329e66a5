/* cnn_cpu.c - running a oneDNN stage built by cnn_cpu_build.c: forward,
 * backward, the SGD update and the parameters in canonical layouts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_cpu_internal.h"

size_t cpu_mem_size(const_dnnl_memory_t m) {
  const dnnl_memory_desc_t *md;
  dnnl_memory_get_memory_desc(m, &md);
  return dnnl_memory_desc_get_size(md);
}

float *cpu_mem_data(const_dnnl_memory_t m) {
  void *p = NULL;
  dnnl_memory_get_data_handle(m, &p);
  return p;
}

/* Run p with its arguments and the stage's scratch (cnn_cpu_internal.h:
 * every primitive of the stage is created for it; one that needs none
 * ignores it). */
static int exec_with(cnn_cpu_stage *s, dnnl_primitive_t p, int nargs,
                     const dnnl_exec_arg_t *args, dnnl_memory_t scratch) {
  dnnl_exec_arg_t all[CPU_STEP_MAX_ARGS + 1];
  if (nargs < 0 || nargs > CPU_STEP_MAX_ARGS) return EMBER_EINTERNAL;
  for (int i = 0; i < nargs; i++) all[i] = args[i];
  all[nargs] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, scratch};
  return dnnl_primitive_execute(p, s->stream, nargs + 1, all) ==
                 dnnl_success
             ? 0
             : EMBER_EPLATFORM;
}

static int exec(cnn_cpu_stage *s, dnnl_primitive_t p, int nargs,
                const dnnl_exec_arg_t *args) {
  return exec_with(s, p, nargs, args, s->scratch);
}

static int exec_reorder(cnn_cpu_stage *s, dnnl_primitive_t p,
                        dnnl_memory_t from, dnnl_memory_t to) {
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
  return exec(s, p, 2, args);
}

int cpu_run_steps(cnn_cpu_stage *s, cpu_step *steps, size_t n) {
  for (size_t i = 0; i < n; i++) {
    cpu_step *st = &steps[i];
    if (st->accumulates && s->grads_zero) continue;
    if (!(st->modes & (1u << s->pass.mode))) continue;
    if (st->fn) {
      st->fn(s, st->layer);
    } else if (exec(s, st->prim, st->nargs, st->args)) {
      return EMBER_EPLATFORM;
    }
  }
  return 0;
}

void cpu_xent_grad(cnn_cpu_stage *s, cpu_layer *l) {
  (void)l;
  const float *p = cpu_mem_data(s->out_plain);
  float *d = cpu_mem_data(s->xent_plain);
  size_t k = s->classes;
  float scale = 1.0f / (float)s->batch;
  for (size_t n = 0; n < s->batch; n++)
    for (size_t c = 0; c < k; c++)
      d[n * k + c] =
          (p[n * k + c] - (c == s->labels[n] ? 1.0f : 0.0f)) * scale;
}

void cpu_dropout_mask(cnn_cpu_stage *s, cpu_layer *l) {
  float *m = cpu_mem_data(l->mask);
  size_t k = (size_t)l->l.in.h * l->l.in.w * l->l.in.c;
  const cnn_pass *p = &s->pass;
  uint32_t below = cnn_dropout_threshold(l->l.probability);
  float scale = cnn_dropout_scale(l->l.probability);
  for (size_t n = 0; n < s->batch; n++)
    for (size_t e = 0; e < k; e++) {
      float v = 1.0f;
      if (p->mode != CNN_MODE_INFER)
        v = cnn_dropout_bits(p->seed, p->step, (uint32_t)l->index,
                             p->sample0 + (uint32_t)n, (uint32_t)e) < below
                ? 0.0f
                : scale;
      m[n * k + e] = v;
    }
}

uint32_t cnn_cpu_stage_batch(const cnn_cpu_stage *s) {
  return s->batch;
}

cnn_shape cnn_cpu_stage_input(const cnn_cpu_stage *s) {
  return s->layers[0].l.in;
}

cnn_shape cnn_cpu_stage_output(const cnn_cpu_stage *s) {
  return s->layers[s->count - 1].l.out;
}

/* The caller's buffers stand in for the stage's boundary memories where
 * a reorder reads or writes them anyway, so that NCHW in and out costs one
 * pass, not a copy and a pass; the stage's own buffers are put back before
 * returning. */
static void *swap_handle(dnnl_memory_t m, const void *p) {
  void *own = cpu_mem_data(m);
  dnnl_memory_set_data_handle(m, (void *)(uintptr_t)p);
  return own;
}

int cnn_cpu_stage_forward(cnn_cpu_stage *s, const float *in, float *out,
                          const uint8_t *labels, double *loss) {
  const cnn_pass train = {CNN_MODE_TRAIN, 0, 0, 0};
  return cnn_cpu_stage_forward_pass(s, in, out, labels, loss, &train);
}

int cnn_cpu_stage_forward_pass(cnn_cpu_stage *s, const float *in, float *out,
                               const uint8_t *labels, double *loss,
                               const cnn_pass *pass) {
  if (!s || !in || !pass || (labels && !s->softmax) ||
      (unsigned)pass->mode > CNN_MODE_INFER)
    return EMBER_EINVAL;
  s->pass = *pass;
  if (labels)
    for (size_t n = 0; n < s->batch; n++)
      if (labels[n] >= s->classes) return EMBER_EINVAL;
  dnnl_memory_t t0 = s->t[0].mem, last = s->t[s->count].mem;
  void *own_in = NULL, *own_out = NULL;
  if (s->keep_input)
    memcpy(cpu_mem_data(t0), in, cpu_mem_size(t0));
  else
    own_in = swap_handle(t0, in);
  /* the softmax's probabilities stay for the loss's gradient */
  bool direct_out = out && s->out_reo && !s->softmax;
  if (direct_out) own_out = swap_handle(s->out_plain, out);
  int rc = cpu_run_steps(s, s->fwd, s->nfwd);
  if (!rc && s->out_reo) rc = exec_reorder(s, s->out_reo, last, s->out_plain);
  if (!rc && dnnl_stream_wait(s->stream) != dnnl_success) rc = EMBER_EPLATFORM;
  if (own_in) dnnl_memory_set_data_handle(t0, own_in);
  if (own_out) dnnl_memory_set_data_handle(s->out_plain, own_out);
  if (rc) return rc;
  const float *p = cpu_mem_data(s->out_plain);
  if (out && !direct_out) memcpy(out, p, cpu_mem_size(s->out_plain));
  s->have_labels = labels != NULL;
  if (labels) {
    memcpy(s->labels, labels, s->batch);
    double sum = 0;
    for (size_t n = 0; n < s->batch; n++) {
      double q = p[n * s->classes + labels[n]];
      sum -= log(q > 0 ? q : 1e-45);
    }
    if (loss) *loss = sum / s->batch;
  }
  return 0;
}

int cnn_cpu_stage_backward(cnn_cpu_stage *s, const float *dout, float *din) {
  if (!s || (din && !s->eb_in)) return EMBER_EINVAL;
  if (s->softmax ? !s->have_labels : !dout) return EMBER_EINVAL;
  void *own_dout = NULL, *own_din = NULL;
  int rc = 0;
  if (!s->softmax && s->dout_reo) {
    own_dout = swap_handle(s->dout_plain, dout);
    rc = exec_reorder(s, s->dout_reo, s->dout_plain, s->t[s->count].diff);
  } else if (!s->softmax) {
    memcpy(cpu_mem_data(s->dout_plain), dout, cpu_mem_size(s->dout_plain));
  }
  /* PG writes the accumulated gradients themselves when they are zero */
  for (size_t j = 0; j < s->count; j++) {
    cpu_layer *l = &s->layers[j];
    if (!l->w) continue;
    dnnl_exec_arg_t *a = s->bwd[l->pg_step].args;
    a[2].memory = s->grads_zero ? l->gw : l->gw_new;
    if (l->l.batch_norm) { /* the normalisation's shift and scale */
      a = s->bwd[l->bn_step].args;
      a[6].memory = s->grads_zero ? l->gs : l->gs_new;
      a[7].memory = s->grads_zero ? l->gb : l->gb_new;
    } else {
      a[3].memory = s->grads_zero ? l->gb : l->gb_new;
    }
  }
  /* layer 0's backward writes the whole of t[0]'s error, once */
  if (din) own_din = swap_handle(s->t[0].diff, din);
  for (size_t j = s->count; !rc && j-- > 0;) {
    cpu_layer *l = &s->layers[j];
    rc = cpu_run_steps(s, s->bwd + l->bwd_first, l->bwd_count);
  }
  if (!rc && dnnl_stream_wait(s->stream) != dnnl_success) rc = EMBER_EPLATFORM;
  if (own_dout) dnnl_memory_set_data_handle(s->dout_plain, own_dout);
  if (own_din) dnnl_memory_set_data_handle(s->t[0].diff, own_din);
  if (!rc) s->grads_zero = false;
  return rc;
}

static void sgd(float *w, float *v, const float *g, size_t n, float lr,
                float momentum, float decay) {
  for (size_t i = 0; i < n; i++) {
    v[i] = momentum * v[i] + g[i] + decay * w[i];
    w[i] -= lr * v[i];
  }
}

int cnn_cpu_stage_update(cnn_cpu_stage *s, double learning_rate,
                         double momentum, double decay) {
  if (!s) return EMBER_EINVAL;
  for (size_t j = 0; j < s->count; j++) {
    cpu_layer *l = &s->layers[j];
    if (!l->w) continue;
    if (l->gw_to_fwd && exec_reorder(s, l->gw_to_fwd, l->gw, l->gw_fwd))
      return EMBER_EPLATFORM;
    if (dnnl_stream_wait(s->stream) != dnnl_success) return EMBER_EPLATFORM;
    /* padded blocks hold zeros in w, v and g alike, and keep them */
    sgd(cpu_mem_data(l->w), cpu_mem_data(l->vw), cpu_mem_data(l->gw_fwd),
        cpu_mem_size(l->w) / sizeof(float), (float)learning_rate,
        (float)momentum, (float)decay);
    sgd(cpu_mem_data(l->b), cpu_mem_data(l->vb), cpu_mem_data(l->gb),
        cpu_mem_size(l->b) / sizeof(float), (float)learning_rate,
        (float)momentum, 0.0f);
    memset(cpu_mem_data(l->gw), 0, cpu_mem_size(l->gw));
    memset(cpu_mem_data(l->gb), 0, cpu_mem_size(l->gb));
    if (l->scale) { /* scales as biases: no decay */
      sgd(cpu_mem_data(l->scale), cpu_mem_data(l->vs), cpu_mem_data(l->gs),
          l->l.scales, (float)learning_rate, (float)momentum, 0.0f);
      memset(cpu_mem_data(l->gs), 0, cpu_mem_size(l->gs));
    }
    if (l->w_to_bd && exec_reorder(s, l->w_to_bd, l->w, l->w_bd))
      return EMBER_EPLATFORM;
  }
  s->grads_zero = true;
  return dnnl_stream_wait(s->stream) == dnnl_success ? 0 : EMBER_EPLATFORM;
}

void cnn_cpu_stage_zero_grads(cnn_cpu_stage *s) { s->grads_zero = true; }

static cpu_layer *find_layer(cnn_cpu_stage *s, size_t layer) {
  if (!s || layer < s->first || layer >= s->first + s->count) return NULL;
  cpu_layer *l = &s->layers[layer - s->first];
  return l->w ? l : NULL;
}

/* Copy between a canonical buffer (weights in w_canon_md, biases plain)
 * and the stage's memories w and b, either way. */
static int copy_params(cnn_cpu_stage *s, cpu_layer *l, dnnl_memory_t w,
                       dnnl_memory_t b, float *wbuf, float *bbuf,
                       bool to_stage) {
  dnnl_memory_t canon;
  if (dnnl_memory_create(&canon, &l->w_canon_md, s->engine, wbuf) !=
      dnnl_success)
    return EMBER_ENOMEM;
  const dnnl_memory_desc_t *smd, *dmd;
  dnnl_memory_get_memory_desc(to_stage ? canon : w, &smd);
  dnnl_memory_get_memory_desc(to_stage ? w : canon, &dmd);
  dnnl_primitive_desc_t pd;
  dnnl_primitive_t p = NULL;
  dnnl_memory_t scratch = s->scratch, own = NULL;
  void *own_buf = NULL;
  int rc = EMBER_EPLATFORM;
  if (dnnl_reorder_primitive_desc_create(&pd, smd, s->engine, dmd, s->engine,
                                         s->attr) == dnnl_success) {
    /* a reorder that asks for more scratch than the stage has gets its
     * own (plain reorders of weights ask for none) */
    const dnnl_memory_desc_t *scr =
        dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    size_t need = scr ? dnnl_memory_desc_get_size(scr) : 0;
    if (need > s->scratch_size) {
      own_buf = need <= CNN_CPU_MAX_SCRATCH_BYTES
                    ? aligned_alloc(64, (need + 63) & ~(size_t)63)
                    : NULL;
      if (own_buf &&
          dnnl_memory_create(&own, scr, s->engine, own_buf) == dnnl_success)
        scratch = own;
      else
        rc = EMBER_ENOMEM;
    }
    if (rc != EMBER_ENOMEM && dnnl_primitive_create(&p, pd) == dnnl_success) {
      dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, to_stage ? canon : w},
                                 {DNNL_ARG_TO, to_stage ? w : canon}};
      rc = exec_with(s, p, 2, args, scratch);
    }
    dnnl_primitive_desc_destroy(pd);
  }
  if (!rc && dnnl_stream_wait(s->stream) != dnnl_success) rc = EMBER_EPLATFORM;
  if (p) dnnl_primitive_destroy(p);
  if (own) dnnl_memory_destroy(own);
  free(own_buf);
  dnnl_memory_destroy(canon);
  /* biases are plain vectors in every layout oneDNN picks for them */
  size_t nb = l->l.biases * sizeof(float);
  if (!rc && to_stage) memcpy(cpu_mem_data(b), bbuf, nb);
  if (!rc && !to_stage) memcpy(bbuf, cpu_mem_data(b), nb);
  return rc;
}

int cnn_cpu_stage_get_params(cnn_cpu_stage *s, size_t layer, float *weights,
                             float *biases) {
  cpu_layer *l = find_layer(s, layer);
  if (!l || !weights || !biases) return EMBER_EINVAL;
  return copy_params(s, l, l->w, l->b, weights, biases, false);
}

int cnn_cpu_stage_set_params(cnn_cpu_stage *s, size_t layer,
                             const float *weights, const float *biases) {
  cpu_layer *l = find_layer(s, layer);
  if (!l || !weights || !biases) return EMBER_EINVAL;
  /* the reorder only reads the caller's buffer */
  int rc = copy_params(s, l, l->w, l->b, (float *)(uintptr_t)weights,
                       (float *)(uintptr_t)biases, true);
  if (!rc && l->w_to_bd && exec_reorder(s, l->w_to_bd, l->w, l->w_bd))
    rc = EMBER_EPLATFORM;
  if (!rc && dnnl_stream_wait(s->stream) != dnnl_success) rc = EMBER_EPLATFORM;
  return rc;
}

int cnn_cpu_stage_get_grads(cnn_cpu_stage *s, size_t layer, float *weights,
                            float *biases) {
  cpu_layer *l = find_layer(s, layer);
  if (!l || !weights || !biases) return EMBER_EINVAL;
  if (s->grads_zero) {
    memset(weights, 0, l->l.weights * sizeof *weights);
    memset(biases, 0, l->l.biases * sizeof *biases);
    return 0;
  }
  return copy_params(s, l, l->gw, l->gb, weights, biases, false);
}

/* The batch-normalized layer of network index layer, or NULL. */
static cpu_layer *norm_layer(cnn_cpu_stage *s, size_t layer) {
  cpu_layer *l = find_layer(s, layer);
  return l && l->scale ? l : NULL;
}

int cnn_cpu_stage_set_norm(cnn_cpu_stage *s, size_t layer,
                           const float *scales, const float *rolling) {
  cpu_layer *l = norm_layer(s, layer);
  if (!l || !scales || !rolling) return EMBER_EINVAL;
  size_t n = l->l.scales * sizeof(float);
  memcpy(cpu_mem_data(l->scale), scales, n);
  memcpy(cpu_mem_data(l->rmean), rolling, n);
  memcpy(cpu_mem_data(l->rvar), rolling + l->l.scales, n);
  return 0;
}

int cnn_cpu_stage_get_norm(cnn_cpu_stage *s, size_t layer, float *scales,
                           float *rolling) {
  cpu_layer *l = norm_layer(s, layer);
  if (!l || !scales || !rolling) return EMBER_EINVAL;
  size_t n = l->l.scales * sizeof(float);
  memcpy(scales, cpu_mem_data(l->scale), n);
  memcpy(rolling, cpu_mem_data(l->rmean), n);
  memcpy(rolling + l->l.scales, cpu_mem_data(l->rvar), n);
  return 0;
}

int cnn_cpu_stage_get_norm_grads(cnn_cpu_stage *s, size_t layer,
                                 float *scales) {
  cpu_layer *l = norm_layer(s, layer);
  if (!l || !scales) return EMBER_EINVAL;
  if (s->grads_zero)
    memset(scales, 0, l->l.scales * sizeof *scales);
  else
    memcpy(scales, cpu_mem_data(l->gs), l->l.scales * sizeof *scales);
  return 0;
}

int cnn_cpu_stage_set_layer(cnn_cpu_stage *s, size_t layer,
                            const float *params) {
  cpu_layer *l = find_layer(s, layer);
  if (!l || !params) return EMBER_EINVAL;
  const float *b = params + l->l.weights;
  int rc = cnn_cpu_stage_set_params(s, layer, params, b);
  if (!rc && l->scale)
    rc = cnn_cpu_stage_set_norm(s, layer, b + l->l.biases,
                                b + l->l.biases + l->l.scales);
  return rc;
}

int cnn_cpu_stage_get_layer(cnn_cpu_stage *s, size_t layer, float *params) {
  cpu_layer *l = find_layer(s, layer);
  if (!l || !params) return EMBER_EINVAL;
  float *b = params + l->l.weights;
  int rc = cnn_cpu_stage_get_params(s, layer, params, b);
  if (!rc && l->scale)
    rc = cnn_cpu_stage_get_norm(s, layer, b + l->l.biases,
                                b + l->l.biases + l->l.scales);
  return rc;
}

int cnn_cpu_stage_get_layer_grads(cnn_cpu_stage *s, size_t layer,
                                  float *grads) {
  cpu_layer *l = find_layer(s, layer);
  if (!l || !grads) return EMBER_EINVAL;
  float *b = grads + l->l.weights;
  int rc = cnn_cpu_stage_get_grads(s, layer, grads, b);
  if (!rc && l->scale) {
    rc = cnn_cpu_stage_get_norm_grads(s, layer, b + l->l.biases);
    memset(b + l->l.biases + l->l.scales, 0,
           l->l.rolling * sizeof *grads);
  }
  return rc;
}

const char *cnn_cpu_stage_impl(const cnn_cpu_stage *s, size_t layer) {
  if (!s || layer < s->first || layer >= s->first + s->count) return "";
  return s->layers[layer - s->first].impl;
}
