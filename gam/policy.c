/*
 * policy.c - the GAM's scheduling policies (policy.h): delay (Blaze 5.2's
 * accelerator-affinity delay scheduling), naive (first fit) and static (a
 * fixed label -> node partition). Pure functions: everything they read
 * comes in through their arguments, so the daemon, the simulator and the
 * unit tests run exactly this code.
 */
#include "policy.h"

#include <limits.h>
#include <string.h>

static const char *const policy_names[] = {
    [GAM_POLICY_DELAY] = "delay",
    [GAM_POLICY_NAIVE] = "naive",
    [GAM_POLICY_STATIC] = "static",
};
#define N_POLICIES (sizeof policy_names / sizeof policy_names[0])

const char *gam_policy_name(gam_policy_kind kind) {
  if ((unsigned)kind >= N_POLICIES) return NULL;
  return policy_names[kind];
}

int gam_policy_parse(const char *name, gam_policy_kind *out) {
  if (!name) return -1;
  for (unsigned i = 0; i < N_POLICIES; i++)
    if (strcmp(name, policy_names[i]) == 0) {
      if (out) *out = (gam_policy_kind)i;
      return 0;
    }
  return -1;
}

static int same(const char *a, const char *b) {
  return a && b && strcmp(a, b) == 0;
}

/* Leases on node: with label (NULL: all labels). */
static unsigned leases_of(const gam_sched_node *node, const char *label) {
  unsigned n = 0;
  for (size_t i = 0; i < node->n_in_use; i++)
    if (!label || same(node->in_use[i].label, label))
      n += node->in_use[i].leases;
  return n;
}

double gam_policy_affinity(const gam_sched_node *node, const char *label) {
  unsigned all = leases_of(node, NULL);
  if (all == 0) return 1.0; /* an idle node ranks highest */
  return (double)leases_of(node, label) / (double)all;
}

double gam_policy_threshold(const gam_policy_params *p, unsigned skipped) {
  /* no delay configured: every node is good enough at once */
  if (!p || p->delay_max_skips == 0 || skipped >= p->delay_max_skips)
    return 0.0;
  return 1.0 - (double)skipped / (double)p->delay_max_skips;
}

static int offers_label(const gam_sched_node *node, const char *label) {
  for (size_t i = 0; i < node->n_labels; i++)
    if (same(node->labels[i], label)) return 1;
  return 0;
}

static int holds(const gam_sched_app *app, size_t node) {
  for (size_t i = 0; i < app->n_nodes_held; i++)
    if (app->nodes_held[i] == node) return 1;
  return 0;
}

/*
 * static without rules: the rank of `label` among the distinct labels the
 * pending apps ask for, sorted by name, and how many there are. Counting
 * instead of sorting keeps the function allocation-free.
 */
static void label_rank(const gam_sched_app *apps, size_t n_apps,
                       const char *label, size_t *rank, size_t *distinct) {
  *rank = 0;
  *distinct = 0;
  for (size_t i = 0; i < n_apps; i++) {
    const char *l = apps[i].label;
    if (!l) continue;
    int seen = 0;
    for (size_t j = 0; j < i && !seen; j++) seen = same(apps[j].label, l);
    if (seen) continue;
    (*distinct)++;
    if (strcmp(l, label) < 0) (*rank)++;
  }
}

/* static without rules: the rank of node by id among all nodes. */
static size_t node_rank(const gam_sched_node *nodes, size_t n_nodes,
                        size_t node) {
  size_t r = 0;
  const char *id = nodes[node].id ? nodes[node].id : "";
  for (size_t i = 0; i < n_nodes; i++) {
    const char *other = nodes[i].id ? nodes[i].id : "";
    int c = strcmp(other, id);
    if (c < 0 || (c == 0 && i < node)) r++;
  }
  return r;
}

/* The even split: with m labels on n nodes, node rank r serves label rank
 * k. Fewer labels than nodes: each label gets a run of about n/m nodes;
 * more: each node gets a run of about m/n labels. */
static int split_serves(size_t r, size_t n, size_t k, size_t m) {
  if (m <= n) return r * m / n == k;
  return k * n / m == r;
}

/*
 * static: does the partition let `node` serve `label`? With rules, a node
 * named by some rule serves exactly the labels its rules name, and a node
 * no rule names stays shared (serves any label). Without rules, the even
 * split of policy.h.
 */
static int static_serves(const gam_policy_params *p,
                         const gam_sched_node *nodes, size_t n_nodes,
                         size_t node, const gam_sched_app *apps,
                         size_t n_apps, const char *label) {
  if (p->n_rules > 0) {
    int named = 0;
    for (size_t i = 0; i < p->n_rules; i++) {
      if (!same(p->rules[i].node, nodes[node].id)) continue;
      named = 1;
      if (same(p->rules[i].label, label)) return 1;
    }
    return !named;
  }
  size_t k, m;
  label_rank(apps, n_apps, label, &k, &m);
  if (m == 0) return 0;
  return split_serves(node_rank(nodes, n_nodes, node), n_nodes, k, m);
}

/*
 * delay: affinity n_l / n >= threshold 1 - skipped / max, compared in
 * integers (n_l * max >= (max - skipped) * n) so that equal values are
 * equal: 2/3 against 1 - 1/3 must not fall to rounding.
 */
static int meets_threshold(const gam_policy_params *p, unsigned n_l,
                           unsigned n, unsigned skipped) {
  if (n == 0) return 1; /* idle: the highest affinity */
  uint64_t max = p->delay_max_skips;
  if (max == 0 || skipped >= max) return 1; /* threshold 0 */
  return (uint64_t)n_l * max >= (max - skipped) * (uint64_t)n;
}

size_t gam_policy_offer(const gam_policy_params *p,
                        const gam_sched_node *nodes, size_t n_nodes,
                        size_t node, const gam_sched_app *apps,
                        size_t n_apps, size_t *granted, size_t max_granted,
                        unsigned *skipped_out) {
  for (size_t i = 0; i < n_apps; i++) skipped_out[i] = apps[i].skipped;
  if (!p || !nodes || node >= n_nodes) return 0;
  const gam_sched_node *nd = &nodes[node];
  if (!nd->available) return 0;

  unsigned in_use = leases_of(nd, NULL);
  size_t n_granted = 0;
  for (size_t i = 0; i < n_apps; i++) {
    const gam_sched_app *a = &apps[i];
    if (n_granted >= max_granted) break;
    if (nd->slots && in_use + n_granted >= nd->slots) break; /* full */
    if (a->wanted == 0 || !a->label) continue;
    if (!offers_label(nd, a->label) || holds(a, node)) continue;
    if (p->kind == GAM_POLICY_STATIC &&
        !static_serves(p, nodes, n_nodes, node, apps, n_apps, a->label))
      continue;

    if (p->kind == GAM_POLICY_DELAY) {
      /* leases granted earlier in this offer count as the node's own */
      unsigned same_label = 0;
      for (size_t g = 0; g < n_granted; g++)
        same_label += same(apps[granted[g]].label, a->label);
      if (!meets_threshold(p, leases_of(nd, a->label) + same_label,
                           in_use + (unsigned)n_granted, a->skipped)) {
        /* it could have gone here: one more opportunity skipped */
        if (a->skipped < UINT_MAX) skipped_out[i] = a->skipped + 1;
        continue;
      }
    }
    granted[n_granted++] = i;
    skipped_out[i] = 0;
  }
  return n_granted;
}
