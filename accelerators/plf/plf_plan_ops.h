/*
 * plf_plan_ops.h - a plan of plf_plan.h as the plf accelerator's task ops
 * (plf.proto), in plf_plan.h's order of execution: per tree segment an
 * UpdateMatrices of its matrix updates; its partials ops in UpdatePartials
 * runs, each run closed by the first op whose children's cumulative scale
 * buffers are to be added to its own, followed by that ScaleOp ACCUMULATE
 * (so that the addition comes before a later op overwrites any of those
 * buffers); then a Lnl of the root buffer with its cumulative scale buffer.
 *
 * Tips are buffers 0..n-1 in taxon order, as the planner numbers them;
 * plf_plan_ops_map_tips renumbers them for an instance that orders its
 * tips otherwise (ember lnl's, states-only tips first).
 *
 * For any client of the accelerator that runs plans: `ember lnl`, and the
 * benches that run ember's executor on the same ops as BEAGLE. The ops
 * point into arrays owned by the plf_plan_ops; pack them into a Params
 * (ops = list, n_ops = n) before plf_plan_ops_free.
 */
#ifndef EMBER_PLF_PLAN_OPS_H
#define EMBER_PLF_PLAN_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "accelerators/plf/plf.pb-c.h"
#include "plf_plan.h"

/* Every sub-message of a plan's ops, allocated at once from its counts. */
typedef struct plf_plan_ops {
  Ember__Plf__Op **list;        /* the ops in order: n of them */
  size_t n;
  Ember__Plf__Op *ops;
  Ember__Plf__UpdateMatrices *um;
  uint32_t *mat_idx;
  double *mat_len;
  Ember__Plf__UpdatePartials *up;
  Ember__Plf__PartialsOp *po;
  Ember__Plf__PartialsOp **pl;
  Ember__Plf__ScaleOp *sc;
  uint32_t *sc_idx;
  Ember__Plf__Lnl *lnl;
  Ember__Plf__LnlTerm *term;
  Ember__Plf__LnlTerm **tl;
} plf_plan_ops;

/* plf_plan_ops_build - plan's segments as ops into *out (owned by the
 * caller: plf_plan_ops_free); site_lnl: each Lnl also returns the site
 * log-likelihoods. Returns 0 or EMBER_ENOMEM (nothing to free then). */
int plf_plan_ops_build(const plf_plan *plan, int site_lnl, plf_plan_ops *out);

/* plf_plan_ops_map_tips - renumbers the tips that m's ops read, for an
 * instance whose tip buffers are not in taxon order: partials buffer t <
 * n_tips (taxon t, plf_plan.h) becomes tip_buffer[t], a permutation of
 * 0..n_tips-1; slots (n_tips and up) and matrices (node ids) stay. */
void plf_plan_ops_map_tips(plf_plan_ops *m, const uint32_t *tip_buffer,
                           uint32_t n_tips);

/* plf_plan_ops_free - frees what plf_plan_ops_build allocated and empties
 * *m; NULL is a no-op. */
void plf_plan_ops_free(plf_plan_ops *m);

#endif
