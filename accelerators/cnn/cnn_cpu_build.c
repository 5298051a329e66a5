/* cnn_cpu_build.c - building a oneDNN stage: its tensors, parameters,
 * primitives (created once here) and the forward and backward lists of
 * steps that cnn_cpu.c runs. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cnn_cpu_internal.h"

typedef struct build {
  cnn_cpu_stage *s;
  char *err;
  size_t err_len;
  size_t layer;        /* the net's index of the layer being built */
} build;

static int fail(build *b, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(build *b, int code, const char *fmt, ...) {
  if (b->err && b->err_len) {
    int n = snprintf(b->err, b->err_len, "layer %zu: ", b->layer);
    if (n >= 0 && (size_t)n < b->err_len) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(b->err + n, b->err_len - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return code;
}

static int dnnl_fail(build *b, dnnl_status_t st, const char *what) {
  if (st == dnnl_out_of_memory) return fail(b, EMBER_ENOMEM, "%s: out of memory", what);
  if (st == dnnl_unimplemented)
    return fail(b, EMBER_EPARAM, "%s: oneDNN has no implementation", what);
  return fail(b, EMBER_EPLATFORM, "%s: oneDNN status %d", what, (int)st);
}

#define DN(call, what)                                                       \
  do {                                                                       \
    dnnl_status_t st_ = (call);                                              \
    if (st_ != dnnl_success) return dnnl_fail(b, st_, what);                 \
  } while (0)

#define TRY(call)                                                            \
  do {                                                                       \
    int rc_ = (call);                                                        \
    if (rc_) return rc_;                                                     \
  } while (0)

static int grow(build *b, void **arr, size_t *cap, size_t n, size_t elem) {
  if (n < *cap) return 0;
  size_t nc = *cap ? *cap * 2 : 16;
  void *p = realloc(*arr, nc * elem);
  if (!p) return fail(b, EMBER_ENOMEM, "out of memory");
  *arr = p;
  *cap = nc;
  return 0;
}

/* A zeroed buffer of size bytes (a multiple of 64), 64-byte aligned as
 * oneDNN's own (cpu_buf), or NULL. */
static void *buf_alloc(size_t size) {
  if (size >= CPU_MMAP_MIN) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;  /* zero pages */
  }
  void *p = aligned_alloc(64, size);
  if (p) memset(p, 0, size);
  return p;
}

static void buf_free(cpu_buf b) {
  if (b.size >= CPU_MMAP_MIN)
    munmap(b.p, b.size);
  else
    free(b.p);
}

/* A memory of md owned by the stage, zeroed, on a buffer of the stage's. */
static int new_mem(build *b, const dnnl_memory_desc_t *md, dnnl_memory_t *m) {
  cnn_cpu_stage *s = b->s;
  TRY(grow(b, (void **)&s->mems, &s->cap_mems, s->nmems, sizeof *s->mems));
  TRY(grow(b, (void **)&s->bufs, &s->cap_bufs, s->nmems, sizeof *s->bufs));
  size_t size = (dnnl_memory_desc_get_size(md) + 63) & ~(size_t)63;
  cpu_buf buf = {buf_alloc(size ? size : 64), size ? size : 64};
  if (!buf.p) return fail(b, EMBER_ENOMEM, "out of memory");
  if (dnnl_memory_create(m, md, s->engine, buf.p) != dnnl_success) {
    buf_free(buf);
    return fail(b, EMBER_EPLATFORM, "memory_create failed");
  }
  s->bufs[s->nmems] = buf;
  s->mems[s->nmems++] = *m;
  s->bytes += buf.size;
  return 0;
}

/* A primitive of pd owned by the stage; its implementation's name is
 * appended to the layer's. pd is destroyed. */
static int new_prim(build *b, dnnl_primitive_desc_t pd, cpu_layer *l,
                    dnnl_primitive_t *p) {
  cnn_cpu_stage *s = b->s;
  int rc = grow(b, (void **)&s->prims, &s->cap_prims, s->nprims,
                sizeof *s->prims);
  /* the stage's scratch serves every primitive: the largest one's size */
  const dnnl_memory_desc_t *smd =
      dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
  size_t scratch = smd ? dnnl_memory_desc_get_size(smd) : 0;
  if (!rc && scratch > CNN_CPU_MAX_SCRATCH_BYTES) {
    const char *name = NULL;
    dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name);
    rc = fail(b, EMBER_ETOOBIG, "oneDNN's %s asks for %zu bytes of "
              "scratch, more than a stage's %llu", name ? name : "primitive",
              scratch, (unsigned long long)CNN_CPU_MAX_SCRATCH_BYTES);
  }
  if (!rc && scratch > s->scratch_size) s->scratch_size = scratch;
  dnnl_status_t st = rc ? dnnl_success : dnnl_primitive_create(p, pd);
  if (!rc && st == dnnl_success && l) {
    const char *name = NULL;
    if (dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &name) ==
            dnnl_success && name) {
      size_t n = strlen(l->impl);
      snprintf(l->impl + n, sizeof l->impl - n, "%s%s", n ? " " : "", name);
    }
  }
  dnnl_primitive_desc_destroy(pd);
  if (rc) return rc;
  if (st != dnnl_success) return dnnl_fail(b, st, "primitive_create");
  s->prims[s->nprims++] = *p;
  return 0;
}

/* Append a step to a list. */
static int add_step(build *b, bool backward, dnnl_primitive_t prim,
                    void (*fn)(cnn_cpu_stage *, cpu_layer *), cpu_layer *l,
                    int nargs, const dnnl_exec_arg_t *args) {
  cnn_cpu_stage *s = b->s;
  cpu_step **list = backward ? &s->bwd : &s->fwd;
  size_t *n = backward ? &s->nbwd : &s->nfwd;
  size_t *cap = backward ? &s->cap_bwd : &s->cap_fwd;
  TRY(grow(b, (void **)list, cap, *n, sizeof **list));
  cpu_step *st = &(*list)[(*n)++];
  memset(st, 0, sizeof *st);
  st->prim = prim;
  st->fn = fn;
  st->layer = l;
  st->modes = ~0u;
  st->nargs = nargs;
  for (int i = 0; i < nargs; i++) st->args[i] = args[i];
  if (backward && l) l->bwd_count++;
  return 0;
}

