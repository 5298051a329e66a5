/* test_plf_plan_beagle.c - plans executed by BEAGLE (CPU, double, log
 * scalers, plf_tree_harness.c):
 *   - the unbudgeted log-likelihood equals an independent Felsenstein
 *     pruning written here (relative 1e-9: other rounding);
 *   - every budget from unbounded down to plf_plan_min_vectors(n) gives
 *     the unbudgeted value within 1e-12 relative, on random, caterpillar
 *     and balanced trees of 8..2000 taxa, rooted and unrooted, under JC
 *     and random GTR with four rate categories, on random DNA;
 *   - batches of all NNI neighbours of a tree, planned with the cache
 *     across calls under each budget, equal each tree scored alone within
 *     1e-12 relative. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plf_tree_harness.h"

#define REL 1e-12

static const double rates4[4] = {0.1, 0.5, 1.2, 2.2};

#define assert_close(got, want, rel, ...)                                    \
  do {                                                                       \
    double g_ = (got), w_ = (want);                                          \
    if (!(fabs(g_ - w_) <= (rel) * fabs(w_))) {                              \
      char what_[160];                                                       \
      snprintf(what_, sizeof what_, __VA_ARGS__);                            \
      fail_msg("%s: %.17g != %.17g (relative %.3g > %.1g)", what_, g_, w_,  \
               fabs(g_ - w_) / fabs(w_), (double)(rel));                     \
    }                                                                        \
  } while (0)

/* prune: Felsenstein's pruning, straightforwardly, with a per-pattern log
 * scale so that 2000 taxa do not underflow */
static double prune(const plf_tree *t, const ph_model *m, const int *states,
                    int patterns) {
  int n = plf_tree_tip_count(t), total = 2 * n - 1, cats = m->cats;
  size_t width = (size_t)patterns * (size_t)cats * 4;
  double *l = malloc((size_t)total * width * sizeof *l);
  double *lsc = calloc((size_t)patterns, sizeof *lsc);
  int *order = malloc((size_t)total * sizeof *order);
  assert_true(l && lsc && order);
  assert_int_equal(plf_tree_bottom_up(t, order), 0);
  for (int i = 0; i < total; i++) {
    int v = order[i];
    double *lv = l + (size_t)v * width;
    if (v < n) {
      for (int p = 0; p < patterns; p++)
        for (int k = 0; k < cats; k++)
          for (int s = 0; s < 4; s++)
            lv[((size_t)p * cats + k) * 4 + s] =
                states[(size_t)v * patterns + p] == s;
      continue;
    }
    for (size_t x = 0; x < width; x++) lv[x] = 1.0;
    for (int c = 0; c < 2; c++) {
      int ch = plf_tree_child(t, v, c);
      const double *lc = l + (size_t)ch * width;
      for (int k = 0; k < cats; k++) {
        double pm[16];
        ph_model_p(m, m->rates[k] * plf_tree_length(t, ch), pm);
        for (int p = 0; p < patterns; p++) {
          const double *in = lc + ((size_t)p * cats + k) * 4;
          double *out = lv + ((size_t)p * cats + k) * 4;
          for (int s = 0; s < 4; s++)
            out[s] *= pm[4 * s] * in[0] + pm[4 * s + 1] * in[1] +
                      pm[4 * s + 2] * in[2] + pm[4 * s + 3] * in[3];
        }
      }
    }
    for (int p = 0; p < patterns; p++) {
      double *x = lv + (size_t)p * cats * 4, mx = 0;
      for (int j = 0; j < cats * 4; j++) mx = x[j] > mx ? x[j] : mx;
      if (mx > 0) {
        for (int j = 0; j < cats * 4; j++) x[j] /= mx;
        lsc[p] += log(mx);
      }
    }
  }
  const double *lr = l + (size_t)plf_tree_root(t) * width;
  double sum = 0;
  for (int p = 0; p < patterns; p++) {
    double site = 0;
    for (int k = 0; k < cats; k++)
      for (int s = 0; s < 4; s++)
        site += m->weights[k] * m->freqs[s] * lr[((size_t)p * cats + k) * 4 + s];
    sum += log(site) + lsc[p];
  }
  free(l);
  free(lsc);
  free(order);
  return sum;
}

