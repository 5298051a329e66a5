/* test_cnn_task - the cnn descriptor called directly: every kind of bad
 * task refused at validate, plan or run with a reason; INIT deterministic
 * and the same weights whatever the stage's range; FORWARD, BACKWARD and
 * UPDATE on one stage equal to cnn_cpu run directly (the same oneDNN
 * stage: equal to float rounding); and a net split in two stages chained
 * through out blocks equal to the whole net as one stage (within 1e-5,
 * oneDNN may order sums differently across a boundary). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
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

/* 8x8x2 -> conv 3 of 3x3 relu -> 6x6x3 -> maxpool 2 -> 3x3x3 ->
 * connected 5 relu -> connected 4 -> softmax: 5 layers */
static const char NET[] =
    "[net]\nheight=8\nwidth=8\nchannels=2\nlearning_rate=0.05\n"
    "momentum=0.9\ndecay=0.001\n"
    "[convolutional]\nfilters=3\nsize=3\nactivation=relu\n"
    "[maxpool]\nsize=2\nstride=2\npadding=0\n"
    "[connected]\noutput=5\nactivation=relu\n"
    "[connected]\noutput=4\nactivation=linear\n"
    "[softmax]\n";
enum { LAYERS = 5, B = 3, IN = 8 * 8 * 2, CLASSES = 4 };

static const acc_descriptor *cnn(void) {
  const acc_descriptor *d = acc_registry_find("cnn");
  assert_non_null(d);
  return d;
}

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  assert_non_null(p);
  return p;
}

/* packed Params; *len its length; free() it */
static uint8_t *params(Ember__Cnn__Op op, const char *net, uint32_t first,
                       uint32_t end, uint32_t batch, size_t *len) {
  Ember__Cnn__Params p = EMBER__CNN__PARAMS__INIT;
  p.op = op;
  p.net.data = (uint8_t *)net;
  p.net.len = strlen(net);
  p.first = first;
  p.end = end;
  p.batch = batch;
  p.has_seed = 1;
  p.seed = 42;
  *len = ember__cnn__params__get_packed_size(&p);
  uint8_t *buf = xcalloc(*len, 1);
  ember__cnn__params__pack(&p, buf);
  return buf;
}

static cnn_layout layout_of(uint32_t first, uint32_t end, uint32_t batch) {
  cnn_net *net = cnn_test_parse(NET);
  cnn_layout L;
  assert_int_equal(cnn_layout_compute(net, first, end, batch, 1, &L), 0);
  cnn_net_destroy(net);
  return L;
}

/* A stage's state block, zeroed */
static acc_mut_block new_state(uint32_t first, uint32_t end) {
  cnn_layout L = layout_of(first, end, B);
  acc_mut_block s = {xcalloc(L.total, 1), L.total};
  return s;
}

/* validate + plan + run_cpu of op on state; out blocks sized by plan into
 * outs (malloc'd); returns run_cpu's code (validate and plan must pass),
 * the Result in *res when given. */
static int run_op(Ember__Cnn__Op op, uint32_t first, uint32_t end,
                  const acc_block *in, size_t n_in, acc_mut_block *state,
                  acc_mut_block *outs, size_t n_out, Ember__Cnn__Result *res,
                  char *err, size_t err_len) {
  size_t len;
  uint8_t *p = params(op, NET, first, end, B, &len);
  void *prep;
  int rc = cnn_test_prepare(p, len, in, n_in, state->size, outs, n_out,
                            &prep, err, err_len);
  free(p);
  if (rc) fail_msg("validate: %s", err);
  return cnn_test_run(prep, in, n_in, state, outs, n_out, res, err, err_len);
}

static void ok_op(Ember__Cnn__Op op, uint32_t first, uint32_t end,
                  const acc_block *in, size_t n_in, acc_mut_block *state,
                  acc_mut_block *outs, size_t n_out, Ember__Cnn__Result *res) {
  char err[256] = "";
  int rc = run_op(op, first, end, in, n_in, state, outs, n_out, res, err,
                  sizeof err);
  if (rc) fail_msg("op %d on %u..%u: %s: %s", (int)op, first, end,
                   ember_errname(rc), err);
}

static void refused_at_validate(const uint8_t *p, size_t len,
                                const acc_block *in, size_t n_in, int want,
                                const char *reason) {
  void *prep = NULL;
  char err[256] = "";
  int rc = cnn()->validate(p, len, in, n_in, &prep, err, sizeof err);
  if (rc != want || prep || !strstr(err, reason))
    fail_msg("validate: %s \"%s\", expected %s \"%s\"", ember_errname(rc),
             err, ember_errname(want), reason);
  print_message("  refused: %s\n", err);
}