/* A step dst = ka dst + kb src by oneDNN's sum, in place (its first
 * source is its destination); what names it in errors. */
static int add_sum(build *b, bool backward, cpu_layer *l, dnnl_memory_t dst,
                   dnnl_memory_t src, float ka, float kb, const char *what) {
  const dnnl_memory_desc_t *md;
  dnnl_memory_get_memory_desc(dst, &md);
  const dnnl_memory_desc_t srcs[2] = {*md, *md};
  const float scales[2] = {ka, kb};
  dnnl_primitive_desc_t pd;
  DN(dnnl_sum_primitive_desc_create(&pd, md, 2, scales, srcs, b->s->attr,
                                    b->s->engine),
     what);
  dnnl_primitive_t p;
  TRY(new_prim(b, pd, NULL, &p));
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_MULTIPLE_SRC, dst},
                             {DNNL_ARG_MULTIPLE_SRC + 1, src},
                             {DNNL_ARG_DST, dst}};
  return add_step(b, backward, p, NULL, l, 3, args);
}

/* A backward step acc += add, skipped while the accumulated gradients are
 * zero. */
static int add_accumulate(build *b, cpu_layer *l, dnnl_memory_t acc,
                          dnnl_memory_t add) {
  TRY(add_sum(b, true, l, acc, add, 1.0f, 1.0f, "gradient sum"));
  b->s->bwd[b->s->nbwd - 1].accumulates = true;
  return 0;
}

/* A reorder from memory src to memory dst, created now: as a step when
 * list is 0 (forward) or 1 (backward), or returned in *out when list < 0. */
static int reorder(build *b, dnnl_memory_t src, dnnl_memory_t dst, int list,
                   cpu_layer *l, dnnl_primitive_t *out) {
  const dnnl_memory_desc_t *smd, *dmd;
  dnnl_memory_get_memory_desc(src, &smd);
  dnnl_memory_get_memory_desc(dst, &dmd);
  dnnl_primitive_desc_t pd;
  DN(dnnl_reorder_primitive_desc_create(&pd, smd, b->s->engine, dmd,
                                        b->s->engine, b->s->attr),
     "reorder");
  dnnl_primitive_t p;
  TRY(new_prim(b, pd, NULL, &p));
  if (out) *out = p;
  if (list < 0) return 0;
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
  return add_step(b, list == 1, p, NULL, l, 2, args);
}

static void dims_of(uint32_t batch, cnn_shape s, int ndims, dnnl_dims_t d) {
  d[0] = batch;
  if (ndims == 2) {
    d[1] = (dnnl_dim_t)s.c * s.h * s.w;
  } else {
    d[1] = s.c;
    d[2] = s.h;
    d[3] = s.w;
  }
}

static int plain_md(build *b, int ndims, const dnnl_dims_t d,
                    dnnl_memory_desc_t *md) {
  DN(dnnl_memory_desc_init_by_tag(md, ndims, d, dnnl_f32,
                                  ndims == 2 ? dnnl_nc : dnnl_nchw),
     "memory_desc");
  return 0;
}

/* The input of layer j as its forward primitive wants it: t[j] itself,
 * or a copy (the activation kept for PG) with a reorder. */
static int link_input(build *b, size_t j, const dnnl_memory_desc_t *want,
                      dnnl_memory_t *src) {
  cpu_tensor *t = &b->s->t[j];
  if (dnnl_memory_desc_equal(want, &t->md)) {
    *src = t->mem;
    return 0;
  }
  TRY(new_mem(b, want, src));
  return reorder(b, t->mem, *src, 0, &b->s->layers[j], NULL);
}

/* m (of layout have) in layout want for a backward primitive: m itself, or
 * a copy made by a backward step. */
static int as_layout(build *b, size_t j, dnnl_memory_t m,
                     const dnnl_memory_desc_t *want, dnnl_memory_t *out) {
  const dnnl_memory_desc_t *have;
  dnnl_memory_get_memory_desc(m, &have);
  if (dnnl_memory_desc_equal(want, have)) {
    *out = m;
    return 0;
  }
  TRY(new_mem(b, want, out));
  return reorder(b, m, *out, 1, &b->s->layers[j], NULL);
}

static const dnnl_memory_desc_t *query(const_dnnl_primitive_desc_t pd,
                                       dnnl_query_t what) {
  return dnnl_primitive_desc_query_md(pd, what, 0);
}

/* The output tensor t[j+1] in layout md. */
static int make_output(build *b, size_t j, const dnnl_memory_desc_t *md) {
  cpu_tensor *t = &b->s->t[j + 1];
  t->md = *md;
  TRY(new_mem(b, md, &t->mem));
  return new_mem(b, md, &t->diff);
}

/* The activation's eltwise algorithm (the backward from the output) and
 * alpha. */
static dnnl_alg_kind_t act_alg(cnn_activation act, float *alpha) {
  *alpha = act == CNN_ACT_LEAKY ? (float)CNN_LEAKY_SLOPE : 0.f;
  return act == CNN_ACT_LOGISTIC ? dnnl_eltwise_logistic_use_dst_for_bwd
                                 : dnnl_eltwise_relu_use_dst_for_bwd;
}

/* The activation in place on t[j+1]; its backward step from t[j+1].diff
 * into *dz is added by the caller's order: see act_backward. */
static int act_forward(build *b, size_t j, dnnl_primitive_desc_t *fwd_pd) {
  cnn_cpu_stage *s = b->s;
  cpu_tensor *t = &s->t[j + 1];
  float alpha;
  dnnl_alg_kind_t alg = act_alg(s->layers[j].l.act, &alpha);
  dnnl_eltwise_desc_t d;
  DN(dnnl_eltwise_forward_desc_init(&d, dnnl_forward_training, alg, &t->md,
                                    alpha, 0.f),
     "activation forward");
  DN(dnnl_primitive_desc_create(fwd_pd, &d, s->attr, s->engine, NULL),
     "activation forward");
  dnnl_primitive_desc_t keep;
  DN(dnnl_primitive_desc_clone(&keep, *fwd_pd), "activation forward");
  dnnl_primitive_t p;
  TRY(new_prim(b, keep, &s->layers[j], &p));
  dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, t->mem}, {DNNL_ARG_DST, t->mem}};
  return add_step(b, false, p, NULL, &s->layers[j], 2, args);
}

