/*
 * cnn_opencl.c - host side of a cnn stage on OpenCL (cnn_opencl.h): the
 * program (cnn.cl, embedded at build time as cnn_cl_source.h) and its
 * binary cache, a stage's device buffers, and FP, EB, PG and SGD queued
 * layer by layer.
 *
 * Buffers of a stage of L layers: act[0..L] (act[0] the input, act[i+1]
 * layer i's output) and err[0..L] alike (the loss's gradient with respect
 * to each; err[0] only when the stage does not start at layer 0), and per
 * layer with parameters w, b, their momentum vw, vb and gradients gw, gb;
 * per max-pool its argmax; per batch-normalized convolution its output z
 * before the normalisation, z's error, the batch's statistics, the
 * scales and the rolling statistics; per layer with an activation dz,
 * the error through its derivative (taken from err[i+1] and the output),
 * which the layer's PG and EB start from: err[i+1] is left as it was, so
 * a second backward after one forward gives the same result. A softmax
 * stage's forward with labels writes the per-sample losses and the
 * gradient at the softmax's input, err[L-1], which its backward starts
 * from. The *_mem variants take their input, labels and errors from other
 * device buffers (the cnn accelerator's state block) by
 * clEnqueueCopyBuffer, and cnn_ocl_sgd runs the update on regions of one
 * buffer in place.
 */
#include "cnn_opencl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_cache.h"
#include "cnn_cl_source.h"
#include "ember/ember_errors.h"
#include "errbuf.h"

/* global sizes are rounded up to a multiple of this */
#define CNN_OCL_ROUND 64

enum {
  K_CONV_FWD,
  K_CONV_BWD_DATA,
  K_CONV_BWD_WEIGHTS,
  K_BIAS_GRAD,
  K_ACT_BWD,
  K_POOL_FWD,
  K_POOL_BWD,
  K_FC_FWD,
  K_FC_BWD_DATA,
  K_FC_BWD_WEIGHTS,
  K_SOFTMAX,
  K_SGD,
  K_ADD,
  K_ACT_KEEP,
  K_ACT_MASK,
  K_BN_STATS,
  K_BN_ROLLING,
  K_BN_FWD,
  K_BN_BWD_REDUCE,
  K_BN_BWD_DATA,
  K_AVG_FWD,
  K_AVG_BWD,
  K_DROPOUT,
  K_COUNT
};

static const char *const kernel_names[K_COUNT] = {
    "cnn_conv_fwd",  "cnn_conv_bwd_data", "cnn_conv_bwd_weights",
    "cnn_bias_grad", "cnn_act_bwd",       "cnn_pool_fwd",
    "cnn_pool_bwd",  "cnn_fc_fwd",        "cnn_fc_bwd_data",
    "cnn_fc_bwd_weights", "cnn_softmax",  "cnn_sgd",
    "cnn_add",       "cnn_act_keep",      "cnn_act_mask",
    "cnn_bn_stats",  "cnn_bn_rolling",    "cnn_bn_fwd",
    "cnn_bn_bwd_reduce", "cnn_bn_bwd_data", "cnn_avgpool_fwd",
    "cnn_avgpool_bwd", "cnn_dropout"};

/* channels or samples a convolution or connected layer's work-item
 * computes (cnn.cl's CNN_BLOCK), sharing each value it reads: with only
 * the convolutions blocked, an epoch of LeNet on pocl's CPU device took
 * 11.5 s at 1, 5.0 s at 4, 6.0 s at 8 and 6.6 s at 2 */
#define CNN_OCL_BLOCK 4
#define CNN_OCL_STR(x) #x
#define CNN_OCL_XSTR(x) CNN_OCL_STR(x)

static const char build_options[] =
    "-cl-std=CL1.2 -DCNN_BLOCK=" CNN_OCL_XSTR(CNN_OCL_BLOCK);

/* The work-items of a kernel whose items each compute CNN_OCL_BLOCK of
 * count channels or samples, times the rest. */
static size_t blocked(size_t count, size_t rest) {
  return (count + CNN_OCL_BLOCK - 1) / CNN_OCL_BLOCK * rest;
}

struct cnn_ocl {
  cl_context ctx;
  cl_device_id dev;
  cl_program prog;
  cl_kernel k[K_COUNT];
  bool from_cache;
  char cache_path[1024];
};

typedef struct ocl_layer {
  cnn_layer l;
  size_t index;                  /* in the network */
  cl_mem w, b, vw, vb, gw, gb;   /* layers with parameters */
  cl_mem arg;                    /* max-pool */
  cl_mem dz;                     /* an activation's: the error before it */
  /* batch_norm: the convolution's output z and its error, a zero bias
   * for the convolution kernel; the batch's mean and variance, the
   * backward's sums (2 x C); the scales with momentum and gradients; the
   * rolling means then variances (2 x C); b is the shift */
  cl_mem z, zerr, zb, mean, var, red, sc, vs, gs, roll;
} ocl_layer;

struct cnn_ocl_stage {
  cnn_ocl *o;
  cl_command_queue q;
  size_t first, count;           /* network index of layer 0, layers */
  uint32_t batch;
  ocl_layer *layers;
  cl_mem *act, *err;             /* count + 1 each */
  cl_mem labels, loss;           /* softmax stages */
  float *loss_host;
  bool softmax, have_labels;
  bool no_biases;                /* an ICP slice but the last: biases stay
                                    0, neither loaded nor stored */
  cnn_pass pass;                 /* the forward passes' (set_pass) */
  char errbuf[256];
};

/* ---- the program --------------------------------------------------------- */

