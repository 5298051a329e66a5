/*
 * plf_kernel_bench.c - part (1) of plf_vs_beagle: the single-node kernel
 * of Jin and Bakos, "Extending the BEAGLE library to a multi-FPGA
 * platform" (BMC Bioinformatics 2013): 4 states, 1 rate category, one
 * partials update of two partials children with rescaling, scale-factor
 * accumulation and the root log-likelihood, timed as the paper times
 * BEAGLE (beagleUpdatePartials + beagleAccumulateScaleFactors +
 * beagleCalculateRootLogLikelihoods).
 *
 * Per size and precision: BEAGLE (double: its vectorised CPU
 * implementation; single: CPU-4State-Single, the only single-precision CPU
 * one Debian's 3.1.2 has) against each ember variant this CPU runs
 * (accelerators/plf/plf_kernel.h, the _d or _f kernels), one thread each,
 * and the default variant with the accumulation fused into the update.
 *
 * Figures: the best of 20 (8 at over 4M sites) repetitions, each running
 * every implementation in turn (after a warm-up round); GB/s at the
 * paper's 64 bytes per site (10 single-precision inputs and 6 outputs) and
 * that as a percentage of the triad; and the bytes the run really moves
 * per site (double 176: children 64, partials written 32, scale written 8,
 * accumulation 24, root 48 read back; fused 168; single half of those) as
 * GB/s and % of triad. Each lnL is printed relative to BEAGLE's in the
 * same precision.
 */
#include <libhmsbeagle/beagle.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plf_bench_common.h"
#include "plf_kernel.h"

#define PAPER_BYTES 64.0
#define BYTES_SEPARATE 176.0 /* double; single: half */
#define BYTES_FUSED 168.0
#define MAX_ROWS 8

typedef struct row {
  char name[64];
  double seconds, lnl, bytes;
} row;

/* One size's buffers, in double and (single) float. */
typedef struct kdata {
  int P, single;
  double *x1, *x2, *dest, *scale, *cum, *pw;
  float *fx1, *fx2, *fdest, *fscale, *fcum, *fpw;
  double m1[16], m2[16], freqs[4], cw;
  float fm1[16], fm2[16], ffreqs[4], fcw;
} kdata;

static float *to_float(const double *v, size_t n) {
  float *f = pb_xmalloc(n * sizeof *f);
  for (size_t i = 0; i < n; i++) f[i] = (float)v[i];
  return f;
}

static void kdata_init(kdata *k, int sites, int single) {
  memset(k, 0, sizeof *k);
  pb_rng rng = {88172645463325252ULL};
  size_t P = (size_t)sites, n = P * 4;
  k->P = sites;
  k->single = single;
  k->x1 = pb_xmalloc(n * sizeof(double));
  k->x2 = pb_xmalloc(n * sizeof(double));
  k->dest = pb_xmalloc(n * sizeof(double));
  k->scale = pb_xmalloc(P * sizeof(double));
  k->cum = pb_xmalloc(P * sizeof(double));
  k->pw = pb_xmalloc(P * sizeof(double));
  for (size_t i = 0; i < n; i++) {
    k->x1[i] = pb_unit(&rng);
    k->x2[i] = pb_unit(&rng);
  }
  for (size_t p = 0; p < P; p++) k->pw[p] = 1 + (int)(pb_unit(&rng) * 3);
  /* row-stochastic matrices, frequencies, one category of weight 1 */
  for (int i = 0; i < 4; i++) {
    double s1 = 0, s2 = 0;
    for (int j = 0; j < 4; j++) {
      s1 += k->m1[i * 4 + j] = (i == j ? 4 : 0) + pb_unit(&rng);
      s2 += k->m2[i * 4 + j] = (i == j ? 3 : 0) + pb_unit(&rng);
    }
    for (int j = 0; j < 4; j++) {
      k->m1[i * 4 + j] /= s1;
      k->m2[i * 4 + j] /= s2;
    }
    k->freqs[i] = 0.1 * (i + 1);
  }
  k->cw = 1;
  if (!single) return;
  k->fx1 = to_float(k->x1, n);
  k->fx2 = to_float(k->x2, n);
  k->fdest = pb_xmalloc(n * sizeof(float));
  k->fscale = pb_xmalloc(P * sizeof(float));
  k->fcum = pb_xmalloc(P * sizeof(float));
  k->fpw = to_float(k->pw, P);
  for (int i = 0; i < 16; i++) {
    k->fm1[i] = (float)k->m1[i];
    k->fm2[i] = (float)k->m2[i];
  }
  for (int i = 0; i < 4; i++) k->ffreqs[i] = (float)k->freqs[i];
  k->fcw = 1;
}