static int act_backward(build *b, size_t j, const_dnnl_primitive_desc_t hint,
                        dnnl_memory_t *dz) {
  cnn_cpu_stage *s = b->s;
  cpu_tensor *t = &s->t[j + 1];
  float alpha;
  dnnl_alg_kind_t alg = act_alg(s->layers[j].l.act, &alpha);
  dnnl_eltwise_desc_t d;
  DN(dnnl_eltwise_backward_desc_init(&d, alg, &t->md, &t->md, alpha, 0.f),
     "activation backward");
  dnnl_primitive_desc_t pd;
  DN(dnnl_primitive_desc_create(&pd, &d, s->attr, s->engine, hint),
     "activation backward");
  dnnl_primitive_t p;
  TRY(new_prim(b, pd, NULL, &p));
  TRY(new_mem(b, &t->md, dz));
  dnnl_exec_arg_t args[3] = {{DNNL_ARG_DST, t->mem},
                             {DNNL_ARG_DIFF_DST, t->diff},
                             {DNNL_ARG_DIFF_SRC, *dz}};
  return add_step(b, true, p, NULL, &s->layers[j], 3, args);
}

/* A plain vector of n floats. */
static int vec_mem(build *b, dnnl_dim_t n, dnnl_memory_t *m) {
  dnnl_memory_desc_t md;
  dnnl_dims_t d = {n};
  DN(dnnl_memory_desc_init_by_tag(&md, 1, d, dnnl_f32, dnnl_a),
     "memory_desc");
  return new_mem(b, &md, m);
}

/* A forward step (of the passes in modes) dst = ka dst + kb src: the
 * rolling statistics' update. */
static int add_blend(build *b, cpu_layer *l, dnnl_memory_t dst,
                     dnnl_memory_t src, float ka, float kb, unsigned modes) {
  TRY(add_sum(b, false, l, dst, src, ka, kb, "rolling statistics"));
  b->s->fwd[b->s->nfwd - 1].modes = modes;
  return 0;
}

#define MODE(m) (1u << (m))
#define MODES_TRAINING (MODE(CNN_MODE_TRAIN) | MODE(CNN_MODE_RECOMPUTE))

/* Batch normalisation of layer j's convolution output L->z (layout md,
 * made by the caller) into t[j+1]: the forward steps (batch statistics in training, a rolling
 * update after a training FORWARD, the rolling statistics in evaluation);
 * *bwd_pd receives the training primitive's descriptor (the backward's
 * hint; the caller destroys it). */
static int bn_forward(build *b, size_t j, const dnnl_memory_desc_t *md,
                      dnnl_primitive_desc_t *bwd_hint) {
  cnn_cpu_stage *s = b->s;
  cpu_layer *L = &s->layers[j];
  dnnl_dim_t C = L->l.out.c;
  const unsigned flags = dnnl_use_scale | dnnl_use_shift;
  TRY(vec_mem(b, C, &L->scale));
  TRY(vec_mem(b, C, &L->vs));
  TRY(vec_mem(b, C, &L->gs));
  TRY(vec_mem(b, C, &L->gs_new));
  TRY(vec_mem(b, C, &L->mean));
  TRY(vec_mem(b, C, &L->var));
  TRY(vec_mem(b, C, &L->rmean));
  TRY(vec_mem(b, C, &L->rvar));
  dnnl_batch_normalization_desc_t d;
  dnnl_primitive_desc_t pd, keep;
  dnnl_primitive_t p;
  DN(dnnl_batch_normalization_forward_desc_init(
         &d, dnnl_forward_training, md, (float)CNN_BN_EPS, flags),
     "batch normalization forward");
  DN(dnnl_primitive_desc_create(bwd_hint, &d, s->attr, s->engine, NULL),
     "batch normalization forward");
  DN(dnnl_primitive_desc_clone(&keep, *bwd_hint), "batch normalization");
  TRY(new_prim(b, keep, L, &p));
  dnnl_exec_arg_t train[6] = {{DNNL_ARG_SRC, L->z},
                              {DNNL_ARG_SCALE, L->scale},
                              {DNNL_ARG_SHIFT, L->b},
                              {DNNL_ARG_DST, s->t[j + 1].mem},
                              {DNNL_ARG_MEAN, L->mean},
                              {DNNL_ARG_VARIANCE, L->var}};
  TRY(add_step(b, false, p, NULL, L, 6, train));
  s->fwd[s->nfwd - 1].modes = MODES_TRAINING;
  TRY(add_blend(b, L, L->rmean, L->mean, (float)(1 - CNN_BN_MOMENTUM),
                (float)CNN_BN_MOMENTUM, MODE(CNN_MODE_TRAIN)));
  TRY(add_blend(b, L, L->rvar, L->var, (float)(1 - CNN_BN_MOMENTUM),
                (float)CNN_BN_MOMENTUM, MODE(CNN_MODE_TRAIN)));
  DN(dnnl_batch_normalization_forward_desc_init(
         &d, dnnl_forward_inference, md, (float)CNN_BN_EPS,
         flags | dnnl_use_global_stats),
     "batch normalization inference");
  DN(dnnl_primitive_desc_create(&pd, &d, s->attr, s->engine, NULL),
     "batch normalization inference");
  TRY(new_prim(b, pd, NULL, &p));
  dnnl_exec_arg_t infer[6] = {{DNNL_ARG_SRC, L->z},
                              {DNNL_ARG_MEAN, L->rmean},
                              {DNNL_ARG_VARIANCE, L->rvar},
                              {DNNL_ARG_SCALE, L->scale},
                              {DNNL_ARG_SHIFT, L->b},
                              {DNNL_ARG_DST, s->t[j + 1].mem}};
  TRY(add_step(b, false, p, NULL, L, 6, infer));
  s->fwd[s->nfwd - 1].modes = MODE(CNN_MODE_INFER);
  return 0;
}

/* The normalisation's backward from *dz (the error at its output) into
 * L->z_diff, which *dz becomes; the shift's and scale's gradients go to
 * gb_new and gs_new (or gb and gs: chosen per backward) and are
 * accumulated. */
