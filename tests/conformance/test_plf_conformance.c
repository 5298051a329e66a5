/*
 * test_plf_conformance.c - every plf kernel variant (scalar, avx2, avx512
 * where this CPU runs them) against BEAGLE 3.1's CPU implementation
 * (libhmsbeagle, a test dependency only) on random instances:
 *   S = 4, 20, 61; C = 1, 4; double and single precision; with and without
 *   rescaling; tips as states (with missing data) or as partials.
 *
 *   test_plf_conformance [4|20|61]   one state count (default: all three)
 *
 * An instance is a random reversible model (exchangeabilities and
 * frequencies, symmetrised with sqrt(pi) and decomposed by LAPACKE_dsyev)
 * on a 5-taxon tree: ((t0,t1)n5,t2)n6 and (t3,t4)n7 under the root n8,
 * which covers states x states, partials x states and partials x partials.
 * Operations compared, each on the same inputs as BEAGLE's (the partials
 * updates use BEAGLE's matrices, read back):
 *   transition matrices with first and second derivatives,
 *   the four partials updates (partials, log scale factors),
 *   scale accumulation, accumulation fused into the update, removal,
 *   root log-likelihood (total and per site),
 *   edge log-likelihood across a partials child and a tip child.
 * Every variant also runs each operation split over three pattern ranges
 * and over two threads, which must give bit-identical results.
 *
 * Tolerances (relative; partials relative to their pattern's largest value,
 * matrices to their largest entry, log values to max(1, |value|)):
 *   double 1e-12 everywhere;
 *   single 1e-5 on log-likelihoods, 2e-5 on partials, matrices and scale
 *   factors (float rounding differs from BEAGLE's in summation order).
 * The number of values compared and the largest errors seen are printed.
 */
#include <lapacke.h>
#include <libhmsbeagle/beagle.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plf_kernel.h"

#define NTIPS 5
#define NNODES 9        /* tips 0..4, internal 5..8 (root 8) */
#define NMAT 11         /* 0..7 edges above nodes, 8 an edge, 9/10 its d1/d2 */
#define NOPS 4

static long compared, failures;
static double worst[2][8];   /* [precision][kind] largest relative error */
enum { K_MAT, K_PART, K_SCALE, K_LNL, K_SITE, K_COUNT };
static const char *const kind_names[K_COUNT] = {
  "matrices", "partials", "scale", "lnL", "site lnL",
};

/* ---- random numbers ------------------------------------------------------ */

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

static void *xcalloc(size_t n, size_t size) {
  void *p = calloc(n ? n : 1, size);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return p;
}

/* ---- one instance's inputs (double) ------------------------------------ */

typedef struct config {
  int S, P, C;
  int single;       /* 1: float */
  int scaling;
  int tip_states;   /* tips 0..2 (and the edge's tip 3 on the edge check)
                       as states; else every tip as partials */
} config;

typedef struct inputs {
  double *evec, *ivec, *eval, *freqs, *cat_weights, *cat_rates, *pat_weights;
  double lengths[NMAT - 2];   /* edges 0..7 and the edge 8 */
  int *states[NTIPS];         /* [P], or NULL: partials */
  double *tip_partials[NTIPS];   /* [P][S] */
} inputs;

/* reversible Q = R diag(pi), normalised to one substitution per unit time;
 * A = D^1/2 Q D^-1/2 is symmetric: A = U L U', so Q = (D^-1/2 U) L (U' D^1/2) */
static void random_model(int S, inputs *in) {
  double *pi = in->freqs, sum = 0;
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
  lapack_int info = LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'V', 'U', S, a, S,
                                  in->eval);
  if (info != 0) {
    fprintf(stderr, "LAPACKE_dsyev: info %d\n", (int)info);
    exit(1);
  }
  for (int i = 0; i < S; i++)
    for (int k = 0; k < S; k++) {
      in->evec[i * S + k] = a[i * S + k] / sqrt(pi[i]);
      in->ivec[k * S + i] = a[i * S + k] * sqrt(pi[i]);
    }
  free(q);
  free(a);
}

