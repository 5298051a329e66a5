/* test_plf_task - the plf descriptor: its calibration tasks run on a
 * scratch instance and on a state block and agree (threads, precision);
 * a two-taxon Jukes-Cantor instance gives the closed-form log-likelihood;
 * every kind of bad operation is refused at validate with a reason, and
 * plan() checks the state block's size; states-only tips shrink the
 * partials region, change no result, and are refused where they have no
 * partials. */
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
#include "accelerators/plf/plf.pb-c.h"
#include "ember/ember_errors.h"
#include "plf_layout.h"

static const acc_descriptor *plf(void) {
  const acc_descriptor *d = acc_registry_find("plf");
  assert_non_null(d);
  return d;
}

/* validate + plan + run_cpu; the task's lnl values into lnl (at most n).
 * state: NULL runs on scratch. Returns how many lnl values came. */
static size_t run(const uint8_t *params, size_t len, const acc_block *in,
                  size_t n_in, acc_mut_block *state, double *lnl, size_t n) {
  const acc_descriptor *d = plf();
  void *prep = NULL;
  char err[256] = "";
  int rc = d->validate(params, len, in, n_in, &prep, err, sizeof err);
  if (rc) fail_msg("validate: %s", err);
  size_t size = state ? state->size : 0;
  acc_task_shape shape = {0, state ? &size : NULL, state ? 1 : 0};
  acc_task_plan plan;
  assert_int_equal(acc_plan_task(d, prep, &shape, 0, &plan, err, sizeof err),
                   0);
  assert_true(plan.cost.ops > 0 && plan.cost.bytes_read > 0);
  acc_run_ctx ctx = {0};
  uint8_t *scratch = NULL;
  if (state) {
    ctx.states = state;
    ctx.n_states = 1;
  } else {
    scratch = malloc(plan.scratch_size);
    assert_non_null(scratch);
    memset(scratch, 0xa5, plan.scratch_size); /* run_cpu zeroes it */
    ctx.scratch.data = scratch;
    ctx.scratch.size = plan.scratch_size;
  }
  acc_output out = {0};
  rc = d->run_cpu(prep, in, n_in, &ctx, &out, err, sizeof err);
  if (rc) fail_msg("run_cpu: %s", err);
  Ember__Plf__Result *r = ember__plf__result__unpack(NULL, out.size, out.data);
  assert_non_null(r);
  assert_false(r->has_non_finite);
  size_t got = r->n_lnl < n ? r->n_lnl : n;
  memcpy(lnl, r->lnl, got * sizeof *lnl);
  ember__plf__result__free_unpacked(r, NULL);
  free(out.data);
  free(scratch);
  d->release(prep);
  return got;
}

static void probes_run(void **state) {
  (void)state;
  for (unsigned size = 0; size < ACC_PROBE_SIZES; size++) {
    acc_probe p;
    assert_int_equal(plf()->make_probe(size, &p), 0);
    double a, b;
    assert_int_equal(run(p.params, p.params_len, p.inputs, p.n_inputs, NULL,
                         &a, 1), 1);
    assert_true(isfinite(a) && a < 0);
    /* the same on threads over patterns */
    Ember__Plf__Params *m = ember__plf__params__unpack(NULL, p.params_len,
                                                       p.params);
    m->has_threads = 1;
    m->threads = 3;
    uint8_t *buf = malloc(ember__plf__params__get_packed_size(m));
    size_t len = ember__plf__params__pack(m, buf);
    assert_int_equal(run(buf, len, p.inputs, p.n_inputs, NULL, &b, 1), 1);
    assert_true(a == b);   /* sums kept per pattern block: no thread
                              count changes them */
    /* and single precision, close */
    m->instance->precision = EMBER__PLF__PRECISION__SINGLE;
    len = ember__plf__params__pack(m, buf);
    assert_int_equal(run(buf, len, p.inputs, p.n_inputs, NULL, &b, 1), 1);
    assert_true(fabs(a - b) <= 1e-5 * fabs(a));
    free(buf);
    ember__plf__params__free_unpacked(m, NULL);
    free(p.params);
    free((void *)p.inputs[0].data);
  }
}