static int bn_backward(build *b, size_t j, const dnnl_memory_desc_t *md,
                       const_dnnl_primitive_desc_t hint, dnnl_memory_t *dz) {
  cnn_cpu_stage *s = b->s;
  cpu_layer *L = &s->layers[j];
  dnnl_batch_normalization_desc_t d;
  dnnl_primitive_desc_t pd;
  dnnl_primitive_t p;
  DN(dnnl_batch_normalization_backward_desc_init(
         &d, dnnl_backward, md, md, (float)CNN_BN_EPS,
         dnnl_use_scale | dnnl_use_shift),
     "batch normalization backward");
  DN(dnnl_primitive_desc_create(&pd, &d, s->attr, s->engine, hint),
     "batch normalization backward");
  /* the last two are chosen per backward (cnn_cpu.c) */
  dnnl_exec_arg_t args[9] = {{DNNL_ARG_SRC, L->z},
                             {DNNL_ARG_MEAN, L->mean},
                             {DNNL_ARG_VARIANCE, L->var},
                             {DNNL_ARG_DIFF_DST, *dz},
                             {DNNL_ARG_SCALE, L->scale},
                             {DNNL_ARG_DIFF_SRC, L->z_diff},
                             {DNNL_ARG_DIFF_SCALE, L->gs_new},
                             {DNNL_ARG_DIFF_SHIFT, L->gb_new},
                             {DNNL_ARG_SHIFT, L->b}};
  TRY(new_prim(b, pd, L, &p));
  L->bn_step = s->nbwd;
  TRY(add_step(b, true, p, NULL, L, 9, args));
  TRY(add_accumulate(b, L, L->gs, L->gs_new));
  TRY(add_accumulate(b, L, L->gb, L->gb_new));
  *dz = L->z_diff;
  return 0;
}

/* A convolution or connected layer: forward (+ batch normalisation) (+
 * activation), then backward: activation, normalisation, PG with its
 * accumulation, EB. A batch-normalized convolution has no bias: its b is
 * the normalisation's shift. */
