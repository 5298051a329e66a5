/*
 * test_sw_conformance.c - every sw kernel variant against golden answers
 * from parasail (score, end cell) and SSW (start cell) on real sequence.
 *
 *   test_sw_conformance dna        2000 read/window pairs, DNA 3/-3/6/1
 *   test_sw_conformance dna_long   5 long pairs (16-bit saturation, redo)
 *   test_sw_conformance protein    consecutive globins + Swiss-Prot pairs
 *                                  with BLOSUM45/50/62/80, PAM250 and
 *                                  EBLOSUM62 read from file, 11/1
 *
 * Tolerance: none, every coordinate must be equal. Starts follow SSW's rule
 * (sw.h); agreement with parasail's traceback is counted and printed only.
 * Exit status 0 when all variants agree on all pairs.
 */
#include <parasail.h>
#include <ssw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "sw/sw.h"
#include "sw_fasta.h"

#define DATA EMBER_SOURCE_DIR "/tests/data/sw/"
#define SHOW_MAX 5

typedef struct golden {
  int score, qend, rend;        /* parasail_sw */
  int ssw_score, ssw_qbeg, ssw_rbeg, ssw_qend, ssw_rend;
  int tb_qbeg, tb_rbeg;         /* parasail traceback; -2: not computed */
  int rev_qbeg, rev_rbeg;       /* parasail on reversed prefixes; -2: none */
} golden;

typedef struct pairs {
  size_t n;
  const char **q, **r;
  size_t *ql, *rl;
  const char **qname, **rname;
} pairs;

static int failures;

static void pairs_add(pairs *p, const swt_fasta *fq, size_t iq,
                      const swt_fasta *fr, size_t ir) {
  size_t n = p->n++;
  p->q = realloc(p->q, p->n * sizeof *p->q);
  p->r = realloc(p->r, p->n * sizeof *p->r);
  p->ql = realloc(p->ql, p->n * sizeof *p->ql);
  p->rl = realloc(p->rl, p->n * sizeof *p->rl);
  p->qname = realloc(p->qname, p->n * sizeof *p->qname);
  p->rname = realloc(p->rname, p->n * sizeof *p->rname);
  if (!p->q || !p->r || !p->ql || !p->rl || !p->qname || !p->rname) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  p->q[n] = fq->seqs[iq];
  p->ql[n] = fq->lens[iq];
  p->qname[n] = fq->names[iq];
  p->r[n] = fr->seqs[ir];
  p->rl[n] = fr->lens[ir];
  p->rname[n] = fr->names[ir];
}

static void pairs_free(pairs *p) {
  free(p->q);
  free(p->r);
  free(p->ql);
  free(p->rl);
  free(p->qname);
  free(p->rname);
  memset(p, 0, sizeof *p);
}

static int8_t *ssw_encode(const parasail_matrix_t *m, const char *s,
                          size_t n) {
  int8_t *e = malloc(n ? n : 1);
  for (size_t i = 0; i < n; i++)
    e[i] = (int8_t)m->mapper[(unsigned char)s[i]];
  return e;
}

/* reversed_start: where SSW cannot score a pair (its scores are 16-bit),
 * the start under the same rule straight from parasail: parasail's end on
 * the reversed prefixes q[0..qend], r[0..rend] (its end rule there picks
 * the largest reference start, then the largest query start). */
static void reversed_start(const char *q, int qend, const char *r, int rend,
                           const parasail_matrix_t *m, int open, int ext,
                           golden *g) {
  char *rq = malloc((size_t)qend + 1), *rr = malloc((size_t)rend + 1);
  for (int i = 0; i <= qend; i++) rq[i] = q[qend - i];
  for (int j = 0; j <= rend; j++) rr[j] = r[rend - j];
  parasail_result_t *res = parasail_sw_striped_32(rq, qend + 1, rr, rend + 1,
                                                  open, ext, m);
  if (parasail_result_get_score(res) == g->score) {
    g->rev_qbeg = qend - parasail_result_get_end_query(res);
    g->rev_rbeg = rend - parasail_result_get_end_ref(res);
  }
  parasail_result_free(res);
  free(rq);
  free(rr);
}

