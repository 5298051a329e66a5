/*
 * stats_platforms.c - the engine's platforms as Prometheus families: the
 * per-platform figures of platform_counters.h (what each platform did,
 * its block cache, reprogramming), the bitstreams loaded, and the health
 * of each (accelerator, platform) pair. Snapshots read at render time.
 */
#include "stats.h"

#include <string.h>

#include "platform_counters.h"
#include "platform_kinds.h"

/* The per-platform figures (platform_counters.h) as a table of families. */
typedef struct platform_metric {
  const char *name, *type, *help, *label;
  int (*where)(const nam_platform_status *s);
  uint64_t (*value)(const nam_platform_status *s);
} platform_metric;

static int on_all(const nam_platform_status *s) { return 1; }
static int on_cached(const nam_platform_status *s) {
  return s->cache_budget != 0;
}
static int on_bitstream(const nam_platform_status *s) {
  return platform_kind_has_bitstream(s->kind);
}

#define VALUE(field, engine, ...)                                          \
  static uint64_t value_##field(const nam_platform_status *s) {            \
    return s->engine;                                                      \
  }
PLATFORM_COUNTERS(VALUE)
PLATFORM_COUNTERS_LOCAL(VALUE)
#undef VALUE

#define METRIC(field, engine, json, key, metric, type, where, label, help) \
  {metric, type, help, label, on_##where, value_##field},
static const platform_metric platform_metrics[] = {
    PLATFORM_COUNTERS(METRIC) PLATFORM_COUNTERS_LOCAL(METRIC)};
#undef METRIC

static void counter_families(FILE *f, const nam_platform_status *ps,
                             size_t np) {
  size_t n = sizeof platform_metrics / sizeof *platform_metrics;
  for (size_t m = 0; m < n; m++) {
    const platform_metric *pm = &platform_metrics[m];
    if (!pm->name[0]) continue;
    /* neighbours with one name are one family (labels tell them apart) */
    if (m == 0 || strcmp(platform_metrics[m - 1].name, pm->name) != 0)
      nam_stats_family(f, pm->name, pm->type, pm->help);
    for (size_t i = 0; i < np; i++) {
      uint64_t v = pm->value(&ps[i]);
      if (!pm->where(&ps[i]) || v == UINT64_MAX) continue;  /* no limit */
      fprintf(f, "ember_nam_%s{", pm->name);
      nam_stats_put_label(f, "platform", ps[i].name);
      fprintf(f, "%s%s} %llu\n", pm->label[0] ? "," : "", pm->label,
              (unsigned long long)v);
    }
  }
}

/* The bitstream each FPGA holds: its name is a label, not a figure. */
static void bitstream_family(FILE *f, const nam_platform_status *ps,
                             size_t np) {
  nam_stats_family(f, "bitstream_loaded", "gauge",
                   "1 for the bitstream each FPGA has loaded now.");
  for (size_t i = 0; i < np; i++) {
    if (!on_bitstream(&ps[i]) || !ps[i].loaded[0]) continue;
    fputs("ember_nam_bitstream_loaded{", f);
    nam_stats_put_label(f, "platform", ps[i].name);
    fputc(',', f);
    nam_stats_put_label(f, "accelerator", ps[i].loaded);
    fputs("} 1\n", f);
  }
}

/* "ember_nam_NAME{accelerator="A",platform="P"": a pair's series, open. */
static void pair_series(FILE *f, const char *name,
                        const nam_platform_status *s, unsigned k) {
  fprintf(f, "ember_nam_%s{", name);
  nam_stats_put_label(f, "accelerator", s->pairs[k].accelerator);
  fputc(',', f);
  nam_stats_put_label(f, "platform", s->name);
}

static int pair_has_figures(const nam_pair_status *p) {
  return strcmp(p->speed, "calibrated") == 0 ||
         strcmp(p->speed, "measured") == 0;
}

static void pair_families(FILE *f, const nam_platform_status *ps, size_t np) {
  static const char *const states[] = {"ready", "disabled", "probing"};
  nam_stats_family(f, "pair_state", "gauge",
                   "1 for the state each accelerator is in on each platform "
                   "(ready, disabled after repeated failures, probing).");
  for (size_t i = 0; i < np; i++)
    for (unsigned k = 0; k < ps[i].n_pairs; k++)
      for (int s = 0; s < 3; s++) {
        pair_series(f, "pair_state", &ps[i], k);
        fputc(',', f);
        nam_stats_put_label(f, "state", states[s]);
        fprintf(f, "} %d\n", strcmp(ps[i].pairs[k].state, states[s]) == 0);
      }
  nam_stats_family(f, "pair_errors_total", "counter",
                   "Failed attempts of each accelerator on each platform "
                   "(timeouts included).");
  for (size_t i = 0; i < np; i++)
    for (unsigned k = 0; k < ps[i].n_pairs; k++) {
      pair_series(f, "pair_errors_total", &ps[i], k);
      fprintf(f, "} %llu\n", (unsigned long long)ps[i].pairs[k].errors);
    }
  nam_stats_family(f, "pair_disabled_total", "counter",
                   "Times each accelerator was disabled on each platform.");
  for (size_t i = 0; i < np; i++)
    for (unsigned k = 0; k < ps[i].n_pairs; k++) {
      pair_series(f, "pair_disabled_total", &ps[i], k);
      fprintf(f, "} %llu\n", (unsigned long long)ps[i].pairs[k].disabled_count);
    }
  /* what dispatch expects: fixed + work x per unit (none where a timing
   * model decides, or before the figures exist) */
  nam_stats_family(f, "pair_fixed_seconds", "gauge",
                   "Expected fixed cost of one task of each accelerator on "
                   "each platform, from calibration and real tasks.");
  for (size_t i = 0; i < np; i++)
    for (unsigned k = 0; k < ps[i].n_pairs; k++)
      if (pair_has_figures(&ps[i].pairs[k])) {
        pair_series(f, "pair_fixed_seconds", &ps[i], k);
        fprintf(f, "} %.9g\n", ps[i].pairs[k].fixed_ns / 1e9);
      }
  nam_stats_family(f, "pair_seconds_per_unit", "gauge",
                   "Expected time per unit of work (sw: cell) of each "
                   "accelerator on each platform.");
  for (size_t i = 0; i < np; i++)
    for (unsigned k = 0; k < ps[i].n_pairs; k++)
      if (pair_has_figures(&ps[i].pairs[k])) {
        pair_series(f, "pair_seconds_per_unit", &ps[i], k);
        fprintf(f, "} %.9g\n", ps[i].pairs[k].ns_per_unit / 1e9);
      }
}

void nam_stats_render_platforms(FILE *f, nam_engine *engine,
                                const nam_platform_status *ps, size_t np) {
  counter_families(f, ps, np);
  bitstream_family(f, ps, np);
  pair_families(f, ps, np);
  nam_engine_counters c;
  nam_engine_get_counters(engine, &c);
  nam_stats_family(f, "retries_total", "counter",
                   "Task attempts moved to another platform after a failure.");
  fprintf(f, "ember_nam_retries_total %llu\n", (unsigned long long)c.retries);
}