static int build_weighted(build *b, size_t j) {
  cnn_cpu_stage *s = b->s;
  cpu_layer *L = &s->layers[j];
  const cnn_layer *l = &L->l;
  bool conv = l->kind == CNN_LAYER_CONV;
  bool bn = conv && l->batch_norm;
  int in_nd = conv ? 4 : (int)s->t[j].md.ndims;
  if (conv && s->t[j].md.ndims != 4)
    return fail(b, EMBER_EPARAM,
                "a convolution after a connected layer in one stage is not "
                "supported on the cpu");
  dnnl_dims_t sd, wd, bd, dd;
  dims_of(s->batch, l->in, in_nd, sd);
  wd[0] = conv ? l->out.c : (dnnl_dim_t)l->out.c * l->out.h * l->out.w;
  if (conv) {
    wd[1] = l->in.c;
    wd[2] = wd[3] = l->size;
  } else if (in_nd == 4) {
    wd[1] = l->in.c;
    wd[2] = l->in.h;
    wd[3] = l->in.w;
  } else {
    wd[1] = sd[1];
  }
  bd[0] = wd[0];
  dims_of(s->batch, l->out, conv ? 4 : 2, dd);
  int out_nd = conv ? 4 : 2;
  dnnl_memory_desc_t src_any, w_any, b_any, dst_any;
  DN(dnnl_memory_desc_init_by_tag(&src_any, in_nd, sd, dnnl_f32,
                                  dnnl_format_tag_any), "memory_desc");
  DN(dnnl_memory_desc_init_by_tag(&w_any, in_nd, wd, dnnl_f32,
                                  dnnl_format_tag_any), "memory_desc");
  DN(dnnl_memory_desc_init_by_tag(&b_any, 1, bd, dnnl_f32,
                                  dnnl_format_tag_any), "memory_desc");
  DN(dnnl_memory_desc_init_by_tag(&dst_any, out_nd, dd, dnnl_f32,
                                  dnnl_format_tag_any), "memory_desc");
  DN(dnnl_memory_desc_init_by_tag(&L->w_canon_md, in_nd, wd, dnnl_f32,
                                  in_nd == 2 ? dnnl_oi : dnnl_oihw),
     "memory_desc");
  dnnl_dims_t strides = {l->stride, l->stride};
  dnnl_dims_t pad = {l->padding, l->padding};
  const dnnl_memory_desc_t *bias = bn ? NULL : &b_any;

  /* forward */
  dnnl_convolution_desc_t cd;
  dnnl_inner_product_desc_t ipd;
  const_dnnl_op_desc_t fd;
  if (conv) {
    DN(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training,
                                          dnnl_convolution_direct, &src_any,
                                          &w_any, bias, &dst_any, strides,
                                          pad, pad),
       "convolution forward");
    fd = &cd;
  } else {
    DN(dnnl_inner_product_forward_desc_init(&ipd, dnnl_forward_training,
                                            &src_any, &w_any, bias,
                                            &dst_any),
       "inner product forward");
    fd = &ipd;
  }
  dnnl_primitive_desc_t fpd;
  DN(dnnl_primitive_desc_create(&fpd, fd, s->attr, s->engine, NULL),
     "forward");
  dnnl_memory_desc_t src_md = *query(fpd, dnnl_query_src_md);
  dnnl_memory_desc_t w_md = *query(fpd, dnnl_query_weights_md);
  dnnl_memory_desc_t dst_md = *query(fpd, dnnl_query_dst_md);
  int rc = 0;
  dnnl_memory_t src = NULL;
  dnnl_primitive_t fp = NULL;
  dnnl_primitive_desc_t fpd_copy = NULL, bn_pd = NULL;
  if (dnnl_primitive_desc_clone(&fpd_copy, fpd) != dnnl_success)
    rc = fail(b, EMBER_ENOMEM, "primitive_desc_clone");
  if (!rc) rc = link_input(b, j, &src_md, &src);
  /* the stage's input itself is the activation kept for PG */
  if (!rc && src == s->t[0].mem) s->keep_input = true;
  if (!rc) rc = make_output(b, j, &dst_md);
  if (!rc) rc = new_mem(b, &w_md, &L->w);
  if (!rc) rc = new_mem(b, &w_md, &L->vw);
  /* biases (the shift) are plain vectors in every layout oneDNN picks */
  if (!rc) rc = vec_mem(b, bd[0], &L->b);
  if (!rc) rc = vec_mem(b, bd[0], &L->vb);
  if (!rc) rc = vec_mem(b, bd[0], &L->gb);
  if (!rc) rc = vec_mem(b, bd[0], &L->gb_new);
  if (!rc) {
    rc = new_prim(b, fpd_copy, L, &fp);  /* takes fpd_copy */
    fpd_copy = NULL;
  }
  /* a batch-normalized convolution into z, normalised into t[j+1] */
  if (!rc && bn) rc = new_mem(b, &dst_md, &L->z);
  if (!rc && bn) rc = new_mem(b, &dst_md, &L->z_diff);
  if (!rc) {
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, src},
                               {DNNL_ARG_WEIGHTS, L->w},
                               {DNNL_ARG_DST, bn ? L->z : s->t[j + 1].mem},
                               {DNNL_ARG_BIAS, L->b}};
    rc = add_step(b, false, fp, NULL, L, bn ? 3 : 4, args);
  }
  if (!rc && bn) rc = bn_forward(b, j, &dst_md, &bn_pd);
  dnnl_primitive_desc_t rpd = NULL;
  if (!rc && l->act != CNN_ACT_LINEAR) rc = act_forward(b, j, &rpd);

  /* backward: activation, normalisation, PG, EB */
  L->bwd_first = s->nbwd;
  dnnl_memory_t dz = s->t[j + 1].diff;
  if (!rc && rpd) rc = act_backward(b, j, rpd, &dz);
  dnnl_primitive_desc_destroy(rpd);
  if (!rc && bn) rc = bn_backward(b, j, &dst_md, bn_pd, &dz);
  dnnl_primitive_desc_destroy(bn_pd);

  dnnl_primitive_desc_t wpd = NULL;
  if (!rc) {
    dnnl_status_t st;
    if (conv) {
      st = dnnl_convolution_backward_weights_desc_init(
          &cd, dnnl_convolution_direct, &src_any, &w_any, bias, &dst_any,
          strides, pad, pad);
    } else {
      st = dnnl_inner_product_backward_weights_desc_init(&ipd, &src_any,
                                                         &w_any, bias,
                                                         &dst_any);
    }
    if (st == dnnl_success)
      st = dnnl_primitive_desc_create(&wpd, fd, s->attr, s->engine, fpd);
    if (st != dnnl_success) rc = dnnl_fail(b, st, "backward weights");
  }
  if (!rc) {
    dnnl_memory_desc_t gw_md = *query(wpd, dnnl_query_diff_weights_md);
    dnnl_memory_t w_src = NULL, w_ddst = NULL;
    dnnl_primitive_t p;
    rc = as_layout(b, j, src, query(wpd, dnnl_query_src_md), &w_src);
    if (!rc)
      rc = as_layout(b, j, dz, query(wpd, dnnl_query_diff_dst_md), &w_ddst);
    if (!rc) rc = new_mem(b, &gw_md, &L->gw);
    if (!rc) rc = new_mem(b, &gw_md, &L->gw_new);
    if (!rc) {
      rc = new_prim(b, wpd, L, &p);  /* takes wpd */
      wpd = NULL;
    }
    if (!rc) {
      /* the gradients' memories are chosen per backward (cnn_cpu.c) */
      dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, w_src},
                                 {DNNL_ARG_DIFF_DST, w_ddst},
                                 {DNNL_ARG_DIFF_WEIGHTS, L->gw_new},
                                 {DNNL_ARG_DIFF_BIAS, L->gb_new}};
      L->pg_step = s->nbwd;
      rc = add_step(b, true, p, NULL, L, bn ? 3 : 4, args);
    }
    if (!rc) rc = add_accumulate(b, L, L->gw, L->gw_new);
    if (!rc && !bn) rc = add_accumulate(b, L, L->gb, L->gb_new);
    if (!rc && dnnl_memory_desc_equal(&gw_md, &w_md)) {
      L->gw_fwd = L->gw;
    } else if (!rc) {
      rc = new_mem(b, &w_md, &L->gw_fwd);
      if (!rc) rc = reorder(b, L->gw, L->gw_fwd, -1, L, &L->gw_to_fwd);
    }
  }
  dnnl_primitive_desc_destroy(wpd);

  bool eb = j > 0 || s->eb_in;
  if (!rc && eb) {
    dnnl_status_t st;
    dnnl_primitive_desc_t dpd = NULL;
    if (conv) {
      st = dnnl_convolution_backward_data_desc_init(
          &cd, dnnl_convolution_direct, &src_any, &w_any, &dst_any, strides,
          pad, pad);
    } else {
      st = dnnl_inner_product_backward_data_desc_init(&ipd, &src_any, &w_any,
                                                      &dst_any);
    }
    if (st == dnnl_success)
      st = dnnl_primitive_desc_create(&dpd, fd, s->attr, s->engine, fpd);
    if (st != dnnl_success) rc = dnnl_fail(b, st, "backward data");
    dnnl_memory_desc_t wbd_md = w_md, dsrc_md = src_md;
    dnnl_memory_t d_ddst = NULL, dsrc = s->t[j].diff;
    if (!rc) {
      wbd_md = *query(dpd, dnnl_query_weights_md);
      dsrc_md = *query(dpd, dnnl_query_diff_src_md);
      rc = as_layout(b, j, dz, query(dpd, dnnl_query_diff_dst_md), &d_ddst);
    }
    /* the error at the input: straight into t[j]'s, or through a copy */
    bool dsrc_copy = !dnnl_memory_desc_equal(&dsrc_md, &s->t[j].md);
    if (!rc && dsrc_copy) rc = new_mem(b, &dsrc_md, &dsrc);
    dnnl_primitive_t p;
    if (!rc) rc = new_prim(b, dpd, L, &p);
    else dnnl_primitive_desc_destroy(dpd);
    if (!rc && dnnl_memory_desc_equal(&wbd_md, &w_md)) {
      L->w_bd = L->w;
    } else if (!rc) {
      rc = new_mem(b, &wbd_md, &L->w_bd);
      if (!rc) rc = reorder(b, L->w, L->w_bd, -1, L, &L->w_to_bd);
    }
    if (!rc) {
      dnnl_exec_arg_t args[3] = {{DNNL_ARG_DIFF_DST, d_ddst},
                                 {DNNL_ARG_WEIGHTS, L->w_bd},
                                 {DNNL_ARG_DIFF_SRC, dsrc}};
      rc = add_step(b, true, p, NULL, L, 3, args);
    }
    if (!rc && dsrc_copy)
      rc = reorder(b, dsrc, s->t[j].diff, 1, L, NULL);
  }
  dnnl_primitive_desc_destroy(fpd_copy);
  dnnl_primitive_desc_destroy(fpd);
  return rc;
}

