/* test_cnn_cpu_threads.c - a oneDNN stage (accelerators/cnn/cnn_cpu.c)
 * built on one thread and run on others, as ember-nam's workers run the
 * stages the pool (cnn_stage_pool.c) hands out (issue 25).
 *
 * A convolution whose padding is at least its kernel's size (size=1 with
 * padding=1 or 2, size=3 with padding=3) is one oneDNN's jit kernels do
 * not take: it runs as a gemm convolution, which needs a scratchpad.
 * oneDNN's default scratchpad is the creating thread's (thread-local), so
 * such a stage run on another thread wrote through a null or too small
 * pointer: ember-nam died in a memset on the second FORWARD. Each case
 * here is built on the main thread and checked against the
 * double-precision reference (cnn_stage_check.c: outputs, loss, input
 * errors, gradients, two SGD updates) on a second thread, then reused as
 * the pool's next users do (parameters loaded, FORWARD, BACKWARD) on a
 * third and a fourth, which must agree bit for bit. Tolerances as
 * test_cnn_cpu_layers.c's.
 * Also: a stage's bytes (cnn_cpu_stage_bytes) count at least its boundary
 * tensors and their errors. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cnn_cpu_check.h"
#include "cnn_test_util.h"

#define TOL_FP 1e-5
#define TOL_GRAD 1e-4

typedef struct job {
  const char *name;
  const cnn_net *net;
  size_t first, end;
  uint32_t batch;
  uint64_t seed;
  cnn_cpu_stage *stage;
  int failures;
  /* replay: what one FORWARD and BACKWARD gave */
  float *out, *din, *grads;
  double loss;
  int rc;
} job;

static void *check_on_thread(void *arg) {
  job *j = arg;
  cnn_check_backend be = cnn_cpu_check_backend(j->stage);
  j->failures = cnn_check_stage(j->name, j->net, j->first, j->end, j->batch,
                                j->seed, &be, TOL_FP, TOL_GRAD);
  return NULL;
}

static uint64_t elems(cnn_shape s) { return (uint64_t)s.h * s.w * s.c; }

/* What the pool's next user does with a stage: load parameters, a
 * training FORWARD, a BACKWARD from fresh gradients; the output, the
 * input error (a stage after layer 0) and the gradients kept in j. */
static void *replay_on_thread(void *arg) {
  job *j = arg;
  size_t n;
  const cnn_layer *l = cnn_net_layers(j->net, &n);
  uint64_t in_n = elems(l[j->first].in) * j->batch;
  uint64_t out_n = elems(l[j->end - 1].out) * j->batch;
  uint64_t params = 0;
  for (size_t i = j->first; i < j->end; i++) params += cnn_layer_params(&l[i]);
  uint64_t rng = j->seed;
  float *in = malloc(in_n * sizeof *in), *p = malloc((params + 1) * 4);
  float *dout = malloc(out_n * sizeof *dout);
  uint8_t *labels = malloc(j->batch);
  j->out = calloc(out_n, sizeof *j->out);
  j->din = calloc(in_n, sizeof *j->din);
  j->grads = calloc(params + 1, sizeof *j->grads);
  assert_true(in && p && dout && labels && j->out && j->din && j->grads);
  for (uint64_t i = 0; i < in_n; i++) in[i] = (float)cnn_test_uniform(&rng);
  for (uint64_t i = 0; i < out_n; i++)
    dout[i] = (float)cnn_test_uniform(&rng);
  for (uint32_t i = 0; i < j->batch; i++)
    labels[i] = (uint8_t)(i % cnn_net_classes(j->net));
  uint64_t at = 0;
  int rc = 0;
  for (size_t i = j->first; !rc && i < j->end; i++) {
    uint64_t k = cnn_layer_params(&l[i]);
    if (!l[i].weights) continue;
    for (uint64_t e = 0; e < k; e++)
      p[at + e] = (float)(0.3 * cnn_test_uniform(&rng));
    /* variances must stay positive */
    for (uint64_t e = k - l[i].rolling / 2; e < k && l[i].rolling; e++)
      p[at + e] = 1.0f + p[at + e] * p[at + e];
    rc = cnn_cpu_stage_set_layer(j->stage, i, p + at);
    at += k;
  }
  bool last = l[j->end - 1].kind == CNN_LAYER_SOFTMAX;
  cnn_cpu_stage_zero_grads(j->stage);
  if (!rc)
    rc = cnn_cpu_stage_forward(j->stage, in, j->out, last ? labels : NULL,
                               last ? &j->loss : NULL);
  if (!rc)
    rc = cnn_cpu_stage_backward(j->stage, last ? NULL : dout,
                                j->first ? j->din : NULL);
  at = 0;
  for (size_t i = j->first; !rc && i < j->end; i++) {
    if (!l[i].weights) continue;
    rc = cnn_cpu_stage_get_layer_grads(j->stage, i, j->grads + at);
    at += cnn_layer_params(&l[i]);
  }
  j->rc = rc;
  free(in);
  free(p);
  free(dout);
  free(labels);
  return NULL;
}

