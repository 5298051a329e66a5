/* test_cnn_cpu.c - the oneDNN stage (accelerators/cnn/cnn_cpu.c) against
 * the double-precision reference (cnn_ref.c) on the same random inputs,
 * parameters and errors: FP outputs, EB input errors, PG gradients and two
 * SGD updates (momentum included), for single layers, a small net of
 * every kind with blocked layouts inside, and the whole LeNet
 * (nets/lenet.cfg) as one stage; LeNet split into three chained stages
 * against LeNet as one; a short training run on the 100 Fashion-MNIST
 * images of tests/data/cnn whose loss must fall.
 *
 * Tolerances (single precision against double), as norm-relative errors
 * ||stage - reference|| / ||reference|| over a whole tensor: FP outputs
 * and updated parameters TOL_FP = 1e-5; EB errors and PG gradients, sums
 * over up to a batch x output positions of products, TOL_GRAD = 1e-4.
 * Chained stages against one stage run the same primitives on the same
 * values: TOL_SPLIT = 1e-6. Against oneDNN's primitives run directly on
 * plain layouts (other implementations, other summation orders), all
 * three passes: TOL_DIRECT = 1e-5. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include <oneapi/dnnl/dnnl.h>

#include "alloc_fail.h"
#include "cnn_cpu.h"
#include "cnn_idx.h"
#include "cnn_ref.h"
#include "cnn_test_util.h"

#define TOL_FP 1e-5
#define TOL_GRAD 1e-4
#define TOL_SPLIT 1e-6
#define TOL_DIRECT 1e-5
#define LR 0.05
#define MOMENTUM 0.9
#define DECAY 0.01
#define LENET EMBER_SOURCE_DIR "/accelerators/cnn/nets/lenet.cfg"
#define DATA EMBER_SOURCE_DIR "/tests/data/cnn"

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  assert_non_null(p);
  return p;
}

/* The reference over layers first .. end-1, with its parameters,
 * momentum, gradients and activations. */
typedef struct ref_stage {
  const cnn_layer *layers;
  size_t first, end;
  uint32_t batch, classes;
  double **w, **b, **vw, **vb, **gw, **gb, **act, **err;
} ref_stage;

static size_t n_of(const ref_stage *r, size_t j, bool out) {
  const cnn_layer *l = &r->layers[r->first + j];
  return r->batch * cnn_ref_elems(out ? l->out : l->in);
}

static ref_stage *ref_create(const cnn_net *net, size_t first, size_t end,
                             uint32_t batch) {
  ref_stage *r = xcalloc(1, sizeof *r);
  size_t nl, L = end - first;
  r->layers = cnn_net_layers(net, &nl);
  r->first = first, r->end = end, r->batch = batch;
  r->classes = cnn_net_classes(net);
  double ***arrs[] = {&r->w, &r->b, &r->vw, &r->vb, &r->gw, &r->gb};
  for (size_t k = 0; k < 6; k++) {
    *arrs[k] = xcalloc(L, sizeof(double *));
    for (size_t j = 0; j < L; j++) {
      const cnn_layer *l = &r->layers[first + j];
      (*arrs[k])[j] = xcalloc(k % 2 ? l->biases : l->weights, sizeof(double));
    }
  }
  r->act = xcalloc(L + 1, sizeof(double *));
  r->err = xcalloc(L + 1, sizeof(double *));
  for (size_t j = 0; j <= L; j++) {
    size_t n = j < L ? n_of(r, j, false) : n_of(r, L - 1, true);
    r->act[j] = xcalloc(n, sizeof(double));
    r->err[j] = xcalloc(n, sizeof(double));
  }
  return r;
}

static void ref_destroy(ref_stage *r) {
  size_t L = r->end - r->first;
  double **arrs[] = {r->w, r->b, r->vw, r->vb, r->gw, r->gb};
  for (size_t k = 0; k < 6; k++) {
    for (size_t j = 0; j < L; j++) free(arrs[k][j]);
    free(arrs[k]);
  }
  for (size_t j = 0; j <= L; j++) free(r->act[j]), free(r->err[j]);
  free(r->act), free(r->err), free(r);
}

static void ref_forward(ref_stage *r, const float *in) {
  for (size_t i = 0; i < n_of(r, 0, false); i++) r->act[0][i] = in[i];
  for (size_t j = 0; j < r->end - r->first; j++)
    cnn_ref_forward(&r->layers[r->first + j], r->batch, r->act[j], r->w[j],
                    r->b[j], r->act[j + 1]);
}

