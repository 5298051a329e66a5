/*
 * test_sw_kernels.c - the kernel variants against a naive full-matrix
 * Smith-Waterman written here from the definitions in sw.h (scores, the end
 * rule, the start rule), on random pairs and random scoring schemes that
 * include the awkward corners (zero penalties, gap_open < gap_extend,
 * matrices without positive scores), plus 16-bit saturation and its 32-bit
 * redo, cancellation and argument checks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ember/ember_errors.h"
#include "sw/sw.h"

/* rounds of random pairs per kind (each round: a fresh scoring scheme) */
#ifndef SW_RANDOM_ROUNDS
#define SW_RANDOM_ROUNDS 8
#endif

static uint64_t rng = 0x7357u;

static uint64_t next_u64(void) {
  uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int below(int n) { return (int)(next_u64() % (uint64_t)n); }

/* ---- the naive reference ------------------------------------------------ */

typedef struct naive {
  int32_t score, qs, qe, rs, re;
} naive;

static int32_t max2(int32_t a, int32_t b) { return a > b ? a : b; }

/* best local score of a against b (codes), and its cell under the end
 * rule: the smallest j (b position), then the smallest i */
static int32_t naive_fill(const acc_sw_scoring *s, const int8_t *a, int m,
                          const int8_t *b, int n, int *bi, int *bj) {
  int32_t *H = calloc((size_t)(m + 1) * (n + 1), sizeof *H);
  int32_t *E = calloc((size_t)(m + 1) * (n + 1), sizeof *E);
  int32_t *F = calloc((size_t)(m + 1) * (n + 1), sizeof *F);
  const int32_t neg = -(1 << 28);
  int W = n + 1;
  for (int i = 0; i <= m; i++)
    for (int j = 0; j <= n; j++) {
      int k = i * W + j;
      if (i == 0 || j == 0) {
        H[k] = 0;
        E[k] = F[k] = neg;
        continue;
      }
      E[k] = max2(E[k - 1] - s->gap_extend, H[k - 1] - s->gap_open);
      F[k] = max2(F[k - W] - s->gap_extend, H[k - W] - s->gap_open);
      int32_t d = H[k - W - 1] + s->matrix[a[i - 1] * s->size + b[j - 1]];
      H[k] = max2(max2(0, d), max2(E[k], F[k]));
    }
  int32_t best = 0;
  *bi = *bj = -1;
  for (int j = 1; j <= n; j++)
    for (int i = 1; i <= m; i++)
      if (H[i * W + j] > best) {
        best = H[i * W + j];
        *bi = i - 1;
        *bj = j - 1;
      }
  free(H);
  free(E);
  free(F);
  return best;
}

/* The start: among alignments of the best score ending at the end cell,
 * the largest reference start, then the largest query start. Found by
 * enumerating candidate starts directly: the anchored score from (qs, rs)
 * to the end must equal the best. Independent of the reverse-pass idea. */
static naive naive_align(const acc_sw_scoring *s, const char *q, int m,
                         const char *r, int n) {
  int8_t *a = malloc((size_t)m), *b = malloc((size_t)n);
  for (int i = 0; i < m; i++) a[i] = s->encode[(unsigned char)q[i]];
  for (int j = 0; j < n; j++) b[j] = s->encode[(unsigned char)r[j]];
  naive out = {0, -1, -1, -1, -1};
  int qe, re;
  out.score = naive_fill(s, a, m, b, n, &qe, &re);
  if (out.score > 0) {
    /* global (anchored both ends) scores of a[qs..qe] x b[rs..re] for all
     * qs, rs at once: fill backwards from the end cell */
    int M = qe + 1, N = re + 1, W = N + 1;
    int32_t *G = malloc((size_t)(M + 1) * W * sizeof *G);
    int32_t *Eg = malloc((size_t)(M + 1) * W * sizeof *Eg);
    int32_t *Fg = malloc((size_t)(M + 1) * W * sizeof *Fg);
    const int32_t neg = -(1 << 28);
    /* cell (i, j) = best score of an alignment of a[i..qe], b[j..re] that
     * starts by pairing a[i] with b[j] (G), or by a gap (E: in a, F: in b),
     * and ends by pairing a[qe] with b[re] */
    for (int i = M; i >= 0; i--)
      for (int j = N; j >= 0; j--) {
        int k = i * W + j;
        G[k] = Eg[k] = Fg[k] = neg;
        if (i == M || j == N) continue;
        int32_t pair = s->matrix[a[i] * s->size + b[j]];
        if (i == qe && j == re)
          G[k] = pair;
        else {
          int32_t rest = max2(G[k + W + 1], max2(Eg[k + W + 1], Fg[k + W + 1]));
          if (rest > neg / 2) G[k] = pair + rest;
        }
        /* a gap in a (b[j] against nothing) then the rest from (i, j+1):
         * either the same gap goes on (extend) or this is its last
         * position (open); as in Gotoh's recurrences, a new gap may follow
         * directly, even one of the same kind */
        int32_t after = max2(G[k + 1], max2(Fg[k + 1], Eg[k + 1]));
        int32_t ext = Eg[k + 1];
        int32_t e = neg;
        if (after > neg / 2) e = after - s->gap_open;
        if (ext > neg / 2) e = max2(e, ext - s->gap_extend);
        Eg[k] = e;
        after = max2(G[k + W], max2(Eg[k + W], Fg[k + W]));
        ext = Fg[k + W];
        int32_t f = neg;
        if (after > neg / 2) f = after - s->gap_open;
        if (ext > neg / 2) f = max2(f, ext - s->gap_extend);
        Fg[k] = f;
      }
    /* the start pairs two residues: largest rs, then largest qs */
    for (int rs = re; rs >= 0 && out.rs < 0; rs--)
      for (int qs = qe; qs >= 0; qs--)
        if (G[qs * W + rs] == out.score) {
          out.qs = qs;
          out.rs = rs;
          break;
        }
    out.qe = qe;
    out.re = re;
    free(G);
    free(Eg);
    free(Fg);
  }
  free(a);
  free(b);
  return out;
}

/* ---- helpers ------------------------------------------------------------- */

typedef struct batch {
  uint8_t *qb, *rb;
  acc_seqset q, r;
} batch;

static void batch_make(batch *bt, char **qs, size_t *ql, char **rs,
                       size_t *rl, size_t n) {
  size_t qn = acc_seqset_bytes(ql, n), rn = acc_seqset_bytes(rl, n);
  bt->qb = malloc(qn);
  bt->rb = malloc(rn);
  assert_int_equal(acc_seqset_write(bt->qb, qn, (const char *const *)qs, ql,
                                    n), 0);
  assert_int_equal(acc_seqset_write(bt->rb, rn, (const char *const *)rs, rl,
                                    n), 0);
  acc_block a = {bt->qb, qn}, b = {bt->rb, rn};
  assert_int_equal(acc_seqset_view(&a, &bt->q, NULL, 0), 0);
  assert_int_equal(acc_seqset_view(&b, &bt->r, NULL, 0), 0);
}

static void batch_free(batch *bt) {
  free(bt->qb);
  free(bt->rb);
}

static void assert_hit(const acc_sw_hit *h, const naive *w, const char *isa,
                       size_t pair, const char *what) {
  if (h->score != w->score || h->query_start != w->qs ||
      h->query_end != w->qe || h->ref_start != w->rs || h->ref_end != w->re)
    fail_msg("%s %s pair %zu: got score %d query %d..%d ref %d..%d, "
             "expected score %d query %d..%d ref %d..%d", what, isa, pair,
             h->score, h->query_start, h->query_end, h->ref_start,
             h->ref_end, w->score, w->qs, w->qe, w->rs, w->re);
}

static char *random_seq(const char *letters, int len) {
  char *s = malloc((size_t)len + 1);
  int k = (int)strlen(letters);
  for (int i = 0; i < len; i++) s[i] = letters[below(k)];
  s[len] = '\0';
  return s;
}

/* a copy of src with substitutions, insertions and deletions */
static char *mutate(const char *src, int len, const char *letters, int pct,
                    int *out_len) {
  char *d = malloc((size_t)len * 2 + 2);
  int o = 0, k = (int)strlen(letters);
  for (int i = 0; i < len; i++) {
    int roll = below(100);
    if (roll < pct / 2) continue;                       /* deletion */
    if (roll < pct) d[o++] = letters[below(k)];         /* insertion */
    d[o++] = below(100) < pct ? letters[below(k)] : src[i];
  }
  if (o == 0) d[o++] = letters[0];
  d[o] = '\0';
  *out_len = o;
  return d;
}

/* ---- tests -------------------------------------------------------------- */

static void random_scoring(acc_sw_scoring *s, int kind) {
  char err[200];
  int open, ext;
  switch (below(6)) {
  case 0: open = 0; ext = 0; break;
  case 1: open = below(3); ext = 1 + below(4); break;       /* open < ext */
  case 2: open = 0; ext = below(3); break;
  default: open = below(15); ext = below(4); break;
  }
  if (kind == 0) {
    assert_int_equal(acc_sw_scoring_dna(1 + below(6), -1 - below(6), open,
                                        ext, s, err, sizeof err), 0);
    return;
  }
  acc_sw_matrix m;
  memset(&m, 0, sizeof m);
  m.size = 2 + below(ACC_SW_MAX_ALPHABET - 1);
  for (int i = 0; i < m.size; i++)
    m.alphabet[i] = i < 26 ? (char)('A' + i) : i == 26 ? '*'
                                                       : (char)('0' + i - 27);
  int negative_only = below(10) == 0;
  for (int i = 0; i < m.size * m.size; i++) {
    int v = below(256) - 128;
    if (below(2)) v /= 16;        /* mostly small scores */
    if (i % (m.size + 1) == 0 && !negative_only) v = below(12);
    if (negative_only && v > 0) v = -v;
    m.scores[i] = v;
  }
  assert_int_equal(acc_sw_scoring_matrix(&m, open, ext, s, err, sizeof err),
                   0);
}

static void run_random(int kind, int n_pairs) {
  const char *dna = "ACGTN";
  char letters[ACC_SW_MAX_ALPHABET + 1];
  for (int round = 0; round < SW_RANDOM_ROUNDS; round++) {
    acc_sw_scoring s;
    random_scoring(&s, kind);
    const char *alpha = dna;
    if (kind) {
      int k = 0;
      for (int c = 0; c < 256; c++)
        if (s.encode[c] >= 0 && (c < 'a' || c > 'z') && k < s.size)
          letters[k++] = (char)c;
      letters[k] = '\0';
      alpha = letters;
    }
    char **qs = calloc((size_t)n_pairs, sizeof *qs);
    char **rs = calloc((size_t)n_pairs, sizeof *rs);
    size_t *ql = calloc((size_t)n_pairs, sizeof *ql);
    size_t *rl = calloc((size_t)n_pairs, sizeof *rl);
    naive *want = calloc((size_t)n_pairs, sizeof *want);
    for (int p = 0; p < n_pairs; p++) {
      int rlen = 1 + below(below(4) ? 120 : 300);
      rs[p] = random_seq(below(4) ? alpha : "AC", rlen);
      rl[p] = (size_t)rlen;
      int qlen;
      switch (below(4)) {
      case 0:                                   /* unrelated */
        qlen = 1 + below(150);
        qs[p] = random_seq(alpha, qlen);
        break;
      case 1: {                                 /* a repeat: many ties */
        qlen = 1 + below(60);
        qs[p] = malloc((size_t)qlen + 1);
        for (int i = 0; i < qlen; i++) qs[p][i] = rs[p][i % rlen];
        qs[p][qlen] = '\0';
        break;
      }
      default: {                                /* a mutated piece */
        int at = below(rlen), len = 1 + below(rlen - at);
        qs[p] = mutate(rs[p] + at, len, alpha, below(30), &qlen);
        break;
      }
      }
      ql[p] = (size_t)qlen;
      want[p] = naive_align(&s, qs[p], qlen, rs[p], rlen);
    }
    batch bt;
    batch_make(&bt, qs, ql, rs, rl, (size_t)n_pairs);
    acc_sw_hit *hits = calloc((size_t)n_pairs, sizeof *hits);
    for (int isa = 0; isa < ACC_SW_ISA_COUNT; isa++) {
      if (!acc_sw_isa_supported((acc_sw_isa)isa)) continue;
      memset(hits, 0x5a, (size_t)n_pairs * sizeof *hits);
      size_t redone = 0;
      int rc = acc_sw_run_batch_isa((acc_sw_isa)isa, &s, &bt.q, &bt.r, 0,
                                    (size_t)n_pairs, hits, NULL, &redone);
      assert_int_equal(rc, 0);
      for (int p = 0; p < n_pairs; p++) {
        char what[96];
        snprintf(what, sizeof what, "%s round %d (open %d, extend %d)",
                 kind ? "matrix" : "dna", round, s.gap_open, s.gap_extend);
        assert_hit(&hits[p], &want[p], acc_sw_isa_name((acc_sw_isa)isa),
                   (size_t)p, what);
      }
    }
    free(hits);
    batch_free(&bt);
    for (int p = 0; p < n_pairs; p++) {
      free(qs[p]);
      free(rs[p]);
    }
    free(qs);
    free(rs);
    free(ql);
    free(rl);
    free(want);
  }
}

static void test_random_dna(void **state) {
  (void)state;
  run_random(0, 150);
}

static void test_random_matrices(void **state) {
  (void)state;
  run_random(1, 150);
}

/* Identical sequences of len bases score match * len; past INT16_MAX -
 * match the SIMD variants must notice and redo the pair in 32 bits. */
static void check_identical(int len, int match, bool expect_redo) {
  acc_sw_scoring s;
  assert_int_equal(acc_sw_scoring_dna(match, -3, 6, 1, &s, NULL, 0), 0);
  char *seq = random_seq("ACGT", len);
  char *qs[2] = {seq, "ACGT"}, *rs[2] = {seq, "TTTT"};
  size_t ql[2] = {(size_t)len, 4}, rl[2] = {(size_t)len, 4};
  batch bt;
  batch_make(&bt, qs, ql, rs, rl, 2);
  naive want[2] = {{match * len, 0, len - 1, 0, len - 1}, {match, 3, 3, 0, 0}};
  for (int isa = 0; isa < ACC_SW_ISA_COUNT; isa++) {
    if (!acc_sw_isa_supported((acc_sw_isa)isa)) continue;
    acc_sw_hit hits[2];
    size_t redone = 99;
    assert_int_equal(acc_sw_run_batch_isa((acc_sw_isa)isa, &s, &bt.q, &bt.r,
                                          0, 2, hits, NULL, &redone), 0);
    assert_hit(&hits[0], &want[0], acc_sw_isa_name((acc_sw_isa)isa), 0,
               "identical");
    assert_hit(&hits[1], &want[1], acc_sw_isa_name((acc_sw_isa)isa), 1,
               "identical");
    size_t expect = (isa != ACC_SW_ISA_SCALAR && expect_redo) ? 1 : 0;
    if (redone != expect)
      fail_msg("%s, %d bases: %zu pairs redone, expected %zu",
               acc_sw_isa_name((acc_sw_isa)isa), len, redone, expect);
  }
  batch_free(&bt);
  free(seq);
}

static void test_saturation_redo(void **state) {
  (void)state;
  /* the boundary with a large reward keeps the pairs short (sanitizers) */
  check_identical(257, 127, false); /* 32639: at INT16_MAX - 127 */
  check_identical(258, 127, true);  /* 32766: the next cell could clip */
  check_identical(300, 127, true);  /* 38100: beyond 16 bits */
#ifndef EMBER_SANITIZED
  /* and with the DNA defaults, at real read lengths */
  check_identical(10921, 3, false); /* 32763: below INT16_MAX - 3 */
  check_identical(10922, 3, true);  /* 32766 */
  check_identical(12000, 3, true);  /* 36000 */
#endif
}

/* large rewards saturate short pairs too */
static void test_saturation_matrix(void **state) {
  (void)state;
  acc_sw_matrix m = {.size = 2, .alphabet = "AB",
                     .scores = {127, -128, -128, 127}};
  acc_sw_scoring s;
  assert_int_equal(acc_sw_scoring_matrix(&m, 0, 0, &s, NULL, 0), 0);
  char *seq = random_seq("AB", 300);
  char *qs[1] = {seq}, *rs[1] = {seq};
  size_t ql[1] = {300}, rl[1] = {300};
  batch bt;
  batch_make(&bt, qs, ql, rs, rl, 1);
  naive want = naive_align(&s, seq, 300, seq, 300);
  assert_int_equal(want.score, 127 * 300);
  for (int isa = 0; isa < ACC_SW_ISA_COUNT; isa++) {
    if (!acc_sw_isa_supported((acc_sw_isa)isa)) continue;
    acc_sw_hit hit;
    size_t redone = 0;
    assert_int_equal(acc_sw_run_batch_isa((acc_sw_isa)isa, &s, &bt.q, &bt.r,
                                          0, 1, &hit, NULL, &redone), 0);
    assert_hit(&hit, &want, acc_sw_isa_name((acc_sw_isa)isa), 0, "127s");
    assert_int_equal(redone, isa == ACC_SW_ISA_SCALAR ? 0 : 1);
  }
  batch_free(&bt);
  free(seq);
}

static void test_ties(void **state) {
  (void)state;
  acc_sw_scoring s;
  assert_int_equal(acc_sw_scoring_dna(3, -3, 6, 1, &s, NULL, 0), 0);
  /* the query occurs twice in the reference: the first occurrence ends
   * first; "ACAC" in "ACACAC": ends at ref 3, starts at ref 0 */
  char *qs[] = {"ACGT", "ACAC", "AAAA", "NNNN", "a", "ACGTTTTTACGT"};
  char *rs[] = {"TTACGTTTACGTTT", "ACACAC", "AAAAAA", "ACGT", "A",
                "ACGT"};
  naive want[] = {{12, 0, 3, 2, 5},  {12, 0, 3, 0, 3}, {12, 0, 3, 0, 3},
                  {0, -1, -1, -1, -1}, {3, 0, 0, 0, 0}, {12, 0, 3, 0, 3}};
  size_t n = sizeof qs / sizeof qs[0];
  size_t ql[8], rl[8];
  for (size_t i = 0; i < n; i++) {
    ql[i] = strlen(qs[i]);
    rl[i] = strlen(rs[i]);
  }
  batch bt;
  batch_make(&bt, qs, ql, rs, rl, n);
  for (int isa = 0; isa < ACC_SW_ISA_COUNT; isa++) {
    if (!acc_sw_isa_supported((acc_sw_isa)isa)) continue;
    acc_sw_hit hits[8];
    assert_int_equal(acc_sw_run_batch_isa((acc_sw_isa)isa, &s, &bt.q, &bt.r,
                                          0, n, hits, NULL, NULL), 0);
    for (size_t i = 0; i < n; i++) {
      naive w = naive_align(&s, qs[i], (int)ql[i], rs[i], (int)rl[i]);
      acc_sw_hit hw = {w.score, w.qs, w.qe, w.rs, w.re};
      assert_hit(&hw, &want[i], "naive", i, "ties");
      assert_hit(&hits[i], &want[i], acc_sw_isa_name((acc_sw_isa)isa), i,
                 "ties");
    }
  }
  batch_free(&bt);
}

static void test_errors_and_cancel(void **state) {
  (void)state;
  acc_sw_scoring s;
  assert_int_equal(acc_sw_scoring_dna(3, -3, 6, 1, &s, NULL, 0), 0);
  char *qs[] = {"ACGT", "AC-T", "", "GGGG"};
  char *rs[] = {"ACGT", "ACGT", "ACGT", "GGGG"};
  size_t ql[] = {4, 4, 0, 4}, rl[] = {4, 4, 4, 4};
  batch bt;
  batch_make(&bt, qs, ql, rs, rl, 4);
  acc_sw_hit hits[4];
  /* ranges */
  assert_int_equal(acc_sw_run_batch(&s, &bt.q, &bt.r, 0, 0, hits, NULL), 0);
  assert_int_equal(acc_sw_run_batch(&s, &bt.q, &bt.r, 3, 2, hits, NULL),
                   EMBER_EINVAL);
  assert_int_equal(acc_sw_run_batch(&s, &bt.q, &bt.r, 5, 0, hits, NULL),
                   EMBER_EINVAL);
  assert_int_equal(acc_sw_run_batch(&s, &bt.q, &bt.r, SIZE_MAX, 2, hits,
                                    NULL), EMBER_EINVAL);
  /* a residue the scoring does not know */
  assert_int_equal(acc_sw_run_batch(&s, &bt.q, &bt.r, 0, 2, hits, NULL),
                   EMBER_EINVAL);
  /* an empty sequence gives score 0, -1s */
  assert_int_equal(acc_sw_run_batch(&s, &bt.q, &bt.r, 2, 2, hits, NULL), 0);
  naive none = {0, -1, -1, -1, -1}, g4 = {12, 0, 3, 0, 3};
  assert_hit(&hits[0], &none, "default", 2, "empty");
  assert_hit(&hits[1], &g4, "default", 3, "GGGG");
  /* an inconsistent scoring */
  acc_sw_scoring bad = s;
  bad.size = 0;
  assert_int_equal(acc_sw_run_batch(&bad, &bt.q, &bt.r, 3, 1, hits, NULL),
                   EMBER_EINVAL);
  bad = s;
  bad.encode['Q'] = 9;
  assert_int_equal(acc_sw_run_batch(&bad, &bt.q, &bt.r, 3, 1, hits, NULL),
                   EMBER_EINVAL);
  bad = s;
  bad.gap_open = -1;
  assert_int_equal(acc_sw_run_batch(&bad, &bt.q, &bt.r, 3, 1, hits, NULL),
                   EMBER_EINVAL);
  bad = s;
  bad.matrix[0] = 1000;
  assert_int_equal(acc_sw_run_batch(&bad, &bt.q, &bt.r, 3, 1, hits, NULL),
                   EMBER_EINVAL);
  /* a wrong max_score is recomputed, not trusted */
  bad = s;
  bad.max_score = -50;
  assert_int_equal(acc_sw_run_batch(&bad, &bt.q, &bt.r, 3, 1, hits, NULL), 0);
  assert_hit(&hits[0], &g4, "default", 3, "max_score");
  /* cancellation */
  atomic_int cancel = 1;
  assert_int_equal(acc_sw_run_batch(&s, &bt.q, &bt.r, 3, 1, hits, &cancel),
                   EMBER_ECANCELED);
  batch_free(&bt);

  /* a query over the length limit */
  size_t big = ACC_SW_MAX_QUERY_LEN + 1;
  char *long_q = malloc(big);
  memset(long_q, 'A', big);
  char *q1[] = {long_q}, *r1[] = {"ACGT"};
  size_t bl[] = {big}, sl[] = {4};
  batch_make(&bt, q1, bl, r1, sl, 1);
  assert_int_equal(acc_sw_run_batch(&s, &bt.q, &bt.r, 0, 1, hits, NULL),
                   EMBER_EINVAL);
  batch_free(&bt);
  free(long_q);
}

static void test_isa_names(void **state) {
  (void)state;
  acc_sw_isa isa;
  for (int i = 0; i < ACC_SW_ISA_COUNT; i++) {
    assert_int_equal(acc_sw_isa_parse(acc_sw_isa_name((acc_sw_isa)i), &isa),
                     0);
    assert_int_equal(isa, i);
  }
  assert_int_equal(acc_sw_isa_parse("avx1024", &isa), EMBER_EINVAL);
  assert_null(acc_sw_isa_name(ACC_SW_ISA_COUNT));
  assert_true(acc_sw_isa_supported(ACC_SW_ISA_SCALAR));
  assert_true(acc_sw_isa_supported(acc_sw_isa_selected()));
  print_message("kernel variants here:");
  for (int i = 0; i < ACC_SW_ISA_COUNT; i++)
    if (acc_sw_isa_supported((acc_sw_isa)i))
      print_message(" %s", acc_sw_isa_name((acc_sw_isa)i));
  print_message("; selected %s\n", acc_sw_isa_name(acc_sw_isa_selected()));
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_isa_names),
    cmocka_unit_test(test_ties),
    cmocka_unit_test(test_random_dna),
    cmocka_unit_test(test_random_matrices),
    cmocka_unit_test(test_saturation_redo),
    cmocka_unit_test(test_saturation_matrix),
    cmocka_unit_test(test_errors_and_cancel),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