/* Two taxa, Jukes-Cantor, one edge of length t split at the root as t/2
 * and t/2: a site with equal states has probability 1/4 (1/4 + 3/4 e^-4t/3),
 * unequal 1/4 (1/4 - 1/4 e^-4t/3). Patterns: AA, AC, GG with weights 3, 2, 1.
 * Run twice on one state block: the second task only updates matrices
 * and partials on what the first left there. */
enum { P = 3 };

static void jc_eigen(double vec[16], double inv[16], double val[4]) {
  static const double h[4][4] = {
      {0.5, 0.5, 0.5, 0.5}, {1, -1, 0, 0}, {1, 1, -2, 0}, {1, 1, 1, -3}};
  static const double norm[4] = {1, 1.4142135623730951, 2.449489742783178,
                                 3.4641016151377544};
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < 4; i++) {
      vec[i * 4 + k] = h[k][i] / norm[k];
      inv[k * 4 + i] = vec[i * 4 + k];
    }
  val[0] = 0;
  val[1] = val[2] = val[3] = -4.0 / 3.0;
}

typedef struct builder {
  Ember__Plf__Op ops[16];
  Ember__Plf__Op *list[16];
  size_t n;
} builder;

static Ember__Plf__Op *add(builder *b) {
  ember__plf__op__init(&b->ops[b->n]);
  b->list[b->n] = &b->ops[b->n];
  return &b->ops[b->n++];
}

static size_t pack(builder *b, Ember__Plf__Instance *in, uint8_t *buf) {
  Ember__Plf__Params p = EMBER__PLF__PARAMS__INIT;
  p.instance = in;
  p.n_ops = b->n;
  p.ops = b->list;
  assert_true(ember__plf__params__get_packed_size(&p) < 4096);
  return ember__plf__params__pack(&p, buf);
}

static void instance(Ember__Plf__Instance *in) {
  ember__plf__instance__init(in);
  in->states = 4;
  in->patterns = P;
  in->tips = 2;
  in->partials = 3;
  in->has_compact = 1;
  in->compact = 2;
  in->matrices = 2;
}

static double jc_expected(double t) {
  double e = exp(-4.0 * t / 3.0);
  double same = 0.25 * (0.25 + 0.75 * e), diff = 0.25 * (0.25 - 0.25 * e);
  return 3 * log(same) + 2 * log(diff) + 1 * log(same);
}

/* The ops that compute the lnl for edge length t (matrices, partials,
 * root), appended to b. */
static void score_ops(builder *b, double t, Ember__Plf__UpdateMatrices *um,
                      uint32_t mats[2], double lens[2],
                      Ember__Plf__UpdatePartials *up,
                      Ember__Plf__PartialsOp *po, Ember__Plf__PartialsOp **pl,
                      Ember__Plf__Lnl *lnl, Ember__Plf__LnlTerm *term,
                      Ember__Plf__LnlTerm **tl) {
  ember__plf__update_matrices__init(um);
  mats[0] = 0;
  mats[1] = 1;
  lens[0] = lens[1] = t / 2;
  um->n_matrices = um->n_lengths = 2;
  um->matrices = mats;
  um->lengths = lens;
  add(b)->op_case = EMBER__PLF__OP__OP_UPDATE_MATRICES;
  b->ops[b->n - 1].update_matrices = um;
  ember__plf__partials_op__init(po);
  po->dest = 2;
  po->child1 = 0;
  po->matrix1 = 0;
  po->child2 = 1;
  po->matrix2 = 1;
  pl[0] = po;
  ember__plf__update_partials__init(up);
  up->n_ops = 1;
  up->ops = pl;
  add(b)->op_case = EMBER__PLF__OP__OP_UPDATE_PARTIALS;
  b->ops[b->n - 1].update_partials = up;
  ember__plf__lnl_term__init(term);
  term->buffer = 2;
  tl[0] = term;
  ember__plf__lnl__init(lnl);
  lnl->n_terms = 1;
  lnl->terms = tl;
  add(b)->op_case = EMBER__PLF__OP__OP_LNL;
  b->ops[b->n - 1].lnl = lnl;
}