static void kdata_free(kdata *k) {
  free(k->x1), free(k->x2), free(k->dest), free(k->scale), free(k->cum);
  free(k->pw), free(k->fx1), free(k->fx2), free(k->fdest), free(k->fscale);
  free(k->fcum), free(k->fpw);
}

/* ember's update, accumulation (unless fused) and root lnL: 0 or an
 * error. */
static int ember_once(const plf_kernels *kern, int fused, kdata *k,
                      double *lnl) {
  const plf_dims d = {4, k->P, 1};
  int P = k->P, rc;
  if (!k->single) {
    plf_update_d up = {k->dest, {k->x1, NULL, k->m1}, {k->x2, NULL, k->m2},
                       k->scale, fused ? k->cum : NULL};
    plf_integrate_d in = {&k->cw, k->freqs, k->cum, k->pw, NULL};
    const double *const list[1] = {k->scale};
    rc = plf_update_partials_d(kern, &d, &up, 0, P);
    if (!fused && !rc) rc = plf_scale_accumulate_d(k->cum, list, 1, 0, P);
    if (!rc) rc = plf_root_lnl_d(kern, &d, k->dest, &in, 0, P, lnl);
  } else {
    plf_update_f up = {k->fdest, {k->fx1, NULL, k->fm1},
                       {k->fx2, NULL, k->fm2}, k->fscale,
                       fused ? k->fcum : NULL};
    plf_integrate_f in = {&k->fcw, k->ffreqs, k->fcum, k->fpw, NULL};
    const float *const list[1] = {k->fscale};
    rc = plf_update_partials_f(kern, &d, &up, 0, P);
    if (!fused && !rc) rc = plf_scale_accumulate_f(k->fcum, list, 1, 0, P);
    if (!rc) rc = plf_root_lnl_f(kern, &d, k->fdest, &in, 0, P, lnl);
  }
  return rc;
}

