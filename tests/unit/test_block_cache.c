/*
 * test_block_cache.c - the NAM block cache (nam/engine/block_cache.c and
 * its LRU policy): namespaces, hits and misses, LRU eviction under a
 * budget, pins, EBUSY, the three kinds of blocks, drop and disconnect, no
 * growth over many app lifetimes, allocation failure (the Nth malloc or
 * calloc fails: the test links with -Wl,--wrap=malloc,calloc,realloc,free)
 * and threads fetching and releasing at once.
 *
 * Platforms are fakes: a device copy is a heap buffer the test can read,
 * counted per platform, and a platform's alloc can be made to fail.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "alloc_fail.h"
#include "block_cache.h"
#include "ember/ember_errors.h"

/* ------------------------------------------------------------------------ */
/* Fake platforms                                                            */

typedef struct fake_plat {
  atomic_long live;       /* device copies allocated and not freed */
  atomic_long uploads;
  atomic_int fail_allocs; /* the next n device allocations fail with ENOMEM */
  atomic_int fail_uploads;
  int slow;               /* uploads yield the CPU: other fetches meet them */
  int gated;              /* uploads wait for open_gate() */
} fake_plat;

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open, gate_entered;

static void open_gate(void) {
  pthread_mutex_lock(&gate_lock);
  gate_open = 1;
  pthread_cond_broadcast(&gate_cond);
  pthread_mutex_unlock(&gate_lock);
}

/* Wait until an upload is held at the gate. */
static void wait_gate_entered(void) {
  pthread_mutex_lock(&gate_lock);
  while (!gate_entered) pthread_cond_wait(&gate_cond, &gate_lock);
  pthread_mutex_unlock(&gate_lock);
}

typedef struct fake_buf {
  fake_plat *plat;
  size_t size;
  unsigned char bytes[];
} fake_buf;

static int fake_alloc(void *ctx, size_t size, void **handle) {
  fake_plat *p = ctx;
  if (atomic_load(&p->fail_allocs) > 0) {
    atomic_fetch_sub(&p->fail_allocs, 1);
    return EMBER_ENOMEM;
  }
  fake_buf *b = __real_malloc(sizeof *b + size + 1);
  if (!b) return EMBER_ENOMEM;
  b->plat = p;
  b->size = size;
  memset(b->bytes, 0xee, size + 1);
  p->live++;
  *handle = b;
  return 0;
}

static int fake_upload(void *handle, const void *data, size_t size) {
  fake_buf *b = handle;
  if (atomic_load(&b->plat->fail_uploads) > 0) {
    atomic_fetch_sub(&b->plat->fail_uploads, 1);
    return EMBER_EIO;
  }
  if (size != b->size) return EMBER_EINTERNAL;
  for (int i = 0; i < b->plat->slow; i++) sched_yield();
  if (b->plat->gated) {
    pthread_mutex_lock(&gate_lock);
    gate_entered = 1;
    pthread_cond_broadcast(&gate_cond);
    while (!gate_open) pthread_cond_wait(&gate_cond, &gate_lock);
    pthread_mutex_unlock(&gate_lock);
  }
  memcpy(b->bytes, data, size);
  b->plat->uploads++;
  return 0;
}

static void fake_free(void *handle) {
  fake_buf *b = handle;
  b->plat->live--;
  __real_free(b);
}

static const nam_block_cache_ops fake_ops = {
  .alloc = fake_alloc, .upload = fake_upload, .free = fake_free};

static fake_plat plats[2];

/* A cache over two fake platforms with these budgets. */
static nam_block_cache *make_cache(uint64_t budget0, uint64_t budget1) {
  memset(plats, 0, sizeof plats);
  nam_block_cache_platform cfg[2] = {
      {&fake_ops, &plats[0], budget0},
      {&fake_ops, &plats[1], budget1},
  };
  nam_block_cache *c = NULL;
  assert_int_equal(nam_block_cache_create(cfg, 2, &c), 0);
  assert_non_null(c);
  return c;
}

/* Host bytes: a buffer per block, filled with its tag, freed by release. */
static atomic_int host_released;

static void host_release(void *user, const void *data, size_t size) {
  (void)size;
  assert_ptr_equal(user, data);
  host_released++;
  free(user);
}

static int put_tagged(nam_block_cache *c, uint64_t app, uint64_t id,
                      unsigned flags, size_t size, unsigned char tag) {
  unsigned char *d = malloc(size ? size : 1);
  if (!d) return EMBER_ENOMEM;
  memset(d, tag, size);
  int rc = nam_block_cache_put(c, app, id, flags, d, size, host_release, d);
  if (rc != 0) free(d);
  return rc;
}

