/*
 * test_cnn_opencl_ops.c - the cnn descriptor's OpenCL implementation
 * (acc_cnn_descriptor.opencl, accelerators/cnn/cnn_exec_opencl.c) the way
 * the opencl platform drives it, against the same descriptor's run_cpu.
 *
 * LeNet (accelerators/cnn/nets/lenet.cfg) as 2 stages (layers 0..3 and
 * 4..6), batch 10, 2 slots on both, on the Fashion-MNIST images of
 * tests/data/cnn: INIT, then 3 steps of FORWARD on slots 0 and 1 through
 * both stages, BACKWARD on slots 1 and 0 back through them, and UPDATE of
 * each stage with accumulated 2; then GET_PARAMS. On the device the state
 * blocks are device buffers, input blocks are written on a transfer queue
 * without blocking and run() waits for their events on a compute queue,
 * and the activations and errors passed between the stages are out blocks
 * that never leave the device (their host bytes NULL, as for a block that
 * lives only on a device; slot 1's labels too, so that they are read
 * back). The CPU path runs the same tasks on host blocks.
 *
 * Tolerances (float rounding only: oneDNN and cnn.cl sum in different
 * orders, FMA contraction allowed): each FORWARD's loss within 1e-4
 * relative of the CPU's, the correct counts within 1 of it, and each
 * stage's final parameters within 1e-4 of the CPU's relative to their
 * Euclidean norm. SET_PARAMS of the CPU's parameters from a device input
 * then GET_PARAMS gives them back byte for byte. Also: a BACKWARD on an
 * empty slot and any op on an unstamped block refused with EMBER_ESTATE,
 * as on the CPU. Slices, one step on both paths, the device's against
 * the CPU's within TOL: conv2 and fc1 in 2 ICP slices (the chain's output,
 * dz, each slice's input error, the updated parameters; then the slices'
 * errors as pieces into the BACKWARD of the layer before), conv1 and fc1
 * in 2 and conv2 in 3 OCP slices (past conv1, the slices' input error
 * parts too, then as addends into the BACKWARD of the layer before).
 * Exit 77 (skipped) when no OpenCL device exists.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_idx.h"
#include "cnn_layout.h"
#include "cnn_net.h"
#include "cnn_ops_harness.h"
#include "ember/ember_errors.h"

#define LENET EMBER_SOURCE_DIR "/accelerators/cnn/nets/lenet.cfg"
#define DATA EMBER_SOURCE_DIR "/tests/data/cnn"
#define TOL 1e-4

enum { B = 10, SLOTS = 2, STEPS = 3, SPLIT = 4, LAYERS = 7, PX = 28 * 28 };

static ops_harness h;

/* ---- tasks -------------------------------------------------------------- */

typedef struct op {
  Ember__Cnn__Op op;
  uint32_t first, end, slot, accumulated;
} op;

/* While set, params_of makes an ICP slice of channels [slice[0],
 * slice[1]) of layer first (with slice_ocp, an OCP slice), and a BACKWARD
 * with its output error in n_pieces pieces of these channel counts. */
static const uint32_t *slice;
static int slice_ocp;
static const uint32_t *pieces;
static size_t n_pieces;
static uint32_t addends; /* error_addends of a BACKWARD; 0: none */

static Ember__Cnn__Params params_of(const op *o) {
  Ember__Cnn__Params p =
      ops_params(&h, o->op, o->first, o->end, o->slot, o->accumulated);
  if (slice) {
    p.has_channel_begin = p.has_channel_end = 1;
    p.channel_begin = slice[0];
    p.channel_end = slice[1];
    p.has_split_outputs = p.split_outputs = slice_ocp;
  }
  p.n_error_channels = n_pieces;
  p.error_channels = (uint32_t *)pieces;
  p.has_error_addends = addends > 0;
  p.error_addends = addends;
  return p;
}

/* validate + plan of o (both must pass): the prepared task, plan filled */
static void *prepare(const op *o, const acc_block *in, size_t n_in,
                     size_t state_bytes, size_t n_out, acc_task_plan *plan) {
  Ember__Cnn__Params p = params_of(o);
  return ops_prepare(&h, &p, in, n_in, state_bytes, n_out, plan);
}