/* A pooling layer on oneDNN: alg over kernel-sized windows at strides,
 * padded pl before and pr after; the forward step, then the backward into
 * t[j]'s error where there is one. The max-pool's workspace (where each
 * maximum was) joins the two. */
static int build_pool(build *b, size_t j, dnnl_alg_kind_t alg,
                      const dnnl_dims_t strides, const dnnl_dims_t kernel,
                      const dnnl_dims_t pl, const dnnl_dims_t pr) {
  cnn_cpu_stage *s = b->s;
  cpu_layer *L = &s->layers[j];
  cpu_tensor *t = &s->t[j];
  bool max = alg == dnnl_pooling_max;
  const char *fwd_what = max ? "pooling forward" : "avg pooling forward";
  const char *bwd_what = max ? "pooling backward" : "avg pooling backward";
  dnnl_dims_t dd;
  dims_of(s->batch, L->l.out, 4, dd);
  dnnl_memory_desc_t dst_any;
  DN(dnnl_memory_desc_init_by_tag(&dst_any, 4, dd, dnnl_f32,
                                  dnnl_format_tag_any), "memory_desc");
  dnnl_pooling_desc_t d;
  DN(dnnl_pooling_forward_desc_init(&d, dnnl_forward_training, alg, &t->md,
                                    &dst_any, strides, kernel, pl, pr),
     fwd_what);
  dnnl_primitive_desc_t fpd, keep = NULL;
  DN(dnnl_primitive_desc_create(&fpd, &d, s->attr, s->engine, NULL),
     fwd_what);
  dnnl_memory_desc_t dst_md = *query(fpd, dnnl_query_dst_md);
  dnnl_memory_t ws = NULL;
  dnnl_primitive_t p;
  int rc = make_output(b, j, &dst_md);
  if (!rc && max) rc = new_mem(b, query(fpd, dnnl_query_workspace_md), &ws);
  if (!rc && dnnl_primitive_desc_clone(&keep, fpd) != dnnl_success)
    rc = fail(b, EMBER_ENOMEM, "primitive_desc_clone");
  if (!rc) rc = new_prim(b, keep, L, &p);
  if (!rc) {
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, t->mem},
                               {DNNL_ARG_DST, s->t[j + 1].mem},
                               {DNNL_ARG_WORKSPACE, ws}};
    rc = add_step(b, false, p, NULL, L, max ? 3 : 2, args);
  }
  L->bwd_first = s->nbwd;
  if (!rc && (j > 0 || s->eb_in)) {
    dnnl_primitive_desc_t bpd;
    dnnl_status_t st = dnnl_pooling_backward_desc_init(
        &d, alg, &t->md, &dst_md, strides, kernel, pl, pr);
    if (st == dnnl_success)
      st = dnnl_primitive_desc_create(&bpd, &d, s->attr, s->engine, fpd);
    if (st != dnnl_success) rc = dnnl_fail(b, st, bwd_what);
    if (!rc) rc = new_prim(b, bpd, L, &p);
    if (!rc) {
      dnnl_exec_arg_t args[3] = {{DNNL_ARG_DIFF_DST, s->t[j + 1].diff},
                                 {DNNL_ARG_DIFF_SRC, t->diff},
                                 {DNNL_ARG_WORKSPACE, ws}};
      rc = add_step(b, true, p, NULL, L, max ? 3 : 2, args);
    }
  }
  dnnl_primitive_desc_destroy(fpd);
  return rc;
}

/* darknet's average pool: each channel's mean over its whole plane, by
 * oneDNN's average pooling with one window of H x W. */
static int build_avgpool(build *b, size_t j) {
  const cnn_layer *l = &b->s->layers[j].l;
  if (b->s->t[j].md.ndims != 4)
    return fail(b, EMBER_EPARAM,
                "an avg-pool after a connected layer in one stage is not "
                "supported on the cpu");
  dnnl_dims_t win = {l->in.h, l->in.w}, zero = {0, 0};
  return build_pool(b, j, dnnl_pooling_avg_exclude_padding, win, win, zero,
                    zero);
}

/* Dropout: y = x * mask by oneDNN's binary multiplication, on plain
 * tensors (the mask's element order is the canonical one, cnn_pass.h);
 * the mask is drawn for each pass by cpu_dropout_mask (ones in
 * evaluation). Backward: dx = dy * mask. */
static int build_dropout(build *b, size_t j) {
  cnn_cpu_stage *s = b->s;
  cpu_layer *L = &s->layers[j];
  cpu_tensor *t = &s->t[j];
  int nd = (int)t->md.ndims;
  dnnl_dims_t d;
  dnnl_memory_desc_t md;
  dims_of(s->batch, L->l.in, nd, d);
  TRY(plain_md(b, nd, d, &md));
  dnnl_memory_t src;
  TRY(link_input(b, j, &md, &src));
  TRY(make_output(b, j, &md));
  TRY(new_mem(b, &md, &L->mask));
  TRY(add_step(b, false, NULL, cpu_dropout_mask, L, 0, NULL));
  dnnl_binary_desc_t bd;
  DN(dnnl_binary_desc_init(&bd, dnnl_binary_mul, &md, &md, &md),
     "dropout");
  dnnl_primitive_desc_t pd;
  DN(dnnl_primitive_desc_create(&pd, &bd, s->attr, s->engine, NULL),
     "dropout");
  dnnl_primitive_t p;
  TRY(new_prim(b, pd, L, &p));
  dnnl_exec_arg_t fwd[3] = {{DNNL_ARG_SRC_0, src},
                            {DNNL_ARG_SRC_1, L->mask},
                            {DNNL_ARG_DST, s->t[j + 1].mem}};
  TRY(add_step(b, false, p, NULL, L, 3, fwd));
  L->bwd_first = s->nbwd;
  if (!(j > 0 || s->eb_in)) return 0;
  bool copy = !dnnl_memory_desc_equal(&md, &t->md);
  dnnl_memory_t dsrc = t->diff;
  if (copy) TRY(new_mem(b, &md, &dsrc));
  dnnl_exec_arg_t bwd[3] = {{DNNL_ARG_SRC_0, s->t[j + 1].diff},
                            {DNNL_ARG_SRC_1, L->mask},
                            {DNNL_ARG_DST, dsrc}};
  TRY(add_step(b, true, p, NULL, L, 3, bwd));
  if (copy) TRY(reorder(b, dsrc, t->diff, 1, L, NULL));
  return 0;
}

