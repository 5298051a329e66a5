/* test_cnn_cpu_layers.c - the oneDNN stage (accelerators/cnn/cnn_cpu.c)
 * against the double-precision reference (cnn_ref.c) on the layers
 * darknet's small classifiers add: leaky and logistic activations on
 * convolutional and connected layers, batch-normalized convolutions
 * (oneDNN's batch_normalization forward_training, forward_inference with
 * the rolling statistics, backward with scale and shift), the global
 * avg-pool (pooling_avg) and dropout (oneDNN's binary multiplication by
 * cnn_pass.h's mask), alone and chained in a small darknet-style net,
 * through training, recomputed and evaluation passes (cnn_stage_check.c:
 * outputs, loss, rolling statistics, input errors, gradients of weights,
 * biases and scales, two SGD updates).
 *
 * Tolerances (single precision against double), norm-relative over a
 * tensor as test_cnn_cpu.c's: outputs, parameters and the loss 1e-5;
 * errors and gradients 1e-4. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "cnn_cpu_check.h"
#include "cnn_test_util.h"

#define TOL_FP 1e-5
#define TOL_GRAD 1e-4

static void check_range(const char *name, const cnn_net *net, size_t first,
                        size_t end, uint32_t batch, uint64_t seed) {
  char err[256];
  cnn_cpu_stage *s = NULL;
  int rc = cnn_cpu_stage_create(net, first, end, batch, &s, err, sizeof err);
  if (rc) fail_msg("%s: cnn_cpu_stage_create: %d %s", name, rc, err);
  cnn_check_backend be = cnn_cpu_check_backend(s);
  int failures = cnn_check_stage(name, net, first, end, batch, seed, &be,
                                 TOL_FP, TOL_GRAD);
  cnn_cpu_stage_destroy(s);
  if (failures) fail_msg("%s: %d failures", name, failures);
}

/* Single layers behind an identity max-pool (so that the stage [1, 2)
 * computes its input error); 16 channels and more make oneDNN pick
 * blocked layouts around them. */
static const struct {
  uint32_t h, w, c;
  const char *cfg;
} cases[] = {
    {9, 7, 16, "[convolutional]\nfilters=32\nsize=3\npad=1\n"
               "activation=leaky\n"},
    {7, 6, 3, "[convolutional]\nfilters=5\nsize=3\nstride=2\n"
              "activation=logistic\n"},
    {9, 7, 16, "[convolutional]\nfilters=32\nsize=3\npad=1\n"
               "batch_normalize=1\nactivation=leaky\n"},
    {8, 8, 3, "[convolutional]\nfilters=6\nsize=3\nstride=2\npad=1\n"
              "batch_normalize=1\nactivation=linear\n"},
    {6, 5, 4, "[convolutional]\nfilters=16\nsize=1\nbatch_normalize=1\n"
              "activation=relu\n"},
    {5, 5, 2, "[convolutional]\nfilters=3\nsize=3\nbatch_normalize=1\n"
              "activation=logistic\n"},
    {4, 3, 2, "[connected]\noutput=5\nactivation=leaky\n"},
    {3, 3, 16, "[connected]\noutput=20\n"},  /* logistic */
    {7, 5, 16, "[avgpool]\n"},
    {5, 4, 3, "[avgpool]\n"},
    {6, 5, 16, "[dropout]\nprobability=0.4\n"},
    {3, 2, 3, "[dropout]\nprobability=0.1\n"},
};