/* cpu_task: o on the host state; n_out out blocks made (malloc'd) into
 * outs. Returns run_cpu's code. */
static int cpu_task(const op *o, const acc_block *in, size_t n_in,
                    acc_mut_block *state, acc_mut_block *outs, size_t n_out,
                    Ember__Cnn__Result *res, char *err, size_t err_len) {
  acc_task_plan plan;
  void *prep = prepare(o, in, n_in, state->size, n_out, &plan);
  ops_host_outputs(&plan, outs, n_out);
  return ops_run_cpu(&h, prep, in, n_in, state, outs, n_out, res, err,
                     err_len);
}

/* A device input: a buffer and the event of its write (NULL: none). */
typedef struct dev_block {
  cl_mem mem;
  cl_event written;
  size_t size;
} dev_block;

/* upload: b's bytes to a new buffer on the transfer queue, not blocking
 * (b->data must stay valid until the next task has run). */
static dev_block upload(const acc_block *b) {
  dev_block d = {0};
  cl_int rc;
  d.size = b->size;
  d.mem = clCreateBuffer(h.ctx, CL_MEM_READ_ONLY, b->size, NULL, &rc);
  MUST(rc == CL_SUCCESS, "clCreateBuffer %zu: %d", b->size, rc);
  rc = clEnqueueWriteBuffer(h.transfer, d.mem, CL_FALSE, 0, b->size,
                            b->data, 0, NULL, &d.written);
  MUST(rc == CL_SUCCESS, "clEnqueueWriteBuffer: %d", rc);
  clFlush(h.transfer);
  return d;
}

static void dev_free(dev_block *d) {
  if (d->written) {
    clWaitForEvents(1, &d->written);
    clReleaseEvent(d->written);
  }
  if (d->mem) clReleaseMemObject(d->mem);
  memset(d, 0, sizeof *d);
}

/* ocl_task: o on the state buffer with inputs in (host views; data may be
 * NULL) held in ins; n_out out blocks made on the device into outs. */
static int ocl_task(const op *o, const acc_block *in, dev_block *ins,
                    size_t n_in, cl_mem state, size_t state_bytes,
                    dev_block *outs, size_t n_out, Ember__Cnn__Result *res,
                    char *err, size_t err_len) {
  acc_task_plan plan;
  void *prep = prepare(o, in, n_in, state_bytes, n_out, &plan);
  void *mems[4], *events[4], *out_mems[ACC_MAX_OUTPUTS];
  unsigned n_ev = 0;
  for (size_t i = 0; i < n_in; i++) {
    mems[i] = ins[i].mem;
    if (ins[i].written) events[n_ev++] = ins[i].written;
  }
  for (size_t i = 0; i < n_out; i++) {
    cl_int rc;
    outs[i].size = plan.output_sizes[i];
    outs[i].written = NULL;
    outs[i].mem = clCreateBuffer(h.ctx, CL_MEM_READ_WRITE, outs[i].size,
                                 NULL, &rc);
    MUST(rc == CL_SUCCESS, "clCreateBuffer %zu: %d", outs[i].size, rc);
    out_mems[i] = outs[i].mem;
  }
  void *st = state;
  acc_run_ctx ctx = {0};
  ctx.n_states = 1;
  ctx.dev_states = &st;
  ctx.n_outputs = n_out;
  ctx.dev_outputs = out_mems;
  acc_output out = {0};
  int rc = h.acc->opencl->run(h.state, h.queue, prep, in, mems, n_in,
                              events, n_ev, &ctx, &out, err, err_len);
  return ops_finish(&h, rc, &out, prep, res);
}

static void read_back(const dev_block *d, void *dst) {
  cl_int rc = clEnqueueReadBuffer(h.queue, d->mem, CL_TRUE, 0, d->size,
                                  dst, 0, NULL, NULL);
  MUST(rc == CL_SUCCESS, "clEnqueueReadBuffer: %d", rc);
}

