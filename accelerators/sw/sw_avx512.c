/* sw_avx512.c - the striped kernel on AVX-512BW: 32 lanes of 16 bits.
 * Compiled with EMBER_FLAGS_AVX512 only; used when the CPU has AVX-512F and
 * AVX-512BW. */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "sw_kernel.h"

typedef __m512i sw_vec;
#define SW_LANES 32
#define SW_LEVELS 5
#define SW_PASS_NAME acc_sw_pass_avx512

static inline sw_vec v_zero(void) { return _mm512_setzero_si512(); }
static inline sw_vec v_set1(int16_t x) { return _mm512_set1_epi16(x); }
static inline sw_vec v_load(const sw_vec *p) { return _mm512_load_si512(p); }
static inline void v_store(sw_vec *p, sw_vec v) { _mm512_store_si512(p, v); }
static inline sw_vec v_adds(sw_vec a, sw_vec b) {
  return _mm512_adds_epi16(a, b);
}
static inline sw_vec v_subs(sw_vec a, sw_vec b) {
  return _mm512_subs_epi16(a, b);
}
static inline sw_vec v_max(sw_vec a, sw_vec b) {
  return _mm512_max_epi16(a, b);
}
static inline bool v_any_gt(sw_vec a, sw_vec b) {
  return _mm512_cmpgt_epi16_mask(a, b) != 0;
}
/* lane l takes lane l-d through a permutation; lanes below d are zeroed */
static inline sw_vec v_shift_lanes(sw_vec v, int d) {
  static const int16_t iota[32] __attribute__((aligned(64))) = {
      0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15,
      16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
  sw_vec idx = _mm512_sub_epi16(_mm512_load_si512(iota),
                                _mm512_set1_epi16((int16_t)d));
  return _mm512_maskz_permutexvar_epi16(0xffffffffu << d, idx, v);
}

/* largest lane of lanes >= 0: fold to 128 bits, then PHMINPOSUW on
 * 0x7fff - v */
static inline int32_t v_hmax(sw_vec v) {
  __m256i q = _mm256_max_epi16(_mm512_castsi512_si256(v),
                               _mm512_extracti64x4_epi64(v, 1));
  __m128i h = _mm_max_epi16(_mm256_castsi256_si128(q),
                            _mm256_extracti128_si256(q, 1));
  __m128i x = _mm_sub_epi16(_mm_set1_epi16(0x7fff), h);
  return 0x7fff - (_mm_cvtsi128_si32(_mm_minpos_epu16(x)) & 0xffff);
}

/* 32 profile scores from two 16-entry byte tables (VPSHUFB in each
 * 128-bit half), widened */
static inline sw_vec v_lookup(const uint8_t *lo, const uint8_t *hi,
                              const int8_t *tab) {
  __m256i tlo = _mm256_broadcastsi128_si256(
      _mm_loadu_si128((const __m128i *)tab));
  __m256i thi = _mm256_broadcastsi128_si256(
      _mm_loadu_si128((const __m128i *)(tab + 16)));
  __m256i r = _mm256_or_si256(
      _mm256_shuffle_epi8(tlo, _mm256_loadu_si256((const __m256i *)lo)),
      _mm256_shuffle_epi8(thi, _mm256_loadu_si256((const __m256i *)hi)));
  return _mm512_cvtepi8_epi16(r);
}

#include "sw_striped.h"
