/*
 * test_gam_policy.c - the GAM's scheduling policies (gam/policy.c) on
 * hand-built cluster states: delay's affinity and threshold, skips and
 * their reset, slots, availability, naive's first fit, static's rules and
 * its default split, and names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "policy.h"

static const char *const both[] = {"km", "lr"};

/* A node offering km and lr, with `lr` and `km` leases in use. */
typedef struct test_node {
  gam_label_count counts[2];
  gam_sched_node node;
} test_node;

static void make_node(test_node *t, const char *id, unsigned lr, unsigned km,
                      unsigned slots) {
  t->counts[0] = (gam_label_count){.label = "lr", .leases = lr};
  t->counts[1] = (gam_label_count){.label = "km", .leases = km};
  t->node = (gam_sched_node){.id = id, .labels = both, .n_labels = 2,
                             .in_use = t->counts, .n_in_use = 2,
                             .slots = slots, .available = true};
}

static gam_sched_app app(uint64_t id, const char *label, unsigned skipped) {
  return (gam_sched_app){.id = id, .label = label, .wanted = 1,
                         .skipped = skipped};
}

static const gam_policy_params delay10 = {.kind = GAM_POLICY_DELAY,
                                          .delay_max_skips = 10};
static const gam_policy_params naive = {.kind = GAM_POLICY_NAIVE};

/* One offer of nodes[node]; returns how many were granted. */
static size_t offer(const gam_policy_params *p, const gam_sched_node *nodes,
                    size_t n_nodes, size_t node, const gam_sched_app *apps,
                    size_t n_apps, size_t *granted, unsigned *skipped) {
  return gam_policy_offer(p, nodes, n_nodes, node, apps, n_apps, granted,
                          n_apps, skipped);
}

static void test_names_round_trip(void **state) {
  (void)state;
  gam_policy_kind kinds[] = {GAM_POLICY_DELAY, GAM_POLICY_NAIVE,
                             GAM_POLICY_STATIC};
  for (size_t i = 0; i < 3; i++) {
    gam_policy_kind back = (gam_policy_kind)99;
    const char *name = gam_policy_name(kinds[i]);
    assert_non_null(name);
    assert_int_equal(gam_policy_parse(name, &back), 0);
    assert_int_equal(back, kinds[i]);
  }
  assert_string_equal(gam_policy_name(GAM_POLICY_DELAY), "delay");
  assert_null(gam_policy_name((gam_policy_kind)7));
  gam_policy_kind k;
  assert_int_equal(gam_policy_parse("fair", &k), -1);
  assert_int_equal(gam_policy_parse("", &k), -1);
  assert_int_equal(gam_policy_parse(NULL, &k), -1);
}

static void test_affinity(void **state) {
  (void)state;
  test_node idle, mixed, pure;
  make_node(&idle, "n0", 0, 0, 0);
  make_node(&mixed, "n1", 1, 3, 0);
  make_node(&pure, "n2", 2, 0, 0);
  /* an idle node ranks highest, for every label */
  assert_true(gam_policy_affinity(&idle.node, "lr") == 1.0);
  assert_true(gam_policy_affinity(&idle.node, "km") == 1.0);
  /* n_L / n */
  assert_true(gam_policy_affinity(&mixed.node, "lr") == 0.25);
  assert_true(gam_policy_affinity(&mixed.node, "km") == 0.75);
  assert_true(gam_policy_affinity(&pure.node, "lr") == 1.0);
  assert_true(gam_policy_affinity(&pure.node, "km") == 0.0);
}

static void test_threshold_falls_linearly(void **state) {
  (void)state;
  assert_true(gam_policy_threshold(&delay10, 0) == 1.0);
  assert_true(gam_policy_threshold(&delay10, 5) == 0.5);
  for (unsigned s = 1; s <= 10; s++) /* one step of 1/10 per skip */
    assert_true(gam_policy_threshold(&delay10, s - 1) -
                    gam_policy_threshold(&delay10, s) > 0.0999 &&
                gam_policy_threshold(&delay10, s - 1) -
                    gam_policy_threshold(&delay10, s) < 0.1001);
  assert_true(gam_policy_threshold(&delay10, 10) == 0.0);
  assert_true(gam_policy_threshold(&delay10, 1000) == 0.0); /* never < 0 */
  gam_policy_params nodelay = {.kind = GAM_POLICY_DELAY};
  assert_true(gam_policy_threshold(&nodelay, 0) == 0.0);
}

