/* sw_fasta.c - FASTA reading for the sw tests (see sw_fasta.h). */
#include "sw_fasta.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sw/seqset.h"

static int grow(swt_fasta *f, size_t *cap) {
  if (f->n < *cap) return 0;
  size_t nc = *cap ? 2 * *cap : 64;
  char **names = realloc(f->names, nc * sizeof *names);
  if (!names) return -1;
  f->names = names;
  char **seqs = realloc(f->seqs, nc * sizeof *seqs);
  if (!seqs) return -1;
  f->seqs = seqs;
  size_t *lens = realloc(f->lens, nc * sizeof *lens);
  if (!lens) return -1;
  f->lens = lens;
  *cap = nc;
  return 0;
}

int swt_fasta_read(const char *path, swt_fasta *out) {
  memset(out, 0, sizeof *out);
  FILE *fp = fopen(path, "rb");
  if (!fp) {
    perror(path);
    return -1;
  }
  fseek(fp, 0, SEEK_END);
  long size = ftell(fp);
  fseek(fp, 0, SEEK_SET);
  char *text = malloc((size_t)size + 1);
  if (!text || fread(text, 1, (size_t)size, fp) != (size_t)size) {
    fprintf(stderr, "%s: cannot read\n", path);
    free(text);
    fclose(fp);
    return -1;
  }
  fclose(fp);
  text[size] = '\0';

  size_t cap = 0, seqcap = 0, seqlen = 0;
  char *seq = NULL;
  for (char *line = text; line && *line;) {
    char *nl = strchr(line, '\n');
    if (nl) *nl = '\0';
    if (line[0] == '>') {
      if (grow(out, &cap)) goto oom;
      size_t k = strcspn(line + 1, " \t\r");
      out->names[out->n] = strndup(line + 1, k);
      out->seqs[out->n] = NULL;
      out->lens[out->n] = 0;
      out->n++;
      seqlen = 0;
      seqcap = 0;
      seq = NULL;
    } else if (out->n) {
      for (char *c = line; *c; c++) {
        if (*c == ' ' || *c == '\t' || *c == '\r') continue;
        if (seqlen + 1 >= seqcap) {
          seqcap = seqcap ? 2 * seqcap : 256;
          char *g = realloc(seq, seqcap);
          if (!g) goto oom;
          seq = g;
        }
        seq[seqlen++] = *c;
        seq[seqlen] = '\0';
      }
      out->seqs[out->n - 1] = seq;
      out->lens[out->n - 1] = seqlen;
    }
    line = nl ? nl + 1 : NULL;
  }
  for (size_t i = 0; i < out->n; i++)
    if (!out->seqs[i] && !(out->seqs[i] = calloc(1, 1))) goto oom;
  free(text);
  return 0;
oom:
  fprintf(stderr, "%s: out of memory\n", path);
  free(text);
  swt_fasta_free(out);
  return -1;
}

void swt_fasta_free(swt_fasta *f) {
  for (size_t i = 0; i < f->n; i++) {
    free(f->names[i]);
    free(f->seqs[i]);
  }
  free(f->names);
  free(f->seqs);
  free(f->lens);
  memset(f, 0, sizeof *f);
}

uint8_t *swt_seqset_list(const swt_fasta *f, const size_t *idx, size_t count,
                         size_t *size) {
  const char **res = malloc((count ? count : 1) * sizeof *res);
  size_t *lens = malloc((count ? count : 1) * sizeof *lens);
  uint8_t *block = NULL;
  if (!res || !lens) goto out;
  for (size_t i = 0; i < count; i++) {
    res[i] = f->seqs[idx[i]];
    lens[i] = f->lens[idx[i]];
  }
  *size = acc_seqset_bytes(lens, count);
  if (*size == 0 || !(block = malloc(*size))) goto out;
  if (acc_seqset_write(block, *size, res, lens, count) != 0) {
    free(block);
    block = NULL;
  }
out:
  free(res);
  free(lens);
  return block;
}

uint8_t *swt_seqset(const swt_fasta *f, size_t first, size_t count,
                    size_t *size) {
  size_t *idx = malloc((count ? count : 1) * sizeof *idx);
  if (!idx) return NULL;
  for (size_t i = 0; i < count; i++) idx[i] = first + i;
  uint8_t *b = swt_seqset_list(f, idx, count, size);
  free(idx);
  return b;
}