static int build(cnn_ocl *o, const char *cache_dir, char *err,
                 size_t err_len) {
  if (cache_dir && *cache_dir)
    acc_cl_cache_name(o->cache_path, sizeof o->cache_path, cache_dir, "cnn",
                      o->dev, acc_cnn_cl_source, build_options);
  if (o->cache_path[0] &&
      (o->prog = acc_cl_cache_load(o->ctx, o->dev, o->cache_path,
                                   build_options))) {
    o->from_cache = true;
  } else {
    const char *src = acc_cnn_cl_source;
    cl_int rc;
    o->prog = clCreateProgramWithSource(o->ctx, 1, &src, NULL, &rc);
    if (rc != CL_SUCCESS) {
      o->prog = NULL;
      return errbuf_printf(err, err_len, EMBER_EPLATFORM,
                           "cnn.cl: clCreateProgramWithSource failed (%d)",
                           (int)rc);
    }
    rc = clBuildProgram(o->prog, 1, &o->dev, build_options, NULL, NULL);
    if (rc != CL_SUCCESS)
      return acc_cl_build_failed(o->prog, o->dev, rc, "cnn.cl", err, err_len);
    if (o->cache_path[0]) acc_cl_cache_store(o->prog, o->cache_path);
  }
  for (int i = 0; i < K_COUNT; i++) {
    cl_int rc;
    o->k[i] = clCreateKernel(o->prog, kernel_names[i], &rc);
    if (rc != CL_SUCCESS) {
      o->k[i] = NULL;
      return errbuf_printf(err, err_len, EMBER_EPLATFORM,
                           "cnn.cl: clCreateKernel %s failed (%d)",
                           kernel_names[i], (int)rc);
    }
  }
  return 0;
}

int cnn_ocl_create(cl_context ctx, cl_device_id dev, const char *cache_dir,
                   cnn_ocl **out, char *err, size_t err_len) {
  if (!ctx || !dev || !out) return EMBER_EINVAL;
  *out = NULL;
  /* the host's floats and the labels go to the device as they are */
  cl_bool little = CL_TRUE;
  if (clGetDeviceInfo(dev, CL_DEVICE_ENDIAN_LITTLE, sizeof little, &little,
                      NULL) == CL_SUCCESS &&
      !little) {
    return errbuf_printf(err, err_len, EMBER_EPLATFORM,
                         "cnn.cl: big-endian device not supported");
  }
  cnn_ocl *o = calloc(1, sizeof *o);
  if (!o) return EMBER_ENOMEM;
  o->ctx = ctx;
  o->dev = dev;
  int rc = build(o, cache_dir, err, err_len);
  if (rc) {
    cnn_ocl_destroy(o);
    return rc;
  }
  *out = o;
  return 0;
}

void cnn_ocl_destroy(cnn_ocl *o) {
  if (!o) return;
  for (int i = 0; i < K_COUNT; i++)
    if (o->k[i]) clReleaseKernel(o->k[i]);
  if (o->prog) clReleaseProgram(o->prog);
  free(o);
}

bool cnn_ocl_loaded_from_cache(const cnn_ocl *o) {
  return o && o->from_cache;
}

/* ---- kernel launches ------------------------------------------------------ */

typedef struct karg {
  size_t size;
  const void *value;
} karg;

#define A_MEM(m) {sizeof(cl_mem), &(m)}
#define A_INT(v) {sizeof(cl_int), &(cl_int){(cl_int)(v)}}
#define A_ULONG(v) {sizeof(cl_ulong), &(cl_ulong){(cl_ulong)(v)}}
#define A_FLOAT(v) {sizeof(cl_float), &(cl_float){(cl_float)(v)}}
#define LAUNCH(s, k, n, ...)                                        \
  launch((s), (k), (n), (const karg[]){__VA_ARGS__},                \
         sizeof((const karg[]){__VA_ARGS__}) / sizeof(karg))

static int fail_into(char *err, size_t err_len, const char *what,
                     cl_int rc) {
  return errbuf_printf(err, err_len, EMBER_EPLATFORM, "%s failed (%d)", what,
                       (int)rc);
}

static int cl_fail(cnn_ocl_stage *s, const char *what, cl_int rc) {
  return fail_into(s->errbuf, sizeof s->errbuf, what, rc);
}

/* launch_on: kernel k of o over n items on q (none queued when n is 0);
 * a failure named in err. */
static int launch_on(cnn_ocl *o, cl_command_queue q, int k, size_t n,
                     const karg *args, size_t nargs, char *err,
                     size_t err_len) {
  if (n == 0) return 0;
  cl_kernel kern = o->k[k];
  for (size_t i = 0; i < nargs; i++) {
    cl_int rc = clSetKernelArg(kern, (cl_uint)i, args[i].size, args[i].value);
    if (rc != CL_SUCCESS) return fail_into(err, err_len, kernel_names[k], rc);
  }
  size_t global = (n + CNN_OCL_ROUND - 1) / CNN_OCL_ROUND * CNN_OCL_ROUND;
  cl_int rc = clEnqueueNDRangeKernel(q, kern, 1, NULL, &global, NULL, 0,
                                     NULL, NULL);
  return rc == CL_SUCCESS ? 0 : fail_into(err, err_len, kernel_names[k], rc);
}

/* launch: kernel k over n items on the stage's queue. */
static int launch(cnn_ocl_stage *s, int k, size_t n, const karg *args,
                  size_t nargs) {
  return launch_on(s->o, s->q, k, n, args, nargs, s->errbuf,
                   sizeof s->errbuf);
}

static int write_buf(cnn_ocl_stage *s, cl_mem m, size_t bytes,
                     const void *src) {
  cl_int rc = clEnqueueWriteBuffer(s->q, m, CL_TRUE, 0, bytes, src, 0, NULL,
                                   NULL);
  return rc == CL_SUCCESS ? 0 : cl_fail(s, "clEnqueueWriteBuffer", rc);
}

static int read_buf(cnn_ocl_stage *s, cl_mem m, size_t bytes, void *dst) {
  cl_int rc = clEnqueueReadBuffer(s->q, m, CL_TRUE, 0, bytes, dst, 0, NULL,
                                  NULL);
  return rc == CL_SUCCESS ? 0 : cl_fail(s, "clEnqueueReadBuffer", rc);
}

/* copy_buf: bytes of src at src_off to dst at dst_off, queued. */
static int copy_buf(cnn_ocl_stage *s, cl_mem src, size_t src_off, cl_mem dst,
                    size_t dst_off, size_t bytes) {
  if (!bytes) return 0;
  cl_int rc = clEnqueueCopyBuffer(s->q, src, dst, src_off, dst_off, bytes, 0,
                                  NULL, NULL);
  return rc == CL_SUCCESS ? 0 : cl_fail(s, "clEnqueueCopyBuffer", rc);
}

