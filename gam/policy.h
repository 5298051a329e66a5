/*
 * policy.h - where pending apps are placed: the GAM's scheduling policies,
 * as pure functions of the state they are given (no clock, no I/O, no
 * globals), so the daemon, the simulator (gam/sim/) and the unit tests run
 * the same code.
 *
 * Every NAM heartbeat is a scheduling opportunity: the daemon snapshots
 * the nodes and the pending apps and asks gam_policy_offer() which apps
 * get a lease on the node that just reported.
 *
 *   delay   (default) Blaze 5.2: node i's affinity for label L is n_L / n,
 *           its leases using L over all its leases; an idle node (n = 0)
 *           has the highest affinity. Each pending app has a threshold
 *           that falls linearly with the opportunities it has skipped,
 *           1 - skipped / delay_max_skips (never below 0); the app gets
 *           the node only if affinity >= threshold. An app skips an
 *           opportunity when the node could have taken it (serves L, has a
 *           free slot, does not hold one of the app's leases yet) but the
 *           affinity was too low; its count resets to 0 when it is placed.
 *   naive   first fit (YARN's default): any node that could take the app.
 *   static  a fixed label -> node partition (rules, from config): a node
 *           that some rule names serves exactly the labels its rules name,
 *           a node that no rule names stays shared; with no rules the
 *           nodes, sorted by id, are split evenly between the labels
 *           pending apps ask for, sorted by name.
 * In every policy a node that is unavailable, full (slots), does not offer
 * the label, already holds one of the app's leases, or (static) is not in
 * the label's part is no opportunity for that app: nothing placed, nothing
 * skipped.
 */
#ifndef EMBER_GAM_POLICY_H
#define EMBER_GAM_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum gam_policy_kind {
  GAM_POLICY_DELAY = 0,
  GAM_POLICY_NAIVE = 1,
  GAM_POLICY_STATIC = 2,
} gam_policy_kind;

/* "delay", "naive", "static"; NULL for an unknown kind. */
const char *gam_policy_name(gam_policy_kind kind);
/* 0 and the kind, or -1 for an unknown name. */
int gam_policy_parse(const char *name, gam_policy_kind *out);

/* Active leases on a node for one label. */
typedef struct gam_label_count {
  const char *label;
  unsigned leases;
} gam_label_count;

typedef struct gam_sched_node {
  const char *id;
  const char *const *labels;     /* labels it offers now */
  size_t n_labels;
  const gam_label_count *in_use; /* its active leases by label */
  size_t n_in_use;
  unsigned slots;                /* most leases it takes; 0 = no limit */
  bool available;                /* alive and not drained */
} gam_sched_node;

typedef struct gam_sched_app {
  uint64_t id;
  const char *label;
  unsigned wanted;               /* leases still to place (> 0) */
  unsigned skipped;              /* opportunities skipped so far */
  const size_t *nodes_held;      /* indices into nodes it holds leases on */
  size_t n_nodes_held;
} gam_sched_app;

/* static: label -> node, one pair per rule. */
typedef struct gam_static_rule {
  const char *label;
  const char *node;
} gam_static_rule;

typedef struct gam_policy_params {
  gam_policy_kind kind;
  unsigned delay_max_skips;      /* delay: skips until the threshold is 0 */
  const gam_static_rule *rules;  /* static */
  size_t n_rules;
} gam_policy_params;

/* affinity of node for label: 1.0 when idle, else n_L / n. */
double gam_policy_affinity(const gam_sched_node *node, const char *label);
/* delay's threshold after skipped opportunities: 1 - skipped / max, 0
 * from max skips on, and always 0 when delay_max_skips is 0 (no delay:
 * first fit). offer() compares n_L * max >= (max - skipped) * n in
 * integers, so an affinity equal to the threshold always places. */
double gam_policy_threshold(const gam_policy_params *p, unsigned skipped);

/*
 * gam_policy_offer - node `node` (an index into nodes) offers itself.
 * Apps are considered in the order given (the daemon passes them in
 * arrival order); each gets at most one lease on the node, and a lease
 * granted here counts in the node's affinity for the apps after it.
 * Writes the indices of the apps granted a lease to granted (at most
 * max_granted) and returns how many; writes every app's new skipped count
 * to skipped_out[0..n_apps) (unchanged for apps the node could not take).
 * Pure: reads only its arguments.
 */
size_t gam_policy_offer(const gam_policy_params *p,
                        const gam_sched_node *nodes, size_t n_nodes,
                        size_t node, const gam_sched_app *apps,
                        size_t n_apps, size_t *granted, size_t max_granted,
                        unsigned *skipped_out);

#endif
