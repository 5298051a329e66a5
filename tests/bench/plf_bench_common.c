/* plf_bench_common.c - clocks, allocation, random numbers and the STREAM
 * triad of plf_vs_beagle (plf_bench_common.h). */
#include "plf_bench_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double pb_now(void) { return clock_s(CLOCK_MONOTONIC); }

double pb_cpu_now(void) { return clock_s(CLOCK_PROCESS_CPUTIME_ID); }

void *pb_xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

double pb_unit(pb_rng *r) {
  r->s ^= r->s << 13;
  r->s ^= r->s >> 7;
  r->s ^= r->s << 17;
  return (double)((r->s >> 11) + 1) * (1.0 / 9007199254740992.0);
}

double pb_triad_gbs(size_t n, int reps) {
  double *a = pb_xmalloc(n * sizeof *a), *b = pb_xmalloc(n * sizeof *b);
  double *c = pb_xmalloc(n * sizeof *c);
  for (size_t i = 0; i < n; i++) {
    a[i] = 0;
    b[i] = 1;
    c[i] = 2;
  }
  double best = 1e30, q = 3.0;
  for (int r = 0; r < reps; r++) {
    double t = pb_now();
    for (size_t i = 0; i < n; i++) a[i] = b[i] + q * c[i];
    t = pb_now() - t;
    if (t < best) best = t;
  }
  if (a[n / 2] != 7.0) fprintf(stderr, "triad: wrong result\n");
  free(a);
  free(b);
  free(c);
  return 3.0 * sizeof(double) * (double)n / best / 1e9;
}