/* dout, or for a softmax stage the labels, then back to err[0]. */
static void ref_backward(ref_stage *r, const float *dout,
                         const uint8_t *labels) {
  size_t L = r->end - r->first;
  const cnn_layer *last = &r->layers[r->end - 1];
  size_t j = L;
  if (last->kind == CNN_LAYER_SOFTMAX) {
    j = L - 1;
    cnn_ref_xent_grad(r->batch, r->classes, r->act[L], labels, r->err[j]);
  } else {
    for (size_t i = 0; i < n_of(r, L - 1, true); i++) r->err[L][i] = dout[i];
  }
  while (j-- > 0) {
    const cnn_layer *l = &r->layers[r->first + j];
    cnn_ref_backward(l, r->batch, r->act[j], r->act[j + 1], r->w[j],
                     r->err[j + 1], r->err[j], l->weights ? r->gw[j] : NULL,
                     l->biases ? r->gb[j] : NULL);
  }
}

static void ref_update(ref_stage *r) {
  for (size_t j = 0; j < r->end - r->first; j++) {
    const cnn_layer *l = &r->layers[r->first + j];
    cnn_ref_sgd(l->weights, r->w[j], r->vw[j], r->gw[j], LR, MOMENTUM, DECAY);
    cnn_ref_sgd(l->biases, r->b[j], r->vb[j], r->gb[j], LR, MOMENTUM, 0);
  }
}

/* Random parameters of scale 1/sqrt(fan-in), in both. */
static void init_params(ref_stage *r, cnn_cpu_stage *s, uint64_t *rng) {
  for (size_t j = 0; j < r->end - r->first; j++) {
    const cnn_layer *l = &r->layers[r->first + j];
    if (!l->weights) continue;
    float *w = xcalloc(l->weights, sizeof *w), *b = xcalloc(l->biases, 4);
    double scale = 1 / sqrt((double)l->weights / l->biases);
    for (size_t i = 0; i < l->weights; i++)
      r->w[j][i] = w[i] = (float)(scale * cnn_test_uniform(rng));
    for (size_t i = 0; i < l->biases; i++)
      r->b[j][i] = b[i] = (float)(0.1 * cnn_test_uniform(rng));
    assert_int_equal(cnn_cpu_stage_set_params(s, r->first + j, w, b), 0);
    free(w), free(b);
  }
}

static void check(const char *what, const char *name, size_t layer,
                  const float *a, const double *b, size_t n, double tol) {
  double e = cnn_test_rel_err_f(a, b, n);
  if (!(e <= tol)) {
    size_t i = cnn_test_worst_f(a, b, n);
    fail_msg("%s, layer %zu: %s relative error %.3g > %.1g (worst [%zu]: "
             "%.9g vs %.9g)", name, layer, what, e, tol, i, a[i], b[i]);
  }
}

static void check_params(const char *name, ref_stage *r, cnn_cpu_stage *s,
                         bool grads) {
  for (size_t j = 0; j < r->end - r->first; j++) {
    const cnn_layer *l = &r->layers[r->first + j];
    if (!l->weights) continue;
    float *w = xcalloc(l->weights, sizeof *w), *b = xcalloc(l->biases, 4);
    size_t k = r->first + j;
    if (grads) {
      assert_int_equal(cnn_cpu_stage_get_grads(s, k, w, b), 0);
      check("weight gradients", name, k, w, r->gw[j], l->weights, TOL_GRAD);
      check("bias gradients", name, k, b, r->gb[j], l->biases, TOL_GRAD);
    } else {
      assert_int_equal(cnn_cpu_stage_get_params(s, k, w, b), 0);
      check("weights", name, k, w, r->w[j], l->weights, TOL_FP);
      check("biases", name, k, b, r->b[j], l->biases, TOL_FP);
    }
    free(w), free(b);
  }
}

/* Two rounds of forward, backward (twice in the second round: gradients
 * accumulate) and update on a stage and the reference, everything
 * compared. */
