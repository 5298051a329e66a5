/*
 * test_beagle_api.c - libember-beagle against BEAGLE 3.1 itself: the same
 * random sequence of BEAGLE calls made on Debian's libhmsbeagle (dlopen'd
 * by path: a test dependency only) and on ours (dlopen'd by path), every
 * returned value compared.
 *
 *   test_beagle_api SYSTEM_LIBHMSBEAGLE OUR_LIBHMSBEAGLE [STATES]
 *
 * Configurations: 4, 20 and 61 states (or the one given), 1 and 4 rate
 * categories, double and single precision; each instance gets a random
 * rooted tree of 7 tips (tips as compact states with missing data, and two
 * as partials), two models (eigen systems, frequencies, category weights
 * and rates) and rounds of:
 *   transition matrices (beagleUpdateTransitionMatrices and
 *     ...WithMultipleModels), compared with beagleGetTransitionMatrix;
 *   partials updates without scaling, with manual scaling into a
 *     cumulative buffer (fused, or beagleAccumulate/Remove/Reset/
 *     CopyScaleFactors), and BEAGLE's fixed scaling (destinationScaleRead,
 *     MrBayes's dynamic scheme, on RAW scalers);
 *   root and edge log-likelihoods (count 1, and count 2: two model subsets
 *     of one mixture), site log-likelihoods, partials, and cumulative scale
 *     factors (BEAGLE's read through beagleGetPartials: its own
 *     beagleGetScaleFactors answers garbage in 3.1.2);
 *   pattern partitions (beagleSetPatternPartitions) with the ByPartition
 *     updates, scale calls and log-likelihoods;
 *   errors: indices out of range, an unknown instance;
 * and (with 4 states) a 270,000-pattern alignment, whose tip states and
 * partials go to ember as input blocks rather than inline.
 * Return codes must be equal; values within 1e-10 relative in double; in
 * single precision log-likelihoods within 1e-5 and partials and matrices
 * within 2e-5 (partials against their pattern's largest, matrices against
 * their largest entry, log values against max(1, |v|)).
 *
 * Single precision is compared with BEAGLE's double-precision answer: ours
 * computes the transition matrices in double and agrees with it to about
 * 2e-7 on log-likelihoods, while BEAGLE 3.1.2's own single-precision CPU
 * code parts from it by up to 1e-3 on partials and 5e-5 on site
 * log-likelihoods, and with four states and accumulated scale factors
 * returned -inf where the double answer is about -5205.
 *
 * Known BEAGLE 3.1.2 behaviours worked around (not copied): its
 * beagleGetScaleFactors answers garbage past the first values (factors are
 * read as differences of site log-likelihoods instead); its SSE code pads
 * an odd state count and beagleGetPartials returns the padded layout;
 * beagleGetPartials with a scale buffer rescales the first category only.
 */
#include <dlfcn.h>
#include <lapacke.h>
#include <libhmsbeagle/beagle.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the two libraries ---------------------------------------------------- */

#define API_FUNCTIONS(X)                                                     \
  X(beagleCreateInstance) X(beagleFinalizeInstance) X(beagleSetTipStates)    \
  X(beagleSetTipPartials) X(beagleSetPartials) X(beagleGetPartials)          \
  X(beagleSetEigenDecomposition) X(beagleSetStateFrequencies)                \
  X(beagleSetCategoryWeights) X(beagleSetCategoryRates)                      \
  X(beagleSetCategoryRatesWithIndex) X(beagleSetPatternWeights)              \
  X(beagleSetPatternPartitions) X(beagleUpdateTransitionMatrices)            \
  X(beagleUpdateTransitionMatricesWithMultipleModels)                        \
  X(beagleGetTransitionMatrix) X(beagleSetTransitionMatrix)                  \
  X(beagleUpdatePartials) X(beagleUpdatePartialsByPartition)                 \
  X(beagleAccumulateScaleFactors) X(beagleAccumulateScaleFactorsByPartition) \
  X(beagleRemoveScaleFactors) X(beagleRemoveScaleFactorsByPartition)         \
  X(beagleResetScaleFactors) X(beagleResetScaleFactorsByPartition)           \
  X(beagleCopyScaleFactors) X(beagleGetScaleFactors)                         \
  X(beagleCalculateRootLogLikelihoods)                                       \
  X(beagleCalculateRootLogLikelihoodsByPartition)                            \
  X(beagleCalculateEdgeLogLikelihoods)                                       \
  X(beagleCalculateEdgeLogLikelihoodsByPartition)                            \
  X(beagleGetSiteLogLikelihoods) X(beagleSetCPUThreadCount)                  \
  X(beagleWaitForPartials) X(beagleGetResourceList) X(beagleGetVersion)      \
  X(beagleGetDerivatives) X(beagleGetSiteDerivatives)

typedef struct api {
  const char *name;
  void *handle;
#define FIELD(f) __typeof__(&f) f;
  API_FUNCTIONS(FIELD)
#undef FIELD
} api;

static void load(api *a, const char *name, const char *path) {
  a->name = name;
  a->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!a->handle) {
    fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
    exit(1);
  }