/* ---- the two paths ------------------------------------------------------ */

static const uint32_t first_of[2] = {0, SPLIT}, end_of[2] = {SPLIT, LAYERS};

typedef struct stage_pair {
  acc_mut_block cpu;
  cl_mem ocl;
} stage_pair;

static void ok(int rc, const char *path, const op *o, const char *err) {
  MUST(rc == 0, "%s: op %d on %u..%u slot %u: %s: %s", path, (int)o->op,
       o->first, o->end - 1, o->slot, ember_errname(rc), err);
}

static void train(const cnn_data *data, stage_pair *st, const size_t *sizes) {
  char err[512] = "";
  Ember__Cnn__Result rc_cpu, rc_ocl;
  for (int s = 0; s < 2; s++) {
    op o = {EMBER__CNN__OP__INIT, first_of[s], end_of[s], 0, 0};
    ok(cpu_task(&o, NULL, 0, &st[s].cpu, NULL, 0, &rc_cpu, err, sizeof err),
       "cpu", &o, err);
    ok(ocl_task(&o, NULL, NULL, 0, st[s].ocl, sizes[s], NULL, 0, &rc_ocl, err,
                sizeof err),
       "opencl", &o, err);
  }
  double worst_loss = 0;
  for (int step = 0; step < STEPS; step++) {
    acc_mut_block a_cpu[SLOTS] = {{0}}, d_cpu[SLOTS] = {{0}};
    dev_block a_ocl[SLOTS] = {{0}}, d_ocl[SLOTS] = {{0}};
    dev_block x_dev[SLOTS] = {{0}}, l_dev[SLOTS] = {{0}};
    float *xs[SLOTS];
    for (uint32_t k = 0; k < SLOTS; k++) {
      size_t at = (size_t)(step * SLOTS + k) * B;
      xs[k] = xcalloc((size_t)B * PX, sizeof(float));
      MUST(cnn_data_to_float(data, at, B, xs[k]) == 0, "images %zu", at);
      const uint8_t *labels = cnn_data_labels(data) + at;
      acc_block in1[1] = {{(const uint8_t *)xs[k], (size_t)B * PX * 4}};
      op f1 = {EMBER__CNN__OP__FORWARD, 0, SPLIT, k, 0};
      ok(cpu_task(&f1, in1, 1, &st[0].cpu, &a_cpu[k], 1, &rc_cpu, err,
                  sizeof err), "cpu", &f1, err);
      x_dev[k] = upload(&in1[0]);
      ok(ocl_task(&f1, in1, &x_dev[k], 1, st[0].ocl, sizes[0], &a_ocl[k], 1,
                  &rc_ocl, err, sizeof err), "opencl", &f1, err);

      op f2 = {EMBER__CNN__OP__FORWARD, SPLIT, LAYERS, k, 0};
      acc_block in2[2] = {{a_cpu[k].data, a_cpu[k].size}, {labels, B}};
      /* slot 0 asks for the probabilities, slot 1 does not */
      acc_mut_block probs = {0};
      size_t n_out = k == 0;
      ok(cpu_task(&f2, in2, 2, &st[1].cpu, &probs, n_out, &rc_cpu, err,
                  sizeof err), "cpu", &f2, err);
      free(probs.data);
      /* on the device: the activations only there; slot 1's labels too */
      l_dev[k] = upload(&in2[1]);
      dev_block ins[2] = {a_ocl[k], l_dev[k]};
      acc_block dev_view[2] = {{NULL, a_ocl[k].size},
                               {k ? NULL : labels, B}};
      dev_block p_ocl = {0};
      ok(ocl_task(&f2, dev_view, ins, 2, st[1].ocl, sizes[1], &p_ocl, n_out,
                  &rc_ocl, err, sizeof err), "opencl", &f2, err);
      if (n_out) dev_free(&p_ocl);
      char what[64];
      snprintf(what, sizeof what, "step %d slot %u", step, k);
      double r = ops_expect_forward(what, &rc_ocl, &rc_cpu, TOL);
      if (r > worst_loss) worst_loss = r;
    }
    for (uint32_t k = SLOTS; k-- > 0;) {
      op b2 = {EMBER__CNN__OP__BACKWARD, SPLIT, LAYERS, k, 0};
      ok(cpu_task(&b2, NULL, 0, &st[1].cpu, &d_cpu[k], 1, &rc_cpu, err,
                  sizeof err), "cpu", &b2, err);
      ok(ocl_task(&b2, NULL, NULL, 0, st[1].ocl, sizes[1], &d_ocl[k], 1,
                  &rc_ocl, err, sizeof err), "opencl", &b2, err);
      op b1 = {EMBER__CNN__OP__BACKWARD, 0, SPLIT, k, 0};
      acc_block in[1] = {{d_cpu[k].data, d_cpu[k].size}};
      ok(cpu_task(&b1, in, 1, &st[0].cpu, NULL, 0, &rc_cpu, err, sizeof err),
         "cpu", &b1, err);
      acc_block dev_view[1] = {{NULL, d_ocl[k].size}};
      ok(ocl_task(&b1, dev_view, &d_ocl[k], 1, st[0].ocl, sizes[0], NULL, 0,
                  &rc_ocl, err, sizeof err), "opencl", &b1, err);
    }
    for (int s = 0; s < 2; s++) {
      op u = {EMBER__CNN__OP__UPDATE, first_of[s], end_of[s], 0, SLOTS};
      ok(cpu_task(&u, NULL, 0, &st[s].cpu, NULL, 0, &rc_cpu, err, sizeof err),
         "cpu", &u, err);
      ok(ocl_task(&u, NULL, NULL, 0, st[s].ocl, sizes[s], NULL, 0, &rc_ocl,
                  err, sizeof err), "opencl", &u, err);
      CHECK(rc_ocl.has_updates && rc_ocl.updates == (uint64_t)step + 1 &&
                rc_cpu.updates == rc_ocl.updates,
            "updates %llu, cpu %llu", (unsigned long long)rc_ocl.updates,
            (unsigned long long)rc_cpu.updates);
    }
    for (uint32_t k = 0; k < SLOTS; k++) {
      free(a_cpu[k].data);
      free(d_cpu[k].data);
      dev_free(&a_ocl[k]);
      dev_free(&d_ocl[k]);
      dev_free(&x_dev[k]);
      dev_free(&l_dev[k]);
      free(xs[k]);
    }
  }
  printf("losses: largest relative difference %.3g (tolerance %g)\n",
         worst_loss, TOL);
}