/* The device copy holds exactly the host bytes. */
static void check_copy(const nam_block_pin *pin) {
  const fake_buf *b = pin->dev_handle;
  assert_non_null(b);
  assert_int_equal(b->size, pin->size);
  assert_memory_equal(b->bytes, pin->data, pin->size);
}

static nam_block_cache_stats stats_of(nam_block_cache *c) {
  nam_block_cache_stats s;
  nam_block_cache_get_stats(c, &s);
  return s;
}

/* fetch + check + return whether it was a hit */
static int fetch_ok(nam_block_cache *c, uint64_t app, uint64_t id,
                    unsigned platform, nam_block_pin *pin) {
  assert_int_equal(nam_block_cache_fetch(c, app, id, platform, pin), 0);
  check_copy(pin);
  return pin->hit;
}

/* fetch then release at once: one task's use */
static int touch(nam_block_cache *c, uint64_t app, uint64_t id,
                 unsigned platform) {
  nam_block_pin pin;
  int hit = fetch_ok(c, app, id, platform, &pin);
  assert_int_equal(nam_block_cache_release(c, &pin), 0);
  return hit;
}

static void teardown_check(nam_block_cache *c) {
  nam_block_cache_destroy(c);
  assert_int_equal(plats[0].live, 0);
  assert_int_equal(plats[1].live, 0);
}

/* ------------------------------------------------------------------------ */

static void test_create_args(void **state) {
  (void)state;
  nam_block_cache *c = (nam_block_cache *)1;
  nam_block_cache_platform cfg[1] = {{&fake_ops, &plats[0], 100}};
  assert_int_equal(nam_block_cache_create(cfg, 0, &c), EMBER_EINVAL);
  assert_null(c);
  assert_int_equal(nam_block_cache_create(NULL, 1, &c), EMBER_EINVAL);
  assert_int_equal(nam_block_cache_create(cfg, NAM_BLOCK_CACHE_MAX_PLATFORMS + 1,
                                          &c), EMBER_EINVAL);
  static const nam_block_cache_ops half = {.alloc = fake_alloc,
                                           .free = fake_free};
  cfg[0].ops = &half;
  assert_int_equal(nam_block_cache_create(cfg, 1, &c), EMBER_EINVAL);
  nam_block_cache_destroy(NULL);

  c = make_cache(100, 100);
  unsigned char x = 1;
  assert_int_equal(nam_block_cache_put(c, 1, 1, 0x8, &x, 1, NULL, NULL),
                   EMBER_EINVAL);
  assert_int_equal(nam_block_cache_put(c, 1, 1, 0, NULL, 1, NULL, NULL),
                   EMBER_EINVAL);
  nam_block_pin pin;
  assert_int_equal(nam_block_cache_put(c, 1, 1, 0, &x, 1, NULL, NULL), 0);
  assert_int_equal(nam_block_cache_fetch(c, 1, 1, 2, &pin), EMBER_EINVAL);
  assert_int_equal(nam_block_cache_set_budget(c, 2, 1), EMBER_EINVAL);
  memset(&pin, 0, sizeof pin);
  assert_int_equal(nam_block_cache_release(c, &pin), EMBER_EINVAL);
  teardown_check(c);
}

/* Two apps use the same ids; neither can reach the other's block. */
static void test_isolation(void **state) {
  (void)state;
  host_released = 0;
  nam_block_cache *c = make_cache(1000, 1000);
  assert_int_equal(put_tagged(c, 1, 7, EMBER_BLOCK_CACHE, 10, 'A'), 0);
  assert_int_equal(put_tagged(c, 2, 7, EMBER_BLOCK_CACHE, 10, 'B'), 0);
  assert_int_equal(put_tagged(c, 1, 8, 0, 10, 'C'), 0);
  /* duplicate id within one app */
  assert_int_equal(put_tagged(c, 1, 7, 0, 10, 'D'), EMBER_EINVAL);

  nam_block_pin pa, pb;
  fetch_ok(c, 1, 7, 0, &pa);
  fetch_ok(c, 2, 7, 0, &pb);
  assert_int_equal(pa.hit, 0);
  assert_int_equal(pb.hit, 0); /* app 2's id 7 is another block */
  assert_int_equal(((const unsigned char *)pa.data)[0], 'A');
  assert_int_equal(((const unsigned char *)pb.data)[0], 'B');
  assert_int_equal(((const fake_buf *)pb.dev_handle)->bytes[0], 'B');
  assert_ptr_not_equal(pa.dev_handle, pb.dev_handle);

  /* app 2 names app 1's id 8: not found, and nothing leaks into pin */
  nam_block_pin px;
  memset(&px, 0x5a, sizeof px);
  assert_int_equal(nam_block_cache_fetch(c, 2, 8, 0, &px), EMBER_ENOTFOUND);
  assert_null(px.data);
  assert_null(px.dev_handle);
  assert_int_equal(nam_block_cache_drop(c, 2, 8), EMBER_ENOTFOUND);

  /* app 2 disconnecting takes only its own blocks */
  assert_int_equal(nam_block_cache_release(c, &pb), 0);
  assert_int_equal(nam_block_cache_drop_app(c, 2), 1);
  assert_int_equal(host_released, 1);
  assert_int_equal(nam_block_cache_fetch(c, 2, 7, 0, &px), EMBER_ENOTFOUND);
  assert_int_equal(touch(c, 1, 8, 0), 0);
  assert_int_equal(nam_block_cache_release(c, &pa), 0);
  assert_int_equal(touch(c, 1, 7, 0), 1);

  nam_block_cache_stats s = stats_of(c);
  assert_int_equal(s.blocks, 2);
  assert_int_equal(s.bytes_host, 20);
  teardown_check(c);
  assert_int_equal(host_released, 3);
}

