/* test_plf_plan.c - the planner without BEAGLE: plans are executed
 * symbolically (each buffer holds the identity of the subtree it was
 * computed for, hashed here independently of the planner) and every op,
 * matrix and root is checked against the tree; budgets, reuse across trees
 * and calls, counts, refusals and allocation failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc_fail.h"
#include "ember/ember_errors.h"
#include "plf/plf_plan.h"
#include "plf/plf_tree.h"

/* ---- trees --------------------------------------------------------------- */

static uint64_t rng_state;

static uint64_t rnd(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return rng_state >> 17;
}

static double rnd_len(void) { return (double)(rnd() % 1000 + 1) / 4096.0; }

/* shape 0: random joins; 1: caterpillar; 2: balanced */
static plf_tree *make_tree(int n, int shape, int unrooted) {
  plf_tree *t;
  assert_int_equal(plf_tree_create(n, &t), 0);
  int *pool = malloc((size_t)n * sizeof *pool);
  assert_non_null(pool);
  for (int i = 0; i < n; i++) pool[i] = i;
  int left = n, stop = unrooted ? 3 : 1;
  while (left > stop) {
    int i, j;
    if (shape == 0) {
      i = (int)(rnd() % (uint64_t)left);
      j = (int)(rnd() % (uint64_t)(left - 1));
      if (j >= i) j++;
    } else if (shape == 1) {
      i = 0;
      j = left - 1;
    } else {
      i = left - 2; /* pairs from the end, then around again */
      j = left - 1;
    }
    int v = plf_tree_join(t, pool[i], rnd_len(), pool[j], rnd_len());
    assert_true(v >= 0);
    if (shape == 2) {
      memmove(pool + 1, pool, (size_t)(left - 2) * sizeof *pool);
      pool[0] = v;
      left--;
    } else {
      pool[i] = v;
      pool[j] = pool[--left];
    }
  }
  if (unrooted)
    assert_true(plf_tree_join3(t, pool[0], rnd_len(), pool[1], rnd_len(),
                               pool[2], rnd_len()) >= 0);
  free(pool);
  assert_true(plf_tree_is_complete(t));
  return t;
}

/* ---- the symbolic executor ------------------------------------------------ */

