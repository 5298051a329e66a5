/*
 * plf_tree_harness.h - what the plf tree tests, the plf_budget bench and
 * plf_vs_beagle's traversals share: a seeded random source, random trees,
 * substitution models (JC in closed form, GTR through LAPACKE_dsyev) with
 * discrete rate categories, data simulated along a tree, and an executor
 * that runs plf_plan's ops with BEAGLE (CPU, double or single precision,
 * log scalers, threads or not) and returns each tree's log-likelihood.
 * Test code: BEAGLE and LAPACKE are linked here, never in the library.
 */
#ifndef EMBER_PLF_TREE_HARNESS_H
#define EMBER_PLF_TREE_HARNESS_H

#include <stdint.h>

#include "plf/plf_plan.h"
#include "plf/plf_tree.h"

#define PH_MAX_CATS 8

/* ---- random ------------------------------------------------------------- */

typedef struct ph_rng {
  uint64_t s;
} ph_rng;

uint64_t ph_next(ph_rng *r);
double ph_uniform(ph_rng *r);       /* [0, 1) */
int ph_below(ph_rng *r, int n);     /* [0, n) */
double ph_exp(ph_rng *r, double mean);

/* ---- trees -------------------------------------------------------------- */

/* ph_random_tree: n taxa joined two random subtrees at a time (the
 * Yule-Harding shape), branch lengths exponential with mean mean_length;
 * unrooted: the last three subtrees make a trifurcating root. */
int ph_random_tree(int n, int unrooted, double mean_length, ph_rng *r,
                   plf_tree **out);

/* ph_caterpillar: ((((t0,t1),t2),t3)...) with random lengths. */
int ph_caterpillar(int n, int unrooted, ph_rng *r, plf_tree **out);

/* ph_balanced: subtrees of equal size joined level by level (a perfectly
 * balanced tree when n is a power of two; the worst case for slots). */
int ph_balanced(int n, ph_rng *r, plf_tree **out);

/* ---- models ------------------------------------------------------------- */

typedef struct ph_model {
  int cats;
  double rates[PH_MAX_CATS], weights[PH_MAX_CATS];
  double freqs[4];
  double evec[16], ivec[16], eval[4]; /* row-major, as BEAGLE takes them */
} ph_model;

/* ph_model_jc: Jukes-Cantor in closed form (eigenvalues 0, -4/3 x3, the
 * Hadamard basis), cats categories with the given rates, equal weights. */
void ph_model_jc(ph_model *m, int cats, const double *rates);

/* ph_model_gtr: random exchangeabilities and frequencies, normalised to
 * one substitution per unit time, decomposed with LAPACKE_dsyev. */
int ph_model_gtr(ph_model *m, int cats, const double *rates, ph_rng *r);

/* ph_model_p: P(t) = E diag(exp(eval * t)) E^-1, row-major. */
void ph_model_p(const ph_model *m, double t, double p[16]);

/* ---- data --------------------------------------------------------------- */

/* ph_random_states: uniform states 0..3, n * patterns of them, taxon-major */
void ph_random_states(int n, int patterns, ph_rng *r, int *states);

/* ph_simulate: states evolved along t under m (a category per site). */
int ph_simulate(const plf_tree *t, const ph_model *m, int patterns,
                ph_rng *r, int *states);

/* ---- BEAGLE ------------------------------------------------------------- */

typedef struct ph_beagle {
  int instance;
  long flags;                /* the instance's (BeagleInstanceDetails) */
  int tips, vectors, matrices;
  int op_cap;
  void *ops;                 /* BeagleOperation[op_cap] */
  int *pending;              /* per slot: run number that reads/writes it */
  int run;
  char impl[64];
} ph_beagle;

/* ph_beagle_create: a CPU instance for tips taxa (states taxon-major,
 * patterns each), m, vectors slots and matrices matrix buffers; double
 * precision, SSE preferred, no threads, every pattern weight 1. */
int ph_beagle_create(ph_beagle *b, int tips, int patterns, const int *states,
                     const ph_model *m, int vectors, int matrices);

/* What ph_beagle_create_opts may change (zeros: ph_beagle_create's). */
typedef struct ph_beagle_opts {
  int single;                /* required single precision, else double */
  int threads;               /* > 1: BEAGLE_FLAG_THREADING_CPP and
                                beagleSetCPUThreadCount(threads); else
                                BEAGLE_FLAG_THREADING_NONE */
  const double *pattern_weights; /* patterns values, or NULL: all 1 */
} ph_beagle_opts;

/* ph_beagle_create_opts: ph_beagle_create with o (NULL: the defaults). */
int ph_beagle_create_opts(ph_beagle *b, int tips, int patterns,
                          const int *states, const ph_model *m, int vectors,
                          int matrices, const ph_beagle_opts *o);

/* ph_beagle_run: executes plan's segments in order (plf_plan.h);
 * loglik[i] gets segment i's log-likelihood. Returns 0 or -1. */
int ph_beagle_run(ph_beagle *b, const plf_plan *plan, double *loglik);

void ph_beagle_destroy(ph_beagle *b);

/* ph_score: plans t alone with a fresh unbounded planner and runs it on b
 * (whose vectors must be >= tips - 1). Returns 0 or -1. */
int ph_score(ph_beagle *b, const plf_tree *t, double *loglik);

#endif
