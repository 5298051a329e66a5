/*
 * block_cache.c - the block cache's table: (app, id) -> entry, with one
 * copy slot per platform, pins, budgets and counters. Which copy to evict
 * is block_cache_lru.c's business.
 *
 * An entry lives while it is in the table (the app holds its id) or busy
 * (pins, uploads under way, fetches waiting on an upload). A dropped entry
 * has left the table, so its id can be reused while the old bytes are
 * still pinned; its pins find it through nam_block_pin.entry_.
 */
#include "block_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "block_cache_lru.h"
#include "ember/ember_errors.h"

#define FLAGS_KNOWN (EMBER_BLOCK_CACHE | EMBER_BLOCK_BROADCAST)
#define FIRST_BUCKETS 16

enum copy_state { COPY_ABSENT, COPY_LOADING, COPY_RESIDENT };

typedef struct copy {
  nam_lru_node lru;            /* first: a node is its copy */
  nam_cache_entry *entry;
  void *handle;
  unsigned pins;
  int state;                   /* enum copy_state */
} copy;

struct nam_cache_entry {
  nam_cache_entry *next;       /* hash chain */
  uint64_t app, id;
  unsigned flags;
  const void *data;
  size_t size;
  nam_block_release_fn release;
  void *user;
  unsigned busy;               /* pins + uploads + waiting fetches */
  int dropped;                 /* out of the table */
  copy copies[];               /* one per platform */
};

typedef struct platform {
  nam_block_cache_platform cfg;
  nam_lru lru;
  nam_block_cache_platform_stats st;
} platform;

struct nam_block_cache {
  pthread_mutex_t lock;
  pthread_cond_t loaded;       /* an upload finished (or failed) */
  nam_cache_entry **buckets;
  size_t cap, count;           /* count: entries in the table */
  uint64_t live, bytes_host;   /* entries alive, dropped ones included */
  unsigned n;
  platform plat[NAM_BLOCK_CACHE_MAX_PLATFORMS];
};

static size_t bucket_of(uint64_t app, uint64_t id, size_t cap) {
  uint64_t h = id ^ (app * 0x9e3779b97f4a7c15ULL);
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  return (size_t)h & (cap - 1);
}

static nam_cache_entry *find(const nam_block_cache *c, uint64_t app,
                             uint64_t id) {
  nam_cache_entry *e = c->buckets[bucket_of(app, id, c->cap)];
  while (e && (e->app != app || e->id != id)) e = e->next;
  return e;
}

static void unlink_entry(nam_block_cache *c, nam_cache_entry *e) {
  nam_cache_entry **pp = &c->buckets[bucket_of(e->app, e->id, c->cap)];
  while (*pp != e) pp = &(*pp)->next;
  *pp = e->next;
  e->next = NULL;
  c->count--;
}