static void refuse(Ember__Cnn__Op op, const char *net, uint32_t first,
                   uint32_t end, uint32_t batch, const acc_block *in,
                   size_t n_in, int want, const char *reason) {
  size_t len;
  uint8_t *p = params(op, net, first, end, batch, &len);
  refused_at_validate(p, len, in, n_in, want, reason);
  free(p);
}

static void refuse_sgd(double lr, double momentum, const char *reason) {
  Ember__Cnn__Params p = EMBER__CNN__PARAMS__INIT;
  p.op = EMBER__CNN__OP__UPDATE;
  p.net.data = (uint8_t *)NET;
  p.net.len = strlen(NET);
  p.end = 2;
  p.batch = 1;
  p.has_learning_rate = p.has_momentum = 1;
  p.learning_rate = lr;
  p.momentum = momentum;
  uint8_t buf[1024];
  size_t len = ember__cnn__params__pack(&p, buf);
  refused_at_validate(buf, len, NULL, 0, EMBER_EPARAM, reason);
}

static void bad_tasks_refused(void **state) {
  (void)state;
  uint8_t junk[] = {0xff, 0xff, 0xff, 0x01};
  refused_at_validate(junk, sizeof junk, NULL, 0, EMBER_EPARAM,
                      "cannot decode");
  refuse(EMBER__CNN__OP__INIT, "[net]\nheight=0\n", 0, 1, B, NULL, 0,
         EMBER_EPARAM, "net:");
  refuse(EMBER__CNN__OP__INIT, NET, 2, 2, B, NULL, 0, EMBER_EPARAM,
         "not a range");
  refuse(EMBER__CNN__OP__INIT, NET, 0, LAYERS + 1, B, NULL, 0, EMBER_EPARAM,
         "not a range");
  refuse(EMBER__CNN__OP__INIT, NET, 0, 1, 0, NULL, 0, EMBER_EPARAM,
         "batch 0");
  refuse(EMBER__CNN__OP__INIT, NET, 0, 1, CNN_MAX_BATCH + 1, NULL, 0,
         EMBER_EPARAM, "batch");
  refuse((Ember__Cnn__Op)77, NET, 0, 1, B, NULL, 0, EMBER_EPARAM, "op 77");
  refuse_sgd(NAN, 0.9, "learning_rate");
  refuse_sgd(0.1, 1.0, "momentum");
  refuse_sgd(-1, 0.5, "learning_rate");

  /* blocks against the stage's shapes */
  float x[B * IN] = {0};
  uint8_t labels[B] = {0, 1, 3};
  acc_block in[2] = {{(uint8_t *)x, sizeof x}, {labels, B}};
  refuse(EMBER__CNN__OP__FORWARD, NET, 0, 2, B, in, 0, EMBER_EPARAM,
         "takes 1 input block, not 0");
  refuse(EMBER__CNN__OP__FORWARD, NET, 0, LAYERS, B, in, 1, EMBER_EPARAM,
         "takes 2 input blocks");
  acc_block short_in = {(uint8_t *)x, sizeof x - 4};
  refuse(EMBER__CNN__OP__FORWARD, NET, 0, 2, B, &short_in, 1, EMBER_EPARAM,
         "bytes, not");
  labels[2] = CLASSES;
  refuse(EMBER__CNN__OP__FORWARD, NET, 0, LAYERS, B, in, 2, EMBER_EFORMAT,
         "label 4 of sample 2");
  refuse(EMBER__CNN__OP__BACKWARD, NET, 0, LAYERS, B, in, 1, EMBER_EPARAM,
         "takes 0 input blocks");
  refuse(EMBER__CNN__OP__SET_PARAMS, NET, 0, 1, B, in, 1, EMBER_EPARAM,
         "input 0 (parameters)");
  /* the cpu back end's limits */
  const char *flat_then_conv =
      "[net]\nheight=4\nwidth=4\nchannels=1\n"
      "[connected]\noutput=16\nactivation=relu\n"
      "[convolutional]\nfilters=2\nsize=1\nactivation=relu\n"
      "[connected]\noutput=2\nactivation=linear\n[softmax]\n";
  refuse(EMBER__CNN__OP__INIT, flat_then_conv, 0, 2, B, NULL, 0,
         EMBER_EPARAM, "after a connected layer");
  /* over the .cfg limit */
  size_t big_len = CNN_CFG_MAX_BYTES + 2;
  char *big = xcalloc(big_len, 1);
  memset(big, '#', big_len - 1);
  refuse(EMBER__CNN__OP__INIT, big, 0, 1, B, NULL, 0, EMBER_EPARAM,
         "over");
  free(big);
}

