/*
 * plf_kernel_scale.c - cumulative scale buffers (plf_kernel.h):
 * accumulate, remove, reset over a pattern range. Memory-bound loops that
 * the compiler vectorises; the same for every variant.
 */
#include <stddef.h>

#include "ember/ember_errors.h"
#include "plf_kernel.h"

#define PLF_SCALE_OPS(REAL, SFX)                                              \
  static int scale_sum_##SFX(REAL *cum, const REAL *const *scales,           \
                             int count, int p0, int p1, REAL sign) {         \
    if (!cum || count < 0 || (count > 0 && !scales) || p0 < 0 || p1 < p0)    \
      return EMBER_EINVAL;                                                   \
    for (int k = 0; k < count; k++)                                          \
      if (!scales[k]) return EMBER_EINVAL;                                   \
    for (int k = 0; k < count; k++) {                                        \
      const REAL *s = scales[k];                                             \
      if (sign > 0)                                                          \
        for (int p = p0; p < p1; p++) cum[p] += s[p];                        \
      else                                                                   \
        for (int p = p0; p < p1; p++) cum[p] -= s[p];                        \
    }                                                                        \
    return 0;                                                                \
  }                                                                          \
  int plf_scale_accumulate_##SFX(REAL *cum, const REAL *const *scales,       \
                                 int count, int p0, int p1) {                \
    return scale_sum_##SFX(cum, scales, count, p0, p1, 1);                   \
  }                                                                          \
  int plf_scale_remove_##SFX(REAL *cum, const REAL *const *scales,           \
                             int count, int p0, int p1) {                    \
    return scale_sum_##SFX(cum, scales, count, p0, p1, -1);                  \
  }                                                                          \
  int plf_scale_reset_##SFX(REAL *cum, int p0, int p1) {                     \
    if (!cum || p0 < 0 || p1 < p0) return EMBER_EINVAL;                      \
    for (int p = p0; p < p1; p++) cum[p] = 0;                                \
    return 0;                                                                \
  }

PLF_SCALE_OPS(double, d)
PLF_SCALE_OPS(float, f)