static void test_hit_miss(void **state) {
  (void)state;
  nam_block_cache *c = make_cache(1000, 1000);
  assert_int_equal(put_tagged(c, 1, 1, EMBER_BLOCK_CACHE, 100, 'x'), 0);
  assert_int_equal(touch(c, 1, 1, 0), 0);
  assert_int_equal(touch(c, 1, 1, 0), 1);
  assert_int_equal(touch(c, 1, 1, 0), 1);
  assert_int_equal(touch(c, 1, 1, 1), 0); /* the other platform: a miss */

  /* two tasks at once on one platform: one copy */
  nam_block_pin a, b;
  assert_int_equal(fetch_ok(c, 1, 1, 1, &a), 1);
  assert_int_equal(fetch_ok(c, 1, 1, 1, &b), 1);
  assert_ptr_equal(a.dev_handle, b.dev_handle);
  nam_block_cache_stats s = stats_of(c);
  assert_int_equal(s.platform[1].bytes_pinned, 100);
  assert_int_equal(nam_block_cache_release(c, &a), 0);
  assert_int_equal(nam_block_cache_release(c, &a), EMBER_EINVAL); /* twice */
  assert_int_equal(nam_block_cache_release(c, &b), 0);

  nam_block_cache_count_from(c, 1, 42);
  s = stats_of(c);
  assert_int_equal(s.n_platforms, 2);
  assert_int_equal(s.hits, 4);
  assert_int_equal(s.misses, 2);
  assert_int_equal(s.evictions, 0);
  assert_int_equal(s.platform[0].hits, 2);
  assert_int_equal(s.platform[0].misses, 1);
  assert_int_equal(s.platform[0].bytes_to, 100);
  assert_int_equal(s.platform[1].bytes_to, 100);
  assert_int_equal(s.platform[1].bytes_from, 42);
  assert_int_equal(s.platform[0].bytes_resident, 100);
  assert_int_equal(s.platform[1].bytes_pinned, 0);
  assert_int_equal(s.platform[0].budget, 1000);
  assert_int_equal(plats[0].uploads, 1);
  assert_int_equal(plats[1].uploads, 1);
  teardown_check(c);
}

/* Budget 300, blocks of 100: the least recently used unpinned one goes. */
static void test_lru_order(void **state) {
  (void)state;
  nam_block_cache *c = make_cache(300, NAM_BLOCK_CACHE_UNLIMITED);
  for (uint64_t id = 1; id <= 5; id++)
    assert_int_equal(put_tagged(c, 1, id, EMBER_BLOCK_CACHE, 100, 'a'), 0);
  touch(c, 1, 1, 0);
  touch(c, 1, 2, 0);
  touch(c, 1, 3, 0);             /* LRU order: 1 2 3 */
  assert_int_equal(touch(c, 1, 1, 0), 1); /* 2 3 1 */
  assert_int_equal(touch(c, 1, 4, 0), 0); /* evicts 2: 3 1 4 */
  nam_block_cache_stats s = stats_of(c);
  assert_int_equal(s.platform[0].evictions, 1);
  assert_int_equal(s.platform[0].bytes_resident, 300);
  assert_int_equal(plats[0].live, 3);
  assert_int_equal(touch(c, 1, 5, 0), 0); /* evicts 3: 1 4 5 */
  assert_int_equal(touch(c, 1, 1, 0), 1); /* 4 5 1 */
  assert_int_equal(touch(c, 1, 4, 0), 1); /* 5 1 4 */
  assert_int_equal(touch(c, 1, 2, 0), 0); /* evicts 5: 1 4 2 */
  assert_int_equal(touch(c, 1, 5, 0), 0); /* evicts 1: 4 2 5 */
  assert_int_equal(touch(c, 1, 4, 0), 1);
  assert_int_equal(touch(c, 1, 3, 0), 0); /* evicts 2 */
  assert_int_equal(touch(c, 1, 5, 0), 1);
  s = stats_of(c);
  assert_int_equal(s.evictions, 5);
  assert_int_equal(s.platform[0].blocks_resident, 3);
  assert_int_equal(plats[0].live, 3);

  /* shrinking the budget evicts in the same order: 4 3 5 -> 5 */
  nam_block_cache_set_budget(c, 0, 100);
  s = stats_of(c);
  assert_int_equal(s.platform[0].bytes_resident, 100);
  assert_int_equal(s.platform[0].budget, 100);
  assert_int_equal(touch(c, 1, 5, 0), 1);
  assert_int_equal(plats[0].live, 1);
  /* a block bigger than the whole budget */
  assert_int_equal(put_tagged(c, 1, 9, EMBER_BLOCK_CACHE, 101, 'b'), 0);
  nam_block_pin pin;
  assert_int_equal(nam_block_cache_fetch(c, 1, 9, 0, &pin), EMBER_ETOOBIG);
  assert_int_equal(touch(c, 1, 5, 0), 1); /* nothing was evicted for it */
  teardown_check(c);
}

