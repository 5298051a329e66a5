/*
 * test_cnn_opencl.c - the cnn stage on OpenCL (accelerators/cnn/
 * cnn_opencl.h, kernels cnn.cl) against the double-precision reference
 * (cnn_ref.h), on the first OpenCL device found (pocl's CPU device here).
 *
 * Each layer kind as a one-layer stage that does not start at layer 0
 * (so its input error is computed): convolutions (ReLU, stride 2, pad 1;
 * linear, 5x5, padding 2; 6 channels in and out, two blocks of cnn.cl's
 * work-items each way), max-pools (overlapping windows with darknet's
 * padding; 2x2 stride 2), connected layers (ReLU, linear) and the softmax
 * with its loss; then the whole of accelerators/cnn/nets/lenet.cfg as one
 * stage (batch 8). For each stage, two rounds of: forward (outputs, loss),
 * backward (input error, accumulated parameter gradients; in the first
 * round twice, the gradients then doubled), one SGD update (the change of
 * every parameter). Parameters, inputs and errors are random floats, the
 * reference runs in double from the same values.
 *
 * Tolerances, relative to the reference's Euclidean norm over the whole
 * tensor (f32 sums over at most a few thousand terms, FMA contraction
 * allowed): 1e-5 for single layers, 1e-4 for LeNet (errors carried
 * through seven layers); the loss 1e-5 relative. Also: bad calls refused,
 * and the program binary cache used on a second create.
 * Exit 77 (skipped) when no OpenCL device exists.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cnn_net.h"
#include "cnn_ocl_fixture.h"
#include "cnn_opencl.h"
#include "cnn_ref.h"
#include "ember/ember_errors.h"

static int failures;
static long checks;

#define CHECK(cond, ...)                                     \
  do {                                                       \
    checks++;                                                \
    if (!(cond)) {                                           \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      printf(__VA_ARGS__);                                   \
      printf("\n");                                          \
      failures++;                                            \
    }                                                        \
  } while (0)

static uint64_t rng_state = 13;

static double unif(double lo, double hi) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return lo + (hi - lo) * (double)(z >> 11) * 0x1p-53;
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) {
    printf("out of memory\n");
    exit(1);
  }
  return p;
}

/* rel_err: ||got - want|| / ||want|| (the absolute norm when want is 0). */
static double rel_err(size_t n, const float *got, const double *want) {
  double d = 0, w = 0;
  for (size_t i = 0; i < n; i++) {
    double e = got[i] - want[i];
    d += e * e;
    w += want[i] * want[i];
  }
  return w > 0 ? sqrt(d / w) : sqrt(d);
}

static void to_double(size_t n, const float *f, double *d) {
  for (size_t i = 0; i < n; i++) d[i] = f[i];
}

typedef struct ref_layer {
  double *w, *b, *v_w, *v_b, *g_w, *g_b;
  float *fw, *fb;            /* the device's, read back */
} ref_layer;

/* One stage [first, end) of net with batch N on the device, against the
 * reference, as the header describes. */