static int bench_size(int sites, int single, row *rows, int *nrows) {
  const int P = sites, S = 4;
  kdata k;
  kdata_init(&k, sites, single);
  int reps = sites > 4000000 ? 8 : 20;
  double rate = 1, half = single ? 0.5 : 1.0;

  /* BEAGLE: tips 0 and 1 as partials, internal buffer 2; scale buffers 0
   * (written) and 1 (cumulative) */
  BeagleInstanceDetails det;
  long pref = BEAGLE_FLAG_PROCESSOR_CPU | BEAGLE_FLAG_VECTOR_SSE |
              BEAGLE_FLAG_THREADING_NONE | BEAGLE_FLAG_SCALERS_LOG;
  long req = single ? BEAGLE_FLAG_PRECISION_SINGLE
                    : BEAGLE_FLAG_PRECISION_DOUBLE;
  int inst = beagleCreateInstance(2, 3, 0, S, P, 1, 2, 1, 2, NULL, 0, pref,
                                  req, &det);
  if (inst < 0) {
    fprintf(stderr, "beagleCreateInstance: %d\n", inst);
    kdata_free(&k);
    return 1;
  }
  beagleSetTipPartials(inst, 0, k.x1);
  beagleSetTipPartials(inst, 1, k.x2);
  beagleSetTransitionMatrix(inst, 0, k.m1, 1);
  beagleSetTransitionMatrix(inst, 1, k.m2, 1);
  beagleSetStateFrequencies(inst, 0, k.freqs);
  beagleSetCategoryWeights(inst, 0, &k.cw);
  beagleSetCategoryRates(inst, &rate);
  beagleSetPatternWeights(inst, k.pw);
  BeagleOperation op = {2, 0, BEAGLE_OP_NONE, 0, 0, 1, 1};
  int scale_idx = 0, cum_idx = 1, root = 2, zero = 0;

  /* the rows: BEAGLE, each ember variant, the default one fused */
  const plf_kernels *kern[MAX_ROWS];
  int fused[MAX_ROWS], first = *nrows;
  row *r = &rows[(*nrows)++];
  snprintf(r->name, sizeof r->name, "BEAGLE %s", det.implName);
  r->bytes = BYTES_SEPARATE * half;
  for (int f = 0; f < 2; f++)
    for (int isa = 0; isa < PLF_ISA_COUNT; isa++) {
      const plf_kernels *kk = plf_kernels_get((plf_isa)isa);
      if (!kk || (f && isa != (int)plf_kernels_isa(NULL))) continue;
      kern[*nrows - first] = kk;
      fused[*nrows - first] = f;
      r = &rows[(*nrows)++];
      snprintf(r->name, sizeof r->name, "ember %s %s%s", plf_isa_name(isa),
               single ? "float" : "double", f ? " fused" : "");
      r->bytes = (f ? BYTES_FUSED : BYTES_SEPARATE) * half;
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
        t = pb_now();
        beagleUpdatePartials(inst, &op, 1, BEAGLE_OP_NONE);
        beagleAccumulateScaleFactors(inst, &scale_idx, 1, cum_idx);
        beagleCalculateRootLogLikelihoods(inst, &root, &zero, &zero,
                                          &cum_idx, 1, &r->lnl);
        t = pb_now() - t;
      } else {
        if (single) plf_scale_reset_f(k.fcum, 0, P);
        else plf_scale_reset_d(k.cum, 0, P);
        t = pb_now();
        int rc = ember_once(kern[i - first], fused[i - first], &k, &r->lnl);
        t = pb_now() - t;
        if (rc) {
          fprintf(stderr, "ember: error %d\n", rc);
          beagleFinalizeInstance(inst);
          kdata_free(&k);
          return 1;
        }
      }
      if (rep > 0 && t < r->seconds) r->seconds = t;
    }
  beagleFinalizeInstance(inst);
  kdata_free(&k);
  return 0;
}

int pb_kernel_bench(const int *sizes, int nsizes, double triad) {
  printf("(1) the paper's kernel: 4 states, 1 category, 1 thread, "
         "BEAGLE %s\n", beagleGetVersion());
  printf("GB/s at the paper's 64 B/site; 'real' at the bytes this run moves "
         "(double 176 B/site, fused 168; single half)\n\n");
  printf("%-9s %-36s %9s %8s %7s %9s %7s %8s  %s\n", "sites",
         "implementation", "time ms", "GB/s", "%triad", "real GB/s", "%triad",
         "speedup", "lnL rel. to BEAGLE");
  for (int s = 0; s < nsizes; s++)
    for (int single = 0; single < 2; single++) {
      row rows[MAX_ROWS];
      int nrows = 0;
      if (bench_size(sizes[s], single, rows, &nrows)) return 1;
      for (int i = 0; i < nrows; i++) {
        double gbs = PAPER_BYTES * sizes[s] / rows[i].seconds / 1e9;
        double real = rows[i].bytes * sizes[s] / rows[i].seconds / 1e9;
        printf("%-9d %-36s %9.3f %8.2f %6.1f%% %9.2f %6.1f%% %7.2fx  "
               "%.1e\n",
               sizes[s], rows[i].name, rows[i].seconds * 1e3, gbs,
               100 * gbs / triad, real, 100 * real / triad,
               rows[0].seconds / rows[i].seconds,
               fabs(rows[i].lnl - rows[0].lnl) / fabs(rows[0].lnl));
      }
      printf("\n");
    }
  return 0;
}
