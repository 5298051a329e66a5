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
 * Kinds of block (accel.h has the roles):
 *   in     put with host bytes; immutable. Device copies are caches.
 *   out    declared by a task (declare_output), written on the platform
 *          that runs it (fetch_output) and readable once that task
 *          succeeded (release_output); immutable from then on. Its first
 *          copy is its only one until it is read back (read, or a fetch on
 *          another platform, which brings the bytes through the host).
 *   state  put with EMBER_BLOCK_STATE and its first bytes; lives on one
 *          platform (its home) once a task used it, updated in place by
 *          one task at a time (claim, fetch_state, release_state; tasks
 *          on a device pipeline may hold it together, run in their order
 *          there). The host
 *          bytes are its last synced version (sync); restore goes back to
 *          them. A state whose task failed, or whose platform was lost, is
 *          lost: fetches and reads give EMBER_ESTATE until restore. Where
 *          the platform offers ops->copy, a sync also keeps a snapshot
 *          on the device, and restore copies it back there without the
 *          bytes crossing to the host again (a rollback after a failed
 *          task, or the app's own); a platform that is lost takes its
 *          snapshots with it, and restore then uses the host bytes.
 * Copies of out and state blocks are never evicted (they may be the only
 * ones); they count against the budget like broadcast copies.
 *
 * Flags (the wire's EMBER_BLOCK_* values, ember_block_flags.h):
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

#include "ember/ember_block_flags.h"

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
  /* Copy the handle's size bytes into dst, after every upload and kernel
   * queued on it before; blocks. NULL: nothing is read back from this
   * platform (it cannot hold out or state blocks). */
  int (*read)(void *handle, void *dst, size_t size);
  /* A copy that reads size host bytes in place - no copy on a device that
   * shares host memory; the cache keeps the bytes valid and unchanged
   * while the handle lives, and uses it only for read-only blocks.
   * NULL: alloc + upload. */
  int (*wrap)(void *platform_ctx, const void *data, size_t size,
              void **handle);
  /* The host address of a copy kept in host memory (cpu, fpga-emu), which
   * run_cpu may write; NULL for device memory (or NULL itself). */
  void *(*host_ptr)(void *handle);
  /* Copy size bytes from one copy to another on the same platform, after
   * what was queued on src, without crossing to the host; blocks. NULL:
   * not offered (state snapshots then live on the host only). */
  int (*copy)(void *dst, void *src, size_t size);
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
  const void *data;    /* the host bytes (NULL: none, e.g. an out block) */
  void *host;          /* ops->host_ptr of the copy, or NULL */
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

/* nam_block_cache_put - take app's host bytes as block id (a state block
 * with EMBER_BLOCK_STATE: the bytes are its first version). On success the
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

/* Told, after nam_block_cache_drop_app dropped app's blocks (outside the
 * cache's mutex, on drop_app's thread), that app has left: the engine
 * passes it on to the accelerators (acc_descriptor.app_gone). */
typedef void (*nam_app_gone_fn)(void *user, uint64_t app);

/* nam_block_cache_on_app_gone - fn (NULL: none) is called with user after
 * each drop_app from now on. */
void nam_block_cache_on_app_gone(nam_block_cache *cache, nam_app_gone_fn fn,
                                 void *user);

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

/* ---- holding a block for a task ------------------------------------------
 * A task resolves its block ids once, when it is submitted: a hold keeps
 * the entry (and its bytes) alive even if the app drops the id meanwhile,
 * so the task runs on what it was given. One unhold per hold. */
typedef nam_cache_entry nam_block_hold; /* an entry, opaque */

enum nam_block_kind { NAM_BLOCK_IN, NAM_BLOCK_OUT, NAM_BLOCK_STATE };

typedef struct nam_block_info {
  int kind;            /* enum nam_block_kind */
  size_t size;
  const void *data;    /* host bytes, or NULL when only a device has them */
  int pending;         /* out: its task has not written it yet */
  int lost;            /* out, state: EMBER_ESTATE until restored */
  int home;            /* state/out: platform of the current copy, -1 none */
  uint64_t version;    /* state: successful tasks that updated it */
  uint64_t synced;     /* state: the version the host bytes hold */
} nam_block_info;

/* nam_block_cache_hold - hold app's block id: 0 and *ref (fills *info when
 * not NULL), or EMBER_ENOTFOUND. */
int nam_block_cache_hold(nam_block_cache *cache, uint64_t app, uint64_t id,
                         nam_block_hold **ref, nam_block_info *info);
void nam_block_cache_unhold(nam_block_cache *cache, nam_block_hold *ref);
/* nam_block_cache_hold_state - hold as a task's state: as hold, and a
 * state block counts the task until unhold_state (restore is EMBER_EBUSY
 * while any task that names the block is queued or running). */
int nam_block_cache_hold_state(nam_block_cache *cache, uint64_t app,
                               uint64_t id, nam_block_hold **ref,
                               nam_block_info *info);
void nam_block_cache_unhold_state(nam_block_cache *cache, nam_block_hold *ref);
/* nam_block_cache_info - a snapshot of a held block. */
void nam_block_cache_ref_info(nam_block_cache *cache, const nam_block_hold *ref,
                              nam_block_info *info);

/* nam_block_cache_fetch_ref - fetch for a held in or out block (as fetch;
 * a dropped id does not matter). An out block still pending is EMBER_EBUSY,
 * a lost one EMBER_ESTATE; one without host bytes is read back from the
 * platform that has it first (kept as its host bytes). */
int nam_block_cache_fetch_ref(nam_block_cache *cache, nam_block_hold *ref,
                              unsigned platform, nam_block_pin *pin);

/* ---- out blocks ---------------------------------------------------------- */

/* nam_block_cache_declare_output - app's id names the pending output of a
 * task, size bytes: held for the task (*ref). EMBER_EINVAL: the id is taken. */
int nam_block_cache_declare_output(nam_block_cache *cache, uint64_t app,
                                   uint64_t id, size_t size,
                                   nam_block_hold **ref);
/* nam_block_cache_fetch_output - room for the out block on platform (not
 * written: the task writes it), pinned. EBUSY/ETOOBIG as fetch. */
int nam_block_cache_fetch_output(nam_block_cache *cache, nam_block_hold *ref,
                                 unsigned platform, nam_block_pin *pin);
/* nam_block_cache_release_output - unpin; written: the task succeeded and
 * the block is ready (it lives on that platform), else the copy goes and
 * the block stays pending (a retry writes it elsewhere). */
int nam_block_cache_release_output(nam_block_cache *cache, nam_block_pin *pin,
                                   int written);
/* nam_block_cache_fail_output - its task failed for good: the block is
 * lost (EMBER_ESTATE) until the app drops it. */
void nam_block_cache_fail_output(nam_block_cache *cache, nam_block_hold *ref);

/* ---- state blocks -------------------------------------------------------- */

/* nam_block_cache_claim_state - reserve a held state block for one task
 * that will run on platform: 0, EMBER_EBUSY (another task holds it),
 * EMBER_ENOPLATFORM (it lives on another platform), EMBER_ESTATE (lost),
 * EMBER_EINVAL (not a state block). in_order: platform runs its tasks one
 * after another in dispatch order (a device pipeline), so a task may
 * claim a state that tasks dispatched there before it hold, once the
 * state lives there: it runs after them (the follower checks at execute
 * that they did not lose it, nam_block_cache_state_lost). */
int nam_block_cache_claim_state(nam_block_cache *cache, nam_block_hold *ref,
                                unsigned platform, int in_order);
void nam_block_cache_unclaim_state(nam_block_cache *cache, nam_block_hold *ref);
/* nam_block_cache_state_lost - whether a state block is lost (EMBER_ESTATE
 * until restored). nam_block_cache_lose_state marks it so at once: its task
 * failed while others that follow it on the pipeline hold it. */
int nam_block_cache_state_lost(nam_block_cache *cache, nam_block_hold *ref);
void nam_block_cache_lose_state(nam_block_cache *cache, nam_block_hold *ref);
/* nam_block_cache_state_home - the platform a state block lives on (where
 * its tasks must run), -1 while it lives nowhere yet. */
int nam_block_cache_state_home(nam_block_cache *cache, nam_block_hold *ref);
/* nam_block_cache_fetch_state - pin the claimed state's copy on platform
 * for writing; the first fetch anywhere uploads its host bytes there and
 * makes that platform its home. EMBER_ESTATE when lost. */
int nam_block_cache_fetch_state(nam_block_cache *cache, nam_block_hold *ref,
                                unsigned platform, nam_block_pin *pin);
/* How a task left the state it had pinned. */
enum nam_state_outcome {
  NAM_STATE_FAILED,    /* maybe half written: lost (EMBER_ESTATE) until
                          restore */
  NAM_STATE_UPDATED,   /* the task succeeded: a new version */
  NAM_STATE_UNCHANGED, /* the task never ran on it */
};

/* nam_block_cache_release_state - unpin, with the task's outcome. */
int nam_block_cache_release_state(nam_block_cache *cache, nam_block_pin *pin,
                                  int outcome);
/* nam_block_cache_platform_lost - platform failed or was disabled: every
 * out and state block whose current copy lives only there is lost. Returns
 * how many. */
size_t nam_block_cache_platform_lost(nam_block_cache *cache,
                                     unsigned platform);

/* ---- reading back -------------------------------------------------------- */

/* nam_block_cache_read - the current bytes of app's block id, copied into
 * a malloc'd buffer (*bytes, caller frees; *size; *version: the state's
 * version, else 0). Waits while a task holds a state block. sync: also
 * keep them as the block's host bytes (a state's synced version, which
 * restore goes back to); bytes may then be NULL. Returns 0,
 * EMBER_ENOTFOUND, EMBER_EINVAL (sync of a block that is not state),
 * EMBER_EBUSY (an out block still pending), EMBER_ESTATE
 * (lost), EMBER_ENOMEM, or the platform's read error. May block on a
 * device read: never call it on an event loop. */
int nam_block_cache_read(nam_block_cache *cache, uint64_t app, uint64_t id,
                         int sync, uint8_t **bytes, size_t *size,
                         uint64_t *version);

/* nam_block_cache_restore - a state block goes back to its host bytes (its
 * last synced version): the device copy is freed, it is no longer lost,
 * and its next task uploads it again. EMBER_EBUSY while a task that names
 * it is queued or running (hold_state) or a read holds it, EMBER_EINVAL
 * for a block that is not state, EMBER_ENOTFOUND. */
int nam_block_cache_restore(nam_block_cache *cache, uint64_t app, uint64_t id,
                            uint64_t *version);

/* nam_block_cache_stats - a consistent snapshot of the counters. */
void nam_block_cache_get_stats(nam_block_cache *cache,
                               nam_block_cache_stats *out);

#endif
