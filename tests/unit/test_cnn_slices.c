/* test_cnn_slices - input-channel-partitioned (ICP) slices of the cnn
 * descriptor, called directly: LeNet's conv2 (layer 2, 20 input channels)
 * split in 2 and 3 slices and fc1 (layer 4, 800 input elements) in 2,
 * each chain against the unsplit one-layer stage over two training steps:
 *   FORWARD    the last slice's output vs the stage's output
 *   BACKWARD   the slices' input-channel errors, concatenated, vs the
 *              stage's input error
 *   gradients  each slice's weight gradients (and the last one's bias
 *              gradients) vs the sub-tensors of the stage's
 *   UPDATE     each slice's parameters vs the sub-tensors of the stage's
 * all within TOL, relative to the norm (float sums in another order: the
 * slices add their partial sums one after another, oneDNN sums all
 * channels at once; in practice about 1e-7). INIT's slices are the
 * sub-tensors of the stage's INIT exactly. And hostile channel ranges
 * refused with EMBER_EPARAM and a reason; a block of one slice refused by
 * another slice's task (the key holds the range). Error pieces: pool1's
 * and pool2's BACKWARD with the output error as the slices' pieces
 * (error_channels) equals it with the error joined, bit for bit; hostile
 * pieces refused. Error addends: pool1's BACKWARD with the output error as
 * 3 addends (error_addends) equals it with their sum, bit for bit;
 * hostile addends refused.
 * Output-channel-partitioned (OCP) slices: conv1 (layer 0, 20 output
 * channels) in 2 and 3, conv2 in 2 and fc1 (500 outputs) in 3, chained,
 * against the unsplit layer the same way (the input error: the sum of the
 * slices' parts); INIT's rows exactly; hostile OCP ranges refused. */
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
#include "cnn_layout.h"
#include "cnn_net.h"
#include "ember/ember_errors.h"

#define LENET EMBER_SOURCE_DIR "/accelerators/cnn/nets/lenet.cfg"
#define TOL 1e-5
enum { B = 4, STEPS = 2 };

static char *net_text;
static size_t net_len;
static cnn_net *net;

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  assert_non_null(p);
  return p;
}

static int setup(void **state) {
  (void)state;
  FILE *f = fopen(LENET, "rb");
  assert_non_null(f);
  net_text = xcalloc(CNN_CFG_MAX_BYTES, 1);
  net_len = fread(net_text, 1, CNN_CFG_MAX_BYTES, f);
  fclose(f);
  char err[256];
  assert_int_equal(cnn_cfg_parse(net_text, net_len, "lenet", &net, err,
                                 sizeof err), 0);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  cnn_net_destroy(net);
  free(net_text);
  return 0;
}

static const acc_descriptor *cnn(void) {
  const acc_descriptor *d = acc_registry_find("cnn");
  assert_non_null(d);
  return d;
}

/* A stage: layers [first, end), or with sliced, layer first's input
 * channels [c0, c1), with ocp too its output channels. */
typedef struct stage {
  uint32_t first, end;
  int sliced;
  uint32_t c0, c1;
  int ocp;
} stage;

/* error_channels for the next params() (n_pieces 0: none); error_addends
 * (0: none) */
static uint32_t *pieces;
static size_t n_pieces;
static uint32_t addends;

static uint8_t *params(Ember__Cnn__Op op, const stage *s, size_t *len) {
  Ember__Cnn__Params p = EMBER__CNN__PARAMS__INIT;
  p.n_error_channels = n_pieces;
  p.error_channels = pieces;
  p.has_error_addends = addends > 0;
  p.error_addends = addends;
  p.op = op;
  p.net.data = (uint8_t *)net_text;
  p.net.len = net_len;
  p.first = s->first;
  p.end = s->end;
  p.batch = B;
  p.has_seed = 1;
  p.seed = 42;
  if (s->sliced) {
    p.has_channel_begin = p.has_channel_end = 1;
    p.channel_begin = s->c0;
    p.channel_end = s->c1;
  }
  if (s->ocp) p.has_split_outputs = p.split_outputs = 1;
  *len = ember__cnn__params__get_packed_size(&p);
  uint8_t *buf = xcalloc(*len, 1);
  ember__cnn__params__pack(&p, buf);
  return buf;
}

static cnn_layout layout_of(const stage *s) {
  cnn_layout L;
  int rc = s->ocp      ? cnn_layout_compute_ocp(net, s->first, s->c0, s->c1,
                                                B, 1, &L)
           : s->sliced ? cnn_layout_compute_slice(net, s->first, s->c0, s->c1,
                                                  B, 1, &L)
                       : cnn_layout_compute(net, s->first, s->end, B, 1, &L);
  assert_int_equal(rc, 0);
  return L;
}

static acc_mut_block new_state(const stage *s) {
  cnn_layout L = layout_of(s);
  acc_mut_block b = {xcalloc(L.total, 1), L.total};
  return b;
}

/* validate + plan + run_cpu; out blocks sized by plan into outs
 * (calloc'd, the caller frees them); returns the first failing code, err
 * the reason. */
