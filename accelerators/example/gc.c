/* gc.c - GC content of each sequence of a block (see gc.h). */
#include "gc.h"

#include <stdio.h>
#include <string.h>

int gc_check(const uint8_t *data, size_t size, size_t *n_seqs, char *err,
             size_t err_len) {
  size_t line = 1, column = 0, n = 0;
  for (size_t i = 0; i < size; i++) {
    uint8_t c = data[i];
    if (c == '\n') {
      if (column == 0) {
        snprintf(err, err_len, "line %zu is empty", line);
        return -1;
      }
      n++;
      line++;
      column = 0;
      continue;
    }
    column++;
    if (!strchr("ACGTacgt", c) || c == '\0') {
      snprintf(err, err_len, "line %zu, column %zu: byte 0x%02x is not A, "
               "C, G or T", line, column, c);
      return -1;
    }
  }
  if (column > 0) n++;  /* the last line without its '\n' */
  if (n == 0) {
    snprintf(err, err_len, "no sequence in the block");
    return -1;
  }
  *n_seqs = n;
  return 0;
}

/* little-endian whatever the host's order */
static void put_le64(uint8_t *out, double v) {
  uint64_t bits;
  memcpy(&bits, &v, sizeof bits);
  for (int i = 0; i < 8; i++) out[i] = (uint8_t)(bits >> (8 * i));
}

void gc_compute(const uint8_t *data, size_t size, uint8_t *out) {
  size_t gc = 0, len = 0;
  for (size_t i = 0; i < size; i++) {
    uint8_t c = data[i] | 0x20;  /* lower case */
    if (data[i] == '\n') {
      put_le64(out, (double)gc / (double)len);
      out += 8;
      gc = len = 0;
      continue;
    }
    gc += c == 'g' || c == 'c';
    len++;
  }
  if (len > 0) put_le64(out, (double)gc / (double)len);
}
