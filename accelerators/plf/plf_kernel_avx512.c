/*
 * plf_kernel_avx512.c - the AVX-512 variant: the SIMD body
 * (plf_kernel_simd_body.h) over 512-bit vectors, 8 doubles or 16 floats,
 * masked loads and stores for row tails. For S = 4 a vector holds two
 * patterns (double) or four (float). Compiled with EMBER_FLAGS_AVX512 and
 * -mfma only; used when the CPU has AVX-512 F, BW and VL.
 */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plf_kernel_impl.h"
#include "plf_kernel_template.h"

#define PLF_ISA_TAG avx512

static inline __m512d one_if_zero_pd(__m512d v) {
  __mmask8 z = _mm512_cmp_pd_mask(v, _mm512_setzero_pd(), _CMP_EQ_OQ);
  return _mm512_mask_blend_pd(z, v, _mm512_set1_pd(1));
}
/* each 256-bit half (a pattern's 4 states): their sum (max) */
static inline __m512d gsum_pd(__m512d v) {
  v = _mm512_add_pd(v, _mm512_permutex_pd(v, 0x4e));
  return _mm512_add_pd(v, _mm512_permute_pd(v, 0x55));
}
static inline __m512d gmax_pd(__m512d v) {
  v = _mm512_max_pd(v, _mm512_permutex_pd(v, 0x4e));
  return _mm512_max_pd(v, _mm512_permute_pd(v, 0x55));
}
static inline __m512d gather4_pd(const double *const *rows) {
  return _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_loadu_pd(rows[0])),
                            _mm256_loadu_pd(rows[1]), 1);
}

static inline __m512 one_if_zero_ps(__m512 v) {
  __mmask16 z = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_EQ_OQ);
  return _mm512_mask_blend_ps(z, v, _mm512_set1_ps(1));
}
/* each 128-bit quarter (a pattern's 4 states): their sum (max) */
static inline __m512 gsum_ps(__m512 v) {
  v = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4e));
  return _mm512_add_ps(v, _mm512_permute_ps(v, 0xb1));
}
static inline __m512 gmax_ps(__m512 v) {
  v = _mm512_max_ps(v, _mm512_permute_ps(v, 0x4e));
  return _mm512_max_ps(v, _mm512_permute_ps(v, 0xb1));
}
static inline __m512 gather4_ps(const float *const *rows) {
  __m512 v = _mm512_castps128_ps512(_mm_loadu_ps(rows[0]));
  v = _mm512_insertf32x4(v, _mm_loadu_ps(rows[1]), 1);
  v = _mm512_insertf32x4(v, _mm_loadu_ps(rows[2]), 2);
  return _mm512_insertf32x4(v, _mm_loadu_ps(rows[3]), 3);
}

/* ---- log ------------------------------------------------------------------
 * fdlibm's e_log.c on 8 lanes, as plf_kernel_avx2.c's log4_pd: below 1 ulp
 * for positive normal x; other lanes are left to libm; floats through
 * double. */