/* The two tasks on an instance whose first k tips hold states only;
 * got[0] and got[1] get their log-likelihoods. */
static void two_taxa(uint32_t k, double got[2]) {
  Ember__Plf__Instance in;
  instance(&in);
  in.has_states_only_tips = k > 0;
  in.states_only_tips = k;
  plf_shape s = {4, P, 1, 2, 3, 2, 1, 2, 0, 1, 1, 0, k};
  plf_layout l;
  char err[128];
  assert_int_equal(plf_layout_compute(&s, &l, err, sizeof err), 0);
  acc_mut_block st = {calloc(1, l.total), l.total};

  builder b = {0};
  int32_t tips[2][P] = {{0, 0, 2}, {0, 1, 2}};
  Ember__Plf__SetTipStates ts[2];
  for (int i = 0; i < 2; i++) {
    ember__plf__set_tip_states__init(&ts[i]);
    ts[i].tip = (uint32_t)i;
    ts[i].has_states = 1;
    ts[i].states.data = (uint8_t *)tips[i];
    ts[i].states.len = sizeof tips[i];
    add(&b)->op_case = EMBER__PLF__OP__OP_TIP_STATES;
    b.ops[b.n - 1].tip_states = &ts[i];
  }
  double vec[16], inv[16], val[4], freqs[4] = {.25, .25, .25, .25};
  double one[1] = {1}, weights[P] = {3, 2, 1};
  jc_eigen(vec, inv, val);
  Ember__Plf__SetEigen eg = EMBER__PLF__SET_EIGEN__INIT;
  eg.n_vectors = eg.n_inverse = 16;
  eg.vectors = vec;
  eg.inverse = inv;
  eg.n_values = 4;
  eg.values = val;
  add(&b)->op_case = EMBER__PLF__OP__OP_EIGEN;
  b.ops[b.n - 1].eigen = &eg;
  Ember__Plf__SetVector v[4];
  const Ember__Plf__SetVector__Kind kinds[4] = {
      EMBER__PLF__SET_VECTOR__KIND__FREQUENCIES,
      EMBER__PLF__SET_VECTOR__KIND__CATEGORY_WEIGHTS,
      EMBER__PLF__SET_VECTOR__KIND__CATEGORY_RATES,
      EMBER__PLF__SET_VECTOR__KIND__PATTERN_WEIGHTS};
  double *values[4] = {freqs, one, one, weights};
  const size_t counts[4] = {4, 1, 1, P};
  for (int i = 0; i < 4; i++) {
    ember__plf__set_vector__init(&v[i]);
    v[i].kind = kinds[i];
    v[i].n_values = counts[i];
    v[i].values = values[i];
    add(&b)->op_case = EMBER__PLF__OP__OP_VECTOR;
    b.ops[b.n - 1].vector = &v[i];
  }
  Ember__Plf__UpdateMatrices um;
  uint32_t mats[2];
  double lens[2];
  Ember__Plf__UpdatePartials up;
  Ember__Plf__PartialsOp po, *pl[1];
  Ember__Plf__Lnl lnl;
  Ember__Plf__LnlTerm term, *tl[1];
  score_ops(&b, 0.3, &um, mats, lens, &up, &po, pl, &lnl, &term, tl);
  uint8_t buf[4096];
  size_t len = pack(&b, &in, buf);
  assert_int_equal(run(buf, len, NULL, 0, &st, &got[0], 1), 1);
  assert_true(fabs(got[0] - jc_expected(0.3)) <= 1e-12 * fabs(got[0]));

  /* the second task: only the new edge length, on what the state holds */
  builder b2 = {0};
  score_ops(&b2, 0.05, &um, mats, lens, &up, &po, pl, &lnl, &term, tl);
  len = pack(&b2, &in, buf);
  assert_int_equal(run(buf, len, NULL, 0, &st, &got[1], 1), 1);
  assert_true(fabs(got[1] - jc_expected(0.05)) <= 1e-12 * fabs(got[1]));
  free(st.data);
}