static void plan_and_run_refusals(void **state) {
  (void)state;
  const acc_descriptor *d = cnn();
  char err[256];
  size_t len;
  uint8_t *p = params(EMBER__CNN__OP__GET_PARAMS, NET, 0, 2, B, &len);
  void *prep = NULL;
  assert_int_equal(d->validate(p, len, NULL, 0, &prep, err, sizeof err), 0);
  cnn_layout L = layout_of(0, 2, B);
  size_t sizes[2] = {L.total, L.total - 64};
  acc_task_plan plan;
  struct {
    size_t outs, states;
    const size_t *sizes;
    const char *reason;
  } cases[] = {{1, 0, sizes, "one state block"},
               {1, 2, sizes, "one state block"},
               {1, 1, sizes + 1, "bytes; layers 0..1"},
               {0, 1, sizes, "makes 1 out block"},
               {2, 1, sizes, "makes 1 out block"}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    acc_task_shape sh = {cases[i].outs, cases[i].sizes, cases[i].states};
    err[0] = 0;
    int rc = acc_plan_task(d, prep, &sh, 0, &plan, err, sizeof err);
    if (rc != EMBER_EPARAM || !strstr(err, cases[i].reason))
      fail_msg("plan case %zu: %s \"%s\"", i, ember_errname(rc), err);
    print_message("  plan refused: %s\n", err);
  }
  acc_task_shape good = {1, sizes, 1};
  assert_int_equal(acc_plan_task(d, prep, &good, 0, &plan, err, sizeof err),
                   0);
  d->release(prep);
  free(p);

  /* run: a zeroed block holds no stage; one stamped for another stage is
   * refused; BACKWARD needs a FORWARD */
  acc_mut_block st = new_state(0, 2), out[1];
  int rc = run_op(EMBER__CNN__OP__GET_PARAMS, 0, 2, NULL, 0, &st, out, 1,
                  NULL, err, sizeof err);
  assert_int_equal(rc, EMBER_ESTATE);
  print_message("  run refused: %s\n", err);
  free(out[0].data);
  acc_mut_block other = new_state(2, 4);
  ok_op(EMBER__CNN__OP__INIT, 2, 4, NULL, 0, &other, NULL, 0, NULL);
  /* same size, other range: layers 2..3 hold params, 0..1 too; reuse the
   * block for 1..3 only when it is as large */
  cnn_layout L13 = layout_of(1, 4, B);
  if (L13.total == other.size) {
    rc = run_op(EMBER__CNN__OP__UPDATE, 1, 4, NULL, 0, &other, NULL, 0,
                NULL, err, sizeof err);
    assert_int_equal(rc, EMBER_ESTATE);
  }
  ok_op(EMBER__CNN__OP__INIT, 0, 2, NULL, 0, &st, NULL, 0, NULL);
  float dy[B * 27] = {0};
  acc_block din = {(uint8_t *)dy, sizeof dy};
  rc = run_op(EMBER__CNN__OP__BACKWARD, 0, 2, &din, 1, &st, NULL, 0, NULL,
              err, sizeof err);
  assert_int_equal(rc, EMBER_ESTATE);
  print_message("  run refused: %s\n", err);
  free(st.data);
  free(other.data);
}

/* INIT twice with one seed: the same bytes; the stages [0, 2) and [2, 5)
 * hold the whole net's parameters, split. */
