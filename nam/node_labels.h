/*
 * node_labels.h - the labels this node offers at the GAM, and which of
 * them it serves now.
 *
 * A label is a name apps ask the GAM for ("sw", "sw@fpga-emu", or any name
 * an admin chose). The configured set is the `labels` key, or when that is
 * empty one label per accelerator the engine serves plus ACC@KIND for each
 * non-cpu platform kind that can run it; each --label flag adds one.
 *
 * What is disabled comes from the engine's pair health: ACC@KIND when no
 * platform of that kind can run ACC now (its pairs disabled or probing, or
 * the platform down), and ACC itself when no platform at all can. A label
 * equal to a disabled name is not served until the engine re-enables it;
 * other labels are always served.
 *
 * Threads: the loop thread; the engine calls are thread-safe snapshots.
 */
#ifndef EMBER_NAM_NODE_LABELS_H
#define EMBER_NAM_NODE_LABELS_H

#include <stddef.h>

#include "config.h"
#include "engine.h"

#define NAM_LABEL_MAX 65       /* 64 characters and the NUL */
#define NAM_MAX_LABELS 128
#define NAM_MAX_DISABLED 64

typedef struct nam_node_labels {
  char items[NAM_MAX_LABELS][NAM_LABEL_MAX];
  size_t n;
} nam_node_labels;

/* The names the engine reports disabled now ("sw@fpga-emu", "sw"). */
typedef struct nam_disabled {
  char items[NAM_MAX_DISABLED][NAM_LABEL_MAX];
  size_t n;
} nam_disabled;

/*
 * nam_node_labels_build - configured (the labels key; empty: derived from
 * engine) plus extra[0..n_extra) (the --label flags), without duplicates,
 * in that order. Labels beyond NAM_MAX_LABELS are dropped (returns
 * EMBER_ETOOBIG then, with the rest filled in), else 0.
 */
int nam_node_labels_build(nam_engine *engine, const config_list *configured,
                          const char *const *extra, size_t n_extra,
                          nam_node_labels *out);

/* nam_disabled_now - snapshot of what the engine has disabled. */
void nam_disabled_now(nam_engine *engine, nam_disabled *out);

/* nam_label_served - 1 when label is one of labels and not disabled. */
int nam_label_served(const nam_node_labels *labels, const nam_disabled *dis,
                     const char *label);

#endif