#define LOOKUP(f)                                                            \
  if (!(*(void **)&a->f = dlsym(a->handle, #f))) {                           \
    fprintf(stderr, "%s: no %s\n", path, #f);                                \
    exit(1);                                                                 \
  }
  API_FUNCTIONS(LOOKUP)
#undef LOOKUP
}

static api sys, ours;   /* Debian's BEAGLE, libember-beagle */

/* ---- checks ----------------------------------------------------------------- */

static long compared, failures;
/* Tolerances: log-likelihoods (sums, sites, log factors) and values
 * (partials, matrices); 1e-10 in double; in single precision 1e-5 on
 * log-likelihoods and 2e-5 on values (float rounding through a tree of
 * depth up to six, as in test_plf_conformance). */
static double tol_log, tol_val, *tol = &tol_log;
static double worst_log, worst_val, *worst = &worst_log;
static char where[160];          /* the configuration, for messages */
static char step[64];            /* the step within it */

static void failf(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "FAIL [%s, %s] ", where, step);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  if (++failures > 40) {
    fprintf(stderr, "too many failures\n");
    exit(1);
  }
}

static void same_rc(const char *what, int a, int b) {
  compared++;
  if (a != b) failf("%s: BEAGLE returned %d, ember %d", what, a, b);
}

/* |a - b| against scale: a relative error */
static void near(const char *what, size_t i, double a, double b,
                 double scale) {
  compared++;
  if (isnan(a) && isnan(b)) return;
  if (isinf(a) && a == b) return;
  double err = fabs(a - b) / (scale > 0 ? scale : 1);
  if (err > *worst) *worst = err;
  if (!(err <= *tol))
    failf("%s[%zu]: BEAGLE %.17g, ember %.17g (relative %.3g)", what, i, a,
          b, err);
}

static void near_rel(const char *what, size_t i, double a, double b) {
  near(what, i, a, b, fmax(fabs(a), fabs(b)));
}

static void near_log(const char *what, size_t i, double a, double b) {
  near(what, i, a, b, fmax(1, fmax(fabs(a), fabs(b))));
}

/* a value (partials, matrices): its own tolerance */
static void near_val(const char *what, size_t i, double a, double b,
                     double scale) {
  tol = &tol_val;
  worst = &worst_val;
  near(what, i, a, b, scale);
  tol = &tol_log;
  worst = &worst_log;
}

/* values in blocks of n, each against its block's largest magnitude */
static void near_blocks(const char *what, const double *a, const double *b,
                        size_t total, size_t n) {
  for (size_t k = 0; k < total; k += n) {
    double m = 0;
    for (size_t i = k; i < k + n && i < total; i++)
      m = fmax(m, fmax(fabs(a[i]), fabs(b[i])));
    for (size_t i = k; i < k + n && i < total; i++)
      near_val(what, i, a[i], b[i], m);
  }
}

/* ---- random numbers and models ------------------------------------------------ */

static uint64_t rng_state;

static uint64_t rng_next(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static double rng_unit(void) {   /* (0, 1] */
  return ((rng_next() >> 11) + 1) * (1.0 / 9007199254740992.0);
}

static int rng_int(int n) { return (int)(rng_next() % (uint64_t)n); }

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return p;
}

/* A random reversible model: Q = R diag(pi) normalised, decomposed through
 * its symmetric form with LAPACKE_dsyev. */
static void random_model(int S, double *evec, double *ivec, double *eval,
                         double *pi) {
  double sum = 0;
  for (int i = 0; i < S; i++) sum += pi[i] = 0.2 + rng_unit();
  for (int i = 0; i < S; i++) pi[i] /= sum;
  double *q = xcalloc((size_t)S * S, sizeof *q);
  for (int i = 0; i < S; i++)
    for (int j = i + 1; j < S; j++) {
      double r = 0.05 + 2 * rng_unit();
      q[i * S + j] = r * pi[j];
      q[j * S + i] = r * pi[i];
    }
  double rate = 0;
  for (int i = 0; i < S; i++) {
    double row = 0;
    for (int j = 0; j < S; j++) row += j == i ? 0 : q[i * S + j];
    q[i * S + i] = -row;
    rate += pi[i] * row;
  }
  double *a = xcalloc((size_t)S * S, sizeof *a);
  for (int i = 0; i < S; i++)
    for (int j = 0; j < S; j++)
      a[i * S + j] = sqrt(pi[i]) * q[i * S + j] / rate / sqrt(pi[j]);
  if (LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'V', 'U', S, a, S, eval) != 0) {
    fprintf(stderr, "LAPACKE_dsyev failed\n");
    exit(1);
  }
  for (int i = 0; i < S; i++)
    for (int k = 0; k < S; k++) {
      evec[i * S + k] = a[i * S + k] / sqrt(pi[i]);
      ivec[k * S + i] = a[i * S + k] * sqrt(pi[i]);
    }
  free(q);
  free(a);
}

/* ---- one configuration ------------------------------------------------------------ */

#define T 7                       /* tips */
#define NI (T - 1)                /* internal nodes of one copy of the tree */
#define SETS 2                    /* model subsets: two copies of the tree */
#define NPART 3                   /* pattern partitions */

typedef struct config {
  int S, P, C, single, log_scalers;
  long scaling;   /* 0, or BEAGLE_FLAG_SCALING_ALWAYS or _AUTO */
} config;

/* The instance's shape: tips 0..T-1 (0..T-3 compact states), copy k's
 * internal nodes at T + k*NI .. T + k*NI + NI-1; matrix of node n's edge
 * in copy k: k*(T+NI) + n; scale buffer of node n in copy k: k*NI + n-T;
 * cumulative buffers after those. */
enum {
  N_BUFFERS = T + SETS * NI,
  N_COMPACT = T - 2,
  N_MATRICES = SETS * (T + NI) + 4,     /* + 2 for edge matrices, + 2 for
                                           an edge's derivatives */
  CUM0 = SETS * NI,                     /* cumulative of copy 0, 1 */
  CUM_EDGE = CUM0 + SETS,               /* edges' cumulatives, per copy */
  CUM_PART = CUM_EDGE + SETS,           /* per partition */
  N_SCALES = CUM_PART + NPART,
};

typedef struct tree {
  int left[NI], right[NI];        /* children of internal node T+i */
  int root;                       /* internal node T+NI-1 */
} tree;

/* Random rooted tree: join two random free nodes until one is left. */
static void random_tree(tree *t) {
  int free_nodes[T], n = T;
  for (int i = 0; i < T; i++) free_nodes[i] = i;
  for (int i = 0; i < NI; i++) {
    int a = rng_int(n);
    int x = free_nodes[a];
    free_nodes[a] = free_nodes[--n];
    int b = rng_int(n);
    int y = free_nodes[b];
    free_nodes[b] = T + i;
    t->left[i] = x;
    t->right[i] = y;
  }
  t->root = T + NI - 1;
}

/* node n of copy k as a buffer index */
static int buf(int n, int k) { return n < T ? n : n + k * NI; }
static int mat(int n, int k) { return k * (T + NI) + n; }
static int scl(int n, int k) { return k * NI + (n - T); }

typedef struct state {
  const config *g;
  int ia, ib;                     /* the instance in sys and in ours */
  tree tr;
  size_t P, S, C;
  size_t sys_stride;              /* BEAGLE's partials per pattern */
  double *va, *vb;                /* scratch for answers */
} state;

