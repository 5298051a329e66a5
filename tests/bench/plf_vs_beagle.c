/*
 * plf_vs_beagle.c - the single-node kernel of Jin and Bakos, "Extending the
 * BEAGLE library to a multi-FPGA platform" (BMC Bioinformatics 2013): 4
 * states, 1 rate category, one partials update of two partials children
 * with rescaling, scale-factor accumulation and the root log-likelihood,
 * timed as the paper times BEAGLE (beagleUpdatePartials +
 * beagleAccumulateScaleFactors + beagleCalculateRootLogLikelihoods).
 *
 * BEAGLE (its vectorised CPU implementation, double precision, no threads)
 * against each ember variant this CPU runs (accelerators/plf/plf_kernel.h),
 * one thread each, and ember with the accumulation fused into the update;
 * beside them a STREAM triad (a[i] = b[i] + q c[i], double, one thread)
 * measured in the same run.
 *
 *   plf_vs_beagle [sites...]     default: 1048576 8192000
 *
 * Figures: the best of 20 (8 at over 4M sites) repetitions, each running
 * every implementation in turn (after a warm-up round), GB/s at the
 * paper's 64 bytes per site (10 single-precision inputs and 6 outputs) and
 * that as a percentage of the triad's GB/s; and the bytes this double
 * precision run really moves per site (176: children 64, partials written
 * 32, scale written 8, accumulation 24, root 48 read back; fused 168) as
 * GB/s and % of triad. Asserts nothing (a benchmark, not a test); each
 * ember lnL is printed relative to BEAGLE's.
 */
#include <libhmsbeagle/beagle.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plf_kernel.h"