static void check_stage(cnn_ocl *o, cl_command_queue q, const cnn_net *net,
                        const char *name, size_t first, size_t end,
                        uint32_t N, double tol) {
  size_t nl;
  const cnn_layer *ls = cnn_net_layers(net, &nl);
  size_t L = end - first;
  cnn_ocl_stage *s = NULL;
  char err[512] = "";
  int rc = cnn_ocl_stage_create(o, q, net, first, end, N, &s, err, sizeof err);
  CHECK(rc == 0, "%s: create %d %s", name, rc, err);
  if (rc) return;
  bool softmax = ls[end - 1].kind == CNN_LAYER_SOFTMAX;
  size_t nin = N * cnn_ref_elems(ls[first].in);
  size_t nout = N * cnn_ref_elems(ls[end - 1].out);
  double lr = 0.05, mom = 0.9, decay = 0.01;

  ref_layer *rl = xcalloc(L, sizeof *rl);
  for (size_t i = 0; i < L; i++) {
    const cnn_layer *l = &ls[first + i];
    if (!l->weights) continue;
    size_t nw = l->weights, nb = l->biases;
    double a = sqrt(6.0 / (double)(nw / nb));
    rl[i].w = xcalloc(nw, 8);
    rl[i].v_w = xcalloc(nw, 8);
    rl[i].g_w = xcalloc(nw, 8);
    rl[i].b = xcalloc(nb, 8);
    rl[i].v_b = xcalloc(nb, 8);
    rl[i].g_b = xcalloc(nb, 8);
    rl[i].fw = xcalloc(nw, 4);
    rl[i].fb = xcalloc(nb, 4);
    for (size_t j = 0; j < nw; j++) rl[i].fw[j] = (float)unif(-a, a);
    for (size_t j = 0; j < nb; j++) rl[i].fb[j] = (float)unif(-0.1, 0.1);
    to_double(nw, rl[i].fw, rl[i].w);
    to_double(nb, rl[i].fb, rl[i].b);
    rc = cnn_ocl_stage_set_params(s, first + i, rl[i].fw, rl[i].fb);
    CHECK(rc == 0, "%s: set_params %d", name, rc);
  }
  double **act = xcalloc(L + 1, sizeof *act), **e = xcalloc(L + 1, sizeof *e);
  for (size_t i = 0; i <= L; i++) {
    size_t n = N * cnn_ref_elems(i ? ls[first + i - 1].out : ls[first].in);
    act[i] = xcalloc(n, 8);
    e[i] = xcalloc(n, 8);
  }
  float *in = xcalloc(nin, 4), *out = xcalloc(nout, 4);
  float *dout = xcalloc(nout, 4), *din = xcalloc(nin, 4);
  uint8_t *labels = xcalloc(N, 1);
  uint32_t classes = cnn_net_classes(net);

  for (int round = 0; round < 2; round++) {
    for (size_t j = 0; j < nin; j++) in[j] = (float)unif(first ? -1 : 0, 1);
    for (size_t j = 0; j < nout; j++) dout[j] = (float)unif(-1, 1);
    for (uint32_t n = 0; n < N; n++) labels[n] = (uint8_t)(unif(0, 1) * classes);
    /* the reference */
    to_double(nin, in, act[0]);
    for (size_t i = 0; i < L; i++)
      cnn_ref_forward(&ls[first + i], N, act[i], rl[i].w, rl[i].b,
                      act[i + 1]);
    double ref_loss = 0;
    size_t top = L;
    if (softmax) {
      ref_loss = cnn_ref_xent_loss(N, classes, act[L], labels);
      cnn_ref_xent_grad(N, classes, act[L], labels, e[L - 1]);
      top = L - 1;
    } else {
      to_double(nout, dout, e[L]);
    }
    int passes = round == 0 ? 2 : 1;
    for (int p = 0; p < passes; p++)
      for (size_t i = top; i-- > 0;)
        cnn_ref_backward(&ls[first + i], N, act[i], act[i + 1], rl[i].w,
                         e[i + 1], i > 0 || first > 0 ? e[i] : NULL,
                         rl[i].g_w, rl[i].g_b);

    /* the device */
    double loss = -1;
    rc = cnn_ocl_stage_forward(s, in, out, softmax ? labels : NULL, &loss);
    CHECK(rc == 0, "%s: forward %d %s", name, rc, cnn_ocl_stage_error(s));
    double r = rel_err(nout, out, act[L]);
    CHECK(r <= tol, "%s round %d: FP outputs off by %.3g (tolerance %.g)",
          name, round, r, tol);
    if (softmax)
      CHECK(fabs(loss - ref_loss) <= 1e-5 * fabs(ref_loss),
            "%s round %d: loss %.9g, reference %.9g", name, round, loss,
            ref_loss);
    for (int p = 0; p < passes; p++) {
      rc = cnn_ocl_stage_backward(s, softmax ? NULL : dout,
                                  first ? din : NULL);
      CHECK(rc == 0, "%s: backward %d %s", name, rc, cnn_ocl_stage_error(s));
    }
    if (first) {
      r = rel_err(nin, din, e[0]);
      CHECK(r <= tol, "%s round %d: EB input error off by %.3g", name, round,
            r);
    }
    for (size_t i = 0; i < L; i++) {
      const cnn_layer *l = &ls[first + i];
      if (!l->weights) continue;
      float *gw = xcalloc(l->weights, 4), *gb = xcalloc(l->biases, 4);
      rc = cnn_ocl_stage_get_grads(s, first + i, gw, gb);
      CHECK(rc == 0, "%s: get_grads %d", name, rc);
      r = rel_err(l->weights, gw, rl[i].g_w);
      CHECK(r <= tol, "%s round %d layer %zu: PG weights off by %.3g", name,
            round, first + i, r);
      r = rel_err(l->biases, gb, rl[i].g_b);
      CHECK(r <= tol, "%s round %d layer %zu: PG biases off by %.3g", name,
            round, first + i, r);
      free(gw);
      free(gb);
    }

    /* one SGD update: compare each parameter's change */
    rc = cnn_ocl_stage_update(s, lr, mom, decay);
    CHECK(rc == 0, "%s: update %d %s", name, rc, cnn_ocl_stage_error(s));
    for (size_t i = 0; i < L; i++) {
      const cnn_layer *l = &ls[first + i];
      if (!l->weights) continue;
      size_t nw = l->weights, nb = l->biases;
      double *dw = xcalloc(nw, 8), *db = xcalloc(nb, 8);
      for (size_t j = 0; j < nw; j++) dw[j] = rl[i].w[j];
      for (size_t j = 0; j < nb; j++) db[j] = rl[i].b[j];
      cnn_ref_sgd(nw, rl[i].w, rl[i].v_w, rl[i].g_w, lr, mom, decay);
      cnn_ref_sgd(nb, rl[i].b, rl[i].v_b, rl[i].g_b, lr, mom, 0);
      for (size_t j = 0; j < nw; j++) dw[j] = rl[i].w[j] - dw[j];
      for (size_t j = 0; j < nb; j++) db[j] = rl[i].b[j] - db[j];
      float *nw_f = xcalloc(nw, 4), *nb_f = xcalloc(nb, 4);
      rc = cnn_ocl_stage_get_params(s, first + i, nw_f, nb_f);
      CHECK(rc == 0, "%s: get_params %d", name, rc);
      float *cw = xcalloc(nw, 4), *cb = xcalloc(nb, 4);
      for (size_t j = 0; j < nw; j++) cw[j] = nw_f[j] - rl[i].fw[j];
      for (size_t j = 0; j < nb; j++) cb[j] = nb_f[j] - rl[i].fb[j];
      r = rel_err(nw, cw, dw);
      CHECK(r <= tol, "%s round %d layer %zu: SGD weight change off by %.3g",
            name, round, first + i, r);
      r = rel_err(nb, cb, db);
      CHECK(r <= tol, "%s round %d layer %zu: SGD bias change off by %.3g",
            name, round, first + i, r);
      memcpy(rl[i].fw, nw_f, nw * 4);
      memcpy(rl[i].fb, nb_f, nb * 4);
      rc = cnn_ocl_stage_get_grads(s, first + i, cw, cb);
      CHECK(rc == 0 && cw[0] == 0 && cb[0] == 0, "%s: gradients not zeroed",
            name);
      free(dw), free(db), free(nw_f), free(nb_f), free(cw), free(cb);
    }
  }

  /* refused calls */
  if (first == 0) {
    rc = cnn_ocl_stage_backward(s, dout, din);
    CHECK(rc == EMBER_EINVAL, "%s: din at layer 0 gave %d", name, rc);
  }
  if (!softmax) {
    rc = cnn_ocl_stage_forward(s, in, out, labels, NULL);
    CHECK(rc == EMBER_EINVAL, "%s: labels without softmax gave %d", name,
          rc);
  } else {
    labels[0] = (uint8_t)classes;
    rc = cnn_ocl_stage_forward(s, in, out, labels, NULL);
    CHECK(rc == EMBER_EINVAL, "%s: label out of range gave %d", name, rc);
    rc = cnn_ocl_stage_forward(s, in, out, NULL, NULL);
    CHECK(rc == 0, "%s: forward without labels gave %d", name, rc);
    rc = cnn_ocl_stage_backward(s, NULL, NULL);
    CHECK(rc == EMBER_EINVAL, "%s: backward without labels gave %d", name,
          rc);
  }
  for (size_t i = 0; i < L; i++)
    if (!ls[first + i].weights) {
      rc = cnn_ocl_stage_get_params(s, first + i, out, out);
      CHECK(rc == EMBER_EINVAL, "%s: params of a layer without gave %d",
            name, rc);
    }
  rc = cnn_ocl_stage_get_params(s, end, out, out);
  CHECK(rc == EMBER_EINVAL, "%s: params outside the stage gave %d", name, rc);

  printf("%s: layers %zu..%zu, batch %u: done\n", name, first, end - 1,
         (unsigned)N);
  for (size_t i = 0; i < L; i++) {
    free(rl[i].w), free(rl[i].b), free(rl[i].v_w), free(rl[i].v_b);
    free(rl[i].g_w), free(rl[i].g_b), free(rl[i].fw), free(rl[i].fb);
  }
  for (size_t i = 0; i <= L; i++) free(act[i]), free(e[i]);
  free(rl), free(act), free(e), free(in), free(out), free(dout), free(din);
  free(labels);
  cnn_ocl_stage_destroy(s);
}

