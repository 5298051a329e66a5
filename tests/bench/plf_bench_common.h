/*
 * plf_bench_common.h - what the two parts of plf_vs_beagle share: clocks,
 * checked allocation, a seeded uniform source, the STREAM triad that their
 * GB/s are compared with; and the parts themselves (plf_kernel_bench.c,
 * plf_traversal.c), which print figures and assert nothing.
 */
#ifndef EMBER_PLF_BENCH_COMMON_H
#define EMBER_PLF_BENCH_COMMON_H

#include <stddef.h>
#include <stdint.h>

/* Seconds: wall-clock (CLOCK_MONOTONIC) and this process's CPU time
 * (every thread's; other programs on the machine disturb it less). */
double pb_now(void);
double pb_cpu_now(void);

/* malloc, or a message and exit(1): benches only. */
void *pb_xmalloc(size_t n);

/* A xorshift64 source: values in (0, 1]. */
typedef struct pb_rng {
  uint64_t s;
} pb_rng;
double pb_unit(pb_rng *r);

/* pb_triad_gbs: the best of reps STREAM triads a[i] = b[i] + q c[i] over
 * n doubles each, one thread, as GB/s (3 x 8 bytes per element). */
double pb_triad_gbs(size_t n, int reps);

/* ---- the parts ---------------------------------------------------------- */

/* Part (1), the paper's single-node kernel at each of sizes (sites);
 * triad: GB/s to compare with. Returns 0, or 1 after a message. */
int pb_kernel_bench(const int *sizes, int nsizes, double triad);

typedef struct pb_traversal_opts {
  int taxa, patterns;        /* (2a): the simulated tree and data */
  const char *alignment;     /* (2b): a real alignment, its tree and model */
  const char *tree;
  const char *model;         /* an IQ-TREE string (plf_model_parse) */
  double reference;          /* the data's reference lnL, or 0 */
  int vectors;               /* partials buffers beyond the tips; 0: the
                                planner's minimum, ceil(log2 n) + 2 */
  int max_threads;           /* rows for 1 .. max_threads (1 or 2) */
  int reps;                  /* best of reps, after a warm-up */
  int single;                /* also single precision rows */
  uint64_t seed;
  int simulated, real;       /* which of (2a), (2b) to run */
} pb_traversal_opts;

/* Part (2), full traversals; triad as above. Returns 0, or 1 after a
 * message. */
int pb_traversal_bench(const pb_traversal_opts *o, double triad);

#endif