static void compare_stage(const char *name, const cnn_net *net, size_t first,
                          size_t end, uint32_t batch, uint64_t seed) {
  char err[256];
  cnn_cpu_stage *s = NULL;
  int rc = cnn_cpu_stage_create(net, first, end, batch, &s, err, sizeof err);
  if (rc) fail_msg("%s: cnn_cpu_stage_create: %d %s", name, rc, err);
  ref_stage *r = ref_create(net, first, end, batch);
  uint64_t rng = seed;
  init_params(r, s, &rng);
  size_t L = end - first;
  size_t nin = n_of(r, 0, false), nout = n_of(r, L - 1, true);
  bool softmax = r->layers[end - 1].kind == CNN_LAYER_SOFTMAX;
  float *in = xcalloc(nin, 4), *out = xcalloc(nout, 4);
  float *dout = xcalloc(nout, 4), *din = xcalloc(nin, 4);
  uint8_t *labels = xcalloc(batch, 1);
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < nin; i++) in[i] = (float)cnn_test_uniform(&rng);
    for (size_t i = 0; i < nout; i++)
      dout[i] = (float)cnn_test_uniform(&rng);
    for (size_t n = 0; n < batch; n++)
      labels[n] = (uint8_t)((cnn_test_uniform(&rng) + 1) / 2 * r->classes);
    double loss = 0;
    assert_int_equal(cnn_cpu_stage_forward(s, in, out, softmax ? labels : NULL,
                                           &loss), 0);
    ref_forward(r, in);
    check("output", name, end - 1, out, r->act[L], nout, TOL_FP);
    if (softmax) {
      double want = cnn_ref_xent_loss(batch, r->classes, r->act[L], labels);
      if (fabs(loss - want) > TOL_FP * fmax(1, want))
        fail_msg("%s: loss %.9g, reference %.9g", name, loss, want);
    }
    assert_int_equal(
        cnn_cpu_stage_backward(s, dout, first > 0 ? din : NULL), 0);
    ref_backward(r, dout, labels);
    if (round == 1) {  /* gradients accumulate over two backwards */
      assert_int_equal(
          cnn_cpu_stage_backward(s, dout, first > 0 ? din : NULL), 0);
      ref_backward(r, dout, labels);
    }
    if (first > 0)
      check("input error", name, first, din, r->err[0], nin, TOL_GRAD);
    check_params(name, r, s, true);
    assert_int_equal(cnn_cpu_stage_update(s, LR, MOMENTUM, DECAY), 0);
    ref_update(r);
    check_params(name, r, s, false);
  }
  free(in), free(out), free(dout), free(din), free(labels);
  ref_destroy(r);
  cnn_cpu_stage_destroy(s);
}

/* Single layers, each behind an identity max-pool (size 1) so that the
 * stage [1, 2) computes its input error; channels of 16 and more make
 * oneDNN pick blocked layouts. */
static const struct {
  uint32_t h, w, c;
  const char *cfg;
} layer_cases[] = {
    {9, 7, 16, "[convolutional]\nfilters=32\nsize=3\nstride=1\npad=1\n"
               "activation=relu\n"},
    {13, 10, 3, "[convolutional]\nfilters=8\nsize=5\nstride=2\npadding=2\n"
                "activation=linear\n"},
    {6, 5, 16, "[convolutional]\nfilters=16\nsize=1\nstride=1\n"
               "activation=relu\n"},
    {11, 8, 4, "[convolutional]\nfilters=6\nsize=3\nstride=3\n"
               "activation=linear\n"},
    {10, 12, 2, "[convolutional]\nfilters=5\nsize=4\nstride=2\npadding=1\n"
                "activation=relu\n"},
    {6, 5, 16, "[maxpool]\nsize=2\nstride=2\npadding=0\n"},
    {7, 7, 3, "[maxpool]\nsize=3\nstride=2\n"},
    {5, 4, 16, "[maxpool]\nsize=2\nstride=1\n"},
    {5, 6, 2, "[maxpool]\nsize=3\nstride=3\npadding=1\n"},
    {4, 3, 2, "[connected]\noutput=5\nactivation=relu\n"},
    {3, 3, 16, "[connected]\noutput=40\nactivation=linear\n"},
};

static void test_single_layers(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof layer_cases / sizeof layer_cases[0]; i++) {
    char name[32];
    snprintf(name, sizeof name, "case %zu", i);
    cnn_net *net = cnn_test_layer_net(layer_cases[i].h, layer_cases[i].w,
                                      layer_cases[i].c, layer_cases[i].cfg);
    compare_stage(name, net, 1, 2, 3, 7 + i);
    cnn_net_destroy(net);
  }
}

/* Every kind in one stage with blocked layouts between them, and a stage
 * of the softmax alone. */
