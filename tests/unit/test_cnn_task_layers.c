/* test_cnn_task_layers - the cnn descriptor (run_cpu, so fpga-emu too) on
 * a darknet-style network with batch normalisation, leaky activations,
 * dropout and the global avg-pool, against the oneDNN stage run directly:
 *   - INIT's scales 1, rolling means 0 and variances 1 (cnn_pass.h);
 *     SET_PARAMS and GET_PARAMS carry them;
 *   - a training FORWARD moves the block's rolling statistics as the
 *     stage's do, and keeps its dropout key with its slot: two FORWARDs
 *     of different mini-batches in flight (pipelining), then their
 *     BACKWARDs, each adding the gradients the stage gives for its own
 *     mask (a BACKWARD that drew another mask would not match);
 *   - UPDATE moves weights, biases and scales, not the rolling
 *     statistics;
 *   - an inference FORWARD (cnn.proto) gives the stage's evaluation
 *     output (rolling statistics, no dropout) and keeps nothing: the
 *     rolling statistics and the slot stay as they were;
 *   - slices of a batch-normalized convolution, inference on another op,
 *     a sample offset past a mini-batch: refused at validate.
 * Within 1e-6 relative (the same primitives on the same values). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accel.h"
#include "accelerators/cnn/cnn.pb-c.h"
#include "cnn_cpu.h"
#include "cnn_layout.h"
#include "cnn_test_task.h"
#include "cnn_test_util.h"
#include "ember/ember_errors.h"

/* 10x10x1 -> conv 6 bn leaky -> 10x10x6 -> maxpool -> 5x5x6 -> dropout
 * -> conv 8 bn leaky -> conv 4 1x1 leaky -> avgpool -> 1x1x4 -> softmax */
static const char NET[] =
    "[net]\nheight=10\nwidth=10\nchannels=1\nlearning_rate=0.05\n"
    "momentum=0.9\ndecay=0.001\n"
    "[convolutional]\nbatch_normalize=1\nfilters=6\nsize=3\npad=1\n"
    "activation=leaky\n"
    "[maxpool]\nsize=2\nstride=2\n"
    "[dropout]\nprobability=0.4\n"
    "[convolutional]\nbatch_normalize=1\nfilters=8\nsize=3\npad=1\n"
    "activation=leaky\n"
    "[convolutional]\nfilters=4\nsize=1\nactivation=leaky\n"
    "[avgpool]\n[softmax]\n";
enum { LAYERS = 7, B = 3, IN = 100, CLASSES = 4, SLOTS = 2 };
#define TOL 1e-6

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  assert_non_null(p);
  return p;
}

/* A task's Params beyond the op and the range. */
typedef struct task {
  Ember__Cnn__Op op;
  uint32_t first, end, slot;
  bool inference, has_step;
  uint64_t step;
  uint32_t sample0;
  int slice;              /* 1 ICP, 2 OCP of layer first: channels [0, 2) */
} task;

static uint8_t *params_of(const task *t, size_t *len) {
  Ember__Cnn__Params p = EMBER__CNN__PARAMS__INIT;
  p.op = t->op;
  p.net.data = (uint8_t *)NET;
  p.net.len = strlen(NET);
  p.first = t->first;
  p.end = t->end;
  p.batch = B;
  p.has_seed = 1;
  p.seed = 42;
  p.has_slots = p.has_slot = 1;
  p.slots = SLOTS;
  p.slot = t->slot;
  p.has_inference = t->inference;
  p.inference = t->inference;
  p.has_step = t->has_step;
  p.step = t->step;
  p.has_sample_offset = 1;
  p.sample_offset = t->sample0;
  if (t->slice) {
    p.has_channel_begin = p.has_channel_end = 1;
    p.channel_begin = 0;
    p.channel_end = 2;
    p.has_split_outputs = p.split_outputs = t->slice == 2;
  }
  *len = ember__cnn__params__get_packed_size(&p);
  uint8_t *buf = xcalloc(*len, 1);
  ember__cnn__params__pack(&p, buf);
  return buf;
}

static cnn_layout layout_of(void) {
  cnn_net *net = cnn_test_parse(NET);
  cnn_layout L;
  assert_int_equal(cnn_layout_compute(net, 0, LAYERS, B, SLOTS, &L), 0);
  cnn_net_destroy(net);
  return L;
}

