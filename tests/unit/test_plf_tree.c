/* test_plf_tree.c - plf trees: the builder's checks, copies, the bottom-up
 * order, and NNI neighbours (count, distinct topologies, one split changed,
 * lengths and root kept). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ember/ember_errors.h"
#include "plf/plf_tree.h"

static void test_build_rooted(void **state) {
  (void)state;
  plf_tree *t;
  assert_int_equal(plf_tree_create(1, &t), EMBER_EPARAM);
  assert_int_equal(plf_tree_create(PLF_TREE_MAX_TIPS + 1, &t), EMBER_EPARAM);
  assert_int_equal(plf_tree_create(4, &t), 0);
  assert_int_equal(plf_tree_node_count(t), 4);
  assert_false(plf_tree_is_complete(t));
  assert_int_equal(plf_tree_root(t), PLF_NONE);
  assert_int_equal(plf_tree_join(t, 0, 0.5, 0, 0.5), EMBER_EPARAM);
  assert_int_equal(plf_tree_join(t, 0, -1.0, 1, 0.5), EMBER_EPARAM);
  assert_int_equal(plf_tree_join(t, 0, 0.1, 9, 0.5), EMBER_EPARAM);
  assert_int_equal(plf_tree_join(t, 0, 0.1, 1, 0.2), 4);
  assert_int_equal(plf_tree_join(t, 0, 0.1, 2, 0.2), EMBER_EPARAM); /* joined */
  assert_int_equal(plf_tree_join3(t, 4, 1, 2, 1, 2, 1), EMBER_EPARAM);
  assert_int_equal(plf_tree_join(t, 2, 0.3, 3, 0.4), 5);
  assert_int_equal(plf_tree_join(t, 4, 1.5, 5, 2.5), 6);
  assert_true(plf_tree_is_complete(t));
  assert_false(plf_tree_is_unrooted(t));
  assert_int_equal(plf_tree_root(t), 6);
  assert_int_equal(plf_tree_join(t, 6, 1, 5, 1), EMBER_EPARAM);
  assert_int_equal(plf_tree_parent(t, 6), PLF_NONE);
  assert_int_equal(plf_tree_parent(t, 2), 5);
  assert_int_equal(plf_tree_child(t, 6, 1), 5);
  assert_int_equal(plf_tree_child(t, 0, 0), PLF_NONE);
  assert_int_equal(plf_tree_child(t, 6, 2), PLF_NONE);
  assert_true(plf_tree_length(t, 5) == 2.5);
  assert_true(plf_tree_length(t, 6) == 0.0);
  assert_int_equal(plf_tree_set_length(t, 6, 1.0), EMBER_EPARAM);
  assert_int_equal(plf_tree_set_length(t, 3, 0.75), 0);
  assert_true(plf_tree_length(t, 3) == 0.75);

  int order[7], pos[7];
  assert_int_equal(plf_tree_bottom_up(t, order), 0);
  for (int i = 0; i < 7; i++) pos[order[i]] = i;
  for (int v = 0; v < 6; v++)
    assert_true(pos[v] < pos[plf_tree_parent(t, v)]);
  assert_int_equal(order[6], 6);

  plf_tree *c, *other;
  assert_int_equal(plf_tree_copy(t, &c), 0);
  assert_int_equal(plf_tree_root(c), 6);
  assert_true(plf_tree_length(c, 3) == 0.75);
  assert_int_equal(plf_tree_create(5, &other), 0);
  assert_int_equal(plf_tree_assign(other, t), EMBER_EPARAM);
  plf_tree_destroy(other);
  plf_tree_destroy(c);
  plf_tree_destroy(t);
  plf_tree_destroy(NULL);
}

static void test_build_unrooted(void **state) {
  (void)state;
  plf_tree *t;
  assert_int_equal(plf_tree_create(4, &t), 0);
  assert_int_equal(plf_tree_join3(t, 0, 1, 1, 1, 2, 1), EMBER_EPARAM); /* 4 open */
  assert_int_equal(plf_tree_join(t, 2, 0.3, 3, 0.4), 4);
  assert_int_equal(plf_tree_join3(t, 0, 0.1, 1, 0.2, 4, 0.5), 6);
  assert_true(plf_tree_is_unrooted(t));
  assert_int_equal(plf_tree_child(t, 6, 0), 5); /* the zero-length node */
  assert_true(plf_tree_length(t, 5) == 0.0);
  assert_int_equal(plf_tree_child(t, 5, 0), 0);
  assert_int_equal(plf_tree_child(t, 5, 1), 1);
  assert_int_equal(plf_tree_child(t, 6, 1), 4);
  assert_true(plf_tree_length(t, 4) == 0.5);
  assert_int_equal(plf_nni_count(t), 2);
  plf_tree_destroy(t);
}

/* ---- NNI --------------------------------------------------------------- */

/* splits: the tip sets (n <= 64) below each internal branch of the unrooted
 * tree, each normalised not to hold taxon 0, sorted */
