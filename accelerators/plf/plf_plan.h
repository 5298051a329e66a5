/*
 * plf_plan.h - turns trees into BEAGLE-style operation lists that use at
 * most max_vectors ancestral partials buffers, recomputing what had to be
 * dropped (Izquierdo-Carrasco, Gagneur, Stamatakis 2012, "Trading running
 * time for memory in phylogenetic likelihood computations").
 *
 * The planner is pure: it neither holds nor computes likelihoods. It keeps
 * the book of which subtree's partials vector each buffer ("slot") holds,
 * and emits what an executor must run so that a tree's root vector is in a
 * buffer. Across trees and calls it reuses every vector still resident: a
 * batch of trees sharing subtrees (the NNI neighbours of a tree) only has
 * the vectors it lacks computed.
 *
 * Buffers, numbered as BEAGLE numbers them:
 *   partials  0 .. n-1 are the tips (taxon i, plf_tree.h); tip_count + s
 *             is slot s, 0 <= s < plf_planner_vectors();
 *   scale     s is slot s's: the cumulative log scale factors of the
 *             vector in slot s (its own and all of its subtree's);
 *   matrices  the node id whose branch it is, 0 <= m < 2n-1.
 * An instance needs tip_count + vectors partials buffers, vectors scale
 * buffers, 2n-1 matrix buffers, and BEAGLE_FLAG_SCALERS_LOG (so that
 * scale buffers add up).
 *
 * Executing a plan, one tree segment (plf_plan_tree) after the other, in
 * order:
 *   1. the segment's matrix updates: matrix <- P(length);
 *   2. its ops in order; after each op whose dest_scale_write is not
 *      PLF_NONE, add the child1_scale and child2_scale buffers that are not
 *      PLF_NONE into dest_scale_write (beagleAccumulateScaleFactors), so
 *      that it holds the subtree's cumulative factors. An op may overwrite
 *      the buffers a previous op read: run them one at a time, or in runs
 *      that respect this;
 *   3. the tree's log-likelihood from partials buffer root with cumulative
 *      scale buffer root_scale (beagleCalculateRootLogLikelihoods).
 * Vectors computed by a segment stay valid for later segments and later
 * calls as long as the executor keeps its buffers, the alignment and the
 * model (matrices are keyed by branch length alone): when any of these
 * change, call plf_planner_reset.
 *
 * Budget. Ops are planned largest subtree first, so that a tree of n taxa
 * needs at most floor(log2 n) + 1 slots at a time; plf_plan_min_vectors(n)
 * = ceil(log2 n) + 2 always works. When a slot is needed and none is free,
 * the unpinned resident vector with the minimum recomputation cost is
 * replaced: the paper's MRC rule, the cost of a vector being the size of
 * its subtree when it will be read again, and nothing when it will not.
 * plf_planner_add_trees looks ahead over its batch (plans it as an
 * unbounded planner would, without emitting anything) to know which
 * vectors the rest of the batch reads; the order of replacement is
 *   1. vectors that neither this tree nor a later one of the batch reads
 *      (the paper's priority list): first those this tree did not use,
 *      those used by the fewest trees first (one-off vectors, such as an
 *      NNI neighbour's path to the root), then the longest unused, then
 *      the smallest subtree; then those this tree used, smallest first;
 *   2. vectors a later tree of the batch reads: smallest subtree first,
 *      then the one read latest;
 *   3. vectors this tree still needs: smallest subtree first.
 * A single tree (plf_planner_add_tree) has no lookahead: nothing is in 2.
 * The larger the batch, the better the choices; the order of the trees
 * matters too: trees that share most subtrees should come together (as
 * plf_nni_neighbour's order does).
 *
 * Resident vectors are found by a 128-bit hash of the subtree: tips by
 * taxon, internal nodes by their two children's hashes and exact branch
 * lengths, in a canonical order, so the same subtree hashes alike in any
 * tree, whichever child is written first.
 *
 * Thread safety: a planner is used by one thread at a time; planners are
 * independent of each other.
 */
#ifndef EMBER_PLF_PLAN_H
#define EMBER_PLF_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "plf_tree.h"

#define PLF_PLAN_UNBOUNDED 0         /* max_vectors: grow, never evict */
#define PLF_PLAN_NO_SCALING 1u       /* flags: all scale indices PLF_NONE */

/* One partials update, BeagleOperation's seven fields in BEAGLE's order,
 * then the scale buffers of the children to add after it (see above). */