static inline __m512d log8_pd(__m512d x) {
  const __m512d one = _mm512_set1_pd(1);
  __m512i bits = _mm512_castpd_si512(x);
  __m512d m = _mm512_castsi512_pd(_mm512_or_si512(
      _mm512_and_si512(bits, _mm512_set1_epi64(0x000fffffffffffffLL)),
      _mm512_set1_epi64(0x3ff0000000000000LL)));
  /* the biased exponent as a double: 2^52 + e, less 2^52 */
  __m512d k = _mm512_sub_pd(
      _mm512_castsi512_pd(_mm512_or_si512(
          _mm512_srli_epi64(bits, 52),
          _mm512_set1_epi64(0x4330000000000000LL))),
      _mm512_set1_pd(4503599627370496.0 + 1023));
  __mmask8 big = _mm512_cmp_pd_mask(m, _mm512_set1_pd(1.4142135623730951),
                                    _CMP_GT_OQ);
  m = _mm512_mask_mul_pd(m, big, m, _mm512_set1_pd(0.5));
  k = _mm512_mask_add_pd(k, big, k, one);
  __m512d f = _mm512_sub_pd(m, one);
  __m512d s = _mm512_div_pd(f, _mm512_add_pd(_mm512_set1_pd(2), f));
  __m512d z = _mm512_mul_pd(s, s), w = _mm512_mul_pd(z, z);
  __m512d t1 = _mm512_fmadd_pd(w, _mm512_set1_pd(1.531383769920937332e-01),
                               _mm512_set1_pd(2.222219843214978396e-01));
  t1 = _mm512_fmadd_pd(w, t1, _mm512_set1_pd(3.999999999940941908e-01));
  t1 = _mm512_mul_pd(w, t1);
  __m512d t2 = _mm512_fmadd_pd(w, _mm512_set1_pd(1.479819860511658591e-01),
                               _mm512_set1_pd(1.818357216161805012e-01));
  t2 = _mm512_fmadd_pd(w, t2, _mm512_set1_pd(2.857142874366239149e-01));
  t2 = _mm512_fmadd_pd(w, t2, _mm512_set1_pd(6.666666666666735130e-01));
  t2 = _mm512_mul_pd(z, t2);
  __m512d R = _mm512_add_pd(t2, t1);
  __m512d hfsq = _mm512_mul_pd(_mm512_mul_pd(_mm512_set1_pd(0.5), f), f);
  __m512d lo = _mm512_fmadd_pd(s, _mm512_add_pd(hfsq, R),
                               _mm512_mul_pd(k, _mm512_set1_pd(
                                                    1.90821492927058770002e-10)));
  return _mm512_sub_pd(
      _mm512_mul_pd(k, _mm512_set1_pd(6.93147180369123816490e-01)),
      _mm512_sub_pd(_mm512_sub_pd(hfsq, lo), f));
}

/* lanes log8_pd handles: DBL_MIN <= x <= DBL_MAX */
static inline unsigned log8_ok(__m512d x) {
  return _mm512_cmp_pd_mask(x, _mm512_set1_pd(2.2250738585072014e-308),
                            _CMP_GE_OQ) &
         _mm512_cmp_pd_mask(x, _mm512_set1_pd(1.7976931348623157e308),
                            _CMP_LE_OQ);
}

/* lanes: v[0..lanes) through one vector; lanes other than the first
 * `lanes` are 1 (log 0), so a value's log does not depend on its place in
 * the batch */
static inline void log8_lanes_d(double *v, int lanes) {
  double in[8] = {1, 1, 1, 1, 1, 1, 1, 1}, out[8];
  for (int l = 0; l < lanes; l++) in[l] = v[l];
  __m512d x = _mm512_loadu_pd(in);
  unsigned ok = log8_ok(x);
  _mm512_storeu_pd(out, log8_pd(x));
  for (int l = 0; l < lanes; l++) v[l] = ok >> l & 1 ? out[l] : log(in[l]);
}

static void log_batch_d(double *v, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    __m512d x = _mm512_loadu_pd(v + i);
    if (log8_ok(x) == 0xff)
      _mm512_storeu_pd(v + i, log8_pd(x));
    else
      log8_lanes_d(v + i, 8);
  }
  if (i < n) log8_lanes_d(v + i, n - i);
}

static inline void log8_lanes_f(float *v, int lanes) {
  float in[8] = {1, 1, 1, 1, 1, 1, 1, 1}, out[8];
  for (int l = 0; l < lanes; l++) in[l] = v[l];
  __m512d x = _mm512_cvtps_pd(_mm256_loadu_ps(in));
  unsigned ok = log8_ok(x);
  _mm256_storeu_ps(out, _mm512_cvtpd_ps(log8_pd(x)));
  for (int l = 0; l < lanes; l++) v[l] = ok >> l & 1 ? out[l] : logf(in[l]);
}

