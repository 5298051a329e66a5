/*
 * block_cache.c - the block cache's table: (app, id) -> entry, with one
 * copy slot per platform, pins, budgets and counters; out and state blocks
 * (where their current bytes live, versions, loss). Which copy to evict is
 * block_cache_lru.c's business.
 *
 * An entry lives while it is in the table (the app holds its id) or busy
 * (pins, holds, transfers under way, waiting fetches). A dropped entry has
 * left the table, so its id can be reused while the old bytes are still
 * pinned; its pins find it through nam_block_pin.entry_.
 */
#include "block_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* a full table is an error (EMBER_ENOMEM), not uthash's exit() */
#define HASH_NONFATAL_OOM 1
#include <uthash.h>

#include "block_cache_lru.h"
#include "ember/ember_errors.h"

#define FLAGS_KNOWN (EMBER_BLOCK_CACHE | EMBER_BLOCK_BROADCAST | EMBER_BLOCK_STATE)
#define KEEP_FLAGS (EMBER_BLOCK_CACHE | EMBER_BLOCK_BROADCAST)

enum copy_state { COPY_ABSENT, COPY_LOADING, COPY_RESIDENT };

typedef struct copy {
  nam_lru_node lru;            /* first: a node is its copy */
  nam_cache_entry *entry;
  void *handle;
  unsigned pins;
  int state;                   /* enum copy_state */
} copy;

typedef struct entry_key {
  uint64_t app, id;
} entry_key;

struct nam_cache_entry {
  UT_hash_handle hh;
  entry_key key;
  unsigned flags;
  int kind;                    /* enum nam_block_kind */
  const void *data;            /* host bytes; NULL: none (yet) */
  size_t size;
  nam_block_release_fn release; /* for the app's bytes, called once */
  void *user;
  uint8_t *owned;              /* host bytes the cache allocated (== data) */
  unsigned busy;               /* pins + holds + transfers + waiters */
  int dropped;                 /* out of the table */
  int pending;                 /* out: not written yet */
  int lost;                    /* out, state: contents untrusted */
  int claimed;                 /* state: claims held (tasks, a read) */
  unsigned tasks;              /* state: tasks naming it, queued or
                                  running (restore waits for them) */
  int held;                    /* state: a read or snapshot holds it */
  int host_loading;            /* the host bytes are being read back */
  unsigned readers;            /* reads waiting for a claim to end */
  void *snap;                  /* state: the synced version on a device */
  int snap_platform;           /* where snap lives; -1: none */
  int home;                    /* out/state: platform of the current copy */
  uint64_t version, synced;    /* state */
  copy copies[];               /* one per platform */
};

typedef struct platform {
  nam_block_cache_platform cfg;
  nam_lru lru;
  nam_block_cache_platform_stats st;
} platform;

struct nam_block_cache {
  pthread_mutex_t lock;
  pthread_cond_t loaded;       /* a transfer finished, or a claim ended */
  nam_cache_entry *table;      /* uthash, by (app, id) */
  uint64_t live, bytes_host;   /* entries alive, dropped ones included */
  unsigned n;
  platform plat[NAM_BLOCK_CACHE_MAX_PLATFORMS];
  nam_app_gone_fn app_gone;    /* told after drop_app */
  void *app_gone_user;
};

static nam_cache_entry *find(const nam_block_cache *c, uint64_t app,
                             uint64_t id) {
  entry_key k = {app, id};
  nam_cache_entry *e = NULL;
  HASH_FIND(hh, c->table, &k, sizeof k, e);
  return e;
}

/* A copy's bytes start counting against its platform (upload reserved). */
static void account_add(platform *p, const nam_cache_entry *e) {
  p->st.bytes_resident += e->size;
  p->st.blocks_resident++;
  if (e->flags & EMBER_BLOCK_BROADCAST) p->st.bytes_broadcast += e->size;
}

static void account_sub(platform *p, const nam_cache_entry *e) {
  p->st.bytes_resident -= e->size;
  p->st.blocks_resident--;
  if (e->flags & EMBER_BLOCK_BROADCAST) p->st.bytes_broadcast -= e->size;
}

/* Free a resident, unpinned copy. */
static void copy_free(platform *p, copy *cp) {
  nam_cache_entry *e = cp->entry;
  if (nam_lru_linked(&cp->lru)) nam_lru_remove(&p->lru, &cp->lru, e->size);
  p->cfg.ops->free(cp->handle);
  account_sub(p, e);
  cp->handle = NULL;
  cp->state = COPY_ABSENT;
}

/* Free a state's device snapshot (it counts like a resident copy). */
static void snap_free(nam_block_cache *c, nam_cache_entry *e) {
  if (e->snap_platform < 0) return;
  platform *p = &c->plat[e->snap_platform];
  p->cfg.ops->free(e->snap);
  account_sub(p, e);
  e->snap = NULL;
  e->snap_platform = -1;
}

