/* alloc_fail.c - the wrapped allocator of alloc_fail.h. */
#include "alloc_fail.h"

int alloc_fail_at, alloc_count;
atomic_long alloc_live;

void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);
void __wrap_free(void *p);

void *__wrap_malloc(size_t n) {
  if (alloc_fail_at && ++alloc_count == alloc_fail_at) return NULL;
  void *p = __real_malloc(n);
  if (p) alloc_live++;
  return p;
}

void *__wrap_calloc(size_t n, size_t m) {
  if (alloc_fail_at && ++alloc_count == alloc_fail_at) return NULL;
  void *p = __real_calloc(n, m);
  if (p) alloc_live++;
  return p;
}

void *__wrap_realloc(void *p, size_t n) {
  if (alloc_fail_at && ++alloc_count == alloc_fail_at) return NULL;
  void *q = __real_realloc(p, n);
  if (q && !p) alloc_live++;
  return q;
}

void *__wrap_aligned_alloc(size_t align, size_t n) {
  if (alloc_fail_at && ++alloc_count == alloc_fail_at) return NULL;
  void *p = __real_aligned_alloc(align, n);
  if (p) alloc_live++;
  return p;
}

void __wrap_free(void *p) {
  if (p) alloc_live--;
  __real_free(p);
}