static int run_op(Ember__Cnn__Op op, const stage *s, const acc_block *in,
                  size_t n_in, acc_mut_block *state, acc_mut_block *outs,
                  size_t n_out, char *err, size_t err_len) {
  const acc_descriptor *d = cnn();
  size_t len;
  uint8_t *p = params(op, s, &len);
  void *prep = NULL;
  int rc = d->validate(p, len, in, n_in, &prep, err, err_len);
  free(p);
  if (rc) return rc;
  acc_task_shape shape = {n_out, &state->size, 1};
  acc_task_plan plan;
  rc = acc_plan_task(d, prep, &shape, 0, &plan, err, err_len);
  for (size_t i = 0; !rc && i < n_out; i++) {
    outs[i].size = plan.output_sizes[i];
    outs[i].data = xcalloc(outs[i].size, 1);
  }
  if (!rc) {
    acc_run_ctx ctx = {0};
    ctx.states = state;
    ctx.n_states = 1;
    ctx.outputs = outs;
    ctx.n_outputs = n_out;
    acc_output out = {0};
    rc = d->run_cpu(prep, in, n_in, &ctx, &out, err, err_len);
    free(out.data);
  }
  d->release(prep);
  return rc;
}

static void ok_op(Ember__Cnn__Op op, const stage *s, const acc_block *in,
                  size_t n_in, acc_mut_block *state, acc_mut_block *outs,
                  size_t n_out) {
  char err[256] = "";
  int rc = run_op(op, s, in, n_in, state, outs, n_out, err, sizeof err);
  if (rc) fail_msg("op %d on layer %u [%u, %u): %s: %s", (int)op, s->first,
                   s->c0, s->c1, ember_errname(rc), err);
}

static double rel_err(const float *a, const float *b, size_t n) {
  double d = 0, nb = 0;
  for (size_t i = 0; i < n; i++) {
    d += ((double)a[i] - b[i]) * ((double)a[i] - b[i]);
    nb += (double)b[i] * b[i];
  }
  return sqrt(d) / (nb > 0 ? sqrt(nb) : 1e-30);
}

static void expect_close(const char *what, const float *got,
                         const float *want, size_t n) {
  double e = rel_err(got, want, n);
  print_message("    %-28s rel err %.2e over %zu values\n", what, e, n);
  if (!(e <= TOL)) fail_msg("%s: relative error %g > %g", what, e, TOL);
}

static const float *floats(const acc_mut_block *b) {
  return (const float *)(const void *)b->data;
}

/* Columns [lo, hi) of each row of `row` floats of whole (rows of them),
 * packed into out: a slice's part of weights stored output by output. */
static void sub_rows(const float *whole, size_t rows, size_t row, size_t lo,
                     size_t hi, float *out) {
  for (size_t r = 0; r < rows; r++)
    memcpy(out + r * (hi - lo), whole + r * row + lo,
           (hi - lo) * sizeof *out);
}

/* Each slice's parameter-shaped region at off (params or grads) against
 * the sub-tensors of the whole stage's. */
static void expect_param_slices(const char *what, const acc_mut_block *whole,
                                const acc_mut_block *slices, const stage *sl,
                                size_t n, int grads) {
  size_t cnt;
  const cnn_layer *l = &cnn_net_layers(net, &cnt)[sl[0].first];
  stage ws = {sl[0].first, sl[0].first + 1, 0, 0, 0, 0};
  cnn_layout WL = layout_of(&ws);
  size_t per = l->kind == CNN_LAYER_CONV ? (size_t)l->size * l->size : 1;
  size_t rows = l->biases, row = (size_t)(l->weights / rows);
  const float *w = (const float *)(const void *)(whole->data +
                                                 (grads ? WL.grads_off
                                                        : WL.params_off));
  for (size_t k = 0; k < n; k++) {
    cnn_layout L = layout_of(&sl[k]);
    const float *got = (const float *)(const void *)(slices[k].data +
                                                     (grads ? L.grads_off
                                                            : L.params_off));
    float *want = xcalloc(L.weights, sizeof *want);
    sub_rows(w, rows, row, sl[k].c0 * per, sl[k].c1 * per, want);
    char name[96];
    snprintf(name, sizeof name, "%s [%u, %u) weights", what, sl[k].c0,
             sl[k].c1);
    expect_close(name, got, want, (size_t)L.weights);
    free(want);
    if (L.biases) {
      snprintf(name, sizeof name, "%s [%u, %u) biases", what, sl[k].c0,
               sl[k].c1);
      assert_int_equal(L.biases, l->biases);
      expect_close(name, got + L.weights, w + l->weights, (size_t)L.biases);
    }
  }
}

/* A step's seeded input x (in [0, 1): activations) and output error dy
 * (in [-1e-2, 1e-2)). */
static void random_step(float *x, size_t in_n, float *dy, size_t out_n,
                        uint64_t *rng) {
  for (size_t i = 0; i < in_n + out_n; i++) {
    *rng = *rng * 6364136223846793005ull + 1442695040888963407ull;
    double u = (double)(*rng >> 11) * 0x1.0p-53;
    if (i < in_n) x[i] = (float)u;
    else dy[i - in_n] = (float)(2 * u - 1) * 1e-2f;
  }
}

/* Layer `layer` split at the bounds (bounds[0] = 0 .. bounds[n] = all)
 * against the unsplit stage, STEPS training steps. */
