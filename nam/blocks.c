/* blocks.c - a client's block table (open addressing on the block id). */
#include "blocks.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ember/ember_errors.h"

static size_t slot_of(uint64_t id, size_t cap) {
  id ^= id >> 33;
  id *= 0xff51afd7ed558ccdULL;
  id ^= id >> 33;
  return (size_t)id & (cap - 1);
}

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
  if (!t->cap) return NULL;
  for (size_t i = slot_of(id, t->cap);; i = (i + 1) & (t->cap - 1)) {
    if (!t->slots[i]) return NULL;
    if (t->slots[i]->id == id) return t->slots[i];
  }
}

static int grow(nam_block_table *t) {
  size_t cap = t->cap ? t->cap * 2 : 16;
  nam_block **slots = calloc(cap, sizeof *slots);
  if (!slots) return EMBER_ENOMEM;
  for (size_t i = 0; i < t->cap; i++) {
    nam_block *b = t->slots[i];
    if (!b) continue;
    size_t j = slot_of(b->id, cap);
    while (slots[j]) j = (j + 1) & (cap - 1);
    slots[j] = b;
  }
  free(t->slots);
  t->slots = slots;
  t->cap = cap;
  return 0;
}

int nam_blocks_insert(nam_block_table *t, nam_block *b) {
  if (nam_blocks_find(t, b->id)) return EMBER_EINVAL;
  if ((t->count + 1) * 2 > t->cap && grow(t) != 0) return EMBER_ENOMEM;
  size_t i = slot_of(b->id, t->cap);
  while (t->slots[i]) i = (i + 1) & (t->cap - 1);
  t->slots[i] = b;
  t->count++;
  t->bytes += b->size;
  atomic_init(&b->refs, 1);
  b->client_ref = 1;
  return 0;
}

/* Remove slot i and re-place the cluster after it (linear probing). */
static void remove_slot(nam_block_table *t, size_t i) {
  t->slots[i] = NULL;
  t->count--;
  for (size_t j = (i + 1) & (t->cap - 1); t->slots[j];
       j = (j + 1) & (t->cap - 1)) {
    nam_block *b = t->slots[j];
    t->slots[j] = NULL;
    size_t k = slot_of(b->id, t->cap);
    while (t->slots[k]) k = (k + 1) & (t->cap - 1);
    t->slots[k] = b;
  }
}

int nam_blocks_release(nam_block_table *t, uint64_t id) {
  if (!t->cap) return EMBER_ENOTFOUND;
  for (size_t i = slot_of(id, t->cap);; i = (i + 1) & (t->cap - 1)) {
    nam_block *b = t->slots[i];
    if (!b) return EMBER_ENOTFOUND;
    if (b->id != id) continue;
    remove_slot(t, i);
    t->bytes -= b->size;
    b->client_ref = 0;
    nam_block_unref(b);
    return 0;
  }
}

void nam_blocks_clear(nam_block_table *t) {
  for (size_t i = 0; i < t->cap; i++) {
    nam_block *b = t->slots[i];
    if (!b) continue;
    b->client_ref = 0;
    nam_block_unref(b);
  }
  free(t->slots);
  memset(t, 0, sizeof *t);
}