/* delay: an idle node takes a fresh app (threshold 1) of either label. */
static void test_delay_idle_node_takes_anyone(void **state) {
  (void)state;
  test_node n;
  make_node(&n, "n0", 0, 0, 0);
  gam_sched_app apps[] = {app(1, "km", 0)};
  size_t granted[1];
  unsigned skipped[1];
  assert_int_equal(offer(&delay10, &n.node, 1, 0, apps, 1, granted, skipped),
                   1);
  assert_int_equal(granted[0], 0);
  assert_int_equal(skipped[0], 0);
}

/* delay: a fresh app skips a mixed node, then its threshold falls and a
 * later opportunity on the same node places it; placing resets the count. */
static void test_delay_skips_then_places_on_mixed(void **state) {
  (void)state;
  test_node n;
  make_node(&n, "n0", 3, 1, 0); /* km affinity 1/4 */
  gam_sched_app a = app(7, "km", 0);
  size_t granted[1];
  unsigned skipped[1];
  unsigned opportunities = 0;
  for (;;) {
    size_t g = offer(&delay10, &n.node, 1, 0, &a, 1, granted, skipped);
    opportunities++;
    if (g == 1) break;
    assert_int_equal(skipped[0], a.skipped + 1);
    a.skipped = skipped[0];
    assert_true(opportunities < 100);
  }
  /* threshold 1 - s/10 <= 1/4 first at s = 8: 8 skips, placed at the 9th */
  assert_int_equal(opportunities, 9);
  assert_int_equal(a.skipped, 8);
  assert_int_equal(skipped[0], 0); /* reset on placement */
}

/* delay: the node that runs an app's label is taken at once; the one that
 * runs the other label is skipped. */
static void test_delay_prefers_its_label(void **state) {
  (void)state;
  test_node nodes[2];
  make_node(&nodes[0], "n0", 2, 0, 0);
  make_node(&nodes[1], "n1", 0, 2, 0);
  gam_sched_node arr[] = {nodes[0].node, nodes[1].node};
  gam_sched_app apps[] = {app(1, "km", 0), app(2, "lr", 0)};
  size_t granted[2];
  unsigned skipped[2];
  assert_int_equal(offer(&delay10, arr, 2, 0, apps, 2, granted, skipped), 1);
  assert_int_equal(granted[0], 1); /* lr on the lr node */
  assert_int_equal(skipped[0], 1); /* km skipped it */
  assert_int_equal(skipped[1], 0);
  assert_int_equal(offer(&delay10, arr, 2, 1, apps, 2, granted, skipped), 1);
  assert_int_equal(granted[0], 0); /* km on the km node */
  assert_int_equal(skipped[1], 1);
}

/* A grant earlier in an offer counts in the node's affinity for the apps
 * after it: an idle node that took an lr app now has km affinity 0. */
static void test_grant_changes_affinity_in_offer(void **state) {
  (void)state;
  test_node n;
  make_node(&n, "n0", 0, 0, 0);
  gam_sched_app apps[] = {app(1, "lr", 0), app(2, "km", 0), app(3, "lr", 0),
                          app(4, "km", 10)};
  size_t granted[4];
  unsigned skipped[4];
  assert_int_equal(offer(&delay10, &n.node, 1, 0, apps, 4, granted, skipped),
                   3);
  assert_int_equal(granted[0], 0);
  assert_int_equal(granted[1], 2); /* lr still at affinity 1 */
  assert_int_equal(granted[2], 3); /* km at threshold 0 goes anywhere */
  assert_int_equal(skipped[1], 1); /* km at threshold 1 skipped */
  assert_int_equal(skipped[3], 0);
}

/* Threshold equal to the affinity places the app (no rounding). */
static void test_delay_equal_is_enough(void **state) {
  (void)state;
  test_node n;
  make_node(&n, "n0", 1, 2, 0); /* km affinity 2/3 */
  gam_policy_params p = {.kind = GAM_POLICY_DELAY, .delay_max_skips = 3};
  gam_sched_app a = app(1, "km", 1); /* threshold 1 - 1/3 */
  size_t granted[1];
  unsigned skipped[1];
  assert_int_equal(offer(&p, &n.node, 1, 0, &a, 1, granted, skipped), 1);
}

