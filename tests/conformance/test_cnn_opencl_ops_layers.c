/*
 * test_cnn_opencl_ops_layers.c - the cnn descriptor's OpenCL ops
 * (cnn_exec_opencl.c) against its run_cpu on darknet's small classifier
 * (accelerators/cnn/nets/darknet_small.cfg: batch-normalized leaky
 * convolutions, max-pools, dropout, a 1x1 convolution, the global
 * avg-pool, the softmax) as 2 stages, layers [0, 4) and [4, 9), batch 6,
 * 2 slots, on random images with random labels:
 *   INIT; then 3 steps of FORWARD of two micro-batches of one mini-batch
 *   (slots 0 and 1, sample offsets 0 and 6: dropout's keys) through both
 *   stages, the second micro-batch's FORWARDs before the first's
 *   BACKWARDs (so each BACKWARD re-runs its own FORWARD's mask), the
 *   BACKWARDs back through the stages, UPDATE of each with accumulated 2;
 *   then an inference FORWARD through both; GET_PARAMS.
 * Activations and errors go between the stages through the host (the
 * device-only blocks are test_cnn_opencl_ops' business).
 *
 * Then one step of ICP slices of a leaky connected layer and a logistic
 * convolution ([0, c) and [c, C)): the partial sums, the output (the last
 * slice's activation), dz through its derivative, each slice's input
 * error and the updated parameters, within 1e-4 of the CPU's.
 *
 * Checked: every FORWARD's loss within 1e-4 relative of the CPU's, the
 * correct counts within 1, the inference FORWARD too; each stage's
 * parameters after training (weights, biases, scales and the rolling
 * statistics the FORWARDs moved) within 1e-4 of the CPU's relative to
 * their norm; after the inference FORWARD the slot still free (a BACKWARD
 * refused with EMBER_ESTATE on both paths) and the parameters unchanged.
 * Exit 77 (skipped) when no OpenCL device exists.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_layout.h"
#include "cnn_net.h"
#include "cnn_ops_harness.h"
#include "ember/ember_errors.h"

#define NET EMBER_SOURCE_DIR "/accelerators/cnn/nets/darknet_small.cfg"
#define TOL 1e-4

enum { B = 6, SLOTS = 2, STEPS = 3, SPLIT = 4, LAYERS = 9, PX = 28 * 28,
       CLASSES = 10 };

static ops_harness h;

typedef struct op {
  Ember__Cnn__Op op;
  uint32_t first, end, slot, accumulated;
  uint64_t step;
  uint32_t sample0;
  int inference;
  uint32_t c0, c1;   /* an ICP slice's input channels; c1 0: none */
} op;

static Ember__Cnn__Params params_of(const op *o) {
  Ember__Cnn__Params p =
      ops_params(&h, o->op, o->first, o->end, o->slot, o->accumulated);
  p.has_step = p.has_sample_offset = 1;
  p.step = o->step;
  p.sample_offset = o->sample0;
  p.has_inference = 1;
  p.inference = o->inference;
  if (o->c1) {
    p.has_channel_begin = p.has_channel_end = 1;
    p.channel_begin = o->c0;
    p.channel_end = o->c1;
  }
  return p;
}

/* One task on one path: inputs and out blocks host bytes (the device
 * path's copied in and out). Returns run's code; the Result in *res. */