static void compare_params(stage_pair *st, const size_t *sizes) {
  char err[512] = "";
  Ember__Cnn__Result res;
  for (int s = 0; s < 2; s++) {
    op g = {EMBER__CNN__OP__GET_PARAMS, first_of[s], end_of[s], 0, 0};
    acc_mut_block p_cpu = {0};
    dev_block p_ocl = {0};
    ok(cpu_task(&g, NULL, 0, &st[s].cpu, &p_cpu, 1, &res, err, sizeof err),
       "cpu", &g, err);
    ok(ocl_task(&g, NULL, NULL, 0, st[s].ocl, sizes[s], &p_ocl, 1, &res, err,
                sizeof err), "opencl", &g, err);
    MUST(p_ocl.size == p_cpu.size, "sizes %zu, %zu", p_ocl.size, p_cpu.size);
    float *got = xcalloc(p_ocl.size, 1);
    read_back(&p_ocl, got);
    ops_expect_params(s, got, (const float *)(const void *)p_cpu.data,
                      p_cpu.size / sizeof(float), TOL);
    /* SET_PARAMS from a device input, then GET_PARAMS: the same bytes */
    cl_int crc;
    cl_mem fresh = clCreateBuffer(h.ctx, CL_MEM_READ_WRITE, sizes[s], NULL,
                                  &crc);
    MUST(crc == CL_SUCCESS, "clCreateBuffer: %d", crc);
    acc_block in[1] = {{p_cpu.data, p_cpu.size}};
    dev_block up = upload(&in[0]), again = {0};
    op set = {EMBER__CNN__OP__SET_PARAMS, first_of[s], end_of[s], 0, 0};
    ok(ocl_task(&set, in, &up, 1, fresh, sizes[s], NULL, 0, &res, err,
                sizeof err), "opencl", &set, err);
    ok(ocl_task(&g, NULL, NULL, 0, fresh, sizes[s], &again, 1, &res, err,
                sizeof err), "opencl", &g, err);
    read_back(&again, got);
    CHECK(memcmp(got, p_cpu.data, p_cpu.size) == 0 && res.updates == 0,
          "stage %d: SET_PARAMS then GET_PARAMS differ (updates %llu)", s,
          (unsigned long long)res.updates);
    dev_free(&up);
    dev_free(&again);
    clReleaseMemObject(fresh);
    free(got);
    dev_free(&p_ocl);
    free(p_cpu.data);
  }
}

