/* introspect.c - what accelerators and platforms a NAM (or the embedded
 * engine) offers, as an ember_listing: its structs are the library's size
 * and reached through pointers, so a program built against older headers
 * reads the fields it knows (ember.h "ABI"). The back ends build it. */
#include "introspect.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "engine.h"
#include "frame.h"
#include "platform_counters.h"
#include "plugins.h"

struct ember_listing {
  ember_accel_info *accels;
  size_t n_accels;
  ember_platform_info *platforms;
  size_t n_platforms;
  ember_pair_info *pairs;          /* every platform's, in order */
  const ember_pair_info **pair_ptrs;
  char **strings;                  /* what the structs' strings point to */
  size_t n_strings, cap_strings;
  int failed;                      /* an allocation failed */
};

/* A string the listing owns; "" (static) when out of memory, with failed
 * set so that the whole listing is refused. */
static const char *keep(ember_listing *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *keep(ember_listing *l, const char *fmt, ...) {
  if (l->n_strings == l->cap_strings) {
    size_t cap = l->cap_strings ? 2 * l->cap_strings : 32;
    char **s = realloc(l->strings, cap * sizeof *s);
    if (!s) {
      l->failed = 1;
      return "";
    }
    l->strings = s;
    l->cap_strings = cap;
  }
  va_list ap;
  va_start(ap, fmt);
  char *s = NULL;
  int n = vasprintf(&s, fmt, ap);
  va_end(ap);
  if (n < 0) {
    l->failed = 1;
    return "";
  }
  l->strings[l->n_strings++] = s;
  return s;
}

static ember_listing *listing_new(size_t na, size_t np, size_t n_pairs) {
  ember_listing *l = calloc(1, sizeof *l);
  if (!l) return NULL;
  l->accels = calloc(na ? na : 1, sizeof *l->accels);
  l->platforms = calloc(np ? np : 1, sizeof *l->platforms);
  l->pairs = calloc(n_pairs ? n_pairs : 1, sizeof *l->pairs);
  l->pair_ptrs = calloc(n_pairs ? n_pairs : 1, sizeof *l->pair_ptrs);
  if (!l->accels || !l->platforms || !l->pairs || !l->pair_ptrs) {
    ember_listing_free(l);
    return NULL;
  }
  l->n_accels = na;
  l->n_platforms = np;
  for (size_t i = 0; i < na; i++) l->accels[i].size = sizeof *l->accels;
  for (size_t i = 0; i < np; i++) l->platforms[i].size = sizeof *l->platforms;
  for (size_t i = 0; i < n_pairs; i++) {
    l->pairs[i].size = sizeof *l->pairs;
    l->pair_ptrs[i] = &l->pairs[i];
  }
  return l;
}

int ember__listing_from_engine(const ember_client *c, nam_engine *e,
                               ember_listing **out) {
  size_t na = ember__accels_count(c->accels);
  nam_platform_status ps[16];
  size_t np = nam_engine_platforms(e, ps, 16);
  size_t n_pairs = 0;
  for (size_t i = 0; i < np; i++) n_pairs += ps[i].n_pairs;
  ember_listing *l = listing_new(na, np, n_pairs);
  if (!l) return EMBER_ENOMEM;
  for (size_t i = 0; i < na; i++) {
    const acc_descriptor *d = ember__accels_get(c->accels, i);
    ember_accel_info *a = &l->accels[i];
    char platforms[256];
    a->name = keep(l, "%s", d->name);
    a->version = d->version;
    nam_engine_platforms_for(e, d, platforms, sizeof platforms);
    a->platforms = keep(l, "%s", platforms);
    a->queued = nam_engine_queue_length(e, d);
    a->origin = keep(l, "%s", ember__accel_origin(c->accels, d));
  }
  ember_pair_info *q = l->pairs;
  for (size_t i = 0; i < np; i++) {
    const nam_platform_status *s = &ps[i];
    ember_platform_info *p = &l->platforms[i];
    p->name = keep(l, "%s", s->name);
    p->kind = keep(l, "%s", s->kind);
    p->state = keep(l, "%s", s->state);
    p->device = keep(l, "%s", s->device);
    p->loaded = keep(l, "%s", s->loaded);
#define COPY(field, engine, ...) p->field = s->engine;
    PLATFORM_COUNTERS(COPY)
#undef COPY
    p->pairs = &l->pair_ptrs[q - l->pairs];
    p->n_pairs = s->n_pairs;
    for (unsigned k = 0; k < s->n_pairs; k++, q++) {
      q->accelerator = keep(l, "%s", s->pairs[k].accelerator);
      q->state = keep(l, "%s", s->pairs[k].state);
      q->completed = s->pairs[k].completed;
      q->errors = s->pairs[k].errors;
      q->timeouts = s->pairs[k].timeouts;
      q->disabled_count = s->pairs[k].disabled_count;
      q->consecutive_failures = s->pairs[k].consecutive_failures;
      q->speed = keep(l, "%s", s->pairs[k].speed ? s->pairs[k].speed
                                                 : "unknown");
      q->fixed_ns = s->pairs[k].fixed_ns;
      q->ns_per_unit = s->pairs[k].ns_per_unit;
    }
  }
  *out = l;
  return 0;
}

int ember__listing_from_reply(const Ember__AcceleratorList *m,
                              ember_listing **out) {
  size_t n_pairs = 0;
  for (size_t i = 0; i < m->n_platforms; i++) n_pairs += m->platforms[i]->n_pairs;
  ember_listing *l = listing_new(m->n_accelerators, m->n_platforms, n_pairs);
  if (!l) return EMBER_ENOMEM;
  for (size_t i = 0; i < m->n_accelerators; i++) {
    const Ember__AcceleratorInfo *s = m->accelerators[i];
    ember_accel_info *a = &l->accels[i];
    a->name = keep(l, "%s", s->name);
    a->version = s->version;
    char *joined = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&joined, &len);
    if (f) {
      for (size_t k = 0; k < s->n_platforms; k++)
        fprintf(f, "%s%s", k ? "," : "", s->platforms[k]);
      fclose(f);
    }
    a->platforms = keep(l, "%s", joined ? joined : "");
    if (!joined) l->failed = 1;
    free(joined);
    a->queued = s->queued;
    /* a NAM older than the field: its accelerators are all built-in */
    a->origin = keep(l, "%s", s->origin ? s->origin : "built-in");
  }
  ember_pair_info *q = l->pairs;
  for (size_t i = 0; i < m->n_platforms; i++) {
    const Ember__PlatformInfo *s = m->platforms[i];
    ember_platform_info *p = &l->platforms[i];
    p->name = keep(l, "%s", s->name);
    p->kind = keep(l, "%s", s->kind);
    p->state = keep(l, "%s", s->state);
    p->device = keep(l, "%s", s->device ? s->device : "");
    p->loaded = keep(l, "%s", s->loaded ? s->loaded : "");
#define COPY(field, ...) p->field = s->field;  /* same names on the wire */
    PLATFORM_COUNTERS(COPY)
#undef COPY
    p->pairs = &l->pair_ptrs[q - l->pairs];
    p->n_pairs = s->n_pairs;
    for (size_t k = 0; k < s->n_pairs; k++, q++) {
      const Ember__PairInfo *r = s->pairs[k];
      q->accelerator = keep(l, "%s", r->accelerator);
      q->state = keep(l, "%s", r->state);
      q->completed = r->completed;
      q->errors = r->errors;
      q->timeouts = r->timeouts;
      q->disabled_count = r->disabled_count;
      q->consecutive_failures = r->consecutive_failures;
      /* an older NAM sends no speed */
      q->speed = keep(l, "%s", r->speed ? r->speed : "unknown");
      q->fixed_ns = r->fixed_ns;
      q->ns_per_unit = r->ns_per_unit;
    }
  }
  *out = l;
  return 0;
}

int ember_list_accelerators(ember_client *c, ember_listing **out) {
  *out = NULL;
  int rc = c->backend->list_accelerators(c, out);
  if (rc == 0 && (*out)->failed) {
    ember_listing_free(*out);
    *out = NULL;
    rc = EMBER_ENOMEM;
  }
  return rc;
}

size_t ember_listing_accelerators(const ember_listing *l) {
  return l ? l->n_accels : 0;
}

const ember_accel_info *ember_listing_accelerator(const ember_listing *l,
                                                  size_t i) {
  return l && i < l->n_accels ? &l->accels[i] : NULL;
}

size_t ember_listing_platforms(const ember_listing *l) {
  return l ? l->n_platforms : 0;
}

const ember_platform_info *ember_listing_platform(const ember_listing *l,
                                                  size_t i) {
  return l && i < l->n_platforms ? &l->platforms[i] : NULL;
}

void ember_listing_free(ember_listing *l) {
  if (!l) return;
  for (size_t i = 0; i < l->n_strings; i++) free(l->strings[i]);
  free(l->strings);
  free(l->accels);
  free(l->platforms);
  free(l->pairs);
  free(l->pair_ptrs);
  free(l);
}
