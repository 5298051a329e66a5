/*
 * block_cache.h - the NAM's block cache (Blaze's Block Manager): a reuse
 * table from (app, block id) to the block's host bytes and its copies in
 * each platform's memory, under a byte budget per platform.
 *
 * The contract, one line per function:
 *   put      - the cache takes an app's host bytes under a new id.
 *   fetch    - pins the block on a platform, uploading a copy if missing.
 *   release  - unpins; exactly one release per successful fetch.
 *   drop     - the app releases its id; freed now, or at the last release.
 *   drop_app - the app disconnects; all its blocks go as drop does.
 *   budget   - each platform's resident bytes stay within its budget;
 *              unpinned cached copies are evicted least recently used first
 *              (the policy lives in block_cache_lru.c); a pinned copy never.
 *
 * Flags (the wire's EMBER_BLOCK_* values, ember.h):
 *   0                      a copy lives while pinned: freed at its platform's
 *                          last release (nothing to evict, no eviction
 *                          counted).
 *   EMBER_BLOCK_CACHE      a copy stays after its task, until evicted under
 *                          budget pressure or the block is dropped.
 *   EMBER_BLOCK_BROADCAST  a copy stays for the app's lifetime: never
 *                          evicted; freed by drop or drop_app only. Its
 *                          bytes count against the budget like any other
 *                          (so broadcast blocks can make fetches EBUSY until
 *                          the app goes). Wins over EMBER_BLOCK_CACHE.
 *
 * Namespaces: block ids belong to their app. Naming another app's id, or a
 * dropped one, is EMBER_ENOTFOUND; one app can never read, pin, drop or
 * evict another's block (eviction is budget-driven, not named).
 *
 * Threads: every function may be called from any thread (one mutex). Device
 * uploads (ops->alloc + ops->upload) run without the mutex, so workers of
 * different platforms transfer in parallel; a second fetch of a block that
 * is being uploaded to the same platform waits for that upload.
 * ops->free and the host release callback may run with the mutex held:
 * they must be quick and must not call back into the cache.
 *
 * The library never logs.
 */
#ifndef EMBER_NAM_BLOCK_CACHE_H
#define EMBER_NAM_BLOCK_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "ember/ember.h" /* EMBER_BLOCK_CACHE, EMBER_BLOCK_BROADCAST */

#define NAM_BLOCK_CACHE_MAX_PLATFORMS 16
#define NAM_BLOCK_CACHE_UNLIMITED UINT64_MAX /* a budget without a limit */

typedef struct nam_block_cache nam_block_cache;
typedef struct nam_cache_entry nam_cache_entry; /* private */

/* How a platform back end keeps device copies: a const table, one per
 * platform kind. The functions may be called from several threads at once
 * (for different handles); alloc and upload never with the cache's mutex
 * held. They return 0 or a negative EMBER_E* code. */
typedef struct nam_block_cache_ops {
  /* room for size bytes in the platform's memory: *handle on success */
  int (*alloc)(void *platform_ctx, size_t size, void **handle);
  /* copy size host bytes into the handle's memory */
  int (*upload)(void *handle, const void *data, size_t size);
  /* give the memory back (never fails) */
  void (*free)(void *handle);
} nam_block_cache_ops;

/* One platform as the cache sees it. */
typedef struct nam_block_cache_platform {
  const nam_block_cache_ops *ops;
  void *ctx;           /* passed to ops->alloc */
  uint64_t budget;     /* bytes of copies resident at most, or UNLIMITED */
} nam_block_cache_platform;

/* What a successful fetch hands out; give it back with release. The host
 * bytes and the device copy stay valid until then. */
typedef struct nam_block_pin {
  void *dev_handle;    /* the platform's copy (from ops->alloc) */
  const void *data;    /* the host bytes */
  size_t size;
  int hit;             /* 1: the copy was already there (no upload) */
  nam_cache_entry *entry_; /* private */
  unsigned platform_;      /* private */
} nam_block_pin;

/* Called once when the cache frees a block's host bytes. */
typedef void (*nam_block_release_fn)(void *user, const void *data,
                                     size_t size);

/* Counters since create; the resident figures are snapshots. */
typedef struct nam_block_cache_platform_stats {
  uint64_t hits, misses, evictions;
  uint64_t bytes_to;       /* uploaded to the platform */
  uint64_t bytes_from;     /* read back, as reported with count_from */
  uint64_t bytes_resident; /* copies held (pinned, cached, broadcast, and
                              uploads under way) */
  uint64_t bytes_pinned;   /* of which pinned (or being uploaded) */
  uint64_t bytes_broadcast;/* of which broadcast blocks */
  uint64_t blocks_resident;
  uint64_t budget;
} nam_block_cache_platform_stats;

