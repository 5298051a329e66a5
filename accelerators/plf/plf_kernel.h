/*
 * plf_kernel.h - the compute kernels of the "plf" accelerator: the
 * phylogenetic likelihood of Felsenstein's pruning algorithm, as BEAGLE 3.1
 * computes it (beagleUpdateTransitionMatrices, beagleUpdatePartials,
 * beagle{Accumulate,Remove,Reset}ScaleFactors,
 * beagleCalculate{Root,Edge}LogLikelihoods), in double and in single
 * precision.
 *
 * Data layout (BEAGLE's), for S states, P patterns, C rate categories:
 *   partials     [C][P][S]   conditional likelihoods of a node's subtree
 *   tip states   [P]         int per pattern; a value outside [0, S) is
 *                            missing data (all states possible: the child's
 *                            term is exactly 1, as in BEAGLE)
 *   matrices     [C][S][S]   transition probabilities, row = parent state,
 *                            column = child state
 *   scale        [P]         LOG scale factors (BEAGLE_FLAG_SCALERS_LOG)
 *   cumulative   [P]         sum of log scale factors below a node
 *   category weights [C], category rates [C], state frequencies [S],
 *   pattern weights [P].
 *
 * Every per-pattern operation takes a pattern range [p0, p1) and touches only
 * those patterns of its buffers (which are still laid out for all P
 * patterns): callers thread over patterns by giving each thread its own
 * range. The *_mt functions do that with pthreads for the whole range.
 *
 * Variants: a scalar reference (any S, any C) and SIMD variants (AVX2+FMA,
 * AVX-512) with fast paths for S = 4 and vectorised loops for other S up to
 * PLF_SIMD_MAX_STATES (larger S runs the scalar code). The default variant
 * is the widest this CPU runs, or the one named by the environment variable
 * EMBER_PLF_ISA (scalar, avx2 or avx512) when this CPU runs it; it is chosen
 * once per process. Every operation takes the variant as its first argument
 * (NULL: the default), so that a test can compare them in one process.
 *
 * Results: variants agree with each other and with BEAGLE to rounding
 * (summation order and FMA differ), not bit for bit.
 *
 * Errors: 0, or EMBER_EINVAL (ember/ember_errors.h) for a NULL required
 * pointer, dimensions below 1, a range outside [0, P] or p0 > p1; nothing
 * is written then.
 *
 * Thread safety: every function may be called from any thread; calls that
 * write disjoint patterns (or different buffers) may run concurrently. The
 * library keeps no state but the chosen default variant (set once). Buffers
 * stay owned by the caller; nothing is allocated (the _mt functions
 * start threads and join them before they return).
 */
#ifndef EMBER_PLF_KERNEL_H
#define EMBER_PLF_KERNEL_H

#include <stddef.h>

/* Largest S that the SIMD variants vectorise (61 codons fit). */
#define PLF_SIMD_MAX_STATES 64

/* ---- variants -------------------------------------------------------- */

typedef enum plf_isa {
  PLF_ISA_SCALAR = 0,
  PLF_ISA_AVX2 = 1,     /* AVX2 + FMA */
  PLF_ISA_AVX512 = 2,   /* AVX-512 F, BW, VL */
  PLF_ISA_COUNT
} plf_isa;

/* One variant's kernels (opaque, static: never freed). */
typedef struct plf_kernels plf_kernels;

/* plf_kernels_get: the variant for isa when it is built into this binary
 * and this CPU runs it, else NULL. The scalar one always exists. */
const plf_kernels *plf_kernels_get(plf_isa isa);

/* plf_kernels_default: the variant NULL stands for (see above). */
const plf_kernels *plf_kernels_default(void);

/* plf_kernels_isa: which ISA k is (k NULL: the default's). */
plf_isa plf_kernels_isa(const plf_kernels *k);

/* plf_isa_name: "scalar", "avx2", "avx512"; NULL when isa is out of range.
 * plf_isa_parse: the reverse; 0 or EMBER_EINVAL. */
const char *plf_isa_name(plf_isa isa);
int plf_isa_parse(const char *name, plf_isa *out);

/* ---- dimensions ------------------------------------------------------ */

typedef struct plf_dims {
  int states;       /* S >= 1 */
  int patterns;     /* P >= 1 */
  int categories;   /* C >= 1 */
} plf_dims;