static void chain_equals_layer(uint32_t layer, const uint32_t *bounds,
                               size_t n) {
  size_t cnt;
  const cnn_layer *l = &cnn_net_layers(net, &cnt)[layer];
  print_message("  layer %u (%s) in %zu slices\n", layer,
                cnn_layer_kind_name(l->kind), n);
  stage ws = {layer, layer + 1, 0, 0, 0, 0};
  stage sl[8];
  acc_mut_block whole = new_state(&ws), st[8];
  ok_op(EMBER__CNN__OP__INIT, &ws, NULL, 0, &whole, NULL, 0);
  for (size_t k = 0; k < n; k++) {
    sl[k] = (stage){layer, layer + 1, 1, bounds[k], bounds[k + 1], 0};
    st[k] = new_state(&sl[k]);
    ok_op(EMBER__CNN__OP__INIT, &sl[k], NULL, 0, &st[k], NULL, 0);
  }
  expect_param_slices("INIT", &whole, st, sl, n, 0);
  cnn_layout WL = layout_of(&ws);
  size_t in_n = (size_t)WL.in_elems, out_n = (size_t)WL.out_elems;
  size_t unit = l->kind == CNN_LAYER_CONV ? (size_t)l->in.h * l->in.w : 1;
  size_t sample = in_n / B;
  float *x = xcalloc(in_n, sizeof *x), *dy = xcalloc(out_n, sizeof *dy);
  float *dx_cat = xcalloc(in_n, sizeof *dx_cat);
  uint64_t rng = 0x1234567u;
  for (int step = 0; step < STEPS; step++) {
    print_message("   step %d\n", step);
    random_step(x, in_n, dy, out_n, &rng);
    acc_block xin = {(uint8_t *)x, in_n * sizeof *x};
    acc_block dyin = {(uint8_t *)dy, out_n * sizeof *dy};

    /* FORWARD: the whole layer, then the chain */
    acc_mut_block y, part[8], dz[2], din[8], wdx;
    ok_op(EMBER__CNN__OP__FORWARD, &ws, &xin, 1, &whole, &y, 1);
    for (size_t k = 0; k < n; k++) {
      acc_block in[2] = {xin, {NULL, 0}};
      if (k) in[1] = (acc_block){part[k - 1].data, part[k - 1].size};
      ok_op(EMBER__CNN__OP__FORWARD, &sl[k], in, k ? 2 : 1, &st[k], &part[k],
            1);
      assert_int_equal(part[k].size, out_n * sizeof(float));
    }
    expect_close("FORWARD output", floats(&part[n - 1]), floats(&y), out_n);

    /* BACKWARD: the last slice makes dz for the others */
    /* a stage starting at layer 0 makes no input error */
    wdx.data = NULL;
    ok_op(EMBER__CNN__OP__BACKWARD, &ws, &dyin, 1, &whole, &wdx, layer ? 1 : 0);
    ok_op(EMBER__CNN__OP__BACKWARD, &sl[n - 1], &dyin, 1, &st[n - 1], dz, 2);
    din[n - 1] = dz[0];
    acc_block dzin = {dz[1].data, dz[1].size};
    for (size_t k = 0; k + 1 < n; k++)
      ok_op(EMBER__CNN__OP__BACKWARD, &sl[k], &dzin, 1, &st[k], &din[k], 1);
    for (size_t k = 0; k < n; k++) {
      size_t part_n = (sl[k].c1 - sl[k].c0) * unit;
      assert_int_equal(din[k].size, B * part_n * sizeof(float));
      for (size_t s = 0; s < B; s++)
        memcpy(dx_cat + s * sample + sl[k].c0 * unit,
               floats(&din[k]) + s * part_n, part_n * sizeof(float));
    }
    if (layer)
      expect_close("BACKWARD input error", dx_cat, floats(&wdx), in_n);
    expect_param_slices("gradients", &whole, st, sl, n, 1);

    /* UPDATE each, then the parameters */
    ok_op(EMBER__CNN__OP__UPDATE, &ws, NULL, 0, &whole, NULL, 0);
    for (size_t k = 0; k < n; k++)
      ok_op(EMBER__CNN__OP__UPDATE, &sl[k], NULL, 0, &st[k], NULL, 0);
    expect_param_slices("UPDATE", &whole, st, sl, n, 0);

    free(y.data);
    free(wdx.data);
    free(dz[1].data);
    for (size_t k = 0; k < n; k++) {
      free(part[k].data);
      free(din[k].data);
    }
  }
  free(x);
  free(dy);
  free(dx_cat);
  free(whole.data);
  for (size_t k = 0; k < n; k++) free(st[k].data);
}

static void conv2_in_2_and_3_slices(void **state) {
  (void)state;
  const uint32_t two[] = {0, 10, 20}, three[] = {0, 7, 14, 20};
  chain_equals_layer(2, two, 2);
  chain_equals_layer(2, three, 3);
}

static void fc1_in_2_slices(void **state) {
  (void)state;
  const uint32_t two[] = {0, 333, 800};
  chain_equals_layer(4, two, 2);
}

/* conv1 (layer 0) sliced too: its one channel as one slice equals the
 * layer (the input error is computed, though no stage needs it). */
static void conv1_as_one_slice(void **state) {
  (void)state;
  const uint32_t one[] = {0, 1};
  chain_equals_layer(0, one, 1);
}

static void refused(Ember__Cnn__Op op, const stage *s, const acc_block *in,
                    size_t n_in, const char *reason) {
  size_t len;
  uint8_t *p = params(op, s, &len);
  void *prep = NULL;
  char err[256] = "";
  int rc = cnn()->validate(p, len, in, n_in, &prep, err, sizeof err);
  free(p);
  if (rc != EMBER_EPARAM || prep || !strstr(err, reason))
    fail_msg("validate: %s \"%s\", expected EMBER_EPARAM \"%s\"",
             ember_errname(rc), err, reason);
  print_message("  refused: %s\n", err);
}

