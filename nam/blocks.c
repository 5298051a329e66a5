/* blocks.c - a client's block table (uthash on the block id). */
#include "blocks.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ember/ember_errors.h"

static void block_free(nam_block *b) {
  if (b->map) munmap(b->map, b->size);
  if (b->inline_msg) ember__put_block__free_unpacked(b->inline_msg, NULL);
  free(b);
}

void nam_block_ref(nam_block *b) { atomic_fetch_add(&b->refs, 1); }

void nam_block_unref(nam_block *b) {
  if (atomic_fetch_sub(&b->refs, 1) == 1) block_free(b);
}

nam_block *nam_blocks_find(const nam_block_table *t, uint64_t id) {
  nam_block *b = NULL;
  HASH_FIND(hh, t->head, &id, sizeof id, b);
  return b;
}

int nam_blocks_insert(nam_block_table *t, nam_block *b) {
  if (nam_blocks_find(t, b->id)) return EMBER_EINVAL;
  unsigned count = HASH_COUNT(t->head);
  HASH_ADD(hh, t->head, id, sizeof b->id, b);
  if (HASH_COUNT(t->head) == count) return EMBER_ENOMEM; /* nothing added */
  t->bytes += b->size;
  atomic_init(&b->refs, 1);
  b->client_ref = 1;
  return 0;
}

int nam_blocks_release(nam_block_table *t, uint64_t id) {
  nam_block *b = nam_blocks_find(t, id);
  if (!b) return EMBER_ENOTFOUND;
  HASH_DEL(t->head, b);
  t->bytes -= b->size;
  b->client_ref = 0;
  nam_block_unref(b);
  return 0;
}

void nam_blocks_clear(nam_block_table *t) {
  nam_block *b, *next;
  HASH_ITER(hh, t->head, b, next) {
    HASH_DEL(t->head, b);
    b->client_ref = 0;
    nam_block_unref(b);
  }
  memset(t, 0, sizeof *t);
}
