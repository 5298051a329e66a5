/* cnn_stage_pool.c - built cnn_cpu stages kept for reuse within a byte
 * budget, each its last app's (cnn_stage_pool.h). */
#include "cnn_stage_pool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An idle stage. */
typedef struct pooled {
  uint8_t *text;             /* the key's, a copy */
  size_t len;
  uint32_t first, end, batch, channels;
  int outputs;
  uint64_t app;              /* who gave it back */
  uint64_t used;             /* when (a counter) */
  uint64_t bytes;            /* cnn_cpu_stage_bytes */
  cnn_cpu_stage *stage;
} pooled;

/* A stage out on loan. */
typedef struct lent {
  cnn_cpu_stage *stage;
  uint64_t app;
  uint64_t bytes;
  int gone;                  /* its app left meanwhile: not kept */
  struct lent *next;
} lent;

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pooled idle[CNN_STAGE_POOL_MAX];
static size_t n_idle;
static lent *lent_list;
static uint64_t clock_ticks;
static cnn_stage_pool_stats st = {.budget = CNN_STAGE_POOL_DEFAULT_BYTES};

static int same(const pooled *p, const cnn_pool_key *k) {
  return p->len == k->len && p->first == k->first && p->end == k->end &&
         p->batch == k->batch && p->channels == k->channels &&
         p->outputs == (k->outputs != 0) &&
         memcmp(p->text, k->text, k->len) == 0;
}

/* Lock held: take idle entry i out (into *out, for destroying after the
 * lock), the last entry moving into its place. */
static void remove_idle(size_t i, pooled *out) {
  *out = idle[i];
  st.idle--;
  st.idle_bytes -= idle[i].bytes;
  idle[i] = idle[--n_idle];
  memset(&idle[n_idle], 0, sizeof idle[n_idle]);
}

static void destroy_all(pooled *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    cnn_cpu_stage_destroy(p[i].stage);
    free(p[i].text);
  }
}

/* Lock held: evict least recently used idle stages until room more bytes
 * fit within the budget and the count; the evicted go to out (room for
 * CNN_STAGE_POOL_MAX), their number returned. */
static size_t evict_for(uint64_t room, size_t slots, pooled *out) {
  size_t n = 0;
  while (n_idle && (n_idle + slots > CNN_STAGE_POOL_MAX ||
                    st.idle_bytes + room > st.budget)) {
    size_t lru = 0;
    for (size_t i = 1; i < n_idle; i++)
      if (idle[i].used < idle[lru].used) lru = i;
    remove_idle(lru, &out[n++]);
    st.evicted++;
  }
  return n;
}

/* Lock held: lend s to app. 0, or EMBER_ENOMEM. */
static int lend(cnn_cpu_stage *s, uint64_t app) {
  lent *l = malloc(sizeof *l);
  if (!l) return EMBER_ENOMEM;
  *l = (lent){s, app, cnn_cpu_stage_bytes(s), 0, lent_list};
  lent_list = l;
  st.lent++;
  st.lent_bytes += l->bytes;
  return 0;
}

/* Lock held: the loan of s, taken off the list (NULL: not lent). */
static lent *unlend(cnn_cpu_stage *s) {
  for (lent **p = &lent_list; *p; p = &(*p)->next)
    if ((*p)->stage == s) {
      lent *l = *p;
      *p = l->next;
      st.lent--;
      st.lent_bytes -= l->bytes;
      return l;
    }
  return NULL;
}

static int build(const cnn_net *net, const cnn_pool_key *k,
                 cnn_cpu_stage **out, char *err, size_t err_len) {
  if (k->channels && k->outputs)
    return cnn_cpu_ocp_slice_create(net, k->first, k->channels, k->batch,
                                    out, err, err_len);
  if (k->channels)
    return cnn_cpu_slice_create(net, k->first, k->channels, k->batch, out,
                                err, err_len);
  return cnn_cpu_stage_create(net, k->first, k->end, k->batch, out, err,
                              err_len);
}