/* darknet's max-pool on oneDNN: the window starts padding/2 before the
 * input, and the padding after is whatever makes oneDNN's output side
 * (in + l + r - size) / stride + 1 equal darknet's (in + padding - size) /
 * stride + 1 (cnn_net.h), i.e. r = (out - 1) * stride + size - in - l; it
 * may be negative when the last input rows fall in no window. */
static int build_maxpool(build *b, size_t j) {
  const cnn_layer *l = &b->s->layers[j].l;
  if (b->s->t[j].md.ndims != 4)
    return fail(b, EMBER_EPARAM,
                "a max-pool after a connected layer in one stage is not "
                "supported on the cpu");
  dnnl_dim_t before = l->padding / 2;
  dnnl_dim_t after_h = ((dnnl_dim_t)l->out.h - 1) * l->stride + l->size -
                       l->in.h - before;
  dnnl_dim_t after_w = ((dnnl_dim_t)l->out.w - 1) * l->stride + l->size -
                       l->in.w - before;
  if (before >= l->size || after_h >= (dnnl_dim_t)l->size ||
      after_w >= (dnnl_dim_t)l->size)
    return fail(b, EMBER_EPARAM, "a max-pool window wholly in padding");
  dnnl_dims_t strides = {l->stride, l->stride}, kernel = {l->size, l->size},
              pl = {before, before}, pr = {after_h, after_w};
  return build_pool(b, j, dnnl_pooling_max, strides, kernel, pl, pr);
}

/* The softmax over the classes (axis 1), in its input's layout; its
 * backward is the loss's gradient (p - onehot) / batch, computed on the
 * NCHW probabilities and reordered into t[j]'s error. */
static int build_softmax(build *b, size_t j) {
  cnn_cpu_stage *s = b->s;
  cpu_layer *L = &s->layers[j];
  cpu_tensor *t = &s->t[j];
  dnnl_softmax_desc_t d;
  DN(dnnl_softmax_forward_desc_init(&d, dnnl_forward_training, &t->md, 1),
     "softmax forward");
  dnnl_primitive_desc_t pd;
  DN(dnnl_primitive_desc_create(&pd, &d, s->attr, s->engine, NULL),
     "softmax forward");
  dnnl_memory_desc_t dst_md = *query(pd, dnnl_query_dst_md);
  dnnl_primitive_t p;
  int rc = new_prim(b, pd, L, &p);
  if (!rc) rc = make_output(b, j, &dst_md);
  if (!rc) {
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, t->mem},
                               {DNNL_ARG_DST, s->t[j + 1].mem}};
    rc = add_step(b, false, p, NULL, L, 2, args);
  }
  L->bwd_first = s->nbwd;
  if (!rc && (j > 0 || s->eb_in)) {
    dnnl_memory_desc_t md;
    dnnl_dims_t dd;
    dims_of(s->batch, L->l.in, (int)t->md.ndims, dd);
    rc = plain_md(b, (int)t->md.ndims, dd, &md);
    if (!rc && dnnl_memory_desc_equal(&md, &t->md))
      s->xent_plain = t->diff;
    else if (!rc)
      rc = new_mem(b, &md, &s->xent_plain);
    if (!rc) rc = add_step(b, true, NULL, cpu_xent_grad, L, 0, NULL);
    if (!rc && s->xent_plain != t->diff)
      rc = reorder(b, s->xent_plain, t->diff, 1, L, NULL);
  }
  return rc;
}

/* The stage's boundaries: t[0] (plain NCHW, the caller's input and the
 * error given back), and the output in NCHW with its error. */
static int build_boundaries_in(build *b) {
  cnn_cpu_stage *s = b->s;
  dnnl_dims_t d;
  dims_of(s->batch, s->layers[0].l.in, 4, d);
  TRY(plain_md(b, 4, d, &s->t[0].md));
  TRY(new_mem(b, &s->t[0].md, &s->t[0].mem));
  return new_mem(b, &s->t[0].md, &s->t[0].diff);
}

static int build_boundaries_out(build *b) {
  cnn_cpu_stage *s = b->s;
  cpu_tensor *t = &s->t[s->count];
  cpu_layer *last = &s->layers[s->count - 1];
  dnnl_dims_t d;
  dnnl_memory_desc_t md;
  dims_of(s->batch, last->l.out, (int)t->md.ndims, d);
  TRY(plain_md(b, (int)t->md.ndims, d, &md));
  if (dnnl_memory_desc_equal(&md, &t->md)) {
    s->out_plain = t->mem;
    s->dout_plain = t->diff;
    return 0;
  }
  TRY(new_mem(b, &md, &s->out_plain));
  TRY(reorder(b, t->mem, s->out_plain, -1, NULL, &s->out_reo));
  if (s->softmax) return 0;
  TRY(new_mem(b, &md, &s->dout_plain));
  return reorder(b, s->dout_plain, t->diff, -1, NULL, &s->dout_reo);
}

/* Layer j's shapes (cnn_layer_check) before oneDNN sees any of them. */
static int check_shapes(build *b, size_t j) {
  char why[200];
  const cnn_shape *prev = j ? &b->s->layers[j - 1].l.out : NULL;
  int rc = cnn_layer_check(&b->s->layers[j].l, prev, why, sizeof why);
  return rc ? fail(b, rc, "%s", why) : 0;
}

/* The scratch every primitive of the stage executes with (the largest
 * size any asked for, at least one byte). */
static int build_scratch(build *b) {
  cnn_cpu_stage *s = b->s;
  dnnl_memory_desc_t md;
  dnnl_dims_t d = {(dnnl_dim_t)(s->scratch_size ? s->scratch_size : 1)};
  DN(dnnl_memory_desc_init_by_tag(&md, 1, d, dnnl_u8, dnnl_a),
     "memory_desc");
  return new_mem(b, &md, &s->scratch);
}