/* validate + plan + run_cpu; the Result into *res when given */
static int run(const task *t, const acc_block *in, size_t n_in,
               acc_mut_block *state, acc_mut_block *outs, size_t n_out,
               Ember__Cnn__Result *res, char *err, size_t err_len) {
  size_t len;
  uint8_t *p = params_of(t, &len);
  void *prep;
  int rc = cnn_test_prepare(p, len, in, n_in, state->size, outs, n_out,
                            &prep, err, err_len);
  free(p);
  if (rc) return rc;
  return cnn_test_run(prep, in, n_in, state, outs, n_out, res, err, err_len);
}

static void ok(const task *t, const acc_block *in, size_t n_in,
               acc_mut_block *state, acc_mut_block *outs, size_t n_out,
               Ember__Cnn__Result *res) {
  char err[256] = "";
  int rc = run(t, in, n_in, state, outs, n_out, res, err, sizeof err);
  if (rc) fail_msg("op %d: %s: %s", (int)t->op, ember_errname(rc), err);
}

static void refused(const task *t, const acc_block *in, size_t n_in,
                    acc_mut_block *state, int want, const char *why) {
  char err[256] = "";
  int rc = run(t, in, n_in, state, NULL, 0, NULL, err, sizeof err);
  if (rc != want || !strstr(err, why))
    fail_msg("%s \"%s\", expected %s \"%s\"", ember_errname(rc), err,
             ember_errname(want), why);
  print_message("  refused: %s\n", err);
}

static float *region(acc_mut_block *s, uint64_t off) {
  return (float *)(void *)(s->data + off);
}

static void close_to(const char *what, const float *a, const float *b,
                     size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    den += (double)b[i] * b[i];
  }
  if (sqrt(num) > TOL * fmax(sqrt(den), 1e-30))
    fail_msg("%s: relative difference %.3g", what,
             sqrt(num) / fmax(sqrt(den), 1e-30));
}

/* The stage run directly, holding the block's parameters. */
static cnn_cpu_stage *direct_stage(const cnn_net *net, acc_mut_block *st,
                                   const cnn_layout *L) {
  char err[256];
  cnn_cpu_stage *s = NULL;
  assert_int_equal(cnn_cpu_stage_create(net, 0, LAYERS, B, &s, err,
                                        sizeof err), 0);
  size_t n;
  const cnn_layer *layers = cnn_net_layers(net, &n);
  const float *p = region(st, L->params_off);
  for (size_t i = 0, off = 0; i < n; off += cnn_layer_params(&layers[i]), i++)
    if (cnn_layer_params(&layers[i]))
      assert_int_equal(cnn_cpu_stage_set_layer(s, i, p + off), 0);
  return s;
}

/* The direct stage's parameters (or gradients), the block's layout. */
static void stage_floats(const cnn_net *net, cnn_cpu_stage *s, float *out,
                         bool grads) {
  size_t n;
  const cnn_layer *layers = cnn_net_layers(net, &n);
  for (size_t i = 0, off = 0; i < n; off += cnn_layer_params(&layers[i]), i++)
    if (cnn_layer_params(&layers[i]))
      assert_int_equal(grads ? cnn_cpu_stage_get_layer_grads(s, i, out + off)
                             : cnn_cpu_stage_get_layer(s, i, out + off),
                       0);
}

static void test_init_and_params(void **state) {
  (void)state;
  cnn_net *net = cnn_test_parse(NET);
  cnn_layout L = layout_of();
  acc_mut_block st = {xcalloc(L.total, 1), L.total};
  task init = {EMBER__CNN__OP__INIT, 0, LAYERS, 0, 0, 0, 0, 0, 0};
  ok(&init, NULL, 0, &st, NULL, 0, NULL);
  size_t n;
  const cnn_layer *layers = cnn_net_layers(net, &n);
  const float *p = region(&st, L.params_off);
  /* layer 0: 54 weights, then 6 biases 0, scales 1, means 0, variances 1 */
  assert_int_equal(layers[0].weights, 54);
  for (int c = 0; c < 6; c++) {
    assert_true(p[54 + c] == 0 && p[60 + c] == 1);
    assert_true(p[66 + c] == 0 && p[72 + c] == 1);
  }
  assert_true(p[0] != 0);
  /* SET_PARAMS then GET_PARAMS: the same floats, scales and rolling
   * statistics included */
  float *want = xcalloc(L.params, sizeof *want);
  uint64_t rng = 3;
  for (uint64_t i = 0; i < L.params; i++)
    want[i] = (float)(1.5 + cnn_test_uniform(&rng));
  acc_block in = {(const uint8_t *)want, L.params * sizeof(float)};
  task set = {EMBER__CNN__OP__SET_PARAMS, 0, LAYERS, 0, 0, 0, 0, 0, 0};
  task get = {EMBER__CNN__OP__GET_PARAMS, 0, LAYERS, 0, 0, 0, 0, 0, 0};
  ok(&set, &in, 1, &st, NULL, 0, NULL);
  acc_mut_block out;
  ok(&get, NULL, 0, &st, &out, 1, NULL);
  assert_int_equal(out.size, L.params * sizeof(float));
  assert_memory_equal(out.data, want, out.size);
  free(out.data);
  free(want);
  free(st.data);
  cnn_net_destroy(net);
}

