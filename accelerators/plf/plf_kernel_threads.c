/*
 * plf_kernel_threads.c - the *_mt functions (plf_kernel.h): one operation
 * over all patterns, split into contiguous ranges, one per thread.
 */
#include <pthread.h>
#include <stdbool.h>

#include "ember/ember_errors.h"
#include "plf_kernel.h"

#define MAX_THREADS 256
#define RANGE_ALIGN 64   /* patterns; keeps threads off each other's lines */

typedef int (*range_fn)(const void *ctx, int p0, int p1, double *lnl);

typedef struct part {
  range_fn fn;
  const void *ctx;
  int p0, p1;
  double lnl;
  int rc;
} part;

static void *part_main(void *arg) {
  part *t = arg;
  t->rc = t->fn(t->ctx, t->p0, t->p1, &t->lnl);
  return NULL;
}

/* fn over [0, P) of d in up to nthreads ranges; *lnl (if not NULL): their
 * sum in range order. fn's checks must already have passed. */
static int run_split(range_fn fn, const void *ctx, const plf_dims *d,
                     int nthreads, double *lnl) {
  const int P = d->patterns;
  if (nthreads > MAX_THREADS) nthreads = MAX_THREADS;
  if (nthreads < 1) nthreads = 1;
  long per = ((long)P + nthreads - 1) / nthreads;
  long values = (long)d->states * d->categories;
  long least = (PLF_THREAD_MIN_VALUES + values - 1) / values;
  if (per < least) per = least;
  per = (per + RANGE_ALIGN - 1) / RANGE_ALIGN * RANGE_ALIGN;
  int n = (int)(((long)P + per - 1) / per);
  if (n < 1) n = 1;
  part parts[MAX_THREADS];
  pthread_t tids[MAX_THREADS];
  bool started[MAX_THREADS];
  for (int i = 0; i < n; i++) {
    long b = (long)i * per, e = b + per;
    parts[i] = (part){fn, ctx, (int)b, (int)(e < P ? e : P), 0, 0};
  }
  for (int i = 1; i < n; i++)
    started[i] = pthread_create(&tids[i], NULL, part_main, &parts[i]) == 0;
  part_main(&parts[0]);
  int rc = parts[0].rc;
  double sum = parts[0].lnl;
  for (int i = 1; i < n; i++) {
    if (started[i])
      pthread_join(tids[i], NULL);
    else
      part_main(&parts[i]);   /* no thread: the caller runs it */
    if (!rc) rc = parts[i].rc;
    sum += parts[i].lnl;
  }
  if (lnl) *lnl = sum;
  return rc;
}

#define PLF_MT(REAL, T)                                                       \
  typedef struct update_ctx_##T {                                            \
    const plf_kernels *k;                                                    \
    const plf_dims *d;                                                       \
    const plf_update_##T *op;                                                \
  } update_ctx_##T;                                                          \
  static int update_range_##T(const void *ctx, int p0, int p1,               \
                              double *lnl) {                                 \
    const update_ctx_##T *u = ctx;                                           \
    (void)lnl;                                                               \
    return plf_update_partials_##T(u->k, u->d, u->op, p0, p1);               \
  }                                                                          \
  int plf_update_partials_mt_##T(const plf_kernels *k, const plf_dims *d,    \
                                 const plf_update_##T *op, int nthreads) {   \
    int rc = plf_update_partials_##T(k, d, op, 0, 0);                        \
    if (rc) return rc;                                                       \
    update_ctx_##T u = {k, d, op};                                           \
    return run_split(update_range_##T, &u, d, nthreads, NULL);               \
  }                                                                          \
  typedef struct root_ctx_##T {                                              \
    const plf_kernels *k;                                                    \
    const plf_dims *d;                                                       \
    const REAL *root;                                                        \
    const plf_integrate_##T *in;                                             \
  } root_ctx_##T;                                                            \
  static int root_range_##T(const void *ctx, int p0, int p1, double *lnl) {  \
    const root_ctx_##T *r = ctx;                                             \
    return plf_root_lnl_##T(r->k, r->d, r->root, r->in, p0, p1, lnl);        \
  }                                                                          \
  int plf_root_lnl_mt_##T(const plf_kernels *k, const plf_dims *d,           \
                          const REAL *root, const plf_integrate_##T *in,     \
                          int nthreads, double *lnl) {                       \
    int rc = plf_root_lnl_##T(k, d, root, in, 0, 0, lnl);                    \
    if (rc) return rc;                                                       \
    root_ctx_##T r = {k, d, root, in};                                       \
    return run_split(root_range_##T, &r, d, nthreads, lnl);                  \
  }                                                                          \
  typedef struct edge_ctx_##T {                                              \
    const plf_kernels *k;                                                    \
    const plf_dims *d;                                                       \
    const REAL *parent;                                                      \
    const plf_child_##T *child;                                              \
    const plf_integrate_##T *in;                                             \
  } edge_ctx_##T;                                                            \
  static int edge_range_##T(const void *ctx, int p0, int p1, double *lnl) {  \
    const edge_ctx_##T *e = ctx;                                             \
    return plf_edge_lnl_##T(e->k, e->d, e->parent, e->child, e->in, p0, p1,  \
                            lnl);                                            \
  }                                                                          \
  int plf_edge_lnl_mt_##T(const plf_kernels *k, const plf_dims *d,           \
                          const REAL *parent, const plf_child_##T *child,    \
                          const plf_integrate_##T *in, int nthreads,         \
                          double *lnl) {                                     \
    int rc = plf_edge_lnl_##T(k, d, parent, child, in, 0, 0, lnl);           \
    if (rc) return rc;                                                       \
    edge_ctx_##T e = {k, d, parent, child, in};                              \
    return run_split(edge_range_##T, &e, d, nthreads, lnl);                  \
  }

PLF_MT(double, d)
PLF_MT(float, f)
