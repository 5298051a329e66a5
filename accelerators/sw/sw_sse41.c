/* sw_sse41.c - the striped kernel on SSE4.1: 8 lanes of 16 bits.
 * Compiled with EMBER_FLAGS_SSE41 only; used when the CPU has SSE4.1. */
#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "sw_kernel.h"

typedef __m128i sw_vec;
#define SW_LANES 8
#define SW_LEVELS 3
#define SW_PASS_NAME acc_sw_pass_sse41

static inline sw_vec v_zero(void) { return _mm_setzero_si128(); }
static inline sw_vec v_set1(int16_t x) { return _mm_set1_epi16(x); }
static inline sw_vec v_load(const sw_vec *p) { return _mm_load_si128(p); }
static inline void v_store(sw_vec *p, sw_vec v) { _mm_store_si128(p, v); }
static inline sw_vec v_adds(sw_vec a, sw_vec b) { return _mm_adds_epi16(a, b); }
static inline sw_vec v_subs(sw_vec a, sw_vec b) { return _mm_subs_epi16(a, b); }
static inline sw_vec v_max(sw_vec a, sw_vec b) { return _mm_max_epi16(a, b); }
static inline bool v_any_gt(sw_vec a, sw_vec b) {
  return _mm_movemask_epi8(_mm_cmpgt_epi16(a, b)) != 0;
}
static inline sw_vec v_shift_lanes(sw_vec v, int d) {
  switch (d) {
  case 1: return _mm_slli_si128(v, 2);
  case 2: return _mm_slli_si128(v, 4);
  default: return _mm_slli_si128(v, 8);
  }
}

/* largest lane of lanes >= 0: the smallest of 0x7fff - v, by PHMINPOSUW */
static inline int32_t v_hmax(sw_vec v) {
  __m128i x = _mm_sub_epi16(_mm_set1_epi16(0x7fff), v);
  return 0x7fff - (_mm_cvtsi128_si32(_mm_minpos_epu16(x)) & 0xffff);
}

/* 8 profile scores from two 16-entry byte tables (PSHUFB) */
static inline sw_vec v_lookup(const uint8_t *lo, const uint8_t *hi,
                              const int8_t *tab) {
  __m128i tlo = _mm_loadu_si128((const __m128i *)tab);
  __m128i thi = _mm_loadu_si128((const __m128i *)(tab + 16));
  __m128i r = _mm_or_si128(
      _mm_shuffle_epi8(tlo, _mm_loadl_epi64((const __m128i *)lo)),
      _mm_shuffle_epi8(thi, _mm_loadl_epi64((const __m128i *)hi)));
  return _mm_cvtepi8_epi16(r);
}

#include "sw_striped.h"