/* refused: ops on an unstamped block, and BACKWARD on an empty slot */
static void refusals(const size_t *sizes) {
  char err[512] = "";
  Ember__Cnn__Result res;
  cl_int crc;
  cl_mem st = clCreateBuffer(h.ctx, CL_MEM_READ_WRITE, sizes[1], NULL,
                             &crc);
  MUST(crc == CL_SUCCESS, "clCreateBuffer: %d", crc);
  const cl_uint zero = 0;
  clEnqueueFillBuffer(h.queue, st, &zero, sizeof zero, 0, sizes[1], 0,
                      NULL, NULL);
  clFinish(h.queue);
  op u = {EMBER__CNN__OP__UPDATE, SPLIT, LAYERS, 0, 1};
  int rc = ocl_task(&u, NULL, NULL, 0, st, sizes[1], NULL, 0, &res, err,
                    sizeof err);
  CHECK(rc == EMBER_ESTATE, "UPDATE on a zeroed block: %s: %s",
        ember_errname(rc), err);
  op i = {EMBER__CNN__OP__INIT, SPLIT, LAYERS, 0, 0};
  ok(ocl_task(&i, NULL, NULL, 0, st, sizes[1], NULL, 0, &res, err,
              sizeof err), "opencl", &i, err);
  op b = {EMBER__CNN__OP__BACKWARD, SPLIT, LAYERS, 1, 0};
  dev_block d = {0};
  rc = ocl_task(&b, NULL, NULL, 0, st, sizes[1], &d, 1, &res, err,
                sizeof err);
  CHECK(rc == EMBER_ESTATE, "BACKWARD on an empty slot: %s: %s",
        ember_errname(rc), err);
  printf("refused: %s\n", err);
  dev_free(&d);
  clReleaseMemObject(st);

}

/* ---- slices ---------------------------------------------------------------- */

/* The relative difference of n floats of a device buffer from the CPU's. */
static double dev_rel(const dev_block *d, const acc_mut_block *cpu) {
  MUST(d->size == cpu->size, "sizes %zu, %zu", d->size, cpu->size);
  float *got = xcalloc(d->size, 1);
  read_back(d, got);
  double r = ops_rel_diff(got, (const float *)(const void *)cpu->data,
                          cpu->size / sizeof(float), NULL);
  free(got);
  return r;
}

static void expect_dev(const char *what, const dev_block *d,
                       const acc_mut_block *cpu) {
  double r = dev_rel(d, cpu);
  printf("  %-34s relative difference %.3g\n", what, r);
  CHECK(r <= TOL, "%s: relative difference %.3g", what, r);
}

/* Seeded floats in [lo, lo + span). */
static float *random_floats(size_t n, uint64_t seed, float lo, float span) {
  float *x = xcalloc(n, sizeof *x);
  for (size_t i = 0; i < n; i++) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = lo + span * (float)((double)(seed >> 11) * 0x1.0p-53);
  }
  return x;
}

/* Layer `layer` of LeNet in slices at bounds (bounds[0] = 0 .. bounds[n],
 * input channels, or output channels with ocp) on both paths, one step:
 * INIT, the FORWARD chain, BACKWARD (ICP: the last slice first, its dz to
 * the others; OCP: each from the output error), UPDATE, GET_PARAMS; the
 * device's outputs, errors and parameters against the CPU's. Past layer
 * 0, the slices' input errors then go, as pieces (ICP) or addends (OCP),
 * into the BACKWARD of the stage before the layer (one layer), on
 * both. */