static void hostile_ranges_refused(void **state) {
  (void)state;
  const Ember__Cnn__Op init = EMBER__CNN__OP__INIT;
  stage beyond = {2, 3, 1, 0, 21, 0}, empty = {2, 3, 1, 7, 7, 0},
        reversed = {2, 3, 1, 8, 7, 0}, huge = {2, 3, 1, 0, UINT32_MAX, 0},
        pool = {1, 2, 1, 0, 1, 0}, two = {2, 4, 1, 0, 7, 0},
        softmax = {6, 7, 1, 0, 5, 0}, fc_beyond = {4, 5, 1, 0, 801, 0};
  refused(init, &beyond, NULL, 0, "channels [0, 21) not a non-empty range "
          "of layer 2's 20 input channels");
  refused(init, &empty, NULL, 0, "not a non-empty range");
  refused(init, &reversed, NULL, 0, "not a non-empty range");
  refused(init, &huge, NULL, 0, "not a non-empty range");
  refused(init, &fc_beyond, NULL, 0, "of layer 4's 800 input elements");
  refused(init, &pool, NULL, 0, "layer 1 is a maxpool");
  refused(init, &softmax, NULL, 0, "layer 6 is a softmax");
  refused(init, &two, NULL, 0, "is one layer, not layers [2, 4)");
  /* one of the two fields only */
  Ember__Cnn__Params p = EMBER__CNN__PARAMS__INIT;
  p.op = init;
  p.net.data = (uint8_t *)net_text;
  p.net.len = net_len;
  p.first = 2;
  p.end = 3;
  p.batch = B;
  p.has_channel_end = 1;
  p.channel_end = 7;
  size_t len = ember__cnn__params__get_packed_size(&p);
  uint8_t *buf = xcalloc(len, 1);
  ember__cnn__params__pack(&p, buf);
  void *prep = NULL;
  char err[256] = "";
  assert_int_equal(cnn()->validate(buf, len, NULL, 0, &prep, err,
                                   sizeof err), EMBER_EPARAM);
  assert_non_null(strstr(err, "channel_begin is missing"));
  print_message("  refused: %s\n", err);
  free(buf);

  /* blocks: the partial sums are input 1 from the second slice on */
  stage first = {2, 3, 1, 0, 7, 0}, mid = {2, 3, 1, 7, 14, 0};
  cnn_layout L = layout_of(&mid);
  float *x = xcalloc(L.in_elems + L.out_elems, sizeof *x);
  acc_block in[2] = {{(uint8_t *)x, L.in_elems * sizeof *x},
                     {(uint8_t *)x, L.out_elems * sizeof *x - 4}};
  refused(EMBER__CNN__OP__FORWARD, &mid, in, 1,
          "channels [7, 14) takes 2 input blocks, not 1");
  refused(EMBER__CNN__OP__FORWARD, &mid, in, 2,
          "input 1 (the previous slice's partial sums)");
  refused(EMBER__CNN__OP__FORWARD, &first, in, 2, "takes 1 input block");
  acc_block short_x = {(uint8_t *)x, L.in_elems * sizeof *x - 4};
  refused(EMBER__CNN__OP__FORWARD, &first, &short_x, 1,
          "input 0 (the layer's whole input)");
  refused(EMBER__CNN__OP__BACKWARD, &mid, &in[1], 1,
          "the last slice's error before the activation");

  /* plan: a non-last slice's BACKWARD makes 1 out block, the last 2 */
  const acc_descriptor *d = cnn();
  acc_block dz = {(uint8_t *)x, L.out_elems * sizeof *x};
  stage last = {2, 3, 1, 14, 20, 0};
  const stage *which[2] = {&mid, &last};
  for (int k = 0; k < 2; k++) {
    cnn_layout SL = layout_of(which[k]);
    uint8_t *pp = params(EMBER__CNN__OP__BACKWARD, which[k], &len);
    assert_int_equal(d->validate(pp, len, &dz, 1, &prep, err, sizeof err),
                     0);
    size_t size = SL.total;
    acc_task_shape sh = {(size_t)(k + 2), &size, 1};
    acc_task_plan plan;
    assert_int_equal(acc_plan_task(d, prep, &sh, 0, &plan, err, sizeof err),
                     EMBER_EPARAM);
    print_message("  plan refused: %s\n", err);
    sh.n_outputs = (size_t)(k + 1);
    assert_int_equal(acc_plan_task(d, prep, &sh, 0, &plan, err, sizeof err),
                     0);
    /* conv2's input is 12 x 12 x 20 */
    assert_int_equal(plan.output_sizes[0], (size_t)B *
                     (which[k]->c1 - which[k]->c0) * 12 * 12 * sizeof(float));
    if (k) assert_int_equal(plan.output_sizes[1], L.out_elems * sizeof(float));
    d->release(prep);
    free(pp);
  }

  /* a block stamped for slice [0, 7) (the same size as [7, 14)'s) is
   * refused by [7, 14)'s tasks */
  assert_int_equal(layout_of(&first).total, L.total);
  acc_mut_block st = new_state(&first);
  ok_op(init, &first, NULL, 0, &st, NULL, 0);
  int rc = run_op(EMBER__CNN__OP__UPDATE, &mid, NULL, 0, &st, NULL, 0, err,
                  sizeof err);
  assert_int_equal(rc, EMBER_ESTATE);
  assert_non_null(strstr(err, "layer 2's channels [0, 7)"));
  print_message("  run refused: %s\n", err);
  /* BACKWARD without a FORWARD */
  rc = run_op(EMBER__CNN__OP__BACKWARD, &first, &dz, 1, &st, NULL, 0, err,
              sizeof err);
  assert_int_equal(rc, EMBER_ESTATE);
  free(st.data);
  free(x);
}

