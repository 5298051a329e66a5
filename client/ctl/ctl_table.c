/* ctl_table.c - tables with aligned columns for emberctl's human output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

void ctl_table_init(ctl_table *t, size_t cols, const char *const *header) {
  memset(t, 0, sizeof *t);
  t->cols = cols;
  ctl_table_add(t, header);
}

void ctl_table_add(ctl_table *t, const char *const *cells) {
  if (t->rows == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 16;
    char **grown = realloc(t->cells, cap * t->cols * sizeof *grown);
    if (!grown) return;
    t->cells = grown;
    t->cap = cap;
  }
  for (size_t i = 0; i < t->cols; i++)
    t->cells[t->rows * t->cols + i] = strdup(cells[i] ? cells[i] : "-");
  t->rows++;
}

void ctl_table_print(const ctl_table *t) {
  size_t width[32] = {0};
  for (size_t r = 0; r < t->rows; r++)
    for (size_t c = 0; c < t->cols && c < 32; c++) {
      const char *s = t->cells[r * t->cols + c];
      size_t w = s ? strlen(s) : 0;
      if (w > width[c]) width[c] = w;
    }
  for (size_t r = 0; r < t->rows; r++) {
    for (size_t c = 0; c < t->cols && c < 32; c++) {
      const char *s = t->cells[r * t->cols + c];
      if (c + 1 == t->cols) printf("%s", s ? s : "");
      else printf("%-*s  ", (int)width[c], s ? s : "");
    }
    putchar('\n');
  }
}

void ctl_table_free(ctl_table *t) {
  for (size_t i = 0; i < t->rows * t->cols; i++) free(t->cells[i]);
  free(t->cells);
  memset(t, 0, sizeof *t);
}
