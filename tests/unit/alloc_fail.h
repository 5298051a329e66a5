/*
 * alloc_fail.h - allocation failure for unit tests (curl's torture idea):
 * once armed, the Nth malloc/calloc/realloc/aligned_alloc fails; alloc_live counts the
 * blocks allocated and not yet freed. The test links alloc_fail.c with
 * -Wl,--wrap= for each and free (see
 * ember_test_alloc_fail() in tests/unit/CMakeLists.txt).
 */
#ifndef EMBER_TEST_ALLOC_FAIL_H
#define EMBER_TEST_ALLOC_FAIL_H

#include <stdatomic.h>
#include <stddef.h>

extern int alloc_fail_at;      /* fail the alloc_fail_at-th call; 0: never */
extern int alloc_count;        /* calls counted since it was last set to 0 */
extern atomic_long alloc_live; /* allocated minus freed */

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
void __real_free(void *p);

#endif
