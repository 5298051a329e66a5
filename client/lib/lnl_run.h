/*
 * lnl_run.h - ember_lnl's side of the plf accelerator (lnl.c, and so
 * `ember lnl`): one instance (a state block) on the NAM or the embedded
 * engine, its tips in one cacheable input block, and trees scored in
 * batches through plf_plan's budgeted planner. Internal to libember.
 *
 * The instance: tips = taxa, partials = taxa + vectors. The K taxa with
 * compact states come first, tip buffers 0..K-1, as states-only tips
 * (compact = states_only_tips = K: the block holds no partials for them);
 * the taxa with partial ambiguity codes follow, K..taxa-1, with their
 * partials; each group in taxon order. The planner numbers tips by taxon:
 * the ops of each batch are renumbered taxon -> tip buffer
 * (plf_plan_ops_map_tips), and the setup sets each taxon's buffer. Then
 * one scale buffer per planner slot (cumulative factors, plf_plan.h); 2n-1
 * matrices; the model's categories (+I's zero-rate one included); one
 * eigen system. The state block is thus about vectors partials buffers
 * (plus one per taxon with partials) and taxa x patterns tip states. The first task (the setup) sets the tips
 * from the input block, the eigen system, frequencies, category rates and
 * weights and pattern weights; every later task is a batch of trees: each
 * tree's matrix updates, its partials ops (each followed by the
 * accumulation of its children's scale buffers into its own) and a Lnl of
 * its root with the root's cumulative scale buffer.
 *
 * One task at a time runs on the state block, so the planner's book of
 * resident vectors always describes the block. When a batch fails, the
 * planner forgets everything, the block is restored (or made anew when it
 * was lost with its connection), the setup runs again and the batch is
 * tried once more.
 *
 * This file knows nothing of alignments or models: lnl.c hands it the
 * numbers. It does not include plf_alignment.h (whose PLF_MAX_STATES
 * differs from plf_layout.h's).
 */
#ifndef EMBER_LIB_LNL_RUN_H
#define EMBER_LIB_LNL_RUN_H

#include <stddef.h>
#include <stdint.h>

#include "ember/ember.h"
#include "plf/plf_tree.h"

/* What the setup task sets; arrays belong to the caller and must live as
 * long as the run (the setup may run again after a failure). */
typedef struct lnl_setup {
  int taxa, states, patterns, categories;
  int single;                  /* 1: single-precision buffers */
  unsigned threads;            /* Params.threads; 0: the accelerator's 1 */
  const char *platform;        /* required platform kind, or NULL */
  /* the input block: taxon i's data at tip_offset[i], int32 states
   * (patterns of them) or, when tip_partials[i], doubles (patterns x
   * states) */
  const void *tips;
  size_t tips_size;
  const uint64_t *tip_offset;
  const unsigned char *tip_partials;
  const double *evec, *ivec, *eval; /* S x S, S x S, S */
  const double *freqs;              /* S */
  const double *cat_rates, *cat_weights; /* categories */
  const double *pattern_weights;    /* patterns */
} lnl_setup;

/* What the run did, for the summary line. */
typedef struct lnl_stats {
  size_t tasks;                     /* tasks that succeeded */
  size_t tasks_cpu, tasks_opencl, tasks_fpga_emu, tasks_other;
  size_t tasks_failed;              /* tasks that failed (retried or not) */
  size_t setups;                    /* setup tasks (1 + one per recovery) */
  uint64_t exec_ns;                 /* summed over the tasks */
  uint64_t state_bytes;             /* the state block's size */
  uint64_t ops, recomputed, hits;   /* the planner's partials ops */
  int vectors;                      /* the planner's slots */
} lnl_stats;

typedef struct lnl_run lnl_run;

/* ember__lnl_min_vectors - the fewest slots the planner takes for taxa:
 * ceil(log2 taxa) + 2. */
int ember__lnl_min_vectors(int taxa);

/* ember__lnl_partials_bytes - bytes of one partials buffer of this shape. */
uint64_t ember__lnl_partials_bytes(const lnl_setup *s);

/* ember__lnl_state_bytes - the state block's size for vectors slots; 0 when the
 * shape is out of the accelerator's bounds (err says why). */
uint64_t ember__lnl_state_bytes(const lnl_setup *s, int vectors, char *err,
                                size_t err_len);

/* ember__lnl_vectors_needed - the default slots for scoring trees in batches of
 * batch: the fewest with which the planner recomputes nothing (found by
 * planning without running, on the file's first 2^21 / taxa trees at
 * most), but no more than cap (unless the minimum is); -1 when out of
 * memory. */
int ember__lnl_vectors_needed(plf_tree *const *trees, size_t n, int taxa,
                              size_t batch, int cap);

/* ember__lnl_run_create - make the input and state blocks and run the setup.
 * Returns 0, or an EMBER_E* code with the reason in err. */
int ember__lnl_run_create(ember_client *client, const lnl_setup *s,
                          int vectors, lnl_run **out, char *err,
                          size_t err_len);

/* ember__lnl_run_batch - score n trees (over the run's taxa): lnl[i] gets tree
 * i's log-likelihood, site (when not NULL) n x patterns pattern
 * log-likelihoods. Returns 0; or, after the retry failed too, an EMBER_E*
 * code with the reason in err, *fatal set when the run cannot go on (the
 * instance could not be set up again). */
int ember__lnl_run_batch(lnl_run *r, plf_tree *const *trees, size_t n,
                         double *lnl, double *site, int *fatal, char *err,
                         size_t err_len);

/* ember__lnl_run_batch_size - trees per task for this shape: enough work per
 * round trip, results well within a frame. */
size_t ember__lnl_run_batch_size(const lnl_setup *s, int site_lnl);

/* ember__lnl_run_stats - what the run did so far. */
void ember__lnl_run_stats(const lnl_run *r, lnl_stats *out);

/* ember__lnl_run_destroy - release the blocks and the planner; NULL is a
 * no-op. */
void ember__lnl_run_destroy(lnl_run *r);

#endif