static int task(int device, const op *o, const acc_block *in, size_t n_in,
                void *state, size_t state_bytes, acc_mut_block *outs,
                size_t n_out, Ember__Cnn__Result *res, char *err,
                size_t err_len) {
  Ember__Cnn__Params p = params_of(o);
  acc_task_plan plan;
  void *prep = ops_prepare(&h, &p, in, n_in, state_bytes, n_out, &plan);
  ops_host_outputs(&plan, outs, n_out);
  if (!device) {
    acc_mut_block st = {state, state_bytes};
    return ops_run_cpu(&h, prep, in, n_in, &st, outs, n_out, res, err,
                       err_len);
  }
  void *mems[4] = {NULL}, *out_mems[4] = {NULL}, *st = state;
  cl_int crc;
  for (size_t i = 0; i < n_in; i++) {
    mems[i] = clCreateBuffer(h.ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                             in[i].size, (void *)in[i].data, &crc);
    MUST(crc == CL_SUCCESS, "clCreateBuffer: %d", crc);
  }
  for (size_t i = 0; i < n_out; i++) {
    out_mems[i] = clCreateBuffer(h.ctx, CL_MEM_READ_WRITE, outs[i].size, NULL,
                                 &crc);
    MUST(crc == CL_SUCCESS, "clCreateBuffer: %d", crc);
  }
  acc_run_ctx rctx = {0};
  rctx.n_states = 1;
  rctx.dev_states = &st;
  rctx.n_outputs = n_out;
  rctx.dev_outputs = out_mems;
  acc_output out = {0};
  int rc = h.acc->opencl->run(h.state, h.queue, prep, in, mems, n_in, NULL,
                              0, &rctx, &out, err, err_len);
  for (size_t i = 0; !rc && i < n_out; i++)
    MUST(clEnqueueReadBuffer(h.queue, out_mems[i], CL_TRUE, 0, outs[i].size,
                             outs[i].data, 0, NULL, NULL) == CL_SUCCESS,
         "read back");
  for (size_t i = 0; i < n_in; i++) clReleaseMemObject(mems[i]);
  for (size_t i = 0; i < n_out; i++) clReleaseMemObject(out_mems[i]);
  return ops_finish(&h, rc, &out, prep, res);
}

static void ok(int rc, const char *path, const op *o, const char *err) {
  MUST(rc == 0, "%s: op %d on %u..%u slot %u: %s: %s", path, (int)o->op,
       o->first, o->end - 1, o->slot, ember_errname(rc), err);
}

static const uint32_t first_of[2] = {0, SPLIT}, end_of[2] = {SPLIT, LAYERS};

typedef struct stage_pair {
  uint8_t *cpu;
  cl_mem ocl;
  size_t size;
} stage_pair;

/* Both paths' op o on stage s; outs[path][i] its out blocks. */
static void both(const op *o, stage_pair *st, int s, const acc_block *in_cpu,
                 const acc_block *in_ocl, size_t n_in,
                 acc_mut_block outs[2][2], size_t n_out,
                 Ember__Cnn__Result res[2]) {
  char err[512] = "";
  ok(task(0, o, in_cpu, n_in, st[s].cpu, st[s].size, outs[0], n_out, &res[0],
          err, sizeof err), "cpu", o, err);
  ok(task(1, o, in_ocl, n_in, st[s].ocl, st[s].size, outs[1], n_out, &res[1],
          err, sizeof err), "opencl", o, err);
}

static void forward_both(stage_pair *st, const float *x,
                         const uint8_t *labels, uint32_t slot, uint64_t step,
                         uint32_t sample0, int inference, const char *what) {
  acc_mut_block a[2][2] = {{{0}}}, pr[2][2] = {{{0}}};
  Ember__Cnn__Result res[2];
  op f1 = {EMBER__CNN__OP__FORWARD, 0, SPLIT, slot, 0, step, sample0,
           inference, 0, 0};
  acc_block in1 = {(const uint8_t *)x, (size_t)B * PX * sizeof(float)};
  both(&f1, st, 0, &in1, &in1, 1, a, 1, res);
  op f2 = {EMBER__CNN__OP__FORWARD, SPLIT, LAYERS, slot, 0, step, sample0,
           inference, 0, 0};
  acc_block in_cpu[2] = {{a[0][0].data, a[0][0].size}, {labels, B}};
  acc_block in_ocl[2] = {{a[1][0].data, a[1][0].size}, {labels, B}};
  both(&f2, st, 1, in_cpu, in_ocl, 2, pr, 1, res);
  ops_expect_forward(what, &res[1], &res[0], TOL);
  for (int p = 0; p < 2; p++) {
    free(a[p][0].data);
    free(pr[p][0].data);
  }
}