/* Layer stage ps run twice from INIT and FORWARD of xin: BACKWARD with
 * the error as one block (one) and as n blocks (in, with error_channels
 * pieces of piece_counts, or n_addends error_addends) give the same input
 * error and state, bit for bit. */
static void backward_equal(const stage *ps, const acc_block *xin,
                           const acc_block *one, const acc_block *in,
                           size_t n, uint32_t *piece_counts,
                           uint32_t n_addends) {
  acc_mut_block st[2] = {new_state(ps), new_state(ps)}, y[2], dx[2];
  for (int v = 0; v < 2; v++) {
    ok_op(EMBER__CNN__OP__INIT, ps, NULL, 0, &st[v], NULL, 0);
    ok_op(EMBER__CNN__OP__FORWARD, ps, xin, 1, &st[v], &y[v], 1);
  }
  ok_op(EMBER__CNN__OP__BACKWARD, ps, one, 1, &st[0], &dx[0], 1);
  pieces = piece_counts;
  n_pieces = piece_counts ? n : 0;
  addends = n_addends;
  ok_op(EMBER__CNN__OP__BACKWARD, ps, in, n, &st[1], &dx[1], 1);
  pieces = NULL;
  n_pieces = 0;
  addends = 0;
  assert_int_equal(dx[0].size, xin->size);
  assert_int_equal(dx[1].size, dx[0].size);
  assert_memory_equal(dx[0].data, dx[1].data, dx[0].size);
  assert_memory_equal(st[0].data, st[1].data, st[0].size);
  for (int v = 0; v < 2; v++) {
    free(st[v].data);
    free(y[v].data);
    free(dx[v].data);
  }
}

/* The stage of layer `layer` alone: BACKWARD with its output error in
 * pieces of the given channel counts (of unit floats each) equals
 * BACKWARD with the error joined, bit for bit. */
static void pieces_equal_joined(uint32_t layer, uint32_t *counts, size_t k,
                                size_t unit) {
  stage ps = {layer, layer + 1, 0, 0, 0, 0};
  cnn_layout L = layout_of(&ps);
  size_t in_n = (size_t)L.in_elems, out_n = (size_t)L.out_elems;
  size_t sample = out_n / B;
  print_message("  layer %u's BACKWARD, its error in %zu pieces\n", layer, k);
  float *x = xcalloc(in_n, sizeof *x), *dy = xcalloc(out_n, sizeof *dy);
  float *parts = xcalloc(out_n, sizeof *parts);
  uint64_t rng = 0x9e3779b9u;
  for (size_t i = 0; i < in_n; i++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((double)(rng >> 11) * 0x1.0p-53);
  }
  for (size_t i = 0; i < out_n; i++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    dy[i] = (float)((double)(rng >> 11) * 0x1.0p-52 - 1);
  }
  /* piece j: each sample's run of counts[j] x unit floats, one after
   * another in parts */
  acc_block in[CNN_MAX_ERROR_PIECES];
  size_t at = 0, off = 0;
  for (size_t j = 0; j < k; j++) {
    size_t run = counts[j] * unit;
    in[j] = (acc_block){(uint8_t *)(parts + off), B * run * sizeof(float)};
    for (size_t b = 0; b < B; b++)
      memcpy(parts + off + b * run, dy + b * sample + at, run * sizeof *dy);
    at += run;
    off += B * run;
  }
  assert_int_equal(at, sample);
  acc_block xin = {(uint8_t *)x, in_n * sizeof *x};
  acc_block dyin = {(uint8_t *)dy, out_n * sizeof *dy};
  backward_equal(&ps, &xin, &dyin, in, k, counts, 0);
  free(x);
  free(dy);
  free(parts);
}

static void error_pieces_equal_joined(void **state) {
  (void)state;
  uint32_t conv2[] = {7, 7, 6}, fc1[] = {333, 467}, one[] = {20};
  pieces_equal_joined(1, conv2, 3, 12 * 12); /* pool1 -> conv2 */
  pieces_equal_joined(1, one, 1, 12 * 12);
  pieces_equal_joined(3, fc1, 2, 1);         /* pool2 -> fc1 */
}

