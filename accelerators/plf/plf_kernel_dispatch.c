/*
 * plf_kernel_dispatch.c - the variants built into this binary, which of
 * them this CPU runs, the default one (chosen once), and the public entry
 * points: check the arguments, then call the variant through its table.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "plf_kernel_impl.h"

/* Widest last. */
static const plf_kernels *const variants[] = {
  &plf_kernels_scalar,
#ifdef EMBER_PLF_HAVE_AVX2
  &plf_kernels_avx2,
#endif
#ifdef EMBER_PLF_HAVE_AVX512
  &plf_kernels_avx512,
#endif
};
#define N_VARIANTS (sizeof variants / sizeof variants[0])

static const char *const isa_names[PLF_ISA_COUNT] = {
  "scalar", "avx2", "avx512",
};

const char *plf_isa_name(plf_isa isa) {
  return (unsigned)isa < PLF_ISA_COUNT ? isa_names[isa] : NULL;
}

int plf_isa_parse(const char *name, plf_isa *out) {
  if (!name || !out) return EMBER_EINVAL;
  for (int i = 0; i < PLF_ISA_COUNT; i++)
    if (strcmp(name, isa_names[i]) == 0) {
      *out = (plf_isa)i;
      return 0;
    }
  return EMBER_EINVAL;
}

const plf_kernels *plf_kernels_get(plf_isa isa) {
  for (size_t i = 0; i < N_VARIANTS; i++)
    if (variants[i]->isa == isa)
      return !variants[i]->cpu_ok || variants[i]->cpu_ok() ? variants[i]
                                                           : NULL;
  return NULL;
}

static const plf_kernels *chosen;
static pthread_once_t chosen_once = PTHREAD_ONCE_INIT;

static void choose(void) {
  plf_isa want;
  const char *env = getenv("EMBER_PLF_ISA");
  if (env && plf_isa_parse(env, &want) == 0 && plf_kernels_get(want)) {
    chosen = plf_kernels_get(want);
    return;
  }
  for (size_t i = N_VARIANTS; i-- > 0;)
    if (!variants[i]->cpu_ok || variants[i]->cpu_ok()) {
      chosen = variants[i];
      return;
    }
}

const plf_kernels *plf_kernels_default(void) {
  pthread_once(&chosen_once, choose);
  return chosen;
}

plf_isa plf_kernels_isa(const plf_kernels *k) {
  return (k ? k : plf_kernels_default())->isa;
}

/* ---- argument checks ---------------------------------------------------- */

static bool dims_ok(const plf_dims *d, int p0, int p1) {
  return d && d->states >= 1 && d->patterns >= 1 && d->categories >= 1 &&
         p0 >= 0 && p0 <= p1 && p1 <= d->patterns;
}

#define CHILD_OK(ch) \
  ((ch)->matrices && (!(ch)->partials != !(ch)->states))

#define INTEGRATE_OK(in) \
  ((in) && (in)->category_weights && (in)->frequencies)

/* Both precisions, through one macro: T is d or f, REAL its type. */
#define PLF_ENTRY_POINTS(REAL, T)                                             \
  int plf_update_partials_##T(const plf_kernels *k, const plf_dims *d,       \
                              const plf_update_##T *op, int p0, int p1) {    \
    if (!dims_ok(d, p0, p1) || !op || !op->dest ||                           \
        !CHILD_OK(&op->child1) || !CHILD_OK(&op->child2) ||                  \
        (op->cumulative && !op->scale))                                      \
      return EMBER_EINVAL;                                                   \
    if (p0 == p1) return 0;                                                  \
    plf_update_##T o = *op;                                                  \
    if (!o.child1.states && o.child2.states) {  /* tip states first */       \
      o.child1 = op->child2;                                                 \
      o.child2 = op->child1;                                                 \
    }                                                                        \
    (k ? k : plf_kernels_default())->update_##T(d, &o, p0, p1);              \
    return 0;                                                                \
  }                                                                          \
  int plf_root_lnl_##T(const plf_kernels *k, const plf_dims *d,              \
                       const REAL *root, const plf_integrate_##T *in,        \
                       int p0, int p1, double *lnl) {                        \
    if (!dims_ok(d, p0, p1) || !root || !INTEGRATE_OK(in) || !lnl)           \
      return EMBER_EINVAL;                                                   \
    *lnl = p0 == p1 ? 0                                                      \
         : (k ? k : plf_kernels_default())->root_##T(d, root, in, p0, p1);   \
    return 0;                                                                \
  }                                                                          \
  int plf_edge_lnl_##T(const plf_kernels *k, const plf_dims *d,              \
                       const REAL *parent, const plf_child_##T *child,       \
                       const plf_integrate_##T *in, int p0, int p1,          \
                       double *lnl) {                                        \
    if (!dims_ok(d, p0, p1) || !parent || !child || !CHILD_OK(child) ||      \
        !INTEGRATE_OK(in) || !lnl)                                           \
      return EMBER_EINVAL;                                                   \
    *lnl = p0 == p1 ? 0                                                      \
         : (k ? k : plf_kernels_default())->edge_##T(d, parent, child, in,   \
                                                     p0, p1);                \
    return 0;                                                                \
  }

PLF_ENTRY_POINTS(double, d)
PLF_ENTRY_POINTS(float, f)