static void test_small_net(void **state) {
  (void)state;
  cnn_net *net = cnn_test_net(
      11, 9, 3,
      "[maxpool]\nsize=1\nstride=1\npadding=0\n"
      "[convolutional]\nfilters=16\nsize=3\nstride=1\npad=1\nactivation=relu\n"
      "[maxpool]\nsize=3\nstride=2\n"
      "[convolutional]\nfilters=24\nsize=3\nstride=1\nactivation=linear\n"
      "[maxpool]\nsize=2\nstride=2\npadding=0\n"
      "[connected]\noutput=20\nactivation=relu\n"
      "[connected]\noutput=7\nactivation=linear\n"
      "[softmax]\n");
  compare_stage("small net [1, 8)", net, 1, 8, 4, 42);
  compare_stage("small net [0, 8)", net, 0, 8, 2, 43);
  compare_stage("small net [3, 5)", net, 3, 5, 3, 44);
  compare_stage("softmax alone", net, 7, 8, 5, 45);
  cnn_net_destroy(net);
}

static void test_lenet(void **state) {
  (void)state;
  char err[256];
  cnn_net *net = NULL;
  assert_int_equal(cnn_cfg_read(LENET, &net, err, sizeof err), 0);
  compare_stage("LeNet", net, 0, 7, 4, 2024);
  cnn_net_destroy(net);
}

/* LeNet as stages [0, 2), [2, 5), [5, 7) chained against LeNet as one. */
static void test_lenet_split(void **state) {
  (void)state;
  enum { B = 8, S = 3 };
  char err[256];
  cnn_net *net = NULL;
  assert_int_equal(cnn_cfg_read(LENET, &net, err, sizeof err), 0);
  size_t nl;
  const cnn_layer *layers = cnn_net_layers(net, &nl);
  size_t cut[S + 1] = {0, 2, 5, 7};
  cnn_cpu_stage *whole, *part[S];
  assert_int_equal(cnn_cpu_stage_create(net, 0, 7, B, &whole, err, sizeof err), 0);
  for (int k = 0; k < S; k++)
    assert_int_equal(cnn_cpu_stage_create(net, cut[k], cut[k + 1], B,
                                          &part[k], err, sizeof err), 0);
  uint64_t rng = 5;
  for (size_t i = 0; i < nl; i++) {
    if (!layers[i].weights) continue;
    float *w = xcalloc(layers[i].weights, 4), *b = xcalloc(layers[i].biases, 4);
    for (size_t k = 0; k < layers[i].weights; k++)
      w[k] = (float)(0.1 * cnn_test_uniform(&rng));
    for (size_t k = 0; k < layers[i].biases; k++)
      b[k] = (float)(0.1 * cnn_test_uniform(&rng));
    assert_int_equal(cnn_cpu_stage_set_params(whole, i, w, b), 0);
    for (int k = 0; k < S; k++)
      if (i >= cut[k] && i < cut[k + 1])
        assert_int_equal(cnn_cpu_stage_set_params(part[k], i, w, b), 0);
    free(w), free(b);
  }
  size_t nact[S + 1];
  float *act[S + 1], *errs[S + 1];
  nact[0] = B * cnn_ref_elems(layers[0].in);
  for (int k = 0; k < S; k++)
    nact[k + 1] = B * cnn_ref_elems(layers[cut[k + 1] - 1].out);
  for (int k = 0; k <= S; k++) {
    act[k] = xcalloc(nact[k], 4);
    errs[k] = xcalloc(nact[k], 4);
  }
  float *p = xcalloc(nact[S], 4);
  double *pd = xcalloc(nact[S], 8);
  uint8_t labels[B];
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < nact[0]; i++)
      act[0][i] = (float)((cnn_test_uniform(&rng) + 1) / 2);
    for (int n = 0; n < B; n++) labels[n] = (uint8_t)((n * 7 + round) % 10);
    double loss_whole, loss_split;
    assert_int_equal(cnn_cpu_stage_forward(whole, act[0], p, labels,
                                           &loss_whole), 0);
    for (int k = 0; k < S; k++)
      assert_int_equal(cnn_cpu_stage_forward(part[k], act[k], act[k + 1],
                                             k == S - 1 ? labels : NULL,
                                             k == S - 1 ? &loss_split : NULL),
                       0);
    for (size_t i = 0; i < nact[S]; i++) pd[i] = p[i];
    check("split probabilities", "LeNet", 6, act[S], pd, nact[S], TOL_SPLIT);
    assert_true(fabs(loss_whole - loss_split) <= TOL_SPLIT * loss_whole);
    assert_int_equal(cnn_cpu_stage_backward(whole, NULL, NULL), 0);
    for (int k = S; k-- > 0;)
      assert_int_equal(cnn_cpu_stage_backward(part[k], errs[k + 1],
                                              k ? errs[k] : NULL), 0);
    for (size_t i = 0; i < nl; i++) {
      if (!layers[i].weights) continue;
      int k = 0;
      while (i >= cut[k + 1]) k++;
      size_t nw = layers[i].weights, nb = layers[i].biases;
      float *w1 = xcalloc(nw, 4), *b1 = xcalloc(nb, 4);
      float *w2 = xcalloc(nw, 4), *b2 = xcalloc(nb, 4);
      double *wd = xcalloc(nw, 8), *bd = xcalloc(nb, 8);
      assert_int_equal(cnn_cpu_stage_get_grads(whole, i, w1, b1), 0);
      assert_int_equal(cnn_cpu_stage_get_grads(part[k], i, w2, b2), 0);
      for (size_t q = 0; q < nw; q++) wd[q] = w1[q];
      for (size_t q = 0; q < nb; q++) bd[q] = b1[q];
      check("split weight gradients", "LeNet", i, w2, wd, nw, TOL_SPLIT);
      check("split bias gradients", "LeNet", i, b2, bd, nb, TOL_SPLIT);
      free(w1), free(b1), free(w2), free(b2), free(wd), free(bd);
    }
    assert_int_equal(cnn_cpu_stage_update(whole, LR, MOMENTUM, DECAY), 0);
    for (int k = 0; k < S; k++)
      assert_int_equal(cnn_cpu_stage_update(part[k], LR, MOMENTUM, DECAY), 0);
  }
  for (int k = 0; k <= S; k++) free(act[k]), free(errs[k]);
  free(p), free(pd);
  for (int k = 0; k < S; k++) cnn_cpu_stage_destroy(part[k]);
  cnn_cpu_stage_destroy(whole);
  cnn_net_destroy(net);
}