/* A network of an identity max-pool (so the layer under test is not layer
 * 0), the layer `section` on input h x w x c, and a softmax. */
static cnn_net *layer_net(uint32_t h, uint32_t w, uint32_t c,
                          const char *section) {
  char text[1024], err[256];
  snprintf(text, sizeof text,
           "[net]\nheight=%u\nwidth=%u\nchannels=%u\n"
           "[maxpool]\nsize=1\nstride=1\n%s\n[softmax]\n",
           (unsigned)h, (unsigned)w, (unsigned)c, section);
  cnn_net *net = NULL;
  int rc = cnn_cfg_parse(text, strlen(text), section, &net, err, sizeof err);
  CHECK(rc == 0, "parse %d %s", rc, err);
  return net;
}

static void check_cache(cl_context ctx, cl_device_id dev) {
  char dir[] = "/tmp/test_cnn_opencl.XXXXXX", err[512] = "";
  if (!mkdtemp(dir)) {
    CHECK(0, "mkdtemp");
    return;
  }
  cnn_ocl *a = NULL, *b = NULL;
  int rc = cnn_ocl_create(ctx, dev, dir, &a, err, sizeof err);
  CHECK(rc == 0 && !cnn_ocl_loaded_from_cache(a), "first create %d %s", rc,
        err);
  rc = cnn_ocl_create(ctx, dev, dir, &b, err, sizeof err);
  CHECK(rc == 0 && cnn_ocl_loaded_from_cache(b), "cached create %d %s", rc,
        err);
  cnn_ocl_destroy(a);
  cnn_ocl_destroy(b);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0, "rm %s", dir);
}

