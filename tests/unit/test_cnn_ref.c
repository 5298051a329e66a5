/* test_cnn_ref.c - the double-precision reference of the cnn layers
 * (accelerators/cnn/cnn_ref.c) against central finite differences: every
 * layer kind's EB and PG, the softmax with its cross-entropy, and SGD.
 *
 * The objective of a layer is f = sum(r * y) for a fixed random r, so its
 * error at the output is r. Central differences with step H = 1e-6 on
 * values in [-1, 1) carry an error of about H^2 |f'''| + 1e-16 |f| / H,
 * far below the tolerance: |numeric - analytic| <= TOL * max(1, |analytic|)
 * with TOL = 1e-6. Random inputs (a fixed seed) keep away from ReLU's kink
 * and from ties in a max-pool window, where f is not differentiable. */
#include <setjmp.h>
#include <stdarg.h>
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

typedef struct layer_case {
  uint32_t h, w, c;
  const char *cfg;  /* the layer under test, then what makes a network */
} layer_case;

static const layer_case cases[] = {
    {7, 5, 3, "[convolutional]\nfilters=4\nsize=3\nstride=1\npad=1\n"
              "activation=relu\n[softmax]\n"},
    {9, 6, 2, "[convolutional]\nfilters=3\nsize=5\nstride=2\npadding=2\n"
              "activation=linear\n[softmax]\n"},
    {4, 3, 5, "[convolutional]\nfilters=2\nsize=1\nstride=1\n"
              "activation=relu\n[softmax]\n"},
    {8, 7, 2, "[convolutional]\nfilters=3\nsize=3\nstride=3\n"
              "activation=linear\n[softmax]\n"},
    {6, 9, 2, "[convolutional]\nfilters=2\nsize=4\nstride=2\npadding=1\n"
              "activation=relu\n[softmax]\n"},
    {6, 5, 2, "[maxpool]\nsize=2\nstride=2\npadding=0\n[softmax]\n"},
    {7, 7, 2, "[maxpool]\nsize=3\nstride=2\n[softmax]\n"},
    {5, 4, 3, "[maxpool]\nsize=2\nstride=1\n[softmax]\n"},
    {5, 6, 2, "[maxpool]\nsize=3\nstride=3\npadding=1\n[softmax]\n"},
    {4, 3, 2, "[connected]\noutput=5\nactivation=relu\n[softmax]\n"},
    {1, 1, 6, "[connected]\noutput=4\nactivation=linear\n[softmax]\n"},
};

#define BATCH 2

/* The objective's operands: the layer, its input and parameters (what
 * the differences change), r, and y for the output. */
typedef struct fd_args {
  const cnn_layer *l;
  const double *x, *w, *b, *r;
  double *y;
} fd_args;

static double objective(const void *arg) {
  const fd_args *a = arg;
  cnn_ref_forward(a->l, BATCH, a->x, a->w, a->b, a->y);
  double f = 0;
  for (size_t i = 0; i < BATCH * cnn_ref_elems(a->l->out); i++)
    f += a->r[i] * a->y[i];
  return f;
}

static void test_layers(void **state) {
  (void)state;
  for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
    const layer_case *c = &cases[ci];
    cnn_net *net = cnn_test_net(c->h, c->w, c->c, c->cfg);
    size_t nl;
    const cnn_layer *l = &cnn_net_layers(net, &nl)[0];
    uint64_t rng = 1234 + ci;
    size_t nx = BATCH * cnn_ref_elems(l->in), ny = BATCH * cnn_ref_elems(l->out);
    double *x = cnn_test_fill(nx, &rng, 1, 0);
    double *r = cnn_test_fill(ny, &rng, 1, 0);
    double *w = cnn_test_fill(l->weights, &rng, 1, 0);
    double *b = cnn_test_fill(l->biases, &rng, 1, 0);
    double *y = calloc(ny, sizeof *y), *dx = calloc(nx, sizeof *dx);
    double *dw = calloc(l->weights + 1, sizeof *dw);
    double *db = calloc(l->biases + 1, sizeof *db);
    double *yt = calloc(ny, sizeof *yt);
    assert_true(y && dx && dw && db && yt);
    cnn_ref_forward(l, BATCH, x, w, b, y);
    cnn_ref_backward(l, BATCH, x, y, w, r, dx, l->weights ? dw : NULL,
                     l->biases ? db : NULL);
    fd_args a = {l, x, w, b, r, yt};
    cnn_test_check_fd("dx", ci, objective, &a, x, nx, dx, H, TOL);
    cnn_test_check_fd("dw", ci, objective, &a, w, l->weights, dw, H, TOL);
    cnn_test_check_fd("db", ci, objective, &a, b, l->biases, db, H, TOL);
    /* PG accumulates: a second backward doubles the gradients */
    if (l->weights) {
      double dw0 = dw[0], db0 = db[0];
      cnn_ref_backward(l, BATCH, x, y, w, r, NULL, dw, db);
      assert_true(fabs(dw[0] - 2 * dw0) <= 1e-12 * fmax(1, fabs(dw0)));
      assert_true(fabs(db[0] - 2 * db0) <= 1e-12 * fmax(1, fabs(db0)));
    }
    free(x), free(r), free(w), free(b), free(y), free(dx), free(dw),
        free(db), free(yt);
    cnn_net_destroy(net);
  }
}

