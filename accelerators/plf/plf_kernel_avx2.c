/*
 * plf_kernel_avx2.c - the AVX2 + FMA variant: the SIMD body
 * (plf_kernel_simd_body.h) over 256-bit vectors, 4 doubles or 8 floats.
 * For S = 4 a vector holds one pattern (double) or two (float).
 * Compiled with EMBER_FLAGS_AVX2 and -mfma only; used when the CPU has both.
 */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plf_kernel_impl.h"
#include "plf_kernel_template.h"

#define PLF_ISA_TAG avx2

/* lane masks for the first n lanes: load 8 (or 4) entries from n back */
static const int32_t mask32[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                   0,  0,  0,  0,  0,  0,  0,  0};
static const int64_t mask64[8] = {-1, -1, -1, -1, 0, 0, 0, 0};

static inline __m256i first_lanes_pd(int n) {
  return _mm256_loadu_si256((const __m256i *)(mask64 + 4 - n));
}
static inline __m256i first_lanes_ps(int n) {
  return _mm256_loadu_si256((const __m256i *)(mask32 + 8 - n));
}

static inline double hsum_pd(__m256d v) {
  __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v),
                         _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}
static inline double hmax_pd(__m256d v) {
  __m128d s = _mm_max_pd(_mm256_castpd256_pd128(v),
                         _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_max_sd(s, _mm_unpackhi_pd(s, s)));
}
/* all four lanes: their sum (max) */
static inline __m256d gsum_pd(__m256d v) {
  v = _mm256_add_pd(v, _mm256_permute4x64_pd(v, 0x4e));
  return _mm256_add_pd(v, _mm256_permute_pd(v, 0x5));
}
static inline __m256d gmax_pd(__m256d v) {
  v = _mm256_max_pd(v, _mm256_permute4x64_pd(v, 0x4e));
  return _mm256_max_pd(v, _mm256_permute_pd(v, 0x5));
}
static inline __m256d one_if_zero_pd(__m256d v) {
  return _mm256_blendv_pd(
      v, _mm256_set1_pd(1),
      _mm256_cmp_pd(v, _mm256_setzero_pd(), _CMP_EQ_OQ));
}

static inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}
static inline float hmax_ps(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}
/* each 128-bit half (a pattern's 4 states): their sum (max) */
static inline __m256 gsum_ps(__m256 v) {
  v = _mm256_add_ps(v, _mm256_permute_ps(v, 0x4e));
  return _mm256_add_ps(v, _mm256_permute_ps(v, 0xb1));
}
static inline __m256 gmax_ps(__m256 v) {
  v = _mm256_max_ps(v, _mm256_permute_ps(v, 0x4e));
  return _mm256_max_ps(v, _mm256_permute_ps(v, 0xb1));
}
static inline __m256 one_if_zero_ps(__m256 v) {
  return _mm256_blendv_ps(v, _mm256_set1_ps(1),
                          _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_EQ_OQ));
}

/* ---- log ------------------------------------------------------------------
 * fdlibm's e_log.c on 4 lanes: x = 2^k m, m in [sqrt(2)/2, sqrt(2)),
 * f = m - 1, s = f / (2 + f), log(1 + f) = f - (f^2/2 - s (f^2/2 + R(s^2)));
 * error below 1 ulp for positive normal x. Other lanes (0, negative,
 * subnormal, inf, NaN) are left to libm. Floats are taken through double. */
