/*
 * block_cache_lru.h - the block cache's eviction policy, kept apart from the
 * table (as SQLite keeps pcache1.c apart from pcache.c): which unpinned
 * cached copy on a platform goes first. One list per platform holds only
 * copies that may be evicted (cached, resident, unpinned), least recently
 * used first; pinned, broadcast and plain copies are never on it.
 * Not thread-safe on its own: the cache calls it under its mutex.
 */
#ifndef EMBER_NAM_BLOCK_CACHE_LRU_H
#define EMBER_NAM_BLOCK_CACHE_LRU_H

#include <stdint.h>

typedef struct nam_lru_node {
  struct nam_lru_node *prev, *next; /* NULL, NULL: not on a list */
} nam_lru_node;

typedef struct nam_lru {
  nam_lru_node head;   /* sentinel: head.next is the least recently used */
  uint64_t bytes;      /* evictable bytes on the list */
  uint64_t count;
} nam_lru;

void nam_lru_init(nam_lru *lru);
/* n (size bytes) became evictable: it is now the most recently used. */
void nam_lru_push(nam_lru *lru, nam_lru_node *n, uint64_t size);
/* n leaves the list (pinned again, dropped or evicted). */
void nam_lru_remove(nam_lru *lru, nam_lru_node *n, uint64_t size);
int nam_lru_linked(const nam_lru_node *n);
/* The copy to evict next, or NULL when nothing is evictable. */
nam_lru_node *nam_lru_victim(const nam_lru *lru);

#endif