typedef struct nam_block_cache_stats {
  uint64_t hits, misses, evictions;       /* sums over the platforms */
  uint64_t blocks, bytes_host;            /* live blocks and their bytes */
  unsigned n_platforms;
  nam_block_cache_platform_stats platform[NAM_BLOCK_CACHE_MAX_PLATFORMS];
} nam_block_cache_stats;

/* nam_block_cache_create - a cache for n_platforms platforms (1..MAX),
 * indexed 0..n-1 in the order given; the array is copied, the ops tables
 * and contexts must outlive the cache. Returns 0 and *out, EMBER_EINVAL,
 * EMBER_ENOMEM. */
int nam_block_cache_create(const nam_block_cache_platform *platforms,
                           unsigned n_platforms, nam_block_cache **out);

/* nam_block_cache_destroy - free every block (device copies and host
 * bytes). No pins may be outstanding and no call in flight. NULL: no-op. */
void nam_block_cache_destroy(nam_block_cache *cache);

/* nam_block_cache_put - take app's host bytes as block id. On success the
 * cache owns them and calls release(user, data, size) exactly once when the
 * block is freed (release may be NULL); on error nothing is kept and
 * release is not called. Returns 0, EMBER_EINVAL (id already used by this
 * app, unknown flag bits, data NULL with size > 0), EMBER_ENOMEM. */
int nam_block_cache_put(nam_block_cache *cache, uint64_t app, uint64_t id,
                        unsigned flags, const void *data, size_t size,
                        nam_block_release_fn release, void *user);

/* nam_block_cache_fetch - pin app's block id on platform, uploading a copy
 * if the platform has none (a miss: size bytes counted to the platform),
 * evicting unpinned cached copies in LRU order to stay within the budget.
 * Fills *pin. Returns 0, EMBER_ENOTFOUND (no such id for this app, or
 * dropped), EMBER_EINVAL (platform out of range), EMBER_ETOOBIG (bigger
 * than the platform's whole budget: try another platform), EMBER_EBUSY (the
 * budget cannot be met even by evicting every unpinned copy: retry after a
 * release, or use another platform), or the error of ops->alloc/upload
 * (nothing held then). */
int nam_block_cache_fetch(nam_block_cache *cache, uint64_t app, uint64_t id,
                          unsigned platform, nam_block_pin *pin);

/* nam_block_cache_release - unpin what fetch pinned. A plain block's copy
 * is freed at its platform's last release; a dropped block is freed at its
 * last release overall. The pin is cleared. Returns 0, or EMBER_EINVAL for
 * a pin that is not held (released twice, never fetched). */
int nam_block_cache_release(nam_block_cache *cache, nam_block_pin *pin);

/* nam_block_cache_drop - app releases its id: the id is free for reuse at
 * once, the block's unpinned copies and host bytes are freed now, pinned
 * ones at their last release. An upload already under way still completes
 * and its fetch gets the pin; a fetch waiting for it gets EMBER_ENOTFOUND.
 * Returns 0 or EMBER_ENOTFOUND. */
int nam_block_cache_drop(nam_block_cache *cache, uint64_t app, uint64_t id);

/* nam_block_cache_drop_app - app disconnected: drop each of its blocks
 * (broadcast ones included). Returns how many were dropped. */
size_t nam_block_cache_drop_app(nam_block_cache *cache, uint64_t app);

/* nam_block_cache_set_budget - change a platform's budget: unpinned cached
 * copies are evicted (LRU) down to it now; if pinned or broadcast copies
 * still exceed it, more are evicted as pins are released and fetches fail
 * with EBUSY meanwhile. Returns 0 or EMBER_EINVAL. */
int nam_block_cache_set_budget(nam_block_cache *cache, unsigned platform,
                               uint64_t budget);

/* nam_block_cache_count_from - record bytes read back from a platform
 * (task outputs), so that one stats struct tells both directions. */
void nam_block_cache_count_from(nam_block_cache *cache, unsigned platform,
                                uint64_t bytes);

/* nam_block_cache_stats - a consistent snapshot of the counters. */
void nam_block_cache_get_stats(nam_block_cache *cache,
                               nam_block_cache_stats *out);

#endif