static inline __m256d log4_pd(__m256d x) {
  const __m256d one = _mm256_set1_pd(1);
  __m256i bits = _mm256_castpd_si256(x);
  __m256d m = _mm256_castsi256_pd(_mm256_or_si256(
      _mm256_and_si256(bits, _mm256_set1_epi64x(0x000fffffffffffffLL)),
      _mm256_set1_epi64x(0x3ff0000000000000LL)));
  /* the biased exponent as a double: 2^52 + e, less 2^52 */
  __m256d k = _mm256_sub_pd(
      _mm256_castsi256_pd(_mm256_or_si256(
          _mm256_srli_epi64(bits, 52),
          _mm256_set1_epi64x(0x4330000000000000LL))),
      _mm256_set1_pd(4503599627370496.0 + 1023));
  __m256d big = _mm256_cmp_pd(m, _mm256_set1_pd(1.4142135623730951),
                              _CMP_GT_OQ);
  m = _mm256_blendv_pd(m, _mm256_mul_pd(m, _mm256_set1_pd(0.5)), big);
  k = _mm256_add_pd(k, _mm256_and_pd(big, one));
  __m256d f = _mm256_sub_pd(m, one);
  __m256d s = _mm256_div_pd(f, _mm256_add_pd(_mm256_set1_pd(2), f));
  __m256d z = _mm256_mul_pd(s, s), w = _mm256_mul_pd(z, z);
  __m256d t1 = _mm256_fmadd_pd(w, _mm256_set1_pd(1.531383769920937332e-01),
                               _mm256_set1_pd(2.222219843214978396e-01));
  t1 = _mm256_fmadd_pd(w, t1, _mm256_set1_pd(3.999999999940941908e-01));
  t1 = _mm256_mul_pd(w, t1);
  __m256d t2 = _mm256_fmadd_pd(w, _mm256_set1_pd(1.479819860511658591e-01),
                               _mm256_set1_pd(1.818357216161805012e-01));
  t2 = _mm256_fmadd_pd(w, t2, _mm256_set1_pd(2.857142874366239149e-01));
  t2 = _mm256_fmadd_pd(w, t2, _mm256_set1_pd(6.666666666666735130e-01));
  t2 = _mm256_mul_pd(z, t2);
  __m256d R = _mm256_add_pd(t2, t1);
  __m256d hfsq = _mm256_mul_pd(_mm256_mul_pd(_mm256_set1_pd(0.5), f), f);
  __m256d lo = _mm256_fmadd_pd(s, _mm256_add_pd(hfsq, R),
                               _mm256_mul_pd(k, _mm256_set1_pd(
                                                    1.90821492927058770002e-10)));
  return _mm256_sub_pd(
      _mm256_mul_pd(k, _mm256_set1_pd(6.93147180369123816490e-01)),
      _mm256_sub_pd(_mm256_sub_pd(hfsq, lo), f));
}

/* lanes log4_pd handles: DBL_MIN <= x <= DBL_MAX */
static inline int log4_ok(__m256d x) {
  __m256d ok = _mm256_and_pd(
      _mm256_cmp_pd(x, _mm256_set1_pd(2.2250738585072014e-308), _CMP_GE_OQ),
      _mm256_cmp_pd(x, _mm256_set1_pd(1.7976931348623157e308), _CMP_LE_OQ));
  return _mm256_movemask_pd(ok);
}

/* lanes: v[0..lanes) through one vector; lanes other than the first
 * `lanes` are 1 (log 0), so a value's log does not depend on its place in
 * the batch */
static inline void log4_lanes_d(double *v, int lanes) {
  double in[4] = {1, 1, 1, 1}, out[4];
  for (int l = 0; l < lanes; l++) in[l] = v[l];
  __m256d x = _mm256_loadu_pd(in);
  int ok = log4_ok(x);
  _mm256_storeu_pd(out, log4_pd(x));
  for (int l = 0; l < lanes; l++) v[l] = ok >> l & 1 ? out[l] : log(in[l]);
}

static void log_batch_d(double *v, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    __m256d x = _mm256_loadu_pd(v + i);
    if (log4_ok(x) == 0xf)
      _mm256_storeu_pd(v + i, log4_pd(x));
    else
      log4_lanes_d(v + i, 4);
  }
  if (i < n) log4_lanes_d(v + i, n - i);
}

static inline void log4_lanes_f(float *v, int lanes) {
  float in[4] = {1, 1, 1, 1}, out[4];
  for (int l = 0; l < lanes; l++) in[l] = v[l];
  __m256d x = _mm256_cvtps_pd(_mm_loadu_ps(in));
  int ok = log4_ok(x);
  _mm_storeu_ps(out, _mm256_cvtpd_ps(log4_pd(x)));
  for (int l = 0; l < lanes; l++) v[l] = ok >> l & 1 ? out[l] : logf(in[l]);
}

static void log_batch_f(float *v, int n) {
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    __m256d x = _mm256_cvtps_pd(_mm_loadu_ps(v + i));
    if (log4_ok(x) == 0xf)
      _mm_storeu_ps(v + i, _mm256_cvtpd_ps(log4_pd(x)));
    else
      log4_lanes_f(v + i, 4);
  }
  if (i < n) log4_lanes_f(v + i, n - i);
}