static void make_inputs(const config *g, inputs *in) {
  int S = g->S, P = g->P, C = g->C;
  in->evec = xcalloc((size_t)S * S, sizeof(double));
  in->ivec = xcalloc((size_t)S * S, sizeof(double));
  in->eval = xcalloc(S, sizeof(double));
  in->freqs = xcalloc(S, sizeof(double));
  in->cat_weights = xcalloc(C, sizeof(double));
  in->cat_rates = xcalloc(C, sizeof(double));
  in->pat_weights = xcalloc(P, sizeof(double));
  random_model(S, in);
  double wsum = 0;
  for (int c = 0; c < C; c++) {
    wsum += in->cat_weights[c] = 0.5 + rng_unit();
    in->cat_rates[c] = C == 1 ? 1.0 : 0.1 + 2.5 * rng_unit();
  }
  for (int c = 0; c < C; c++) in->cat_weights[c] /= wsum;
  for (int p = 0; p < P; p++) in->pat_weights[p] = 1 + (rng_next() % 5);
  for (int e = 0; e < NMAT - 2; e++) in->lengths[e] = 0.02 + 0.6 * rng_unit();
  for (int t = 0; t < NTIPS; t++) {
    in->tip_partials[t] = xcalloc((size_t)P * S, sizeof(double));
    in->states[t] = NULL;
    if (g->tip_states && t != 4) {   /* t4 stays partials: P x S pairs */
      in->states[t] = xcalloc(P, sizeof(int));
      for (int p = 0; p < P; p++) {
        uint64_t r = rng_next() % 100;
        in->states[t][p] = r < 4 ? S : r < 6 ? S + 3 : (int)(rng_next() % S);
      }
    }
    for (int p = 0; p < P; p++) {
      double *x = in->tip_partials[t] + (size_t)p * S;
      uint64_t r = rng_next() % 10;
      if (in->states[t]) {
        int s = in->states[t][p];
        for (int i = 0; i < S; i++) x[i] = s >= S || i == s ? 1 : 0;
      } else if (r < 6) {
        x[rng_next() % S] = 1;
      } else if (r < 7) {
        for (int i = 0; i < S; i++) x[i] = 1;
      } else {
        for (int i = 0; i < S; i++) x[i] = rng_unit();
      }
    }
  }
}

static void free_inputs(inputs *in) {
  free(in->evec);
  free(in->ivec);
  free(in->eval);
  free(in->freqs);
  free(in->cat_weights);
  free(in->cat_rates);
  free(in->pat_weights);
  for (int t = 0; t < NTIPS; t++) {
    free(in->states[t]);
    free(in->tip_partials[t]);
  }
}

/* ---- results of one implementation, in double ----------------------------- */

typedef struct results {
  double *mat[NMAT];            /* [C][S][S] */
  double *part[NOPS];           /* nodes 5..8, [C][P][S] */
  double *scale[NOPS];          /* [P] */
  double *cum, *cum_fused, *cum_removed;   /* [P] */
  double root, edge[2];
  double *root_site, *edge_site[2];        /* [P] */
} results;

static void results_alloc(const config *g, results *r) {
  size_t m = (size_t)g->C * g->S * g->S, n = (size_t)g->C * g->P * g->S;
  memset(r, 0, sizeof *r);
  for (int i = 0; i < NMAT; i++) r->mat[i] = xcalloc(m, sizeof(double));
  for (int i = 0; i < NOPS; i++) {
    r->part[i] = xcalloc(n, sizeof(double));
    r->scale[i] = xcalloc(g->P, sizeof(double));
  }
  r->cum = xcalloc(g->P, sizeof(double));
  r->cum_fused = xcalloc(g->P, sizeof(double));
  r->cum_removed = xcalloc(g->P, sizeof(double));
  r->root_site = xcalloc(g->P, sizeof(double));
  r->edge_site[0] = xcalloc(g->P, sizeof(double));
  r->edge_site[1] = xcalloc(g->P, sizeof(double));
}

