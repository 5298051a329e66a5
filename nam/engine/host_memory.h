/*
 * host_memory.h - block copies in host memory: the cpu platform's "device"
 * memory, and what the fpga-emu boards compute on (they model the
 * transfers, see platform_fpga_emu.c). A copy either owns a malloc'd
 * buffer or wraps the host bytes it was made from (read-only blocks: no
 * copy at all).
 */
#ifndef EMBER_NAM_HOST_MEMORY_H
#define EMBER_NAM_HOST_MEMORY_H

#include <stddef.h>

#include "block_cache.h"

int nam_host_alloc(void *ctx, size_t size, void **handle);
int nam_host_wrap(void *ctx, const void *data, size_t size, void **handle);
int nam_host_upload(void *handle, const void *data, size_t size);
int nam_host_read(void *handle, void *dst, size_t size);
int nam_host_copy(void *dst, void *src, size_t size);
void nam_host_free(void *handle);
void *nam_host_ptr(void *handle);

/* The functions above as a block cache table. */
extern const nam_block_cache_ops nam_host_memory_ops;

#endif
