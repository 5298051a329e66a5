/* test_cnn_ref_layers.c - the double-precision reference
 * (accelerators/cnn/cnn_ref.c) of what darknet's small classifiers add to
 * LeNet's layers, against central finite differences: the leaky and
 * logistic activations on convolutional and connected layers, batch
 * normalisation of a convolution (the input error and the gradients of
 * the weights, shifts and scales, through the batch's statistics),
 * darknet's global average pool and dropout; and what the passes mean
 * (cnn_pass.h): the rolling statistics a training forward moves and an
 * evaluation uses, dropout's mask (its rate, its scale, the same for a
 * sample however the mini-batch is cut, none in evaluation).
 *
 * As test_cnn_ref.c: the objective of a layer is f = sum(r * y) for a
 * fixed random r, central differences with step H = 1e-6, |numeric -
 * analytic| <= TOL * max(1, |analytic|), TOL = 1e-6; inputs in [-1, 1)
 * from a fixed seed keep away from leaky's kink. Finite differences run
 * in CNN_MODE_RECOMPUTE (the training maths, the rolling statistics left
 * alone). */
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

#include "cnn_ref.h"
#include "cnn_test_util.h"

#define H 1e-6
#define TOL 1e-6
#define BATCH 3

typedef struct layer_case {
  uint32_t h, w, c;
  const char *cfg;  /* the layer under test, then what makes a network */
} layer_case;

static const layer_case cases[] = {
    {6, 5, 2, "[convolutional]\nfilters=3\nsize=3\npad=1\n"
              "activation=leaky\n[softmax]\n"},
    {5, 4, 3, "[convolutional]\nfilters=2\nsize=3\nstride=2\npad=1\n"
              "activation=logistic\n[softmax]\n"},
    {4, 3, 2, "[connected]\noutput=5\nactivation=leaky\n[softmax]\n"},
    {1, 1, 6, "[connected]\noutput=4\n[softmax]\n"}, /* logistic */
    {6, 5, 2, "[convolutional]\nfilters=3\nsize=3\npad=1\n"
              "batch_normalize=1\nactivation=leaky\n[softmax]\n"},
    {5, 6, 3, "[convolutional]\nfilters=4\nsize=1\nbatch_normalize=1\n"
              "activation=linear\n[softmax]\n"},
    {4, 4, 2, "[convolutional]\nfilters=2\nsize=3\nstride=2\n"
              "batch_normalize=1\nactivation=logistic\n[softmax]\n"},
    {5, 3, 4, "[convolutional]\nfilters=3\nsize=3\npad=1\n"
              "batch_normalize=1\nactivation=relu\n[softmax]\n"},
    {5, 4, 3, "[avgpool]\n[softmax]\n"},
    {4, 3, 2, "[dropout]\nprobability=0.3\n[softmax]\n"},
    {1, 1, 7, "[dropout]\n[softmax]\n"},
};

/* The layer's parameters as arrays the differences may change. */
typedef struct params {
  double *w, *b, *s, *roll;
  cnn_ref_params p;
} params;

static void params_make(params *q, const cnn_layer *l, uint64_t *rng) {
  q->w = cnn_test_fill(l->weights, rng, 1, 0);
  q->b = cnn_test_fill(l->biases, rng, 1, 0);
  q->s = cnn_test_fill(l->scales, rng, 0.5, 1);     /* scales near 1 */
  q->roll = cnn_test_fill(l->rolling, rng, 0, 0);
  for (uint64_t c = 0; c < l->scales; c++) q->roll[l->scales + c] = 1;
  q->p = (cnn_ref_params){q->w, q->b, q->s, q->roll};
}

static void params_free(params *q) {
  free(q->w), free(q->b), free(q->s), free(q->roll);
}

static const cnn_pass recompute = {CNN_MODE_RECOMPUTE, 7, 11, 2};

/* The objective's operands: the layer, its input and parameters (what
 * the differences change), r, and y for the output. */
typedef struct fd_args {
  const cnn_layer *l;
  const double *x;
  const params *q;
  const double *r;
  double *y;
} fd_args;

static double objective(const void *arg) {
  const fd_args *a = arg;
  cnn_ref_forward_pass(a->l, 4, BATCH, &recompute, a->x, &a->q->p, a->y);
  double f = 0;
  for (size_t i = 0; i < BATCH * cnn_ref_elems(a->l->out); i++)
    f += a->r[i] * a->y[i];
  return f;
}