static void results_free(results *r) {
  for (int i = 0; i < NMAT; i++) free(r->mat[i]);
  for (int i = 0; i < NOPS; i++) {
    free(r->part[i]);
    free(r->scale[i]);
  }
  free(r->cum);
  free(r->cum_fused);
  free(r->cum_removed);
  free(r->root_site);
  free(r->edge_site[0]);
  free(r->edge_site[1]);
}

/* The tree: op i writes node 5 + i from two children through the matrices
 * of the edges above them; the edge checks: (parent n7, child n6, matrix 8)
 * and (parent n6, child tip 3, matrix 3). */
static const int op_children[NOPS][2] = {{0, 1}, {5, 2}, {3, 4}, {6, 7}};

/* ---- BEAGLE ---------------------------------------------------------------- */

static void beagle_check(int rc, const char *what) {
  if (rc < 0) {
    fprintf(stderr, "BEAGLE %s: error %d\n", what, rc);
    exit(1);
  }
}

/* BEAGLE 3.1's beagleGetScaleFactors returns nothing on the CPU
 * implementation: a scale buffer is read as the difference it makes to the
 * root's site log-likelihoods, used as the cumulative buffer. */
static void beagle_scale(int inst, int idx, int P, double *out) {
  int root = 8, zero = 0, none = BEAGLE_OP_NONE;
  double lnl, *base = xcalloc(P, sizeof *base);
  beagle_check(beagleCalculateRootLogLikelihoods(inst, &root, &zero, &zero,
                                                 &none, 1, &lnl), "root");
  beagle_check(beagleGetSiteLogLikelihoods(inst, base), "sites");
  beagle_check(beagleCalculateRootLogLikelihoods(inst, &root, &zero, &zero,
                                                 &idx, 1, &lnl), "root");
  beagle_check(beagleGetSiteLogLikelihoods(inst, out), "sites");
  for (int p = 0; p < P; p++) out[p] -= base[p];
  free(base);
}