/* No two leases of one app on one node, under every policy. */
static void test_one_lease_per_app_per_node(void **state) {
  (void)state;
  gam_policy_params ps[] = {delay10, naive, {.kind = GAM_POLICY_STATIC}};
  for (size_t k = 0; k < 3; k++) {
    test_node n;
    make_node(&n, "n0", 1, 0, 0);
    size_t held[] = {0};
    gam_sched_app a = app(1, "lr", 4);
    a.wanted = 3;
    a.nodes_held = held;
    a.n_nodes_held = 1;
    size_t granted[1];
    unsigned skipped[1];
    assert_int_equal(offer(&ps[k], &n.node, 1, 0, &a, 1, granted, skipped),
                     0);
    assert_int_equal(skipped[0], 4); /* not an opportunity: no skip */
  }
}

/* A full node is not an opportunity: nothing placed, nothing skipped; the
 * slots run out within an offer too. */
static void test_full_node(void **state) {
  (void)state;
  test_node n;
  make_node(&n, "n0", 0, 2, 2);
  gam_sched_app apps[] = {app(1, "lr", 3), app(2, "km", 0)};
  size_t granted[3];
  unsigned skipped[3];
  assert_int_equal(offer(&delay10, &n.node, 1, 0, apps, 2, granted, skipped),
                   0);
  assert_int_equal(skipped[0], 3);
  assert_int_equal(skipped[1], 0);
  assert_int_equal(offer(&naive, &n.node, 1, 0, apps, 2, granted, skipped), 0);

  make_node(&n, "n0", 0, 1, 2); /* one slot left */
  gam_sched_app more[] = {app(1, "km", 0), app(2, "km", 0), app(3, "lr", 2)};
  assert_int_equal(offer(&delay10, &n.node, 1, 0, more, 3, granted, skipped),
                   1);
  assert_int_equal(granted[0], 0);
  assert_int_equal(skipped[1], 0);
  assert_int_equal(skipped[2], 2); /* full by then: not a skip */
}

/* max_granted caps an offer; the apps not considered keep their counts. */
static void test_max_granted(void **state) {
  (void)state;
  test_node n;
  make_node(&n, "n0", 0, 0, 0);
  gam_sched_app apps[] = {app(1, "lr", 0), app(2, "lr", 0), app(3, "km", 5)};
  size_t granted[1];
  unsigned skipped[3];
  assert_int_equal(gam_policy_offer(&naive, &n.node, 1, 0, apps, 3, granted,
                                    1, skipped),
                   1);
  assert_int_equal(granted[0], 0);
  assert_int_equal(skipped[2], 5);
}

/* An unavailable node (lost or drained), or one that does not offer the
 * label, takes nobody and costs no skip. */
static void test_unavailable_and_unoffered(void **state) {
  (void)state;
  test_node n;
  make_node(&n, "n0", 0, 0, 0);
  n.node.available = false;
  gam_sched_app a = app(1, "lr", 2);
  size_t granted[1];
  unsigned skipped[1];
  assert_int_equal(offer(&delay10, &n.node, 1, 0, &a, 1, granted, skipped), 0);
  assert_int_equal(skipped[0], 2);
  assert_int_equal(offer(&naive, &n.node, 1, 0, &a, 1, granted, skipped), 0);

  make_node(&n, "n0", 0, 0, 0);
  gam_sched_app sw = app(2, "sw", 0);
  assert_int_equal(offer(&naive, &n.node, 1, 0, &sw, 1, granted, skipped), 0);
  assert_int_equal(offer(&delay10, &n.node, 1, 0, &sw, 1, granted, skipped),
                   0);
  assert_int_equal(skipped[0], 0);
}

/* naive: first fit, whatever runs there; arrival order. */
static void test_naive_first_fit(void **state) {
  (void)state;
  test_node n;
  make_node(&n, "n0", 3, 0, 4);
  gam_sched_app apps[] = {app(1, "km", 0), app(2, "lr", 0)};
  size_t granted[2];
  unsigned skipped[2];
  assert_int_equal(offer(&naive, &n.node, 1, 0, apps, 2, granted, skipped), 1);
  assert_int_equal(granted[0], 0); /* km first, on an lr node, 1 slot left */
  assert_int_equal(skipped[1], 0);
}

/* static with rules: a node serves the labels its rules name; a node no
 * rule names is shared. */