typedef struct plf_op {
  int dest;                  /* partials written: tip_count + slot */
  int dest_scale_write;      /* its scale buffer (slot), or PLF_NONE */
  int dest_scale_read;       /* always PLF_NONE */
  int child1;                /* partials read */
  int child1_matrix;         /* the child's branch */
  int child2;
  int child2_matrix;
  int child1_scale;          /* cumulative scale of child1, or PLF_NONE */
  int child2_scale;          /*   (tips and unscaled plans have none) */
} plf_op;

typedef struct plf_matrix_update {
  int matrix;                /* the node whose branch it is */
  double length;
} plf_matrix_update;

typedef struct plf_plan_counts {
  uint64_t trees;            /* trees planned */
  uint64_t ops;              /* plf_op emitted */
  uint64_t matrices;         /* matrix updates emitted */
  uint64_t hits;             /* resident vectors used instead of computed */
  uint64_t recomputed;       /* ops rebuilding a vector this planner had
                                evicted (among its last 16 * max_vectors,
                                at least 4096, evictions) */
  uint64_t evictions;        /* resident vectors replaced */
} plf_plan_counts;

/* One tree's part of a plan. */
typedef struct plf_plan_tree {
  size_t first_matrix, matrix_count; /* in plan->matrices */
  size_t first_op, op_count;         /* in plan->ops */
  int root;                  /* partials buffer of the root's vector */
  int root_scale;            /* its cumulative scale buffer, or PLF_NONE */
  plf_plan_counts counts;    /* this tree's (trees = 1) */
} plf_plan_tree;

/* A plan: arrays owned by the plan, appended to by the planner. */
typedef struct plf_plan {
  plf_op *ops;
  size_t op_count, op_cap;
  plf_matrix_update *matrices;
  size_t matrix_count, matrix_cap;
  plf_plan_tree *trees;
  size_t tree_count, tree_cap;
} plf_plan;

/* plf_plan_init: an empty plan (no allocation). */
void plf_plan_init(plf_plan *plan);

/* plf_plan_clear: empties the plan, keeping its memory. */
void plf_plan_clear(plf_plan *plan);

/* plf_plan_free: frees the plan's arrays and empties it; NULL is a no-op. */
void plf_plan_free(plf_plan *plan);

typedef struct plf_planner plf_planner;

/* plf_plan_min_vectors: ceil(log2 tip_count) + 2, the smallest max_vectors
 * plf_planner_create takes for tip_count taxa; EMBER_EPARAM when tip_count
 * is outside [2, PLF_TREE_MAX_TIPS]. */
int plf_plan_min_vectors(int tip_count);

/* plf_planner_create: a planner for trees over tip_count taxa that uses at
 * most max_vectors slots (PLF_PLAN_UNBOUNDED: as many as it needs, never
 * evicting). flags: 0 or PLF_PLAN_NO_SCALING. *out is owned by the caller
 * (plf_planner_destroy). Returns 0, EMBER_EPARAM (tip_count out of range,
 * max_vectors below plf_plan_min_vectors(tip_count), unknown flags) or
 * EMBER_ENOMEM. */
int plf_planner_create(int tip_count, int max_vectors, unsigned flags,
                       plf_planner **out);

/* plf_planner_destroy: frees p; NULL is a no-op. */
void plf_planner_destroy(plf_planner *p);

/* plf_planner_reset: forgets every resident vector (the executor's
 * buffers, alignment or model changed); counts are kept. */
void plf_planner_reset(plf_planner *p);

/* plf_planner_add_tree: appends to plan the segment that puts t's root
 * vector in a buffer (no op at all when it is resident already). t is a
 * complete tree over the planner's taxa and is not kept.
 * Returns 0, EMBER_EPARAM (incomplete tree, other taxa) or EMBER_ENOMEM;
 * on error the plan is as it was and the planner has forgotten its
 * resident vectors (as plf_planner_reset). */
int plf_planner_add_tree(plf_planner *p, const plf_tree *t, plf_plan *plan);

/* plf_planner_add_trees: plf_planner_add_tree for count trees in order,
 * one segment each; on error none of them is added. */
int plf_planner_add_trees(plf_planner *p, const plf_tree *const *trees,
                          size_t count, plf_plan *plan);

/* plf_planner_vectors: the slots used so far, the partials (beyond the
 * tips) and scale buffers an executor needs: at most max_vectors; with
 * PLF_PLAN_UNBOUNDED, what the plans so far needed. */
int plf_planner_vectors(const plf_planner *p);

/* plf_planner_matrices: the matrix buffers an executor needs, 2n-1. */
int plf_planner_matrices(const plf_planner *p);

/* plf_planner_counts: the totals over everything planned since creation. */
void plf_planner_counts(const plf_planner *p, plf_plan_counts *out);

#endif