static void run_beagle(const config *g, const inputs *in, results *r) {
  int S = g->S, P = g->P, C = g->C;
  BeagleInstanceDetails det;
  /* BEAGLE's SSE implementation pads an odd S to even, and 3.1.2's
   * beagleGetPartials then copies padded rows (overrunning the buffer):
   * the plain CPU implementation for odd S */
  long pref = BEAGLE_FLAG_PROCESSOR_CPU | BEAGLE_FLAG_SCALERS_LOG |
              BEAGLE_FLAG_THREADING_NONE |
              (S % 2 ? BEAGLE_FLAG_VECTOR_NONE : BEAGLE_FLAG_VECTOR_SSE);
  long req = g->single ? BEAGLE_FLAG_PRECISION_SINGLE
                       : BEAGLE_FLAG_PRECISION_DOUBLE;
  int inst = beagleCreateInstance(NTIPS, NNODES, NTIPS, S, P, 1, NMAT, C,
                                  NOPS + 2, NULL, 0, pref, req, &det);
  beagle_check(inst, "create");
  for (int t = 0; t < NTIPS; t++)
    beagle_check(in->states[t] ? beagleSetTipStates(inst, t, in->states[t])
                 : beagleSetTipPartials(inst, t, in->tip_partials[t]),
                 "tips");
  beagle_check(beagleSetEigenDecomposition(inst, 0, in->evec, in->ivec,
                                           in->eval), "eigen");
  beagle_check(beagleSetStateFrequencies(inst, 0, in->freqs), "freqs");
  beagle_check(beagleSetCategoryWeights(inst, 0, in->cat_weights), "weights");
  beagle_check(beagleSetCategoryRates(inst, in->cat_rates), "rates");
  beagle_check(beagleSetPatternWeights(inst, in->pat_weights), "patterns");
  int idx[NMAT - 2];
  for (int e = 0; e < NMAT - 2; e++) idx[e] = e;
  beagle_check(beagleUpdateTransitionMatrices(inst, 0, idx, NULL, NULL,
                                              in->lengths, 8), "matrices");
  int i8 = 8, i9 = 9, i10 = 10;
  beagle_check(beagleUpdateTransitionMatrices(inst, 0, &i8, &i9, &i10,
                                              &in->lengths[8], 1), "derivs");
  for (int m = 0; m < NMAT; m++)
    beagle_check(beagleGetTransitionMatrix(inst, m, r->mat[m]), "getmatrix");

  BeagleOperation ops[NOPS];
  for (int i = 0; i < NOPS; i++)
    ops[i] = (BeagleOperation){5 + i, g->scaling ? i : BEAGLE_OP_NONE,
                               BEAGLE_OP_NONE, op_children[i][0],
                               op_children[i][0], op_children[i][1],
                               op_children[i][1]};
  beagle_check(beagleUpdatePartials(inst, ops, NOPS, BEAGLE_OP_NONE),
               "update");
  for (int i = 0; i < NOPS; i++)
    beagle_check(beagleGetPartials(inst, 5 + i, BEAGLE_OP_NONE, r->part[i]),
                 "getpartials");
  int cum = NOPS, cum2 = NOPS + 1, scale_idx[NOPS] = {0, 1, 2, 3};
  int cum_idx = g->scaling ? cum : BEAGLE_OP_NONE;
  if (g->scaling) {
    for (int i = 0; i < NOPS; i++)
      beagle_scale(inst, i, P, r->scale[i]);
    beagle_check(beagleResetScaleFactors(inst, cum), "reset");
    beagle_check(beagleAccumulateScaleFactors(inst, scale_idx, NOPS, cum),
                 "accumulate");
    beagle_scale(inst, cum, P, r->cum);
  }
  int root = 8, zero = 0;
  beagle_check(beagleCalculateRootLogLikelihoods(inst, &root, &zero, &zero,
                                                 &cum_idx, 1, &r->root),
               "root");
  beagle_check(beagleGetSiteLogLikelihoods(inst, r->root_site), "sites");
  int parents[2] = {7, 6}, children[2] = {6, 3}, mats[2] = {8, 3};
  for (int e = 0; e < 2; e++) {
    beagle_check(beagleCalculateEdgeLogLikelihoods(
                     inst, &parents[e], &children[e], &mats[e], NULL, NULL,
                     &zero, &zero, &cum_idx, 1, &r->edge[e], NULL, NULL),
                 "edge");
    beagle_check(beagleGetSiteLogLikelihoods(inst, r->edge_site[e]),
                 "edgesites");
  }
  if (g->scaling) {
    beagle_check(beagleResetScaleFactors(inst, cum2), "reset2");
    beagle_check(beagleUpdatePartials(inst, ops, NOPS, cum2), "fused");
    beagle_scale(inst, cum2, P, r->cum_fused);
    beagle_check(beagleRemoveScaleFactors(inst, &scale_idx[3], 1, cum),
                 "remove");
    beagle_scale(inst, cum, P, r->cum_removed);
  }
  beagleFinalizeInstance(inst);
}

/* ---- ember, once per precision ------------------------------------------- */

typedef enum { WHOLE, RANGES, THREADS } split;

#define PLF_REAL double
#define PLF_SFX d
#include "plf_conformance_body.h"
#undef PLF_REAL
#undef PLF_SFX

#define PLF_REAL float
#define PLF_SFX f
#include "plf_conformance_body.h"
#undef PLF_REAL
#undef PLF_SFX

/* ---- comparisons ------------------------------------------------------------ */

static double tol_for(const config *g, int kind) {
  if (!g->single) return 1e-12;
  return kind == K_LNL || kind == K_SITE ? 1e-5 : 2e-5;
}