/* Pinned copies survive pressure; EBUSY when every copy is pinned, and
 * then nothing is evicted. */
static void test_pins_and_ebusy(void **state) {
  (void)state;
  nam_block_cache *c = make_cache(300, 300);
  for (uint64_t id = 1; id <= 5; id++)
    assert_int_equal(put_tagged(c, 1, id, EMBER_BLOCK_CACHE, 100, 'p'), 0);
  nam_block_pin p1, p2, p3, p4;
  fetch_ok(c, 1, 1, 0, &p1);     /* oldest, but pinned */
  fetch_ok(c, 1, 2, 0, &p2);
  touch(c, 1, 3, 0);             /* the only unpinned one */
  fetch_ok(c, 1, 4, 0, &p4);     /* evicts 3, not 1 or 2 */
  nam_block_cache_stats s = stats_of(c);
  assert_int_equal(s.platform[0].evictions, 1);
  assert_int_equal(s.platform[0].bytes_pinned, 300);
  check_copy(&p1);
  check_copy(&p2);

  /* all pinned: EBUSY, counters and copies unchanged */
  assert_int_equal(nam_block_cache_fetch(c, 1, 5, 0, &p3), EMBER_EBUSY);
  assert_int_equal(nam_block_cache_fetch(c, 1, 3, 0, &p3), EMBER_EBUSY);
  nam_block_cache_stats s2 = stats_of(c);
  assert_int_equal(s2.platform[0].evictions, 1);
  assert_int_equal(s2.platform[0].misses, s.platform[0].misses);
  assert_int_equal(s2.platform[0].bytes_resident, 300);
  assert_int_equal(plats[0].live, 3);
  /* the other platform has room */
  assert_int_equal(touch(c, 1, 5, 1), 0);

  /* a release makes room: 1 goes (unpinned now), 2 and 4 stay */
  assert_int_equal(nam_block_cache_release(c, &p1), 0);
  fetch_ok(c, 1, 5, 0, &p3);
  check_copy(&p2);
  check_copy(&p4);
  assert_int_equal(nam_block_cache_release(c, &p2), 0);
  assert_int_equal(nam_block_cache_release(c, &p3), 0);
  assert_int_equal(nam_block_cache_release(c, &p4), 0);
  assert_int_equal(touch(c, 1, 1, 0), 0); /* 1 was evicted */
  s = stats_of(c);
  assert_int_equal(s.platform[0].bytes_pinned, 0);
  assert_int_equal(s.platform[0].bytes_resident, 300);
  teardown_check(c);
}

/* plain: gone after its task; CACHE: stays, evictable; BROADCAST: stays,
 * never evicted, counted against the budget, freed by drop_app. */
