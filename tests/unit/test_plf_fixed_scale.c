/*
 * test_plf_fixed_scale.c - the plf accelerator's fixed scaling
 * (PartialsOp.scale_read, BEAGLE's destinationScaleRead), through
 * plf_task_prepare and plf_exec_run on a host state block:
 *   - an update that reads the factors another update wrote gives the
 *     rescaled partials (every category), in double and single precision;
 *   - by partition, only the partition's patterns are divided;
 *   - a scale buffer to read past the instance's is refused (EMBER_EPARAM),
 *     and so is a cumulative buffer that is also the one read.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ember/ember_errors.h"
#include "plf_exec.h"
#include "plf_task.h"

#define S 4
#define P 5
#define C 2

/* ---- building a task ----------------------------------------------------- */

typedef struct task_builder {
  Ember__Plf__Instance inst;
  Ember__Plf__Op ops[16];
  Ember__Plf__Op *op_ptrs[16];
  size_t n;
  /* payloads */
  Ember__Plf__SetPartials sp[4];
  Ember__Plf__SetMatrix sm;
  Ember__Plf__UpdatePartials up[4];
  Ember__Plf__PartialsOp po[4];
  Ember__Plf__PartialsOp *po_ptrs[4];
  Ember__Plf__SetPartitions parts;
  Ember__Plf__Get get[4];
  size_t n_sp, n_up, n_get;
} task_builder;

static double tip0[P * S], tip1[P * S], zeros[C * P * S], mat[C * S * S];
static uint32_t part_of[P] = {0, 0, 0, 1, 1};

static void tb_init(task_builder *b, int single) {
  memset(b, 0, sizeof *b);
  ember__plf__instance__init(&b->inst);
  b->inst.states = S;
  b->inst.patterns = P;
  b->inst.has_categories = 1;
  b->inst.categories = C;
  b->inst.tips = 2;
  b->inst.partials = 4;
  b->inst.matrices = 1;
  b->inst.has_scale_buffers = 1;
  b->inst.scale_buffers = 2;
  b->inst.has_partitions = 1;
  b->inst.partitions = 2;
  b->inst.has_precision = 1;
  b->inst.precision = single ? EMBER__PLF__PRECISION__SINGLE
                             : EMBER__PLF__PRECISION__DOUBLE;
}

static Ember__Plf__Op *tb_op(task_builder *b) {
  Ember__Plf__Op *op = &b->ops[b->n];
  ember__plf__op__init(op);
  b->op_ptrs[b->n++] = op;
  return op;
}

static void tb_partials(task_builder *b, uint32_t buffer, double *v,
                        size_t n, int tip) {
  Ember__Plf__SetPartials *m = &b->sp[b->n_sp++];
  ember__plf__set_partials__init(m);
  m->buffer = buffer;
  m->n_values = n;
  m->values = v;
  m->has_tip = 1;
  m->tip = tip;
  Ember__Plf__Op *op = tb_op(b);
  op->op_case = EMBER__PLF__OP__OP_PARTIALS;
  op->partials = m;
}

static void tb_matrix(task_builder *b) {
  ember__plf__set_matrix__init(&b->sm);
  b->sm.matrix = 0;
  b->sm.n_values = C * S * S;
  b->sm.values = mat;
  Ember__Plf__Op *op = tb_op(b);
  op->op_case = EMBER__PLF__OP__OP_MATRIX;
  op->matrix = &b->sm;
}

static void tb_update(task_builder *b, uint32_t dest, int write, int read,
                      int cumulative, int partition) {
  Ember__Plf__PartialsOp *o = &b->po[b->n_up];
  ember__plf__partials_op__init(o);
  o->dest = dest;
  o->child1 = 0;
  o->child2 = 1;
  o->matrix1 = o->matrix2 = 0;
  o->scale_write = write;
  o->scale_read = read;
  o->cumulative_scale = cumulative;
  o->partition = partition;
  o->has_scale_write = o->has_scale_read = o->has_cumulative_scale = 1;
  o->has_partition = 1;
  b->po_ptrs[b->n_up] = o;
  Ember__Plf__UpdatePartials *m = &b->up[b->n_up];
  ember__plf__update_partials__init(m);
  m->n_ops = 1;
  m->ops = &b->po_ptrs[b->n_up];
  b->n_up++;
  Ember__Plf__Op *op = tb_op(b);
  op->op_case = EMBER__PLF__OP__OP_UPDATE_PARTIALS;
  op->update_partials = m;
}

static void tb_partitions(task_builder *b) {
  ember__plf__set_partitions__init(&b->parts);
  b->parts.n_of = P;
  b->parts.of = part_of;
  Ember__Plf__Op *op = tb_op(b);
  op->op_case = EMBER__PLF__OP__OP_PARTITIONS;
  op->partitions = &b->parts;
}

static void tb_get(task_builder *b, Ember__Plf__Get__Kind kind, uint32_t i) {
  Ember__Plf__Get *m = &b->get[b->n_get++];
  ember__plf__get__init(m);
  m->kind = kind;
  m->has_index = 1;
  m->index = i;
  Ember__Plf__Op *op = tb_op(b);
  op->op_case = EMBER__PLF__OP__OP_GET;
  op->get = m;
}

/* Pack, prepare and run on state (zeroed when fresh); values gets the Get
 * ops' answers. Returns plf_task_prepare's code. */