static int finish(cnn_ocl_stage *s) {
  cl_int cr = clFinish(s->q);
  return cr == CL_SUCCESS ? 0 : cl_fail(s, "clFinish", cr);
}

static int zero_buf(cnn_ocl_stage *s, cl_mem m, size_t bytes) {
  cl_float zero = 0;
  cl_int rc = clEnqueueFillBuffer(s->q, m, &zero, sizeof zero, 0, bytes, 0,
                                  NULL, NULL);
  return rc == CL_SUCCESS ? 0 : cl_fail(s, "clEnqueueFillBuffer", rc);
}

/* ---- the stage ------------------------------------------------------------- */

static size_t elems(cnn_shape sh) { return (size_t)sh.h * sh.w * sh.c; }

static cl_mem new_buf(cnn_ocl_stage *s, size_t bytes, int *rc) {
  if (*rc) return NULL;
  cl_int cr;
  cl_mem m = clCreateBuffer(s->o->ctx, CL_MEM_READ_WRITE, bytes ? bytes : 4,
                            NULL, &cr);
  if (cr != CL_SUCCESS) {
    *rc = cl_fail(s, "clCreateBuffer", cr);
    return NULL;
  }
  return m;
}

static void release(cl_mem m) {
  if (m) clReleaseMemObject(m);
}

void cnn_ocl_stage_destroy(cnn_ocl_stage *s) {
  if (!s) return;
  if (s->layers)
    for (size_t i = 0; i < s->count; i++) {
      ocl_layer *ol = &s->layers[i];
      release(ol->w);
      release(ol->b);
      release(ol->vw);
      release(ol->vb);
      release(ol->gw);
      release(ol->gb);
      release(ol->arg);
      release(ol->dz);
      cl_mem bn[] = {ol->z, ol->zerr, ol->zb, ol->mean, ol->var, ol->red,
                     ol->sc, ol->vs, ol->gs, ol->roll};
      for (size_t k = 0; k < sizeof bn / sizeof bn[0]; k++) release(bn[k]);
    }
  for (size_t i = 0; s->act && i <= s->count; i++) release(s->act[i]);
  for (size_t i = 0; s->err && i <= s->count; i++) release(s->err[i]);
  release(s->labels);
  release(s->loss);
  free(s->loss_host);
  free(s->layers);
  free(s->act);
  free(s->err);
  free(s);
}

/* A stage of count layers (copies of a network's, possibly reshaped for
 * a slice) whose first has network index first; err[0] when
 * input_error. */
