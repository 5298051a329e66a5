/* sw_avx2.c - the striped kernel on AVX2: 16 lanes of 16 bits.
 * Compiled with EMBER_FLAGS_AVX2 only; used when the CPU has AVX2. */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "sw_kernel.h"

typedef __m256i sw_vec;
#define SW_LANES 16
#define SW_LEVELS 4
#define SW_PASS_NAME acc_sw_pass_avx2

static inline sw_vec v_zero(void) { return _mm256_setzero_si256(); }
static inline sw_vec v_set1(int16_t x) { return _mm256_set1_epi16(x); }
static inline sw_vec v_load(const sw_vec *p) { return _mm256_load_si256(p); }
static inline void v_store(sw_vec *p, sw_vec v) { _mm256_store_si256(p, v); }
static inline sw_vec v_adds(sw_vec a, sw_vec b) {
  return _mm256_adds_epi16(a, b);
}
static inline sw_vec v_subs(sw_vec a, sw_vec b) {
  return _mm256_subs_epi16(a, b);
}
static inline sw_vec v_max(sw_vec a, sw_vec b) {
  return _mm256_max_epi16(a, b);
}
static inline bool v_any_gt(sw_vec a, sw_vec b) {
  return _mm256_movemask_epi8(_mm256_cmpgt_epi16(a, b)) != 0;
}
/* d lanes up across the two 128-bit halves: t = [0, low half], and each
 * half of the result is the concatenation (v half : t half) shifted right */
static inline sw_vec v_shift_lanes(sw_vec v, int d) {
  sw_vec t = _mm256_permute2x128_si256(v, v, 0x08);
  switch (d) {
  case 1: return _mm256_alignr_epi8(v, t, 14);
  case 2: return _mm256_alignr_epi8(v, t, 12);
  case 4: return _mm256_alignr_epi8(v, t, 8);
  default: return t;
  }
}

/* largest lane of lanes >= 0: fold the halves, then PHMINPOSUW on
 * 0x7fff - v */
static inline int32_t v_hmax(sw_vec v) {
  __m128i h = _mm_max_epi16(_mm256_castsi256_si128(v),
                            _mm256_extracti128_si256(v, 1));
  __m128i x = _mm_sub_epi16(_mm_set1_epi16(0x7fff), h);
  return 0x7fff - (_mm_cvtsi128_si32(_mm_minpos_epu16(x)) & 0xffff);
}

/* 16 profile scores from two 16-entry byte tables (PSHUFB), widened */
static inline sw_vec v_lookup(const uint8_t *lo, const uint8_t *hi,
                              const int8_t *tab) {
  __m128i tlo = _mm_loadu_si128((const __m128i *)tab);
  __m128i thi = _mm_loadu_si128((const __m128i *)(tab + 16));
  __m128i r = _mm_or_si128(
      _mm_shuffle_epi8(tlo, _mm_loadu_si128((const __m128i *)lo)),
      _mm_shuffle_epi8(thi, _mm_loadu_si128((const __m128i *)hi)));
  return _mm256_cvtepi8_epi16(r);
}

#include "sw_striped.h"