/* LeNet on the 100 Fashion-MNIST images, 30 SGD steps of 20 images with
 * the file's settings (learning rate 0.01, momentum 0.9, decay 0.0005):
 * the mean loss of the last 5 steps must be under 60% of the first 5's
 * (it starts near log 10 = 2.3). */
static void test_lenet_trains(void **state) {
  (void)state;
  enum { B = 20, STEPS = 30 };
  char err[256];
  cnn_net *net = NULL;
  cnn_data *data = NULL;
  assert_int_equal(cnn_cfg_read(LENET, &net, err, sizeof err), 0);
  int rc = cnn_data_read_dir(DATA, CNN_SPLIT_TEST, CNN_FASHION_CLASSES, &data,
                             err, sizeof err);
  if (rc) fail_msg("%s", err);
  size_t count = cnn_data_count(data), px = 28 * 28;
  assert_true(count >= 100);
  const cnn_train *tr = cnn_net_train(net);
  cnn_cpu_stage *s = NULL;
  assert_int_equal(cnn_cpu_stage_create(net, 0, 7, B, &s, err, sizeof err), 0);
  size_t nl;
  const cnn_layer *layers = cnn_net_layers(net, &nl);
  uint64_t rng = 77;
  for (size_t i = 0; i < nl; i++) {
    if (!layers[i].weights) continue;
    float *w = xcalloc(layers[i].weights, 4), *b = xcalloc(layers[i].biases, 4);
    /* He's uniform: variance 2 / fan-in */
    double a = sqrt(6.0 * layers[i].biases / layers[i].weights);
    for (size_t k = 0; k < layers[i].weights; k++)
      w[k] = (float)(a * cnn_test_uniform(&rng));
    assert_int_equal(cnn_cpu_stage_set_params(s, i, w, b), 0);
    free(w), free(b);
  }
  float *x = xcalloc(B * px, 4);
  double first = 0, last = 0;
  for (int step = 0; step < STEPS; step++) {
    size_t at = (size_t)(step % 5) * B;
    assert_int_equal(cnn_data_to_float(data, at, B, x), 0);
    double loss;
    assert_int_equal(cnn_cpu_stage_forward(s, x, NULL,
                                           cnn_data_labels(data) + at, &loss),
                     0);
    assert_int_equal(cnn_cpu_stage_backward(s, NULL, NULL), 0);
    assert_int_equal(cnn_cpu_stage_update(s, tr->learning_rate, tr->momentum,
                                          tr->decay), 0);
    if (step < 5) first += loss / 5;
    if (step >= STEPS - 5) last += loss / 5;
  }
  print_message("LeNet, 100 images: mean loss %.4f over the first 5 steps, "
                "%.4f over the last 5\n", first, last);
  assert_true(first > 1.5);
  if (!(last < 0.6 * first))
    fail_msg("loss %.4f -> %.4f: no clear drop", first, last);
  free(x);
  cnn_cpu_stage_destroy(s);
  cnn_data_destroy(data);
  cnn_net_destroy(net);
}