static void test_static_rules(void **state) {
  (void)state;
  test_node t[3];
  make_node(&t[0], "a", 0, 0, 0);
  make_node(&t[1], "b", 0, 0, 0);
  make_node(&t[2], "c", 0, 0, 0);
  gam_sched_node nodes[] = {t[0].node, t[1].node, t[2].node};
  gam_static_rule rules[] = {{"lr", "a"}, {"km", "b"}, {"lr", "b"}};
  gam_policy_params p = {.kind = GAM_POLICY_STATIC, .rules = rules,
                         .n_rules = 3};
  gam_sched_app apps[] = {app(1, "km", 0), app(2, "lr", 0)};
  size_t granted[2];
  unsigned skipped[2];
  assert_int_equal(offer(&p, nodes, 3, 0, apps, 2, granted, skipped), 1);
  assert_int_equal(granted[0], 1); /* a: lr only */
  assert_int_equal(offer(&p, nodes, 3, 1, apps, 2, granted, skipped), 2);
  assert_int_equal(offer(&p, nodes, 3, 2, apps, 2, granted, skipped), 2);
  assert_int_equal(skipped[0], 0);
}

/* static without rules: nodes sorted by id split evenly between the
 * labels pending apps ask for, sorted by name (km before lr). */
static void test_static_default_split(void **state) {
  (void)state;
  test_node t[4];
  const char *ids[] = {"n3", "n1", "n0", "n2"}; /* not in id order */
  gam_sched_node nodes[4];
  for (int i = 0; i < 4; i++) {
    make_node(&t[i], ids[i], 0, 0, 0);
    nodes[i] = t[i].node;
  }
  const gam_policy_params p = {.kind = GAM_POLICY_STATIC};
  gam_sched_app apps[] = {app(1, "lr", 0), app(2, "km", 0), app(3, "lr", 0)};
  size_t granted[3];
  unsigned skipped[3];
  /* n0, n1 -> km; n2, n3 -> lr */
  const char *want[] = {"lr", "km", "km", "lr"};
  for (size_t i = 0; i < 4; i++) {
    size_t g = offer(&p, nodes, 4, i, apps, 3, granted, skipped);
    assert_true(g >= 1);
    for (size_t k = 0; k < g; k++)
      assert_string_equal(apps[granted[k]].label, want[i]);
  }
  /* one label pending: every node serves it */
  gam_sched_app only_lr[] = {app(1, "lr", 0)};
  for (size_t i = 0; i < 4; i++)
    assert_int_equal(offer(&p, nodes, 4, i, only_lr, 1, granted, skipped), 1);
  /* more labels than nodes: each label on exactly one node */
  gam_sched_app five[] = {app(1, "a", 0), app(2, "b", 0), app(3, "c", 0),
                          app(4, "d", 0), app(5, "e", 0)};
  const char *const many[] = {"a", "b", "c", "d", "e"};
  unsigned placed[5] = {0};
  unsigned skipped5[5];
  size_t granted5[5];
  for (size_t i = 0; i < 4; i++) {
    nodes[i].labels = many;
    nodes[i].n_labels = 5;
    size_t g = offer(&p, nodes, 4, i, five, 5, granted5, skipped5);
    for (size_t k = 0; k < g; k++) placed[granted5[k]]++;
  }
  for (size_t k = 0; k < 5; k++) assert_int_equal(placed[k], 1);
}

/* Garbage in: an index past the nodes, no params. */
static void test_bad_arguments(void **state) {
  (void)state;
  test_node n;
  make_node(&n, "n0", 0, 0, 0);
  gam_sched_app a = app(1, "lr", 3);
  size_t granted[1];
  unsigned skipped[1] = {99};
  assert_int_equal(offer(&naive, &n.node, 1, 1, &a, 1, granted, skipped), 0);
  assert_int_equal(skipped[0], 3);
  assert_int_equal(offer(NULL, &n.node, 1, 0, &a, 1, granted, skipped), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_names_round_trip),
      cmocka_unit_test(test_affinity),
      cmocka_unit_test(test_threshold_falls_linearly),
      cmocka_unit_test(test_delay_idle_node_takes_anyone),
      cmocka_unit_test(test_delay_skips_then_places_on_mixed),
      cmocka_unit_test(test_delay_prefers_its_label),
      cmocka_unit_test(test_grant_changes_affinity_in_offer),
      cmocka_unit_test(test_delay_equal_is_enough),
      cmocka_unit_test(test_one_lease_per_app_per_node),
      cmocka_unit_test(test_full_node),
      cmocka_unit_test(test_max_granted),
      cmocka_unit_test(test_unavailable_and_unoffered),
      cmocka_unit_test(test_naive_first_fit),
      cmocka_unit_test(test_static_rules),
      cmocka_unit_test(test_static_default_split),
      cmocka_unit_test(test_bad_arguments),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