/* ---- double: 4 lanes, one pattern of 4 states ---------------------------- */
#define PLF_REAL double
#define PLF_SFX d
#define PLF_LOG log
#define PLF_V_T __m256d
#define PLF_VL 4
#define PLF_G 1
#define V_ZERO() _mm256_setzero_pd()
#define V_SET1(x) _mm256_set1_pd(x)
#define V_LOADU(p) _mm256_loadu_pd(p)
#define V_STOREU(p, v) _mm256_storeu_pd(p, v)
#define V_LOADN(p, n) _mm256_maskload_pd(p, first_lanes_pd(n))
#define V_STOREN(p, v, n) _mm256_maskstore_pd(p, first_lanes_pd(n), v)
#define V_ADD _mm256_add_pd
#define V_MUL _mm256_mul_pd
#define V_MAX _mm256_max_pd
#define V_DIV _mm256_div_pd
#define V_FMA _mm256_fmadd_pd
#define V_HSUM hsum_pd
#define V_HMAX hmax_pd
#define V_ONE_IF_ZERO one_if_zero_pd
#define V_SPLAT4(v, j) _mm256_permute4x64_pd(v, (j) * 0x55)
#define V_DUP4(p) _mm256_loadu_pd(p)
#define V_GATHER4(rows) _mm256_loadu_pd((rows)[0])
#define V_EXPAND4(p) _mm256_broadcast_sd(p)
#define V_GROUP_MAX gmax_pd
#define V_GROUP_SUM gsum_pd
#include "plf_kernel_simd_body.h"
#undef PLF_REAL
#undef PLF_SFX
#undef PLF_LOG
#undef PLF_V_T
#undef PLF_VL
#undef PLF_G
#undef V_ZERO
#undef V_SET1
#undef V_LOADU
#undef V_STOREU
#undef V_LOADN
#undef V_STOREN
#undef V_ADD
#undef V_MUL
#undef V_MAX
#undef V_DIV
#undef V_FMA
#undef V_HSUM
#undef V_HMAX
#undef V_ONE_IF_ZERO
#undef V_SPLAT4
#undef V_DUP4
#undef V_GATHER4
#undef V_EXPAND4
#undef V_GROUP_MAX
#undef V_GROUP_SUM

/* ---- float: 8 lanes, two patterns of 4 states ---------------------------- */
#define PLF_REAL float
#define PLF_SFX f
#define PLF_LOG logf
#define PLF_V_T __m256
#define PLF_VL 8
#define PLF_G 2
#define V_ZERO() _mm256_setzero_ps()
#define V_SET1(x) _mm256_set1_ps(x)
#define V_LOADU(p) _mm256_loadu_ps(p)
#define V_STOREU(p, v) _mm256_storeu_ps(p, v)
#define V_LOADN(p, n) _mm256_maskload_ps(p, first_lanes_ps(n))
#define V_STOREN(p, v, n) _mm256_maskstore_ps(p, first_lanes_ps(n), v)
#define V_ADD _mm256_add_ps
#define V_MUL _mm256_mul_ps
#define V_MAX _mm256_max_ps
#define V_DIV _mm256_div_ps
#define V_FMA _mm256_fmadd_ps
#define V_HSUM hsum_ps
#define V_HMAX hmax_ps
#define V_ONE_IF_ZERO one_if_zero_ps
#define V_SPLAT4(v, j) _mm256_permute_ps(v, (j) * 0x55)
#define V_DUP4(p) _mm256_broadcast_ps((const __m128 *)(p))
#define V_GATHER4(rows) \
  _mm256_set_m128(_mm_loadu_ps((rows)[1]), _mm_loadu_ps((rows)[0]))
#define V_EXPAND4(p) \
  _mm256_set_m128(_mm_broadcast_ss((p) + 1), _mm_broadcast_ss(p))
#define V_GROUP_MAX gmax_ps
#define V_GROUP_SUM gsum_ps
#include "plf_kernel_simd_body.h"

static bool cpu_avx2(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

const plf_kernels plf_kernels_avx2 = {
  .isa = PLF_ISA_AVX2,
  .cpu_ok = cpu_avx2,
  .update_d = update_avx2_d,
  .update_f = update_avx2_f,
  .root_d = root_avx2_d,
  .root_f = root_avx2_f,
  .edge_d = edge_avx2_d,
  .edge_f = edge_avx2_f,
};