/* darknet's max-pool shapes and windows: 6x5 by 2/2 with no padding drops
 * the last column; 7x7 by 3/2 with padding 2 starts one before. */
static void test_maxpool_windows(void **state) {
  (void)state;
  cnn_net *net = cnn_test_net(3, 4, 1, "[maxpool]\nsize=2\nstride=2\n"
                                       "[softmax]\n");
  size_t nl;
  const cnn_layer *l = &cnn_net_layers(net, &nl)[0];
  /* padding 1 (size-1): out = (3+1-2)/2+1 = 2 rows, (4+1-2)/2+1 = 2 cols;
   * windows start 0 before: rows {0,1},{2}, columns {0,1},{2,3} */
  assert_int_equal(l->out.h, 2);
  assert_int_equal(l->out.w, 2);
  double x[12], y[4];
  for (int i = 0; i < 12; i++) x[i] = i % 5;
  cnn_ref_forward(l, 1, x, NULL, NULL, y);
  /* rows: 0 1 2 3 / 4 0 1 2 / 3 4 0 1 */
  double want[4] = {4, 3, 4, 1};
  for (int i = 0; i < 4; i++) assert_true(y[i] == want[i]);
  cnn_net_destroy(net);
}

/* The softmax's probabilities sum to 1, and the cross-entropy's gradient
 * with respect to the softmax's input against finite differences. */
static void test_softmax_xent(void **state) {
  (void)state;
  cnn_net *net = cnn_test_net(1, 1, 7, "[softmax]\n");
  size_t nl;
  const cnn_layer *l = &cnn_net_layers(net, &nl)[0];
  enum { B = 3, K = 7 };
  uint64_t rng = 99;
  double x[B * K], p[B * K], dx[B * K];
  uint8_t labels[B] = {0, 6, 3};
  for (int i = 0; i < B * K; i++) x[i] = 4 * cnn_test_uniform(&rng);
  cnn_ref_forward(l, B, x, NULL, NULL, p);
  for (int n = 0; n < B; n++) {
    double sum = 0;
    for (int k = 0; k < K; k++) sum += p[n * K + k];
    assert_true(fabs(sum - 1) < 1e-14);
  }
  cnn_ref_xent_grad(B, K, p, labels, dx);
  for (int i = 0; i < B * K; i++) {
    double keep = x[i];
    x[i] = keep + H;
    cnn_ref_forward(l, B, x, NULL, NULL, p);
    double fp = cnn_ref_xent_loss(B, K, p, labels);
    x[i] = keep - H;
    cnn_ref_forward(l, B, x, NULL, NULL, p);
    double fm = cnn_ref_xent_loss(B, K, p, labels);
    x[i] = keep;
    double num = (fp - fm) / (2 * H);
    if (fabs(num - dx[i]) > TOL * fmax(1, fabs(dx[i])))
      fail_msg("dx[%d]: finite difference %.12g, analytic %.12g", i, num,
               dx[i]);
  }
  /* uniform probabilities: the loss is log K */
  double z[B * K] = {0};
  cnn_ref_forward(l, B, z, NULL, NULL, p);
  assert_true(fabs(cnn_ref_xent_loss(B, K, p, labels) - log(K)) < 1e-14);
  cnn_net_destroy(net);
}

/* SGD with momentum and decay, two steps by hand. */
static void test_sgd(void **state) {
  (void)state;
  double w[1] = {2}, v[1] = {0}, g[1] = {0.5};
  cnn_ref_sgd(1, w, v, g, 0.1, 0.9, 0.01);
  /* v = 0.5 + 0.02 = 0.52; w = 2 - 0.052 */
  assert_true(fabs(v[0] - 0.52) < 1e-15 && fabs(w[0] - 1.948) < 1e-15);
  assert_true(g[0] == 0);
  g[0] = 0.5;
  cnn_ref_sgd(1, w, v, g, 0.1, 0.9, 0.01);
  /* v = 0.468 + 0.5 + 0.01948 = 0.98748; w = 1.948 - 0.098748 */
  assert_true(fabs(v[0] - 0.98748) < 1e-14);
  assert_true(fabs(w[0] - 1.849252) < 1e-14);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layers),
      cmocka_unit_test(test_maxpool_windows),
      cmocka_unit_test(test_softmax_xent),
      cmocka_unit_test(test_sgd),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
