/*
 * test_cnn_opencl_layers.c - the cnn stage on OpenCL (accelerators/cnn/
 * cnn_opencl.h, kernels cnn.cl) against the double-precision reference
 * (cnn_ref.h) on the layers darknet's small classifiers add, on the first
 * OpenCL device found (pocl's CPU device here): leaky and logistic
 * activations on convolutional and connected layers, batch-normalized
 * convolutions (cnn_bn_stats, cnn_bn_rolling, cnn_bn_fwd and the two
 * backward kernels), the global avg-pool and dropout (cnn_dropout's
 * hash, cnn_pass.h's), alone and chained in a small darknet-style net.
 * The same check as test_cnn_cpu_layers (tests/unit/cnn_stage_check.c):
 * per stage, two rounds of a training forward (outputs, loss, the rolling
 * statistics moved), the same forward recomputed (the rolling statistics
 * left alone), backward (input error; gradients of weights, biases and
 * scales, accumulated over two backwards in the second round), an SGD
 * update, an evaluation forward.
 *
 * Tolerances, norm-relative over a tensor (f32 sums, FMA contraction
 * allowed): outputs, parameters and the loss 1e-5, errors and gradients
 * 1e-4. Exit 77 (skipped) when no OpenCL device exists.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_net.h"
#include "cnn_ocl_fixture.h"
#include "cnn_opencl.h"
#include "cnn_stage_check.h"
#include "ember/ember_errors.h"

#define TOL_FP 1e-5
#define TOL_GRAD 1e-4

static int failures;

static int fwd(void *s, const float *in, float *out, const uint8_t *labels,
               double *loss, const cnn_pass *pass) {
  return cnn_ocl_stage_forward_pass(s, in, out, labels, loss, pass);
}
static int bwd(void *s, const float *dout, float *din) {
  return cnn_ocl_stage_backward(s, dout, din);
}
static int upd(void *s, double lr, double m, double d) {
  return cnn_ocl_stage_update(s, lr, m, d);
}
static int setp(void *s, size_t l, const float *w, const float *b) {
  return cnn_ocl_stage_set_params(s, l, w, b);
}
static int getp(void *s, size_t l, float *w, float *b) {
  return cnn_ocl_stage_get_params(s, l, w, b);
}
static int getg(void *s, size_t l, float *w, float *b) {
  return cnn_ocl_stage_get_grads(s, l, w, b);
}
static int setn(void *s, size_t l, const float *sc, const float *r) {
  return cnn_ocl_stage_set_norm(s, l, sc, r);
}
static int getn(void *s, size_t l, float *sc, float *r) {
  return cnn_ocl_stage_get_norm(s, l, sc, r);
}
static int getng(void *s, size_t l, float *sc) {
  return cnn_ocl_stage_get_norm_grads(s, l, sc);
}

static cnn_net *net_of(uint32_t h, uint32_t w, uint32_t c,
                       const char *layers) {
  char text[2048], err[256];
  int n = snprintf(text, sizeof text,
                   "[net]\nheight=%u\nwidth=%u\nchannels=%u\n%s", h, w, c,
                   layers);
  cnn_net *net = NULL;
  if (cnn_cfg_parse(text, (size_t)n, "test", &net, err, sizeof err)) {
    printf("FAIL: %s\n%s\n", err, text);
    failures++;
  }
  return net;
}

static void check_range(cnn_ocl *o, cl_command_queue q, const char *name,
                        const cnn_net *net, size_t first, size_t end,
                        uint32_t batch, uint64_t seed) {
  char err[256] = "";
  cnn_ocl_stage *s = NULL;
  int rc = cnn_ocl_stage_create(o, q, net, first, end, batch, &s, err,
                                sizeof err);
  if (rc) {
    printf("FAIL %s: cnn_ocl_stage_create %d %s\n", name, rc, err);
    failures++;
    return;
  }
  cnn_check_backend be = {s,    fwd,  bwd,  upd,  setp,
                          getp, getg, setn, getn, getng};
  int f = cnn_check_stage(name, net, first, end, batch, seed, &be, TOL_FP,
                          TOL_GRAD);
  if (f) printf("  (%s: %s)\n", name, cnn_ocl_stage_error(s));
  failures += f;
  cnn_ocl_stage_destroy(s);
}

int main(void) {
  cnn_ocl_fixture f;
  int rc = cnn_ocl_fixture_open(&f);
  if (rc) return rc;
  cnn_ocl *o = f.o;
  cl_command_queue q = f.q;
  char err[4096] = "";

  /* single layers behind an identity max-pool, so that the stage [1, 2)
   * computes its input error; 6 channels make two blocks of cnn.cl's
   * work-items */
  static const struct {
    uint32_t h, w, c;
    const char *cfg;
  } cases[] = {
      {7, 6, 6, "[convolutional]\nfilters=6\nsize=3\npad=1\n"
                "activation=leaky\n"},
      {7, 6, 3, "[convolutional]\nfilters=5\nsize=3\nstride=2\n"
                "activation=logistic\n"},
      {7, 6, 6, "[convolutional]\nfilters=6\nsize=3\npad=1\n"
                "batch_normalize=1\nactivation=leaky\n"},
      {8, 8, 3, "[convolutional]\nfilters=6\nsize=3\nstride=2\npad=1\n"
                "batch_normalize=1\nactivation=linear\n"},
      {6, 5, 4, "[convolutional]\nfilters=7\nsize=1\nbatch_normalize=1\n"
                "activation=relu\n"},
      {5, 5, 2, "[convolutional]\nfilters=3\nsize=3\nbatch_normalize=1\n"
                "activation=logistic\n"},
      {4, 3, 2, "[connected]\noutput=5\nactivation=leaky\n"},
      {3, 3, 4, "[connected]\noutput=9\n"},  /* logistic */
      {7, 5, 6, "[avgpool]\n"},
      {6, 5, 4, "[dropout]\nprobability=0.4\n"},
      {3, 2, 3, "[dropout]\nprobability=0.1\n"},
      /* padding at least the kernel's size (issue 25): windows wholly in
       * padding, outputs that are the bias alone */
      {6, 5, 3, "[convolutional]\nfilters=4\nsize=1\npadding=1\n"
                "activation=relu\n"},
      {5, 5, 2, "[convolutional]\nfilters=3\nsize=1\npadding=2\n"
                "activation=leaky\n"},
      {7, 6, 3, "[convolutional]\nfilters=5\nsize=3\npadding=3\n"
                "activation=logistic\n"},
      {8, 7, 6, "[convolutional]\nfilters=6\nsize=3\npadding=3\n"
                "stride=2\nactivation=relu\n"},
      {6, 6, 4, "[convolutional]\nfilters=6\nsize=3\npadding=3\n"
                "batch_normalize=1\nactivation=leaky\n"},
      {4, 5, 2, "[convolutional]\nfilters=3\nsize=2\npadding=5\n"
                "stride=3\nactivation=linear\n"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char cfg[512], name[32];
    snprintf(cfg, sizeof cfg, "[maxpool]\nsize=1\nstride=1\npadding=0\n%s"
             "[softmax]\n", cases[i].cfg);
    snprintf(name, sizeof name, "case %zu", i);
    cnn_net *net = net_of(cases[i].h, cases[i].w, cases[i].c, cfg);
    if (!net) continue;
    check_range(o, q, name, net, 1, 2, 3, 17 + i);
    cnn_net_destroy(net);
  }
  /* dropout between connected layers; darknet's small-classifier
   * pattern, whole and as its tail */
  cnn_net *net = net_of(3, 3, 2, "[connected]\noutput=30\nactivation=leaky\n"
                                 "[dropout]\nprobability=0.5\n"
                                 "[connected]\noutput=4\nactivation=linear\n"
                                 "[softmax]\n");
  if (net) {
    check_range(o, q, "connected, dropout, connected", net, 0, 4, 4, 98);
    cnn_net_destroy(net);
  }
  /* an activation right before the softmax, whose error the forward
   * pass computes: the second backward of a round must start from it
   * again, not from what the first took through the derivative */
  net = net_of(3, 3, 2, "[maxpool]\nsize=1\nstride=1\n"
                        "[connected]\noutput=6\nactivation=leaky\n"
                        "[softmax]\n");
  if (net) {
    check_range(o, q, "leaky before the softmax", net, 1, 3, 4, 97);
    cnn_net_destroy(net);
  }
  net = net_of(3, 3, 2, "[maxpool]\nsize=1\nstride=1\n"
                        "[convolutional]\nfilters=3\nsize=3\n"
                        "batch_normalize=1\nactivation=logistic\n"
                        "[softmax]\n");
  if (net) {
    check_range(o, q, "normalised logistic before the softmax", net, 1, 3,
                4, 96);
    cnn_net_destroy(net);
  }
  net = net_of(10, 10, 1,
               "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\n"
               "pad=1\nactivation=leaky\n"
               "[maxpool]\nsize=2\nstride=2\n"
               "[dropout]\nprobability=0.3\n"
               "[convolutional]\nbatch_normalize=1\nfilters=12\nsize=3\n"
               "pad=1\nactivation=leaky\n"
               "[convolutional]\nfilters=5\nsize=1\nactivation=leaky\n"
               "[avgpool]\n[softmax]\n");
  if (net) {
    check_range(o, q, "small classifier [0, 7)", net, 0, 7, 4, 7);
    check_range(o, q, "small classifier [2, 7)", net, 2, 7, 3, 8);
    cnn_net_destroy(net);
  }
  /* bad calls */
  net = net_of(4, 4, 1, "[convolutional]\nfilters=2\n[softmax]\n");
  if (net) {
    cnn_ocl_stage *s = NULL;
    if (cnn_ocl_stage_create(o, q, net, 0, 2, 2, &s, err, sizeof err) == 0) {
      float sc[2] = {1, 1}, roll[4] = {0};
      cnn_pass bad = {(cnn_mode)9, 0, 0, 0};
      float in[32] = {0};
      if (cnn_ocl_stage_set_norm(s, 0, sc, roll) != EMBER_EINVAL ||
          cnn_ocl_stage_forward_pass(s, in, NULL, NULL, NULL, &bad) !=
              EMBER_EINVAL) {
        printf("FAIL: bad calls accepted\n");
        failures++;
      }
      cnn_ocl_stage_destroy(s);
    }
    cnn_net_destroy(net);
  }
  cnn_ocl_fixture_close(&f);
  printf("%d failures\n", failures);
  return failures ? 1 : 0;
}