#define PAPER_BYTES 64.0
#define BYTES_SEPARATE 176.0
#define BYTES_FUSED 168.0

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void *xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p) {
    fprintf(stderr, "out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

static uint64_t rng = 88172645463325252ULL;
static double unit(void) {   /* (0, 1] */
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return ((rng >> 11) + 1) * (1.0 / 9007199254740992.0);
}

/* ---- STREAM triad ---------------------------------------------------------- */

static double triad_gbs(size_t n, int reps) {
  double *a = xmalloc(n * sizeof *a), *b = xmalloc(n * sizeof *b);
  double *c = xmalloc(n * sizeof *c);
  for (size_t i = 0; i < n; i++) {
    a[i] = 0;
    b[i] = 1;
    c[i] = 2;
  }
  double best = 1e30, q = 3.0;
  for (int r = 0; r < reps; r++) {
    double t = now();
    for (size_t i = 0; i < n; i++) a[i] = b[i] + q * c[i];
    t = now() - t;
    if (t < best) best = t;
  }
  if (a[n / 2] != 7.0) fprintf(stderr, "triad: wrong result\n");
  free(a);
  free(b);
  free(c);
  return 3.0 * sizeof(double) * n / best / 1e9;
}

/* ---- one size ---------------------------------------------------------------- */

typedef struct row {
  char name[64];
  double seconds, lnl, bytes;
} row;

static int reps_for(int sites) { return sites > 4000000 ? 8 : 20; }

static void bench_size(int sites, row *rows, int *nrows) {
  const int P = sites, S = 4;
  size_t n = (size_t)P * S;
  double *x1 = xmalloc(n * sizeof(double)), *x2 = xmalloc(n * sizeof(double));
  double *dest = xmalloc(n * sizeof(double));
  double *scale = xmalloc(P * sizeof(double)), *cum = xmalloc(P * sizeof(double));
  double *pw = xmalloc(P * sizeof(double));
  for (size_t i = 0; i < n; i++) {
    x1[i] = unit();
    x2[i] = unit();
  }
  for (int p = 0; p < P; p++) pw[p] = 1 + (int)(unit() * 3);
  /* row-stochastic matrices, frequencies, one category of weight 1 */
  double m1[16], m2[16], freqs[4] = {0.1, 0.2, 0.3, 0.4}, cw = 1, rate = 1;
  for (int i = 0; i < 4; i++) {
    double s1 = 0, s2 = 0;
    for (int j = 0; j < 4; j++) {
      s1 += m1[i * 4 + j] = (i == j ? 4 : 0) + unit();
      s2 += m2[i * 4 + j] = (i == j ? 3 : 0) + unit();
    }
    for (int j = 0; j < 4; j++) {
      m1[i * 4 + j] /= s1;
      m2[i * 4 + j] /= s2;
    }
  }
  int reps = reps_for(sites);

  /* BEAGLE: tips 0 and 1 as partials, internal buffer 2; scale buffers 0
   * (written) and 1 (cumulative) */
  BeagleInstanceDetails det;
  long pref = BEAGLE_FLAG_PROCESSOR_CPU | BEAGLE_FLAG_VECTOR_SSE |
              BEAGLE_FLAG_THREADING_NONE | BEAGLE_FLAG_SCALERS_LOG;
  int inst = beagleCreateInstance(2, 3, 0, S, P, 1, 2, 1, 2, NULL, 0, pref,
                                  BEAGLE_FLAG_PRECISION_DOUBLE, &det);
  if (inst < 0) {
    fprintf(stderr, "beagleCreateInstance: %d\n", inst);
    exit(1);
  }
  beagleSetTipPartials(inst, 0, x1);
  beagleSetTipPartials(inst, 1, x2);
  beagleSetTransitionMatrix(inst, 0, m1, 1);
  beagleSetTransitionMatrix(inst, 1, m2, 1);
  beagleSetStateFrequencies(inst, 0, freqs);
  beagleSetCategoryWeights(inst, 0, &cw);
  beagleSetCategoryRates(inst, &rate);
  beagleSetPatternWeights(inst, pw);
  BeagleOperation op = {2, 0, BEAGLE_OP_NONE, 0, 0, 1, 1};
  int scale_idx = 0, cum_idx = 1, root = 2, zero = 0;

  /* the rows: BEAGLE, each ember variant, the default one fused */
  const plf_dims d = {S, P, 1};
  plf_update_d up = {dest, {x1, NULL, m1}, {x2, NULL, m2}, scale, NULL};
  plf_integrate_d in = {&cw, freqs, cum, pw, NULL};
  const double *const list[1] = {scale};
  const plf_kernels *kern[8];
  int fused[8], first = *nrows;
  row *r = &rows[(*nrows)++];
  snprintf(r->name, sizeof r->name, "BEAGLE %s", det.implName);
  r->bytes = BYTES_SEPARATE;
  for (int f = 0; f < 2; f++)
    for (int isa = 0; isa < PLF_ISA_COUNT; isa++) {
      const plf_kernels *k = plf_kernels_get((plf_isa)isa);
      if (!k || (f && isa != (int)plf_kernels_isa(NULL))) continue;
      kern[*nrows - first] = k;
      fused[*nrows - first] = f;
      r = &rows[(*nrows)++];
      snprintf(r->name, sizeof r->name, "ember %s%s", plf_isa_name(isa),
               f ? " fused" : "");
      r->bytes = f ? BYTES_FUSED : BYTES_SEPARATE;
    }
  for (int i = first; i < *nrows; i++) rows[i].seconds = 1e30;

  /* interleaved: every repetition runs every row once, so that a busy
   * machine slows them alike; the first is a warm-up */
  for (int rep = 0; rep <= reps; rep++)
    for (int i = first; i < *nrows; i++) {
      r = &rows[i];
      double t;
      if (i == first) {
        beagleResetScaleFactors(inst, cum_idx);
        t = now();
        beagleUpdatePartials(inst, &op, 1, BEAGLE_OP_NONE);
        beagleAccumulateScaleFactors(inst, &scale_idx, 1, cum_idx);
        beagleCalculateRootLogLikelihoods(inst, &root, &zero, &zero,
                                          &cum_idx, 1, &r->lnl);
        t = now() - t;
      } else {
        const plf_kernels *k = kern[i - first];
        int f = fused[i - first];
        up.cumulative = f ? cum : NULL;
        plf_scale_reset_d(cum, 0, P);
        t = now();
        int rc = plf_update_partials_d(k, &d, &up, 0, P);
        if (!f && !rc) rc = plf_scale_accumulate_d(cum, list, 1, 0, P);
        if (!rc) rc = plf_root_lnl_d(k, &d, dest, &in, 0, P, &r->lnl);
        t = now() - t;
        if (rc) {
          fprintf(stderr, "ember: error %d\n", rc);
          exit(1);
        }
      }
      if (rep > 0 && t < r->seconds) r->seconds = t;
    }
  beagleFinalizeInstance(inst);
  free(x1);
  free(x2);
  free(dest);
  free(scale);
  free(cum);
  free(pw);
}

int main(int argc, char **argv) {
  int sizes[16], nsizes = 0;
  for (int i = 1; i < argc && nsizes < 16; i++) sizes[nsizes++] = atoi(argv[i]);
  if (!nsizes) {
    sizes[nsizes++] = 1048576;
    sizes[nsizes++] = 8192000;
  }
  double triad = triad_gbs((size_t)1 << 25, 10);   /* 3 x 256 MiB */
  printf("plf_vs_beagle: BEAGLE %s; 4 states, 1 category, double, 1 thread\n",
         beagleGetVersion());
  printf("STREAM triad (1 thread, 3 x 256 MiB): %.2f GB/s\n", triad);
  printf("GB/s at the paper's 64 B/site; 'real' at the bytes this run moves "
         "(176 B/site, fused 168)\n\n");
  printf("%-9s %-30s %9s %8s %7s %9s %7s %8s  %s\n", "sites", "implementation",
         "time ms", "GB/s", "%triad", "real GB/s", "%triad", "speedup",
         "lnL rel. to BEAGLE");
  for (int s = 0; s < nsizes; s++) {
    row rows[8];
    int nrows = 0;
    bench_size(sizes[s], rows, &nrows);
    for (int i = 0; i < nrows; i++) {
      double gbs = PAPER_BYTES * sizes[s] / rows[i].seconds / 1e9;
      double real = rows[i].bytes * sizes[s] / rows[i].seconds / 1e9;
      printf("%-9d %-30s %9.3f %8.2f %6.1f%% %9.2f %6.1f%% %7.2fx  %.1e\n",
             sizes[s], rows[i].name, rows[i].seconds * 1e3, gbs,
             100 * gbs / triad, real, 100 * real / triad,
             rows[0].seconds / rows[i].seconds,
             fabs(rows[i].lnl - rows[0].lnl) / fabs(rows[0].lnl));
    }
    printf("\n");
  }
  return 0;
}