static void test_bad_arguments(void **state) {
  (void)state;
  char err[256];
  cnn_net *net = NULL;
  cnn_cpu_stage *s = NULL;
  assert_int_equal(cnn_cfg_read(LENET, &net, err, sizeof err), 0);
  assert_int_equal(cnn_cpu_stage_create(net, 3, 3, 1, &s, err, sizeof err),
                   EMBER_EINVAL);
  assert_null(s);
  assert_int_equal(cnn_cpu_stage_create(net, 0, 8, 1, &s, err, sizeof err),
                   EMBER_EINVAL);
  assert_int_equal(cnn_cpu_stage_create(net, 0, 1, 0, &s, err, sizeof err),
                   EMBER_EINVAL);
  assert_int_equal(cnn_cpu_stage_create(net, 0, 2, 2, &s, err, sizeof err), 0);
  float in[2 * 28 * 28] = {0}, w[20 * 25], b[20];
  uint8_t labels[2] = {0, 1};
  assert_int_equal(cnn_cpu_stage_forward(s, in, NULL, labels, NULL),
                   EMBER_EINVAL);   /* no softmax here */
  assert_int_equal(cnn_cpu_stage_backward(s, NULL, NULL), EMBER_EINVAL);
  assert_int_equal(cnn_cpu_stage_get_params(s, 1, w, b), EMBER_EINVAL);
  assert_int_equal(cnn_cpu_stage_get_params(s, 2, w, b), EMBER_EINVAL);
  assert_int_equal(cnn_cpu_stage_get_params(s, 0, w, b), 0);
  cnn_cpu_stage_destroy(s);
  cnn_cpu_stage_destroy(NULL);
  /* a convolution after a connected layer, in one stage */
  cnn_net *bad = cnn_test_net(4, 4, 1, "[connected]\noutput=16\n"
                              "activation=relu\n[convolutional]\nfilters=2\n"
                              "size=1\nactivation=relu\n[softmax]\n");
  assert_int_equal(cnn_cpu_stage_create(bad, 0, 2, 1, &s, err, sizeof err),
                   EMBER_EPARAM);
  assert_non_null(strstr(err, "layer 1"));
  cnn_net_destroy(bad);
  cnn_net_destroy(net);
}

#define DN(call) assert_int_equal((int)(call), (int)dnnl_success)

static dnnl_memory_t user_mem(dnnl_engine_t eng, int nd, const dnnl_dim_t *d,
                              dnnl_format_tag_t tag, const float *p) {
  dnnl_memory_desc_t md;
  dnnl_memory_t m;
  DN(dnnl_memory_desc_init_by_tag(&md, nd, d, dnnl_f32, tag));
  DN(dnnl_memory_create(&m, &md, eng, (void *)(uintptr_t)p));
  return m;
}

/* oneDNN's convolution or inner product run directly on plain layouts:
 * y = layer(x) (no activation: the layers compared are linear), dx, dw,
 * db from dy. */