static void make_model(ph_model *m, int gtr, ph_rng *r) {
  if (gtr)
    assert_int_equal(ph_model_gtr(m, 4, rates4, r), 0);
  else
    ph_model_jc(m, 4, rates4);
}

static double run_budget(ph_beagle *b, const plf_tree *t, int budget,
                         unsigned flags, int *vectors_used) {
  plf_planner *p;
  plf_plan plan;
  plf_plan_init(&plan);
  int n = plf_tree_tip_count(t);
  assert_int_equal(plf_planner_create(n, budget, flags, &p), 0);
  assert_int_equal(plf_planner_add_tree(p, t, &plan), 0);
  *vectors_used = plf_planner_vectors(p);
  assert_true(*vectors_used <= b->vectors);
  double ll = 0;
  assert_int_equal(ph_beagle_run(b, &plan, &ll), 0);
  plf_plan_free(&plan);
  plf_planner_destroy(p);
  return ll;
}

static void check_tree(int n, int shape, int unrooted, int gtr,
                       uint64_t seed) {
  ph_rng r = {seed};
  plf_tree *t;
  if (shape == 0)
    assert_int_equal(ph_random_tree(n, unrooted, 0.1, &r, &t), 0);
  else if (shape == 1)
    assert_int_equal(ph_caterpillar(n, unrooted, &r, &t), 0);
  else
    assert_int_equal(ph_balanced(n, &r, &t), 0);
  ph_model m;
  make_model(&m, gtr, &r);
  int patterns = 48;
  int *states = malloc((size_t)n * patterns * sizeof *states);
  assert_non_null(states);
  ph_random_states(n, patterns, &r, states);
  ph_beagle b;
  assert_int_equal(ph_beagle_create(&b, n, patterns, states, &m, n - 1,
                                    2 * n - 1),
                   0);
  double ref;
  assert_int_equal(ph_score(&b, t, &ref), 0);
  assert_true(isfinite(ref) && ref < 0);
  assert_close(ref, prune(t, &m, states, patterns), 1e-9,
               "n=%d shape %d: BEAGLE vs pruning", n, shape);
  int min = plf_plan_min_vectors(n), used;
  for (int budget = n - 1;; budget = budget / 2 < min ? min : budget / 2) {
    double ll = run_budget(&b, t, budget, 0, &used);
    assert_close(ll, ref, REL, "n=%d shape %d unrooted %d budget %d", n,
                 shape, unrooted, budget);
    if (budget == min) break;
  }
  if (n <= 64) { /* small enough not to underflow unscaled */
    double ll = run_budget(&b, t, min, PLF_PLAN_NO_SCALING, &used);
    assert_close(ll, ref, 1e-10, "n=%d unscaled", n);
  }
  ph_beagle_destroy(&b);
  free(states);
  plf_tree_destroy(t);
}

static void test_budgets(void **state) {
  (void)state;
  static const int sizes[] = {8, 13, 64, 300, 1000, 2000};
  uint64_t seed = 1;
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    int n = sizes[i];
    check_tree(n, 0, 1, (int)(i % 2), seed++);
    check_tree(n, 0, 0, (int)((i + 1) % 2), seed++);
    if (n <= 1000) {
      check_tree(n, 1, (int)(i % 2), 1, seed++);
      check_tree(n, 2, 0, 0, seed++);
    }
  }
}

/* NNI neighbours of an unrooted tree under each budget, with the cache,
 * in two calls and a third that scores the tree again */
