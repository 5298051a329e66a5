/* introspect.c - what accelerators and platforms a NAM (or the embedded
 * engine) offers. */
#include "client_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "platform_counters.h"

static int from_engine(const ember_client *c, nam_engine *e,
                       ember_accel_info **accels, size_t *n_accels,
                       ember_platform_info **platforms, size_t *n_platforms) {
  size_t na = ember__accels_count(c->accels);
  nam_platform_status ps[16];
  size_t np = nam_engine_platforms(e, ps, 16);
  *accels = calloc(na ? na : 1, sizeof **accels);
  *platforms = calloc(np ? np : 1, sizeof **platforms);
  if (!*accels || !*platforms) {
    free(*accels);
    free(*platforms);
    return EMBER_ENOMEM;
  }
  for (size_t i = 0; i < na; i++) {
    const acc_descriptor *d = ember__accels_get(c->accels, i);
    ember_accel_info *a = &(*accels)[i];
    snprintf(a->name, sizeof a->name, "%s", d->name);
    a->version = d->version;
    nam_engine_platforms_for(e, d, a->platforms, sizeof a->platforms);
    a->queued = nam_engine_queue_length(e, d);
    snprintf(a->origin, sizeof a->origin, "%s",
             ember__accel_origin(c->accels, d));
  }
  for (size_t i = 0; i < np; i++) {
    const nam_platform_status *s = &ps[i];
    ember_platform_info *p = &(*platforms)[i];
    snprintf(p->name, sizeof p->name, "%.63s", s->name);
    snprintf(p->kind, sizeof p->kind, "%.31s", s->kind);
    snprintf(p->state, sizeof p->state, "%s", s->state);
    snprintf(p->device, sizeof p->device, "%s", s->device);
    snprintf(p->loaded, sizeof p->loaded, "%s", s->loaded);
#define COPY(field, engine, ...) p->field = s->engine;
    PLATFORM_COUNTERS(COPY)
#undef COPY
    for (unsigned k = 0; k < s->n_pairs && k < EMBER_MAX_PAIRS; k++) {
      ember_pair_info *q = &p->pairs[p->n_pairs++];
      snprintf(q->accelerator, sizeof q->accelerator, "%s",
               s->pairs[k].accelerator);
      snprintf(q->state, sizeof q->state, "%s", s->pairs[k].state);
      q->completed = s->pairs[k].completed;
      q->errors = s->pairs[k].errors;
      q->timeouts = s->pairs[k].timeouts;
      q->disabled_count = s->pairs[k].disabled_count;
      q->consecutive_failures = s->pairs[k].consecutive_failures;
      snprintf(q->speed, sizeof q->speed, "%s",
               s->pairs[k].speed ? s->pairs[k].speed : "unknown");
      q->fixed_ns = s->pairs[k].fixed_ns;
      q->ns_per_unit = s->pairs[k].ns_per_unit;
    }
  }
  *n_accels = na;
  *n_platforms = np;
  return 0;
}

static int from_reply(const Ember__AcceleratorList *l, ember_accel_info **accels,
                      size_t *n_accels, ember_platform_info **platforms,
                      size_t *n_platforms) {
  *accels = calloc(l->n_accelerators ? l->n_accelerators : 1, sizeof **accels);
  *platforms = calloc(l->n_platforms ? l->n_platforms : 1, sizeof **platforms);
  if (!*accels || !*platforms) {
    free(*accels);
    free(*platforms);
    return EMBER_ENOMEM;
  }
  for (size_t i = 0; i < l->n_accelerators; i++) {
    const Ember__AcceleratorInfo *s = l->accelerators[i];
    ember_accel_info *a = &(*accels)[i];
    snprintf(a->name, sizeof a->name, "%s", s->name);
    a->version = s->version;
    size_t used = 0;
    for (size_t k = 0; k < s->n_platforms && used < sizeof a->platforms; k++) {
      int n = snprintf(a->platforms + used, sizeof a->platforms - used, "%s%s",
                       k ? "," : "", s->platforms[k]);
      if (n > 0) used += (size_t)n;
    }
    a->queued = s->queued;
    /* a NAM older than the field: its accelerators are all built-in */
    snprintf(a->origin, sizeof a->origin, "%s",
             s->origin ? s->origin : "built-in");
  }
  for (size_t i = 0; i < l->n_platforms; i++) {
    const Ember__PlatformInfo *s = l->platforms[i];
    ember_platform_info *p = &(*platforms)[i];
    snprintf(p->name, sizeof p->name, "%s", s->name);
    snprintf(p->kind, sizeof p->kind, "%s", s->kind);
    snprintf(p->state, sizeof p->state, "%s", s->state);
    snprintf(p->device, sizeof p->device, "%s", s->device ? s->device : "");
    snprintf(p->loaded, sizeof p->loaded, "%s", s->loaded ? s->loaded : "");
#define COPY(field, ...) p->field = s->field;  /* same names on the wire */
    PLATFORM_COUNTERS(COPY)
#undef COPY
    for (size_t k = 0; k < s->n_pairs && k < EMBER_MAX_PAIRS; k++) {
      const Ember__PairInfo *r = s->pairs[k];
      ember_pair_info *q = &p->pairs[p->n_pairs++];
      snprintf(q->accelerator, sizeof q->accelerator, "%s", r->accelerator);
      snprintf(q->state, sizeof q->state, "%s", r->state);
      q->completed = r->completed;
      q->errors = r->errors;
      q->timeouts = r->timeouts;
      q->disabled_count = r->disabled_count;
      q->consecutive_failures = r->consecutive_failures;
      /* an older NAM sends no speed */
      snprintf(q->speed, sizeof q->speed, "%s", r->speed ? r->speed : "unknown");
      q->fixed_ns = r->fixed_ns;
      q->ns_per_unit = r->ns_per_unit;
    }
  }
  *n_accels = l->n_accelerators;
  *n_platforms = l->n_platforms;
  return 0;
}

int ember_list_accelerators(ember_client *c, ember_accel_info **accels,
                            size_t *n_accels, ember_platform_info **platforms,
                            size_t *n_platforms) {
  *accels = NULL;
  *platforms = NULL;
  *n_accels = *n_platforms = 0;
  if (c->mode == MODE_EMBEDDED) {
    nam_engine *e;
    int rc = ember__client_engine(c, &e);
    return rc ? rc : from_engine(c, e, accels, n_accels, platforms, n_platforms);
  }
  Ember__ListAccelerators req = EMBER__LIST_ACCELERATORS__INIT;
  ProtobufCMessage *reply = NULL;
  int rc = ember__remote_request(c, EMBER__MSG_TYPE__MSG_LIST_ACCELERATORS, &req.base,
                          EMBER__MSG_TYPE__MSG_ACCELERATOR_LIST, &reply);
  if (rc) {
    if (rc == EMBER_ECONNLOST || rc == EMBER_ECONNECT) {
      if (!ember_last_error()[0])
        ember__client_set_error("%s: cannot reach the NAM", c->address);
      rc = EMBER_ECONNECT;
    }
    return rc;
  }
  rc = from_reply((Ember__AcceleratorList *)reply, accels, n_accels, platforms,
                  n_platforms);
  protobuf_c_message_free_unpacked(reply, NULL);
  return rc;
}