static void two_taxa_closed_form(void **state) {
  (void)state;
  double got[2];
  two_taxa(0, got);
}

/* States-only tips: the partials region holds partials - K buffers, buffer
 * b >= K at b - K, and the same tasks give the same log-likelihoods. */
static void states_only_tips(void **state) {
  (void)state;
  plf_shape s = {4, 1000, 4, 3, 5, 3, 1, 9, 0, 1, 1, 0, 0};
  plf_layout l0, l;
  char err[128];
  assert_int_equal(plf_layout_compute(&s, &l0, err, sizeof err), 0);
  for (uint32_t k = 1; k <= 3; k++) {
    s.states_only = k;
    assert_int_equal(plf_layout_compute(&s, &l, err, sizeof err), 0);
    uint64_t stride = l.partials_stride; /* 4 x 1000 x 4 doubles */
    assert_int_equal(stride, 128000);
    assert_int_equal(l.tip_states - l.partials, (5 - k) * stride);
    assert_int_equal(l0.total - l.total, k * stride);
    assert_int_equal(plf_partials_at(&l, k), l.partials);
    assert_int_equal(plf_partials_at(&l, 4), l.partials + (4 - k) * stride);
    assert_int_equal(plf_partials_at(&l0, 4), l0.partials + 4 * stride);
  }
  s.states_only = 4; /* more than compact */
  assert_int_equal(plf_layout_compute(&s, &l, err, sizeof err),
                   EMBER_EPARAM);
  if (!strstr(err, "states-only tips 4 is outside 0..3"))
    fail_msg("error '%s'", err);

  double want[2], got[2];
  two_taxa(0, want);
  for (uint32_t k = 1; k <= 2; k++) {
    two_taxa(k, got);
    if (got[0] != want[0] || got[1] != want[1])
      fail_msg("K = %u: %.17g %.17g, K = 0: %.17g %.17g", k, got[0], got[1],
               want[0], want[1]);
  }
}

/* validate and plan accept p; run_cpu fails with EPARAM and a message
 * containing want. */
static void run_refused(const uint8_t *params, size_t len,
                        acc_mut_block *state, const char *want) {
  const acc_descriptor *d = plf();
  void *prep = NULL;
  char err[256] = "";
  if (d->validate(params, len, NULL, 0, &prep, err, sizeof err))
    fail_msg("validate: %s", err);
  acc_run_ctx ctx = {0};
  ctx.states = state;
  ctx.n_states = 1;
  acc_output out = {0};
  int rc = d->run_cpu(prep, NULL, 0, &ctx, &out, err, sizeof err);
  if (rc != EMBER_EPARAM || !strstr(err, want))
    fail_msg("want EPARAM '%s', got %d '%s'", want, rc, err);
  free(out.data);
  d->release(prep);
}

/* A states-only tip read before its states are set fails at run time
 * (validate cannot know what the block holds); set, it is read. */