static void test_flags(void **state) {
  (void)state;
  host_released = 0;
  nam_block_cache *c = make_cache(300, 300);
  assert_int_equal(put_tagged(c, 1, 1, 0, 100, 'P'), 0);
  assert_int_equal(put_tagged(c, 1, 2, EMBER_BLOCK_CACHE, 100, 'C'), 0);
  assert_int_equal(put_tagged(c, 1, 3, EMBER_BLOCK_BROADCAST, 100, 'B'), 0);
  assert_int_equal(put_tagged(c, 1, 4,
                              EMBER_BLOCK_BROADCAST | EMBER_BLOCK_CACHE, 100,
                              'D'), 0);
  assert_int_equal(put_tagged(c, 1, 5, EMBER_BLOCK_CACHE, 100, 'E'), 0);

  /* plain: a copy while pinned, none after */
  nam_block_pin a, b;
  fetch_ok(c, 1, 1, 0, &a);
  assert_int_equal(fetch_ok(c, 1, 1, 0, &b), 1); /* shared while pinned */
  assert_int_equal(nam_block_cache_release(c, &a), 0);
  assert_int_equal(plats[0].live, 1);
  assert_int_equal(nam_block_cache_release(c, &b), 0);
  assert_int_equal(plats[0].live, 0);
  assert_int_equal(stats_of(c).platform[0].bytes_resident, 0);
  assert_int_equal(touch(c, 1, 1, 0), 0); /* uploaded again */
  assert_int_equal(stats_of(c).evictions, 0); /* not an eviction */

  /* cache and broadcast stay */
  assert_int_equal(touch(c, 1, 2, 0), 0);
  assert_int_equal(touch(c, 1, 3, 0), 0);
  assert_int_equal(touch(c, 1, 4, 0), 0);
  assert_int_equal(touch(c, 1, 2, 0), 1);
  assert_int_equal(touch(c, 1, 3, 0), 1);
  nam_block_cache_stats s = stats_of(c);
  assert_int_equal(s.platform[0].bytes_resident, 300);
  assert_int_equal(s.platform[0].bytes_broadcast, 200);

  /* pressure: the cached block goes, the broadcast ones never */
  assert_int_equal(touch(c, 1, 5, 0), 0);
  assert_int_equal(stats_of(c).evictions, 1);
  assert_int_equal(touch(c, 1, 3, 0), 1);
  assert_int_equal(touch(c, 1, 4, 0), 1);
  assert_int_equal(touch(c, 1, 2, 0), 0); /* evicts 5 */
  nam_block_pin p, q;
  assert_int_equal(fetch_ok(c, 1, 2, 0, &p), 1);
  /* broadcast 200 + pinned 100: nothing can make room */
  assert_int_equal(nam_block_cache_fetch(c, 1, 5, 0, &q), EMBER_EBUSY);
  assert_int_equal(nam_block_cache_release(c, &p), 0);
  /* a smaller budget never evicts broadcast copies either */
  nam_block_cache_set_budget(c, 0, 150);
  s = stats_of(c);
  assert_int_equal(s.platform[0].bytes_resident, 200);
  assert_int_equal(touch(c, 1, 3, 0), 1);
  assert_int_equal(nam_block_cache_fetch(c, 1, 1, 0, &q), EMBER_EBUSY);
  nam_block_cache_set_budget(c, 0, 300);

  /* drop of a broadcast block frees its copy at once */
  assert_int_equal(nam_block_cache_drop(c, 1, 4), 0);
  assert_int_equal(host_released, 1);
  assert_int_equal(stats_of(c).platform[0].bytes_broadcast, 100);
  /* disconnect frees the rest, broadcast included */
  assert_int_equal(nam_block_cache_drop_app(c, 1), 4);
  assert_int_equal(host_released, 5);
  s = stats_of(c);
  assert_int_equal(s.platform[0].bytes_resident, 0);
  assert_int_equal(s.platform[0].blocks_resident, 0);
  assert_int_equal(s.platform[0].bytes_broadcast, 0);
  assert_int_equal(s.blocks, 0);
  assert_int_equal(plats[0].live, 0);
  teardown_check(c);
}

/* Disconnect with a pinned block: everything else goes now, the pinned
 * block at its last release; its id is free for a new block at once. */
static void test_drop_app_pinned(void **state) {
  (void)state;
  host_released = 0;
  nam_block_cache *c = make_cache(1000, 1000);
  for (uint64_t id = 1; id <= 3; id++)
    assert_int_equal(put_tagged(c, 1, id, EMBER_BLOCK_CACHE, 10, 'q'), 0);
  assert_int_equal(put_tagged(c, 2, 1, EMBER_BLOCK_CACHE, 10, 'r'), 0);
  nam_block_pin p0, p1;
  fetch_ok(c, 1, 2, 0, &p0);
  fetch_ok(c, 1, 2, 1, &p1);
  touch(c, 1, 1, 0);
  touch(c, 1, 3, 1);
  touch(c, 2, 1, 0);

  assert_int_equal(nam_block_cache_drop_app(c, 1), 3);
  assert_int_equal(host_released, 2);
  nam_block_cache_stats s = stats_of(c);
  assert_int_equal(s.blocks, 2); /* app 1's pinned one + app 2's */
  assert_int_equal(s.platform[0].bytes_resident, 20);
  assert_int_equal(s.platform[1].bytes_resident, 10);
  nam_block_pin x;
  assert_int_equal(nam_block_cache_fetch(c, 1, 2, 0, &x), EMBER_ENOTFOUND);
  assert_int_equal(nam_block_cache_drop(c, 1, 2), EMBER_ENOTFOUND);
  assert_int_equal(nam_block_cache_drop_app(c, 1), 0);

  /* a reconnected app 1 reuses id 2 while the old bytes are pinned */
  assert_int_equal(put_tagged(c, 1, 2, 0, 5, 's'), 0);
  assert_int_equal(touch(c, 1, 2, 0), 0);
  check_copy(&p0);
  assert_int_equal(((const unsigned char *)p0.data)[0], 'q');

  assert_int_equal(nam_block_cache_release(c, &p0), 0);
  assert_int_equal(host_released, 2); /* still pinned on platform 1 */
  assert_int_equal(stats_of(c).platform[0].bytes_resident, 10);
  assert_int_equal(nam_block_cache_release(c, &p1), 0);
  assert_int_equal(host_released, 3);
  s = stats_of(c);
  assert_int_equal(s.blocks, 2);
  assert_int_equal(s.platform[1].bytes_resident, 0);
  assert_int_equal(plats[1].live, 0);

  /* drop of one pinned block */
  fetch_ok(c, 2, 1, 1, &p1);
  assert_int_equal(nam_block_cache_drop(c, 2, 1), 0);
  assert_int_equal(plats[0].live, 0); /* its unpinned copy went at once */
  assert_int_equal(host_released, 3);
  assert_int_equal(nam_block_cache_release(c, &p1), 0);
  assert_int_equal(host_released, 4);
  assert_int_equal(plats[1].live, 0);
  teardown_check(c);
  assert_int_equal(host_released, 5);
}

