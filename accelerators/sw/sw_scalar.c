/*
 * sw_scalar.c - the reference kernel: plain affine-gap Smith-Waterman
 * (Gotoh) in 32-bit integers, one cell at a time. It also recomputes the
 * pairs that saturate the 16-bit SIMD kernels.
 *
 *   E(i,j) = max(E(i,j-1) - extend, H(i,j-1) - open)     gap in the query
 *   F(i,j) = max(F(i-1,j) - extend, H(i-1,j) - open)     gap in the reference
 *   H(i,j) = max(0, H(i-1,j-1) + score(q_i, r_j), E(i,j), F(i,j))
 *
 * Columns (reference positions) are the outer loop, so the first cell that
 * strictly beats the best so far is the end sw.h promises.
 */
#include <stddef.h>

#include "sw_kernel.h"

#define NEG (INT32_MIN / 2)

static inline int32_t max32(int32_t a, int32_t b) { return a > b ? a : b; }

bool acc_sw_pass_scalar(void *mem, const acc_sw_scoring *s, const sw_seq *q,
                        const sw_seq *r, int32_t stop_at, sw_cell *out) {
  const int32_t m = q->len, n = r->len;
  const int32_t open = s->gap_open, ext = s->gap_extend;
  int32_t *h = mem;                 /* H(i, j-1), then H(i, j) */
  int32_t *e = h + m;               /* E(i, j) for the next column */
  uint8_t *qc = (uint8_t *)(e + m); /* encoded query */

  /* scores by reference residue: col[c][a] = score(a, c) */
  int32_t col[ACC_SW_MAX_ALPHABET][ACC_SW_MAX_ALPHABET];
  for (int c = 0; c < s->size; c++)
    for (int a = 0; a < s->size; a++) col[c][a] = s->matrix[a * s->size + c];

  for (int32_t i = 0; i < m; i++) {
    qc[i] = (uint8_t)s->encode[q->res[(ptrdiff_t)i * q->dir]];
    h[i] = 0;
    e[i] = NEG;
  }

  int32_t best = 0, bi = -1, bj = -1;
  for (int32_t j = 0; j < n; j++) {
    const int32_t *sc = col[(uint8_t)s->encode[r->res[(ptrdiff_t)j * r->dir]]];
    int32_t diag = 0, up = 0, f = NEG;
    for (int32_t i = 0; i < m; i++) {
      int32_t ev = max32(e[i] - ext, h[i] - open);
      int32_t fv = max32(f - ext, up - open);
      int32_t hv = max32(max32(diag + sc[qc[i]], 0), max32(ev, fv));
      diag = h[i];
      h[i] = hv;
      e[i] = ev;
      f = fv;
      up = hv;
      if (hv > best) {
        best = hv;
        bi = i;
        bj = j;
        if (best >= stop_at) goto done;
      }
    }
  }
done:
  out->score = best;
  out->i = bi;
  out->j = bj;
  return true;
}
