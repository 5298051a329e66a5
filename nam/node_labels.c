/* node_labels.c - the labels a node offers, and which it serves now (see
 * node_labels.h). */
#include "node_labels.h"

#include <stdio.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "platform_kinds.h"

#define MAX_PLATFORMS 16

/* items: n strings of NAM_LABEL_MAX bytes each */
static int has(const char *items, size_t n, const char *s) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(items + i * NAM_LABEL_MAX, s) == 0) return 1;
  return 0;
}

/* Append unless present; 0, or EMBER_ETOOBIG when full. */
static int add(nam_node_labels *l, const char *label) {
  if (has(l->items[0], l->n, label)) return 0;
  if (l->n == NAM_MAX_LABELS || strlen(label) >= NAM_LABEL_MAX)
    return EMBER_ETOOBIG;
  snprintf(l->items[l->n++], NAM_LABEL_MAX, "%s", label);
  return 0;
}

static int pair_of(const nam_platform_status *p, const char *acc) {
  for (unsigned k = 0; k < p->n_pairs; k++)
    if (strcmp(p->pairs[k].accelerator, acc) == 0) return (int)k;
  return -1;
}

/* One label per accelerator some platform runs, then ACC@KIND per
 * device kind that runs it (each kind once, however many devices). */
static int derive(nam_engine *e, nam_node_labels *l) {
  const acc_descriptor *accs[NAM_MAX_PAIRS];
  size_t n_acc = nam_engine_accelerators(e, accs, NAM_MAX_PAIRS);
  nam_platform_status ps[MAX_PLATFORMS];
  size_t np = nam_engine_platforms(e, ps, MAX_PLATFORMS);
  int rc = 0;
  for (size_t a = 0; a < n_acc; a++) {
    int runs = 0;
    for (size_t i = 0; i < np; i++) runs |= pair_of(&ps[i], accs[a]->name) >= 0;
    if (runs && add(l, accs[a]->name)) rc = EMBER_ETOOBIG;
    for (size_t i = 0; i < np; i++) {
      if (!platform_kind_is_device(ps[i].kind) ||
          pair_of(&ps[i], accs[a]->name) < 0)
        continue;
      char label[NAM_LABEL_MAX];
      snprintf(label, sizeof label, "%s@%s", accs[a]->name, ps[i].kind);
      if (add(l, label)) rc = EMBER_ETOOBIG;
    }
  }
  return rc;
}

int nam_node_labels_build(nam_engine *engine, const config_list *configured,
                          const char *const *extra, size_t n_extra,
                          nam_node_labels *out) {
  int rc = 0;
  out->n = 0;
  if (configured && configured->count) {
    for (size_t i = 0; i < configured->count; i++)
      if (add(out, configured->items[i])) rc = EMBER_ETOOBIG;
  } else if (engine) {
    rc = derive(engine, out);
  }
  for (size_t i = 0; i < n_extra; i++)
    if (add(out, extra[i])) rc = EMBER_ETOOBIG;
  return rc;
}

static void add_disabled(nam_disabled *d, const char *name) {
  if (d->n < NAM_MAX_DISABLED && !has(d->items[0], d->n, name))
    snprintf(d->items[d->n++], NAM_LABEL_MAX, "%s", name);
}

void nam_disabled_now(nam_engine *engine, nam_disabled *out) {
  out->n = 0;
  const acc_descriptor *accs[NAM_MAX_PAIRS];
  size_t n_acc = nam_engine_accelerators(engine, accs, NAM_MAX_PAIRS);
  nam_platform_status ps[MAX_PLATFORMS];
  size_t np = nam_engine_platforms(engine, ps, MAX_PLATFORMS);
  for (size_t a = 0; a < n_acc; a++) {
    const char *acc = accs[a]->name;
    int supported = 0, ready = 0;
    for (size_t i = 0; i < np; i++) {
      int k = pair_of(&ps[i], acc);
      if (k < 0) continue;
      supported = 1;
      /* its kind is gone for acc when no platform of the kind is ready */
      int kind_ready = 0;
      for (size_t j = 0; j < np; j++) {
        int kj = pair_of(&ps[j], acc);
        if (kj >= 0 && strcmp(ps[j].kind, ps[i].kind) == 0 &&
            strcmp(ps[j].state, "ready") == 0 &&
            strcmp(ps[j].pairs[kj].state, "ready") == 0)
          kind_ready = 1;
      }
      if (kind_ready) {
        ready = 1;
      } else {
        char name[NAM_LABEL_MAX];
        snprintf(name, sizeof name, "%s@%s", acc, ps[i].kind);
        add_disabled(out, name);
      }
    }
    if (supported && !ready) add_disabled(out, acc);
  }
}

int nam_label_served(const nam_node_labels *labels, const nam_disabled *dis,
                     const char *label) {
  if (!has(labels->items[0], labels->n, label)) return 0;
  return !dis || !has(dis->items[0], dis->n, label);
}
