/*
 * plf_layout.h - where each of a BEAGLE-style instance's buffers lives in
 * the plf accelerator's state block (plf.proto's Instance). The layout
 * follows from the instance's shape alone, so the client that creates the
 * block, plan() that checks it and every kernel that reads it agree.
 *
 * Regions, in order, each starting on a 64-byte boundary (whole cache
 * lines, and aligned loads for every SIMD width):
 *   flags         what was set (PLF_SET_*): a new block is all zeros, and
 *                 pattern weights default to 1 and every pattern to
 *                 partition 0 until set                      (uint32)
 *   partials      (partials - states_only) x categories x patterns
 *                 x states: buffer b >= states_only at b - states_only;
 *                 tips below states_only hold compact states only and
 *                 have no partials                            (real)
 *   tip states    compact x patterns                         (int32)
 *   tip kinds     tips: 1 where the tip buffer holds states  (int32)
 *   matrices      matrices x categories x states x states    (real)
 *   scales        scale_buffers x patterns, log factors      (real)
 *   eigens        eigens x (2 states^2 + states)             (double)
 *   frequencies   eigens x states                            (double)
 *   cat weights   eigens x categories                        (double)
 *   cat rates     rate_sets x categories                     (double)
 *   pattern wts   patterns                                   (double)
 *   partitions    partitions x 2: first and end pattern      (uint32)
 *   site lnl      patterns, the last Lnl's                   (double)
 * real is double, or float in single precision. Model values stay double
 * whatever the precision, as BEAGLE takes them.
 */
#ifndef EMBER_PLF_LAYOUT_H
#define EMBER_PLF_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

/* Bounds on an instance's shape: a state block past them is refused before
 * anything is allocated. */
#define PLF_MAX_STATES 64
#define PLF_MAX_CATEGORIES 64
#define PLF_MAX_PATTERNS (1u << 26)
#define PLF_MAX_BUFFERS (1u << 20)   /* partials, matrices, scales each */
#define PLF_MAX_SETS 4096            /* eigens, rate sets, partitions */
#define PLF_MAX_STATE_BYTES ((uint64_t)1 << 40)

typedef struct plf_shape {
  uint32_t states, patterns, categories;
  uint32_t tips, partials, compact;
  uint32_t eigens, matrices, scale_buffers, rate_sets, partitions;
  int single; /* 1: float buffers, 0: double */
  uint32_t states_only; /* tips 0..states_only-1: states, no partials */
} plf_shape;

/* flags[0] bits */
#define PLF_SET_PATTERN_WEIGHTS 1u
#define PLF_SET_PARTITIONS 2u

typedef struct plf_layout {
  size_t real;                   /* 8 or 4 */
  size_t partials_stride;        /* bytes of one partials buffer */
  size_t matrix_stride;          /* bytes of one matrix buffer (all cats) */
  size_t scale_stride;           /* bytes of one scale buffer */
  size_t eigen_stride;           /* bytes of one eigen system */
  uint64_t flags, partials, tip_states, tip_kinds, matrices, scales, eigens;
  uint64_t frequencies, cat_weights, cat_rates, pattern_weights;
  uint64_t partition_ranges, site_lnl;
  uint64_t total;                /* the state block's size */
  uint32_t states_only;          /* the shape's: first buffer with partials */
} plf_layout;

/* plf_layout_compute - check d against the bounds above (tips <= partials,
 * states_only <= compact <= tips, at least one of each set) and lay it
 * out. Returns 0, or EMBER_EPARAM with the reason in err. */
int plf_layout_compute(const plf_shape *d, plf_layout *l, char *err,
                       size_t err_len);

/* plf_partials_at - the offset of partials buffer b in the state block;
 * b must have partials (b >= l->states_only, checked by the caller). */
static inline uint64_t plf_partials_at(const plf_layout *l, uint32_t b) {
  return l->partials + (uint64_t)(b - l->states_only) * l->partials_stride;
}

#endif