static void test_single_layers(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[32];
    snprintf(name, sizeof name, "case %zu", i);
    cnn_net *net = cnn_test_layer_net(cases[i].h, cases[i].w, cases[i].c,
                                      cases[i].cfg);
    check_range(name, net, 1, 2, 3, 17 + i);
    cnn_net_destroy(net);
  }
  /* dropout on a connected layer's flat output */
  cnn_net *net = cnn_test_net(3, 3, 2, "[connected]\noutput=30\n"
                                       "activation=leaky\n"
                                       "[dropout]\nprobability=0.5\n"
                                       "[connected]\noutput=4\n"
                                       "activation=linear\n[softmax]\n");
  check_range("dropout after connected", net, 1, 2, 4, 99);
  check_range("connected, dropout, connected", net, 0, 4, 4, 98);
  cnn_net_destroy(net);
  /* an activation right before the softmax, whose error the forward
   * pass computes: the second backward of a round must start from it
   * again, not from what the first took through the derivative */
  net = cnn_test_net(3, 3, 2, "[maxpool]\nsize=1\nstride=1\n"
                              "[connected]\noutput=6\nactivation=leaky\n"
                              "[softmax]\n");
  check_range("leaky before the softmax", net, 1, 3, 4, 97);
  cnn_net_destroy(net);
  net = cnn_test_net(3, 3, 2, "[maxpool]\nsize=1\nstride=1\n"
                              "[convolutional]\nfilters=3\nsize=3\n"
                              "batch_normalize=1\nactivation=logistic\n"
                              "[softmax]\n");
  check_range("normalised logistic before the softmax", net, 1, 3, 4, 96);
  cnn_net_destroy(net);
}

/* darknet's small-classifier pattern as one stage and as its tail: batch-
 * normalized leaky convolutions, max-pool, dropout, a 1x1 convolution,
 * the global avg-pool and the softmax. */
static void test_small_classifier(void **state) {
  (void)state;
  cnn_net *net = cnn_test_net(
      10, 10, 1,
      "[convolutional]\nbatch_normalize=1\nfilters=16\nsize=3\npad=1\n"
      "activation=leaky\n"
      "[maxpool]\nsize=2\nstride=2\n"
      "[dropout]\nprobability=0.3\n"
      "[convolutional]\nbatch_normalize=1\nfilters=24\nsize=3\npad=1\n"
      "activation=leaky\n"
      "[convolutional]\nfilters=5\nsize=1\nactivation=leaky\n"
      "[avgpool]\n[softmax]\n");
  check_range("small classifier [0, 7)", net, 0, 7, 4, 7);
  check_range("small classifier [2, 7)", net, 2, 7, 3, 8);
  check_range("small classifier [1, 4)", net, 1, 4, 2, 9);
  cnn_net_destroy(net);
}

/* The modes' contract: an unknown mode is refused; layer 0's scales and
 * rolling statistics read back as written; not for a layer without. */
static void test_norm_api(void **state) {
  (void)state;
  cnn_net *net = cnn_test_net(4, 4, 1, "[convolutional]\nfilters=2\n"
                                       "batch_normalize=1\n"
                                       "[convolutional]\nfilters=2\n"
                                       "[softmax]\n");
  char err[256];
  cnn_cpu_stage *s = NULL;
  assert_int_equal(cnn_cpu_stage_create(net, 0, 3, 2, &s, err, sizeof err),
                   0);
  float sc[2] = {1.5f, 2.5f}, roll[4] = {0.1f, 0.2f, 3, 4}, a[2], b[4];
  assert_int_equal(cnn_cpu_stage_set_norm(s, 0, sc, roll), 0);
  assert_int_equal(cnn_cpu_stage_get_norm(s, 0, a, b), 0);
  assert_memory_equal(a, sc, sizeof sc);
  assert_memory_equal(b, roll, sizeof roll);
  assert_int_equal(cnn_cpu_stage_set_norm(s, 1, sc, roll), EMBER_EINVAL);
  assert_int_equal(cnn_cpu_stage_get_norm(s, 2, a, b), EMBER_EINVAL);
  float in[32] = {0};
  cnn_pass bad = {(cnn_mode)7, 0, 0, 0};
  assert_int_equal(cnn_cpu_stage_forward_pass(s, in, NULL, NULL, NULL, &bad),
                   EMBER_EINVAL);
  assert_int_equal(cnn_cpu_stage_forward_pass(s, in, NULL, NULL, NULL, NULL),
                   EMBER_EINVAL);
  cnn_cpu_stage_destroy(s);
  cnn_net_destroy(net);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_single_layers),
      cmocka_unit_test(test_small_classifier),
      cmocka_unit_test(test_norm_api),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