static void compute_golden(const pairs *p, const parasail_matrix_t *m,
                           int open, int ext, bool traceback, golden *g) {
  int8_t mat[32 * 32];
  for (int i = 0; i < m->size * m->size; i++) mat[i] = (int8_t)m->matrix[i];
  for (size_t k = 0; k < p->n; k++) {
    int ql = (int)p->ql[k], rl = (int)p->rl[k];
    /* parasail_sw is the plain reference; on long pairs the striped 32-bit
     * version, which keeps the same end rule, saves the test a minute */
    parasail_result_t *res =
        (uint64_t)ql * (uint64_t)rl < 4000000
            ? parasail_sw(p->q[k], ql, p->r[k], rl, open, ext, m)
            : parasail_sw_striped_32(p->q[k], ql, p->r[k], rl, open, ext, m);
    g[k].score = parasail_result_get_score(res);
    g[k].qend = parasail_result_get_end_query(res);
    g[k].rend = parasail_result_get_end_ref(res);
    parasail_result_free(res);

    int8_t *qe = ssw_encode(m, p->q[k], p->ql[k]);
    int8_t *re = ssw_encode(m, p->r[k], p->rl[k]);
    s_profile *prof = ssw_init(qe, ql, mat, m->size, 2);
    s_align *a = ssw_align(prof, re, rl, (uint8_t)open, (uint8_t)ext, 0x08, 0,
                           0, ql / 2 < 15 ? 15 : ql / 2);
    g[k].ssw_score = a->score1;
    g[k].ssw_qbeg = a->read_begin1;
    g[k].ssw_rbeg = a->ref_begin1;
    g[k].ssw_qend = a->read_end1;
    g[k].ssw_rend = a->ref_end1;
    align_destroy(a);
    init_destroy(prof);
    free(qe);
    free(re);

    g[k].rev_qbeg = g[k].rev_rbeg = -2;
    bool ssw_same = g[k].ssw_score == g[k].score &&
                    g[k].ssw_qend == g[k].qend && g[k].ssw_rend == g[k].rend;
    if (!ssw_same && g[k].score > 0) {
      printf("  pair %zu (%s): SSW gives score %d, ends %d, %d; parasail "
             "score %d, ends %d, %d: start checked against parasail on the "
             "reversed prefixes instead\n", k, p->qname[k], g[k].ssw_score,
             g[k].ssw_qend, g[k].ssw_rend, g[k].score, g[k].qend, g[k].rend);
      reversed_start(p->q[k], g[k].qend, p->r[k], g[k].rend, m, open, ext,
                     &g[k]);
    }

    g[k].tb_qbeg = g[k].tb_rbeg = -2;
    if (traceback && g[k].score > 0) {
      parasail_result_t *t = parasail_sw_trace_striped_32(
          p->q[k], ql, p->r[k], rl, open, ext, m);
      parasail_cigar_t *c = parasail_result_get_cigar(t, p->q[k], ql,
                                                      p->r[k], rl, m);
      /* parasail 2.6 lets an SW traceback that reaches query (or
       * reference) position 0 run on through gaps to the matrix edge
       * ("141D58=..."): skip leading gap operations, which no local
       * alignment has, to get the cell where the alignment starts */
      g[k].tb_qbeg = c->beg_query;
      g[k].tb_rbeg = c->beg_ref;
      for (int op = 0; op < c->len; op++) {
        char o = parasail_cigar_decode_op(c->seq[op]);
        int n = (int)parasail_cigar_decode_len(c->seq[op]);
        if (o == 'D')
          g[k].tb_rbeg += n;
        else if (o == 'I')
          g[k].tb_qbeg += n;
        else
          break;
      }
      parasail_cigar_free(c);
      parasail_result_free(t);
    }
  }
}

static uint8_t *block_of(const char **seqs, const size_t *lens, size_t n,
                         size_t *size) {
  *size = acc_seqset_bytes(lens, n);
  uint8_t *b = malloc(*size);
  if (!b || acc_seqset_write(b, *size, seqs, lens, n) != 0) {
    fprintf(stderr, "cannot build a seqset\n");
    exit(1);
  }
  return b;
}

