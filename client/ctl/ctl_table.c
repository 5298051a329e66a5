/* ctl_table.c - tables with aligned columns for emberctl's human output
 * (ctl.h). */
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

struct ctl_table {
  size_t cols, rows, cap;
  char **cells;        /* rows x cols, the header first */
  bool *right;         /* per column */
  bool failed;         /* a row could not be added */
};

ctl_table *ctl_table_new(size_t cols, const char *const *header) {
  ctl_table *t = calloc(1, sizeof *t);
  if (!t) return NULL;
  t->cols = cols;
  t->right = calloc(cols ? cols : 1, sizeof *t->right);
  if (!t->right) {
    free(t);
    return NULL;
  }
  ctl_table_add(t, header);
  if (t->failed) {
    ctl_table_free(t);
    return NULL;
  }
  return t;
}

void ctl_table_right(ctl_table *t, size_t col) {
  if (t && col < t->cols) t->right[col] = true;
}

void ctl_table_add(ctl_table *t, const char *const *cells) {
  if (!t || t->failed) return;
  if (t->rows == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 16;
    char **grown = realloc(t->cells, cap * t->cols * sizeof *grown);
    if (!grown) {
      t->failed = true;
      return;
    }
    t->cells = grown;
    t->cap = cap;
  }
  char **row = t->cells + t->rows * t->cols;
  for (size_t c = 0; c < t->cols; c++) {
    row[c] = strdup(cells[c] && cells[c][0] ? cells[c] : "-");
    if (!row[c]) {
      while (c > 0) free(row[--c]);
      t->failed = true;
      return;
    }
  }
  t->rows++;
}

/* Characters a terminal shows for s: UTF-8 continuation bytes take no
 * column of their own. */
static size_t width_of(const char *s) {
  size_t w = 0;
  for (; *s; s++)
    if (((unsigned char)*s & 0xC0) != 0x80) w++;
  return w;
}

static int pad(FILE *f, size_t n) {
  for (; n > 0; n--)
    if (fputc(' ', f) == EOF) return -1;
  return 0;
}

int ctl_table_print(const ctl_table *t, FILE *f) {
  if (!t || t->failed) return -1;
  size_t *width = calloc(t->cols ? t->cols : 1, sizeof *width);
  if (!width) return -1;
  for (size_t r = 0; r < t->rows; r++)
    for (size_t c = 0; c < t->cols; c++) {
      size_t w = width_of(t->cells[r * t->cols + c]);
      if (w > width[c]) width[c] = w;
    }
  int rc = 0;
  for (size_t r = 0; r < t->rows && rc == 0; r++) {
    for (size_t c = 0; c < t->cols && rc == 0; c++) {
      const char *s = t->cells[r * t->cols + c];
      size_t gap = width[c] - width_of(s);
      bool last = c + 1 == t->cols;
      if (c > 0) rc |= pad(f, 2);
      if (t->right[c]) rc |= pad(f, gap);
      if (fputs(s, f) == EOF) rc = -1;
      if (!t->right[c] && !last) rc |= pad(f, gap);
    }
    if (fputc('\n', f) == EOF) rc = -1;
  }
  free(width);
  return rc ? -1 : 0;
}

void ctl_table_free(ctl_table *t) {
  if (!t) return;
  for (size_t i = 0; i < t->rows * t->cols; i++) free(t->cells[i]);
  free(t->cells);
  free(t->right);
  free(t);
}
