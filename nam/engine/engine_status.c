/* engine_status.c - snapshots of the engine for listings and metrics. */
#include "engine_internal.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"

static const char *pair_state(const nam_pair *pair) {
  if (!pair->disabled) return "ready";
  return pair->probing ? "probing" : "disabled";
}

static const char *pair_speed(const nam_platform *p, const nam_pair *pair) {
  if (p->ops->model_ns) return "model";
  if (pair->calib_pending) return "calibrating";
  if (pair->calibrated) return "calibrated";
  return pair->measured ? "measured" : "unknown";
}

static void fill_status(nam_engine *e, nam_platform *p,
                        const nam_block_cache_stats *cs,
                        nam_platform_status *s) {
  memset(s, 0, sizeof *s);
  snprintf(s->name, sizeof s->name, "%s", p->name);
  snprintf(s->kind, sizeof s->kind, "%s", p->ops->kind);
  snprintf(s->device, sizeof s->device, "%s", p->device);
  s->state = p->disabled ? "disabled" : "ready";
  s->workers = p->workers;
  s->running = p->running - (e->calibrating == p); /* user tasks */
  s->completed = p->completed;
  s->failed = p->failed;
  s->retried_away = p->retried_away;
  s->timeouts = p->timeouts;
  for (size_t k = 0; k < e->n_queues; k++) {
    const acc_descriptor *acc = e->queues[k].acc;
    if (!p->ops->supports(p, acc)) continue;
    s->queued += e->queues[k].length;
    if (s->n_pairs == NAM_MAX_PAIRS) continue;
    const nam_pair *pair = &p->pairs[k];
    nam_pair_status *ps = &s->pairs[s->n_pairs++];
    ps->accelerator = acc->name;
    ps->state = pair_state(pair);
    ps->completed = pair->completed;
    ps->errors = pair->errors;
    ps->timeouts = pair->timeouts;
    ps->consecutive_failures = pair->consecutive;
    ps->disabled_count = pair->disabled_count;
    ps->speed = pair_speed(p, pair);
    ps->fixed_ns = pair->fixed_ns;
    ps->ns_per_unit = pair->ns_per_unit;
    ps->measured = pair->measured;
  }
  if (p->ops->cache_ops && p->index < cs->n_platforms) {
    const nam_block_cache_platform_stats *c = &cs->platform[p->index];
    s->cache_budget = c->budget;
    s->cache_resident = c->bytes_resident;
    s->cache_pinned = c->bytes_pinned;
    s->cache_blocks = c->blocks_resident;
    s->cache_hits = c->hits;
    s->cache_misses = c->misses;
    s->cache_evictions = c->evictions;
    s->bytes_to = c->bytes_to;
    s->bytes_from = c->bytes_from;
  }
  if (p->ops->describe) p->ops->describe(p, s);
}

size_t nam_engine_platforms(nam_engine *e, nam_platform_status *out,
                            size_t max) {
  nam_block_cache_stats cs;
  nam_block_cache_get_stats(e->cache, &cs); /* before the engine lock */
  pthread_mutex_lock(&e->lock);
  size_t n = e->n_platforms < max ? e->n_platforms : max;
  for (size_t i = 0; i < n; i++)
    fill_status(e, &e->platforms[i], &cs, &out[i]);
  pthread_mutex_unlock(&e->lock);
  return n;
}

unsigned nam_engine_queue_length(nam_engine *e, const acc_descriptor *acc) {
  pthread_mutex_lock(&e->lock);
  nam_task_queue *q = nam_queue_of(e, acc);
  unsigned n = q ? q->length : 0;
  pthread_mutex_unlock(&e->lock);
  return n;
}

void nam_engine_platforms_for(nam_engine *e, const acc_descriptor *acc,
                              char *buf, size_t len) {
  size_t used = 0;
  if (len) buf[0] = '\0';
  pthread_mutex_lock(&e->lock);
  for (size_t i = 0; i < e->n_platforms; i++) {
    nam_platform *p = &e->platforms[i];
    if (!p->ops->supports(p, acc) || used >= len) continue;
    int n = snprintf(buf + used, len - used, "%s%s", used ? "," : "", p->name);
    if (n > 0) used += (size_t)n;
  }
  pthread_mutex_unlock(&e->lock);
}

void nam_engine_get_counters(nam_engine *e, nam_engine_counters *out) {
  pthread_mutex_lock(&e->lock);
  *out = e->counters;
  pthread_mutex_unlock(&e->lock);
}

size_t nam_engine_accelerators(nam_engine *e, const acc_descriptor **out,
                               size_t max) {
  size_t n = e->n_queues < max ? e->n_queues : max;
  for (size_t i = 0; i < n; i++) out[i] = e->queues[i].acc;
  return n;
}
