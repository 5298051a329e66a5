/* host_memory.c - block copies in host memory (host_memory.h). */
#include "host_memory.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"

typedef struct host_copy {
  uint8_t *mem;
  size_t size;
  int owned;          /* 0: wraps bytes the cache keeps alive */
} host_copy;

int nam_host_alloc(void *ctx, size_t size, void **handle) {
  (void)ctx;
  host_copy *h = malloc(sizeof *h);
  uint8_t *mem = malloc(size ? size : 1);
  if (!h || !mem) {
    free(h);
    free(mem);
    return EMBER_ENOMEM;
  }
  *h = (host_copy){mem, size, 1};
  *handle = h;
  return 0;
}

int nam_host_wrap(void *ctx, const void *data, size_t size, void **handle) {
  (void)ctx;
  host_copy *h = malloc(sizeof *h);
  if (!h) return EMBER_ENOMEM;
  /* never written through: wrapped copies serve read-only blocks */
  *h = (host_copy){(uint8_t *)(uintptr_t)data, size, 0};
  *handle = h;
  return 0;
}

int nam_host_upload(void *handle, const void *data, size_t size) {
  host_copy *h = handle;
  if (size > h->size || (size && !data) || !h->owned) return EMBER_EINVAL;
  if (size) memcpy(h->mem, data, size);
  return 0;
}

int nam_host_read(void *handle, void *dst, size_t size) {
  host_copy *h = handle;
  if (size > h->size || (size && !dst)) return EMBER_EINVAL;
  if (size) memcpy(dst, h->mem, size);
  return 0;
}

int nam_host_copy(void *dst, void *src, size_t size) {
  host_copy *d = dst, *s = src;
  if (!d->owned || size > d->size || size > s->size) return EMBER_EINVAL;
  if (size) memcpy(d->mem, s->mem, size);
  return 0;
}

void nam_host_free(void *handle) {
  host_copy *h = handle;
  if (!h) return;
  if (h->owned) free(h->mem);
  free(h);
}

void *nam_host_ptr(void *handle) {
  return handle ? ((host_copy *)handle)->mem : NULL;
}

const nam_block_cache_ops nam_host_memory_ops = {
  .alloc = nam_host_alloc,
  .upload = nam_host_upload,
  .free = nam_host_free,
  .read = nam_host_read,
  .wrap = nam_host_wrap,
  .host_ptr = nam_host_ptr,
  .copy = nam_host_copy,
};