static void unset_states_only_tip(void **state) {
  (void)state;
  Ember__Plf__Instance in;
  instance(&in);
  in.has_states_only_tips = 1;
  in.states_only_tips = 2;
  plf_shape s = {4, P, 1, 2, 3, 2, 1, 2, 0, 1, 1, 0, 2};
  plf_layout l;
  char err[128];
  assert_int_equal(plf_layout_compute(&s, &l, err, sizeof err), 0);
  acc_mut_block st = {calloc(1, l.total), l.total};
  builder b = {0};
  int32_t tip[P] = {0, 1, 2};
  Ember__Plf__SetTipStates ts = EMBER__PLF__SET_TIP_STATES__INIT;
  ts.tip = 0;
  ts.has_states = 1;
  ts.states.data = (uint8_t *)tip;
  ts.states.len = sizeof tip;
  add(&b)->op_case = EMBER__PLF__OP__OP_TIP_STATES;
  b.ops[b.n - 1].tip_states = &ts;
  Ember__Plf__UpdateMatrices um;
  uint32_t mats[2];
  double lens[2];
  Ember__Plf__UpdatePartials up;
  Ember__Plf__PartialsOp po, *pl[1];
  Ember__Plf__Lnl lnl;
  Ember__Plf__LnlTerm term, *tl[1];
  score_ops(&b, 0.3, &um, mats, lens, &up, &po, pl, &lnl, &term, tl);
  uint8_t buf[4096];
  size_t len = pack(&b, &in, buf);
  run_refused(buf, len, &st, "tip 1 holds states only (no partials) and "
              "its states are not set");
  /* an edge log-likelihood from buffer 2 to the unset tip 1 as well */
  builder b2 = {0};
  Ember__Plf__LnlTerm edge = EMBER__PLF__LNL_TERM__INIT, *el[1] = {&edge};
  edge.buffer = 2;
  edge.has_child = edge.has_matrix = 1;
  edge.child = 1;
  edge.matrix = 1;
  Ember__Plf__Lnl elnl = EMBER__PLF__LNL__INIT;
  elnl.n_terms = 1;
  elnl.terms = el;
  add(&b2)->op_case = EMBER__PLF__OP__OP_LNL;
  b2.ops[0].lnl = &elnl;
  len = pack(&b2, &in, buf);
  run_refused(buf, len, &st, "tip 1 holds states only");
  free(st.data);
}

/* validate refuses p (a Params with instance in and the one op) with
 * EPARAM and a message containing want. */
static void refused(Ember__Plf__Instance *in, Ember__Plf__Op *op,
                    const acc_block *inputs, size_t n_in, const char *want) {
  Ember__Plf__Params p = EMBER__PLF__PARAMS__INIT;
  p.instance = in;
  p.n_ops = op ? 1 : 0;
  p.ops = &op;
  uint8_t buf[4096];
  size_t len = ember__plf__params__pack(&p, buf);
  void *prep = NULL;
  char err[256] = "";
  int rc = plf()->validate(buf, len, inputs, n_in, &prep, err, sizeof err);
  if (rc != EMBER_EPARAM || !strstr(err, want))
    fail_msg("want EPARAM '%s', got %d '%s'", want, rc, err);
  assert_null(prep);
}