static void slices_match(uint32_t layer, int ocp, const uint32_t *bounds,
                         size_t n) {
  char err[512] = "", what[96];
  Ember__Cnn__Result res;
  cnn_net *net = NULL;
  MUST(cnn_cfg_parse(h.cfg, h.cfg_len, h.name, &net, err, sizeof err) == 0,
       "%s", err);
  printf("layer %u in %zu %s slices\n", layer, n, ocp ? "OCP" : "ICP");
  acc_mut_block cpu[4], out_c[4], din_c[4] = {{0}}, dz_c[2] = {{0}};
  dev_block out_d[4], din_d[4] = {{0}}, dz_d[2] = {{0}};
  cl_mem ocl[4];
  size_t size[4];
  uint32_t ch[4][2];
  cnn_layout L;
  for (size_t k = 0; k < n; k++) {
    ch[k][0] = bounds[k];
    ch[k][1] = bounds[k + 1];
    MUST((ocp ? cnn_layout_compute_ocp : cnn_layout_compute_slice)(
             net, layer, ch[k][0], ch[k][1], B, SLOTS, &L) == 0, "layout");
    size[k] = (size_t)L.total;
    cpu[k] = (acc_mut_block){xcalloc(size[k], 1), size[k]};
    cl_int crc;
    ocl[k] = clCreateBuffer(h.ctx, CL_MEM_READ_WRITE, size[k], NULL, &crc);
    MUST(crc == CL_SUCCESS, "clCreateBuffer: %d", crc);
  }
  size_t in_n = (size_t)L.in_elems, out_n = (size_t)L.out_elems;
  float *x = random_floats(in_n, 11, 0, 1), *dy = random_floats(out_n, 12,
                                                                -0.01f, 0.02f);
  acc_block xin = {(const uint8_t *)x, in_n * 4}, dyin = {(const uint8_t *)dy,
                                                          out_n * 4};
  dev_block x_d = upload(&xin), dy_d = upload(&dyin);
  slice_ocp = ocp;
  for (size_t k = 0; k < n; k++) {
    slice = ch[k];
    op init = {EMBER__CNN__OP__INIT, layer, layer + 1, 0, 0};
    ok(cpu_task(&init, NULL, 0, &cpu[k], NULL, 0, &res, err, sizeof err),
       "cpu", &init, err);
    ok(ocl_task(&init, NULL, NULL, 0, ocl[k], size[k], NULL, 0, &res, err,
                sizeof err), "opencl", &init, err);
    op f = {EMBER__CNN__OP__FORWARD, layer, layer + 1, 1, 0};
    acc_block in_c[2] = {xin, {NULL, 0}}, in_v[2] = {{NULL, xin.size},
                                                     {NULL, 0}};
    dev_block in_d[2] = {x_d, {0}};
    if (k) {
      in_c[1] = (acc_block){out_c[k - 1].data, out_c[k - 1].size};
      in_v[1] = (acc_block){NULL, out_d[k - 1].size};
      in_d[1] = out_d[k - 1];
    }
    ok(cpu_task(&f, in_c, k ? 2 : 1, &cpu[k], &out_c[k], 1, &res, err,
                sizeof err), "cpu", &f, err);
    ok(ocl_task(&f, in_v, in_d, k ? 2 : 1, ocl[k], size[k], &out_d[k], 1,
                &res, err, sizeof err), "opencl", &f, err);
  }
  expect_dev("FORWARD: the layer's output", &out_d[n - 1], &out_c[n - 1]);
  /* BACKWARD: ICP's last slice first (its dz is out 1), then the rest */
  for (size_t j = 0; j < n; j++) {
    size_t k = ocp ? j : (j + n - 1) % n;
    slice = ch[k];
    op b = {EMBER__CNN__OP__BACKWARD, layer, layer + 1, 1, 0};
    int last = !ocp && k == n - 1;
    acc_block in_c = dyin, in_v = {NULL, dyin.size};
    dev_block in_d = dy_d;
    if (!ocp && !last) {
      in_c = (acc_block){dz_c[1].data, dz_c[1].size};
      in_d = dz_d[1];
    }
    size_t n_out = last ? 2 : ocp ? layer > 0 : 1;
    acc_mut_block oc[2] = {{0}};
    dev_block od[2] = {{0}};
    ok(cpu_task(&b, &in_c, 1, &cpu[k], oc, n_out, &res, err, sizeof err),
       "cpu", &b, err);
    ok(ocl_task(&b, &in_v, &in_d, 1, ocl[k], size[k], od, n_out, &res, err,
                sizeof err), "opencl", &b, err);
    din_c[k] = oc[0];
    din_d[k] = od[0];
    if (last) {
      dz_c[1] = oc[1];
      dz_d[1] = od[1];
      expect_dev("BACKWARD: dz", &dz_d[1], &dz_c[1]);
    }
    if (n_out) {
      snprintf(what, sizeof what, "BACKWARD: input error [%u, %u)", ch[k][0],
               ch[k][1]);
      expect_dev(what, &din_d[k], &din_c[k]);
    }
  }
  for (size_t k = 0; k < n; k++) {
    slice = ch[k];
    op u = {EMBER__CNN__OP__UPDATE, layer, layer + 1, 0, 1};
    ok(cpu_task(&u, NULL, 0, &cpu[k], NULL, 0, &res, err, sizeof err), "cpu",
       &u, err);
    ok(ocl_task(&u, NULL, NULL, 0, ocl[k], size[k], NULL, 0, &res, err,
                sizeof err), "opencl", &u, err);
    op g = {EMBER__CNN__OP__GET_PARAMS, layer, layer + 1, 0, 0};
    acc_mut_block pc = {0};
    dev_block pd = {0};
    ok(cpu_task(&g, NULL, 0, &cpu[k], &pc, 1, &res, err, sizeof err), "cpu",
       &g, err);
    ok(ocl_task(&g, NULL, NULL, 0, ocl[k], size[k], &pd, 1, &res, err,
                sizeof err), "opencl", &g, err);
    snprintf(what, sizeof what, "UPDATE: parameters [%u, %u)", ch[k][0],
             ch[k][1]);
    expect_dev(what, &pd, &pc);
    free(pc.data);
    dev_free(&pd);
  }
  slice = NULL;
  slice_ocp = 0;
  if (layer > 0) {
    /* the layer before (one layer) takes the slices' errors as pieces
     * (ICP) or addends (OCP) */
    uint32_t counts[4];
    for (size_t k = 0; k < n; k++) counts[k] = ch[k][1] - ch[k][0];
    MUST(cnn_layout_compute(net, layer - 1, layer, B, SLOTS, &L) == 0, "L");
    acc_mut_block pcpu = {xcalloc((size_t)L.total, 1), (size_t)L.total};
    cl_int crc;
    cl_mem pocl = clCreateBuffer(h.ctx, CL_MEM_READ_WRITE, (size_t)L.total,
                                 NULL, &crc);
    MUST(crc == CL_SUCCESS, "clCreateBuffer: %d", crc);
    float *px = random_floats((size_t)L.in_elems, 13, 0, 1);
    acc_block pin = {(const uint8_t *)px, (size_t)L.in_elems * 4};
    dev_block pin_d = upload(&pin);
    op init = {EMBER__CNN__OP__INIT, layer - 1, layer, 0, 0};
    op f = {EMBER__CNN__OP__FORWARD, layer - 1, layer, 0, 0};
    op b = {EMBER__CNN__OP__BACKWARD, layer - 1, layer, 0, 0};
    ok(cpu_task(&init, NULL, 0, &pcpu, NULL, 0, &res, err, sizeof err),
       "cpu", &init, err);
    ok(ocl_task(&init, NULL, NULL, 0, pocl, (size_t)L.total, NULL, 0, &res,
                err, sizeof err), "opencl", &init, err);
    ok(cpu_task(&f, &pin, 1, &pcpu, NULL, 0, &res, err, sizeof err), "cpu",
       &f, err);
    ok(ocl_task(&f, &pin, &pin_d, 1, pocl, (size_t)L.total, NULL, 0, &res,
                err, sizeof err), "opencl", &f, err);
    acc_block pc_in[4], pd_view[4];
    for (size_t k = 0; k < n; k++) {
      pc_in[k] = (acc_block){din_c[k].data, din_c[k].size};
      pd_view[k] = (acc_block){NULL, din_d[k].size};
    }
    if (ocp) {
      addends = (uint32_t)n;
    } else {
      pieces = counts;
      n_pieces = n;
    }
    acc_mut_block e_c = {0};
    dev_block e_d = {0};
    ok(cpu_task(&b, pc_in, n, &pcpu, &e_c, 1, &res, err, sizeof err), "cpu",
       &b, err);
    ok(ocl_task(&b, pd_view, din_d, n, pocl, (size_t)L.total, &e_d, 1, &res,
                err, sizeof err), "opencl", &b, err);
    pieces = NULL;
    n_pieces = 0;
    addends = 0;
    expect_dev(ocp ? "BACKWARD of the layer before, in addends"
                   : "BACKWARD of the layer before, in pieces", &e_d, &e_c);
    free(e_c.data);
    dev_free(&e_d);
    dev_free(&pin_d);
    free(px);
    free(pcpu.data);
    clReleaseMemObject(pocl);
  }
  for (size_t k = 0; k < n; k++) {
    free(cpu[k].data);
    free(out_c[k].data);
    free(din_c[k].data);
    dev_free(&out_d[k]);
    dev_free(&din_d[k]);
    clReleaseMemObject(ocl[k]);
  }
  free(dz_c[1].data);
  dev_free(&dz_d[1]);
  dev_free(&x_d);
  dev_free(&dy_d);
  free(x);
  free(dy);
  cnn_net_destroy(net);
}