/* A stage of count layers (copies of layers[0 .. count), the network's
 * layers first .. first+count-1), the error at its input computed when
 * eb_in. */
static int create(const cnn_layer *layers, size_t first, size_t count,
                  bool eb_in, uint32_t classes, uint32_t batch,
                  cnn_cpu_stage **out, char *err, size_t err_len) {
  build b = {NULL, err, err_len, first};
  cnn_cpu_stage *s = calloc(1, sizeof *s);
  if (!s) return fail(&b, EMBER_ENOMEM, "out of memory");
  b.s = s;
  s->batch = batch;
  s->first = first;
  s->count = count;
  s->eb_in = eb_in;
  s->softmax = layers[count - 1].kind == CNN_LAYER_SOFTMAX;
  s->classes = classes;
  s->grads_zero = true;
  s->layers = calloc(s->count, sizeof *s->layers);
  s->t = calloc(s->count + 1, sizeof *s->t);
  s->labels = calloc(batch, 1);
  int rc = 0;
  if (!s->layers || !s->t || !s->labels)
    rc = fail(&b, EMBER_ENOMEM, "out of memory");
  if (!rc && dnnl_engine_create(&s->engine, dnnl_cpu, 0) != dnnl_success)
    rc = fail(&b, EMBER_EPLATFORM, "oneDNN has no cpu engine");
  if (!rc && dnnl_stream_create(&s->stream, s->engine,
                                dnnl_stream_default_flags) != dnnl_success)
    rc = fail(&b, EMBER_EPLATFORM, "oneDNN stream");
  if (!rc && (dnnl_primitive_attr_create(&s->attr) != dnnl_success ||
              dnnl_primitive_attr_set_scratchpad_mode(
                  s->attr, dnnl_scratchpad_mode_user) != dnnl_success))
    rc = fail(&b, EMBER_EPLATFORM, "oneDNN primitive attributes");
  for (size_t j = 0; !rc && j < s->count; j++) {
    s->layers[j].l = layers[j];
    s->layers[j].index = first + j;
    b.layer = first + j;
    rc = check_shapes(&b, j);
  }
  b.layer = first;
  if (!rc) rc = build_boundaries_in(&b);
  for (size_t j = 0; !rc && j < s->count; j++) {
    cpu_layer *L = &s->layers[j];
    b.layer = L->index;
    switch (L->l.kind) {
    case CNN_LAYER_CONV:
    case CNN_LAYER_CONNECTED: rc = build_weighted(&b, j); break;
    case CNN_LAYER_MAXPOOL: rc = build_maxpool(&b, j); break;
    case CNN_LAYER_SOFTMAX: rc = build_softmax(&b, j); break;
    case CNN_LAYER_AVGPOOL: rc = build_avgpool(&b, j); break;
    case CNN_LAYER_DROPOUT: rc = build_dropout(&b, j); break;
    }
  }
  b.layer = first + count - 1;
  if (!rc) rc = build_boundaries_out(&b);
  if (!rc) rc = build_scratch(&b);
  if (rc) {
    cnn_cpu_stage_destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}

int cnn_cpu_stage_create(const cnn_net *net, size_t first, size_t end,
                         uint32_t batch, cnn_cpu_stage **out, char *err,
                         size_t err_len) {
  if (out) *out = NULL;
  if (err && err_len) err[0] = '\0';
  size_t n = 0;
  const cnn_layer *layers = net ? cnn_net_layers(net, &n) : NULL;
  build b = {NULL, err, err_len, first};
  if (!net || !out || first >= end || end > n || batch == 0 ||
      batch > CNN_MAX_BATCH)
    return fail(&b, EMBER_EINVAL, "bad arguments");
  return create(layers + first, first, end - first, first > 0,
                cnn_net_classes(net), batch, out, err, err_len);
}

/* A one-layer stage for a slice of layer `layer` (cnn_layer_slice); the
 * error at its input made when input_error. */
static int slice_create(const cnn_net *net, size_t layer, uint32_t channels,
                        int outputs, bool input_error, uint32_t batch,
                        cnn_cpu_stage **out, char *err, size_t err_len) {
  if (out) *out = NULL;
  if (err && err_len) err[0] = '\0';
  size_t n = 0;
  const cnn_layer *layers = net ? cnn_net_layers(net, &n) : NULL;
  build b = {NULL, err, err_len, layer};
  if (!net || !out || layer >= n || batch == 0 || batch > CNN_MAX_BATCH)
    return fail(&b, EMBER_EINVAL, "bad arguments");
  cnn_layer l;
  if (cnn_layer_slice(&layers[layer], channels, outputs, &l))
    return fail(&b, EMBER_EINVAL, "not a convolutional or connected layer, "
                "or %u %s channels out of its range", channels,
                outputs ? "output" : "input");
  return create(&l, layer, 1, input_error, 0, batch, out, err, err_len);
}

int cnn_cpu_slice_create(const cnn_net *net, size_t layer,
                         uint32_t channels, uint32_t batch,
                         cnn_cpu_stage **out, char *err, size_t err_len) {
  return slice_create(net, layer, channels, 0, true, batch, out, err,
                      err_len);
}

int cnn_cpu_ocp_slice_create(const cnn_net *net, size_t layer,
                             uint32_t channels, uint32_t batch,
                             cnn_cpu_stage **out, char *err, size_t err_len) {
  return slice_create(net, layer, channels, 1, layer > 0, batch, out, err,
                      err_len);
}

size_t cnn_cpu_stage_bytes(const cnn_cpu_stage *s) {
  return s ? s->bytes : 0;
}

void cnn_cpu_stage_destroy(cnn_cpu_stage *s) {
  if (!s) return;
  for (size_t i = 0; i < s->nprims; i++) dnnl_primitive_destroy(s->prims[i]);
  for (size_t i = 0; i < s->nmems; i++) {
    dnnl_memory_destroy(s->mems[i]);
    buf_free(s->bufs[i]);
  }
  free(s->bufs);
  if (s->attr) dnnl_primitive_attr_destroy(s->attr);
  if (s->stream) dnnl_stream_destroy(s->stream);
  if (s->engine) dnnl_engine_destroy(s->engine);
  free(s->prims);
  free(s->mems);
  free(s->fwd);
  free(s->bwd);
  free(s->layers);
  free(s->t);
  free(s->labels);
  free(s);
}