static void bad_tasks_refused(void **state) {
  (void)state;
  Ember__Plf__Instance in;
  instance(&in);
  /* the instance itself */
  in.states = 1;
  refused(&in, NULL, NULL, 0, "states 1 is outside");
  in.states = 4;
  in.tips = 4;
  refused(&in, NULL, NULL, 0, "tips 4 is outside");
  in.tips = 2;
  in.patterns = 1u << 30;
  refused(&in, NULL, NULL, 0, "patterns");
  in.patterns = P;
  /* not a Params message at all */
  void *prep = NULL;
  char err[128] = "";
  static const uint8_t junk[] = {0xff, 0xff, 0xff};
  assert_int_equal(plf()->validate(junk, sizeof junk, NULL, 0, &prep, err,
                                   sizeof err), EMBER_EPARAM);

  Ember__Plf__Op op = EMBER__PLF__OP__INIT;
  Ember__Plf__SetTipStates ts = EMBER__PLF__SET_TIP_STATES__INIT;
  int32_t states[P] = {0};
  op.op_case = EMBER__PLF__OP__OP_TIP_STATES;
  op.tip_states = &ts;
  ts.tip = 2;
  ts.has_states = 1;
  ts.states.data = (uint8_t *)states;
  ts.states.len = sizeof states;
  refused(&in, &op, NULL, 0, "compact tip 2 out of range");
  ts.tip = 0;
  ts.states.len = 8;
  refused(&in, &op, NULL, 0, "tip states: 8 bytes, not 12");
  ts.has_states = 0;
  Ember__Plf__InputSlice from = EMBER__PLF__INPUT_SLICE__INIT;
  ts.from = &from;
  acc_block small = {(const uint8_t *)states, 8};
  refused(&in, &op, &small, 1, "12 bytes at offset 0 of input 0 (8 bytes)");
  from.input = 3;
  refused(&in, &op, &small, 1, "input 3 of 1");
  ts.has_states = 1;
  ts.states.len = sizeof states;
  refused(&in, &op, &small, 1, "one of them");

  Ember__Plf__PartialsOp po = EMBER__PLF__PARTIALS_OP__INIT,
                         *pl[1] = {&po};
  Ember__Plf__UpdatePartials up = EMBER__PLF__UPDATE_PARTIALS__INIT;
  up.n_ops = 1;
  up.ops = pl;
  op.op_case = EMBER__PLF__OP__OP_UPDATE_PARTIALS;
  op.update_partials = &up;
  po.dest = 2;
  po.child1 = 2;
  refused(&in, &op, NULL, 0, "both destination and child");
  po.child1 = 7;
  refused(&in, &op, NULL, 0, "child 7 out of range");
  po.child1 = 0;
  po.matrix2 = 5;
  refused(&in, &op, NULL, 0, "matrix 5 out of range");
  po.matrix2 = 1;
  po.has_scale_write = po.has_scale_read = po.has_partition = 1;
  po.scale_write = 0; /* no scale buffers in this instance */
  refused(&in, &op, NULL, 0, "scale buffer 0 out of range");
  po.scale_write = -1;
  po.scale_read = 0; /* BEAGLE's fixed scaling, from a buffer it lacks */
  refused(&in, &op, NULL, 0, "scale buffer to read 0 out of range");
  po.scale_read = -1;
  po.partition = 1;
  refused(&in, &op, NULL, 0, "partition 1 out of range");

  Ember__Plf__UpdateMatrices um = EMBER__PLF__UPDATE_MATRICES__INIT;
  uint32_t mats[2] = {0, 1};
  double lens[2] = {0.1, -1};
  um.n_matrices = 2;
  um.matrices = mats;
  um.n_lengths = 1;
  um.lengths = lens;
  op.op_case = EMBER__PLF__OP__OP_UPDATE_MATRICES;
  op.update_matrices = &um;
  refused(&in, &op, NULL, 0, "2 matrices and 1 lengths");
  um.n_lengths = 2;
  refused(&in, &op, NULL, 0, "branch length -1");
  lens[1] = NAN;
  refused(&in, &op, NULL, 0, "branch length nan");

  Ember__Plf__SetPartitions parts = EMBER__PLF__SET_PARTITIONS__INIT;
  uint32_t of[P] = {0, 1, 0};
  in.has_partitions = 1;
  in.partitions = 2;
  parts.n_of = P;
  parts.of = of;
  op.op_case = EMBER__PLF__OP__OP_PARTITIONS;
  op.partitions = &parts;
  refused(&in, &op, NULL, 0, "not contiguous");
  of[1] = 2;
  refused(&in, &op, NULL, 0, "pattern 1 in partition 2 of 2");
  in.has_partitions = 0;

  Ember__Plf__Lnl lnl = EMBER__PLF__LNL__INIT;
  op.op_case = EMBER__PLF__OP__OP_LNL;
  op.lnl = &lnl;
  refused(&in, &op, NULL, 0, "no terms");
  Ember__Plf__LnlTerm term = EMBER__PLF__LNL_TERM__INIT, *tl[1] = {&term};
  lnl.n_terms = 1;
  lnl.terms = tl;
  term.buffer = 2;
  term.has_child = 1;
  term.child = 0;
  refused(&in, &op, NULL, 0, "both its child and its matrix");
  term.child = -1;
  term.frequencies = 1;
  refused(&in, &op, NULL, 0, "frequencies 1 out of range");

  Ember__Plf__SetVector vec = EMBER__PLF__SET_VECTOR__INIT;
  double two[2] = {1, 1};
  vec.kind = EMBER__PLF__SET_VECTOR__KIND__FREQUENCIES;
  vec.n_values = 2;
  vec.values = two;
  op.op_case = EMBER__PLF__OP__OP_VECTOR;
  op.vector = &vec;
  refused(&in, &op, NULL, 0, "frequencies: 2 values, not 4");

  /* states-only tips: at most compact, and no op writes their partials
   * or reads them as a root */
  in.has_states_only_tips = 1;
  in.states_only_tips = 3;
  refused(&in, NULL, NULL, 0, "states-only tips 3 is outside 0..2");
  in.states_only_tips = 2;
  double tip_values[P * 4] = {0};
  Ember__Plf__SetPartials sp = EMBER__PLF__SET_PARTIALS__INIT;
  sp.buffer = 1;
  sp.has_tip = sp.tip = 1;
  sp.n_values = P * 4;
  sp.values = tip_values;
  op.op_case = EMBER__PLF__OP__OP_PARTIALS;
  op.partials = &sp;
  refused(&in, &op, NULL, 0, "partials buffer 1 is a states-only tip "
          "(below 2): it has no partials");
  op.op_case = EMBER__PLF__OP__OP_UPDATE_PARTIALS;
  op.update_partials = &up;
  po.dest = 1;
  po.child1 = 0;
  po.child2 = 2;
  po.matrix1 = po.matrix2 = 0;
  po.has_partition = 0;
  po.partition = -1;
  refused(&in, &op, NULL, 0, "destination 1 is a states-only tip");
  op.op_case = EMBER__PLF__OP__OP_LNL;
  op.lnl = &lnl;
  term.buffer = 0;
  term.frequencies = 0;
  refused(&in, &op, NULL, 0, "buffer 0 is a states-only tip");
  Ember__Plf__Get get = EMBER__PLF__GET__INIT;
  get.kind = EMBER__PLF__GET__KIND__PARTIALS;
  get.has_index = 1;
  get.index = 1;
  op.op_case = EMBER__PLF__OP__OP_GET;
  op.get = &get;
  refused(&in, &op, NULL, 0, "buffer 1 is a states-only tip");
}

