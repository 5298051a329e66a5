/* plf_exec.c - running a plf task on its state block (plf_exec.h). The
 * precision-independent parts are here; plf_exec_body.h holds the rest,
 * once for double and once for float. */
#include "plf_exec.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"

static uint32_t *plf_flags(uint8_t *st, const plf_layout *l) {
  return (uint32_t *)(st + l->flags);
}

static int32_t *plf_tip_kinds(uint8_t *st, const plf_layout *l) {
  return (int32_t *)(st + l->tip_kinds);
}

static int *plf_tip_states(uint8_t *st, const plf_layout *l,
                           uint32_t patterns, uint32_t tip) {
  return (int *)(st + l->tip_states) + (size_t)tip * patterns;
}

static double *plf_eigen(uint8_t *st, const plf_layout *l, uint32_t i) {
  return (double *)(st + l->eigens + (uint64_t)i * l->eigen_stride);
}

static const double *plf_cat_rates(uint8_t *st, const plf_layout *l,
                                   const plf_shape *s, uint32_t set) {
  return (const double *)(st + l->cat_rates) + (size_t)set * s->categories;
}

/* The bytes an input slice starts at; NULL when the host lacks them. */
static const uint8_t *plf_slice(const acc_block *in,
                                const Ember__Plf__InputSlice *from) {
  const uint8_t *d = in[from->input].data;
  return d ? d + from->offset : NULL;
}

static int plf_no_host(char *err, size_t err_len, uint32_t input) {
  snprintf(err, err_len, "input %u is not in host memory", input);
  return EMBER_EFORMAT;
}

static int plf_no_tip_states(char *err, size_t err_len, uint32_t tip) {
  snprintf(err, err_len, "tip %u holds states only (no partials) and its "
           "states are not set", tip);
  return EMBER_EPARAM;
}

static int plf_kernel_failed(char *err, size_t err_len, int rc) {
  snprintf(err, err_len, "a plf kernel refused its arguments (%s)",
           ember_strerror(rc));
  return EMBER_EINTERNAL;
}

/* The patterns [*p0, *p1) of partition (-1: all). Until SetPartitions,
 * every pattern is in partition 0. Returns 1 when that is every pattern
 * (the threaded kernels then run). */
static int plf_range(uint8_t *st, const plf_layout *l, const plf_shape *s,
                     int32_t partition, int *p0, int *p1) {
  *p0 = 0;
  *p1 = (int)s->patterns;
  if (partition < 0) return 1;
  if (!(plf_flags(st, l)[0] & PLF_SET_PARTITIONS)) {
    if (partition == 0) return 1;
    *p1 = 0;
    return 0;
  }
  const uint32_t *r = (const uint32_t *)(st + l->partition_ranges);
  *p0 = (int)r[2 * partition];
  *p1 = (int)r[2 * partition + 1];
  return *p0 == 0 && *p1 == (int)s->patterns;
}

static int plf_set_tip_states(uint8_t *st, const plf_layout *l,
                              const plf_shape *s, const acc_block *in,
                              const Ember__Plf__SetTipStates *m, char *err,
                              size_t err_len) {
  const uint8_t *src = m->from ? plf_slice(in, m->from) : m->states.data;
  if (!src) return plf_no_host(err, err_len, m->from->input);
  int *dst = plf_tip_states(st, l, s->patterns, m->tip);
  /* little-endian int32 on the wire; ember's hosts are little-endian */
  memcpy(dst, src, (size_t)s->patterns * sizeof *dst);
  plf_tip_kinds(st, l)[m->tip] = 1;
  return 0;
}

static void plf_set_eigen(uint8_t *st, const plf_layout *l,
                          const plf_shape *s, const Ember__Plf__SetEigen *m) {
  size_t ss = (size_t)s->states * s->states;
  double *e = plf_eigen(st, l, m->eigen);
  memcpy(e, m->vectors, ss * sizeof *e);
  memcpy(e + ss, m->inverse, ss * sizeof *e);
  memcpy(e + 2 * ss, m->values, s->states * sizeof *e);
}

static void plf_set_vector(uint8_t *st, const plf_layout *l,
                           const plf_shape *s, const Ember__Plf__SetVector *m) {
  double *dst;
  switch (m->kind) {
  case EMBER__PLF__SET_VECTOR__KIND__FREQUENCIES:
    dst = (double *)(st + l->frequencies) + (size_t)m->index * s->states;
    break;
  case EMBER__PLF__SET_VECTOR__KIND__CATEGORY_WEIGHTS:
    dst = (double *)(st + l->cat_weights) + (size_t)m->index * s->categories;
    break;
  case EMBER__PLF__SET_VECTOR__KIND__CATEGORY_RATES:
    dst = (double *)(st + l->cat_rates) + (size_t)m->index * s->categories;
    break;
  default: /* PATTERN_WEIGHTS */
    dst = (double *)(st + l->pattern_weights);
    plf_flags(st, l)[0] |= PLF_SET_PATTERN_WEIGHTS;
    break;
  }
  memcpy(dst, m->values, m->n_values * sizeof *dst);
}

/* Checked contiguous by plf_task_prepare; a partition without patterns
 * gets the empty range [P, P). */
static void plf_set_partitions(uint8_t *st, const plf_layout *l,
                               const plf_shape *s,
                               const Ember__Plf__SetPartitions *m) {
  uint32_t *r = (uint32_t *)(st + l->partition_ranges);
  for (uint32_t i = 0; i < s->partitions; i++)
    r[2 * i] = r[2 * i + 1] = s->patterns;
  for (uint32_t p = 0; p < s->patterns; p++) {
    uint32_t i = m->of[p];
    if (r[2 * i] == s->patterns) r[2 * i] = p;
    r[2 * i + 1] = p + 1;
  }
  plf_flags(st, l)[0] |= PLF_SET_PARTITIONS;
}

#define REAL double
#define SFX(name) name##_d
#include "plf_exec_body.h"
#undef REAL
#undef SFX

#define REAL float
#define SFX(name) name##_f
#include "plf_exec_body.h"
#undef REAL
#undef SFX

int plf_exec_run(const plf_task *t, uint8_t *state, const acc_block *inputs,
                 const plf_kernels *k, const atomic_int *cancel,
                 plf_answers *out, char *err, size_t err_len) {
  out->non_finite = 0;
  return t->shape.single
             ? exec_run_f(t, state, inputs, k, cancel, out, err, err_len)
             : exec_run_d(t, state, inputs, k, cancel, out, err, err_len);
}