int cnn_stage_pool_take(const cnn_net *net, const cnn_pool_key *key,
                        uint64_t app, cnn_cpu_stage **out, char *err,
                        size_t err_len) {
  *out = NULL;
  pthread_mutex_lock(&pool_lock);
  for (size_t i = 0; i < n_idle; i++)
    if (same(&idle[i], key)) {
      pooled p;
      remove_idle(i, &p);
      int rc = lend(p.stage, app);
      if (!rc) st.hits++;
      pthread_mutex_unlock(&pool_lock);
      free(p.text);
      if (rc) {
        cnn_cpu_stage_destroy(p.stage);
        snprintf(err, err_len, "out of memory");
        return rc;
      }
      cnn_cpu_stage_zero_grads(p.stage);
      *out = p.stage;
      return 0;
    }
  pthread_mutex_unlock(&pool_lock);
  cnn_cpu_stage *s = NULL;
  int rc = build(net, key, &s, err, err_len);
  if (rc) return rc;
  pthread_mutex_lock(&pool_lock);
  rc = lend(s, app);
  if (!rc) st.builds++;
  pthread_mutex_unlock(&pool_lock);
  if (rc) {
    cnn_cpu_stage_destroy(s);
    snprintf(err, err_len, "out of memory");
    return rc;
  }
  *out = s;
  return 0;
}

void cnn_stage_pool_give(const cnn_pool_key *key, cnn_cpu_stage *stage) {
  if (!stage) return;
  pooled evicted[CNN_STAGE_POOL_MAX];
  size_t n_evicted = 0;
  uint8_t *copy = malloc(key->len ? key->len : 1);
  if (copy) memcpy(copy, key->text, key->len);
  pthread_mutex_lock(&pool_lock);
  lent *l = unlend(stage);
  uint64_t bytes = cnn_cpu_stage_bytes(stage);
  int keep = copy && l && !l->gone && bytes <= st.budget;
  if (l && l->gone) st.dropped++;
  if (keep) {
    n_evicted = evict_for(bytes, 1, evicted);
    idle[n_idle++] = (pooled){.text = copy, .len = key->len,
                              .first = key->first, .end = key->end,
                              .batch = key->batch,
                              .channels = key->channels,
                              .outputs = key->outputs != 0, .app = l->app,
                              .used = ++clock_ticks, .bytes = bytes,
                              .stage = stage};
    st.idle++;
    st.idle_bytes += bytes;
  }
  pthread_mutex_unlock(&pool_lock);
  free(l);
  if (!keep) {
    cnn_cpu_stage_destroy(stage);
    free(copy);
  }
  destroy_all(evicted, n_evicted);
}

void cnn_stage_pool_discard(cnn_cpu_stage *stage) {
  if (!stage) return;
  pthread_mutex_lock(&pool_lock);
  lent *l = unlend(stage);
  pthread_mutex_unlock(&pool_lock);
  free(l);
  cnn_cpu_stage_destroy(stage);
}

void cnn_stage_pool_app_gone(uint64_t app) {
  pooled gone[CNN_STAGE_POOL_MAX];
  size_t n = 0;
  pthread_mutex_lock(&pool_lock);
  for (size_t i = 0; i < n_idle;)
    if (idle[i].app == app) {
      remove_idle(i, &gone[n++]);
      st.dropped++;
    } else {
      i++;
    }
  for (lent *l = lent_list; l; l = l->next)
    if (l->app == app) l->gone = 1;
  pthread_mutex_unlock(&pool_lock);
  destroy_all(gone, n);
}

void cnn_stage_pool_set_budget(uint64_t bytes) {
  pooled evicted[CNN_STAGE_POOL_MAX];
  pthread_mutex_lock(&pool_lock);
  st.budget = bytes;
  size_t n = evict_for(0, 0, evicted);
  pthread_mutex_unlock(&pool_lock);
  destroy_all(evicted, n);
}

void cnn_stage_pool_clear(void) {
  pooled all[CNN_STAGE_POOL_MAX];
  size_t n = 0;
  pthread_mutex_lock(&pool_lock);
  while (n_idle) remove_idle(n_idle - 1, &all[n++]);
  pthread_mutex_unlock(&pool_lock);
  destroy_all(all, n);
}

void cnn_stage_pool_get_stats(cnn_stage_pool_stats *out) {
  pthread_mutex_lock(&pool_lock);
  *out = st;
  pthread_mutex_unlock(&pool_lock);
}