static void plan_checks_state(void **state) {
  (void)state;
  acc_probe p;
  assert_int_equal(plf()->make_probe(ACC_PROBE_SMALL, &p), 0);
  void *prep = NULL;
  char err[256] = "";
  assert_int_equal(plf()->validate(p.params, p.params_len, p.inputs,
                                   p.n_inputs, &prep, err, sizeof err), 0);
  size_t sizes[2] = {100, 100};
  acc_task_shape shape = {0, sizes, 1};
  acc_task_plan plan;
  assert_int_equal(acc_plan_task(plf(), prep, &shape, 0, &plan, err,
                                 sizeof err), EMBER_EPARAM);
  assert_non_null(strstr(err, "the state block has 100 bytes"));
  shape.n_states = 2;
  assert_int_equal(acc_plan_task(plf(), prep, &shape, 0, &plan, err,
                                 sizeof err), EMBER_EPARAM);
  shape.n_states = 0;
  shape.n_outputs = 1;
  assert_int_equal(acc_plan_task(plf(), prep, &shape, 0, &plan, err,
                                 sizeof err), EMBER_EPARAM);
  plf()->release(prep);
  free(p.params);
  free((void *)p.inputs[0].data);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(probes_run),
      cmocka_unit_test(two_taxa_closed_form),
      cmocka_unit_test(bad_tasks_refused),
      cmocka_unit_test(states_only_tips),
      cmocka_unit_test(unset_states_only_tip),
      cmocka_unit_test(plan_checks_state),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