/* check_variant: run one kernel variant over all pairs, compare. */
static void check_variant(const char *label, acc_sw_isa isa,
                          const acc_sw_scoring *s, const pairs *p,
                          const acc_seqset *qs, const acc_seqset *rs,
                          const golden *g) {
  acc_sw_hit *hits = calloc(p->n, sizeof *hits);
  size_t redone = 0;
  int rc = acc_sw_run_batch_isa(isa, s, qs, rs, 0, p->n, hits, NULL, &redone);
  if (rc != 0) {
    printf("FAIL %s %s: acc_sw_run_batch_isa returned %d (%s)\n", label,
           acc_sw_isa_name(isa), rc, ember_strerror(rc));
    failures++;
    free(hits);
    return;
  }
  size_t ends_eq = 0, ssw_eq = 0, ssw_cmp = 0, tb_eq = 0, tb_cmp = 0;
  size_t rev_eq = 0, rev_cmp = 0;
  int shown = 0;
  for (size_t k = 0; k < p->n; k++) {
    const acc_sw_hit *h = &hits[k];
    bool zero = g[k].score == 0;
    bool ends = h->score == g[k].score &&
                h->query_end == (zero ? -1 : g[k].qend) &&
                h->ref_end == (zero ? -1 : g[k].rend);
    ends_eq += ends;
    /* SSW's start is only meaningful where SSW found the same end */
    bool ssw_same_end = g[k].ssw_score == g[k].score &&
                        (zero || (g[k].ssw_qend == g[k].qend &&
                                  g[k].ssw_rend == g[k].rend));
    bool starts = true;
    if (ssw_same_end && !zero) {
      ssw_cmp++;
      starts = h->query_start == g[k].ssw_qbeg &&
               h->ref_start == g[k].ssw_rbeg;
      ssw_eq += starts;
    } else if (zero) {
      starts = h->query_start == -1 && h->ref_start == -1;
    } else {
      rev_cmp++;
      starts = h->query_start == g[k].rev_qbeg &&
               h->ref_start == g[k].rev_rbeg;
      rev_eq += starts;
    }
    if (g[k].tb_qbeg != -2) {
      tb_cmp++;
      tb_eq += h->query_start == g[k].tb_qbeg && h->ref_start == g[k].tb_rbeg;
    }
    if ((!ends || !starts) && shown++ < SHOW_MAX)
      printf("  MISMATCH %s %s pair %zu (%s / %s): got score %d, query "
             "%d..%d, ref %d..%d; parasail score %d, ends %d, %d; SSW score "
             "%d, query %d..%d, ref %d..%d\n",
             label, acc_sw_isa_name(isa), k, p->qname[k], p->rname[k],
             h->score, h->query_start, h->query_end, h->ref_start, h->ref_end,
             g[k].score, g[k].qend, g[k].rend, g[k].ssw_score, g[k].ssw_qbeg,
             g[k].ssw_qend, g[k].ssw_rbeg, g[k].ssw_rend);
    if (!ends || !starts) failures++;
  }
  printf("%s: %zu pairs, %s: %zu/%zu equal to parasail (score, ends), "
         "starts %zu/%zu equal to SSW", label, p->n, acc_sw_isa_name(isa),
         ends_eq, p->n, ssw_eq, ssw_cmp);
  if (rev_cmp)
    printf(", %zu/%zu equal to parasail on the reversed prefixes", rev_eq,
           rev_cmp);
  if (tb_cmp)
    printf(", %zu/%zu equal to parasail's traceback", tb_eq, tb_cmp);
  printf("; %zu redone in 32-bit\n", redone);
  free(hits);
}

