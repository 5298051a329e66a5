/* block_cache_lru.c - least-recently-used eviction for the block cache. */
#include "block_cache_lru.h"

#include <stddef.h>

void nam_lru_init(nam_lru *lru) {
  lru->head.prev = lru->head.next = &lru->head;
  lru->bytes = 0;
  lru->count = 0;
}

void nam_lru_push(nam_lru *lru, nam_lru_node *n, uint64_t size) {
  n->prev = lru->head.prev;
  n->next = &lru->head;
  lru->head.prev->next = n;
  lru->head.prev = n;
  lru->bytes += size;
  lru->count++;
}

void nam_lru_remove(nam_lru *lru, nam_lru_node *n, uint64_t size) {
  n->prev->next = n->next;
  n->next->prev = n->prev;
  n->prev = n->next = NULL;
  lru->bytes -= size;
  lru->count--;
}

int nam_lru_linked(const nam_lru_node *n) { return n->next != NULL; }

nam_lru_node *nam_lru_victim(const nam_lru *lru) {
  return lru->head.next == &lru->head ? NULL : lru->head.next;
}