static void init_deterministic(void **state) {
  (void)state;
  acc_mut_block a = new_state(0, LAYERS), b = new_state(0, LAYERS);
  memset(b.data, 0x5a, b.size);
  ok_op(EMBER__CNN__OP__INIT, 0, LAYERS, NULL, 0, &a, NULL, 0, NULL);
  ok_op(EMBER__CNN__OP__INIT, 0, LAYERS, NULL, 0, &b, NULL, 0, NULL);
  cnn_layout L = layout_of(0, LAYERS, B);
  assert_memory_equal(a.data, b.data, L.stash_off);
  acc_mut_block s1 = new_state(0, 2), s2 = new_state(2, LAYERS), o1[1], o2[1],
                o[1];
  ok_op(EMBER__CNN__OP__INIT, 0, 2, NULL, 0, &s1, NULL, 0, NULL);
  ok_op(EMBER__CNN__OP__INIT, 2, LAYERS, NULL, 0, &s2, NULL, 0, NULL);
  ok_op(EMBER__CNN__OP__GET_PARAMS, 0, 2, NULL, 0, &s1, o1, 1, NULL);
  ok_op(EMBER__CNN__OP__GET_PARAMS, 2, LAYERS, NULL, 0, &s2, o2, 1, NULL);
  ok_op(EMBER__CNN__OP__GET_PARAMS, 0, LAYERS, NULL, 0, &a, o, 1, NULL);
  assert_int_equal(o1[0].size + o2[0].size, o[0].size);
  assert_memory_equal(o1[0].data, o[0].data, o1[0].size);
  assert_memory_equal(o2[0].data, o[0].data + o1[0].size, o2[0].size);
  /* not all zero, and within He's bound for the first layer (fan-in 18) */
  const float *w = (const float *)(void *)o[0].data;
  double bound = sqrt(6.0 / 18), sum = 0;
  for (size_t i = 0; i < 54; i++) {
    assert_true(fabs(w[i]) <= bound);
    sum += fabs(w[i]);
  }
  assert_true(sum > 54 * bound / 4);
  free(o1[0].data), free(o2[0].data), free(o[0].data);
  free(a.data), free(b.data), free(s1.data), free(s2.data);
}

static double rel_err(const float *a, const float *b, size_t n) {
  double d = 0, m = 0;
  for (size_t i = 0; i < n; i++) {
    d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    m += (double)b[i] * b[i];
  }
  return sqrt(d) / (m > 0 ? sqrt(m) : 1e-30);
}

static void inputs(float *x, uint8_t *labels) {
  uint64_t rng = 9;
  for (size_t i = 0; i < B * IN; i++) x[i] = (float)cnn_test_uniform(&rng);
  for (size_t i = 0; i < B; i++) labels[i] = (uint8_t)(i * 3 % CLASSES);
}

/* Two training steps of the whole net as one stage, through the
 * descriptor and through cnn_cpu directly from the same parameters. */
static void one_stage_equals_cnn_cpu(void **state) {
  (void)state;
  float x[B * IN];
  uint8_t labels[B];
  inputs(x, labels);
  acc_mut_block st = new_state(0, LAYERS), prob[1], params0[1], params1[1];
  ok_op(EMBER__CNN__OP__INIT, 0, LAYERS, NULL, 0, &st, NULL, 0, NULL);
  ok_op(EMBER__CNN__OP__GET_PARAMS, 0, LAYERS, NULL, 0, &st, params0, 1,
        NULL);

  cnn_net *net = cnn_test_parse(NET);
  char err[256];
  cnn_cpu_stage *s = NULL;
  assert_int_equal(cnn_cpu_stage_create(net, 0, LAYERS, B, &s, err,
                                        sizeof err), 0);
  size_t nl;
  const cnn_layer *layers = cnn_net_layers(net, &nl);
  const float *p0 = (const float *)(void *)params0[0].data;
  for (size_t i = 0, off = 0; i < nl; i++) {
    if (!layers[i].weights) continue;
    assert_int_equal(cnn_cpu_stage_set_params(s, i, p0 + off,
                                              p0 + off + layers[i].weights),
                     0);
    off += layers[i].weights + layers[i].biases;
  }
  cnn_layout L = layout_of(0, LAYERS, B);
  float want_p[B * CLASSES], *want_params = xcalloc(L.params, 4);
  for (int step = 0; step < 2; step++) {
    acc_block in[2] = {{(uint8_t *)x, sizeof x}, {labels, B}};
    Ember__Cnn__Result r;
    ok_op(EMBER__CNN__OP__FORWARD, 0, LAYERS, in, 2, &st, prob, 1, &r);
    double want_loss;
    assert_int_equal(cnn_cpu_stage_forward(s, x, want_p, labels, &want_loss),
                     0);
    assert_true(r.has_loss && r.has_correct);
    if (!(fabs(r.loss - want_loss) <= 1e-6 * fabs(want_loss)))
      fail_msg("step %d: loss %.9g, cnn_cpu %.9g", step, r.loss, want_loss);
    assert_true(rel_err((float *)(void *)prob[0].data, want_p,
                        B * CLASSES) < 1e-6);
    free(prob[0].data);
    ok_op(EMBER__CNN__OP__BACKWARD, 0, LAYERS, NULL, 0, &st, NULL, 0, NULL);
    assert_int_equal(cnn_cpu_stage_backward(s, NULL, NULL), 0);
    /* the accumulated gradients in the block */
    const float *g = (const float *)(void *)(st.data + L.grads_off);
    for (size_t i = 0, off = 0; i < nl; i++) {
      if (!layers[i].weights) continue;
      assert_int_equal(cnn_cpu_stage_get_grads(s, i, want_params + off,
                                               want_params + off +
                                                   layers[i].weights), 0);
      size_t n = layers[i].weights + layers[i].biases;
      double e = rel_err(g + off, want_params + off, n);
      if (!(e < 1e-6)) fail_msg("step %d layer %zu: gradients off by %g",
                                step, i, e);
      off += n;
    }
    ok_op(EMBER__CNN__OP__UPDATE, 0, LAYERS, NULL, 0, &st, NULL, 0, &r);
    assert_int_equal(r.updates, step + 1);
    const cnn_train *tr = cnn_net_train(net);
    assert_int_equal(cnn_cpu_stage_update(s, tr->learning_rate, tr->momentum,
                                          tr->decay), 0);
  }
  ok_op(EMBER__CNN__OP__GET_PARAMS, 0, LAYERS, NULL, 0, &st, params1, 1,
        NULL);
  const float *p1 = (const float *)(void *)params1[0].data;
  for (size_t i = 0, off = 0; i < nl; i++) {
    if (!layers[i].weights) continue;
    assert_int_equal(cnn_cpu_stage_get_params(s, i, want_params + off,
                                              want_params + off +
                                                  layers[i].weights), 0);
    off += layers[i].weights + layers[i].biases;
  }
  double e = rel_err(p1, want_params, L.params);
  print_message("  after 2 steps: parameters off by %.3g (relative)\n", e);
  assert_true(e < 1e-6);
  assert_true(rel_err(p1, p0, L.params) > 1e-4); /* they did move */
  free(want_params);
  free(params0[0].data), free(params1[0].data), free(st.data);
  cnn_cpu_stage_destroy(s);
  cnn_net_destroy(net);
}

