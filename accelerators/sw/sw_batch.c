/*
 * sw_batch.c - the batch driver: checks a range of pairs, sizes one
 * workspace for it, and runs each pair forward (score, end) and on the
 * reversed prefixes (start), redoing pairs that saturate 16-bit lanes with
 * the 32-bit scalar kernel.
 */
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "sw_kernel.h"

typedef struct workspace {
  const sw_kernel *kernel;
  void *mem;             /* for kernel */
  void *scalar_mem;      /* for redoing saturated pairs, made on demand */
  int32_t max_qlen;
} workspace;

static void *alloc64(size_t bytes) {
  size_t rounded = (bytes + 63) & ~(size_t)63;
  return aligned_alloc(64, rounded ? rounded : 64);
}

/* check_scoring: a copy of *in that kernels can trust (bounds checked,
 * max/min recomputed), or false. */
static bool check_scoring(const acc_sw_scoring *in, acc_sw_scoring *s) {
  if (in->size < 1 || in->size > ACC_SW_MAX_ALPHABET) return false;
  if (in->gap_open < 0 || in->gap_open > ACC_SW_MAX_GAP ||
      in->gap_extend < 0 || in->gap_extend > ACC_SW_MAX_GAP)
    return false;
  for (int c = 0; c < 256; c++)
    if (in->encode[c] < -1 || in->encode[c] >= in->size) return false;
  *s = *in;
  s->max_score = INT32_MIN;
  s->min_score = INT32_MAX;
  for (int i = 0; i < in->size * in->size; i++) {
    int32_t v = in->matrix[i];
    if (v < -128 || v > 127) return false;
    if (v > s->max_score) s->max_score = v;
    if (v < s->min_score) s->min_score = v;
  }
  return true;
}

static bool encodes(const acc_sw_scoring *s, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s->encode[p[i]] < 0) return false;
  return true;
}

static int align_pair(workspace *ws, const acc_sw_scoring *s,
                      const uint8_t *qa, int32_t m, const uint8_t *ra,
                      int32_t n, acc_sw_hit *hit, size_t *redone) {
  const sw_kernel *k = ws->kernel;
  void *mem = ws->mem;
  sw_seq q = {qa, m, 1}, r = {ra, n, 1};
  sw_cell fwd;
  if (!k->pass(mem, s, &q, &r, INT32_MAX, &fwd)) {
    k = acc_sw_kernel_get(ACC_SW_ISA_SCALAR);
    if (!ws->scalar_mem) {
      ws->scalar_mem =
          alloc64(acc_sw_kernel_mem_bytes(k, ws->max_qlen, s->size));
      if (!ws->scalar_mem) return EMBER_ENOMEM;
    }
    mem = ws->scalar_mem;
    (*redone)++;
    k->pass(mem, s, &q, &r, INT32_MAX, &fwd);
  }
  if (fwd.score == 0) {
    *hit = (acc_sw_hit){0, -1, -1, -1, -1};
    return 0;
  }
  /* reverse scoring of the prefixes ending at the end cell */
  sw_seq rq = {qa + fwd.i, fwd.i + 1, -1}, rr = {ra + fwd.j, fwd.j + 1, -1};
  sw_cell rev;
  if (!k->pass(mem, s, &rq, &rr, fwd.score, &rev) || rev.score != fwd.score)
    return EMBER_EINTERNAL;
  hit->score = fwd.score;
  hit->query_start = fwd.i - rev.i;
  hit->query_end = fwd.i;
  hit->ref_start = fwd.j - rev.j;
  hit->ref_end = fwd.j;
  return 0;
}

int acc_sw_run_batch_isa(acc_sw_isa isa, const acc_sw_scoring *scoring,
                         const acc_seqset *q, const acc_seqset *r,
                         size_t first, size_t count, acc_sw_hit *out,
                         const atomic_int *cancel, size_t *n_redone) {
  size_t redone = 0;
  if (n_redone) *n_redone = 0;
  const sw_kernel *kernel = acc_sw_kernel_get(isa);
  acc_sw_scoring s;
  if (!kernel || !scoring || !q || !r || (!out && count)) return EMBER_EINVAL;
  if (first > q->count || count > q->count - first || first > r->count ||
      count > r->count - first)
    return EMBER_EINVAL;
  if (!check_scoring(scoring, &s)) return EMBER_EINVAL;
  if (count == 0) return 0;

  /* check every pair before any work; size the workspace */
  int32_t max_qlen = 1;
  for (size_t k = 0; k < count; k++) {
    const uint8_t *qa, *ra;
    size_t ql, rl;
    acc_seqset_get(q, (uint32_t)(first + k), &qa, &ql);
    acc_seqset_get(r, (uint32_t)(first + k), &ra, &rl);
    if (ql > ACC_SW_MAX_QUERY_LEN || rl > ACC_SW_MAX_REF_LEN)
      return EMBER_EINVAL;
    if (!encodes(&s, qa, ql) || !encodes(&s, ra, rl)) return EMBER_EINVAL;
    if ((int32_t)ql > max_qlen) max_qlen = (int32_t)ql;
  }

  workspace ws = {kernel, NULL, NULL, max_qlen};
  ws.mem = alloc64(acc_sw_kernel_mem_bytes(kernel, max_qlen, s.size));
  if (!ws.mem) return EMBER_ENOMEM;
  int rc = 0;
  for (size_t k = 0; k < count && rc == 0; k++) {
    if (cancel && atomic_load_explicit(cancel, memory_order_relaxed)) {
      rc = EMBER_ECANCELED;
      break;
    }
    const uint8_t *qa, *ra;
    size_t ql, rl;
    acc_seqset_get(q, (uint32_t)(first + k), &qa, &ql);
    acc_seqset_get(r, (uint32_t)(first + k), &ra, &rl);
    if (ql == 0 || rl == 0)
      out[k] = (acc_sw_hit){0, -1, -1, -1, -1};
    else
      rc = align_pair(&ws, &s, qa, (int32_t)ql, ra, (int32_t)rl, &out[k],
                      &redone);
  }
  free(ws.mem);
  free(ws.scalar_mem);
  if (n_redone) *n_redone = redone;
  return rc;
}

int acc_sw_run_batch(const acc_sw_scoring *s, const acc_seqset *q,
                     const acc_seqset *r, size_t first, size_t count,
                     acc_sw_hit *out, const atomic_int *cancel) {
  return acc_sw_run_batch_isa(acc_sw_isa_selected(), s, q, r, first, count,
                              out, cancel, NULL);
}