/* run_config: golden answers once, then every supported variant. */
static void run_config(const char *label, const acc_sw_scoring *s,
                       const parasail_matrix_t *m, int open, int ext,
                       const pairs *p, bool traceback) {
  golden *g = calloc(p->n, sizeof *g);
  compute_golden(p, m, open, ext, traceback, g);
  size_t ssw_agree = 0;
  for (size_t k = 0; k < p->n; k++)
    ssw_agree += g[k].ssw_score == g[k].score &&
                 (g[k].score == 0 || (g[k].ssw_qend == g[k].qend &&
                                      g[k].ssw_rend == g[k].rend));
  printf("%s: SSW agrees with parasail on score and ends for %zu/%zu pairs\n",
         label, ssw_agree, p->n);

  size_t qsize, rsize;
  uint8_t *qb = block_of(p->q, p->ql, p->n, &qsize);
  uint8_t *rb = block_of(p->r, p->rl, p->n, &rsize);
  acc_block qblk = {qb, qsize}, rblk = {rb, rsize};
  acc_seqset qs, rs;
  char err[256];
  if (acc_seqset_view(&qblk, &qs, err, sizeof err) ||
      acc_seqset_view(&rblk, &rs, err, sizeof err)) {
    printf("FAIL %s: seqset_view: %s\n", label, err);
    failures++;
  } else {
    for (int isa = 0; isa < ACC_SW_ISA_COUNT; isa++) {
      if (!acc_sw_isa_supported((acc_sw_isa)isa)) {
        printf("%s: %s not supported on this CPU, skipped\n", label,
               acc_sw_isa_name((acc_sw_isa)isa));
        continue;
      }
      check_variant(label, (acc_sw_isa)isa, s, p, &qs, &rs, g);
    }
  }
  free(qb);
  free(rb);
  free(g);
}

/* The descriptor path (validate, run_cpu, packed Result) on the same data
 * must give what the kernel gives. */
static void check_descriptor(const pairs *p, const uint8_t *params,
                             size_t params_len, const acc_sw_scoring *s) {
  size_t qsize, rsize;
  uint8_t *qb = block_of(p->q, p->ql, p->n, &qsize);
  uint8_t *rb = block_of(p->r, p->rl, p->n, &rsize);
  acc_block in[2] = {{qb, qsize}, {rb, rsize}};
  const acc_descriptor *d = &acc_sw_descriptor;
  void *prep = NULL;
  char err[256] = "";
  int rc = d->validate(params, params_len, in, 2, &prep, err, sizeof err);
  acc_output out = {NULL, 0};
  if (rc == 0) rc = d->run_cpu(prep, in, 2, NULL, &out, err, sizeof err);
  if (rc != 0) {
    printf("FAIL descriptor: rc %d: %s\n", rc, err);
    failures++;
  } else {
    Ember__Sw__Result *res = ember__sw__result__unpack(NULL, out.size,
                                                       out.data);
    acc_seqset qs, rs;
    acc_seqset_view(&in[0], &qs, NULL, 0);
    acc_seqset_view(&in[1], &rs, NULL, 0);
    acc_sw_hit *hits = calloc(p->n, sizeof *hits);
    acc_sw_run_batch(s, &qs, &rs, 0, p->n, hits, NULL);
    size_t eq = 0;
    uint64_t cells = 0;
    for (size_t k = 0; res && k < p->n && k < res->n_score; k++) {
      eq += res->score[k] == hits[k].score &&
            res->query_start[k] == hits[k].query_start &&
            res->query_end[k] == hits[k].query_end &&
            res->ref_start[k] == hits[k].ref_start &&
            res->ref_end[k] == hits[k].ref_end;
      cells += (uint64_t)p->ql[k] * p->rl[k];
    }
    printf("descriptor: %zu/%zu results equal to acc_sw_run_batch (%s), "
           "work %llu %s (expected %llu)\n", eq, p->n,
           acc_sw_isa_name(acc_sw_isa_selected()),
           (unsigned long long)d->work(prep), d->work_unit,
           (unsigned long long)cells);
    if (!res || res->n_score != p->n || eq != p->n || d->work(prep) != cells)
      failures++;
    ember__sw__result__free_unpacked(res, NULL);
    free(hits);
    free(out.data);
  }
  d->release(prep);
  free(qb);
  free(rb);
}

static void load(const char *name, swt_fasta *f) {
  if (swt_fasta_read(name, f) != 0) exit(1);
}