static void backward_both(stage_pair *st, uint32_t slot) {
  acc_mut_block d[2][2] = {{{0}}}, none[2][2] = {{{0}}};
  Ember__Cnn__Result res[2];
  op b2 = {EMBER__CNN__OP__BACKWARD, SPLIT, LAYERS, slot, 0, 0, 0, 0, 0,
           0};
  both(&b2, st, 1, NULL, NULL, 0, d, 1, res);
  op b1 = {EMBER__CNN__OP__BACKWARD, 0, SPLIT, slot, 0, 0, 0, 0, 0, 0};
  acc_block in_cpu = {d[0][0].data, d[0][0].size};
  acc_block in_ocl = {d[1][0].data, d[1][0].size};
  both(&b1, st, 0, &in_cpu, &in_ocl, 1, none, 0, res);
  free(d[0][0].data);
  free(d[1][0].data);
}

/* Both paths' parameters of stage s, compared; *cpu_out (malloc'd) the
 * CPU's, *n_out their count. */
static void compare_params(stage_pair *st, int s, float **cpu_out,
                           size_t *n_out) {
  acc_mut_block p[2][2] = {{{0}}};
  Ember__Cnn__Result res[2];
  op g = {EMBER__CNN__OP__GET_PARAMS, first_of[s], end_of[s], 0, 0, 0, 0, 0,
          0, 0};
  both(&g, st, s, NULL, NULL, 0, p, 1, res);
  size_t n = p[0][0].size / sizeof(float);
  ops_expect_params(s, (const float *)(const void *)p[1][0].data,
                    (const float *)(const void *)p[0][0].data, n, TOL);
  *cpu_out = (float *)(void *)p[0][0].data;
  *n_out = n;
  free(p[1][0].data);
}

/* ---- ICP slices of a leaky and a logistic layer ----------------------- */

/* Layer 0 of text cut in two input-channel slices [0, c) and [c, C), one
 * step of FORWARD (the chain of partial sums, the last slice applying the
 * activation and keeping its output), BACKWARD (the last slice's dz
 * through the activation's derivative, each slice's input error) and
 * UPDATE on both paths: every block and the parameters within TOL. */