/* Device allocation and upload failures leave nothing behind. */
static void test_device_failure(void **state) {
  (void)state;
  nam_block_cache *c = make_cache(200, 200);
  assert_int_equal(put_tagged(c, 1, 1, EMBER_BLOCK_CACHE, 100, 'f'), 0);
  assert_int_equal(put_tagged(c, 1, 2, EMBER_BLOCK_CACHE, 100, 'g'), 0);
  nam_block_pin p;
  plats[0].fail_allocs = 1;
  assert_int_equal(nam_block_cache_fetch(c, 1, 1, 0, &p), EMBER_ENOMEM);
  assert_null(p.entry_);
  plats[0].fail_uploads = 1;
  assert_int_equal(nam_block_cache_fetch(c, 1, 1, 0, &p), EMBER_EIO);
  nam_block_cache_stats s = stats_of(c);
  assert_int_equal(s.platform[0].bytes_resident, 0);
  assert_int_equal(s.platform[0].bytes_pinned, 0);
  assert_int_equal(s.platform[0].bytes_to, 0);
  assert_int_equal(plats[0].live, 0);
  assert_int_equal(touch(c, 1, 1, 0), 0);
  assert_int_equal(touch(c, 1, 2, 0), 0);
  assert_int_equal(touch(c, 1, 1, 0), 1);
  /* a failed upload holds nothing: a drop right after frees the block */
  plats[1].fail_uploads = 1;
  assert_int_equal(nam_block_cache_fetch(c, 1, 2, 1, &p), EMBER_EIO);
  assert_int_equal(nam_block_cache_drop(c, 1, 2), 0);
  assert_int_equal(stats_of(c).blocks, 1);
  teardown_check(c);
}

/* An upload runs without the lock: the loop thread can put, fetch on the
 * other platform and drop the block meanwhile; the fetch under way still
 * completes and the block is freed at its release. */
typedef struct bg_fetch {
  nam_block_cache *c;
  nam_block_pin pin;
  int rc;
} bg_fetch;

static void *bg_fetch_main(void *arg) {
  bg_fetch *f = arg;
  f->rc = nam_block_cache_fetch(f->c, 1, 1, 0, &f->pin);
  return NULL;
}

static void test_upload_unlocked(void **state) {
  (void)state;
  host_released = 0;
  gate_open = gate_entered = 0;
  nam_block_cache *c = make_cache(1000, 1000);
  plats[0].gated = 1;
  assert_int_equal(put_tagged(c, 1, 1, EMBER_BLOCK_CACHE, 100, 'u'), 0);
  bg_fetch f = {c, {0}, 1};
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, bg_fetch_main, &f), 0);
  wait_gate_entered();
  /* the upload is in progress and holds its bytes in the budget */
  nam_block_cache_stats s = stats_of(c);
  assert_int_equal(s.platform[0].bytes_resident, 100);
  assert_int_equal(s.platform[0].bytes_pinned, 100);
  assert_int_equal(put_tagged(c, 1, 2, 0, 10, 'v'), 0);
  assert_int_equal(touch(c, 1, 1, 1), 0);
  assert_int_equal(nam_block_cache_drop(c, 1, 1), 0);
  assert_int_equal(host_released, 0);
  open_gate();
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(f.rc, 0);
  check_copy(&f.pin);
  assert_int_equal(f.pin.hit, 0);
  nam_block_pin x;
  assert_int_equal(nam_block_cache_fetch(c, 1, 1, 0, &x), EMBER_ENOTFOUND);
  assert_int_equal(plats[1].live, 0); /* its unpinned copy went at drop */
  assert_int_equal(nam_block_cache_release(c, &f.pin), 0);
  assert_int_equal(host_released, 1);
  assert_int_equal(plats[0].live, 0);
  assert_int_equal(stats_of(c).platform[0].bytes_resident, 0);
  teardown_check(c);
}