static int run_dna(const char *qfile, const char *rfile, const char *label,
                   bool traceback, bool descriptor) {
  swt_fasta fq, fr;
  load(qfile, &fq);
  load(rfile, &fr);
  if (fq.n != fr.n || fq.n == 0) {
    printf("FAIL %s: %zu queries, %zu references\n", label, fq.n, fr.n);
    return 1;
  }
  pairs p = {0};
  for (size_t i = 0; i < fq.n; i++) pairs_add(&p, &fq, i, &fr, i);
  acc_sw_scoring s;
  char err[256];
  if (acc_sw_scoring_dna(3, -3, 6, 1, &s, err, sizeof err) != 0) {
    printf("FAIL scoring: %s\n", err);
    return 1;
  }
  parasail_matrix_t *m = parasail_matrix_create("ACGT", 3, -3);
  run_config(label, &s, m, 6, 1, &p, traceback);
  if (descriptor) check_descriptor(&p, NULL, 0, &s);
  parasail_matrix_free(m);
  pairs_free(&p);
  swt_fasta_free(&fq);
  swt_fasta_free(&fr);
  return 0;
}

static int run_protein(void) {
  swt_fasta glob, swiss;
  load(DATA "emboss_test_globins630.fa", &glob);
  load(DATA "emboss_test_swiss_seq.fa", &swiss);
  pairs p = {0};
  for (size_t i = 0; i + 1 < glob.n; i++) pairs_add(&p, &glob, i, &glob, i + 1);
  for (size_t i = 0; i + 1 < swiss.n; i++)
    pairs_add(&p, &swiss, i, &swiss, i + 1);
  printf("protein: %zu globin pairs, %zu Swiss-Prot pairs\n", glob.n - 1,
         swiss.n - 1);

  static const char *const names[] = {"BLOSUM45", "BLOSUM50", "BLOSUM62",
                                       "BLOSUM80", "PAM250"};
  char err[256], label[64];
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    Ember__Sw__Params prm = EMBER__SW__PARAMS__INIT;
    prm.alphabet = EMBER__SW__ALPHABET__PROTEIN;
    prm.matrix_name = (char *)names[k];
    prm.has_gap_open = prm.has_gap_extend = 1;
    prm.gap_open = 11;
    prm.gap_extend = 1;
    acc_sw_scoring s;
    if (acc_sw_scoring_from_params(&prm, &s, err, sizeof err) != 0) {
      printf("FAIL scoring %s: %s\n", names[k], err);
      failures++;
      continue;
    }
    char lower[16];
    for (size_t i = 0; i <= strlen(names[k]); i++)
      lower[i] = (char)(names[k][i] | (names[k][i] >= 'A' ? 0x20 : 0));
    const parasail_matrix_t *m = parasail_matrix_lookup(lower);
    snprintf(label, sizeof label, "protein %s 11/1", names[k]);
    run_config(label, &s, m, 11, 1, &p, true);
  }

  /* EBLOSUM62 from file through the NCBI reader */
  acc_sw_matrix mx;
  acc_sw_scoring s;
  if (acc_sw_matrix_read_file(DATA "EBLOSUM62", &mx, err, sizeof err) != 0 ||
      acc_sw_scoring_matrix(&mx, 11, 1, &s, err, sizeof err) != 0) {
    printf("FAIL EBLOSUM62: %s\n", err);
    failures++;
  } else {
    parasail_matrix_t *m = parasail_matrix_from_file(DATA "EBLOSUM62");
    run_config("protein EBLOSUM62 (file) 11/1", &s, m, 11, 1, &p, false);
    parasail_matrix_free(m);
  }
  pairs_free(&p);
  swt_fasta_free(&glob);
  swt_fasta_free(&swiss);
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *what = argc > 1 ? argv[1] : "dna";
  int rc;
  if (strcmp(what, "dna") == 0)
    rc = run_dna(DATA "dna_queries.fa", DATA "dna_refs.fa", "dna 3/-3/6/1",
                 true, true);
  else if (strcmp(what, "dna_long") == 0)
    rc = run_dna(DATA "dna_long_queries.fa", DATA "dna_long_refs.fa",
                 "dna_long 3/-3/6/1", false, false);
  else if (strcmp(what, "protein") == 0)
    rc = run_protein();
  else {
    fprintf(stderr, "usage: %s dna|dna_long|protein\n", argv[0]);
    return 2;
  }
  if (rc || failures) {
    printf("FAILED: %d mismatches or errors\n", failures + rc);
    return 1;
  }
  printf("OK\n");
  return 0;
}
