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
 * then GET_PARAMS gives them back byte for byte. Also: a BACKWARD on an empty slot and any op on an
 * unstamped block refused with EMBER_ESTATE, as on the CPU; an ICP slice
 * (channel_begin/end) refused with EMBER_EPARAM: cpu only so far.
 * Exit 77 (skipped) when no OpenCL device exists.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accel.h"
#include "accelerators/cnn/cnn.pb-c.h"
#include "cnn_idx.h"
#include "cnn_layout.h"
#include "cnn_net.h"
#include "ember/ember_errors.h"

#define SKIP 77
#define LENET EMBER_SOURCE_DIR "/accelerators/cnn/nets/lenet.cfg"
#define DATA EMBER_SOURCE_DIR "/tests/data/cnn"
#define TOL 1e-4

enum { B = 10, SLOTS = 2, STEPS = 3, SPLIT = 4, LAYERS = 7, PX = 28 * 28 };

static int failures;

#define CHECK(cond, ...)                                     \
  do {                                                       \
    if (!(cond)) {                                           \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      printf(__VA_ARGS__);                                   \
      printf("\n");                                          \
      failures++;                                            \
    }                                                        \
  } while (0)

#define MUST(cond, ...)                                      \
  do {                                                       \
    if (!(cond)) {                                           \
      printf("FATAL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      printf(__VA_ARGS__);                                   \
      printf("\n");                                          \
      exit(1);                                               \
    }                                                        \
  } while (0)

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  MUST(p, "out of memory");
  return p;
}

static const acc_descriptor *acc;
static char *cfg;
static size_t cfg_len;

typedef struct device {
  cl_context ctx;
  cl_command_queue transfer, compute;
  void *state;                /* acc_cnn_opencl_ops' state */
} device;

static device dev;

/* ---- tasks -------------------------------------------------------------- */

typedef struct op {
  Ember__Cnn__Op op;
  uint32_t first, end, slot, accumulated;
} op;

/* While set, params_of makes an ICP slice of channels [slice[0],
 * slice[1]) of layer first. */
static const uint32_t *slice;

static uint8_t *params_of(const op *o, size_t *len) {
  Ember__Cnn__Params p = EMBER__CNN__PARAMS__INIT;
  p.op = o->op;
  p.net.data = (uint8_t *)cfg;
  p.net.len = cfg_len;
  p.first = o->first;
  p.end = o->end;
  p.batch = B;
  p.has_seed = 1;
  p.seed = 7;
  p.has_slots = p.has_slot = 1;
  p.slots = SLOTS;
  p.slot = o->slot;
  p.has_accumulated = 1;
  p.accumulated = o->accumulated ? o->accumulated : 1;
  if (slice) {
    p.has_channel_begin = p.has_channel_end = 1;
    p.channel_begin = slice[0];
    p.channel_end = slice[1];
  }
  *len = ember__cnn__params__get_packed_size(&p);
  uint8_t *buf = xcalloc(*len, 1);
  ember__cnn__params__pack(&p, buf);
  return buf;
}

static size_t state_size(uint32_t first, uint32_t end) {
  cnn_net *net = NULL;
  char err[256];
  MUST(cnn_cfg_parse(cfg, cfg_len, "lenet", &net, err, sizeof err) == 0,
       "%s", err);
  cnn_layout L;
  MUST(cnn_layout_compute(net, first, end, B, SLOTS, &L) == 0, "layout");
  cnn_net_destroy(net);
  return (size_t)L.total;
}

/* validate + plan of o (both must pass): the prepared task, plan filled */
static void *prepare(const op *o, const acc_block *in, size_t n_in,
                     size_t state_bytes, size_t n_out, acc_task_plan *plan) {
  size_t len;
  uint8_t *p = params_of(o, &len);
  void *prep = NULL;
  char err[512] = "";
  int rc = acc->validate(p, len, in, n_in, &prep, err, sizeof err);
  MUST(rc == 0, "validate op %d: %s", (int)o->op, err);
  acc_task_shape shape = {n_out, &state_bytes, 1};
  rc = acc_plan_task(acc, prep, &shape, 0, plan, err, sizeof err);
  MUST(rc == 0, "plan op %d: %s", (int)o->op, err);
  free(p);
  return prep;
}

static void unpack(const acc_output *out, Ember__Cnn__Result *res) {
  Ember__Cnn__Result *r = ember__cnn__result__unpack(NULL, out->size,
                                                     out->data);
  MUST(r, "cannot unpack the Result");
  *res = *r;
  ember__cnn__result__free_unpacked(r, NULL);
}

/* cpu_task: o on the host state; n_out out blocks made (malloc'd) into
 * outs. Returns run_cpu's code. */
static int cpu_task(const op *o, const acc_block *in, size_t n_in,
                    acc_mut_block *state, acc_mut_block *outs, size_t n_out,
                    Ember__Cnn__Result *res, char *err, size_t err_len) {
  acc_task_plan plan;
  void *prep = prepare(o, in, n_in, state->size, n_out, &plan);
  for (size_t i = 0; i < n_out; i++) {
    outs[i].size = plan.output_sizes[i];
    outs[i].data = xcalloc(outs[i].size, 1);
  }
  acc_run_ctx ctx = {0};
  ctx.states = state;
  ctx.n_states = 1;
  ctx.outputs = outs;
  ctx.n_outputs = n_out;
  acc_output out = {0};
  int rc = acc->run_cpu(prep, in, n_in, &ctx, &out, err, err_len);
  if (!rc) unpack(&out, res);
  free(out.data);
  acc->release(prep);
  return rc;
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
  d.mem = clCreateBuffer(dev.ctx, CL_MEM_READ_ONLY, b->size, NULL, &rc);
  MUST(rc == CL_SUCCESS, "clCreateBuffer %zu: %d", b->size, rc);
  rc = clEnqueueWriteBuffer(dev.transfer, d.mem, CL_FALSE, 0, b->size,
                            b->data, 0, NULL, &d.written);
  MUST(rc == CL_SUCCESS, "clEnqueueWriteBuffer: %d", rc);
  clFlush(dev.transfer);
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
    outs[i].mem = clCreateBuffer(dev.ctx, CL_MEM_READ_WRITE, outs[i].size,
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
  int rc = acc->opencl->run(dev.state, dev.compute, prep, in, mems, n_in,
                            events, n_ev, &ctx, &out, err, err_len);
  if (!rc) unpack(&out, res);
  free(out.data);
  acc->release(prep);
  return rc;
}

static void read_back(const dev_block *d, void *dst) {
  cl_int rc = clEnqueueReadBuffer(dev.compute, d->mem, CL_TRUE, 0, d->size,
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

static double rel(double a, double b) {
  return fabs(a - b) / (fabs(b) > 1e-30 ? fabs(b) : 1e-30);
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
      double r = rel(rc_ocl.loss, rc_cpu.loss);
      if (r > worst_loss) worst_loss = r;
      CHECK(rc_ocl.has_loss && r <= TOL, "step %d slot %u: loss %.9g, cpu "
            "%.9g (relative %.2g)", step, k, rc_ocl.loss, rc_cpu.loss, r);
      CHECK(rc_ocl.has_correct &&
                abs((int)rc_ocl.correct - (int)rc_cpu.correct) <= 1,
            "step %d slot %u: correct %u, cpu %u", step, k, rc_ocl.correct,
            rc_cpu.correct);
      printf("step %d slot %u: loss %.7f (cpu %.7f), correct %u (cpu %u)\n",
             step, k, rc_ocl.loss, rc_cpu.loss, rc_ocl.correct,
             rc_cpu.correct);
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
    const float *want = (const float *)(const void *)p_cpu.data;
    size_t n = p_cpu.size / sizeof(float), worst = 0;
    double d = 0, w = 0;
    for (size_t i = 0; i < n; i++) {
      double e = (double)got[i] - want[i];
      d += e * e;
      w += (double)want[i] * want[i];
      if (fabs(e) > fabs((double)got[worst] - want[worst])) worst = i;
    }
    double r = sqrt(d / (w > 0 ? w : 1));
    printf("stage %d: %zu parameters, relative difference %.3g (tolerance "
           "%g)\n", s, n, r, TOL);
    CHECK(r <= TOL, "stage %d parameters: relative difference %.3g; worst "
          "[%zu] %.9g, cpu %.9g", s, r, worst, got[worst], want[worst]);
    /* SET_PARAMS from a device input, then GET_PARAMS: the same bytes */
    cl_int crc;
    cl_mem fresh = clCreateBuffer(dev.ctx, CL_MEM_READ_WRITE, sizes[s], NULL,
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
  cl_mem st = clCreateBuffer(dev.ctx, CL_MEM_READ_WRITE, sizes[1], NULL,
                             &crc);
  MUST(crc == CL_SUCCESS, "clCreateBuffer: %d", crc);
  const cl_uint zero = 0;
  clEnqueueFillBuffer(dev.compute, st, &zero, sizeof zero, 0, sizes[1], 0,
                      NULL, NULL);
  clFinish(dev.compute);
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

  /* ICP slices run on the cpu only, so far: refused at run */
  cnn_net *net = NULL;
  MUST(cnn_cfg_parse(cfg, cfg_len, "lenet", &net, err, sizeof err) == 0,
       "%s", err);
  cnn_layout L;
  MUST(cnn_layout_compute_slice(net, 2, 0, 7, B, SLOTS, &L) == 0, "layout");
  cnn_net_destroy(net);
  st = clCreateBuffer(dev.ctx, CL_MEM_READ_WRITE, (size_t)L.total, NULL,
                      &crc);
  MUST(crc == CL_SUCCESS, "clCreateBuffer: %d", crc);
  static const uint32_t channels[2] = {0, 7};
  op s = {EMBER__CNN__OP__INIT, 2, 3, 0, 0};
  slice = channels;
  rc = ocl_task(&s, NULL, NULL, 0, st, (size_t)L.total, NULL, 0, &res, err,
                sizeof err);
  slice = NULL;
  CHECK(rc == EMBER_EPARAM && strstr(err, "cpu only"),
        "INIT of an ICP slice: %s: %s", ember_errname(rc), err);
  printf("refused: %s\n", err);
  clReleaseMemObject(st);
}

/* ---- setup -------------------------------------------------------------- */

static int open_device(void) {
  cl_platform_id plats[8];
  cl_uint np = 0;
  if (clGetPlatformIDs(8, plats, &np) != CL_SUCCESS || np == 0) return 0;
  for (cl_uint i = 0; i < np && i < 8; i++) {
    cl_device_id d;
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 1, &d, &nd) !=
            CL_SUCCESS ||
        nd == 0)
      continue;
    cl_int rc;
    dev.ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &rc);
    MUST(rc == CL_SUCCESS, "clCreateContext: %d", rc);
    dev.transfer = clCreateCommandQueue(dev.ctx, d, 0, &rc);
    MUST(rc == CL_SUCCESS, "clCreateCommandQueue: %d", rc);
    dev.compute = clCreateCommandQueue(dev.ctx, d, 0, &rc);
    MUST(rc == CL_SUCCESS, "clCreateCommandQueue: %d", rc);
    char name[256] = "";
    clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof name, name, NULL);
    char err[1024] = "";
    rc = acc->opencl->create(dev.ctx, d, NULL, &dev.state, err, sizeof err);
    MUST(rc == 0, "create on %s: %s", name, err);
    printf("device: %s\n", name);
    return 1;
  }
  return 0;
}

static char *read_text(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  MUST(f, "cannot open %s", path);
  char *buf = xcalloc(1 << 16, 1);
  *len = fread(buf, 1, (1 << 16) - 1, f);
  fclose(f);
  return buf;
}

int main(void) {
  acc = acc_registry_find("cnn");
  MUST(acc, "no cnn accelerator");
  MUST(acc->opencl, "the cnn descriptor has no OpenCL implementation");
  if (!open_device()) {
    printf("no OpenCL device: skipped\n");
    return SKIP;
  }
  cfg = read_text(LENET, &cfg_len);
  cnn_data *data = NULL;
  char err[512];
  MUST(cnn_data_read_dir(DATA, CNN_SPLIT_TEST, CNN_FASHION_CLASSES, &data,
                         err, sizeof err) == 0,
       "%s", err);
  MUST(cnn_data_count(data) >= (size_t)STEPS * SLOTS * B, "too few images");

  size_t sizes[2] = {state_size(0, SPLIT), state_size(SPLIT, LAYERS)};
  stage_pair st[2];
  for (int s = 0; s < 2; s++) {
    st[s].cpu.size = sizes[s];
    st[s].cpu.data = xcalloc(sizes[s], 1);
    cl_int rc;
    st[s].ocl = clCreateBuffer(dev.ctx, CL_MEM_READ_WRITE, sizes[s], NULL,
                               &rc);
    MUST(rc == CL_SUCCESS, "clCreateBuffer %zu: %d", sizes[s], rc);
  }
  train(data, st, sizes);
  compare_params(st, sizes);
  refusals(sizes);

  for (int s = 0; s < 2; s++) {
    free(st[s].cpu.data);
    clReleaseMemObject(st[s].ocl);
  }
  acc->opencl->destroy(dev.state);
  clReleaseCommandQueue(dev.transfer);
  clReleaseCommandQueue(dev.compute);
  clReleaseContext(dev.ctx);
  cnn_data_destroy(data);
  free(cfg);
  if (failures) {
    printf("%d failure(s)\n", failures);
    return 1;
  }
  printf("all checks passed\n");
  return 0;
}
