/* cnn_ops_harness.c - see cnn_ops_harness.h. */
#include "cnn_ops_harness.h"

#include <math.h>
#include <string.h>

#include "cnn_layout.h"
#include "cnn_net.h"

int failures;

void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size ? size : 1);
  MUST(p, "out of memory");
  return p;
}

static char *read_text(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  MUST(f, "cannot open %s", path);
  char *buf = xcalloc(1 << 16, 1);
  *len = fread(buf, 1, (1 << 16) - 1, f);
  fclose(f);
  return buf;
}

static cl_command_queue new_queue(cl_context ctx, cl_device_id d) {
  cl_int rc;
  cl_command_queue q = clCreateCommandQueue(ctx, d, 0, &rc);
  MUST(rc == CL_SUCCESS, "clCreateCommandQueue: %d", rc);
  return q;
}

static int open_device(ops_harness *h, int transfer) {
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
    h->ctx = clCreateContext(NULL, 1, &d, NULL, NULL, &rc);
    MUST(rc == CL_SUCCESS, "clCreateContext: %d", rc);
    if (transfer) h->transfer = new_queue(h->ctx, d);
    h->queue = new_queue(h->ctx, d);
    char name[256] = "", err[1024] = "";
    clGetDeviceInfo(d, CL_DEVICE_NAME, sizeof name, name, NULL);
    rc = h->acc->opencl->create(h->ctx, d, NULL, &h->state, err, sizeof err);
    MUST(rc == 0, "create on %s: %s", name, err);
    printf("device: %s\n", name);
    return 1;
  }
  return 0;
}

int ops_open(ops_harness *h, const char *path, const char *name,
             uint32_t batch, uint32_t slots, int transfer) {
  memset(h, 0, sizeof *h);
  h->acc = acc_registry_find("cnn");
  MUST(h->acc, "no cnn accelerator");
  MUST(h->acc->opencl, "the cnn descriptor has no OpenCL implementation");
  if (!open_device(h, transfer)) {
    printf("no OpenCL device: skipped\n");
    return 0;
  }
  h->name = name;
  h->batch = batch;
  h->slots = slots;
  h->cfg = read_text(path, &h->cfg_len);
  return 1;
}

void ops_close(ops_harness *h) {
  h->acc->opencl->destroy(h->state);
  if (h->transfer) clReleaseCommandQueue(h->transfer);
  clReleaseCommandQueue(h->queue);
  clReleaseContext(h->ctx);
  free(h->cfg);
}

Ember__Cnn__Params ops_params(const ops_harness *h, Ember__Cnn__Op op,
                              uint32_t first, uint32_t end, uint32_t slot,
                              uint32_t accumulated) {
  Ember__Cnn__Params p = EMBER__CNN__PARAMS__INIT;
  p.op = op;
  p.net.data = (uint8_t *)h->cfg;
  p.net.len = h->cfg_len;
  p.first = first;
  p.end = end;
  p.batch = h->batch;
  p.has_seed = 1;
  p.seed = 7;
  p.has_slots = p.has_slot = 1;
  p.slots = h->slots;
  p.slot = slot;
  p.has_accumulated = 1;
  p.accumulated = accumulated ? accumulated : 1;
  return p;
}

size_t ops_state_size(const ops_harness *h, uint32_t first, uint32_t end) {
  cnn_net *net = NULL;
  char err[256];
  MUST(cnn_cfg_parse(h->cfg, h->cfg_len, h->name, &net, err, sizeof err) ==
           0,
       "%s", err);
  cnn_layout L;
  MUST(cnn_layout_compute(net, first, end, h->batch, h->slots, &L) == 0,
       "layout");
  cnn_net_destroy(net);
  return (size_t)L.total;
}

