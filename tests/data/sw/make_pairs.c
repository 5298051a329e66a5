/*
 * make_pairs.c - cut the sw test and demo pairs from real DNA (built as
 * sw-make-pairs). Deterministic: one fixed seed, its own PRNG (splitmix64),
 * no floating point in the choices, so every machine writes the same bytes.
 *
 *   sw-make-pairs emboss_test_hum1.fa OUTDIR
 *
 * writes into OUTDIR:
 *   dna_queries.fa, dna_refs.fa       2000 pairs: a 150 bp read with 2-5%
 *       substitutions and small indels (1-3 bp) taken from inside a 300-600
 *       bp reference window; about 5% of reads come from elsewhere
 *       (unrelated pairs); about 2% of reads are written in lower case.
 *   dna_long_queries.fa, dna_long_refs.fa   5 pairs: 10-12.5 kbp windows and
 *       mutated copies; most score above 32767 and so saturate 16-bit lanes.
 * Query i pairs with reference i. Headers say where each piece came from.
 */
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sw_fasta.h"

#define N_SHORT 2000
#define READ_LEN 150

static uint64_t rng_state = 0x5357454d42455231ull;   /* fixed seed */

static uint64_t next_u64(void) {
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* below: uniform in [0, n) (n > 0; the tiny modulo bias is irrelevant) */
static size_t below(size_t n) { return (size_t)(next_u64() % n); }

static char other_base(char c) {
  static const char acgt[] = "ACGT";
  char b;
  do b = acgt[below(4)];
  while (b == toupper((unsigned char)c));
  return b;
}

/* mutate: copy src into dst until dst_len residues are written, applying
 * substitutions (sub_pm per mille), insertions and deletions of 1-3 bp
 * (indel_pt per ten thousand each). Returns the residues written. */
static size_t mutate(const char *src, size_t src_len, char *dst,
                     size_t dst_len, unsigned sub_pm, unsigned indel_pt,
                     int *subs, int *ins, int *dels) {
  size_t s = 0, d = 0;
  while (d < dst_len && s < src_len) {
    size_t roll = below(10000);
    if (roll < indel_pt) {
      for (size_t k = 1 + below(3); k > 0 && d < dst_len; k--)
        dst[d++] = "ACGT"[below(4)];
      (*ins)++;
    } else if (roll < 2 * indel_pt) {
      s += 1 + below(3);
      (*dels)++;
    } else {
      char c = src[s++];
      int acgt = strchr("ACGT", c) != NULL;
      if (acgt && below(1000) < sub_pm) {
        c = other_base(c);
        (*subs)++;
      }
      dst[d++] = c;
    }
  }
  return d;
}

static void write_seq(FILE *f, const char *seq, size_t len) {
  for (size_t i = 0; i < len; i += 70)
    fprintf(f, "%.*s\n", (int)(len - i < 70 ? len - i : 70), seq + i);
}

static FILE *open_out(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) perror(path);
  return f;
}

/* pick_record: a record of at least min_len residues, uniformly. */
static size_t pick_record(const swt_fasta *g, size_t min_len) {
  for (;;) {
    size_t r = below(g->n);
    if (g->lens[r] >= min_len) return r;
  }
}

static int make_short(const swt_fasta *g, const char *dir) {
  FILE *fq = open_out(dir, "dna_queries.fa");
  FILE *fr = open_out(dir, "dna_refs.fa");
  if (!fq || !fr) return -1;
  for (int p = 0; p < N_SHORT; p++) {
    size_t rec = pick_record(g, 1000);
    size_t win = 300 + below(301);
    size_t ws = below(g->lens[rec] - win + 1);
    const char *w = g->seqs[rec] + ws;
    int unrelated = below(100) < 5;
    size_t srec = rec, spos;
    if (unrelated) {
      srec = pick_record(g, 1000);
      spos = below(g->lens[srec] - 400);
    } else {
      spos = ws + below(win - 200 + 1);
    }
    unsigned sub_pm = 20 + (unsigned)below(31);      /* 2.0 - 5.0% */
    char read[READ_LEN];
    int subs = 0, ins = 0, dels = 0;
    size_t rlen = mutate(g->seqs[srec] + spos, g->lens[srec] - spos, read,
                         READ_LEN, sub_pm, 40, &subs, &ins, &dels);
    int lower = below(100) < 2;
    if (lower)
      for (size_t i = 0; i < rlen; i++)
        read[i] = (char)tolower((unsigned char)read[i]);
    fprintf(fq, ">q%04d src=%s:%zu %s subs=%d ins=%d del=%d%s\n", p,
            g->names[srec], spos + 1, unrelated ? "unrelated" : "related",
            subs, ins, dels, lower ? " lowercase" : "");
    write_seq(fq, read, rlen);
    fprintf(fr, ">r%04d src=%s:%zu-%zu\n", p, g->names[rec], ws + 1,
            ws + win);
    write_seq(fr, w, win);
  }
  fclose(fq);
  fclose(fr);
  return 0;
}

static int make_long(const swt_fasta *g, const char *dir) {
  static const struct {
    size_t len;
    unsigned sub_pm, indel_pt;
  } plan[] = {
    {12000, 10, 2}, {12000, 20, 3}, {12500, 5, 1}, {10000, 10, 2},
    {11000, 15, 2},
  };
  FILE *fq = open_out(dir, "dna_long_queries.fa");
  FILE *fr = open_out(dir, "dna_long_refs.fa");
  if (!fq || !fr) return -1;
  char *buf = malloc(13000);
  if (!buf) return -1;
  for (size_t p = 0; p < sizeof plan / sizeof plan[0]; p++) {
    size_t rec = pick_record(g, 20000);
    size_t ws = below(g->lens[rec] - plan[p].len + 1);
    const char *w = g->seqs[rec] + ws;
    int subs = 0, ins = 0, dels = 0;
    size_t qlen = mutate(w, plan[p].len, buf, plan[p].len, plan[p].sub_pm,
                         plan[p].indel_pt, &subs, &ins, &dels);
    fprintf(fq, ">lq%d src=%s:%zu-%zu subs=%d ins=%d del=%d\n", (int)p,
            g->names[rec], ws + 1, ws + plan[p].len, subs, ins, dels);
    write_seq(fq, buf, qlen);
    fprintf(fr, ">lr%d src=%s:%zu-%zu\n", (int)p, g->names[rec], ws + 1,
            ws + plan[p].len);
    write_seq(fr, w, plan[p].len);
  }
  free(buf);
  fclose(fq);
  fclose(fr);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s emboss_test_hum1.fa OUTDIR\n", argv[0]);
    return 2;
  }
  swt_fasta g;
  if (swt_fasta_read(argv[1], &g) != 0) return 1;
  for (size_t i = 0; i < g.n; i++)
    for (size_t k = 0; k < g.lens[i]; k++)
      g.seqs[i][k] = (char)toupper((unsigned char)g.seqs[i][k]);
  int rc = make_short(&g, argv[2]) || make_long(&g, argv[2]);
  swt_fasta_free(&g);
  return rc ? 1 : 0;
}