/* The host bytes become data (owned: the cache allocated them); the ones
 * before are given back. */
static void set_host(nam_block_cache *c, nam_cache_entry *e, uint8_t *owned) {
  if (e->data) c->bytes_host -= e->size;
  if (e->owned)
    free(e->owned);
  else if (e->release)
    e->release(e->user, e->data, e->size);
  e->release = NULL; /* the app's bytes are given back once */
  e->owned = owned;
  e->data = owned;
  if (owned) c->bytes_host += e->size;
}

/* Free an entry that nobody uses any more: copies, host bytes, itself. */
static void entry_free(nam_block_cache *c, nam_cache_entry *e) {
  snap_free(c, e);
  for (unsigned i = 0; i < c->n; i++)
    if (e->copies[i].state == COPY_RESIDENT) copy_free(&c->plat[i], &e->copies[i]);
  set_host(c, e, NULL);
  c->live--;
  free(e);
}

/* The entry has left the table: free what is not in use now, the rest at
 * its last release. */
static void drop_entry(nam_block_cache *c, nam_cache_entry *e) {
  e->dropped = 1;
  snap_free(c, e);
  for (unsigned i = 0; i < c->n; i++) {
    copy *cp = &e->copies[i];
    if (cp->state == COPY_RESIDENT && cp->pins == 0) copy_free(&c->plat[i], cp);
  }
  if (e->busy == 0) entry_free(c, e);
}

static void evict_one(platform *p) {
  copy *victim = (copy *)nam_lru_victim(&p->lru);
  copy_free(p, victim);
  p->st.evictions++;
}

/* Evict until size more bytes fit. 0, or EMBER_EBUSY having evicted
 * nothing when even every evictable copy would not do. */
static int make_room(platform *p, uint64_t size) {
  uint64_t budget = p->cfg.budget;
  if (budget == NAM_BLOCK_CACHE_UNLIMITED) return 0;
  if (p->st.bytes_resident + size <= budget) return 0;
  if (p->st.bytes_resident - p->lru.bytes + size > budget) return EMBER_EBUSY;
  while (p->st.bytes_resident + size > budget) evict_one(p);
  return 0;
}

/* Back within the budget as far as unpinned cached copies allow. */
static void trim(platform *p) {
  if (p->cfg.budget == NAM_BLOCK_CACHE_UNLIMITED) return;
  while (p->st.bytes_resident > p->cfg.budget && nam_lru_victim(&p->lru))
    evict_one(p);
}

/* Room for a new copy of e on p: 0, EMBER_ETOOBIG or EMBER_EBUSY. */
static int reserve(platform *p, const nam_cache_entry *e) {
  if (p->cfg.budget != NAM_BLOCK_CACHE_UNLIMITED && e->size > p->cfg.budget)
    return EMBER_ETOOBIG;
  return make_room(p, e->size);
}

static void pin_copy(platform *p, copy *cp) {
  if (cp->pins++ == 0) {
    if (nam_lru_linked(&cp->lru))
      nam_lru_remove(&p->lru, &cp->lru, cp->entry->size);
    p->st.bytes_pinned += cp->entry->size;
  }
}

/* Does the copy on platform pi stay once unpinned, and how? */
static void unpinned(nam_block_cache *c, nam_cache_entry *e, unsigned pi) {
  platform *p = &c->plat[pi];
  copy *cp = &e->copies[pi];
  p->st.bytes_pinned -= e->size;
  int home = e->kind != NAM_BLOCK_IN && e->home == (int)pi;
  if (e->dropped || (!home && !(e->flags & KEEP_FLAGS))) {
    copy_free(p, cp); /* plain: nothing stays after the task */
  } else if (!home && (e->flags & EMBER_BLOCK_CACHE) &&
             !(e->flags & EMBER_BLOCK_BROADCAST)) {
    nam_lru_push(&p->lru, &cp->lru, e->size);
    trim(p);
  } /* broadcast, or an out/state block's current copy: stays */
}

static void unpin_copy(nam_block_cache *c, nam_cache_entry *e, unsigned pi) {
  if (--e->copies[pi].pins == 0) unpinned(c, e, pi);
}

int nam_block_cache_create(const nam_block_cache_platform *platforms,
                           unsigned n_platforms, nam_block_cache **out) {
  if (!out) return EMBER_EINVAL;
  *out = NULL;
  if (!platforms || n_platforms == 0 ||
      n_platforms > NAM_BLOCK_CACHE_MAX_PLATFORMS)
    return EMBER_EINVAL;
  for (unsigned i = 0; i < n_platforms; i++) {
    const nam_block_cache_ops *ops = platforms[i].ops;
    if (!ops || !ops->alloc || !ops->upload || !ops->free) return EMBER_EINVAL;
  }
  nam_block_cache *c = calloc(1, sizeof *c);
  if (!c) return EMBER_ENOMEM;
  if (pthread_mutex_init(&c->lock, NULL) != 0) {
    free(c);
    return EMBER_ENOMEM;
  }
  if (pthread_cond_init(&c->loaded, NULL) != 0) {
    pthread_mutex_destroy(&c->lock);
    free(c);
    return EMBER_ENOMEM;
  }
  c->n = n_platforms;
  for (unsigned i = 0; i < n_platforms; i++) {
    c->plat[i].cfg = platforms[i];
    c->plat[i].st.budget = platforms[i].budget;
    nam_lru_init(&c->plat[i].lru);
  }
  *out = c;
  return 0;
}