/* The net as stages [0, 2) and [2, 5), activations and errors passed as
 * out blocks, against the whole net as one stage: loss, probabilities and
 * the parameters after two steps. */
static void two_stages_equal_one(void **state) {
  (void)state;
  float x[B * IN];
  uint8_t labels[B];
  inputs(x, labels);
  acc_mut_block whole = new_state(0, LAYERS), s1 = new_state(0, 2),
                s2 = new_state(2, LAYERS);
  ok_op(EMBER__CNN__OP__INIT, 0, LAYERS, NULL, 0, &whole, NULL, 0, NULL);
  ok_op(EMBER__CNN__OP__INIT, 0, 2, NULL, 0, &s1, NULL, 0, NULL);
  ok_op(EMBER__CNN__OP__INIT, 2, LAYERS, NULL, 0, &s2, NULL, 0, NULL);
  for (int step = 0; step < 2; step++) {
    acc_block in[2] = {{(uint8_t *)x, sizeof x}, {labels, B}};
    acc_mut_block pw[1], act[1], p2[1], err2[1];
    Ember__Cnn__Result rw, r2;
    ok_op(EMBER__CNN__OP__FORWARD, 0, LAYERS, in, 2, &whole, pw, 1, &rw);
    ok_op(EMBER__CNN__OP__BACKWARD, 0, LAYERS, NULL, 0, &whole, NULL, 0,
          NULL);
    ok_op(EMBER__CNN__OP__UPDATE, 0, LAYERS, NULL, 0, &whole, NULL, 0, NULL);

    ok_op(EMBER__CNN__OP__FORWARD, 0, 2, in, 1, &s1, act, 1, NULL);
    acc_block in2[2] = {{act[0].data, act[0].size}, {labels, B}};
    ok_op(EMBER__CNN__OP__FORWARD, 2, LAYERS, in2, 2, &s2, p2, 1, &r2);
    ok_op(EMBER__CNN__OP__BACKWARD, 2, LAYERS, NULL, 0, &s2, err2, 1, NULL);
    assert_int_equal(err2[0].size, act[0].size);
    acc_block e_in = {err2[0].data, err2[0].size};
    ok_op(EMBER__CNN__OP__BACKWARD, 0, 2, &e_in, 1, &s1, NULL, 0, NULL);
    ok_op(EMBER__CNN__OP__UPDATE, 0, 2, NULL, 0, &s1, NULL, 0, NULL);
    ok_op(EMBER__CNN__OP__UPDATE, 2, LAYERS, NULL, 0, &s2, NULL, 0, NULL);

    print_message("  step %d: loss %.6f whole, %.6f in two stages\n", step,
                  rw.loss, r2.loss);
    assert_true(fabs(rw.loss - r2.loss) <= 1e-5 * fabs(rw.loss));
    assert_int_equal(rw.correct, r2.correct);
    assert_true(rel_err((float *)(void *)p2[0].data,
                        (float *)(void *)pw[0].data, B * CLASSES) < 1e-5);
    free(pw[0].data), free(act[0].data), free(p2[0].data);
    free(err2[0].data);
  }
  acc_mut_block o[1], o1[1], o2[1];
  ok_op(EMBER__CNN__OP__GET_PARAMS, 0, LAYERS, NULL, 0, &whole, o, 1, NULL);
  ok_op(EMBER__CNN__OP__GET_PARAMS, 0, 2, NULL, 0, &s1, o1, 1, NULL);
  ok_op(EMBER__CNN__OP__GET_PARAMS, 2, LAYERS, NULL, 0, &s2, o2, 1, NULL);
  size_t n1 = o1[0].size / 4, n2 = o2[0].size / 4;
  const float *w = (const float *)(void *)o[0].data;
  double e1 = rel_err((float *)(void *)o1[0].data, w, n1);
  double e2 = rel_err((float *)(void *)o2[0].data, w + n1, n2);
  print_message("  parameters after 2 steps off by %.3g and %.3g\n", e1, e2);
  assert_true(e1 < 1e-5 && e2 < 1e-5);
  free(o[0].data), free(o1[0].data), free(o2[0].data);
  free(whole.data), free(s1.data), free(s2.data);
}

