/* block_mem.h - a block's bytes (block_mem.c): plain memory, or a memfd
 * that a NAM on a unix socket maps, sealed once written and mapped here
 * again only when the bytes are read. */
#ifndef EMBER_BLOCK_MEM_H
#define EMBER_BLOCK_MEM_H

#include <stdint.h>

#include "client.h"

/* b->data: b->size bytes of plain memory, a copy of init unless NULL */
int ember__block_mem_malloc(ember_block *b, const void *init);
/* b->memfd: init written into it, else mapped writable at b->data */
int ember__block_mem_memfd(ember_block *b, const void *init);
/* a plain-memory block gets a sealed memfd holding its bytes as well (a
 * NAM on a unix socket that takes no inline bytes this large); its bytes
 * stay where they are. Under client->lock. */
int ember__block_mem_add_memfd(ember_block *b);
/* a memfd block is written: drop the writable mapping and seal it */
int ember__block_mem_seal(ember_block *b);
/* the readable bytes (a memfd mapped read-only on first use); NULL when
 * the mapping fails */
const uint8_t *ember__block_bytes(ember_block *b);
/* b->data, b->memfd: gone */
void ember__block_mem_free(ember_block *b);

#endif