void nam_block_cache_destroy(nam_block_cache *c) {
  if (!c) return;
  nam_cache_entry *e, *tmp;
  HASH_ITER(hh, c->table, e, tmp) {
    HASH_DEL(c->table, e);
    entry_free(c, e);
  }
  pthread_cond_destroy(&c->loaded);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

static nam_cache_entry *entry_new(const nam_block_cache *c, uint64_t app,
                                  uint64_t id, size_t size) {
  nam_cache_entry *e = malloc(sizeof *e + c->n * sizeof e->copies[0]);
  if (!e) return NULL;
  memset(e, 0, sizeof *e + c->n * sizeof e->copies[0]);
  e->key.app = app;
  e->key.id = id;
  e->size = size;
  e->home = -1;
  e->snap_platform = -1;
  for (unsigned i = 0; i < c->n; i++) e->copies[i].entry = e;
  return e;
}

/* Lock held: e goes into the table unless its id is taken. */
static int insert(nam_block_cache *c, nam_cache_entry *e) {
  if (find(c, e->key.app, e->key.id)) return EMBER_EINVAL;
  HASH_ADD(hh, c->table, key, sizeof e->key, e);
  if (!e->hh.tbl) return EMBER_ENOMEM; /* uthash could not grow: not added */
  c->live++;
  return 0;
}

int nam_block_cache_put(nam_block_cache *c, uint64_t app, uint64_t id,
                        unsigned flags, const void *data, size_t size,
                        nam_block_release_fn release, void *user) {
  if (!c || (flags & ~FLAGS_KNOWN) || (!data && size)) return EMBER_EINVAL;
  if (flags & EMBER_BLOCK_STATE)
    flags = EMBER_BLOCK_STATE;
  else if (flags & EMBER_BLOCK_BROADCAST)
    flags = EMBER_BLOCK_BROADCAST;
  nam_cache_entry *e = entry_new(c, app, id, size);
  if (!e) return EMBER_ENOMEM;
  e->flags = flags;
  e->kind = flags & EMBER_BLOCK_STATE ? NAM_BLOCK_STATE : NAM_BLOCK_IN;
  e->data = data;
  e->release = release;
  e->user = user;

  pthread_mutex_lock(&c->lock);
  int rc = insert(c, e);
  if (rc == 0) c->bytes_host += size;
  pthread_mutex_unlock(&c->lock);
  if (rc) free(e);
  return rc;
}

static void fill_pin(nam_block_pin *pin, const platform *p, nam_cache_entry *e,
                     unsigned pi, int hit) {
  pin->dev_handle = e->copies[pi].handle;
  pin->data = e->data;
  pin->host = p->cfg.ops->host_ptr ? p->cfg.ops->host_ptr(pin->dev_handle)
                                   : NULL;
  pin->size = e->size;
  pin->hit = hit;
  pin->entry_ = e;
  pin->platform_ = pi;
}

/* A caller that holds e->busy gives up: the entry may go with it. */
static void unbusy(nam_block_cache *c, nam_cache_entry *e) {
  if (--e->busy == 0 && e->dropped) entry_free(c, e);
}

/*
 * Lock held, e->busy held: make sure e has host bytes, reading them back
 * from its current copy (an out block written on a device). The lock is
 * dropped while the device reads; the copy is pinned meanwhile.
 */
static int materialize(nam_block_cache *c, nam_cache_entry *e) {
  while (e->host_loading) pthread_cond_wait(&c->loaded, &c->lock);
  if (e->data || e->size == 0) return 0;
  if (e->lost) return EMBER_ESTATE;
  if (e->pending) return EMBER_EBUSY;
  if (e->home < 0) return EMBER_EINTERNAL;
  unsigned hi = (unsigned)e->home;
  platform *p = &c->plat[hi];
  copy *cp = &e->copies[hi];
  if (cp->state != COPY_RESIDENT || !p->cfg.ops->read) return EMBER_EINTERNAL;
  uint8_t *buf = malloc(e->size);
  if (!buf) return EMBER_ENOMEM;
  e->host_loading = 1;
  pin_copy(p, cp);
  pthread_mutex_unlock(&c->lock);
  int rc = p->cfg.ops->read(cp->handle, buf, e->size);
  pthread_mutex_lock(&c->lock);
  e->host_loading = 0;
  pthread_cond_broadcast(&c->loaded);
  p->st.bytes_from += rc == 0 ? e->size : 0;
  unpin_copy(c, e, hi);
  if (rc) {
    free(buf);
    return rc < 0 ? rc : EMBER_EPLATFORM;
  }
  set_host(c, e, buf);
  return 0;
}

/*
 * Lock held, e->busy held (it becomes the pin on success): pin e's copy on
 * platform pi, making it if missing - wrapped or uploaded from the host
 * bytes (read back first if only a device has them), or only allocated
 * (writable: an out block). by_id: a drop meanwhile is ENOTFOUND.
 */
static int pin_on(nam_block_cache *c, nam_cache_entry *e, unsigned pi,
                  nam_block_pin *pin, int by_id, int writable) {
  platform *p = &c->plat[pi];
  copy *cp = &e->copies[pi];
  while (cp->state == COPY_LOADING) pthread_cond_wait(&c->loaded, &c->lock);
  if (by_id && e->dropped) return EMBER_ENOTFOUND;
  if (cp->state == COPY_RESIDENT) {
    pin_copy(p, cp);
    p->st.hits++;
    fill_pin(pin, p, e, pi, 1);
    return 0;
  }
  if (!writable) {
    int rc = materialize(c, e);
    if (rc) return rc;
    if (cp->state != COPY_ABSENT) /* made while the lock was dropped */
      return pin_on(c, e, pi, pin, by_id, writable);
  }
  int rc = reserve(p, e);
  if (rc) return rc;
  /* reserve the bytes and transfer without the lock */
  p->st.misses++;
  cp->state = COPY_LOADING;
  cp->pins = 1;
  account_add(p, e);
  p->st.bytes_pinned += e->size;
  const void *src = e->data;
  int wrap = !writable && e->kind != NAM_BLOCK_STATE && p->cfg.ops->wrap;
  pthread_mutex_unlock(&c->lock);

  void *handle = NULL;
  if (wrap) {
    rc = p->cfg.ops->wrap(p->cfg.ctx, src, e->size, &handle);
  } else {
    rc = p->cfg.ops->alloc(p->cfg.ctx, e->size, &handle);
    if (rc == 0 && !writable) {
      rc = p->cfg.ops->upload(handle, src, e->size);
      if (rc != 0) p->cfg.ops->free(handle);
    }
  }

  pthread_mutex_lock(&c->lock);
  pthread_cond_broadcast(&c->loaded);
  if (rc != 0) {
    cp->state = COPY_ABSENT;
    cp->pins = 0;
    account_sub(p, e);
    p->st.bytes_pinned -= e->size;
    return rc < 0 ? rc : EMBER_EPLATFORM;
  }
  cp->state = COPY_RESIDENT;
  cp->handle = handle;
  if (!writable) p->st.bytes_to += e->size; /* wrapped ones reached it too */
  fill_pin(pin, p, e, pi, 0);
  return 0;
}

int nam_block_cache_fetch(nam_block_cache *c, uint64_t app, uint64_t id,
                          unsigned pi, nam_block_pin *pin) {
  if (!c || !pin) return EMBER_EINVAL;
  memset(pin, 0, sizeof *pin);
  if (pi >= c->n) return EMBER_EINVAL;
  pthread_mutex_lock(&c->lock);
  nam_cache_entry *e = find(c, app, id);
  int rc = !e ? EMBER_ENOTFOUND
           : e->kind == NAM_BLOCK_STATE ? EMBER_EINVAL : 0;
  if (rc == 0) {
    e->busy++; /* keeps e while we wait; becomes the pin on success */
    rc = pin_on(c, e, pi, pin, 1, 0);
    if (rc) unbusy(c, e);
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

int nam_block_cache_fetch_ref(nam_block_cache *c, nam_block_hold *e,
                              unsigned pi, nam_block_pin *pin) {
  if (!c || !e || !pin) return EMBER_EINVAL;
  memset(pin, 0, sizeof *pin);
  if (pi >= c->n || e->kind == NAM_BLOCK_STATE) return EMBER_EINVAL;
  pthread_mutex_lock(&c->lock);
  int rc = e->lost ? EMBER_ESTATE : e->pending ? EMBER_EBUSY : 0;
  if (rc == 0) {
    e->busy++;
    rc = pin_on(c, e, pi, pin, 0, 0);
    if (rc) unbusy(c, e);
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

int nam_block_cache_release(nam_block_cache *c, nam_block_pin *pin) {
  if (!c || !pin || !pin->entry_ || pin->platform_ >= c->n)
    return EMBER_EINVAL;
  pthread_mutex_lock(&c->lock);
  nam_cache_entry *e = pin->entry_;
  copy *cp = &e->copies[pin->platform_];
  if (cp->state != COPY_RESIDENT || cp->pins == 0) {
    pthread_mutex_unlock(&c->lock);
    return EMBER_EINVAL;
  }
  unpin_copy(c, e, pin->platform_);
  unbusy(c, e);
  pthread_mutex_unlock(&c->lock);
  memset(pin, 0, sizeof *pin);
  return 0;
}

int nam_block_cache_drop(nam_block_cache *c, uint64_t app, uint64_t id) {
  if (!c) return EMBER_EINVAL;
  pthread_mutex_lock(&c->lock);
  nam_cache_entry *e = find(c, app, id);
  if (!e) {
    pthread_mutex_unlock(&c->lock);
    return EMBER_ENOTFOUND;
  }
  HASH_DEL(c->table, e);
  drop_entry(c, e);
  pthread_mutex_unlock(&c->lock);
  return 0;
}

size_t nam_block_cache_drop_app(nam_block_cache *c, uint64_t app) {
  if (!c) return 0;
  size_t n = 0;
  pthread_mutex_lock(&c->lock);
  nam_cache_entry *e, *tmp;
  HASH_ITER(hh, c->table, e, tmp) {
    if (e->key.app != app) continue;
    HASH_DEL(c->table, e);
    drop_entry(c, e);
    n++;
  }
  nam_app_gone_fn gone = c->app_gone;
  void *user = c->app_gone_user;
  pthread_mutex_unlock(&c->lock);
  if (gone) gone(user, app);
  return n;
}

void nam_block_cache_on_app_gone(nam_block_cache *c, nam_app_gone_fn fn,
                                 void *user) {
  if (!c) return;
  pthread_mutex_lock(&c->lock);
  c->app_gone = fn;
  c->app_gone_user = user;
  pthread_mutex_unlock(&c->lock);
}

int nam_block_cache_set_budget(nam_block_cache *c, unsigned pi,
                               uint64_t budget) {
  if (!c || pi >= c->n) return EMBER_EINVAL;
  pthread_mutex_lock(&c->lock);
  c->plat[pi].cfg.budget = budget;
  c->plat[pi].st.budget = budget;
  trim(&c->plat[pi]);
  pthread_mutex_unlock(&c->lock);
  return 0;
}

void nam_block_cache_count_from(nam_block_cache *c, unsigned pi,
                                uint64_t bytes) {
  if (!c || pi >= c->n) return;
  pthread_mutex_lock(&c->lock);
  c->plat[pi].st.bytes_from += bytes;
  pthread_mutex_unlock(&c->lock);
}

void nam_block_cache_get_stats(nam_block_cache *c,
                               nam_block_cache_stats *out) {
  if (!out) return;
  memset(out, 0, sizeof *out);
  if (!c) return;
  pthread_mutex_lock(&c->lock);
  out->blocks = c->live;
  out->bytes_host = c->bytes_host;
  out->n_platforms = c->n;
  for (unsigned i = 0; i < c->n; i++) {
    const nam_block_cache_platform_stats *s = &c->plat[i].st;
    out->platform[i] = *s;
    out->hits += s->hits;
    out->misses += s->misses;
    out->evictions += s->evictions;
  }
  pthread_mutex_unlock(&c->lock);
}

/* ---- holds --------------------------------------------------------------- */

static void info_of(const nam_cache_entry *e, nam_block_info *info) {
  info->kind = e->kind;
  info->size = e->size;
  info->data = e->data;
  info->pending = e->pending;
  info->lost = e->lost;
  info->home = e->home;
  info->version = e->version;
  info->synced = e->synced;
}

int nam_block_cache_hold(nam_block_cache *c, uint64_t app, uint64_t id,
                         nam_block_hold **ref, nam_block_info *info) {
  *ref = NULL;
  pthread_mutex_lock(&c->lock);
  nam_cache_entry *e = find(c, app, id);
  if (e) {
    e->busy++;
    if (info) info_of(e, info);
  }
  pthread_mutex_unlock(&c->lock);
  *ref = e;
  return e ? 0 : EMBER_ENOTFOUND;
}

void nam_block_cache_unhold(nam_block_cache *c, nam_block_hold *e) {
  if (!e) return;
  pthread_mutex_lock(&c->lock);
  unbusy(c, e);
  pthread_mutex_unlock(&c->lock);
}

int nam_block_cache_hold_state(nam_block_cache *c, uint64_t app, uint64_t id,
                               nam_block_hold **ref, nam_block_info *info) {
  int rc = nam_block_cache_hold(c, app, id, ref, info);
  if (rc) return rc;
  pthread_mutex_lock(&c->lock);
  if ((*ref)->kind == NAM_BLOCK_STATE) (*ref)->tasks++;
  pthread_mutex_unlock(&c->lock);
  return 0;
}

void nam_block_cache_unhold_state(nam_block_cache *c, nam_block_hold *e) {
  if (!e) return;
  pthread_mutex_lock(&c->lock);
  /* a block's kind never changes: only state holds counted a task */
  if (e->kind == NAM_BLOCK_STATE && e->tasks > 0) e->tasks--;
  unbusy(c, e);
  pthread_mutex_unlock(&c->lock);
}

void nam_block_cache_ref_info(nam_block_cache *c, const nam_block_hold *e,
                              nam_block_info *info) {
  pthread_mutex_lock(&c->lock);
  info_of(e, info);
  pthread_mutex_unlock(&c->lock);
}

/* ---- out blocks ---------------------------------------------------------- */

int nam_block_cache_declare_output(nam_block_cache *c, uint64_t app,
                                   uint64_t id, size_t size,
                                   nam_block_hold **ref) {
  *ref = NULL;
  nam_cache_entry *e = entry_new(c, app, id, size);
  if (!e) return EMBER_ENOMEM;
  e->kind = NAM_BLOCK_OUT;
  e->pending = 1;
  e->busy = 1; /* the task's hold */
  pthread_mutex_lock(&c->lock);
  int rc = insert(c, e);
  pthread_mutex_unlock(&c->lock);
  if (rc) {
    free(e);
    return rc;
  }
  *ref = e;
  return 0;
}

int nam_block_cache_fetch_output(nam_block_cache *c, nam_block_hold *e,
                                 unsigned pi, nam_block_pin *pin) {
  memset(pin, 0, sizeof *pin);
  if (pi >= c->n || e->kind != NAM_BLOCK_OUT || !c->plat[pi].cfg.ops->read)
    return EMBER_EINVAL;
  pthread_mutex_lock(&c->lock);
  int rc = e->pending ? 0 : EMBER_EINVAL;
  if (rc == 0) {
    e->busy++;
    rc = pin_on(c, e, pi, pin, 0, 1);
    if (rc) unbusy(c, e);
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

int nam_block_cache_release_output(nam_block_cache *c, nam_block_pin *pin,
                                   int written) {
  if (!pin->entry_) return EMBER_EINVAL;
  nam_cache_entry *e = pin->entry_;
  unsigned pi = pin->platform_;
  pthread_mutex_lock(&c->lock);
  if (written && e->pending) {
    e->pending = 0;
    e->home = (int)pi;
  }
  unpin_copy(c, e, pi); /* not home (a failed attempt): freed */
  unbusy(c, e);
  pthread_mutex_unlock(&c->lock);
  memset(pin, 0, sizeof *pin);
  return 0;
}

void nam_block_cache_fail_output(nam_block_cache *c, nam_block_hold *e) {
  pthread_mutex_lock(&c->lock);
  if (e->pending) {
    e->pending = 0;
    e->lost = 1;
  }
  pthread_mutex_unlock(&c->lock);
}

/* ---- state blocks -------------------------------------------------------- */

int nam_block_cache_claim_state(nam_block_cache *c, nam_block_hold *e,
                                unsigned pi, int in_order) {
  pthread_mutex_lock(&c->lock);
  /* a task may follow those that hold it only into their in-order
   * pipeline, where the state lives already */
  int follows = in_order && e->home == (int)pi && !e->held;
  int rc = e->kind != NAM_BLOCK_STATE ? EMBER_EINVAL
           : e->lost ? EMBER_ESTATE
           : e->readers ? EMBER_EBUSY /* reads go first: a stream of tasks
                                         cannot starve them */
           : e->claimed && !follows ? EMBER_EBUSY
           : e->home >= 0 && e->home != (int)pi ? EMBER_ENOPLATFORM : 0;
  if (rc == 0) e->claimed++;
  pthread_mutex_unlock(&c->lock);
  return rc;
}

int nam_block_cache_state_lost(nam_block_cache *c, nam_block_hold *e) {
  pthread_mutex_lock(&c->lock);
  int lost = e->lost;
  pthread_mutex_unlock(&c->lock);
  return lost;
}

void nam_block_cache_lose_state(nam_block_cache *c, nam_block_hold *e) {
  pthread_mutex_lock(&c->lock);
  if (e->kind == NAM_BLOCK_STATE) e->lost = 1;
  pthread_mutex_unlock(&c->lock);
}

int nam_block_cache_state_home(nam_block_cache *c, nam_block_hold *e) {
  pthread_mutex_lock(&c->lock);
  int home = e->kind == NAM_BLOCK_STATE ? e->home : -1;
  pthread_mutex_unlock(&c->lock);
  return home;
}

void nam_block_cache_unclaim_state(nam_block_cache *c, nam_block_hold *e) {
  pthread_mutex_lock(&c->lock);
  if (e->claimed > 0) e->claimed--;
  pthread_cond_broadcast(&c->loaded);
  pthread_mutex_unlock(&c->lock);
}

int nam_block_cache_fetch_state(nam_block_cache *c, nam_block_hold *e,
                                unsigned pi, nam_block_pin *pin) {
  memset(pin, 0, sizeof *pin);
  if (pi >= c->n || e->kind != NAM_BLOCK_STATE || !c->plat[pi].cfg.ops->read)
    return EMBER_EINVAL;
  pthread_mutex_lock(&c->lock);
  int rc = e->lost ? EMBER_ESTATE
           : e->home >= 0 && e->home != (int)pi ? EMBER_ENOPLATFORM : 0;
  if (rc == 0) {
    e->busy++;
    rc = pin_on(c, e, pi, pin, 0, 0);
    if (rc == 0)
      e->home = (int)pi;
    else
      unbusy(c, e);
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}

int nam_block_cache_release_state(nam_block_cache *c, nam_block_pin *pin,
                                  int outcome) {
  if (!pin->entry_) return EMBER_EINVAL;
  nam_cache_entry *e = pin->entry_;
  unsigned pi = pin->platform_;
  pthread_mutex_lock(&c->lock);
  if (outcome == NAM_STATE_UPDATED && !e->lost) {
    e->version++;
  } else if (outcome != NAM_STATE_UNCHANGED || e->lost) {
    e->lost = 1;     /* maybe half written: never trusted again */
    e->home = -1;    /* the copy goes at the unpin below */
  }
  unpin_copy(c, e, pi);
  unbusy(c, e);
  pthread_mutex_unlock(&c->lock);
  memset(pin, 0, sizeof *pin);
  return 0;
}

size_t nam_block_cache_platform_lost(nam_block_cache *c, unsigned pi) {
  size_t n = 0;
  pthread_mutex_lock(&c->lock);
  nam_cache_entry *e, *tmp;
  HASH_ITER(hh, c->table, e, tmp) {
    if (e->snap_platform == (int)pi) snap_free(c, e);
    if (e->home != (int)pi || e->kind == NAM_BLOCK_IN) continue;
    if (e->kind == NAM_BLOCK_OUT && e->data) continue; /* the host has it */
    e->lost = 1;
    e->home = -1;
    copy *cp = &e->copies[pi];
    if (cp->state == COPY_RESIDENT && cp->pins == 0)
      copy_free(&c->plat[pi], cp);
    n++;
  }
  pthread_mutex_unlock(&c->lock);
  return n;
}

/* ---- reading back -------------------------------------------------------- */

/*
 * Lock held, e a state with a current copy on its home platform: keep a
 * device snapshot of it (ops->copy), so that restore needs no upload. Best
 * effort: no copy op, no room in the budget, or a failed copy leave only
 * the host bytes (restore then uploads them). The claim keeps tasks off
 * while the device copies without the lock.
 */
static void snapshot(nam_block_cache *c, nam_cache_entry *e) {
  unsigned hi = (unsigned)e->home;
  platform *p = &c->plat[hi];
  copy *cp = &e->copies[hi];
  if (!p->cfg.ops->copy || cp->state != COPY_RESIDENT) {
    snap_free(c, e);
    return;
  }
  if (e->snap_platform != (int)hi) {
    snap_free(c, e);
    if (reserve(p, e) != 0) return;
    account_add(p, e); /* reserved before the lock is dropped */
    e->snap_platform = (int)hi;
  }
  void *snap = e->snap;
  e->snap = NULL;
  e->claimed++;
  e->held = 1;
  pin_copy(p, cp);
  pthread_mutex_unlock(&c->lock);
  int rc = snap ? 0 : p->cfg.ops->alloc(p->cfg.ctx, e->size, &snap);
  if (rc == 0) rc = p->cfg.ops->copy(snap, cp->handle, e->size);
  pthread_mutex_lock(&c->lock);
  unpin_copy(c, e, hi);
  e->claimed--;
  e->held = 0;
  pthread_cond_broadcast(&c->loaded);
  if (rc == 0) {
    e->snap = snap;
    return;
  }
  if (snap) p->cfg.ops->free(snap);
  account_sub(p, e);
  e->snap_platform = -1;
}

/*
 * Lock held: take e's device snapshot back into a home copy on its
 * platform. 0, or an error (the caller falls back to the host bytes).
 */
static int restore_snapshot(nam_block_cache *c, nam_cache_entry *e) {
  unsigned si = (unsigned)e->snap_platform;
  platform *p = &c->plat[si];
  copy *cp = &e->copies[si];
  if (cp->state == COPY_LOADING || cp->pins) return EMBER_EBUSY;
  int fresh = cp->state == COPY_ABSENT;
  if (fresh) {
    if (reserve(p, e) != 0) return EMBER_EBUSY;
    cp->state = COPY_LOADING;
    account_add(p, e);
  } else {
    pin_copy(p, cp);
  }
  e->claimed++;
  e->held = 1;
  pthread_mutex_unlock(&c->lock);
  void *handle = fresh ? NULL : cp->handle;
  int rc = fresh ? p->cfg.ops->alloc(p->cfg.ctx, e->size, &handle) : 0;
  if (rc == 0) rc = p->cfg.ops->copy(handle, e->snap, e->size);
  pthread_mutex_lock(&c->lock);
  e->claimed--;
  e->held = 0;
  pthread_cond_broadcast(&c->loaded);
  if (!fresh) {
    /* unpinned by hand: the copy is the home copy from here on, it stays */
    if (--cp->pins == 0) p->st.bytes_pinned -= e->size;
  } else if (rc == 0) {
    cp->state = COPY_RESIDENT;
    cp->handle = handle;
  } else {
    if (handle) p->cfg.ops->free(handle);
    cp->state = COPY_ABSENT;
    account_sub(p, e);
  }
  if (rc == 0) e->home = (int)si;
  return rc;
}

int nam_block_cache_read(nam_block_cache *c, uint64_t app, uint64_t id,
                         int sync, uint8_t **bytes, size_t *size,
                         uint64_t *version) {
  if (bytes) *bytes = NULL;
  *size = 0;
  if (version) *version = 0;
  pthread_mutex_lock(&c->lock);
  nam_cache_entry *e = find(c, app, id);
  if (!e) {
    pthread_mutex_unlock(&c->lock);
    return EMBER_ENOTFOUND;
  }
  e->busy++;
  e->readers++;
  while (e->claimed && !e->dropped) pthread_cond_wait(&c->loaded, &c->lock);
  e->readers--;
  int rc = e->dropped ? EMBER_ENOTFOUND : e->lost ? EMBER_ESTATE
           : e->pending ? EMBER_EBUSY : 0;
  if (rc == 0 && sync && e->kind != NAM_BLOCK_STATE)
    rc = EMBER_EINVAL; /* only a state has a synced version */
  uint8_t *buf = NULL;
  if (rc == 0 && e->kind != NAM_BLOCK_STATE) {
    rc = materialize(c, e); /* in and out blocks: keep the host bytes */
    if (rc == 0 && bytes) {
      buf = malloc(e->size ? e->size : 1);
      if (!buf) rc = EMBER_ENOMEM;
      else if (e->size) memcpy(buf, e->data, e->size);
    }
  } else if (rc == 0) {
    buf = malloc(e->size ? e->size : 1);
    if (!buf) rc = EMBER_ENOMEM;
    if (rc == 0 && e->home < 0) {
      if (e->size) memcpy(buf, e->data, e->size); /* the host is current */
    } else if (rc == 0) {
      /* claimed meanwhile by nobody: the lock is ours, the claim keeps
       * tasks off while the device reads */
      unsigned hi = (unsigned)e->home;
      platform *p = &c->plat[hi];
      copy *cp = &e->copies[hi];
      e->claimed++;
      e->held = 1;
      pin_copy(p, cp);
      pthread_mutex_unlock(&c->lock);
      rc = p->cfg.ops->read(cp->handle, buf, e->size);
      pthread_mutex_lock(&c->lock);
      if (rc == 0) p->st.bytes_from += e->size;
      unpin_copy(c, e, hi);
      e->claimed--;
      e->held = 0;
      pthread_cond_broadcast(&c->loaded);
      if (rc > 0) rc = EMBER_EPLATFORM;
    }
    if (rc == 0 && sync && e->home >= 0) {
      uint8_t *keep = bytes ? malloc(e->size ? e->size : 1) : buf;
      if (!keep) {
        rc = EMBER_ENOMEM;
      } else {
        if (bytes && e->size) memcpy(keep, buf, e->size);
        set_host(c, e, keep);
        if (!bytes) buf = NULL; /* kept */
      }
    }
    if (rc == 0 && sync) {
      e->synced = e->version;
      if (e->home >= 0) snapshot(c, e);
      else snap_free(c, e); /* the host bytes are the synced version */
    }
  }
  if (rc == 0) {
    *size = e->size;
    if (version) *version = e->version;
  }
  unbusy(c, e);
  pthread_mutex_unlock(&c->lock);
  if (rc == 0 && bytes)
    *bytes = buf;
  else
    free(buf);
  return rc;
}

int nam_block_cache_restore(nam_block_cache *c, uint64_t app, uint64_t id,
                            uint64_t *version) {
  pthread_mutex_lock(&c->lock);
  nam_cache_entry *e = find(c, app, id);
  /* busy while a task that names it is queued or running: a restore
   * between a task's submit and its run would change the bytes the app
   * submitted it on; the app waits for its tasks, then restores */
  int rc = !e ? EMBER_ENOTFOUND
           : e->kind != NAM_BLOCK_STATE ? EMBER_EINVAL
           : e->claimed || e->tasks > 0 ? EMBER_EBUSY : 0;
  if (rc == 0) {
    e->busy++;
    /* a device snapshot comes back where it is; else the host bytes do,
     * at the next task */
    if (e->snap_platform < 0 || restore_snapshot(c, e) != 0) {
      for (unsigned i = 0; i < c->n; i++) {
        copy *cp = &e->copies[i];
        if (cp->state == COPY_RESIDENT && cp->pins == 0)
          copy_free(&c->plat[i], cp);
      }
      e->home = -1;
    }
    e->lost = 0;
    e->version = e->synced;
    if (version) *version = e->version;
    unbusy(c, e);
  }
  pthread_mutex_unlock(&c->lock);
  return rc;
}