/* ---- transition matrices --------------------------------------------- */

/* plf_transition_matrices_d: for each category c, the transition matrix
 * P(c) = E diag(exp(eval * rates[c] * t)) Einv, negative entries clamped to
 * 0 (as BEAGLE does), into p [C][S][S]; when d1 (d2) is not NULL, the first
 * (second) derivative with respect to t, E diag(eval r [eval r] exp(...))
 * Einv, unclamped, into d1 (d2) [C][S][S].
 *   evec [S][S]  eigenvectors (column k is the vector of eval[k])
 *   ivec [S][S]  their inverse
 *   eval [S]     eigenvalues (real)
 *   rates [C]    category rates; t: the branch length (>= 0)
 * Output matrices must not overlap the inputs. Returns 0 or EMBER_EINVAL. */
int plf_transition_matrices_d(int states, int categories, const double *evec,
                              const double *ivec, const double *eval,
                              const double *rates, double t, double *p,
                              double *d1, double *d2);
int plf_transition_matrices_f(int states, int categories, const float *evec,
                              const float *ivec, const float *eval,
                              const float *rates, double t, float *p,
                              float *d1, float *d2);

/* ---- partials update (beagleUpdatePartials) --------------------------- */

/* A child of a node: its partials, or its tip states, and the matrices of
 * the edge above it. Exactly one of partials and states is set. */
typedef struct plf_child_d {
  const double *partials;   /* [C][P][S], or NULL */
  const int *states;        /* [P], or NULL */
  const double *matrices;   /* [C][S][S] */
} plf_child_d;

typedef struct plf_child_f {
  const float *partials;
  const int *states;
  const float *matrices;
} plf_child_f;

/* One update: dest = (M1 x child1) .* (M2 x child2), per category and
 * pattern, where (M x child)[i] = sum_j M[i][j] child[j] (a tip state s
 * gives M[i][s], a missing one 1).
 * Rescaling (when scale is not NULL): each pattern's values, over all
 * categories and states, are divided by their largest (1 when that is 0),
 * whose log goes to scale[p]; when cumulative is not NULL it is also added
 * to cumulative[p] (beagleUpdatePartials' cumulativeScaleIndex).
 * dest must not overlap the children; scale and cumulative must not
 * overlap each other or the partials. */
typedef struct plf_update_d {
  double *dest;             /* [C][P][S] out */
  plf_child_d child1, child2;
  double *scale;            /* [P] out, or NULL: no rescaling */
  double *cumulative;       /* [P] in/out, or NULL; needs scale */
} plf_update_d;

typedef struct plf_update_f {
  float *dest;
  plf_child_f child1, child2;
  float *scale;
  float *cumulative;
} plf_update_f;

/* plf_update_partials_d: op for the patterns [p0, p1) with variant k
 * (NULL: the default). Returns 0 or EMBER_EINVAL. */
int plf_update_partials_d(const plf_kernels *k, const plf_dims *d,
                          const plf_update_d *op, int p0, int p1);
int plf_update_partials_f(const plf_kernels *k, const plf_dims *d,
                          const plf_update_f *op, int p0, int p1);

/* ---- scale factors (beagle{Accumulate,Remove,Reset}ScaleFactors) ------- */

/* cumulative[p] += (or -=) the sum of scales[0..count)[p], for p in
 * [p0, p1), count >= 0; reset sets cumulative[p] = 0. Not variant-specific
 * (memory-bound loops the compiler vectorises). 0 or EMBER_EINVAL. */
int plf_scale_accumulate_d(double *cumulative, const double *const *scales,
                           int count, int p0, int p1);
int plf_scale_remove_d(double *cumulative, const double *const *scales,
                       int count, int p0, int p1);
int plf_scale_reset_d(double *cumulative, int p0, int p1);
int plf_scale_accumulate_f(float *cumulative, const float *const *scales,
                           int count, int p0, int p1);
int plf_scale_remove_f(float *cumulative, const float *const *scales,
                       int count, int p0, int p1);
int plf_scale_reset_f(float *cumulative, int p0, int p1);

/* ---- log-likelihoods (beagleCalculate{Root,Edge}LogLikelihoods) -------- */