static void direct_layer(const cnn_layer *l, uint32_t batch, const float *x,
                         const float *w, const float *b, const float *dy,
                         float *y, float *dx, float *dw, float *db) {
  bool conv = l->kind == CNN_LAYER_CONV;
  dnnl_engine_t eng;
  dnnl_stream_t st;
  DN(dnnl_engine_create(&eng, dnnl_cpu, 0));
  DN(dnnl_stream_create(&st, eng, dnnl_stream_default_flags));
  dnnl_dims_t sd = {batch, l->in.c, l->in.h, l->in.w};
  dnnl_dims_t wd = {conv ? l->out.c : l->out.c * l->out.h * l->out.w, l->in.c,
                    conv ? l->size : l->in.h, conv ? l->size : l->in.w};
  dnnl_dims_t bd = {wd[0]};
  dnnl_dims_t dd = {batch, wd[0], l->out.h, l->out.w};
  int dnd = conv ? 4 : 2;
  dnnl_memory_t ms[] = {
      user_mem(eng, 4, sd, dnnl_nchw, x), user_mem(eng, 4, wd, dnnl_oihw, w),
      user_mem(eng, 1, bd, dnnl_x, b),
      user_mem(eng, dnd, dd, conv ? dnnl_nchw : dnnl_nc, y),
      user_mem(eng, dnd, dd, conv ? dnnl_nchw : dnnl_nc, dy),
      user_mem(eng, 4, sd, dnnl_nchw, dx), user_mem(eng, 4, wd, dnnl_oihw, dw),
      user_mem(eng, 1, bd, dnnl_x, db)};
  const dnnl_memory_desc_t *md[8];
  for (int i = 0; i < 8; i++) DN(dnnl_memory_get_memory_desc(ms[i], &md[i]));
  dnnl_dims_t str = {l->stride, l->stride}, pad = {l->padding, l->padding};
  dnnl_convolution_desc_t cd;
  dnnl_inner_product_desc_t id;
  const_dnnl_op_desc_t op = conv ? (const_dnnl_op_desc_t)&cd : &id;
  dnnl_primitive_desc_t pd[3];
  if (conv)
    DN(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training,
                                          dnnl_convolution_direct, md[0],
                                          md[1], md[2], md[3], str, pad, pad));
  else
    DN(dnnl_inner_product_forward_desc_init(&id, dnnl_forward_training, md[0],
                                            md[1], md[2], md[3]));
  DN(dnnl_primitive_desc_create(&pd[0], op, NULL, eng, NULL));
  if (conv)
    DN(dnnl_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct,
                                                md[5], md[1], md[4], str, pad,
                                                pad));
  else
    DN(dnnl_inner_product_backward_data_desc_init(&id, md[5], md[1], md[4]));
  DN(dnnl_primitive_desc_create(&pd[1], op, NULL, eng, pd[0]));
  if (conv)
    DN(dnnl_convolution_backward_weights_desc_init(
        &cd, dnnl_convolution_direct, md[0], md[6], md[7], md[4], str, pad,
        pad));
  else
    DN(dnnl_inner_product_backward_weights_desc_init(&id, md[0], md[6], md[7],
                                                     md[4]));
  DN(dnnl_primitive_desc_create(&pd[2], op, NULL, eng, pd[0]));
  dnnl_exec_arg_t a0[] = {{DNNL_ARG_SRC, ms[0]}, {DNNL_ARG_WEIGHTS, ms[1]},
                          {DNNL_ARG_BIAS, ms[2]}, {DNNL_ARG_DST, ms[3]}};
  dnnl_exec_arg_t a1[] = {{DNNL_ARG_DIFF_DST, ms[4]}, {DNNL_ARG_WEIGHTS, ms[1]},
                          {DNNL_ARG_DIFF_SRC, ms[5]}};
  dnnl_exec_arg_t a2[] = {{DNNL_ARG_SRC, ms[0]}, {DNNL_ARG_DIFF_DST, ms[4]},
                          {DNNL_ARG_DIFF_WEIGHTS, ms[6]},
                          {DNNL_ARG_DIFF_BIAS, ms[7]}};
  const dnnl_exec_arg_t *args[3] = {a0, a1, a2};
  int nargs[3] = {4, 3, 4};
  for (int i = 0; i < 3; i++) {
    dnnl_primitive_t p;
    DN(dnnl_primitive_create(&p, pd[i]));
    DN(dnnl_primitive_execute(p, st, nargs[i], args[i]));
    DN(dnnl_stream_wait(st));
    dnnl_primitive_destroy(p);
    dnnl_primitive_desc_destroy(pd[i]);
  }
  for (int i = 0; i < 8; i++) dnnl_memory_destroy(ms[i]);
  dnnl_stream_destroy(st);
  dnnl_engine_destroy(eng);
}

static void check_direct(const char *what, const char *name, const float *a,
                         const float *b, size_t n) {
  double *bd = xcalloc(n, sizeof *bd);
  for (size_t i = 0; i < n; i++) bd[i] = b[i];
  check(what, name, 1, a, bd, n, TOL_DIRECT);
  free(bd);
}

/* The stage's FP, EB and PG against oneDNN's primitives run directly, on a
 * convolution (blocked inside the stage) and a connected layer. */