void *ops_prepare(const ops_harness *h, const Ember__Cnn__Params *p,
                  const acc_block *in, size_t n_in, size_t state_bytes,
                  size_t n_out, acc_task_plan *plan) {
  size_t len = ember__cnn__params__get_packed_size(p);
  uint8_t *buf = xcalloc(len, 1);
  ember__cnn__params__pack(p, buf);
  void *prep = NULL;
  char err[512] = "";
  int rc = h->acc->validate(buf, len, in, n_in, &prep, err, sizeof err);
  free(buf);
  MUST(rc == 0, "validate op %d: %s", (int)p->op, err);
  acc_task_shape shape = {n_out, &state_bytes, 1};
  rc = acc_plan_task(h->acc, prep, &shape, 0, plan, err, sizeof err);
  MUST(rc == 0, "plan op %d: %s", (int)p->op, err);
  return prep;
}

void ops_host_outputs(const acc_task_plan *plan, acc_mut_block *outs,
                      size_t n_out) {
  for (size_t i = 0; i < n_out; i++) {
    outs[i].size = plan->output_sizes[i];
    outs[i].data = xcalloc(outs[i].size, 1);
  }
}

int ops_run_cpu(const ops_harness *h, void *prep, const acc_block *in,
                size_t n_in, acc_mut_block *state, acc_mut_block *outs,
                size_t n_out, Ember__Cnn__Result *res, char *err,
                size_t err_len) {
  acc_run_ctx ctx = {0};
  ctx.states = state;
  ctx.n_states = 1;
  ctx.outputs = outs;
  ctx.n_outputs = n_out;
  acc_output out = {0};
  int rc = h->acc->run_cpu(prep, in, n_in, &ctx, &out, err, err_len);
  return ops_finish(h, rc, &out, prep, res);
}

int ops_finish(const ops_harness *h, int rc, acc_output *out, void *prep,
               Ember__Cnn__Result *res) {
  if (!rc) {
    Ember__Cnn__Result *r =
        ember__cnn__result__unpack(NULL, out->size, out->data);
    MUST(r, "cannot unpack the Result");
    *res = *r;
    ember__cnn__result__free_unpacked(r, NULL);
  }
  free(out->data);
  out->data = NULL;
  h->acc->release(prep);
  return rc;
}

double ops_rel(double a, double b) {
  return fabs(a - b) / (fabs(b) > 1e-30 ? fabs(b) : 1e-30);
}

double ops_rel_diff(const float *got, const float *want, size_t n,
                    size_t *worst) {
  double d = 0, w = 0;
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    double e = (double)got[i] - want[i];
    d += e * e;
    w += (double)want[i] * want[i];
    if (fabs(e) > fabs((double)got[k] - want[k])) k = i;
  }
  if (worst) *worst = k;
  return sqrt(d / (w > 0 ? w : 1));
}

double ops_expect_forward(const char *what, const Ember__Cnn__Result *ocl,
                          const Ember__Cnn__Result *cpu, double tol) {
  double r = ops_rel(ocl->loss, cpu->loss);
  CHECK(ocl->has_loss && r <= tol, "%s: loss %.9g, cpu %.9g (relative "
        "%.2g)", what, ocl->loss, cpu->loss, r);
  CHECK(ocl->has_correct && abs((int)ocl->correct - (int)cpu->correct) <= 1,
        "%s: correct %u, cpu %u", what, ocl->correct, cpu->correct);
  printf("%s: loss %.7f (cpu %.7f), correct %u (cpu %u)\n", what, ocl->loss,
         cpu->loss, ocl->correct, cpu->correct);
  return r;
}

void ops_expect_params(int s, const float *got, const float *want, size_t n,
                       double tol) {
  size_t worst;
  double r = ops_rel_diff(got, want, n, &worst);
  printf("stage %d: %zu parameters, relative difference %.3g (tolerance "
         "%g)\n", s, n, r, tol);
  CHECK(r <= tol, "stage %d parameters: relative difference %.3g; worst "
        "[%zu] %.9g, cpu %.9g", s, r, worst, got[worst], want[worst]);
}