static void slices(void) {
  static const uint32_t conv2[] = {0, 7, 20}, fc1_in[] = {0, 333, 800},
                        conv1[] = {0, 9, 20}, fc1_out[] = {0, 100, 500},
                        conv2_out[] = {0, 11, 28, 50};
  slices_match(2, 0, conv2, 2);
  slices_match(4, 0, fc1_in, 2);
  slices_match(0, 1, conv1, 2);
  slices_match(4, 1, fc1_out, 2);
  slices_match(2, 1, conv2_out, 3);
}

int main(void) {
  if (!ops_open(&h, LENET, "lenet", B, SLOTS, 1)) return SKIP;
  cnn_data *data = NULL;
  char err[512];
  MUST(cnn_data_read_dir(DATA, CNN_SPLIT_TEST, CNN_FASHION_CLASSES, &data,
                         err, sizeof err) == 0,
       "%s", err);
  MUST(cnn_data_count(data) >= (size_t)STEPS * SLOTS * B, "too few images");

  size_t sizes[2] = {ops_state_size(&h, 0, SPLIT),
                     ops_state_size(&h, SPLIT, LAYERS)};
  stage_pair st[2];
  for (int s = 0; s < 2; s++) {
    st[s].cpu.size = sizes[s];
    st[s].cpu.data = xcalloc(sizes[s], 1);
    cl_int rc;
    st[s].ocl = clCreateBuffer(h.ctx, CL_MEM_READ_WRITE, sizes[s], NULL,
                               &rc);
    MUST(rc == CL_SUCCESS, "clCreateBuffer %zu: %d", sizes[s], rc);
  }
  train(data, st, sizes);
  compare_params(st, sizes);
  refusals(sizes);
  slices();

  for (int s = 0; s < 2; s++) {
    free(st[s].cpu.data);
    clReleaseMemObject(st[s].ocl);
  }
  ops_close(&h);
  cnn_data_destroy(data);
  if (failures) {
    printf("%d failure(s)\n", failures);
    return 1;
  }
  printf("all checks passed\n");
  return 0;
}