static void check_nni(int n, uint64_t seed) {
  ph_rng r = {seed};
  plf_tree *t;
  assert_int_equal(ph_random_tree(n, 1, 0.1, &r, &t), 0);
  ph_model m;
  make_model(&m, 1, &r);
  int patterns = 40;
  int *states = malloc((size_t)n * patterns * sizeof *states);
  assert_non_null(states);
  ph_random_states(n, patterns, &r, states);
  int count = plf_nni_count(t);
  plf_tree **trees = malloc((size_t)(count + 1) * sizeof *trees);
  double *ref = malloc((size_t)(count + 2) * sizeof *ref);
  double *got = malloc((size_t)(count + 2) * sizeof *got);
  assert_true(trees && ref && got);
  trees[0] = t;
  ph_beagle alone;
  assert_int_equal(ph_beagle_create(&alone, n, patterns, states, &m, n - 1,
                                    2 * n - 1),
                   0);
  for (int i = 0; i <= count; i++) {
    if (i) {
      assert_int_equal(plf_tree_create(n, &trees[i]), 0);
      assert_int_equal(plf_nni_neighbour(t, i - 1, trees[i]), 0);
    }
    assert_int_equal(ph_score(&alone, trees[i], &ref[i]), 0);
  }
  ref[count + 1] = ref[0];
  ph_beagle_destroy(&alone);

  int min = plf_plan_min_vectors(n);
  static const int divs[] = {0, 1, 2, 4, 10, 1000};
  for (size_t d = 0; d < sizeof divs / sizeof *divs; d++) {
    int budget = divs[d] ? (n - 1) / divs[d] : PLF_PLAN_UNBOUNDED;
    if (divs[d] && budget < min) budget = min;
    plf_planner *p;
    plf_plan plan;
    plf_plan_init(&plan);
    assert_int_equal(plf_planner_create(n, budget, 0, &p), 0);
    int half = count / 2;
    assert_int_equal(plf_planner_add_trees(p, (const plf_tree *const *)trees,
                                           (size_t)half, &plan),
                     0);
    assert_int_equal(
        plf_planner_add_trees(p, (const plf_tree *const *)trees + half,
                              (size_t)(count + 1 - half), &plan),
        0);
    assert_int_equal(plf_planner_add_tree(p, t, &plan), 0);
    ph_beagle b;
    assert_int_equal(ph_beagle_create(&b, n, patterns, states, &m,
                                      plf_planner_vectors(p), 2 * n - 1),
                     0);
    assert_int_equal(ph_beagle_run(&b, &plan, got), 0);
    for (int i = 0; i <= count + 1; i++)
      assert_close(got[i], ref[i], REL, "n=%d budget %d tree %d", n, budget,
                   i);
    plf_plan_counts c;
    plf_planner_counts(p, &c);
    assert_true(c.hits > 0);
    if (getenv("PLF_TEST_VERBOSE"))
      printf("n=%d budget %d: %llu ops, %llu hits, %llu recomputed, %llu "
             "evictions\n", n, budget, (unsigned long long)c.ops,
             (unsigned long long)c.hits, (unsigned long long)c.recomputed,
             (unsigned long long)c.evictions);
    if (budget == PLF_PLAN_UNBOUNDED) {
      assert_int_equal(plan.trees[count + 1].op_count, 0);
      if (n >= 50)
        assert_true(c.ops < (uint64_t)(count + 2) * (uint64_t)(n - 1) / 4);
    }
    ph_beagle_destroy(&b);
    plf_plan_free(&plan);
    plf_planner_destroy(p);
  }
  for (int i = 0; i <= count; i++) plf_tree_destroy(trees[i]);
  free(trees);
  free(ref);
  free(got);
  free(states);
}

static void test_nni_batches(void **state) {
  (void)state;
  check_nni(8, 101);
  check_nni(50, 102);
  check_nni(200, 103);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_budgets),
      cmocka_unit_test(test_nni_batches),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