/* SET_PARAMS then GET_PARAMS gives the bytes back; the costs add up. */
static void set_get_and_cost(void **state) {
  (void)state;
  cnn_layout L = layout_of(0, LAYERS, B);
  float *p = xcalloc(L.params, 4);
  for (size_t i = 0; i < L.params; i++) p[i] = (float)i * 0.25f;
  acc_block in = {(uint8_t *)p, L.params * 4};
  acc_mut_block st = new_state(0, LAYERS), out[1];
  ok_op(EMBER__CNN__OP__SET_PARAMS, 0, LAYERS, &in, 1, &st, NULL, 0, NULL);
  ok_op(EMBER__CNN__OP__GET_PARAMS, 0, LAYERS, NULL, 0, &st, out, 1, NULL);
  assert_memory_equal(out[0].data, p, L.params * 4);
  free(out[0].data), free(st.data), free(p);

  /* FORWARD's cost: 2 flops per multiply-add plus element ops, per sample;
   * the boundary bytes */
  float x[B * IN] = {0};
  uint8_t labels[B] = {0};
  acc_block fin[2] = {{(uint8_t *)x, sizeof x}, {labels, B}};
  size_t len;
  uint8_t *pk = params(EMBER__CNN__OP__FORWARD, NET, 0, LAYERS, B, &len);
  void *prep = NULL;
  char err[256];
  assert_int_equal(cnn()->validate(pk, len, fin, 2, &prep, err, sizeof err),
                   0);
  acc_task_shape sh = {1, &L.total, 1};
  acc_task_plan plan;
  assert_int_equal(acc_plan_task(cnn(), prep, &sh, 0, &plan, err,
                                 sizeof err), 0);
  cnn_net *net = cnn_test_parse(NET);
  size_t nl;
  const cnn_layer *l = cnn_net_layers(net, &nl);
  uint64_t ops = 0;
  for (size_t i = 0; i < nl; i++) ops += 2 * l[i].fp_macs + l[i].elem_ops;
  assert_int_equal(plan.cost.ops, ops * B);
  assert_int_equal(plan.cost.bytes_read, sizeof x + B);
  assert_int_equal(plan.cost.bytes_written, B * CLASSES * 4);
  assert_int_equal(plan.output_sizes[0], B * CLASSES * 4);
  assert_int_equal(cnn()->work(prep), plan.cost.ops);
  assert_non_null(cnn()->fpga);
  cnn_net_destroy(net);
  cnn()->release(prep);
  free(pk);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bad_tasks_refused),
      cmocka_unit_test(plan_and_run_refusals),
      cmocka_unit_test(init_deterministic),
      cmocka_unit_test(one_stage_equals_cnn_cpu),
      cmocka_unit_test(two_stages_equal_one),
      cmocka_unit_test(set_get_and_cost),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