/* Double the buckets; on allocation failure the chains just grow longer. */
static void grow(nam_block_cache *c) {
  size_t cap = c->cap * 2;
  nam_cache_entry **b = calloc(cap, sizeof *b);
  if (!b) return;
  for (size_t i = 0; i < c->cap; i++) {
    nam_cache_entry *e = c->buckets[i], *next;
    for (; e; e = next) {
      next = e->next;
      size_t j = bucket_of(e->app, e->id, cap);
      e->next = b[j];
      b[j] = e;
    }
  }
  free(c->buckets);
  c->buckets = b;
  c->cap = cap;
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

/* Free an entry that nobody uses any more: copies, host bytes, itself. */
static void entry_free(nam_block_cache *c, nam_cache_entry *e) {
  for (unsigned i = 0; i < c->n; i++)
    if (e->copies[i].state == COPY_RESIDENT) copy_free(&c->plat[i], &e->copies[i]);
  if (e->release) e->release(e->user, e->data, e->size);
  c->live--;
  c->bytes_host -= e->size;
  free(e);
}

/* The entry has left the table: free what is not in use now, the rest at
 * its last release. */
static void drop_entry(nam_block_cache *c, nam_cache_entry *e) {
  e->dropped = 1;
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
  c->cap = FIRST_BUCKETS;
  c->buckets = calloc(c->cap, sizeof *c->buckets);
  if (!c->buckets) {
    free(c);
    return EMBER_ENOMEM;
  }
  if (pthread_mutex_init(&c->lock, NULL) != 0) {
    free(c->buckets);
    free(c);
    return EMBER_ENOMEM;
  }
  if (pthread_cond_init(&c->loaded, NULL) != 0) {
    pthread_mutex_destroy(&c->lock);
    free(c->buckets);
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
  for (size_t i = 0; i < c->cap; i++) {
    nam_cache_entry *e = c->buckets[i], *next;
    for (; e; e = next) {
      next = e->next;
      entry_free(c, e);
    }
  }
  free(c->buckets);
  pthread_cond_destroy(&c->loaded);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

int nam_block_cache_put(nam_block_cache *c, uint64_t app, uint64_t id,
                        unsigned flags, const void *data, size_t size,
                        nam_block_release_fn release, void *user) {
  if (!c || (flags & ~FLAGS_KNOWN) || (!data && size)) return EMBER_EINVAL;
  if (flags & EMBER_BLOCK_BROADCAST) flags = EMBER_BLOCK_BROADCAST;
  nam_cache_entry *e = malloc(sizeof *e + c->n * sizeof e->copies[0]);
  if (!e) return EMBER_ENOMEM;
  memset(e, 0, sizeof *e + c->n * sizeof e->copies[0]);
  e->app = app;
  e->id = id;
  e->flags = flags;
  e->data = data;
  e->size = size;
  e->release = release;
  e->user = user;
  for (unsigned i = 0; i < c->n; i++) e->copies[i].entry = e;

  pthread_mutex_lock(&c->lock);
  if (find(c, app, id)) {
    pthread_mutex_unlock(&c->lock);
    free(e);
    return EMBER_EINVAL;
  }
  if (c->count >= c->cap) grow(c);
  size_t b = bucket_of(app, id, c->cap);
  e->next = c->buckets[b];
  c->buckets[b] = e;
  c->count++;
  c->live++;
  c->bytes_host += size;
  pthread_mutex_unlock(&c->lock);
  return 0;
}

static void fill_pin(nam_block_pin *pin, nam_cache_entry *e, unsigned pi,
                     int hit) {
  pin->dev_handle = e->copies[pi].handle;
  pin->data = e->data;
  pin->size = e->size;
  pin->hit = hit;
  pin->entry_ = e;
  pin->platform_ = pi;
}

/* A fetch that holds e->busy gives up: the entry may go with it. */
static void unbusy(nam_block_cache *c, nam_cache_entry *e) {
  if (--e->busy == 0 && e->dropped) entry_free(c, e);
}

int nam_block_cache_fetch(nam_block_cache *c, uint64_t app, uint64_t id,
                          unsigned pi, nam_block_pin *pin) {
  if (!c || !pin) return EMBER_EINVAL;
  memset(pin, 0, sizeof *pin);
  if (pi >= c->n) return EMBER_EINVAL;

  pthread_mutex_lock(&c->lock);
  nam_cache_entry *e = find(c, app, id);
  if (!e) {
    pthread_mutex_unlock(&c->lock);
    return EMBER_ENOTFOUND;
  }
  platform *p = &c->plat[pi];
  copy *cp = &e->copies[pi];
  e->busy++; /* keeps e while we wait; becomes the pin on success */
  while (cp->state == COPY_LOADING) pthread_cond_wait(&c->loaded, &c->lock);
  if (e->dropped) {
    unbusy(c, e);
    pthread_mutex_unlock(&c->lock);
    return EMBER_ENOTFOUND;
  }
  if (cp->state == COPY_RESIDENT) {
    if (cp->pins++ == 0) {
      if (nam_lru_linked(&cp->lru)) nam_lru_remove(&p->lru, &cp->lru, e->size);
      p->st.bytes_pinned += e->size;
    }
    p->st.hits++;
    fill_pin(pin, e, pi, 1);
    pthread_mutex_unlock(&c->lock);
    return 0;
  }

  int rc = 0;
  if (p->cfg.budget != NAM_BLOCK_CACHE_UNLIMITED && e->size > p->cfg.budget)
    rc = EMBER_ETOOBIG;
  else
    rc = make_room(p, e->size);
  if (rc != 0) {
    unbusy(c, e);
    pthread_mutex_unlock(&c->lock);
    return rc;
  }
  /* Reserve the bytes and upload without the lock. */
  p->st.misses++;
  cp->state = COPY_LOADING;
  cp->pins = 1;
  account_add(p, e);
  p->st.bytes_pinned += e->size;
  pthread_mutex_unlock(&c->lock);

  void *handle = NULL;
  rc = p->cfg.ops->alloc(p->cfg.ctx, e->size, &handle);
  if (rc == 0) {
    rc = p->cfg.ops->upload(handle, e->data, e->size);
    if (rc != 0) p->cfg.ops->free(handle);
  }

  pthread_mutex_lock(&c->lock);
  pthread_cond_broadcast(&c->loaded);
  if (rc != 0) {
    cp->state = COPY_ABSENT;
    cp->pins = 0;
    account_sub(p, e);
    p->st.bytes_pinned -= e->size;
    unbusy(c, e);
    pthread_mutex_unlock(&c->lock);
    return rc < 0 ? rc : EMBER_EPLATFORM;
  }
  cp->state = COPY_RESIDENT;
  cp->handle = handle;
  p->st.bytes_to += e->size;
  fill_pin(pin, e, pi, 0);
  pthread_mutex_unlock(&c->lock);
  return 0;
}

int nam_block_cache_release(nam_block_cache *c, nam_block_pin *pin) {
  if (!c || !pin || !pin->entry_ || pin->platform_ >= c->n)
    return EMBER_EINVAL;
  pthread_mutex_lock(&c->lock);
  nam_cache_entry *e = pin->entry_;
  platform *p = &c->plat[pin->platform_];
  copy *cp = &e->copies[pin->platform_];
  if (cp->state != COPY_RESIDENT || cp->pins == 0) {
    pthread_mutex_unlock(&c->lock);
    return EMBER_EINVAL;
  }
  if (--cp->pins == 0) {
    p->st.bytes_pinned -= e->size;
    if (e->dropped || !(e->flags & FLAGS_KNOWN)) {
      copy_free(p, cp); /* plain: nothing stays after the task */
    } else if (e->flags & EMBER_BLOCK_CACHE) {
      nam_lru_push(&p->lru, &cp->lru, e->size);
      trim(p);
    } /* broadcast: stays, never on the LRU list */
  }
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
  unlink_entry(c, e);
  drop_entry(c, e);
  pthread_mutex_unlock(&c->lock);
  return 0;
}

size_t nam_block_cache_drop_app(nam_block_cache *c, uint64_t app) {
  if (!c) return 0;
  size_t n = 0;
  pthread_mutex_lock(&c->lock);
  for (size_t i = 0; i < c->cap; i++) {
    nam_cache_entry **pp = &c->buckets[i];
    while (*pp) {
      nam_cache_entry *e = *pp;
      if (e->app != app) {
        pp = &e->next;
        continue;
      }
      *pp = e->next;
      e->next = NULL;
      c->count--;
      drop_entry(c, e);
      n++;
    }
  }
  pthread_mutex_unlock(&c->lock);
  return n;
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