static void note(const config *g, const char *who, const char *what, int kind,
                 double err, long at) {
  compared++;
  if (err > worst[g->single][kind]) worst[g->single][kind] = err;
  if (!(err <= tol_for(g, kind))) {
    if (failures++ < 20)
      fprintf(stderr,
              "FAIL S=%d C=%d %s scaling=%d tips=%s %s: %s[%ld] relative "
              "error %.3g > %.3g\n",
              g->S, g->C, g->single ? "single" : "double", g->scaling,
              g->tip_states ? "states" : "partials", who, what, at, err,
              tol_for(g, kind));
  }
}

/* blocks of n values, each relative to its block's largest |want| */
static void cmp_blocks(const config *g, const char *who, const char *what,
                       int kind, const double *want, const double *got,
                       size_t count, size_t block) {
  for (size_t b = 0; b < count; b += block) {
    double big = 0;
    for (size_t i = b; i < b + block; i++)
      if (fabs(want[i]) > big) big = fabs(want[i]);
    if (big == 0) big = 1;
    for (size_t i = b; i < b + block; i++)
      note(g, who, what, kind, fabs(got[i] - want[i]) / big, (long)i);
  }
}

/* log values: relative to max(1, |want|) */
static void cmp_logs(const config *g, const char *who, const char *what,
                     int kind, const double *want, const double *got,
                     size_t count) {
  for (size_t i = 0; i < count; i++) {
    double big = fabs(want[i]) > 1 ? fabs(want[i]) : 1;
    note(g, who, what, kind, fabs(got[i] - want[i]) / big, (long)i);
  }
}

/* partials [C][P][S]: relative to the pattern's largest value over all
 * categories */
static void cmp_partials(const config *g, const char *who, const char *what,
                         const double *want, const double *got) {
  int S = g->S, P = g->P, C = g->C;
  for (int p = 0; p < P; p++) {
    double big = 0;
    for (int c = 0; c < C; c++)
      for (int s = 0; s < S; s++) {
        double v = fabs(want[((size_t)c * P + p) * S + s]);
        if (v > big) big = v;
      }
    if (big == 0) big = 1;
    for (int c = 0; c < C; c++)
      for (int s = 0; s < S; s++) {
        size_t i = ((size_t)c * P + p) * S + s;
        note(g, who, what, K_PART, fabs(got[i] - want[i]) / big, (long)i);
      }
  }
}

static void compare(const config *g, const char *who, const results *want,
                    const results *got) {
  size_t m = (size_t)g->S * g->S;
  for (int i = 0; i < NMAT; i++)
    cmp_blocks(g, who, "matrix", K_MAT, want->mat[i], got->mat[i],
               m * g->C, m);
  static const char *const names[NOPS] = {"n5", "n6", "n7", "n8"};
  for (int i = 0; i < NOPS; i++) cmp_partials(g, who, names[i], want->part[i],
                                              got->part[i]);
  if (g->scaling) {
    for (int i = 0; i < NOPS; i++)
      cmp_logs(g, who, "scale", K_SCALE, want->scale[i], got->scale[i], g->P);
    cmp_logs(g, who, "cumulative", K_SCALE, want->cum, got->cum, g->P);
    cmp_logs(g, who, "cumulative fused", K_SCALE, want->cum_fused,
             got->cum_fused, g->P);
    cmp_logs(g, who, "cumulative removed", K_SCALE, want->cum_removed,
             got->cum_removed, g->P);
  }
  double rel = fabs(got->root - want->root) / fabs(want->root);
  note(g, who, "root lnL", K_LNL, rel, 0);
  cmp_logs(g, who, "root site lnL", K_SITE, want->root_site, got->root_site,
           g->P);
  for (int e = 0; e < 2; e++) {
    rel = fabs(got->edge[e] - want->edge[e]) / fabs(want->edge[e]);
    note(g, who, e ? "edge lnL (tip)" : "edge lnL", K_LNL, rel, e);
    cmp_logs(g, who, "edge site lnL", K_SITE, want->edge_site[e],
             got->edge_site[e], g->P);
  }
}