static void hostile_pieces_refused(void **state) {
  (void)state;
  stage pool1 = {1, 2, 0, 0, 0, 0}, last = {2, 3, 1, 14, 20, 0},
        mid = {2, 3, 1, 7, 14, 0}, soft = {6, 7, 0, 0, 0, 0};
  cnn_layout L = layout_of(&pool1);
  float *e = xcalloc(L.out_elems, sizeof *e);
  size_t plane = 12 * 12 * sizeof(float);
  acc_block in[17];
  for (int j = 0; j < 17; j++) in[j] = (acc_block){(uint8_t *)e, B * plane};
  uint32_t c[17] = {10, 10};
  pieces = c;
  n_pieces = 2;
  in[0].size = B * 10 * plane;
  in[1].size = B * 10 * plane - 4;
  refused(EMBER__CNN__OP__BACKWARD, &pool1, in, 2,
          "input 1 (output error piece 1)");
  refused(EMBER__CNN__OP__BACKWARD, &pool1, in, 1, "takes 2 input blocks");
  refused(EMBER__CNN__OP__FORWARD, &pool1, in, 1, "error_channels: only for");
  refused(EMBER__CNN__OP__BACKWARD, &soft, NULL, 0, "only for the BACKWARD");
  refused(EMBER__CNN__OP__BACKWARD, &mid, in, 2, "only for the BACKWARD");
  c[1] = 9; /* 19 channels: does not divide 2880 floats */
  refused(EMBER__CNN__OP__BACKWARD, &pool1, in, 2, "19 in all does not "
          "divide the output's 2880 floats per sample");
  c[1] = 0;
  refused(EMBER__CNN__OP__BACKWARD, &pool1, in, 2, "piece 1 is empty");
  c[0] = c[1] = UINT32_MAX; /* sums past 32 bits */
  refused(EMBER__CNN__OP__BACKWARD, &pool1, in, 2, "does not divide");
  for (int j = 0; j < 17; j++) c[j] = 1;
  n_pieces = 17;
  refused(EMBER__CNN__OP__BACKWARD, &pool1, in, 17, "17 pieces, at most 16");
  /* the last slice of conv2 takes them (a layer after it in slices): its
   * 50 output channels of 8 x 8 */
  c[0] = 25;
  c[1] = 25;
  n_pieces = 2;
  cnn_layout LL = layout_of(&last);
  in[0].size = in[1].size = LL.out_elems / 2 * sizeof(float);
  size_t len;
  uint8_t *pp = params(EMBER__CNN__OP__BACKWARD, &last, &len);
  void *prep = NULL;
  char err[256] = "";
  int rc = cnn()->validate(pp, len, in, 2, &prep, err, sizeof err);
  if (rc) fail_msg("the last slice with 2 pieces: %s", err);
  cnn()->release(prep);
  free(pp);
  pieces = NULL;
  n_pieces = 0;
  free(e);
}

/* pool1's BACKWARD with its output error as k addends (error_addends, as
 * the unit before conv2's OCP slices takes their parts of conv2's input
 * error) equals it with their sum made in block order, bit for bit. */
static void addends_equal_sum(void **state) {
  (void)state;
  stage ps = {1, 2, 0, 0, 0, 0};
  cnn_layout L = layout_of(&ps);
  size_t in_n = (size_t)L.in_elems, out_n = (size_t)L.out_elems;
  enum { K = 3 };
  float *x = xcalloc(in_n, sizeof *x), *sum = xcalloc(out_n, sizeof *sum);
  float *parts = xcalloc(K * out_n, sizeof *parts);
  uint64_t rng = 0x51ed27u;
  for (size_t i = 0; i < in_n; i++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    x[i] = (float)((double)(rng >> 11) * 0x1.0p-53);
  }
  acc_block in[K];
  for (size_t j = 0; j < K; j++) {
    for (size_t i = 0; i < out_n; i++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      parts[j * out_n + i] = (float)((double)(rng >> 11) * 0x1.0p-52 - 1);
      sum[i] = j ? sum[i] + parts[j * out_n + i] : parts[i];
    }
    in[j] = (acc_block){(uint8_t *)(parts + j * out_n), out_n * sizeof *x};
  }
  acc_block xin = {(uint8_t *)x, in_n * sizeof *x};
  acc_block sumin = {(uint8_t *)sum, out_n * sizeof *sum};
  backward_equal(&ps, &xin, &sumin, in, K, NULL, K);
  free(x);
  free(sum);
  free(parts);
}

static void hostile_addends_refused(void **state) {
  (void)state;
  stage pool1 = {1, 2, 0, 0, 0, 0}, mid = {2, 3, 1, 7, 14, 0},
        soft = {6, 7, 0, 0, 0, 0};
  cnn_layout L = layout_of(&pool1);
  float *e = xcalloc(L.out_elems, sizeof *e);
  acc_block in[17];
  for (int j = 0; j < 17; j++)
    in[j] = (acc_block){(uint8_t *)e, L.out_elems * sizeof *e};
  addends = 2;
  refused(EMBER__CNN__OP__BACKWARD, &pool1, in, 1, "takes 2 input blocks");
  in[1].size -= 4;
  refused(EMBER__CNN__OP__BACKWARD, &pool1, in, 2,
          "input 1 (output error addend 1)");
  in[1].size += 4;
  refused(EMBER__CNN__OP__FORWARD, &pool1, in, 1, "error_addends: only for");
  refused(EMBER__CNN__OP__BACKWARD, &soft, NULL, 0, "error_addends: only");
  refused(EMBER__CNN__OP__BACKWARD, &mid, in, 2, "error_addends: only");
  addends = 1;
  refused(EMBER__CNN__OP__BACKWARD, &pool1, in, 1, "error_addends: 1, must "
          "be 2 to 16");
  addends = 17;
  refused(EMBER__CNN__OP__BACKWARD, &pool1, in, 17, "error_addends: 17");
  uint32_t c[2] = {10, 10};
  pieces = c;
  n_pieces = 2;
  addends = 2;
  refused(EMBER__CNN__OP__BACKWARD, &pool1, in, 2, "one or the other");
  pieces = NULL;
  n_pieces = 0;
  addends = 0;
  free(e);
}