/* ident: FNV-1a over the children's identities (in sorted order) and exact
 * branch lengths: what a buffer computed for the node holds */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++) {
    h ^= b[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

static void identities(const plf_tree *t, uint64_t *id) {
  int n = plf_tree_tip_count(t), total = 2 * n - 1;
  int *order = malloc((size_t)total * sizeof *order);
  assert_non_null(order);
  assert_int_equal(plf_tree_bottom_up(t, order), 0);
  for (int i = 0; i < total; i++) {
    int v = order[i];
    if (v < n) {
      id[v] = fnv(0xcbf29ce484222325ull, &v, sizeof v);
      continue;
    }
    uint64_t part[2];
    for (int k = 0; k < 2; k++) {
      int c = plf_tree_child(t, v, k);
      double len = plf_tree_length(t, c) + 0.0;
      part[k] = fnv(fnv(0x84222325cbf29ce4ull, &id[c], 8), &len, 8);
    }
    if (part[0] > part[1]) {
      uint64_t x = part[0];
      part[0] = part[1];
      part[1] = x;
    }
    id[v] = fnv(fnv(0x1234567ull, &part[0], 8), &part[1], 8);
  }
  free(order);
}

typedef struct symbolic {
  int tips, vectors;
  uint64_t *content;  /* per partials buffer; 0: nothing */
  uint64_t *scaled;   /* per scale buffer: the subtree its sum is for */
  uint64_t *id;       /* per node of the tree being checked */
  int *mat_stamp;     /* per node: segment whose matrix update it got */
} symbolic;

static void sym_init(symbolic *s, int tips, int vectors) {
  s->tips = tips;
  s->vectors = vectors;
  s->content = calloc((size_t)(tips + vectors), sizeof *s->content);
  s->scaled = calloc((size_t)vectors, sizeof *s->scaled);
  s->id = malloc((size_t)(2 * tips - 1) * sizeof *s->id);
  s->mat_stamp = calloc((size_t)(2 * tips - 1), sizeof *s->mat_stamp);
  assert_true(s->content && s->scaled && s->id && s->mat_stamp);
}

static void sym_free(symbolic *s) {
  free(s->content);
  free(s->scaled);
  free(s->id);
  free(s->mat_stamp);
}

/* sym_run: checks and "executes" segment seg of plan for tree t */
static void sym_run(symbolic *s, const plf_plan *plan, size_t seg,
                    const plf_tree *t, int scaling) {
  const plf_plan_tree *g = &plan->trees[seg];
  int n = s->tips;
  identities(t, s->id);
  for (int v = 0; v < n; v++) s->content[v] = s->id[v];
  int stamp = (int)seg + 1;
  for (size_t i = 0; i < g->matrix_count; i++) {
    const plf_matrix_update *m = &plan->matrices[g->first_matrix + i];
    assert_in_range(m->matrix, 0, 2 * n - 2);
    assert_true(plf_tree_parent(t, m->matrix) != PLF_NONE);
    assert_true(m->length == plf_tree_length(t, m->matrix));
    assert_int_not_equal(s->mat_stamp[m->matrix], stamp); /* once */
    s->mat_stamp[m->matrix] = stamp;
  }
  for (size_t i = 0; i < g->op_count; i++) {
    const plf_op *o = &plan->ops[g->first_op + i];
    assert_in_range(o->dest, n, n + s->vectors - 1);
    assert_int_equal(o->dest_scale_read, PLF_NONE);
    int c1 = o->child1_matrix, c2 = o->child2_matrix;
    if (s->mat_stamp[c1] != stamp || s->mat_stamp[c2] != stamp)
      fail_msg("segment %zu op %zu: matrix %d or %d not updated", seg, i, c1,
               c2);
    int v = plf_tree_parent(t, c1);
    assert_int_equal(plf_tree_parent(t, c2), v);
    assert_int_not_equal(c1, c2);
    if (s->content[o->child1] != s->id[c1] ||
        s->content[o->child2] != s->id[c2])
      fail_msg("segment %zu op %zu: a child buffer (%d, %d) does not hold "
               "nodes %d, %d",
               seg, i, o->child1, o->child2, c1, c2);
    assert_true(o->child1 != o->dest && o->child2 != o->dest);
    int slot = o->dest - n;
    if (scaling) {
      assert_int_equal(o->dest_scale_write, slot);
      for (int k = 0; k < 2; k++) {
        int c = k ? o->child2 : o->child1, sc = k ? o->child2_scale
                                                  : o->child1_scale;
        if (c < n) {
          assert_int_equal(sc, PLF_NONE);
        } else {
          assert_int_equal(sc, c - n);
          assert_true(s->scaled[sc] == s->content[c]);
        }
      }
      s->scaled[slot] = s->id[v];
    } else {
      assert_int_equal(o->dest_scale_write, PLF_NONE);
      assert_int_equal(o->child1_scale, PLF_NONE);
      assert_int_equal(o->child2_scale, PLF_NONE);
    }
    s->content[o->dest] = s->id[v];
  }
  int root = plf_tree_root(t);
  assert_in_range(g->root, n, n + s->vectors - 1);
  if (s->content[g->root] != s->id[root])
    fail_msg("segment %zu: the root buffer %d does not hold the root", seg,
             g->root);
  if (scaling) {
    assert_int_equal(g->root_scale, g->root - n);
    assert_true(s->scaled[g->root_scale] == s->id[root]);
  } else {
    assert_int_equal(g->root_scale, PLF_NONE);
  }
}

/* ---- tests ---------------------------------------------------------------- */

static void test_min_vectors(void **state) {
  (void)state;
  assert_int_equal(plf_plan_min_vectors(1), EMBER_EPARAM);
  assert_int_equal(plf_plan_min_vectors(2), 3);
  assert_int_equal(plf_plan_min_vectors(3), 4);
  assert_int_equal(plf_plan_min_vectors(4), 4);
  assert_int_equal(plf_plan_min_vectors(5), 5);
  assert_int_equal(plf_plan_min_vectors(1000), 12);
  assert_int_equal(plf_plan_min_vectors(1024), 12);
  assert_int_equal(plf_plan_min_vectors(1025), 13);
  assert_int_equal(plf_plan_min_vectors(PLF_TREE_MAX_TIPS), 22);
  plf_planner *p = (plf_planner *)&p;
  assert_int_equal(plf_planner_create(1000, 11, 0, &p), EMBER_EPARAM);
  assert_null(p);
  assert_int_equal(plf_planner_create(1000, 12, 4, &p), EMBER_EPARAM);
  assert_int_equal(plf_planner_create(1, 0, 0, &p), EMBER_EPARAM);
  assert_int_equal(plf_planner_create(1000, 12, 0, &p), 0);
  assert_int_equal(plf_planner_matrices(p), 1999);
  assert_int_equal(plf_planner_vectors(p), 0);
  plf_planner_destroy(p);
  plf_planner_destroy(NULL);
}

/* every budget from unbounded to the minimum on one tree: n-1 ops, the
 * slots within the budget, the plan right */
static void check_budgets(int n, int shape, int unrooted, unsigned flags) {
  plf_tree *t = make_tree(n, shape, unrooted);
  int min = plf_plan_min_vectors(n);
  int top = n - 1 > min ? n - 1 : min;
  for (int m = 0;; m = m == 0 ? top : m / 2 < min ? min : m / 2) {
    plf_planner *p;
    plf_plan plan;
    plf_plan_init(&plan);
    assert_int_equal(plf_planner_create(n, m, flags, &p), 0);
    assert_int_equal(plf_planner_add_tree(p, t, &plan), 0);
    assert_int_equal(plan.tree_count, 1);
    if (plan.op_count != (size_t)n - 1)
      fail_msg("n=%d shape %d budget %d: %zu ops, expected %d", n, shape, m,
               plan.op_count, n - 1);
    assert_int_equal(plan.matrix_count, 2 * n - 2);
    int used = plf_planner_vectors(p);
    if (m) assert_in_range(used, 1, m);
    symbolic s;
    sym_init(&s, n, used);
    sym_run(&s, &plan, 0, t, !(flags & PLF_PLAN_NO_SCALING));
    sym_free(&s);
    plf_plan_counts c;
    plf_planner_counts(p, &c);
    assert_int_equal(c.ops, n - 1);
    assert_int_equal(c.trees, 1);
    assert_int_equal(c.hits, 0);
    assert_int_equal(c.recomputed, 0);
    plf_plan_free(&plan);
    plf_planner_destroy(p);
    if (m == min) break;
  }
  plf_tree_destroy(t);
}

static void test_budgets(void **state) {
  (void)state;
  rng_state = 1;
  static const int sizes[] = {2, 3, 4, 5, 8, 13, 64, 100, 257, 1000, 2048};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    for (int shape = 0; shape < 3; shape++)
      for (int unrooted = 0; unrooted < 2; unrooted++)
        if (sizes[i] >= 3 || !unrooted)
          check_budgets(sizes[i], shape, unrooted, 0);
  check_budgets(50, 0, 1, PLF_PLAN_NO_SCALING);
}

/* the balanced tree of 2^k taxa, the worst case, within the minimum (the
 * planner fails with EMBER_EINTERNAL if its walk ever finds every slot
 * pinned) */
static void test_balanced_minimum(void **state) {
  (void)state;
  for (int k = 1; k <= 12; k++) {
    int n = 1 << k;
    plf_tree *t = make_tree(n, 2, 0);
    plf_planner *p;
    plf_plan plan;
    plf_plan_init(&plan);
    assert_int_equal(plf_planner_create(n, plf_plan_min_vectors(n), 0, &p), 0);
    assert_int_equal(plf_planner_add_tree(p, t, &plan), 0);
    assert_int_equal(plan.op_count, n - 1);
    assert_in_range(plf_planner_vectors(p), 1, plf_plan_min_vectors(n));
    plf_plan_free(&plan);
    plf_planner_destroy(p);
    plf_tree_destroy(t);
  }
}

static int depth_of(const plf_tree *t, int v) {
  int d = 0;
  while ((v = plf_tree_parent(t, v)) != PLF_NONE) d++;
  return d;
}

static void test_reuse(void **state) {
  (void)state;
  rng_state = 7;
  int n = 60;
  plf_tree *t = make_tree(n, 0, 1);
  plf_planner *p;
  plf_plan plan;
  plf_plan_init(&plan);
  assert_int_equal(plf_planner_create(n, PLF_PLAN_UNBOUNDED, 0, &p), 0);
  assert_int_equal(plf_planner_add_tree(p, t, &plan), 0);
  /* the same tree again: its root is resident */
  assert_int_equal(plf_planner_add_tree(p, t, &plan), 0);
  assert_int_equal(plan.trees[1].op_count, 0);
  assert_int_equal(plan.trees[1].counts.hits, 1);
  assert_int_equal(plan.trees[1].root, plan.trees[0].root);
  /* one branch longer: its ancestors only */
  plf_tree *u;
  assert_int_equal(plf_tree_copy(t, &u), 0);
  int v = 17;
  assert_int_equal(plf_tree_set_length(u, v, plf_tree_length(u, v) * 2), 0);
  assert_int_equal(plf_planner_add_tree(p, u, &plan), 0);
  assert_int_equal(plan.trees[2].op_count, depth_of(u, v));
  symbolic s;
  sym_init(&s, n, plf_planner_vectors(p));
  sym_run(&s, &plan, 0, t, 1);
  sym_run(&s, &plan, 1, t, 1);
  sym_run(&s, &plan, 2, u, 1);
  sym_free(&s);
  /* refusals keep the plan and the cache */
  plf_tree *other = make_tree(n + 1, 0, 1);
  size_t ops = plan.op_count;
  assert_int_equal(plf_planner_add_tree(p, other, &plan), EMBER_EPARAM);
  plf_tree *w; /* incomplete */
  assert_int_equal(plf_tree_create(n, &w), 0);
  assert_int_equal(plf_planner_add_tree(p, w, &plan), EMBER_EPARAM);
  const plf_tree *batch[] = {t, w};
  assert_int_equal(plf_planner_add_trees(p, batch, 2, &plan), EMBER_EPARAM);
  assert_int_equal(plan.op_count, ops);
  assert_int_equal(plan.tree_count, 3);
  assert_int_equal(plf_planner_add_tree(p, u, &plan), 0);
  assert_int_equal(plan.trees[3].op_count, 0);
  /* reset forgets */
  plf_planner_reset(p);
  assert_int_equal(plf_planner_add_tree(p, u, &plan), 0);
  assert_int_equal(plan.trees[4].op_count, n - 1);
  plf_plan_counts c;
  plf_planner_counts(p, &c);
  assert_int_equal(c.trees, 5);
  assert_int_equal(c.ops, 2 * (n - 1) + depth_of(u, v));
  plf_tree_destroy(w);
  plf_tree_destroy(other);
  plf_tree_destroy(u);
  plf_tree_destroy(t);
  plf_plan_free(&plan);
  plf_planner_destroy(p);
}

static void test_mirror(void **state) {
  (void)state;
  /* ((a,b),(c,d)) and ((d,c),(b,a)) with the same lengths */
  plf_tree *t, *u;
  assert_int_equal(plf_tree_create(4, &t), 0);
  assert_int_equal(plf_tree_create(4, &u), 0);
  plf_tree_join(t, 0, 0.1, 1, 0.2);
  plf_tree_join(t, 2, 0.3, 3, 0.4);
  plf_tree_join(t, 4, 0.5, 5, 0.6);
  plf_tree_join(u, 3, 0.4, 2, 0.3);
  plf_tree_join(u, 1, 0.2, 0, 0.1);
  plf_tree_join(u, 4, 0.6, 5, 0.5);
  plf_planner *p;
  plf_plan plan;
  plf_plan_init(&plan);
  assert_int_equal(plf_planner_create(4, 4, 0, &p), 0);
  assert_int_equal(plf_planner_add_tree(p, t, &plan), 0);
  assert_int_equal(plf_planner_add_tree(p, u, &plan), 0);
  assert_int_equal(plan.trees[1].op_count, 0);
  /* the same ops whichever way the children are written */
  plf_planner_reset(p);
  assert_int_equal(plf_planner_add_tree(p, u, &plan), 0);
  for (int i = 0; i < 3; i++) {
    const plf_op *x = &plan.ops[i], *y = &plan.ops[3 + i];
    assert_int_equal(x->child1, y->child1);
    assert_int_equal(x->child2, y->child2);
  }
  plf_plan_free(&plan);
  plf_planner_destroy(p);
  plf_tree_destroy(t);
  plf_tree_destroy(u);
}

/* all NNI neighbours in one batch, and again across calls: checked
 * symbolically; fewer ops than scoring alone; recomputation only when the
 * budget is short */
static void check_nni_batch(int n, int budget_div) {
  plf_tree *t = make_tree(n, 0, 1);
  int count = plf_nni_count(t);
  plf_tree **trees = malloc((size_t)(count + 1) * sizeof *trees);
  assert_non_null(trees);
  trees[0] = t;
  for (int i = 0; i < count; i++) {
    assert_int_equal(plf_tree_create(n, &trees[i + 1]), 0);
    assert_int_equal(plf_nni_neighbour(t, i, trees[i + 1]), 0);
  }
  int min = plf_plan_min_vectors(n);
  int m = budget_div == 0 ? 0 : (n - 1) / budget_div;
  if (budget_div && m < min) m = min;
  plf_planner *p;
  plf_plan plan;
  plf_plan_init(&plan);
  assert_int_equal(plf_planner_create(n, m, 0, &p), 0);
  int half = (count + 1) / 2;
  assert_int_equal(plf_planner_add_trees(p, (const plf_tree *const *)trees,
                                         (size_t)half, &plan),
                   0);
  assert_int_equal(plf_planner_add_trees(
                       p, (const plf_tree *const *)trees + half,
                       (size_t)(count + 1 - half), &plan),
                   0);
  assert_int_equal(plan.tree_count, count + 1);
  symbolic s;
  sym_init(&s, n, plf_planner_vectors(p));
  if (m) assert_in_range(plf_planner_vectors(p), 1, m);
  for (int i = 0; i <= count; i++) sym_run(&s, &plan, (size_t)i, trees[i], 1);
  sym_free(&s);
  plf_plan_counts c;
  plf_planner_counts(p, &c);
  assert_int_equal(c.ops, plan.op_count);
  assert_int_equal(c.trees, count + 1);
  if (m == 0) {
    assert_int_equal(c.recomputed, 0);
    assert_int_equal(c.evictions, 0);
    /* each neighbour: its changed path to the root only */
    if (n >= 30) assert_true(c.ops < (uint64_t)(count + 1) * (n - 1) / 4);
  }
  assert_true(c.hits > 0 || n < 5);
  assert_true(c.ops <= (uint64_t)(count + 1) * (uint64_t)(n - 1));
  plf_plan_free(&plan);
  plf_planner_destroy(p);
  for (int i = 0; i <= count; i++) plf_tree_destroy(trees[i]);
  free(trees);
}

static void test_nni_batches(void **state) {
  (void)state;
  rng_state = 11;
  static const int sizes[] = {4, 5, 8, 30, 120};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
    for (int div = 0; div <= 16; div = div ? div * 2 : 1)
      check_nni_batch(sizes[i], div);
}

static void test_recomputed_count(void **state) {
  (void)state;
  rng_state = 5;
  int n = 64;
  plf_tree *t = make_tree(n, 0, 1), *u = make_tree(n, 0, 1);
  plf_planner *p;
  plf_plan plan;
  plf_plan_init(&plan);
  assert_int_equal(plf_planner_create(n, plf_plan_min_vectors(n), 0, &p), 0);
  assert_int_equal(plf_planner_add_tree(p, t, &plan), 0);
  assert_int_equal(plf_planner_add_tree(p, t, &plan), 0);
  assert_int_equal(plan.trees[1].op_count, 0); /* its root stayed */
  assert_int_equal(plf_planner_add_tree(p, u, &plan), 0);
  assert_int_equal(plf_planner_add_tree(p, t, &plan), 0);
  const plf_plan_tree *g = &plan.trees[3];
  assert_true(g->counts.recomputed > 0);
  assert_true(g->counts.recomputed <= g->op_count);
  assert_true(g->counts.evictions > 0);
  symbolic s;
  sym_init(&s, n, plf_planner_vectors(p));
  sym_run(&s, &plan, 0, t, 1);
  sym_run(&s, &plan, 1, t, 1);
  sym_run(&s, &plan, 2, u, 1);
  sym_run(&s, &plan, 3, t, 1);
  sym_free(&s);
  plf_plan_free(&plan);
  plf_planner_destroy(p);
  plf_tree_destroy(t);
  plf_tree_destroy(u);
}

static void test_alloc_failures(void **state) {
  (void)state;
  rng_state = 3;
  int n = 40;
  plf_tree *t = make_tree(n, 0, 1);
  int failures = 0;
  for (int k = 1;; k++) {
    long live = alloc_live;
    plf_planner *p = NULL;
    plf_plan plan;
    plf_plan_init(&plan);
    alloc_count = 0;
    alloc_fail_at = k;
    int rc = plf_planner_create(n, PLF_PLAN_UNBOUNDED, 0, &p);
    if (rc == 0) rc = plf_planner_add_tree(p, t, &plan);
    alloc_fail_at = 0;
    if (rc == 0) {
      assert_int_equal(plan.op_count, n - 1);
      plf_plan_free(&plan);
      plf_planner_destroy(p);
      assert_int_equal(alloc_live, live);
      break;
    }
    assert_int_equal(rc, EMBER_ENOMEM);
    assert_int_equal(plan.op_count, 0);
    assert_int_equal(plan.tree_count, 0);
    if (p) { /* add_tree failed: the planner still works, from scratch */
      assert_int_equal(plf_planner_add_tree(p, t, &plan), 0);
      assert_int_equal(plan.op_count, n - 1);
    }
    plf_plan_free(&plan);
    plf_planner_destroy(p);
    assert_int_equal(alloc_live, live);
    failures++;
  }
  assert_true(failures >= 15);
  plf_tree_destroy(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_min_vectors),
      cmocka_unit_test(test_budgets),
      cmocka_unit_test(test_balanced_minimum),
      cmocka_unit_test(test_reuse),
      cmocka_unit_test(test_mirror),
      cmocka_unit_test(test_nni_batches),
      cmocka_unit_test(test_recomputed_count),
      cmocka_unit_test(test_alloc_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