/* bit-identical: the same variant whatever the pattern split */
static void same_bits(const config *g, const char *who, const char *what,
                      const double *a, const double *b, size_t n) {
  compared++;
  if (memcmp(a, b, n * sizeof *a) != 0 && failures++ < 20)
    fprintf(stderr, "FAIL S=%d C=%d %s %s: %s differs between splits\n",
            g->S, g->C, g->single ? "single" : "double", who, what);
}

static void compare_splits(const config *g, const char *who,
                           const results *a, const results *b) {
  size_t n = (size_t)g->C * g->P * g->S;
  for (int i = 0; i < NOPS; i++) {
    same_bits(g, who, "partials", a->part[i], b->part[i], n);
    same_bits(g, who, "scale", a->scale[i], b->scale[i], g->P);
  }
  same_bits(g, who, "cumulative", a->cum_fused, b->cum_fused, g->P);
  same_bits(g, who, "root sites", a->root_site, b->root_site, g->P);
  same_bits(g, who, "edge sites", a->edge_site[0], b->edge_site[0], g->P);
  same_bits(g, who, "edge sites", a->edge_site[1], b->edge_site[1], g->P);
  compared++;
  if (fabs(a->root - b->root) > 1e-9 * fabs(a->root) && failures++ < 20)
    fprintf(stderr, "FAIL %s: root lnL %.17g vs %.17g between splits\n", who,
            a->root, b->root);
}

static void run_config(const config *g) {
  inputs in;
  make_inputs(g, &in);
  results want;
  results_alloc(g, &want);
  run_beagle(g, &in, &want);
  for (int isa = 0; isa < PLF_ISA_COUNT; isa++) {
    const plf_kernels *k = plf_kernels_get((plf_isa)isa);
    if (!k) continue;
    results got[3];
    for (int s = 0; s < 3; s++) {
      results_alloc(g, &got[s]);
      if (g->single)
        run_ember_f(g, &in, &want, k, (split)s, &got[s]);
      else
        run_ember_d(g, &in, &want, k, (split)s, &got[s]);
    }
    const char *who = plf_isa_name((plf_isa)isa);
    compare(g, who, &want, &got[WHOLE]);
    compare_splits(g, who, &got[WHOLE], &got[RANGES]);
    compare_splits(g, who, &got[WHOLE], &got[THREADS]);
    for (int s = 0; s < 3; s++) results_free(&got[s]);
  }
  results_free(&want);
  free_inputs(&in);
}

int main(int argc, char **argv) {
  int only = argc > 1 ? atoi(argv[1]) : 0;
  static const int states[3] = {4, 20, 61};
  static const int patterns[3] = {1003, 501, 203};
  rng_state = 20130119;
  printf("variants:");
  for (int isa = 0; isa < PLF_ISA_COUNT; isa++)
    printf(" %s%s", plf_isa_name((plf_isa)isa),
           plf_kernels_get((plf_isa)isa) ? "" : " (not run: not built or CPU lacks it)");
  printf("\n");
  int configs = 0;
  for (int si = 0; si < 3; si++) {
    if (only && states[si] != only) continue;
    for (int c = 1; c <= 4; c += 3)
      for (int single = 0; single < 2; single++)
        for (int scaling = 0; scaling < 2; scaling++)
          for (int tips = 0; tips < 2; tips++) {
            config g = {states[si], patterns[si], c, single, scaling, tips};
            run_config(&g);
            configs++;
          }
  }
  printf("%d configurations, %ld comparisons, %ld failures\n", configs,
         compared, failures);
  for (int pr = 0; pr < 2; pr++) {
    printf("largest relative error, %s:", pr ? "single" : "double");
    for (int k = 0; k < K_COUNT; k++)
      printf(" %s %.2g", kind_names[k], worst[pr][k]);
    printf("\n");
  }
  return failures ? 1 : 0;
}