/* ---- OCP ---------------------------------------------------------------- */

/* Each OCP slice's parameter-shaped region (params or grads) against the
 * whole layer's rows c0..c1-1 and biases c0..c1-1; exact asks for equal
 * bits (INIT). */
static void expect_rows(const char *what, const acc_mut_block *whole,
                        const acc_mut_block *slices, const stage *sl,
                        size_t n, int grads, int exact) {
  size_t cnt;
  const cnn_layer *l = &cnn_net_layers(net, &cnt)[sl[0].first];
  stage ws = {sl[0].first, sl[0].first + 1, 0, 0, 0, 0};
  cnn_layout WL = layout_of(&ws);
  size_t row = (size_t)(l->weights / cnn_layer_outputs(l));
  const float *w = (const float *)(const void *)(whole->data +
                                                 (grads ? WL.grads_off
                                                        : WL.params_off));
  for (size_t k = 0; k < n; k++) {
    cnn_layout L = layout_of(&sl[k]);
    const float *got = (const float *)(const void *)(slices[k].data +
                                                     (grads ? L.grads_off
                                                            : L.params_off));
    const float *want_w = w + sl[k].c0 * row;
    const float *want_b = w + l->weights + sl[k].c0;
    assert_int_equal(L.weights, (sl[k].c1 - sl[k].c0) * row);
    assert_int_equal(L.biases, sl[k].c1 - sl[k].c0);
    char name[96];
    snprintf(name, sizeof name, "%s out [%u, %u) weights", what, sl[k].c0,
             sl[k].c1);
    if (exact) {
      assert_memory_equal(got, want_w, (size_t)L.weights * sizeof *got);
      assert_memory_equal(got + L.weights, want_b,
                          (size_t)L.biases * sizeof *got);
      continue;
    }
    expect_close(name, got, want_w, (size_t)L.weights);
    snprintf(name, sizeof name, "%s out [%u, %u) biases", what, sl[k].c0,
             sl[k].c1);
    expect_close(name, got + L.weights, want_b, (size_t)L.biases);
  }
}

/* Layer `layer` split by output channels at the bounds (bounds[0] = 0 ..
 * bounds[n] = all) against the unsplit stage, STEPS training steps. */
static void ocp_chain_equals_layer(uint32_t layer, const uint32_t *bounds,
                                   size_t n) {
  size_t cnt;
  const cnn_layer *l = &cnn_net_layers(net, &cnt)[layer];
  print_message("  layer %u (%s) in %zu output slices\n", layer,
                cnn_layer_kind_name(l->kind), n);
  stage ws = {layer, layer + 1, 0, 0, 0, 0};
  stage sl[8];
  acc_mut_block whole = new_state(&ws), st[8];
  ok_op(EMBER__CNN__OP__INIT, &ws, NULL, 0, &whole, NULL, 0);
  for (size_t k = 0; k < n; k++) {
    sl[k] = (stage){layer, layer + 1, 1, bounds[k], bounds[k + 1], 1};
    st[k] = new_state(&sl[k]);
    ok_op(EMBER__CNN__OP__INIT, &sl[k], NULL, 0, &st[k], NULL, 0);
  }
  expect_rows("INIT", &whole, st, sl, n, 0, 1);
  cnn_layout WL = layout_of(&ws);
  size_t in_n = (size_t)WL.in_elems, out_n = (size_t)WL.out_elems;
  float *x = xcalloc(in_n, sizeof *x), *dy = xcalloc(out_n, sizeof *dy);
  float *dx_sum = xcalloc(in_n, sizeof *dx_sum);
  uint64_t rng = 0x7654321u;
  for (int step = 0; step < STEPS; step++) {
    print_message("   step %d\n", step);
    random_step(x, in_n, dy, out_n, &rng);
    acc_block xin = {(uint8_t *)x, in_n * sizeof *x};
    acc_block dyin = {(uint8_t *)dy, out_n * sizeof *dy};

    /* FORWARD: the whole layer, then the chain filling in the output */
    acc_mut_block y, part[8], din[8], wdx;
    ok_op(EMBER__CNN__OP__FORWARD, &ws, &xin, 1, &whole, &y, 1);
    for (size_t k = 0; k < n; k++) {
      acc_block in[2] = {xin, {NULL, 0}};
      if (k) in[1] = (acc_block){part[k - 1].data, part[k - 1].size};
      ok_op(EMBER__CNN__OP__FORWARD, &sl[k], in, k ? 2 : 1, &st[k], &part[k],
            1);
      assert_int_equal(part[k].size, out_n * sizeof(float));
    }
    expect_close("FORWARD output", floats(&part[n - 1]), floats(&y), out_n);

    /* BACKWARD: every slice reads the same output error; the input
     * error (after layer 0) is the sum of their parts */
    wdx.data = NULL;
    ok_op(EMBER__CNN__OP__BACKWARD, &ws, &dyin, 1, &whole, &wdx, layer ? 1 : 0);
    memset(dx_sum, 0, in_n * sizeof *dx_sum);
    for (size_t k = 0; k < n; k++) {
      din[k].data = NULL;
      ok_op(EMBER__CNN__OP__BACKWARD, &sl[k], &dyin, 1, &st[k], &din[k],
            layer ? 1 : 0);
      if (!layer) continue;
      assert_int_equal(din[k].size, in_n * sizeof(float));
      for (size_t i = 0; i < in_n; i++) dx_sum[i] += floats(&din[k])[i];
    }
    if (layer)
      expect_close("BACKWARD input error", dx_sum, floats(&wdx), in_n);
    expect_rows("gradients", &whole, st, sl, n, 1, 0);

    ok_op(EMBER__CNN__OP__UPDATE, &ws, NULL, 0, &whole, NULL, 0);
    for (size_t k = 0; k < n; k++)
      ok_op(EMBER__CNN__OP__UPDATE, &sl[k], NULL, 0, &st[k], NULL, 0);
    expect_rows("UPDATE", &whole, st, sl, n, 0, 0);

    free(y.data);
    free(wdx.data);
    for (size_t k = 0; k < n; k++) {
      free(part[k].data);
      free(din[k].data);
    }
  }
  free(x);
  free(dy);
  free(dx_sum);
  free(whole.data);
  for (size_t k = 0; k < n; k++) free(st[k].data);
}