static int tb_run(task_builder *b, uint8_t **state, double *values) {
  Ember__Plf__Params p = EMBER__PLF__PARAMS__INIT;
  p.instance = &b->inst;
  p.n_ops = b->n;
  p.ops = b->op_ptrs;
  size_t len = ember__plf__params__get_packed_size(&p);
  uint8_t *buf = malloc(len);
  assert_non_null(buf);
  ember__plf__params__pack(&p, buf);
  plf_task *t;
  char err[256];
  int rc = plf_task_prepare(buf, len, NULL, 0, &t, err, sizeof err);
  free(buf);
  if (rc) return rc;
  if (!*state) *state = calloc(1, (size_t)t->layout.total);
  assert_non_null(*state);
  plf_answers a = {0};
  a.lnl = calloc(1, sizeof(double));
  a.site_lnl = calloc(1, sizeof(double));
  a.values = values;
  rc = plf_exec_run(t, *state, NULL, NULL, NULL, &a, err, sizeof err);
  if (rc) fail_msg("plf_exec_run: %s", err);
  free(a.lnl);
  free(a.site_lnl);
  plf_task_free(t);
  return 0;
}

static void setup_data(void) {
  for (int i = 0; i < P * S; i++) {
    tip0[i] = 1e-3 * (1 + (i * 7) % 11);
    tip1[i] = 1e-2 * (1 + (i * 5) % 13);
  }
  for (int c = 0; c < C; c++)
    for (int i = 0; i < S; i++)
      for (int j = 0; j < S; j++)
        mat[(c * S + i) * S + j] = i == j ? 0.7 - 0.1 * c : (0.3 + 0.1 * c) / 3;
}

/* ---- cases ---------------------------------------------------------------- */

static void fixed_scaling(int single) {
  setup_data();
  task_builder b;
  tb_init(&b, single);
  tb_partials(&b, 0, tip0, P * S, 1);
  tb_partials(&b, 1, tip1, P * S, 1);
  tb_matrix(&b);
  tb_update(&b, 2, 0, -1, -1, -1);   /* rescaled, factors into buffer 0 */
  tb_update(&b, 3, -1, 0, -1, -1);   /* divided by buffer 0's factors */
  tb_get(&b, EMBER__PLF__GET__KIND__PARTIALS, 2);
  tb_get(&b, EMBER__PLF__GET__KIND__PARTIALS, 3);
  tb_get(&b, EMBER__PLF__GET__KIND__SCALE, 0);
  uint8_t *state = NULL;
  double v[2 * C * P * S + P];
  assert_int_equal(tb_run(&b, &state, v), 0);
  const double *rescaled = v, *fixed = v + C * P * S, *scale = v + 2 * C * P * S;
  double tol = single ? 2e-7 : 1e-15;
  for (int p = 0; p < P; p++) {
    /* a real rescale happened: the pattern's largest is 1, factor < 0 */
    double m = 0;
    for (int c = 0; c < C; c++)
      for (int s = 0; s < S; s++) m = fmax(m, rescaled[(c * P + p) * S + s]);
    assert_true(fabs(m - 1) <= tol);
    assert_true(scale[p] < -1);
    for (int c = 0; c < C; c++)
      for (int s = 0; s < S; s++) {
        size_t i = (size_t)(c * P + p) * S + s;
        if (fabs(fixed[i] - rescaled[i]) > 4 * tol * fabs(rescaled[i]))
          fail_msg("pattern %d category %d state %d: %.17g, rescaled %.17g",
                   p, c, s, fixed[i], rescaled[i]);
      }
  }

  /* by partition: buffer 3 zeroed, then partition 1 (patterns 3, 4) only */
  tb_init(&b, single);
  tb_partitions(&b);
  tb_partials(&b, 3, zeros, C * P * S, 0);
  tb_update(&b, 3, -1, 0, -1, 1);
  tb_get(&b, EMBER__PLF__GET__KIND__PARTIALS, 3);
  assert_int_equal(tb_run(&b, &state, v), 0);
  for (int c = 0; c < C; c++)
    for (int p = 0; p < P; p++)
      for (int s = 0; s < S; s++) {
        size_t i = (size_t)(c * P + p) * S + s;
        double want = part_of[p] == 1 ? rescaled[i] : 0;
        if (fabs(v[i] - want) > 4 * tol * fabs(want))
          fail_msg("by partition, pattern %d: %.17g, want %.17g", p, v[i],
                   want);
      }
  free(state);
}

static void test_fixed_scaling_double(void **unused) {
  (void)unused;
  fixed_scaling(0);
}

static void test_fixed_scaling_single(void **unused) {
  (void)unused;
  fixed_scaling(1);
}

static void test_refused(void **unused) {
  (void)unused;
  setup_data();
  task_builder b;
  uint8_t *state = NULL;
  double v[1];
  tb_init(&b, 0);
  tb_update(&b, 2, -1, 2, -1, -1);   /* scale buffer 2 of 2 */
  assert_int_equal(tb_run(&b, &state, v), EMBER_EPARAM);
  tb_init(&b, 0);
  tb_update(&b, 2, 0, 1, 1, -1);     /* cumulative 1 is also read */
  assert_int_equal(tb_run(&b, &state, v), EMBER_EPARAM);
  free(state);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fixed_scaling_double),
      cmocka_unit_test(test_fixed_scaling_single),
      cmocka_unit_test(test_refused),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