static void test_layers_fd(void **state) {
  (void)state;
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const layer_case *c = &cases[ci];
    cnn_net *net = cnn_test_net(c->h, c->w, c->c, c->cfg);
    size_t nl;
    const cnn_layer *l = &cnn_net_layers(net, &nl)[0];
    uint64_t rng = 4321 + ci;
    size_t nx = BATCH * cnn_ref_elems(l->in);
    size_t ny = BATCH * cnn_ref_elems(l->out);
    double *x = cnn_test_fill(nx, &rng, 1, 0);
    double *r = cnn_test_fill(ny, &rng, 1, 0);
    params q;
    params_make(&q, l, &rng);
    double *y = calloc(ny, sizeof *y), *yt = calloc(ny, sizeof *yt);
    double *dx = calloc(nx, sizeof *dx);
    double *dw = calloc(l->weights + 1, sizeof *dw);
    double *db = calloc(l->biases + 1, sizeof *db);
    double *ds = calloc(l->scales + 1, sizeof *ds);
    assert_true(y && yt && dx && dw && db && ds);
    cnn_ref_forward_pass(l, 4, BATCH, &recompute, x, &q.p, y);
    cnn_ref_backward_pass(l, 4, BATCH, &recompute, x, y, &q.p, r, dx,
                          l->weights ? dw : NULL, l->biases ? db : NULL,
                          l->scales ? ds : NULL);
    fd_args a = {l, x, &q, r, yt};
    cnn_test_check_fd("dx", ci, objective, &a, x, nx, dx, H, TOL);
    cnn_test_check_fd("dw", ci, objective, &a, q.w, l->weights, dw, H, TOL);
    cnn_test_check_fd("db", ci, objective, &a, q.b, l->biases, db, H, TOL);
    cnn_test_check_fd("dscales", ci, objective, &a, q.s, l->scales, ds, H,
                      TOL);
    /* PG accumulates: a second backward doubles the gradients */
    if (l->scales) {
      double ds0 = ds[0], db0 = db[0];
      cnn_ref_backward_pass(l, 4, BATCH, &recompute, x, y, &q.p, r, NULL,
                            NULL, db, ds);
      assert_true(fabs(ds[0] - 2 * ds0) <= 1e-12 * fmax(1, fabs(ds0)));
      assert_true(fabs(db[0] - 2 * db0) <= 1e-12 * fmax(1, fabs(db0)));
    }
    free(x), free(r), free(y), free(yt), free(dx), free(dw), free(db),
        free(ds);
    params_free(&q);
    cnn_net_destroy(net);
  }
}

/* The activations' values: leaky's slope below 0, logistic's curve. */
static void test_activation_values(void **state) {
  (void)state;
  cnn_net *net = cnn_test_net(1, 1, 2, "[connected]\noutput=2\n"
                                       "activation=leaky\n[softmax]\n");
  size_t nl;
  const cnn_layer *l = &cnn_net_layers(net, &nl)[0];
  double x[2] = {1, 0}, w[4] = {-2, 0, 3, 0}, b[2] = {0, 0}, y[2];
  cnn_ref_forward(l, 1, x, w, b, y);
  assert_true(fabs(y[0] + 0.2) < 1e-15 && y[1] == 3);
  cnn_net_destroy(net);
  net = cnn_test_net(1, 1, 2, "[connected]\noutput=2\n[softmax]\n");
  l = &cnn_net_layers(net, &nl)[0];
  cnn_ref_forward(l, 1, x, w, b, y);
  assert_true(fabs(y[0] - 1 / (1 + exp(2))) < 1e-15);
  assert_true(fabs(y[1] - 1 / (1 + exp(-3))) < 1e-15);
  cnn_net_destroy(net);
}

/* Batch normalisation: training normalises with the batch's (biased)
 * statistics and moves the rolling ones by 0.01; recomputing leaves them;
 * evaluation uses them. */
static void test_batch_norm_passes(void **state) {
  (void)state;
  cnn_net *net = cnn_test_net(1, 2, 1, "[convolutional]\nfilters=1\n"
                                       "batch_normalize=1\n"
                                       "activation=linear\n[softmax]\n");
  size_t nl;
  const cnn_layer *l = &cnn_net_layers(net, &nl)[0];
  /* one channel: z = x (weight 1), values 1, 3, 5, 7: mean 4, variance
   * (9 + 1 + 1 + 9) / 4 = 5 (biased) */
  double x[4] = {1, 3, 5, 7}, w[1] = {1}, b[1] = {0.5}, s[1] = {2};
  double roll[2] = {0, 1}, y[4];
  cnn_ref_params p = {w, b, s, roll};
  cnn_pass pass = {CNN_MODE_TRAIN, 0, 0, 0};
  cnn_ref_forward_pass(l, 0, 2, &pass, x, &p, y);
  double inv = 1 / sqrt(5 + CNN_BN_EPS);
  for (int i = 0; i < 4; i++)
    assert_true(fabs(y[i] - (2 * (x[i] - 4) * inv + 0.5)) < 1e-14);
  assert_true(fabs(roll[0] - 0.04) < 1e-15);             /* 0.99 0 + 0.01 4 */
  assert_true(fabs(roll[1] - (0.99 + 0.05)) < 1e-15);    /* 0.99 1 + 0.01 5 */
  pass.mode = CNN_MODE_RECOMPUTE;
  cnn_ref_forward_pass(l, 0, 2, &pass, x, &p, y);
  assert_true(fabs(roll[0] - 0.04) < 1e-15);
  pass.mode = CNN_MODE_INFER;
  cnn_ref_forward_pass(l, 0, 2, &pass, x, &p, y);
  for (int i = 0; i < 4; i++)
    assert_true(fabs(y[i] - (2 * (x[i] - roll[0]) /
                                 sqrt(roll[1] + CNN_BN_EPS) + 0.5)) < 1e-14);
  cnn_net_destroy(net);
}

