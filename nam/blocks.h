/*
 * blocks.h - one client's blocks: id -> mapped bytes, with references.
 *
 * The client holds one reference until it releases the block (or goes
 * away); the engine's block cache holds one while it knows the block (its
 * release callback drops it, on whatever thread frees the entry); every
 * task using the block holds another (a pin) until it is done. The bytes
 * are freed when the last reference goes.
 */
#ifndef EMBER_NAM_BLOCKS_H
#define EMBER_NAM_BLOCKS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <uthash.h>

#include "proto/ember.pb-c.h"

typedef struct nam_block {
  uint64_t id;
  const uint8_t *data;
  size_t size;
  unsigned flags;
  atomic_int refs;            /* the cache may drop its own from any thread */
  int client_ref;             /* the client still holds it */
  void *map;                  /* mmap'd memfd, or NULL */
  Ember__PutBlock *inline_msg; /* TCP: the unpacked frame owns the bytes */
  UT_hash_handle hh;          /* in the table while client_ref is set */
} nam_block;

typedef struct nam_block_table {
  nam_block *head;            /* uthash on id; NULL when empty */
  uint64_t bytes;             /* held by the client (client_ref set) */
} nam_block_table;

nam_block *nam_blocks_find(const nam_block_table *t, uint64_t id);
/* Takes ownership of b (refs = 1, the client's). EMBER_EINVAL if the id is
 * taken, EMBER_ENOMEM. */
int nam_blocks_insert(nam_block_table *t, nam_block *b);
/* The client's release: drops its reference and forgets the id. */
int nam_blocks_release(nam_block_table *t, uint64_t id);
/* Drop every client reference (disconnect); pinned blocks live on. */
void nam_blocks_clear(nam_block_table *t);

void nam_block_ref(nam_block *b);
void nam_block_unref(nam_block *b);

#endif