static void test_against_stage(void **state) {
  (void)state;
  cnn_net *net = cnn_test_parse(NET);
  cnn_layout L = layout_of();
  assert_true(L.pass_stride > 0); /* the stage has dropout */
  acc_mut_block st = {xcalloc(L.total, 1), L.total};
  task t = {EMBER__CNN__OP__INIT, 0, LAYERS, 0, 0, 0, 0, 0, 0};
  ok(&t, NULL, 0, &st, NULL, 0, NULL);
  cnn_cpu_stage *s = direct_stage(net, &st, &L);
  float *want = xcalloc(L.params, sizeof *want);
  float *grads = xcalloc(L.params, sizeof *grads);
  float x[SLOTS][B * IN];
  uint8_t labels[SLOTS][B];
  uint64_t rng = 11;
  for (int k = 0; k < SLOTS; k++) {
    for (int i = 0; i < B * IN; i++) x[k][i] = (float)cnn_test_uniform(&rng);
    for (int n = 0; n < B; n++) labels[k][n] = (uint8_t)((n + k) % CLASSES);
  }
  /* two FORWARDs in flight: mini-batches 4 and 5, the second's first
   * sample 3 into its mini-batch */
  const cnn_pass keys[SLOTS] = {{CNN_MODE_TRAIN, 42, 4, 0},
                                {CNN_MODE_TRAIN, 42, 5, 3}};
  for (uint32_t k = 0; k < SLOTS; k++) {
    acc_block in[2] = {{(const uint8_t *)x[k], sizeof x[k]},
                       {labels[k], B}};
    Ember__Cnn__Result res;
    task f = {EMBER__CNN__OP__FORWARD, 0, LAYERS, k, false, true,
              keys[k].step, keys[k].sample0, 0};
    ok(&f, in, 2, &st, NULL, 0, &res);
    double loss;
    assert_int_equal(cnn_cpu_stage_forward_pass(s, x[k], NULL, labels[k],
                                                &loss, &keys[k]), 0);
    if (fabs(res.loss - loss) > TOL * loss)
      fail_msg("FORWARD %u: loss %.9g, the stage's %.9g", k, res.loss, loss);
    /* the block's rolling statistics are the stage's */
    stage_floats(net, s, want, false);
    close_to("rolling statistics after a FORWARD",
             region(&st, L.params_off), want, L.params);
  }
  /* BACKWARD of slot 0, then slot 1: each with its own FORWARD's mask */
  for (uint32_t k = 0; k < SLOTS; k++) {
    task b = {EMBER__CNN__OP__BACKWARD, 0, LAYERS, k, 0, 0, 0, 0, 0};
    ok(&b, NULL, 0, &st, NULL, 0, NULL);
    cnn_pass again = keys[k];
    again.mode = CNN_MODE_RECOMPUTE;
    assert_int_equal(cnn_cpu_stage_forward_pass(s, x[k], NULL, labels[k],
                                                NULL, &again), 0);
    assert_int_equal(cnn_cpu_stage_backward(s, NULL, NULL), 0);
  }
  stage_floats(net, s, grads, true);
  close_to("accumulated gradients", region(&st, L.grads_off), grads,
           L.params);
  /* a BACKWARD with the wrong mask would not match: the same stage's
   * gradients from mini-batch 6's mask differ */
  {
    cnn_cpu_stage *other = direct_stage(net, &st, &L);
    cnn_pass wrong = {CNN_MODE_RECOMPUTE, 42, 6, 0};
    assert_int_equal(cnn_cpu_stage_forward_pass(other, x[0], NULL,
                                                labels[0], NULL, &wrong), 0);
    assert_int_equal(cnn_cpu_stage_backward(other, NULL, NULL), 0);
    float *g2 = xcalloc(L.params, sizeof *g2);
    stage_floats(net, other, g2, true);
    double diff = 0;
    for (uint64_t i = 0; i < L.params; i++) diff += fabs(g2[i] - grads[i]);
    assert_true(diff > 1e-3);
    free(g2);
    cnn_cpu_stage_destroy(other);
  }
  /* UPDATE: weights, biases and scales move, the rolling statistics not */
  float *before = xcalloc(L.params, sizeof *before);
  memcpy(before, region(&st, L.params_off), L.params * sizeof(float));
  task u = {EMBER__CNN__OP__UPDATE, 0, LAYERS, 0, 0, 0, 0, 0, 0};
  ok(&u, NULL, 0, &st, NULL, 0, NULL);
  const float *after = region(&st, L.params_off);
  assert_true(after[0] != before[0]);       /* a weight */
  assert_true(after[54] != before[54]);     /* a shift */
  assert_true(after[60] != before[60]);     /* a scale */
  assert_true(after[66] == before[66]);     /* a rolling mean */
  assert_true(after[72] == before[72]);     /* a rolling variance */
  /* an inference FORWARD: the stage's evaluation output, nothing kept */
  cnn_cpu_stage_destroy(s);
  s = direct_stage(net, &st, &L);
  memcpy(before, region(&st, L.params_off), L.params * sizeof(float));
  uint32_t flags = ((cnn_state_header *)(void *)st.data)->flags;
  acc_block in[2] = {{(const uint8_t *)x[1], sizeof x[1]}, {labels[1], B}};
  acc_mut_block probs;
  task inf = {EMBER__CNN__OP__FORWARD, 0, LAYERS, 0, true, 0, 0, 0, 0};
  Ember__Cnn__Result res;
  ok(&inf, in, 2, &st, &probs, 1, &res);
  float p[B * CLASSES];
  double loss;
  const cnn_pass eval = {CNN_MODE_INFER, 0, 0, 0};
  assert_int_equal(cnn_cpu_stage_forward_pass(s, x[1], p, labels[1], &loss,
                                              &eval), 0);
  close_to("evaluation probabilities", (const float *)(void *)probs.data, p,
           B * CLASSES);
  assert_true(fabs(res.loss - loss) <= TOL * loss);
  assert_memory_equal(region(&st, L.params_off), before,
                      L.params * sizeof(float));
  assert_int_equal(((cnn_state_header *)(void *)st.data)->flags, flags);
  task b = {EMBER__CNN__OP__BACKWARD, 0, LAYERS, 0, 0, 0, 0, 0, 0};
  refused(&b, NULL, 0, &st, EMBER_ESTATE, "without a FORWARD");
  free(probs.data);
  free(before);
  free(want);
  free(grads);
  cnn_cpu_stage_destroy(s);
  free(st.data);
  cnn_net_destroy(net);
}

static void test_refusals(void **state) {
  (void)state;
  cnn_layout L = layout_of();
  acc_mut_block st = {xcalloc(L.total, 1), L.total};
  task t = {EMBER__CNN__OP__INIT, 0, 1, 0, 0, 0, 0, 0, 1};
  refused(&t, NULL, 0, &st, EMBER_EPARAM,
          "an ICP slice of layer 0: a batch-normalized convolution is not "
          "split");
  t.slice = 2;
  refused(&t, NULL, 0, &st, EMBER_EPARAM,
          "an OCP slice of layer 0: a batch-normalized convolution");
  task u = {EMBER__CNN__OP__UPDATE, 0, LAYERS, 0, true, 0, 0, 0, 0};
  refused(&u, NULL, 0, &st, EMBER_EPARAM,
          "inference: only a FORWARD is an evaluation pass, not UPDATE");
  task f = {EMBER__CNN__OP__INIT, 0, LAYERS, 0, 0, 0, 0, 65534, 0};
  refused(&f, NULL, 0, &st, EMBER_EPARAM,
          "sample_offset 65534 with batch 3: past a mini-batch");
  free(st.data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_init_and_params),
      cmocka_unit_test(test_against_stage),
      cmocka_unit_test(test_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