static void icp_step(const char *text, uint32_t c, uint32_t C, size_t nin,
                     size_t nout) {
  char *keep = h.cfg;
  size_t keep_len = h.cfg_len;
  h.cfg = (char *)text;
  h.cfg_len = strlen(text);
  cnn_net *net = NULL;
  char err[512] = "";
  MUST(cnn_cfg_parse(h.cfg, h.cfg_len, h.name, &net, err, sizeof err) == 0,
       "%s", err);
  const uint32_t cut[3] = {0, c, C};
  stage_pair st[2];
  for (int k = 0; k < 2; k++) {
    cnn_layout L;
    MUST(cnn_layout_compute_slice(net, 0, cut[k], cut[k + 1], B, SLOTS,
                                  &L) == 0, "layout");
    st[k].size = (size_t)L.total;
    st[k].cpu = xcalloc(st[k].size, 1);
    cl_int rc;
    st[k].ocl = clCreateBuffer(h.ctx, CL_MEM_READ_WRITE, st[k].size, NULL,
                               &rc);
    MUST(rc == CL_SUCCESS, "clCreateBuffer: %d", rc);
    acc_mut_block none[2][2];
    Ember__Cnn__Result res[2];
    op init = {EMBER__CNN__OP__INIT, 0, 1, 0, 0, 0, 0, 0, cut[k],
               cut[k + 1]};
    both(&init, st, k, NULL, NULL, 0, none, 0, res);
  }
  float *x = xcalloc(B * nin, sizeof *x), *dy = xcalloc(B * nout, 4);
  uint64_t rng = 5;
  for (size_t i = 0; i < B * nin; i++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)(rng >> 40) / (float)(1 << 23) - 1;
  }
  for (size_t i = 0; i < B * nout; i++) dy[i] = (float)(i % 7) / 7 - 0.4f;
  Ember__Cnn__Result res[2];
  /* FORWARD: slice 0's partial sums, then slice 1 adds and activates */
  acc_mut_block part[2][2] = {{{0}}}, y[2][2] = {{{0}}};
  acc_block in0 = {(const uint8_t *)x, B * nin * sizeof *x};
  op f0 = {EMBER__CNN__OP__FORWARD, 0, 1, 0, 0, 0, 0, 0, 0, c};
  both(&f0, st, 0, &in0, &in0, 1, part, 1, res);
  op f1 = {EMBER__CNN__OP__FORWARD, 0, 1, 0, 0, 0, 0, 0, c, C};
  acc_block in_cpu[2] = {in0, {part[0][0].data, part[0][0].size}};
  acc_block in_ocl[2] = {in0, {part[1][0].data, part[1][0].size}};
  both(&f1, st, 1, in_cpu, in_ocl, 2, y, 1, res);
  /* BACKWARD: the last slice's input error and dz, then the first's */
  acc_mut_block e1[2][2] = {{{0}}}, e0[2][2] = {{{0}}};
  acc_block dyb = {(const uint8_t *)dy, B * nout * sizeof *dy};
  op b1 = {EMBER__CNN__OP__BACKWARD, 0, 1, 0, 0, 0, 0, 0, c, C};
  both(&b1, st, 1, &dyb, &dyb, 1, e1, 2, res);
  op b0 = {EMBER__CNN__OP__BACKWARD, 0, 1, 0, 0, 0, 0, 0, 0, c};
  acc_block dz_cpu = {e1[0][1].data, e1[0][1].size};
  acc_block dz_ocl = {e1[1][1].data, e1[1][1].size};
  both(&b0, st, 0, &dz_cpu, &dz_ocl, 1, e0, 1, res);
  struct {
    const char *what;
    acc_mut_block *b;
  } blocks[] = {{"partial sums", part[0]}, {"output", y[0]},
                {"last slice's input error", e1[0]},
                {"first slice's input error", e0[0]}};
  acc_mut_block *pairs[][2] = {{part[0], part[1]}, {y[0], y[1]},
                               {e1[0], e1[1]}, {e0[0], e0[1]}};
  for (size_t k = 0; k < 4; k++) {
    double r = ops_rel_diff((const float *)(const void *)pairs[k][1][0].data,
                            (const float *)(const void *)pairs[k][0][0].data,
                            pairs[k][0][0].size / 4, NULL);
    CHECK(r <= TOL, "%s relative difference %.3g", blocks[k].what, r);
  }
  {
    const float *a = (const float *)(const void *)e1[0][1].data;
    const float *b = (const float *)(const void *)e1[1][1].data;
    size_t nonzero = 0;
    for (size_t i = 0; i < B * nout; i++) nonzero += a[i] != 0;
    double r = ops_rel_diff(b, a, B * nout, NULL);
    CHECK(nonzero > 0 && r <= TOL, "dz relative difference %.3g", r);
  }
  for (int k = 0; k < 2; k++) {
    acc_mut_block none[2][2];
    op u = {EMBER__CNN__OP__UPDATE, 0, 1, 0, 1, 0, 0, 0, cut[k],
            cut[k + 1]};
    both(&u, st, k, NULL, NULL, 0, none, 0, res);
    acc_mut_block p[2][2] = {{{0}}};
    op g = {EMBER__CNN__OP__GET_PARAMS, 0, 1, 0, 0, 0, 0, 0, cut[k],
            cut[k + 1]};
    both(&g, st, k, NULL, NULL, 0, p, 1, res);
    double r = ops_rel_diff((const float *)(const void *)p[1][0].data,
                            (const float *)(const void *)p[0][0].data,
                            p[0][0].size / 4, NULL);
    CHECK(r <= TOL, "slice %d parameters: relative difference %.3g", k, r);
    free(p[0][0].data);
    free(p[1][0].data);
  }
  const char *act = strstr(text, "activation=");
  printf("ICP slices [0, %u) [%u, %u), %.*s: blocks and parameters "
         "compared\n", c, c, C, (int)strcspn(act, "\n"), act);
  for (int p = 0; p < 2; p++) {
    free(part[p][0].data), free(y[p][0].data), free(e1[p][0].data),
        free(e1[p][1].data), free(e0[p][0].data);
    free(st[p].cpu);
    clReleaseMemObject(st[p].ocl);
  }
  free(x), free(dy);
  cnn_net_destroy(net);
  h.cfg = keep;
  h.cfg_len = keep_len;
}

