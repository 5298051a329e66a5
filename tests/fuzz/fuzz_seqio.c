/*
 * fuzz_seqio.c - libFuzzer target for the CLI's FASTA/FASTQ reader
 * (client/cli/seqio.c).
 *
 * Every input is parsed from memory (seqio_parse) and, through a memfd,
 * from a "file" (seqio_read, BGZF inflating gzip'd inputs). For plain
 * inputs both paths must agree on the outcome and on every record. A
 * success must satisfy the header's promises: at least one record, names
 * non-empty, short and free of whitespace, sequences non-empty, within the
 * limit, NUL-terminated and free of whitespace and control bytes; a
 * failure must leave the set empty and say why.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "seqio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_set(int rc, const seqio_set *s, const char *err) {
  if (rc != 0) {
    if (s->n != 0 || s->records != NULL || err[0] == '\0') abort();
    return;
  }
  if (s->n == 0 || !s->records) abort();
  if (s->format != SEQIO_FASTA && s->format != SEQIO_FASTQ) abort();
  for (size_t i = 0; i < s->n; i++) {
    const seqio_record *r = &s->records[i];
    size_t nl = strlen(r->name);
    if (nl == 0 || nl > SEQIO_MAX_NAME || strpbrk(r->name, " \t\r\n")) abort();
    if (r->length == 0 || r->length > SEQIO_MAX_LENGTH) abort();
    if (r->residues[r->length] != '\0') abort();
    for (size_t k = 0; k < r->length; k++) {
      unsigned char c = (unsigned char)r->residues[k];
      if (c <= 0x20 || c >= 0x7F) abort();
    }
    if (r->line == 0 || (i > 0 && r->line <= s->records[i - 1].line)) abort();
  }
}

static int same_sets(int rc_a, const seqio_set *a, int rc_b, const seqio_set *b) {
  if (rc_a != rc_b) return 0;
  if (rc_a != 0) return 1;
  if (a->n != b->n || a->format != b->format) return 0;
  for (size_t i = 0; i < a->n; i++) {
    const seqio_record *x = &a->records[i], *y = &b->records[i];
    if (strcmp(x->name, y->name) != 0 || x->length != y->length ||
        x->line != y->line || memcmp(x->residues, y->residues, x->length) != 0)
      return 0;
  }
  return 1;
}

/* The input as a file seqio_read can open; -1 if that is not possible. */
static int as_file(const uint8_t *data, size_t size, char *path, size_t len) {
  int fd = memfd_create("fuzz_seqio", 0);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
    if (n <= 0) {
      close(fd);
      return -1;
    }
    done += (size_t)n;
  }
  snprintf(path, len, "/proc/self/fd/%d", fd);
  return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char err_mem[256], err_file[256], path[64];
  seqio_set mem, file;
  int gzipped = size >= 2 && data[0] == 0x1f && data[1] == 0x8b;

  int rc_mem = seqio_parse(data, size, "fuzz", &mem, err_mem, sizeof err_mem);
  check_set(rc_mem, &mem, err_mem);

  int fd = as_file(data, size, path, sizeof path);
  if (fd >= 0) {
    int rc_file = seqio_read(path, &file, err_file, sizeof err_file);
    check_set(rc_file, &file, err_file);
    /* BGZF passes plain text through unchanged, so the two must agree;
     * an empty file is "no sequences" either way */
    if (!gzipped && !same_sets(rc_mem, &mem, rc_file, &file)) abort();
    seqio_free(&file);
    close(fd);
  }
  seqio_free(&mem);
  return 0;
}