/* 1,000 app lifetimes: nothing grows. */
static void test_no_growth(void **state) {
  (void)state;
  host_released = 0;
  nam_block_cache *c = make_cache(4096, 4096);
  long base = 0;
  for (int i = 0; i < 1000; i++) {
    uint64_t app = 1000 + (uint64_t)i;
    static const unsigned flags[4] = {0, EMBER_BLOCK_CACHE,
                                      EMBER_BLOCK_BROADCAST, EMBER_BLOCK_CACHE};
    for (uint64_t id = 0; id < 20; id++)
      assert_int_equal(put_tagged(c, app, id, flags[id % 4], 64 + id, 'n'),
                       0);
    nam_block_pin pins[4];
    for (uint64_t id = 0; id < 20; id++) touch(c, app, id, id % 2);
    for (unsigned k = 0; k < 4; k++) fetch_ok(c, app, k, 0, &pins[k]);
    assert_int_equal(touch(c, app, 1, 0), 1);
    assert_int_equal(nam_block_cache_drop(c, app, 3), 0);
    assert_int_equal(nam_block_cache_drop_app(c, app), 19);
    for (unsigned k = 0; k < 4; k++)
      assert_int_equal(nam_block_cache_release(c, &pins[k]), 0);
    nam_block_cache_stats s = stats_of(c);
    assert_int_equal(s.blocks, 0);
    assert_int_equal(s.bytes_host, 0);
    for (unsigned pl = 0; pl < 2; pl++) {
      assert_int_equal(s.platform[pl].bytes_resident, 0);
      assert_int_equal(s.platform[pl].blocks_resident, 0);
      assert_int_equal(s.platform[pl].bytes_pinned, 0);
      assert_int_equal(plats[pl].live, 0);
    }
    if (i == 0) base = alloc_live;
    else assert_int_equal(alloc_live, base);
  }
  assert_int_equal(host_released, 20000);
  teardown_check(c);
}

/* Fail the Nth allocation for every N a scenario makes: each call fails
 * cleanly (ENOMEM, nothing kept) and the cache stays usable and leak-free. */
static void test_alloc_failure(void **state) {
  (void)state;
  int completed = 0;
  for (int n = 1; !completed; n++) {
    assert_true(n < 1000);
    host_released = 0;
    long before = alloc_live;
    int puts_ok = 0, put_fails = 0;
    memset(plats, 0, sizeof plats);
    nam_block_cache_platform cfg[2] = {
        {&fake_ops, &plats[0], 500},
        {&fake_ops, &plats[1], 500},
    };
    nam_block_cache *c = NULL;
    alloc_count = 0;
    alloc_fail_at = n;
    int rc = nam_block_cache_create(cfg, 2, &c);
    if (rc != 0) {
      alloc_fail_at = 0;
      assert_int_equal(rc, EMBER_ENOMEM);
      assert_null(c);
      assert_int_equal(alloc_live, before);
      continue;
    }
    /* 40 puts: the table grows twice */
    for (uint64_t id = 0; id < 40; id++) {
      rc = put_tagged(c, 7, id, EMBER_BLOCK_CACHE, 50, (unsigned char)id);
      if (rc == 0) puts_ok++;
      else {
        assert_int_equal(rc, EMBER_ENOMEM);
        put_fails++;
      }
    }
    int failed_here = alloc_count >= n;
    alloc_fail_at = 0;
    nam_block_cache_stats s = stats_of(c);
    assert_int_equal(s.blocks, (uint64_t)puts_ok);
    assert_int_equal(host_released, 0);
    /* every block put is there and works; the others are not */
    for (uint64_t id = 0; id < 40; id++) {
      nam_block_pin p;
      rc = nam_block_cache_fetch(c, 7, id, id % 2, &p);
      if (rc == EMBER_ENOTFOUND) {
        assert_int_equal(put_tagged(c, 7, id, 0, 50, (unsigned char)id), 0);
        continue;
      }
      assert_int_equal(rc, 0);
      check_copy(&p);
      assert_int_equal(((const unsigned char *)p.data)[0], id);
      assert_int_equal(nam_block_cache_release(c, &p), 0);
    }
    assert_int_equal(nam_block_cache_drop_app(c, 7), 40);
    assert_int_equal(host_released, 40);
    nam_block_cache_destroy(c);
    assert_int_equal(alloc_live, before);
    assert_int_equal(plats[0].live, 0);
    assert_int_equal(plats[1].live, 0);
    completed = !failed_here && put_fails == 0;
    if (completed) print_message("allocation failure: %d points\n", n - 1);
  }
}