static void log_batch_f(float *v, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    __m512d x = _mm512_cvtps_pd(_mm256_loadu_ps(v + i));
    if (log8_ok(x) == 0xff)
      _mm256_storeu_ps(v + i, _mm512_cvtpd_ps(log8_pd(x)));
    else
      log8_lanes_f(v + i, 8);
  }
  if (i < n) log8_lanes_f(v + i, n - i);
}

/* ---- double: 8 lanes, two patterns of 4 states ---------------------------- */
#define PLF_REAL double
#define PLF_SFX d
#define PLF_LOG log
#define PLF_V_T __m512d
#define PLF_VL 8
#define PLF_G 2
#define V_ZERO() _mm512_setzero_pd()
#define V_SET1(x) _mm512_set1_pd(x)
#define V_LOADU(p) _mm512_loadu_pd(p)
#define V_STOREU(p, v) _mm512_storeu_pd(p, v)
#define V_LOADN(p, n) _mm512_maskz_loadu_pd((__mmask8)((1u << (n)) - 1), p)
#define V_STOREN(p, v, n) \
  _mm512_mask_storeu_pd(p, (__mmask8)((1u << (n)) - 1), v)
#define V_ADD _mm512_add_pd
#define V_MUL _mm512_mul_pd
#define V_MAX _mm512_max_pd
#define V_DIV _mm512_div_pd
#define V_FMA _mm512_fmadd_pd
#define V_HSUM _mm512_reduce_add_pd
#define V_HMAX _mm512_reduce_max_pd
#define V_ONE_IF_ZERO one_if_zero_pd
#define V_SPLAT4(v, j) _mm512_permutex_pd(v, (j) * 0x55)
#define V_DUP4(p) _mm512_broadcast_f64x4(_mm256_loadu_pd(p))
#define V_GATHER4(rows) gather4_pd(rows)
#define V_EXPAND4(p)                                                  \
  _mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_broadcast_sd(p)), \
                     _mm256_broadcast_sd((p) + 1), 1)
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

/* ---- float: 16 lanes, four patterns of 4 states ---------------------------- */
#define PLF_REAL float
#define PLF_SFX f
#define PLF_LOG logf
#define PLF_V_T __m512
#define PLF_VL 16
#define PLF_G 4
#define V_ZERO() _mm512_setzero_ps()
#define V_SET1(x) _mm512_set1_ps(x)
#define V_LOADU(p) _mm512_loadu_ps(p)
#define V_STOREU(p, v) _mm512_storeu_ps(p, v)
#define V_LOADN(p, n) _mm512_maskz_loadu_ps((__mmask16)((1u << (n)) - 1), p)
#define V_STOREN(p, v, n) \
  _mm512_mask_storeu_ps(p, (__mmask16)((1u << (n)) - 1), v)
#define V_ADD _mm512_add_ps
#define V_MUL _mm512_mul_ps
#define V_MAX _mm512_max_ps
#define V_DIV _mm512_div_ps
#define V_FMA _mm512_fmadd_ps
#define V_HSUM _mm512_reduce_add_ps
#define V_HMAX _mm512_reduce_max_ps
#define V_ONE_IF_ZERO one_if_zero_ps
#define V_SPLAT4(v, j) _mm512_permute_ps(v, (j) * 0x55)
#define V_DUP4(p) _mm512_broadcast_f32x4(_mm_loadu_ps(p))
#define V_GATHER4(rows) gather4_ps(rows)
#define V_EXPAND4(p)                                                  \
  _mm512_permutexvar_ps(                                              \
      _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0), \
      _mm512_castps128_ps512(_mm_loadu_ps(p)))
#define V_GROUP_MAX gmax_ps
#define V_GROUP_SUM gsum_ps
#include "plf_kernel_simd_body.h"

static bool cpu_avx512(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl");
}

const plf_kernels plf_kernels_avx512 = {
  .isa = PLF_ISA_AVX512,
  .cpu_ok = cpu_avx512,
  .update_d = update_avx512_d,
  .update_f = update_avx512_f,
  .root_d = root_avx512_d,
  .root_f = root_avx512_f,
  .edge_d = edge_avx512_d,
  .edge_f = edge_avx512_f,
};