static int create_stage(cnn_ocl *o, cl_command_queue queue,
                        const cnn_layer *layers, size_t count, size_t first,
                        bool input_error, uint32_t batch, cnn_ocl_stage **out,
                        char *err, size_t err_len) {
  /* the shapes cnn.cl's kernels index by, before any buffer is sized */
  for (size_t i = 0; i < count; i++) {
    char why[200];
    int bad = cnn_layer_check(&layers[i], i ? &layers[i - 1].out : NULL,
                              why, sizeof why);
    if (bad) {
      return errbuf_printf(err, err_len, bad, "cnn opencl stage: layer %zu: %s",
                           first + i, why);
    }
  }
  cnn_ocl_stage *s = calloc(1, sizeof *s);
  if (!s) return EMBER_ENOMEM;
  s->o = o;
  s->q = queue;
  s->first = first;
  s->count = count;
  s->batch = batch;
  s->layers = calloc(s->count, sizeof *s->layers);
  s->act = calloc(s->count + 1, sizeof *s->act);
  s->err = calloc(s->count + 1, sizeof *s->err);
  s->softmax = layers[count - 1].kind == CNN_LAYER_SOFTMAX;
  if (s->softmax) s->loss_host = malloc(sizeof *s->loss_host * batch);
  if (!s->layers || !s->act || !s->err || (s->softmax && !s->loss_host)) {
    cnn_ocl_stage_destroy(s);
    return EMBER_ENOMEM;
  }
  int rc = 0;
  size_t fb = sizeof(float);
  s->act[0] = new_buf(s, fb * batch * elems(layers[0].in), &rc);
  if (input_error)
    s->err[0] = new_buf(s, fb * batch * elems(layers[0].in), &rc);
  for (size_t i = 0; i < s->count; i++) {
    ocl_layer *ol = &s->layers[i];
    ol->l = layers[i];
    ol->index = first + i;
    size_t outb = fb * batch * elems(ol->l.out);
    s->act[i + 1] = new_buf(s, outb, &rc);
    s->err[i + 1] = new_buf(s, outb, &rc);
    if (ol->l.kind == CNN_LAYER_MAXPOOL)
      ol->arg = new_buf(s, sizeof(cl_int) * batch * elems(ol->l.out), &rc);
    if (ol->l.act != CNN_ACT_LINEAR &&
        (ol->l.kind == CNN_LAYER_CONV || ol->l.kind == CNN_LAYER_CONNECTED))
      ol->dz = new_buf(s, outb, &rc);
    if (ol->l.weights) {
      size_t wb = fb * ol->l.weights, bb = fb * ol->l.biases;
      ol->w = new_buf(s, wb, &rc);
      ol->vw = new_buf(s, wb, &rc);
      ol->gw = new_buf(s, wb, &rc);
      ol->b = new_buf(s, bb, &rc);
      ol->vb = new_buf(s, bb, &rc);
      ol->gb = new_buf(s, bb, &rc);
      if (!rc) rc = zero_buf(s, ol->w, wb);
      if (!rc) rc = zero_buf(s, ol->vw, wb);
      if (!rc) rc = zero_buf(s, ol->gw, wb);
      if (!rc) rc = zero_buf(s, ol->b, bb);
      if (!rc) rc = zero_buf(s, ol->vb, bb);
      if (!rc) rc = zero_buf(s, ol->gb, bb);
    }
    if (ol->l.batch_norm) {
      size_t cb = fb * ol->l.out.c;
      ol->z = new_buf(s, outb, &rc);
      ol->zerr = new_buf(s, outb, &rc);
      ol->zb = new_buf(s, cb, &rc);
      ol->mean = new_buf(s, cb, &rc);
      ol->var = new_buf(s, cb, &rc);
      ol->red = new_buf(s, 2 * cb, &rc);
      ol->sc = new_buf(s, cb, &rc);
      ol->vs = new_buf(s, cb, &rc);
      ol->gs = new_buf(s, cb, &rc);
      ol->roll = new_buf(s, 2 * cb, &rc);
      cl_mem zeroed[] = {ol->zb, ol->mean, ol->var, ol->sc, ol->vs, ol->gs};
      for (size_t k = 0; k < sizeof zeroed / sizeof zeroed[0]; k++)
        if (!rc) rc = zero_buf(s, zeroed[k], cb);
      if (!rc) rc = zero_buf(s, ol->roll, 2 * cb);
    }
  }
  if (s->softmax) {
    s->labels = new_buf(s, batch, &rc);
    s->loss = new_buf(s, fb * batch, &rc);
  }
  if (!rc) {
    cl_int cr = clFinish(queue);
    if (cr != CL_SUCCESS) rc = cl_fail(s, "clFinish", cr);
  }
  if (rc) {
    errbuf_printf(err, err_len, rc, "cnn opencl stage: %s", s->errbuf);
    cnn_ocl_stage_destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}

int cnn_ocl_stage_create(cnn_ocl *o, cl_command_queue queue,
                         const cnn_net *net, size_t first, size_t end,
                         uint32_t batch, cnn_ocl_stage **out, char *err,
                         size_t err_len) {
  size_t nl = 0;
  if (!out) return EMBER_EINVAL;
  *out = NULL;
  if (!o || !queue || !net) return EMBER_EINVAL;
  const cnn_layer *layers = cnn_net_layers(net, &nl);
  if (first >= end || end > nl || batch < 1 || batch > CNN_MAX_BATCH) {
    return errbuf_printf(
        err, err_len, EMBER_EINVAL,
        "cnn opencl stage: bad range %zu..%zu of %zu layers or batch %u", first,
        end, nl, (unsigned)batch);
  }
  return create_stage(o, queue, layers + first, end - first, first,
                      first > 0, batch, out, err, err_len);
}

int cnn_ocl_slice_create(cnn_ocl *o, cl_command_queue queue,
                         const cnn_net *net, size_t layer, uint32_t channels,
                         bool outputs, bool with_biases, uint32_t batch,
                         cnn_ocl_stage **out, char *err, size_t err_len) {
  size_t nl = 0;
  if (!out) return EMBER_EINVAL;
  *out = NULL;
  if (!o || !queue || !net) return EMBER_EINVAL;
  const cnn_layer *layers = cnn_net_layers(net, &nl);
  if (layer >= nl || batch < 1 || batch > CNN_MAX_BATCH) {
    return errbuf_printf(err, err_len, EMBER_EINVAL,
                         "cnn opencl slice: bad layer %zu of %zu or batch %u",
                         layer, nl, (unsigned)batch);
  }
  cnn_layer l;
  if (cnn_layer_slice(&layers[layer], channels, outputs, &l)) {
    return errbuf_printf(err, err_len, EMBER_EINVAL,
                         "cnn opencl slice: layer %zu is not convolutional or "
                         "connected, or %u %s channels out of its range",
                         layer, channels, outputs ? "output" : "input");
  }
  int rc = create_stage(o, queue, &l, 1, layer, !outputs || layer > 0,
                        batch, out, err, err_len);
  if (!rc) (*out)->no_biases = !outputs && !with_biases;
  return rc;
}

uint32_t cnn_ocl_stage_batch(const cnn_ocl_stage *s) { return s->batch; }

cnn_shape cnn_ocl_stage_input(const cnn_ocl_stage *s) {
  return s->layers[0].l.in;
}

cnn_shape cnn_ocl_stage_output(const cnn_ocl_stage *s) {
  return s->layers[s->count - 1].l.out;
}

const char *cnn_ocl_stage_error(const cnn_ocl_stage *s) { return s->errbuf; }

/* ---- FP ------------------------------------------------------------------- */

/* A batch-normalized convolution's normalisation of z into y: the
 * batch's statistics in training (moving the rolling ones after a
 * training FORWARD), the rolling ones in evaluation. */
static int bn_forward(cnn_ocl_stage *s, ocl_layer *ol, cl_mem y) {
  const cnn_layer *l = &ol->l;
  uint32_t N = s->batch;
  int C = (int)l->out.c, P = (int)(l->out.h * l->out.w);
  size_t cb = sizeof(float) * l->out.c;
  int rc;
  if (s->pass.mode == CNN_MODE_INFER) {
    rc = copy_buf(s, ol->roll, 0, ol->mean, 0, cb);
    if (!rc) rc = copy_buf(s, ol->roll, cb, ol->var, 0, cb);
  } else {
    rc = LAUNCH(s, K_BN_STATS, (size_t)C, A_MEM(ol->z), A_MEM(ol->mean),
                A_MEM(ol->var), A_INT(N), A_INT(C), A_INT(P));
    if (!rc && s->pass.mode == CNN_MODE_TRAIN)
      rc = LAUNCH(s, K_BN_ROLLING, (size_t)C, A_MEM(ol->roll),
                  A_MEM(ol->mean), A_MEM(ol->var), A_INT(C),
                  A_FLOAT(CNN_BN_MOMENTUM));
  }
  size_t total = (size_t)N * elems(l->out);
  if (!rc)
    rc = LAUNCH(s, K_BN_FWD, total, A_MEM(ol->z), A_MEM(ol->mean),
                A_MEM(ol->var), A_MEM(ol->sc), A_MEM(ol->b), A_MEM(y),
                A_ULONG(total), A_INT(C), A_INT(P), A_INT(l->act));
  return rc;
}

/* Dropout of x into y (a forward pass's activations, or a backward's
 * errors: the same mask). */
static int dropout(cnn_ocl_stage *s, ocl_layer *ol, cl_mem x, cl_mem y) {
  const cnn_layer *l = &ol->l;
  size_t K = elems(l->in), total = (size_t)s->batch * K;
  if (s->pass.mode == CNN_MODE_INFER)
    return copy_buf(s, x, 0, y, 0, sizeof(float) * total);
  return LAUNCH(s, K_DROPOUT, total, A_MEM(x), A_MEM(y), A_INT(s->batch),
                A_INT(K), A_ULONG(s->pass.seed), A_ULONG(s->pass.step),
                A_INT(ol->index), A_INT(s->pass.sample0),
                A_INT(cnn_dropout_threshold(l->probability)),
                A_FLOAT(cnn_dropout_scale(l->probability)));
}

static int forward_layer(cnn_ocl_stage *s, size_t i) {
  const cnn_layer *l = &s->layers[i].l;
  ocl_layer *ol = &s->layers[i];
  cl_mem x = s->act[i], y = s->act[i + 1];
  uint32_t N = s->batch;
  int rc;
  switch (l->kind) {
  case CNN_LAYER_CONV: {
    /* a batch-normalized convolution: no bias, into z */
    cl_mem bias = l->batch_norm ? ol->zb : ol->b;
    cl_mem z = l->batch_norm ? ol->z : y;
    rc = LAUNCH(s, K_CONV_FWD,
                blocked(l->out.c, (size_t)N * l->out.h * l->out.w),
                A_MEM(x), A_MEM(ol->w), A_MEM(bias), A_MEM(z), A_INT(N),
                A_INT(l->in.c),
                A_INT(l->in.h), A_INT(l->in.w), A_INT(l->out.c),
                A_INT(l->out.h), A_INT(l->out.w), A_INT(l->size),
                A_INT(l->stride), A_INT(l->padding),
                A_INT(l->batch_norm ? CNN_ACT_LINEAR : l->act));
    if (!rc && l->batch_norm) rc = bn_forward(s, ol, y);
    return rc;
  }
  case CNN_LAYER_MAXPOOL:
    return LAUNCH(s, K_POOL_FWD, (size_t)N * elems(l->out), A_MEM(x),
                  A_MEM(y), A_MEM(ol->arg), A_INT(N), A_INT(l->in.c),
                  A_INT(l->in.h), A_INT(l->in.w), A_INT(l->out.h),
                  A_INT(l->out.w), A_INT(l->size), A_INT(l->stride),
                  A_INT(l->padding / 2));
  case CNN_LAYER_CONNECTED:
    return LAUNCH(s, K_FC_FWD, blocked(N, elems(l->out)), A_MEM(x),
                  A_MEM(ol->w), A_MEM(ol->b), A_MEM(y), A_INT(N),
                  A_INT(elems(l->in)), A_INT(elems(l->out)),
                  A_INT(l->act));
  case CNN_LAYER_SOFTMAX:
    return LAUNCH(s, K_SOFTMAX, N, A_MEM(x), A_MEM(y), A_MEM(s->labels),
                  A_MEM(s->loss), A_MEM(s->err[i]), A_INT(N),
                  A_INT(elems(l->in)), A_INT(s->have_labels));
  case CNN_LAYER_AVGPOOL:
    return LAUNCH(s, K_AVG_FWD, (size_t)N * l->in.c, A_MEM(x), A_MEM(y),
                  A_ULONG((size_t)N * l->in.c),
                  A_INT(l->in.h * l->in.w));
  case CNN_LAYER_DROPOUT:
    return dropout(s, ol, x, y);
  }
  return EMBER_EINVAL;
}

static int forward_rest(cnn_ocl_stage *s, int rc, bool labels,
                        cl_mem out_mem, float *out, double *loss);

int cnn_ocl_stage_forward(cnn_ocl_stage *s, const float *in, float *out,
                          const uint8_t *labels, double *loss) {
  if (!s || !in) return EMBER_EINVAL;
  uint32_t N = s->batch;
  if (labels) {
    if (!s->softmax) return EMBER_EINVAL;
    size_t classes = elems(s->layers[s->count - 1].l.in);
    for (uint32_t n = 0; n < N; n++)
      if (labels[n] >= classes) return EMBER_EINVAL;
  }
  s->errbuf[0] = '\0';
  s->have_labels = false;
  int rc = write_buf(s, s->act[0], sizeof(float) * N *
                                       elems(s->layers[0].l.in), in);
  if (!rc && labels) rc = write_buf(s, s->labels, N, labels);
  return forward_rest(s, rc, labels != NULL, NULL, out, loss);
}

/* forward_rest: after the input (and labels) are in place, rc their
 * result: the layers, the output to out_mem and out, the loss. */
static int forward_rest(cnn_ocl_stage *s, int rc, bool labels,
                        cl_mem out_mem, float *out, double *loss) {
  uint32_t N = s->batch;
  size_t out_bytes = sizeof(float) * N * elems(cnn_ocl_stage_output(s));
  s->have_labels = labels;
  for (size_t i = 0; !rc && i < s->count; i++) rc = forward_layer(s, i);
  if (!rc && out_mem)
    rc = copy_buf(s, s->act[s->count], 0, out_mem, 0, out_bytes);
  if (!rc && out) rc = read_buf(s, s->act[s->count], out_bytes, out);
  if (!rc && labels) {
    rc = read_buf(s, s->loss, sizeof(float) * N, s->loss_host);
    if (!rc && loss) {
      double sum = 0;
      for (uint32_t n = 0; n < N; n++) sum += s->loss_host[n];
      *loss = sum / N;
    }
  }
  if (!rc) rc = finish(s);
  if (rc) s->have_labels = false;
  return rc;
}

int cnn_ocl_stage_forward_mem(cnn_ocl_stage *s, cl_mem in, size_t in_off,
                              cl_mem labels, size_t labels_off, cl_mem out,
                              float *host_out, double *loss) {
  if (!s || !in || (labels && !s->softmax)) return EMBER_EINVAL;
  uint32_t N = s->batch;
  s->errbuf[0] = '\0';
  s->have_labels = false;
  int rc = copy_buf(s, in, in_off, s->act[0], 0,
                    sizeof(float) * N * elems(s->layers[0].l.in));
  if (!rc && labels) rc = copy_buf(s, labels, labels_off, s->labels, 0, N);
  return forward_rest(s, rc, labels != NULL, out, host_out, loss);
}

/* ---- EB and PG ------------------------------------------------------------ */

/* The normalisation's backward: from e (the error at its output, through
 * the activation already) into ol->zerr, the shift's and scale's
 * gradients added to. */
static int bn_backward(cnn_ocl_stage *s, ocl_layer *ol, cl_mem e) {
  const cnn_layer *l = &ol->l;
  uint32_t N = s->batch;
  int C = (int)l->out.c, P = (int)(l->out.h * l->out.w);
  size_t total = (size_t)N * elems(l->out);
  int rc = LAUNCH(s, K_BN_BWD_REDUCE, (size_t)C, A_MEM(ol->z), A_MEM(e),
                  A_MEM(ol->mean), A_MEM(ol->var), A_MEM(ol->red),
                  A_MEM(ol->gb), A_MEM(ol->gs), A_INT(N), A_INT(C),
                  A_INT(P));
  if (!rc)
    rc = LAUNCH(s, K_BN_BWD_DATA, total, A_MEM(ol->z), A_MEM(e),
                A_MEM(ol->mean), A_MEM(ol->var), A_MEM(ol->sc),
                A_MEM(ol->red), A_MEM(ol->zerr), A_ULONG(total), A_INT(C),
                A_INT(P), A_FLOAT((float)N * (float)P));
  return rc;
}

/* backward_layer: PG of layer i and, when eb, EB into err[i], from
 * err[i + 1]. */
static int backward_layer(cnn_ocl_stage *s, size_t i, bool eb) {
  const cnn_layer *l = &s->layers[i].l;
  ocl_layer *ol = &s->layers[i];
  cl_mem x = s->act[i], y = s->act[i + 1], dy = s->err[i + 1], dx = s->err[i];
  uint32_t N = s->batch;
  size_t nout = (size_t)N * elems(l->out);
  int rc = 0;
  if (ol->dz) {
    rc = LAUNCH(s, K_ACT_BWD, nout, A_MEM(y), A_MEM(dy), A_MEM(ol->dz),
                A_ULONG(nout), A_INT(l->act));
    dy = ol->dz;  /* the error before the activation */
  }
  if (!rc && l->batch_norm) {
    rc = bn_backward(s, ol, dy);
    dy = ol->zerr;  /* the convolution's output error */
  }
  if (rc) return rc;
  switch (l->kind) {
  case CNN_LAYER_CONV:
    rc = LAUNCH(s, K_CONV_BWD_WEIGHTS,
                blocked(l->out.c, (size_t)l->in.c * l->size * l->size),
                A_MEM(x), A_MEM(dy), A_MEM(ol->gw), A_INT(N), A_INT(l->in.c),
                A_INT(l->in.h), A_INT(l->in.w), A_INT(l->out.c),
                A_INT(l->out.h), A_INT(l->out.w), A_INT(l->size),
                A_INT(l->stride), A_INT(l->padding));
    if (!rc && !l->batch_norm)
      rc = LAUNCH(s, K_BIAS_GRAD, l->out.c, A_MEM(dy), A_MEM(ol->gb),
                  A_INT(N), A_INT(l->out.c), A_INT(l->out.h * l->out.w));
    if (!rc && eb)
      rc = LAUNCH(s, K_CONV_BWD_DATA,
                  blocked(l->in.c, (size_t)N * l->in.h * l->in.w),
                  A_MEM(dy), A_MEM(ol->w), A_MEM(dx), A_INT(N), A_INT(l->in.c),
                  A_INT(l->in.h), A_INT(l->in.w), A_INT(l->out.c),
                  A_INT(l->out.h), A_INT(l->out.w), A_INT(l->size),
                  A_INT(l->stride), A_INT(l->padding));
    return rc;
  case CNN_LAYER_MAXPOOL:
    if (!eb) return 0;
    return LAUNCH(s, K_POOL_BWD, (size_t)N * elems(l->in), A_MEM(dy),
                  A_MEM(ol->arg), A_MEM(dx), A_INT(N), A_INT(l->in.c),
                  A_INT(l->in.h), A_INT(l->in.w), A_INT(l->out.h),
                  A_INT(l->out.w), A_INT(l->size), A_INT(l->stride),
                  A_INT(l->padding / 2));
  case CNN_LAYER_CONNECTED:
    rc = LAUNCH(s, K_FC_BWD_WEIGHTS, blocked(elems(l->out), elems(l->in)),
                A_MEM(x), A_MEM(dy), A_MEM(ol->gw), A_INT(N),
                A_INT(elems(l->in)), A_INT(elems(l->out)));
    if (!rc)
      rc = LAUNCH(s, K_BIAS_GRAD, elems(l->out), A_MEM(dy), A_MEM(ol->gb),
                  A_INT(N), A_INT(elems(l->out)), A_INT(1));
    if (!rc && eb)
      rc = LAUNCH(s, K_FC_BWD_DATA, blocked(N, elems(l->in)), A_MEM(dy),
                  A_MEM(ol->w), A_MEM(dx), A_INT(N), A_INT(elems(l->in)),
                  A_INT(elems(l->out)));
    return rc;
  case CNN_LAYER_AVGPOOL:
    if (!eb) return 0;
    return LAUNCH(s, K_AVG_BWD, (size_t)N * elems(l->in), A_MEM(dy),
                  A_MEM(dx), A_ULONG((size_t)N * elems(l->in)),
                  A_INT(l->in.h * l->in.w));
  case CNN_LAYER_DROPOUT:
    return eb ? dropout(s, ol, dy, dx) : 0;
  case CNN_LAYER_SOFTMAX:
    return 0;   /* its gradient came with the forward pass */
  }
  return EMBER_EINVAL;
}

int cnn_ocl_stage_backward(cnn_ocl_stage *s, const float *dout, float *din) {
  if (!s) return EMBER_EINVAL;
  if (s->softmax ? !s->have_labels : !dout) return EMBER_EINVAL;
  if (din && !s->err[0]) return EMBER_EINVAL;
  s->errbuf[0] = '\0';
  uint32_t N = s->batch;
  int rc = 0;
  if (!s->softmax)
    rc = write_buf(s, s->err[s->count],
                   sizeof(float) * N * elems(cnn_ocl_stage_output(s)), dout);
  for (size_t i = s->count; !rc && i-- > 0;)
    rc = backward_layer(s, i, i > 0 || din != NULL);
  if (!rc && din)
    rc = read_buf(s, s->err[0],
                  sizeof(float) * N * elems(cnn_ocl_stage_input(s)), din);
  if (!rc) rc = finish(s);
  return rc;
}

int cnn_ocl_stage_backward_mem(cnn_ocl_stage *s, cl_mem dout, cl_mem din) {
  if (!s) return EMBER_EINVAL;
  if (s->softmax ? !s->have_labels : !dout) return EMBER_EINVAL;
  if (din && !s->err[0]) return EMBER_EINVAL;
  s->errbuf[0] = '\0';
  uint32_t N = s->batch;
  int rc = 0;
  if (!s->softmax)
    rc = copy_buf(s, dout, 0, s->err[s->count], 0,
                  sizeof(float) * N * elems(cnn_ocl_stage_output(s)));
  for (size_t i = s->count; !rc && i-- > 0;)
    rc = backward_layer(s, i, i > 0 || din != NULL);
  if (!rc && din)
    rc = copy_buf(s, s->err[0], 0, din, 0,
                  sizeof(float) * N * elems(cnn_ocl_stage_input(s)));
  if (!rc) rc = finish(s);
  return rc;
}

/* ---- SGD and parameters ------------------------------------------------------ */

static int sgd(cnn_ocl_stage *s, cl_mem w, cl_mem v, cl_mem g, uint64_t n,
               double learning_rate, double momentum, double decay) {
  return LAUNCH(s, K_SGD, (size_t)n, A_MEM(w), A_MEM(v), A_MEM(g),
                A_ULONG(0), A_ULONG(0), A_ULONG(0), A_ULONG(n), A_FLOAT(1),
                A_FLOAT(learning_rate), A_FLOAT(momentum), A_FLOAT(decay));
}

int cnn_ocl_sgd(cnn_ocl *o, cl_command_queue q, cl_mem buf, uint64_t w_off,
                uint64_t v_off, uint64_t g_off, uint64_t n, float scale,
                float learning_rate, float momentum, float decay, char *err,
                size_t err_len) {
  if (!o || !q || !buf) return EMBER_EINVAL;
  const karg args[] = {A_MEM(buf),          A_MEM(buf),
                       A_MEM(buf),          A_ULONG(w_off),
                       A_ULONG(v_off),      A_ULONG(g_off),
                       A_ULONG(n),          A_FLOAT(scale),
                       A_FLOAT(learning_rate), A_FLOAT(momentum),
                       A_FLOAT(decay)};
  return launch_on(o, q, K_SGD, (size_t)n, args, sizeof args / sizeof *args,
                   err, err_len);
}

int cnn_ocl_add(cnn_ocl *o, cl_command_queue q, cl_mem x, uint64_t x_off,
                cl_mem y, uint64_t y_off, uint64_t n, char *err,
                size_t err_len) {
  if (!o || !q || !x || !y) return EMBER_EINVAL;
  const karg args[] = {A_MEM(x), A_ULONG(x_off), A_MEM(y), A_ULONG(y_off),
                       A_ULONG(n)};
  return launch_on(o, q, K_ADD, (size_t)n, args, sizeof args / sizeof *args,
                   err, err_len);
}

int cnn_ocl_act_keep(cnn_ocl *o, cl_command_queue q, cl_mem y, cl_mem kept,
                     uint64_t k_off, uint64_t n, cnn_activation act,
                     bool keep, char *err, size_t err_len) {
  if (!o || !q || !y || !kept) return EMBER_EINVAL;
  const karg args[] = {A_MEM(y), A_MEM(kept), A_ULONG(k_off), A_ULONG(n),
                       A_INT(act), A_INT(keep)};
  return launch_on(o, q, K_ACT_KEEP, (size_t)n, args,
                   sizeof args / sizeof *args, err, err_len);
}

int cnn_ocl_act_mask(cnn_ocl *o, cl_command_queue q, cl_mem kept,
                     uint64_t k_off, cl_mem e, uint64_t n, cnn_activation act,
                     char *err, size_t err_len) {
  if (!o || !q || !kept || !e) return EMBER_EINVAL;
  const karg args[] = {A_MEM(kept), A_ULONG(k_off), A_MEM(e), A_ULONG(n),
                       A_INT(act)};
  return launch_on(o, q, K_ACT_MASK, (size_t)n, args,
                   sizeof args / sizeof *args, err, err_len);
}

int cnn_ocl_stage_update(cnn_ocl_stage *s, double learning_rate,
                         double momentum, double decay) {
  if (!s) return EMBER_EINVAL;
  s->errbuf[0] = '\0';
  int rc = 0;
  for (size_t i = 0; !rc && i < s->count; i++) {
    ocl_layer *ol = &s->layers[i];
    if (!ol->l.weights) continue;
    rc = sgd(s, ol->w, ol->vw, ol->gw, ol->l.weights, learning_rate,
             momentum, decay);
    if (!rc)
      rc = sgd(s, ol->b, ol->vb, ol->gb, ol->l.biases, learning_rate,
               momentum, 0);
    if (!rc && ol->sc) /* scales as biases: no decay */
      rc = sgd(s, ol->sc, ol->vs, ol->gs, ol->l.scales, learning_rate,
               momentum, 0);
  }
  if (!rc) rc = finish(s);
  return rc;
}

/* param_layer: the stage's layer of network index layer, with parameters;
 * NULL otherwise. */
static ocl_layer *param_layer(cnn_ocl_stage *s, size_t layer) {
  if (!s || layer < s->first || layer - s->first >= s->count) return NULL;
  ocl_layer *ol = &s->layers[layer - s->first];
  return ol->l.weights ? ol : NULL;
}

static int read_pair(cnn_ocl_stage *s, const ocl_layer *ol, cl_mem w,
                     cl_mem b, float *weights, float *biases) {
  s->errbuf[0] = '\0';
  int rc = read_buf(s, w, sizeof(float) * ol->l.weights, weights);
  if (!rc) rc = read_buf(s, b, sizeof(float) * ol->l.biases, biases);
  return rc;
}

int cnn_ocl_stage_get_params(cnn_ocl_stage *s, size_t layer, float *weights,
                             float *biases) {
  ocl_layer *ol = param_layer(s, layer);
  if (!ol || !weights || !biases) return EMBER_EINVAL;
  return read_pair(s, ol, ol->w, ol->b, weights, biases);
}

int cnn_ocl_stage_get_grads(cnn_ocl_stage *s, size_t layer, float *weights,
                            float *biases) {
  ocl_layer *ol = param_layer(s, layer);
  if (!ol || !weights || !biases) return EMBER_EINVAL;
  return read_pair(s, ol, ol->gw, ol->gb, weights, biases);
}

int cnn_ocl_stage_set_params(cnn_ocl_stage *s, size_t layer,
                             const float *weights, const float *biases) {
  ocl_layer *ol = param_layer(s, layer);
  if (!ol || !weights || !biases) return EMBER_EINVAL;
  s->errbuf[0] = '\0';
  int rc = write_buf(s, ol->w, sizeof(float) * ol->l.weights, weights);
  if (!rc) rc = write_buf(s, ol->b, sizeof(float) * ol->l.biases, biases);
  return rc;
}

/* The batch-normalized layer of network index layer, or NULL. */
static ocl_layer *norm_layer(cnn_ocl_stage *s, size_t layer) {
  ocl_layer *ol = param_layer(s, layer);
  return ol && ol->sc ? ol : NULL;
}

int cnn_ocl_stage_set_norm(cnn_ocl_stage *s, size_t layer,
                           const float *scales, const float *rolling) {
  ocl_layer *ol = norm_layer(s, layer);
  if (!ol || !scales || !rolling) return EMBER_EINVAL;
  s->errbuf[0] = '\0';
  int rc = write_buf(s, ol->sc, sizeof(float) * ol->l.scales, scales);
  if (!rc) rc = write_buf(s, ol->roll, sizeof(float) * ol->l.rolling,
                          rolling);
  return rc;
}

int cnn_ocl_stage_get_norm(cnn_ocl_stage *s, size_t layer, float *scales,
                           float *rolling) {
  ocl_layer *ol = norm_layer(s, layer);
  if (!ol || !scales || !rolling) return EMBER_EINVAL;
  s->errbuf[0] = '\0';
  int rc = read_buf(s, ol->sc, sizeof(float) * ol->l.scales, scales);
  if (!rc) rc = read_buf(s, ol->roll, sizeof(float) * ol->l.rolling,
                         rolling);
  return rc;
}

int cnn_ocl_stage_get_norm_grads(cnn_ocl_stage *s, size_t layer,
                                 float *scales) {
  ocl_layer *ol = norm_layer(s, layer);
  if (!ol || !scales) return EMBER_EINVAL;
  s->errbuf[0] = '\0';
  return read_buf(s, ol->gs, sizeof(float) * ol->l.scales, scales);
}

void cnn_ocl_stage_set_pass(cnn_ocl_stage *s, const cnn_pass *pass) {
  if (s && pass) s->pass = *pass;
}

int cnn_ocl_stage_forward_pass(cnn_ocl_stage *s, const float *in, float *out,
                               const uint8_t *labels, double *loss,
                               const cnn_pass *pass) {
  if (!s || !pass || (unsigned)pass->mode > CNN_MODE_INFER)
    return EMBER_EINVAL;
  s->pass = *pass;
  return cnn_ocl_stage_forward(s, in, out, labels, loss);
}

/* The layer's buffers of part, in cnn_layout.h's order, and their floats:
 * parameters (weights, biases, scales, rolling statistics), gradients
 * (the same, none for the rolling statistics), or the rolling statistics
 * alone, at their place after the others. */
typedef struct part_bufs {
  cl_mem m[4];
  size_t n[4];
  size_t skip;   /* floats before the first, from the layer's start */
} part_bufs;

static part_bufs part_of(const cnn_ocl_stage *s, const ocl_layer *ol,
                         cnn_ocl_part part) {
  const cnn_layer *l = &ol->l;
  part_bufs p = {{NULL}, {0}, 0};
  bool grads = part == CNN_OCL_GRADS;
  if (part == CNN_OCL_ROLLING) {
    p.skip = (size_t)(l->weights + l->biases + l->scales);
    p.m[0] = ol->roll;
    p.n[0] = (size_t)l->rolling;
    return p;
  }
  p.m[0] = grads ? ol->gw : ol->w;
  p.n[0] = (size_t)l->weights;
  if (!s->no_biases) {
    p.m[1] = grads ? ol->gb : ol->b;
    p.n[1] = (size_t)l->biases;
  }
  if (ol->sc) {
    p.m[2] = grads ? ol->gs : ol->sc;
    p.n[2] = (size_t)l->scales;
    p.m[3] = grads ? NULL : ol->roll;
    p.n[3] = (size_t)l->rolling;
  }
  return p;
}

/* Copy part of layer to or from buf at byte offset off (the layer's
 * start): its buffers at their places. */
static int copy_part(cnn_ocl_stage *s, size_t layer, cnn_ocl_part part,
                     cl_mem buf, size_t off, bool load) {
  ocl_layer *ol = param_layer(s, layer);
  if (!ol || !buf || (part == CNN_OCL_ROLLING && !ol->roll))
    return EMBER_EINVAL;
  part_bufs p = part_of(s, ol, part);
  const cnn_layer *l = &ol->l;
  size_t at = off + sizeof(float) * p.skip;
  const size_t place[4] = {0, (size_t)l->weights,
                           (size_t)(l->weights + l->biases),
                           (size_t)(l->weights + l->biases + l->scales)};
  s->errbuf[0] = '\0';
  int rc = 0;
  for (int k = 0; k < 4 && !rc; k++) {
    if (!p.m[k]) continue;
    size_t o = part == CNN_OCL_ROLLING ? at : off + sizeof(float) * place[k];
    rc = load ? copy_buf(s, buf, o, p.m[k], 0, sizeof(float) * p.n[k])
              : copy_buf(s, p.m[k], 0, buf, o, sizeof(float) * p.n[k]);
  }
  return rc;
}

int cnn_ocl_stage_load(cnn_ocl_stage *s, size_t layer, cnn_ocl_part part,
                       cl_mem src, size_t off) {
  return copy_part(s, layer, part, src, off, true);
}

int cnn_ocl_stage_store(cnn_ocl_stage *s, size_t layer,
                        cnn_ocl_part part, cl_mem dst, size_t off) {
  return copy_part(s, layer, part, dst, off, false);
}