/* Run one BEAGLE call on both libraries and compare the codes. */
#define BOTH(st, fn, ...)                                                    \
  do {                                                                       \
    int ra_ = sys.fn((st)->ia, __VA_ARGS__);                                 \
    int rb_ = ours.fn((st)->ib, __VA_ARGS__);                                \
    same_rc(#fn, ra_, rb_);                                                  \
  } while (0)

static void compare_matrix(state *st, int m) {
  size_t n = st->C * st->S * st->S;
  int ra = sys.beagleGetTransitionMatrix(st->ia, m, st->va);
  int rb = ours.beagleGetTransitionMatrix(st->ib, m, st->vb);
  same_rc("beagleGetTransitionMatrix", ra, rb);
  if (!ra && !rb) near_blocks("matrix", st->va, st->vb, n, st->S * st->S);
}

static void compare_partials(state *st, int b) {
  int ra = sys.beagleGetPartials(st->ia, b, BEAGLE_OP_NONE, st->va);
  int rb = ours.beagleGetPartials(st->ib, b, BEAGLE_OP_NONE, st->vb);
  same_rc("beagleGetPartials", ra, rb);
  if (ra || rb) return;
  /* per pattern, across categories: the pattern's largest */
  size_t w = st->sys_stride;
  for (size_t p = 0; p < st->P; p++) {
    double m = 0;
    for (size_t c = 0; c < st->C; c++)
      for (size_t s = 0; s < st->S; s++) {
        size_t i = (c * st->P + p) * st->S + s, j = (c * st->P + p) * w + s;
        m = fmax(m, fmax(fabs(st->va[j]), fabs(st->vb[i])));
      }
    for (size_t c = 0; c < st->C; c++)
      for (size_t s = 0; s < st->S; s++) {
        size_t i = (c * st->P + p) * st->S + s, j = (c * st->P + p) * w + s;
        near_val("partials", i, st->va[j], st->vb[i], m);
      }
  }
}

/* A cumulative scale buffer over patterns [p0, p1), read with ours'
 * beagleGetScaleFactors. BEAGLE 3.1.2's own beagleGetScaleFactors answers
 * garbage past the first values, so BEAGLE's factors are the difference of
 * its site log-likelihoods at root with and without them. */
static void compare_cumulative(state *st, int root, int set, int cum,
                               size_t p0, size_t p1) {
  double l, *with = xcalloc(st->P, sizeof *with);
  int none = BEAGLE_OP_NONE;
  sys.beagleCalculateRootLogLikelihoods(st->ia, &root, &set, &set, &cum, 1, &l);
  int r1 = sys.beagleGetSiteLogLikelihoods(st->ia, with);
  sys.beagleCalculateRootLogLikelihoods(st->ia, &root, &set, &set, &none, 1,
                                        &l);
  int r0 = sys.beagleGetSiteLogLikelihoods(st->ia, st->va);
  int rb = ours.beagleGetScaleFactors(st->ib, cum, st->vb);
  same_rc("beagleGetScaleFactors", BEAGLE_SUCCESS, rb);
  for (size_t p = p0; p < p1 && !r0 && !r1 && !rb; p++)
    near_log("log cumulative scale factors", p, with[p] - st->va[p],
             st->vb[p]);
  free(with);
  /* and the partials times exp(factors): BEAGLE's scales the first
   * category only, in its own (padded) layout: one category, even S */
  if (st->C != 1 || st->sys_stride != st->S) return;
  int ra = sys.beagleGetPartials(st->ia, root, cum, st->va);
  rb = ours.beagleGetPartials(st->ib, root, cum, st->vb);
  same_rc("beagleGetPartials (scaled)", ra, rb);
  for (size_t p = p0; p < p1 && !ra && !rb; p++)
    near_blocks("partials times exp(cumulative)", st->va + p * st->S,
                st->vb + p * st->S, st->S, st->S);
}

static void compare_sites(state *st) {
  int ra = sys.beagleGetSiteLogLikelihoods(st->ia, st->va);
  int rb = ours.beagleGetSiteLogLikelihoods(st->ib, st->vb);
  same_rc("beagleGetSiteLogLikelihoods", ra, rb);
  if (ra || rb) return;
  for (size_t p = 0; p < st->P; p++)
    near_log("site lnL", p, st->va[p], st->vb[p]);
}

/* The tree's partials updates for copy k: scale_mode 0 none, 1 write each
 * node's factors (cumulative: cum or none), 2 read the factors written
 * before (fixed scaling). partition >= 0: by partition, into cum. */
static void update_tree(state *st, int k, int scale_mode, int cum,
                        int partition) {
  BeagleOperation ops[NI];
  BeagleOperationByPartition pops[NI];
  for (int i = 0; i < NI; i++) {
    int n = T + i, l = st->tr.left[i], r = st->tr.right[i];
    ops[i] = (BeagleOperation){
        buf(n, k), scale_mode == 1 ? scl(n, k) : BEAGLE_OP_NONE,
        scale_mode == 2 ? scl(n, k) : BEAGLE_OP_NONE, buf(l, k), mat(l, k),
        buf(r, k), mat(r, k)};
    memcpy(&pops[i], &ops[i], sizeof ops[i]);
    pops[i].partition = partition;
    pops[i].cumulativeScaleIndex = cum;
  }
  if (partition >= 0)
    BOTH(st, beagleUpdatePartialsByPartition, pops, NI);
  else
    BOTH(st, beagleUpdatePartials, ops, NI, cum);
}

static void root_lnl(state *st, const int *roots, const int *sets,
                     const int *cums, int count) {
  double la = NAN, lb = NAN;
  int ra = sys.beagleCalculateRootLogLikelihoods(st->ia, roots, sets, sets,
                                                 cums, count, &la);
  int rb = ours.beagleCalculateRootLogLikelihoods(st->ib, roots, sets, sets,
                                                  cums, count, &lb);
  same_rc("beagleCalculateRootLogLikelihoods", ra, rb);
  near_rel(count > 1 ? "root lnL (2 subsets)" : "root lnL", 0, la, lb);
  compare_sites(st);
}

static void edge_lnl(state *st, const int *parents, const int *children,
                     const int *mats, const int *sets, const int *cums,
                     int count) {
  double la = NAN, lb = NAN;
  int ra = sys.beagleCalculateEdgeLogLikelihoods(
      st->ia, parents, children, mats, NULL, NULL, sets, sets, cums, count,
      &la, NULL, NULL);
  int rb = ours.beagleCalculateEdgeLogLikelihoods(
      st->ib, parents, children, mats, NULL, NULL, sets, sets, cums, count,
      &lb, NULL, NULL);
  same_rc("beagleCalculateEdgeLogLikelihoods", ra, rb);
  near_rel(count > 1 ? "edge lnL (2 subsets)" : "edge lnL", 0, la, lb);
  compare_sites(st);
}

/* An edge's derivatives along its length (copy 0's model): P(t), dP/dt
 * and d2P/dt2 from beagleUpdateTransitionMatrices, then the edge's lnL
 * with the sums of both derivatives, per site too. Derivatives are
 * compared against max(1, |value|), as log values are. */
static void edge_derivatives(state *st, int parent, int child, int cum) {
  int pm = SETS * (T + NI), d1 = pm + 2, d2 = pm + 3, set = 0;
  static int calls;   /* lengths of their own: the random draws of the
                         rest stay as they were */
  double len = 0.05 + 0.037 * (calls++ % 11);
  BOTH(st, beagleUpdateTransitionMatrices, 0, &pm, &d1, &d2, &len, 1);
  compare_matrix(st, d1);
  compare_matrix(st, d2);
  double la = NAN, fa = NAN, sa = NAN, lb = NAN, fb = NAN, sb = NAN;
  int ra = sys.beagleCalculateEdgeLogLikelihoods(
      st->ia, &parent, &child, &pm, &d1, &d2, &set, &set, &cum, 1, &la, &fa,
      &sa);
  int rb = ours.beagleCalculateEdgeLogLikelihoods(
      st->ib, &parent, &child, &pm, &d1, &d2, &set, &set, &cum, 1, &lb, &fb,
      &sb);
  same_rc("beagleCalculateEdgeLogLikelihoods (derivatives)", ra, rb);
  near_rel("edge lnL (derivatives)", 0, la, lb);
  near_log("first derivative", 0, fa, fb);
  near_log("second derivative", 0, sa, sb);
  compare_sites(st);
  double *a2 = xcalloc(2 * st->P, sizeof *a2), *b2 = xcalloc(2 * st->P,
                                                            sizeof *b2);
  ra = sys.beagleGetSiteDerivatives(st->ia, a2, a2 + st->P);
  rb = ours.beagleGetSiteDerivatives(st->ib, b2, b2 + st->P);
  same_rc("beagleGetSiteDerivatives", ra, rb);
  for (size_t p = 0; !ra && !rb && p < 2 * st->P; p++)
    near_log(p < st->P ? "site first derivative" : "site second derivative",
             p % st->P, a2[p], b2[p]);
  fa = sa = fb = sb = NAN;
  ra = sys.beagleGetDerivatives(st->ia, &fa, &sa);
  rb = ours.beagleGetDerivatives(st->ib, &fb, &sb);
  same_rc("beagleGetDerivatives", ra, rb);
  if (!ra && !rb) {
    near_log("first derivative (again)", 0, fa, fb);
    near_log("second derivative (again)", 0, sa, sb);
  }
  free(a2);
  free(b2);
}

/* Random branch lengths into both copies' matrices: copy 0 with model 0
 * (beagleUpdateTransitionMatrices), copy 1 with model 1's eigen system and
 * rates (...WithMultipleModels); plus the edge matrices. */
static void update_matrices(state *st, int round) {
  int idx[T + NI + 1], eig[T + NI + 1], rates[T + NI + 1];
  double len[T + NI + 1];
  int n = 0;
  for (int v = 0; v < T + NI; v++) {
    if (v == st->tr.root) continue;
    idx[n] = mat(v, 0);
    len[n] = rng_int(10) == 0 ? 0.0 : 0.01 + 0.5 * rng_unit();
    n++;
  }
  idx[n] = SETS * (T + NI);       /* edge matrix of copy 0 */
  len[n++] = 0.05 + 0.4 * rng_unit();
  BOTH(st, beagleUpdateTransitionMatrices, 0, idx, NULL, NULL, len, n);
  for (int i = 0; i < n; i++) {
    idx[i] = i + 1 == n ? SETS * (T + NI) + 1 : idx[i] + (T + NI);
    eig[i] = 1;
    rates[i] = round % 2;         /* rate set 0 or 1 */
  }
  BOTH(st, beagleUpdateTransitionMatricesWithMultipleModels, eig, rates,
       idx, NULL, NULL, len, n);
  compare_matrix(st, mat(rng_int(T), 0));
  compare_matrix(st, idx[rng_int(n)]);
}

/* The root's two children: the edge across them (parent must be internal
 * for BEAGLE). */
static void root_edge(const tree *tr, int *parent, int *child) {
  int l = tr->left[NI - 1], r = tr->right[NI - 1];
  if (l < T) {
    int x = l;
    l = r;
    r = x;
  }
  *parent = l;
  *child = r;
}

/* SCALING_ALWAYS (or AUTO): the instance rescales every node into scale
 * buffers of its own and sums them itself; the program passes none. */
static void scaling_rounds(state *st) {
  int sets[SETS] = {0, 1};
  int none[SETS] = {BEAGLE_OP_NONE, BEAGLE_OP_NONE};
  for (int round = 0; round < 4; round++) {
    snprintf(step, sizeof step, "round %d, scaling by the instance", round);
    random_tree(&st->tr);
    update_matrices(st, round);
    for (int k = 0; k < SETS; k++) update_tree(st, k, 0, BEAGLE_OP_NONE, -1);
    int roots[SETS] = {buf(st->tr.root, 0), buf(st->tr.root, 1)};
    root_lnl(st, roots, sets, none, 1);
    root_lnl(st, roots + 1, sets + 1, none + 1, 1);
    compare_partials(st, roots[0]);
    compare_partials(st, buf(T + rng_int(NI), 1));
    int parent, child;
    root_edge(&st->tr, &parent, &child);
    for (int k = 0; k < SETS; k++) {
      int pe = buf(parent, k), ce = buf(child, k), me = SETS * (T + NI) + k;
      edge_lnl(st, &pe, &ce, &me, sets + k, none, 1);
    }
    edge_derivatives(st, buf(parent, 0), buf(child, 0), BEAGLE_OP_NONE);
  }
}

/* One instance: every kind of call, with random data, several rounds. */
static void run_config(const config *g, uint64_t seed) {
  rng_state = seed;
  tol_log = g->single ? 1e-5 : 1e-10;
  tol_val = g->single ? 2e-5 : 1e-10;
  worst_log = worst_val = 0;
  snprintf(where, sizeof where, "S=%d C=%d %s %s", g->S, g->C,
           g->single ? "single" : "double",
           g->scaling == BEAGLE_FLAG_SCALING_ALWAYS ? "SCALING_ALWAYS"
           : g->scaling                           ? "SCALING_AUTO"
           : g->log_scalers                       ? "log scalers"
                                                  : "raw scalers");
  state st = {.g = g, .P = (size_t)g->P, .S = (size_t)g->S,
              .C = (size_t)g->C};
  size_t big = st.C * st.P * (st.S + 1) + st.C * st.S * st.S + st.P;
  st.va = xcalloc(big, sizeof(double));
  st.vb = xcalloc(big, sizeof(double));
  long prec = g->single ? BEAGLE_FLAG_PRECISION_SINGLE
                        : BEAGLE_FLAG_PRECISION_DOUBLE;
  long flags = prec | g->scaling |
               (g->log_scalers ? BEAGLE_FLAG_SCALERS_LOG
                               : BEAGLE_FLAG_SCALERS_RAW);
  /* BEAGLE's answer is its double precision's, whatever ours computes in
   * (see the top of the file) */
  long sys_flags = (flags & ~prec) | BEAGLE_FLAG_PRECISION_DOUBLE;
  /* BEAGLE 3.1.2's own AUTO is off by whole units of log-likelihood per
   * site (its factors are kept as exponents); ember's AUTO rescales every
   * node as ALWAYS does, and is held to BEAGLE's ALWAYS */
  if (g->scaling == BEAGLE_FLAG_SCALING_AUTO)
    sys_flags = (sys_flags & ~BEAGLE_FLAG_SCALING_AUTO) |
                BEAGLE_FLAG_SCALING_ALWAYS;
  BeagleInstanceDetails da, db;
  st.ia = sys.beagleCreateInstance(T, N_BUFFERS - N_COMPACT, N_COMPACT, g->S,
                                   g->P, SETS, N_MATRICES, g->C, N_SCALES,
                                   NULL, 0, sys_flags,
                                   BEAGLE_FLAG_PRECISION_DOUBLE, &da);
  st.ib = ours.beagleCreateInstance(T, N_BUFFERS - N_COMPACT, N_COMPACT, g->S,
                                    g->P, SETS, N_MATRICES, g->C, N_SCALES,
                                    NULL, 0, flags, prec, &db);
  compared++;
  if (st.ia < 0 || st.ib < 0) {
    failf("beagleCreateInstance: BEAGLE %d, ember %d", st.ia, st.ib);
    free(st.va);
    free(st.vb);
    return;
  }
  /* BEAGLE's SSE code pads an odd state count to the next even one, and
   * its beagleGetPartials (3.1.2) hands back that padded layout */
  st.sys_stride = (g->S % 2 && strstr(da.implName, "SSE")) ? st.S + 1 : st.S;
  compared++;
  long mask = BEAGLE_FLAG_SCALERS_LOG | BEAGLE_FLAG_SCALERS_RAW |
              BEAGLE_FLAG_SCALING_MANUAL | BEAGLE_FLAG_SCALING_ALWAYS |
              BEAGLE_FLAG_SCALING_AUTO;
  snprintf(step, sizeof step, "create");
  long fa = da.flags, fb = db.flags;
  if (g->scaling == BEAGLE_FLAG_SCALING_AUTO)
    fa = (fa & ~BEAGLE_FLAG_SCALING_ALWAYS) | BEAGLE_FLAG_SCALING_AUTO;
  if ((fa & mask) != (fb & mask) || !(fb & prec))
    failf("instance flags: BEAGLE %#lx, ember %#lx", da.flags, db.flags);
  BOTH(&st, beagleSetCPUThreadCount, 2);

  /* tips: compact states with missing data (S, and past S), partials */
  snprintf(step, sizeof step, "setup");
  int *states = xcalloc(st.P, sizeof *states);
  double *part = xcalloc(st.P * st.S, sizeof *part);
  for (int t = 0; t < T; t++) {
    if (t < N_COMPACT) {
      for (size_t p = 0; p < st.P; p++) {
        int r = rng_int(100);
        states[p] = r < 4 ? g->S : r < 6 ? g->S + 3 : rng_int(g->S);
      }
      BOTH(&st, beagleSetTipStates, t, states);
    } else {
      for (size_t p = 0; p < st.P; p++) {
        double *x = part + p * st.S;
        int r = rng_int(10);
        for (size_t s = 0; s < st.S; s++)
          x[s] = r < 2 ? 1.0 : r < 6 ? (s == (size_t)(p % st.S)) : rng_unit();
      }
      BOTH(&st, beagleSetTipPartials, t, part);
    }
  }
  /* models: eigen systems, frequencies, category weights and rates */
  double *ev = xcalloc(st.S * st.S, sizeof *ev);
  double *iv = xcalloc(st.S * st.S, sizeof *iv);
  double *eval = xcalloc(st.S, sizeof *eval), *pi = xcalloc(st.S, sizeof *pi);
  double *w = xcalloc(st.C, sizeof *w), *rates = xcalloc(st.C, sizeof *rates);
  for (int k = 0; k < SETS; k++) {
    random_model(g->S, ev, iv, eval, pi);
    BOTH(&st, beagleSetEigenDecomposition, k, ev, iv, eval);
    BOTH(&st, beagleSetStateFrequencies, k, pi);
    double sum = 0;
    for (size_t c = 0; c < st.C; c++) {
      sum += w[c] = 0.5 + rng_unit();
      rates[c] = st.C == 1 ? 1.0 : 0.1 + 2.5 * rng_unit();
    }
    for (size_t c = 0; c < st.C; c++) w[c] /= sum;
    BOTH(&st, beagleSetCategoryWeights, k, w);
    if (k == 0)
      BOTH(&st, beagleSetCategoryRates, rates);
    else
      BOTH(&st, beagleSetCategoryRatesWithIndex, k, rates);
  }
  double *pw = xcalloc(st.P, sizeof *pw);
  for (size_t p = 0; p < st.P; p++) pw[p] = 1 + rng_int(3);
  BOTH(&st, beagleSetPatternWeights, pw);
  int *of = NULL;
  double *m = NULL;
  if (g->scaling) {
    scaling_rounds(&st);
    goto finish;
  }

  int sets[SETS] = {0, 1}, cums[SETS] = {CUM0, CUM0 + 1};
  int none[SETS] = {BEAGLE_OP_NONE, BEAGLE_OP_NONE};
  for (int round = 0; round < 6; round++) {
    random_tree(&st.tr);
    update_matrices(&st, round);
    int roots[SETS] = {buf(st.tr.root, 0), buf(st.tr.root, 1)};
    /* 0 none, 1 fused, 2 accumulate; single precision always scales (its
     * partials underflow at this depth, where BEAGLE's SSE code and ours
     * part: flushed to zero or kept as subnormals) */
    int mode = round % 3;
    if (g->single && mode == 0) mode = 1 + round % 2;
    snprintf(step, sizeof step, "round %d, scaling %s", round,
             mode == 0 ? "none" : mode == 1 ? "fused" : "accumulated");
    for (int k = 0; k < SETS; k++) {
      if (mode == 0) {
        update_tree(&st, k, 0, BEAGLE_OP_NONE, -1);
      } else if (mode == 1) {
        BOTH(&st, beagleResetScaleFactors, CUM0 + k);
        update_tree(&st, k, 1, CUM0 + k, -1);
      } else {
        int all[NI];
        for (int i = 0; i < NI; i++) all[i] = scl(T + i, k);
        update_tree(&st, k, 1, BEAGLE_OP_NONE, -1);
        BOTH(&st, beagleResetScaleFactors, CUM0 + k);
        BOTH(&st, beagleAccumulateScaleFactors, all, NI, CUM0 + k);
        BOTH(&st, beagleRemoveScaleFactors, all, 2, CUM0 + k);
        BOTH(&st, beagleAccumulateScaleFactors, all, 2, CUM0 + k);
      }
    }
    const int *cum = mode ? cums : none;
    root_lnl(&st, roots, sets, cum, 1);
    root_lnl(&st, roots + 1, sets + 1, cum + 1, 1);
    root_lnl(&st, roots, sets, cum, 2);
    compare_partials(&st, roots[0]);
    compare_partials(&st, buf(T + rng_int(NI), 1));
    if (mode) compare_cumulative(&st, roots[0], 0, CUM0, 0, st.P);
    /* the edge across the root's children, its cumulative without the
     * root's own factors */
    int parent, child;
    root_edge(&st.tr, &parent, &child);
    int pe[SETS], ce[SETS], me[SETS], ecum[SETS];
    for (int k = 0; k < SETS; k++) {
      pe[k] = buf(parent, k);
      ce[k] = buf(child, k);
      me[k] = SETS * (T + NI) + k;
      ecum[k] = mode ? CUM_EDGE + k : BEAGLE_OP_NONE;
      if (mode) {
        BOTH(&st, beagleCopyScaleFactors, CUM_EDGE + k, CUM0 + k);
        int rs = scl(st.tr.root, k);
        BOTH(&st, beagleRemoveScaleFactors, &rs, 1, CUM_EDGE + k);
      }
    }
    edge_lnl(&st, pe, ce, me, sets, ecum, 1);
    edge_lnl(&st, pe, ce, me, sets, ecum, 2);
    edge_derivatives(&st, pe[0], ce[0], ecum[0]);
    if (mode == 1 && !g->log_scalers) {
      /* MrBayes's dynamic scheme: new lengths, the same tree, each node
       * divided by the factors found before (fixed scaling) */
      snprintf(step, sizeof step, "round %d, fixed scaling", round);
      update_matrices(&st, round);
      for (int k = 0; k < SETS; k++) update_tree(&st, k, 2, BEAGLE_OP_NONE, -1);
      root_lnl(&st, roots, sets, cums, 1);
      root_lnl(&st, roots, sets, cums, 2);
      compare_partials(&st, roots[1]);
    }
  }

  /* partitions: contiguous runs, the ByPartition calls */
  of = xcalloc(st.P, sizeof *of);
  size_t cut1 = st.P / 3, cut2 = st.P / 3 + st.P / 4;
  for (size_t p = 0; p < st.P; p++) of[p] = p < cut1 ? 0 : p < cut2 ? 1 : 2;
  BOTH(&st, beagleSetPatternPartitions, NPART, of);
  for (int round = 0; round < 3; round++) {
    snprintf(step, sizeof step, "partitions, round %d", round);
    random_tree(&st.tr);
    update_matrices(&st, round);
    int pr[NPART], pw3[NPART], pc[NPART], pp[NPART];
    for (int q = 0; q < NPART; q++) {
      int scaled = round > 0;
      if (scaled) BOTH(&st, beagleResetScaleFactorsByPartition, CUM_PART + q, q);
      update_tree(&st, 0, scaled ? 1 : 0,
                  round == 1 ? CUM_PART + q : BEAGLE_OP_NONE, q);
      if (round == 2) {
        int all[NI];
        for (int i = 0; i < NI; i++) all[i] = scl(T + i, 0);
        BOTH(&st, beagleAccumulateScaleFactorsByPartition, all, NI,
             CUM_PART + q, q);
        BOTH(&st, beagleRemoveScaleFactorsByPartition, all, 1, CUM_PART + q,
             q);
        BOTH(&st, beagleAccumulateScaleFactorsByPartition, all, 1,
             CUM_PART + q, q);
      }
      pr[q] = buf(st.tr.root, 0);
      pw3[q] = q % SETS;
      pc[q] = scaled ? CUM_PART + q : BEAGLE_OP_NONE;
      pp[q] = q;
    }
    double la[NPART], lb[NPART], sa = NAN, sb = NAN;
    int ra = sys.beagleCalculateRootLogLikelihoodsByPartition(
        st.ia, pr, pw3, pw3, pc, pp, NPART, 1, la, &sa);
    int rb = ours.beagleCalculateRootLogLikelihoodsByPartition(
        st.ib, pr, pw3, pw3, pc, pp, NPART, 1, lb, &sb);
    same_rc("beagleCalculateRootLogLikelihoodsByPartition", ra, rb);
    for (int q = 0; q < NPART; q++) near_rel("root lnL by partition", q, la[q], lb[q]);
    near_rel("root lnL, partitions summed", 0, sa, sb);
    compare_sites(&st);
    compare_partials(&st, pr[0]);
    /* edges by partition: the root's own factors removed per partition */
    int parent, child, pe[NPART], ce[NPART], me[NPART], ec[NPART];
    root_edge(&st.tr, &parent, &child);
    for (int q = 0; q < NPART; q++) {
      pe[q] = buf(parent, 0);
      ce[q] = buf(child, 0);
      me[q] = SETS * (T + NI);
      ec[q] = pc[q];
      if (pc[q] >= 0) {
        int rs = scl(st.tr.root, 0);
        BOTH(&st, beagleRemoveScaleFactorsByPartition, &rs, 1, pc[q], q);
      }
    }
    ra = sys.beagleCalculateEdgeLogLikelihoodsByPartition(
        st.ia, pe, ce, me, NULL, NULL, pw3, pw3, ec, pp, NPART, 1, la, &sa,
        NULL, NULL, NULL, NULL);
    rb = ours.beagleCalculateEdgeLogLikelihoodsByPartition(
        st.ib, pe, ce, me, NULL, NULL, pw3, pw3, ec, pp, NPART, 1, lb, &sb,
        NULL, NULL, NULL, NULL);
    same_rc("beagleCalculateEdgeLogLikelihoodsByPartition", ra, rb);
    for (int q = 0; q < NPART; q++) near_rel("edge lnL by partition", q, la[q], lb[q]);
    near_rel("edge lnL, partitions summed", 0, sa, sb);
    compare_sites(&st);
    if (pc[1] >= 0)
      compare_cumulative(&st, pr[1], pw3[1], CUM_PART + 1, cut1, cut2);
  }

  /* a matrix set directly, then used */
  m = xcalloc(st.C * st.S * st.S, sizeof *m);
  for (size_t i = 0; i < st.C * st.S * st.S; i++) m[i] = rng_unit();
  BOTH(&st, beagleSetTransitionMatrix, mat(0, 0), m, 1.0);
  compare_matrix(&st, mat(0, 0));

  /* errors: what BEAGLE checks, the same codes */
  BOTH(&st, beagleSetTipStates, T, states);
  BOTH(&st, beagleSetTipStates, -1, states);
  BOTH(&st, beagleSetTipPartials, T, part);
  BOTH(&st, beagleSetStateFrequencies, SETS, pi);
  BOTH(&st, beagleSetCategoryWeights, SETS, w);
  BOTH(&st, beagleSetCategoryRatesWithIndex, SETS, rates);
  {
    int r2[2] = {T, T}, s2[2] = {0, 1}, c2[2] = {-1, -1}, q2[2] = {0, 1};
    double l2[4], sum2;
    same_rc("beagleCalculateRootLogLikelihoodsByPartition (count 2)",
            sys.beagleCalculateRootLogLikelihoodsByPartition(
                st.ia, r2, s2, s2, c2, q2, 1, 2, l2, &sum2),
            ours.beagleCalculateRootLogLikelihoodsByPartition(
                st.ib, r2, s2, s2, c2, q2, 1, 2, l2, &sum2));
  }
  int dest = T;
  BOTH(&st, beagleWaitForPartials, &dest, 1);
  same_rc("beagleSetTipStates (no instance)",
          sys.beagleSetTipStates(st.ia + 1000, 0, states),
          ours.beagleSetTipStates(st.ib + 1000, 0, states));

finish:
  same_rc("beagleFinalizeInstance", sys.beagleFinalizeInstance(st.ia),
          ours.beagleFinalizeInstance(st.ib));
  same_rc("beagleFinalizeInstance (again)", sys.beagleFinalizeInstance(st.ia),
          ours.beagleFinalizeInstance(st.ib));
  printf("%-36s worst relative error: lnL %.3g, values %.3g\n", where,
         worst_log, worst_val);
  free(of);
  free(m);
  free(states);
  free(part);
  free(ev);
  free(iv);
  free(eval);
  free(pi);
  free(w);
  free(rates);
  free(pw);
  free(st.va);
  free(st.vb);
}

/* A long alignment: tip states and partials of a megabyte and more travel
 * to ember as input blocks, not inline; three tips, one category. */
static void run_large(void) {
  enum { LT = 3, LS = 4 };
  const int LP = 270000;
  rng_state = 99;
  tol_log = tol_val = 1e-10;
  worst_log = worst_val = 0;
  snprintf(where, sizeof where, "S=4 C=1 double, %d patterns", LP);
  snprintf(step, sizeof step, "setup");
  state st = {.P = (size_t)LP, .S = LS, .C = 1, .sys_stride = LS};
  st.va = xcalloc((size_t)LP * (LS + 1), sizeof(double));
  st.vb = xcalloc((size_t)LP * (LS + 1), sizeof(double));
  long f = BEAGLE_FLAG_PRECISION_DOUBLE | BEAGLE_FLAG_SCALERS_LOG;
  BeagleInstanceDetails da, db;   /* BEAGLE 3.1.2 crashes on NULL */
  st.ia = sys.beagleCreateInstance(LT, 2, LT, LS, LP, 1, 4, 1, 3, NULL, 0, f,
                                   BEAGLE_FLAG_PRECISION_DOUBLE, &da);
  st.ib = ours.beagleCreateInstance(LT, 2, LT, LS, LP, 1, 4, 1, 3, NULL, 0, f,
                                    BEAGLE_FLAG_PRECISION_DOUBLE, &db);
  compared++;
  if (st.ia < 0 || st.ib < 0) {
    failf("beagleCreateInstance: BEAGLE %d, ember %d", st.ia, st.ib);
    return;
  }
  int *states = xcalloc((size_t)LP, sizeof *states);
  double *part = xcalloc((size_t)LP * LS, sizeof *part);
  for (int t = 0; t < 2; t++) {
    for (int p = 0; p < LP; p++) states[p] = rng_int(LS + 1);
    BOTH(&st, beagleSetTipStates, t, states);
  }
  for (size_t i = 0; i < (size_t)LP * LS; i++) part[i] = rng_unit();
  BOTH(&st, beagleSetTipPartials, 2, part);
  for (int p = 0; p < LP; p++) part[p] = 1 + rng_int(2);
  BOTH(&st, beagleSetPatternWeights, part);
  double ev[LS * LS], iv[LS * LS], eval[LS], pi[LS], w = 1, r = 1;
  random_model(LS, ev, iv, eval, pi);
  BOTH(&st, beagleSetEigenDecomposition, 0, ev, iv, eval);
  BOTH(&st, beagleSetStateFrequencies, 0, pi);
  BOTH(&st, beagleSetCategoryWeights, 0, &w);
  BOTH(&st, beagleSetCategoryRates, &r);
  int mi[4] = {0, 1, 2, 3};
  double len[4] = {0.1, 0.2, 0.05, 0.3};
  BOTH(&st, beagleUpdateTransitionMatrices, 0, mi, NULL, NULL, len, 4);
  BeagleOperation ops[2] = {{3, 0, -1, 0, 0, 1, 1}, {4, 1, -1, 3, 3, 2, 2}};
  int cum = 2, root = 4, set = 0;
  BOTH(&st, beagleResetScaleFactors, cum);
  BOTH(&st, beagleUpdatePartials, ops, 2, cum);
  snprintf(step, sizeof step, "root");
  root_lnl(&st, &root, &set, &cum, 1);
  compare_partials(&st, 4);
  same_rc("beagleFinalizeInstance", sys.beagleFinalizeInstance(st.ia),
          ours.beagleFinalizeInstance(st.ib));
  printf("%-36s worst relative error: lnL %.3g, values %.3g\n", where,
         worst_log, worst_val);
  free(states);
  free(part);
  free(st.va);
  free(st.vb);
}

/* ember's flags say what it does: AVX kernels where the CPU has them,
 * threads over patterns where there is more than one CPU; flags it can
 * meet are met when required (asynchronous computation, OpenMP-style
 * threads), those it cannot are refused; and a refusal writes nothing on
 * stderr (the program's own). */
static void check_flags(void) {
  snprintf(where, sizeof where, "flags");
  snprintf(step, sizeof step, "resources");
  const BeagleResourceList *l = ours.beagleGetResourceList();
  compared++;
  if (!l || l->length < 1 || strcmp(l->list[0].name, "ember cpu") != 0) {
    failf("resource 0 is not ember's cpu");
    return;
  }
  __builtin_cpu_init();
  int avx = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const char *isa = getenv("EMBER_PLF_ISA");
  if (isa && strcmp(isa, "scalar") == 0) avx = 0;
  compared++;
  if (!(l->list[0].supportFlags & BEAGLE_FLAG_VECTOR_AVX) != !avx)
    failf("cpu resource: VECTOR_AVX %s, the CPU %s AVX2",
          l->list[0].supportFlags & BEAGLE_FLAG_VECTOR_AVX ? "set" : "unset",
          avx ? "has" : "lacks");

  snprintf(step, sizeof step, "required flags it meets");
  BeagleInstanceDetails d;
  int id = ours.beagleCreateInstance(
      3, 5, 0, 4, 10, 1, 4, 1, 0, NULL, 0, 0,
      BEAGLE_FLAG_COMPUTATION_ASYNCH | BEAGLE_FLAG_THREADING_OPENMP, &d);
  compared++;
  if (id < 0) {
    failf("ASYNCH and THREADING_OPENMP required: refused (%d)", id);
  } else {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (!(d.flags & BEAGLE_FLAG_COMPUTATION_ASYNCH))
      failf("ASYNCH required, details %#lx", d.flags);
    if (!(d.flags & BEAGLE_FLAG_THREADING_CPP) != !(cpus > 1))
      failf("%ld CPUs, details %#lx", cpus, d.flags);
    if (!(d.flags & BEAGLE_FLAG_VECTOR_AVX) != !avx)
      failf("instance: VECTOR_AVX against the CPU, details %#lx", d.flags);
    ours.beagleFinalizeInstance(id);
  }

  snprintf(step, sizeof step, "refusals, silent");
  fflush(stderr);
  int saved = dup(2);
  FILE *tmp = tmpfile();
  if (saved < 0 || !tmp) {
    failf("no temporary file");
    return;
  }
  dup2(fileno(tmp), 2);
  int eigen_complex = ours.beagleCreateInstance(3, 5, 0, 4, 10, 1, 4, 1, 0, NULL,
                                          0, 0, BEAGLE_FLAG_EIGEN_COMPLEX,
                                          &d);
  int too_many = ours.beagleCreateInstance(3, 5, 0, 200, 10, 1, 4, 1, 0,
                                           NULL, 0, 0, 0, &d);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  fseek(tmp, 0, SEEK_END);
  long written = ftell(tmp);
  fclose(tmp);
  compared += 3;
  if (eigen_complex != BEAGLE_ERROR_NO_IMPLEMENTATION)
    failf("EIGEN_COMPLEX required: %d, not NO_IMPLEMENTATION", eigen_complex);
  if (too_many >= 0) failf("200 states: instance %d", too_many);
  if (written != 0) failf("%ld bytes on stderr", written);
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s SYSTEM_LIBHMSBEAGLE OUR_LIBHMSBEAGLE [STATES]\n",
            argv[0]);
    return 2;
  }
  /* ours runs in-process whatever the environment says */
  setenv("EMBER_NAM", "embedded", 1);
  void *probe = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!probe) {
    printf("SKIP: the system's BEAGLE (%s) cannot be loaded: %s\n", argv[1],
           dlerror());
    return 77;
  }
  dlclose(probe);
  load(&sys, "BEAGLE", argv[1]);
  load(&ours, "ember", argv[2]);
  printf("BEAGLE %s, ember %s\n", sys.beagleGetVersion(),
         ours.beagleGetVersion());
  int only = argc > 3 ? atoi(argv[3]) : 0;
  static const int state_counts[] = {4, 20, 61};
  static const int pattern_counts[] = {97, 41, 23};
  uint64_t seed = 20240601;
  for (int si = 0; si < 3; si++) {
    if (only && state_counts[si] != only) continue;
    for (int ci = 0; ci < 2; ci++)
      for (int prec = 0; prec < 2; prec++)
        for (int lg = 1; lg >= 0; lg--) {
          config g = {state_counts[si], pattern_counts[si], ci ? 4 : 1, prec,
                      lg, 0};
          run_config(&g, seed++);
        }
  }
  /* the scaling the instance does itself, as BEAGLE does it */
  for (int si = 0; si < 3; si++) {
    if (only && state_counts[si] != only) continue;
    for (int mode = 0; mode < 2; mode++) {
      config g = {state_counts[si], pattern_counts[si], 4, 0, 1,
                  mode ? BEAGLE_FLAG_SCALING_AUTO : BEAGLE_FLAG_SCALING_ALWAYS};
      run_config(&g, seed++);
    }
  }
  if (!only || only == 4) run_large();
  if (!only || only == 4) check_flags();
  printf("%ld values compared, %ld failures\n", compared, failures);
  return failures ? 1 : 0;
}