int main(void) {
  cnn_ocl_fixture f;
  int rc = cnn_ocl_fixture_open(&f);
  if (rc) return rc;
  cnn_ocl *o = f.o;
  cl_command_queue q = f.q;
  char err[4096] = "";
  CHECK(cnn_ocl_create(NULL, f.dev, NULL, &o, err, sizeof err) ==
            EMBER_EINVAL,
        "NULL context accepted");

  static const struct {
    uint32_t h, w, c;
    const char *section;
  } kinds[] = {
      {9, 7, 3, "[convolutional]\nfilters=4\nsize=3\nstride=2\npad=1\n"
                "activation=relu"},
      {6, 8, 2, "[convolutional]\nfilters=3\nsize=5\nstride=1\npadding=2\n"
                "activation=linear"},
      /* two blocks of channels each way (cnn.cl's CNN_BLOCK, 4), half of
       * the second past the last channel */
      {5, 6, 6, "[convolutional]\nfilters=6\nsize=3\nstride=1\npad=1\n"
                "activation=relu"},
      {7, 9, 3, "[maxpool]\nsize=3\nstride=2"},
      {8, 6, 2, "[maxpool]\nsize=2\nstride=2\npadding=0"},
      {3, 4, 5, "[connected]\noutput=7\nactivation=relu"},
      {2, 3, 2, "[connected]\noutput=5\nactivation=linear"},
  };
  for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
    cnn_net *net = layer_net(kinds[k].h, kinds[k].w, kinds[k].c,
                             kinds[k].section);
    if (!net) continue;
    char name[64];
    snprintf(name, sizeof name, "kind %zu (%.*s)", k,
             (int)strcspn(kinds[k].section, "\n"), kinds[k].section);
    check_stage(o, q, net, name, 1, 2, 5, 1e-5);
    cnn_net_destroy(net);
  }
  /* the softmax with its loss alone, and a layer with it */
  cnn_net *sm = layer_net(1, 1, 10, "");
  if (sm) {
    check_stage(o, q, sm, "softmax", 1, 2, 6, 1e-5);
    cnn_net_destroy(sm);
  }
  sm = layer_net(1, 1, 12, "[connected]\noutput=6\nactivation=linear");
  if (sm) {
    check_stage(o, q, sm, "connected + softmax", 1, 3, 4, 1e-5);
    cnn_net_destroy(sm);
  }

  cnn_net *lenet = NULL;
  rc = cnn_cfg_read(EMBER_SOURCE_DIR "/accelerators/cnn/nets/lenet.cfg",
                    &lenet, err, sizeof err);
  CHECK(rc == 0, "lenet.cfg %d %s", rc, err);
  if (lenet) {
    size_t nl;
    cnn_net_layers(lenet, &nl);
    check_stage(o, q, lenet, "lenet", 0, nl, 8, 1e-4);
    cnn_net_destroy(lenet);
  }
  check_cache(f.ctx, f.dev);

  cnn_ocl_fixture_close(&f);
  printf("%ld checks, %d failures\n", checks, failures);
  return failures ? 1 : 0;
}
