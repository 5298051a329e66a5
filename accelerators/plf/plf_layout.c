/* plf_layout.c - the state block's regions (plf_layout.h). */
#include "plf_layout.h"

#include <stdio.h>

#include "ember/ember_errors.h"

/* Appends a region of n items of size bytes at *at, 64-byte aligned; the
 * bounds checked before keep every product far below 2^64. */
static uint64_t region(uint64_t *at, uint64_t n, uint64_t size) {
  uint64_t start = (*at + 63) & ~(uint64_t)63;
  *at = start + n * size;
  return start;
}

static int bad(char *err, size_t err_len, const char *what, uint64_t v,
               uint64_t lo, uint64_t hi) {
  snprintf(err, err_len, "instance: %s %llu is outside %llu..%llu", what,
           (unsigned long long)v, (unsigned long long)lo,
           (unsigned long long)hi);
  return EMBER_EPARAM;
}

int plf_layout_compute(const plf_shape *d, plf_layout *l, char *err,
                       size_t err_len) {
  if (d->states < 2 || d->states > PLF_MAX_STATES)
    return bad(err, err_len, "states", d->states, 2, PLF_MAX_STATES);
  if (d->patterns < 1 || d->patterns > PLF_MAX_PATTERNS)
    return bad(err, err_len, "patterns", d->patterns, 1, PLF_MAX_PATTERNS);
  if (d->categories < 1 || d->categories > PLF_MAX_CATEGORIES)
    return bad(err, err_len, "categories", d->categories, 1,
               PLF_MAX_CATEGORIES);
  if (d->partials < 1 || d->partials > PLF_MAX_BUFFERS)
    return bad(err, err_len, "partials buffers", d->partials, 1,
               PLF_MAX_BUFFERS);
  if (d->tips > d->partials)
    return bad(err, err_len, "tips", d->tips, 0, d->partials);
  if (d->compact > d->tips)
    return bad(err, err_len, "compact buffers", d->compact, 0, d->tips);
  if (d->states_only > d->compact)
    return bad(err, err_len, "states-only tips", d->states_only, 0,
               d->compact);
  if (d->matrices < 1 || d->matrices > PLF_MAX_BUFFERS)
    return bad(err, err_len, "matrices", d->matrices, 1, PLF_MAX_BUFFERS);
  if (d->scale_buffers > PLF_MAX_BUFFERS)
    return bad(err, err_len, "scale buffers", d->scale_buffers, 0,
               PLF_MAX_BUFFERS);
  if (d->eigens < 1 || d->eigens > PLF_MAX_SETS)
    return bad(err, err_len, "eigen buffers", d->eigens, 1, PLF_MAX_SETS);
  if (d->rate_sets < 1 || d->rate_sets > PLF_MAX_SETS)
    return bad(err, err_len, "category rate sets", d->rate_sets, 1,
               PLF_MAX_SETS);
  if (d->partitions < 1 || d->partitions > PLF_MAX_SETS ||
      d->partitions > d->patterns)
    return bad(err, err_len, "partitions", d->partitions, 1,
               d->patterns < PLF_MAX_SETS ? d->patterns : PLF_MAX_SETS);

  uint64_t s = d->states, p = d->patterns, c = d->categories;
  l->real = d->single ? sizeof(float) : sizeof(double);
  l->partials_stride = (size_t)(c * p * s * l->real);
  l->matrix_stride = (size_t)(c * s * s * l->real);
  l->scale_stride = (size_t)(p * l->real);
  l->eigen_stride = (size_t)((2 * s * s + s) * sizeof(double));

  uint64_t at = 0;
  l->flags = region(&at, 16, sizeof(uint32_t));
  l->states_only = d->states_only;
  l->partials = region(&at, d->partials - d->states_only, l->partials_stride);
  l->tip_states = region(&at, (uint64_t)d->compact * p, sizeof(int32_t));
  l->tip_kinds = region(&at, d->tips, sizeof(int32_t));
  l->matrices = region(&at, d->matrices, l->matrix_stride);
  l->scales = region(&at, d->scale_buffers, l->scale_stride);
  l->eigens = region(&at, d->eigens, l->eigen_stride);
  l->frequencies = region(&at, (uint64_t)d->eigens * s, sizeof(double));
  l->cat_weights = region(&at, (uint64_t)d->eigens * c, sizeof(double));
  l->cat_rates = region(&at, (uint64_t)d->rate_sets * c, sizeof(double));
  l->pattern_weights = region(&at, p, sizeof(double));
  l->partition_ranges = region(&at, 2 * (uint64_t)d->partitions,
                               sizeof(uint32_t));
  l->site_lnl = region(&at, p, sizeof(double));
  l->total = (at + 63) & ~(uint64_t)63;
  if (l->total > PLF_MAX_STATE_BYTES) {
    snprintf(err, err_len, "instance: %llu bytes of state, more than %llu",
             (unsigned long long)l->total,
             (unsigned long long)PLF_MAX_STATE_BYTES);
    return EMBER_EPARAM;
  }
  return 0;
}