static void test_against_direct_onednn(void **state) {
  (void)state;
  static const struct {
    uint32_t h, w, c;
    const char *cfg;
  } cases[] = {
      {10, 9, 16, "[convolutional]\nfilters=24\nsize=3\nstride=2\npad=1\n"
                  "activation=linear\n"},
      {7, 5, 3, "[convolutional]\nfilters=4\nsize=5\nstride=1\npad=1\n"
                "activation=linear\n"},
      {4, 4, 16, "[connected]\noutput=30\nactivation=linear\n"},
  };
  enum { B = 3 };
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    char cfg[512], err[256], name[32];
    snprintf(cfg, sizeof cfg, "[maxpool]\nsize=1\nstride=1\npadding=0\n%s"
             "[softmax]\n", cases[ci].cfg);
    snprintf(name, sizeof name, "direct case %zu", ci);
    cnn_net *net = cnn_test_net(cases[ci].h, cases[ci].w, cases[ci].c, cfg);
    size_t nl;
    const cnn_layer *l = &cnn_net_layers(net, &nl)[1];
    size_t nx = B * cnn_ref_elems(l->in), ny = B * cnn_ref_elems(l->out);
    size_t nw = l->weights, nb = l->biases;
    float *f[12];
    size_t sizes[12] = {nx, nw, nb, ny, ny, nx, nw, nb, ny, nx, nw, nb};
    uint64_t rng = 300 + ci;
    for (int i = 0; i < 12; i++) {
      f[i] = xcalloc(sizes[i], sizeof(float));
      if (i < 5)
        for (size_t k = 0; k < sizes[i]; k++)
          f[i][k] = (float)cnn_test_uniform(&rng);
    }
    /* x w b dy | y dx dw db (direct) | y dx dw db (stage) */
    direct_layer(l, B, f[0], f[1], f[2], f[4], f[3], f[5], f[6], f[7]);
    cnn_cpu_stage *s;
    assert_int_equal(cnn_cpu_stage_create(net, 1, 2, B, &s, err, sizeof err), 0);
    assert_int_equal(cnn_cpu_stage_set_params(s, 1, f[1], f[2]), 0);
    assert_int_equal(cnn_cpu_stage_forward(s, f[0], f[8], NULL, NULL), 0);
    assert_int_equal(cnn_cpu_stage_backward(s, f[4], f[9]), 0);
    assert_int_equal(cnn_cpu_stage_get_grads(s, 1, f[10], f[11]), 0);
    check_direct("FP output", name, f[8], f[3], ny);
    check_direct("EB input error", name, f[9], f[5], nx);
    check_direct("PG weight gradients", name, f[10], f[6], nw);
    check_direct("PG bias gradients", name, f[11], f[7], nb);
    cnn_cpu_stage_destroy(s);
    for (int i = 0; i < 12; i++) free(f[i]);
    cnn_net_destroy(net);
  }
}

/* Each of the stage's own allocations failing in turn (oneDNN allocates
 * through its own allocator, out of --wrap's reach; ASan builds check its
 * objects are freed): EMBER_ENOMEM, nothing leaked, then success. */
static void test_alloc_failures(void **state) {
  (void)state;
  char err[256];
  cnn_net *net = NULL;
  assert_int_equal(cnn_cfg_read(LENET, &net, err, sizeof err), 0);
  bool done = false;
  for (int k = 1; !done && k < 1000; k++) {
    long live = alloc_live;
    alloc_count = 0;
    alloc_fail_at = k;
    cnn_cpu_stage *s = NULL;
    int rc = cnn_cpu_stage_create(net, 2, 7, 2, &s, err, sizeof err);
    int calls = alloc_count;
    alloc_fail_at = 0;
    if (rc == 0) {
      assert_non_null(s);
      cnn_cpu_stage_destroy(s);
      done = calls < k;
    } else {
      if (rc != EMBER_ENOMEM)
        fail_msg("allocation %d failed: rc %d (%s)", k, rc, err);
      assert_null(s);
    }
    if (alloc_live != live)
      fail_msg("allocation %d failed: %ld blocks leaked", k, alloc_live - live);
  }
  assert_true(done);
  cnn_net_destroy(net);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_single_layers),
      cmocka_unit_test(test_small_net),
      cmocka_unit_test(test_lenet),
      cmocka_unit_test(test_lenet_split),
      cmocka_unit_test(test_lenet_trains),
      cmocka_unit_test(test_bad_arguments),
      cmocka_unit_test(test_against_direct_onednn),
      cmocka_unit_test(test_alloc_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