/* ------------------------------------------------------------------------ */
/* Threads: workers fetch and release on two platforms with small budgets
 * while the loop thread puts and drops blocks of another app id range. */

#define T_BLOCKS 8
#define T_ITERS 3000
#define T_WORKERS 4

typedef struct tctx {
  nam_block_cache *c;
  unsigned platform;
  unsigned seed;
  long ok, busy, notfound;
} tctx;

static void *worker(void *arg) {
  tctx *t = arg;
  for (int i = 0; i < T_ITERS; i++) {
    t->seed = t->seed * 1103515245u + 12345u;
    unsigned r = t->seed >> 16;
    uint64_t id = r % (T_BLOCKS + 2); /* 8, 9: the churned ones */
    nam_block_pin pin;
    int rc = nam_block_cache_fetch(t->c, 1, id, t->platform, &pin);
    if (rc == EMBER_EBUSY) {
      t->busy++;
      continue;
    }
    if (rc == EMBER_ENOTFOUND) {
      t->notfound++;
      continue;
    }
    if (rc != 0) return (void *)1;
    const fake_buf *b = pin.dev_handle;
    if (b->size != pin.size || memcmp(b->bytes, pin.data, pin.size) != 0)
      return (void *)2;
    if (nam_block_cache_release(t->c, &pin) != 0) return (void *)3;
    t->ok++;
  }
  return NULL;
}

static void test_threads(void **state) {
  (void)state;
  host_released = 0;
  /* budgets fit 3 of the 8 blocks: constant eviction, some EBUSY */
  nam_block_cache *c = make_cache(3 * 256, 3 * 256);
  plats[0].slow = plats[1].slow = 20;
  for (uint64_t id = 0; id < T_BLOCKS; id++)
    assert_int_equal(put_tagged(c, 1, id,
                                id % 3 == 0 ? 0 : EMBER_BLOCK_CACHE, 256,
                                (unsigned char)('a' + id)), 0);
  pthread_t th[T_WORKERS];
  tctx ctx[T_WORKERS];
  for (int i = 0; i < T_WORKERS; i++) {
    ctx[i] = (tctx){c, (unsigned)i % 2, 17u * (unsigned)i + 1, 0, 0, 0};
    assert_int_equal(pthread_create(&th[i], NULL, worker, &ctx[i]), 0);
  }
  /* the loop thread: blocks 8 and 9 come and go */
  for (int i = 0; i < 2000; i++) {
    uint64_t id = T_BLOCKS + (uint64_t)(i % 2);
    int rc = put_tagged(c, 1, id, i % 4 < 2 ? EMBER_BLOCK_CACHE : 0, 128,
                        (unsigned char)i);
    assert_int_equal(rc, 0);
    nam_block_cache_stats s = stats_of(c);
    for (unsigned pl = 0; pl < 2; pl++)
      assert_true(s.platform[pl].bytes_resident <= s.platform[pl].budget);
    assert_int_equal(nam_block_cache_drop(c, 1, id), 0);
  }
  long ok = 0;
  for (int i = 0; i < T_WORKERS; i++) {
    void *ret;
    assert_int_equal(pthread_join(th[i], &ret), 0);
    assert_null(ret);
    ok += ctx[i].ok;
  }
  assert_true(ok > 0);
  nam_block_cache_stats s = stats_of(c);
  print_message("threads: %ld fetches, hits %llu misses %llu evictions %llu\n",
                ok, (unsigned long long)s.hits, (unsigned long long)s.misses,
                (unsigned long long)s.evictions);
  assert_int_equal(s.blocks, T_BLOCKS);
  for (unsigned pl = 0; pl < 2; pl++) {
    assert_int_equal(s.platform[pl].bytes_pinned, 0);
    assert_true(s.platform[pl].bytes_resident <= 3 * 256);
    assert_int_equal(plats[pl].live, (long)s.platform[pl].blocks_resident);
  }
  assert_int_equal(host_released, 2000);
  assert_int_equal(nam_block_cache_drop_app(c, 1), T_BLOCKS);
  teardown_check(c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_create_args),
      cmocka_unit_test(test_isolation),
      cmocka_unit_test(test_hit_miss),
      cmocka_unit_test(test_lru_order),
      cmocka_unit_test(test_pins_and_ebusy),
      cmocka_unit_test(test_flags),
      cmocka_unit_test(test_drop_app_pinned),
      cmocka_unit_test(test_device_failure),
      cmocka_unit_test(test_upload_unlocked),
      cmocka_unit_test(test_no_growth),
      cmocka_unit_test(test_alloc_failure),
      cmocka_unit_test(test_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