/* Dropout: about p of the values dropped, the rest scaled by 1/(1-p); the
 * same mask for a sample whatever micro-batch it is in, another for
 * another step, seed, layer or sample; none in evaluation. */
static void test_dropout_mask(void **state) {
  (void)state;
  cnn_net *net = cnn_test_net(10, 10, 10, "[dropout]\nprobability=0.3\n"
                                          "[softmax]\n");
  size_t nl;
  const cnn_layer *l = &cnn_net_layers(net, &nl)[0];
  enum { K = 1000, N = 4 };
  double *x = calloc(N * K, sizeof *x), *y = calloc(N * K, sizeof *y);
  double *y2 = calloc(N * K, sizeof *y2);
  assert_true(x && y && y2);
  for (size_t i = 0; i < N * K; i++) x[i] = 1;
  cnn_pass pass = {CNN_MODE_TRAIN, 5, 9, 0};
  cnn_ref_forward_pass(l, 2, N, &pass, x, NULL, y);
  size_t dropped = 0;
  for (size_t i = 0; i < N * K; i++) {
    if (y[i] == 0) dropped++;
    else assert_true(fabs(y[i] - 1 / 0.7) < 1e-14);
  }
  /* 4000 draws at p = 0.3: 1200 +- 29 (1 sd); 6 sd either way */
  if (dropped < 1026 || dropped > 1374)
    fail_msg("%zu of 4000 dropped at p = 0.3", dropped);
  /* samples 2 and 3 as a micro-batch of their own (sample0 2) */
  pass.sample0 = 2;
  cnn_ref_forward_pass(l, 2, 2, &pass, x, NULL, y2);
  assert_memory_equal(y2, y + 2 * K, 2 * K * sizeof *y);
  /* another step, seed or layer: another mask */
  static const cnn_pass others[] = {{CNN_MODE_TRAIN, 5, 10, 0},
                                    {CNN_MODE_TRAIN, 6, 9, 0}};
  for (size_t k = 0; k < 3; k++) {
    size_t same = 0;
    cnn_ref_forward_pass(l, k == 2 ? 3 : 2, 1, k < 2 ? &others[k] : &pass,
                         x, NULL, y2);
    const double *ref = k == 2 ? y + 2 * K : y;
    for (size_t i = 0; i < K; i++) same += (y2[i] == 0) == (ref[i] == 0);
    if (same > 700) fail_msg("case %zu: %zu of 1000 alike", k, same);
  }
  /* sample 1 differs from sample 0 */
  size_t same = 0;
  for (size_t i = 0; i < K; i++) same += (y[i] == 0) == (y[K + i] == 0);
  assert_true(same < 700);
  /* the recomputed pass draws the same; evaluation is the identity */
  pass = (cnn_pass){CNN_MODE_RECOMPUTE, 5, 9, 0};
  cnn_ref_forward_pass(l, 2, N, &pass, x, NULL, y2);
  assert_memory_equal(y2, y, N * K * sizeof *y);
  pass.mode = CNN_MODE_INFER;
  cnn_ref_forward_pass(l, 2, N, &pass, x, NULL, y2);
  for (size_t i = 0; i < N * K; i++) assert_true(y2[i] == 1);
  free(x), free(y), free(y2);
  cnn_net_destroy(net);
}

/* darknet's average pool: a channel's mean, its error spread evenly. */
static void test_avgpool_values(void **state) {
  (void)state;
  cnn_net *net = cnn_test_net(2, 2, 2, "[avgpool]\n[softmax]\n");
  size_t nl;
  const cnn_layer *l = &cnn_net_layers(net, &nl)[0];
  double x[8] = {1, 2, 3, 4, 10, 20, 30, 40}, y[2], dy[2] = {4, 8}, dx[8];
  cnn_ref_forward(l, 1, x, NULL, NULL, y);
  assert_true(y[0] == 2.5 && y[1] == 25);
  cnn_ref_backward(l, 1, x, y, NULL, dy, dx, NULL, NULL);
  for (int i = 0; i < 8; i++) assert_true(dx[i] == (i < 4 ? 1 : 2));
  cnn_net_destroy(net);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layers_fd),
      cmocka_unit_test(test_activation_values),
      cmocka_unit_test(test_batch_norm_passes),
      cmocka_unit_test(test_dropout_mask),
      cmocka_unit_test(test_avgpool_values),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