static void run_on_thread(void *(*fn)(void *), job *j) {
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, fn, j), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
}

static void free_replay(job *j) {
  free(j->out);
  free(j->din);
  free(j->grads);
}

/* Build [first, end) here; check it against the reference on a new
 * thread; then reuse it on two more threads, which must agree bit for
 * bit (one OpenMP thread: the same sums in the same order). */
static void check_elsewhere(const char *name, const cnn_net *net,
                            size_t first, size_t end, uint32_t batch,
                            uint64_t seed) {
  char err[256];
  cnn_cpu_stage *s = NULL;
  int rc = cnn_cpu_stage_create(net, first, end, batch, &s, err, sizeof err);
  if (rc) fail_msg("%s: cnn_cpu_stage_create: %d %s", name, rc, err);
  size_t n;
  const cnn_layer *l = cnn_net_layers(net, &n);
  cnn_shape in = l[first].in, out = l[end - 1].out;
  uint64_t boundary = 2ull * 4 * batch * (elems(in) + elems(out));
  if (cnn_cpu_stage_bytes(s) < boundary)
    fail_msg("%s: %zu bytes counted, its boundary tensors alone take %llu",
             name, cnn_cpu_stage_bytes(s), (unsigned long long)boundary);
  job j = {name, net, first, end, batch, seed, s, 0, NULL, NULL, NULL, 0, 0};
  run_on_thread(check_on_thread, &j);
  if (j.failures)
    fail_msg("%s: on another thread: %d failures", name, j.failures);
  job a = j, b = j;
  run_on_thread(replay_on_thread, &a);
  run_on_thread(replay_on_thread, &b);
  if (a.rc || b.rc)
    fail_msg("%s: reused on other threads: %d, %d", name, a.rc, b.rc);
  uint64_t params = 0;
  for (size_t i = first; i < end; i++) params += cnn_layer_params(&l[i]);
  uint64_t out_n = elems(out) * batch, in_n = elems(in) * batch;
  if (memcmp(a.out, b.out, out_n * 4) || memcmp(a.din, b.din, in_n * 4) ||
      memcmp(a.grads, b.grads, params * 4) || a.loss != b.loss)
    fail_msg("%s: the reused stage gave other answers on another thread",
             name);
  free_replay(&a);
  free_replay(&b);
  cnn_cpu_stage_destroy(s);
}

/* Convolutions whose padding is at least their kernel's size, alone
 * (behind an identity max-pool, so that the input error is computed). */
static const struct {
  uint32_t h, w, c;
  const char *cfg;
} cases[] = {
    {6, 5, 3, "[convolutional]\nfilters=4\nsize=1\npadding=1\n"
              "activation=relu\n"},
    {5, 5, 2, "[convolutional]\nfilters=3\nsize=1\npadding=2\n"
              "activation=leaky\n"},
    {7, 6, 3, "[convolutional]\nfilters=5\nsize=3\npadding=3\n"
              "activation=logistic\n"},
    {8, 7, 16, "[convolutional]\nfilters=32\nsize=3\npadding=3\nstride=2\n"
               "activation=relu\n"},
    {6, 6, 4, "[convolutional]\nfilters=6\nsize=3\npadding=3\n"
              "batch_normalize=1\nactivation=leaky\n"},
    {4, 5, 2, "[convolutional]\nfilters=3\nsize=2\npadding=5\nstride=3\n"
              "activation=linear\n"},
};

static void test_padding_at_least_kernel(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char name[32];
    snprintf(name, sizeof name, "case %zu", i);
    cnn_net *net = cnn_test_layer_net(cases[i].h, cases[i].w, cases[i].c,
                                      cases[i].cfg);
    check_elsewhere(name, net, 1, 2, 3, 31 + i);
    cnn_net_destroy(net);
  }
}

/* The network: a 1x1 convolution padded by 1 first (its stage
 * keeps its input for PG), then a max-pool, a connected layer and the
 * softmax; as one stage and as its head. */
static void test_whole_stage(void **state) {
  (void)state;
  cnn_net *net = cnn_test_net(12, 12, 1,
                              "[convolutional]\nfilters=8\nsize=1\n"
                              "padding=1\nactivation=relu\n"
                              "[maxpool]\nsize=2\nstride=2\n"
                              "[connected]\noutput=10\nactivation=linear\n"
                              "[softmax]\n");
  check_elsewhere("padded 1x1 net [0, 4)", net, 0, 4, 4, 41);
  check_elsewhere("padded 1x1 net [0, 2)", net, 0, 2, 4, 42);
  cnn_net_destroy(net);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_padding_at_least_kernel),
      cmocka_unit_test(test_whole_stage),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