/* What integrates the per-pattern likelihood L[p] into log-likelihoods:
 *   site[p] = log(L[p]) + cumulative[p] (0 when cumulative is NULL)
 *   *lnl    = sum over [p0, p1) of pattern_weights[p] * site[p]
 * accumulated in double. A pattern with L = 0 gives -inf (BEAGLE reports
 * BEAGLE_ERROR_FLOATING_POINT there; here the caller checks *lnl). */
typedef struct plf_integrate_d {
  const double *category_weights;   /* [C] */
  const double *frequencies;        /* [S] */
  const double *cumulative;         /* [P], or NULL */
  const double *pattern_weights;    /* [P], or NULL: all 1 */
  double *site_lnl;                 /* [P] out (site[p]), or NULL */
} plf_integrate_d;

typedef struct plf_integrate_f {
  const float *category_weights;
  const float *frequencies;
  const float *cumulative;
  const float *pattern_weights;
  double *site_lnl;
} plf_integrate_f;

/* plf_root_lnl_d: L[p] = sum_c w[c] sum_s pi[s] root[c][p][s]; the
 * log-likelihood of [p0, p1) into *lnl. 0 or EMBER_EINVAL. */
int plf_root_lnl_d(const plf_kernels *k, const plf_dims *d,
                   const double *root, const plf_integrate_d *in, int p0,
                   int p1, double *lnl);
int plf_root_lnl_f(const plf_kernels *k, const plf_dims *d,
                   const float *root, const plf_integrate_f *in, int p0,
                   int p1, double *lnl);

/* plf_edge_lnl_d: the log-likelihood across an edge, parent partials
 * [C][P][S] above it and child (partials or tip states, with the edge's
 * matrices) below: L[p] = sum_c w[c] sum_i pi[i] parent[c][p][i]
 * (M x child)[c][p][i]; in->cumulative holds both sides' scale sums.
 * 0 or EMBER_EINVAL. */
int plf_edge_lnl_d(const plf_kernels *k, const plf_dims *d,
                   const double *parent, const plf_child_d *child,
                   const plf_integrate_d *in, int p0, int p1, double *lnl);
int plf_edge_lnl_f(const plf_kernels *k, const plf_dims *d,
                   const float *parent, const plf_child_f *child,
                   const plf_integrate_f *in, int p0, int p1, double *lnl);

/* ---- threaded over patterns ------------------------------------------- */

/* The values (C x S per pattern) a thread gets at least, here and in the
 * plf executor's blocks: for less, starting and joining a thread costs
 * about what it saves (tens of microseconds). */
#define PLF_THREAD_MIN_VALUES 32768

/* The same over all P patterns, split into up to nthreads contiguous ranges
 * (each a multiple of 64 patterns and at least 32,768 values, C x S per
 * pattern, but the last: a smaller problem takes fewer threads, none but
 * the caller's below that, as starting a thread costs about what it saves)
 * run on new threads and the caller's; nthreads <= 1 runs on the caller's
 * thread only. The total lnl is summed in range order (the same for the
 * same nthreads and dimensions).
 * nthreads is capped at 256; a range whose thread cannot start runs on
 * the caller's thread. 0 or EMBER_EINVAL. */
int plf_update_partials_mt_d(const plf_kernels *k, const plf_dims *d,
                             const plf_update_d *op, int nthreads);
int plf_update_partials_mt_f(const plf_kernels *k, const plf_dims *d,
                             const plf_update_f *op, int nthreads);
int plf_root_lnl_mt_d(const plf_kernels *k, const plf_dims *d,
                      const double *root, const plf_integrate_d *in,
                      int nthreads, double *lnl);
int plf_root_lnl_mt_f(const plf_kernels *k, const plf_dims *d,
                      const float *root, const plf_integrate_f *in,
                      int nthreads, double *lnl);
int plf_edge_lnl_mt_d(const plf_kernels *k, const plf_dims *d,
                      const double *parent, const plf_child_d *child,
                      const plf_integrate_d *in, int nthreads, double *lnl);
int plf_edge_lnl_mt_f(const plf_kernels *k, const plf_dims *d,
                      const float *parent, const plf_child_f *child,
                      const plf_integrate_f *in, int nthreads, double *lnl);

#endif