int main(void) {
  if (!ops_open(&h, NET, "net", B, SLOTS, 0)) return SKIP;
  stage_pair st[2];
  for (int s = 0; s < 2; s++) {
    st[s].size = ops_state_size(&h, first_of[s], end_of[s]);
    st[s].cpu = xcalloc(st[s].size, 1);
    cl_int rc;
    st[s].ocl = clCreateBuffer(h.ctx, CL_MEM_READ_WRITE, st[s].size, NULL, &rc);
    MUST(rc == CL_SUCCESS, "clCreateBuffer: %d", rc);
    acc_mut_block none[2][2];
    Ember__Cnn__Result res[2];
    op init = {EMBER__CNN__OP__INIT, first_of[s], end_of[s], 0, 0, 0, 0, 0,
               0, 0};
    both(&init, st, s, NULL, NULL, 0, none, 0, res);
  }
  float *x[SLOTS];
  uint8_t labels[SLOTS][B];
  uint64_t rng = 99;
  for (int k = 0; k < SLOTS; k++) x[k] = xcalloc((size_t)B * PX, sizeof(float));
  for (int step = 0; step < STEPS; step++) {
    for (uint32_t k = 0; k < SLOTS; k++) {
      for (size_t i = 0; i < (size_t)B * PX; i++) {
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        x[k][i] = (float)(rng >> 40) / (float)(1 << 24);
      }
      for (int n = 0; n < B; n++) labels[k][n] = (uint8_t)((n * 3 + k + step)
                                                           % CLASSES);
      char what[64];
      snprintf(what, sizeof what, "step %d slot %u", step, k);
      forward_both(st, x[k], labels[k], k, (uint64_t)step, k * B, 0, what);
    }
    for (uint32_t k = SLOTS; k-- > 0;) backward_both(st, k);
    for (int s = 0; s < 2; s++) {
      acc_mut_block none[2][2];
      Ember__Cnn__Result res[2];
      op u = {EMBER__CNN__OP__UPDATE, first_of[s], end_of[s], 0, SLOTS, 0, 0,
              0, 0, 0};
      both(&u, st, s, NULL, NULL, 0, none, 0, res);
    }
  }
  float *before[2];
  size_t n_params[2];
  for (int s = 0; s < 2; s++) compare_params(st, s, &before[s], &n_params[s]);
  /* an evaluation: the rolling statistics, no dropout, nothing kept */
  forward_both(st, x[0], labels[0], 0, 0, 0, 1, "inference");
  for (int s = 0; s < 2; s++) {
    float *after;
    size_t n;
    compare_params(st, s, &after, &n);
    CHECK(n == n_params[s] &&
              memcmp(after, before[s], n * sizeof *after) == 0,
          "stage %d: parameters changed by an inference", s);
    free(after);
    free(before[s]);
    /* slot 0 free: its BACKWARD ran, the inference kept nothing there */
    char err[512] = "";
    Ember__Cnn__Result res;
    op b = {EMBER__CNN__OP__BACKWARD, first_of[s], end_of[s], 0, 0, 0, 0, 0,
            0, 0};
    if (s == 1) {
      int rc = task(0, &b, NULL, 0, st[s].cpu, st[s].size, NULL, 0, &res,
                    err, sizeof err);
      CHECK(rc == EMBER_ESTATE, "cpu: BACKWARD after an inference: %s",
            ember_errname(rc));
      rc = task(1, &b, NULL, 0, st[s].ocl, st[s].size, NULL, 0, &res, err,
                sizeof err);
      CHECK(rc == EMBER_ESTATE, "opencl: BACKWARD after an inference: %s",
            ember_errname(rc));
    }
  }
  for (int k = 0; k < SLOTS; k++) free(x[k]);
  for (int s = 0; s < 2; s++) {
    free(st[s].cpu);
    clReleaseMemObject(st[s].ocl);
  }
  icp_step("[net]\nheight=4\nwidth=4\nchannels=3\n"
           "[connected]\noutput=5\nactivation=leaky\n[softmax]\n",
           20, 48, 48, 5);
  icp_step("[net]\nheight=5\nwidth=5\nchannels=4\n"
           "[convolutional]\nfilters=3\nsize=3\npad=1\n"
           "activation=logistic\n[softmax]\n",
           1, 4, 100, 75);
  ops_close(&h);
  if (failures) {
    printf("%d failure(s)\n", failures);
    return 1;
  }
  printf("all checks passed\n");
  return 0;
}
