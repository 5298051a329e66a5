/* listing.c - the AcceleratorList reply (see listing.h). */
#include "listing.h"

#include <stdio.h>
#include <string.h>

#include "accels.h"
#include "platform_counters.h"

#define SET(msg, field, value) ((msg)->has_##field = 1, (msg)->field = (value))

static void fill_platform(nam_listing *l, size_t i) {
  const nam_platform_status *s = &l->status[i];
  Ember__PlatformInfo *pi = &l->pi[i];
  ember__platform_info__init(pi);
  pi->name = (char *)s->name;
  pi->kind = (char *)s->kind;
  pi->state = (char *)s->state;
  if (s->device[0]) pi->device = (char *)s->device;
  if (s->loaded[0]) pi->loaded = (char *)s->loaded;
#define PUT(field, engine, ...) SET(pi, field, s->engine);
  PLATFORM_COUNTERS(PUT)
#undef PUT
  for (unsigned k = 0; k < s->n_pairs; k++) {
    const nam_pair_status *ps = &s->pairs[k];
    Ember__PairInfo *p = &l->pairs[i][k];
    ember__pair_info__init(p);
    p->accelerator = (char *)ps->accelerator;
    p->state = (char *)ps->state;
    SET(p, completed, ps->completed);
    SET(p, errors, ps->errors);
    SET(p, timeouts, ps->timeouts);
    SET(p, consecutive_failures, ps->consecutive_failures);
    SET(p, disabled_count, ps->disabled_count);
    p->speed = (char *)(ps->speed ? ps->speed : "unknown");
    SET(p, fixed_ns, ps->fixed_ns);
    SET(p, ns_per_unit, ps->ns_per_unit);
    l->pairp[i][k] = p;
  }
  pi->n_pairs = s->n_pairs;
  pi->pairs = l->pairp[i];
  l->pip[i] = pi;
}

void nam_listing_build(nam_engine *e, nam_listing *l) {
  const acc_descriptor *accs[NAM_LIST_MAX];
  size_t n_acc = nam_engine_accelerators(e, accs, NAM_LIST_MAX);
  size_t n_plat = nam_engine_platforms(e, l->status, NAM_LIST_MAX);
  for (size_t i = 0; i < n_acc; i++) {
    Ember__AcceleratorInfo *ai = &l->ai[i];
    ember__accelerator_info__init(ai);
    ai->name = (char *)accs[i]->name;
    ai->version = accs[i]->version;
    ai->origin = (char *)nam_accel_origin(accs[i]);
    nam_engine_platforms_for(e, accs[i], l->plat_names[i],
                             sizeof l->plat_names[i]);
    l->plat_lists[i][0] = l->plat_names[i];
    ai->n_platforms = l->plat_names[i][0] ? 1 : 0;
    ai->platforms = l->plat_lists[i];
    SET(ai, queued, nam_engine_queue_length(e, accs[i]));
    l->aip[i] = ai;
  }
  for (size_t i = 0; i < n_plat; i++) fill_platform(l, i);
  ember__accelerator_list__init(&l->msg);
  l->msg.n_accelerators = n_acc;
  l->msg.accelerators = l->aip;
  l->msg.n_platforms = n_plat;
  l->msg.platforms = l->pip;
}

void nam_kinds_available(nam_engine *e, const acc_descriptor *acc, char *buf,
                         size_t len) {
  nam_platform_status st[NAM_LIST_MAX];
  size_t n = nam_engine_platforms(e, st, NAM_LIST_MAX);
  size_t used = 0;
  buf[0] = '\0';
  for (size_t i = 0; i < n && used < len; i++) {
    int supported = 0, seen = 0;
    for (unsigned k = 0; k < st[i].n_pairs; k++)
      if (strcmp(st[i].pairs[k].accelerator, acc->name) == 0) supported = 1;
    for (size_t j = 0; j < i; j++)
      if (strcmp(st[j].kind, st[i].kind) == 0) seen = 1;
    if (!supported || seen) continue;
    int w = snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
                     st[i].kind);
    if (w > 0) used += (size_t)w;
  }
  if (!buf[0]) snprintf(buf, len, "none");
}
