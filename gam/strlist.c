/* strlist.c - sorted string sets (strlist.h). Binary search keeps label
 * checks cheap on the heartbeat path. */
#include "strlist.h"

#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"

/* Index of s, or of where it would go (with *found = false). */
static size_t find(const strlist *l, const char *s, bool *found) {
  size_t lo = 0, hi = l->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int c = strcmp(l->items[mid], s);
    if (c == 0) {
      *found = true;
      return mid;
    }
    if (c < 0) lo = mid + 1;
    else hi = mid;
  }
  *found = false;
  return lo;
}

bool strlist_has(const strlist *l, const char *s) {
  bool found;
  find(l, s, &found);
  return found;
}

int strlist_add(strlist *l, const char *s) {
  bool found;
  size_t at = find(l, s, &found);
  if (found) return 0;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 4;
    char **items = realloc(l->items, cap * sizeof *items);
    if (!items) return EMBER_ENOMEM;
    l->items = items;
    l->cap = cap;
  }
  char *copy = strdup(s);
  if (!copy) return EMBER_ENOMEM;
  memmove(l->items + at + 1, l->items + at, (l->n - at) * sizeof *l->items);
  l->items[at] = copy;
  l->n++;
  return 1;
}

int strlist_remove(strlist *l, const char *s) {
  bool found;
  size_t at = find(l, s, &found);
  if (!found) return 0;
  free(l->items[at]);
  memmove(l->items + at, l->items + at + 1, (l->n - at - 1) * sizeof *l->items);
  l->n--;
  return 1;
}

int strlist_assign(strlist *l, char *const *items, size_t n) {
  strlist fresh = {0};
  for (size_t i = 0; i < n; i++)
    if (strlist_add(&fresh, items[i]) < 0) {
      strlist_clear(&fresh);
      return EMBER_ENOMEM;
    }
  strlist_clear(l);
  *l = fresh;
  return 0;
}

bool strlist_equal_to(const strlist *l, char *const *items, size_t n) {
  size_t matched = 0;
  for (size_t i = 0; i < n; i++) {
    if (!strlist_has(l, items[i])) return false;
    bool dup = false;
    for (size_t j = 0; j < i && !dup; j++) dup = strcmp(items[i], items[j]) == 0;
    if (!dup) matched++;
  }
  return matched == l->n;
}

void strlist_clear(strlist *l) {
  for (size_t i = 0; i < l->n; i++) free(l->items[i]);
  free(l->items);
  l->items = NULL;
  l->n = l->cap = 0;
}