static void conv1_in_output_slices(void **state) {
  (void)state;
  const uint32_t two[] = {0, 9, 20}, three[] = {0, 1, 13, 20};
  ocp_chain_equals_layer(0, two, 2);
  ocp_chain_equals_layer(0, three, 3);
}

static void conv2_and_fc1_in_output_slices(void **state) {
  (void)state;
  const uint32_t conv2[] = {0, 20, 50}, fc1[] = {0, 100, 333, 500};
  ocp_chain_equals_layer(2, conv2, 2);
  ocp_chain_equals_layer(4, fc1, 3);
}

static void hostile_ocp_refused(void **state) {
  (void)state;
  const Ember__Cnn__Op init = EMBER__CNN__OP__INIT;
  stage beyond = {0, 1, 1, 0, 21, 1}, fc_beyond = {4, 5, 1, 400, 501, 1},
        pool = {1, 2, 1, 0, 1, 1}, two = {0, 2, 1, 0, 7, 1},
        empty = {0, 1, 1, 5, 5, 1}, bare = {0, 1, 0, 0, 0, 1};
  refused(init, &beyond, NULL, 0, "channels [0, 21) not a non-empty range "
          "of layer 0's 20 output channels");
  refused(init, &fc_beyond, NULL, 0, "of layer 4's 500 output values");
  refused(init, &pool, NULL, 0, "an OCP slice splits a convolutional");
  refused(init, &two, NULL, 0, "is one layer, not layers [0, 2)");
  refused(init, &empty, NULL, 0, "not a non-empty range");
  refused(init, &bare, NULL, 0, "channel_begin is missing");

  /* blocks: the previous slice's output is input 1 from the second on */
  stage first = {0, 1, 1, 0, 10, 1}, second = {0, 1, 1, 10, 20, 1};
  cnn_layout L = layout_of(&second);
  float *x = xcalloc(L.in_elems + L.out_elems, sizeof *x);
  acc_block in[2] = {{(uint8_t *)x, L.in_elems * sizeof *x},
                     {(uint8_t *)x, L.out_elems * sizeof *x - 4}};
  refused(EMBER__CNN__OP__FORWARD, &second, in, 1,
          "output channels [10, 20) takes 2 input blocks, not 1");
  refused(EMBER__CNN__OP__FORWARD, &second, in, 2,
          "input 1 (the previous slice's output)");
  refused(EMBER__CNN__OP__BACKWARD, &second, &in[1], 1,
          "input 0 (output error)");

  /* an OCP block is not an ICP one, nor another range's */
  acc_mut_block st = new_state(&first);
  ok_op(init, &first, NULL, 0, &st, NULL, 0);
  char err[256] = "";
  assert_int_equal(layout_of(&first).total, L.total);
  int rc = run_op(EMBER__CNN__OP__UPDATE, &second, NULL, 0, &st, NULL, 0,
                  err, sizeof err);
  assert_int_equal(rc, EMBER_ESTATE);
  print_message("  run refused: %s\n", err);
  stage icp = {0, 1, 1, 0, 1, 0};
  acc_mut_block ist = new_state(&icp);
  ok_op(init, &icp, NULL, 0, &ist, NULL, 0);
  stage whole_ocp = {0, 1, 1, 0, 20, 1};
  if (layout_of(&whole_ocp).total == ist.size) {
    rc = run_op(EMBER__CNN__OP__UPDATE, &whole_ocp, NULL, 0, &ist, NULL, 0,
                err, sizeof err);
    assert_int_equal(rc, EMBER_ESTATE);
  }
  free(ist.data);
  free(st.data);
  free(x);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(conv2_in_2_and_3_slices),
      cmocka_unit_test(fc1_in_2_slices),
      cmocka_unit_test(conv1_as_one_slice),
      cmocka_unit_test(hostile_ranges_refused),
      cmocka_unit_test(error_pieces_equal_joined),
      cmocka_unit_test(addends_equal_sum),
      cmocka_unit_test(hostile_addends_refused),
      cmocka_unit_test(hostile_pieces_refused),
      cmocka_unit_test(conv1_in_output_slices),
      cmocka_unit_test(conv2_and_fc1_in_output_slices),
      cmocka_unit_test(hostile_ocp_refused),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