static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static int splits(const plf_tree *t, uint64_t *out) {
  int n = plf_tree_tip_count(t), total = 2 * n - 1, k = 0;
  int order[127];
  uint64_t below[127];
  uint64_t all = n == 64 ? ~0ull : (1ull << n) - 1;
  assert_int_equal(plf_tree_bottom_up(t, order), 0);
  for (int i = 0; i < total; i++) {
    int v = order[i];
    below[v] = v < n ? 1ull << v
                     : below[plf_tree_child(t, v, 0)] |
                           below[plf_tree_child(t, v, 1)];
  }
  int extra = plf_tree_child(t, plf_tree_root(t), 0); /* zero-length */
  for (int v = n; v < total; v++) {
    if (plf_tree_parent(t, v) == PLF_NONE || v == extra) continue;
    out[k++] = below[v] & 1 ? all & ~below[v] : below[v];
  }
  qsort(out, (size_t)k, sizeof *out, cmp_u64);
  return k;
}

static plf_tree *sample_unrooted(int n, uint64_t seed) {
  plf_tree *t;
  assert_int_equal(plf_tree_create(n, &t), 0);
  int pool[64];
  for (int i = 0; i < n; i++) pool[i] = i;
  int left = n;
  uint64_t x = seed;
  double len = 0.01;
  while (left > 3) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    int i = (int)((x >> 33) % (uint64_t)left);
    int j = (int)((x >> 13) % (uint64_t)(left - 1));
    if (j >= i) j++;
    int v = plf_tree_join(t, pool[i], len, pool[j], len + 0.001);
    assert_true(v >= 0);
    len += 0.002;
    pool[i] = v;
    pool[j] = pool[--left];
  }
  assert_true(plf_tree_join3(t, pool[0], 0.3, pool[1], 0.4, pool[2], 0.5) >=
              0);
  return t;
}

static void test_nni(void **state) {
  (void)state;
  for (int n = 4; n <= 40; n += 3) {
    plf_tree *t = sample_unrooted(n, (uint64_t)n * 77);
    int count = plf_nni_count(t);
    assert_int_equal(count, 2 * (n - 3));
    uint64_t base[64], *got = calloc((size_t)count * 64, sizeof *got);
    assert_non_null(got);
    int nb = splits(t, base);
    assert_int_equal(nb, n - 3);
    plf_tree *u;
    assert_int_equal(plf_tree_create(n, &u), 0);
    for (int i = 0; i < count; i++) {
      assert_int_equal(plf_nni_neighbour(t, i, u), 0);
      assert_true(plf_tree_is_unrooted(u));
      assert_int_equal(plf_tree_root(u), plf_tree_root(t));
      /* every branch keeps its length */
      for (int v = 0; v < 2 * n - 1; v++)
        assert_true(plf_tree_length(u, v) == plf_tree_length(t, v));
      uint64_t *s = got + (size_t)i * 64;
      assert_int_equal(splits(u, s), n - 3);
      int shared = 0;
      for (int a = 0, b = 0; a < n - 3 && b < n - 3;) {
        if (base[a] == s[b]) {
          shared++;
          a++;
          b++;
        } else if (base[a] < s[b]) {
          a++;
        } else {
          b++;
        }
      }
      if (shared != n - 4)
        fail_msg("n=%d neighbour %d shares %d splits, expected %d", n, i,
                 shared, n - 4);
      for (int j = 0; j < i; j++)
        if (memcmp(got + (size_t)j * 64, s, (size_t)(n - 3) * 8) == 0)
          fail_msg("n=%d neighbours %d and %d are the same tree", n, j, i);
    }
    assert_int_equal(plf_nni_neighbour(t, count, u), EMBER_EPARAM);
    assert_int_equal(plf_nni_neighbour(t, -1, u), EMBER_EPARAM);
    plf_tree_destroy(u);
    free(got);
    plf_tree_destroy(t);
  }
}

static void test_nni_refusals(void **state) {
  (void)state;
  plf_tree *t, *u;
  assert_int_equal(plf_tree_create(4, &t), 0);
  assert_int_equal(plf_nni_count(t), EMBER_EPARAM); /* incomplete */
  plf_tree_join(t, 0, 1, 1, 1);
  plf_tree_join(t, 2, 1, 3, 1);
  plf_tree_join(t, 4, 1, 5, 1);
  assert_int_equal(plf_nni_count(t), EMBER_EPARAM); /* rooted */
  assert_int_equal(plf_tree_create(5, &u), 0);
  plf_tree *s = sample_unrooted(4, 1);
  assert_int_equal(plf_nni_neighbour(s, 0, u), EMBER_EPARAM); /* 5 taxa */
  plf_tree_destroy(s);
  s = sample_unrooted(3, 1);
  assert_int_equal(plf_nni_count(s), 0);
  plf_tree_destroy(s);
  plf_tree_destroy(u);
  plf_tree_destroy(t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_build_rooted),
      cmocka_unit_test(test_build_unrooted),
      cmocka_unit_test(test_nni),
      cmocka_unit_test(test_nni_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
