/* strlist.h - a sorted set of owned strings: a node's labels, platforms. */
#ifndef EMBER_GAM_STRLIST_H
#define EMBER_GAM_STRLIST_H

#include <stdbool.h>
#include <stddef.h>

typedef struct strlist {
  char **items;   /* sorted, unique */
  size_t n, cap;
} strlist;

bool strlist_has(const strlist *l, const char *s);
/* 1 if added, 0 if it was there, EMBER_ENOMEM. */
int strlist_add(strlist *l, const char *s);
/* 1 if removed, 0 if it was not there. */
int strlist_remove(strlist *l, const char *s);
/* Replace the contents with items (duplicates dropped). 0 or EMBER_ENOMEM
 * (l is then unchanged). */
int strlist_assign(strlist *l, char *const *items, size_t n);
bool strlist_equal_to(const strlist *l, char *const *items, size_t n);
void strlist_clear(strlist *l);

#endif
