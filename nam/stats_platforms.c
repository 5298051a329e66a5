/*
 * stats_platforms.c - the engine's platforms as Prometheus families: what
 * each platform did, its block cache, reprogramming, and the health of
 * each (accelerator, platform) pair. Snapshots read at render time.
 */
#include "stats.h"

#include <string.h>

typedef uint64_t (*platform_value)(const nam_platform_status *s);

#define VALUE(field)                                                        \
  static uint64_t value_##field(const nam_platform_status *s) {             \
    return s->field;                                                        \
  }
VALUE(queued)
VALUE(completed)
VALUE(failed)
VALUE(retried_away)
VALUE(timeouts)
VALUE(reprograms)
VALUE(cache_hits)
VALUE(cache_misses)
VALUE(cache_evictions)
VALUE(cache_resident)
VALUE(cache_pinned)
VALUE(cache_blocks)

/* One family with a series per platform (devices only when dev_only). */
static void per_platform(FILE *f, const char *name, const char *type,
                         const char *help, const nam_platform_status *ps,
                         size_t np, platform_value value, int dev_only) {
  nam_stats_family(f, name, type, help);
  for (size_t i = 0; i < np; i++) {
    if (dev_only && !ps[i].cache_budget) continue;
    fprintf(f, "ember_nam_%s{", name);
    nam_stats_put_label(f, "platform", ps[i].name);
    fprintf(f, "} %llu\n", (unsigned long long)value(&ps[i]));
  }
}

static void cache_families(FILE *f, const nam_platform_status *ps,
                           size_t np) {
  per_platform(f, "cache_hits_total", "counter",
               "Input blocks found on the device already (no copy).", ps, np,
               value_cache_hits, 1);
  per_platform(f, "cache_misses_total", "counter",
               "Input blocks copied to the device for a task.", ps, np,
               value_cache_misses, 1);
  per_platform(f, "cache_evictions_total", "counter",
               "Cached blocks evicted to make room (least recently used).",
               ps, np, value_cache_evictions, 1);
  per_platform(f, "cache_resident_bytes", "gauge",
               "Bytes of blocks held in device memory now.", ps, np,
               value_cache_resident, 1);
  per_platform(f, "cache_pinned_bytes", "gauge",
               "Bytes of those pinned by running tasks.", ps, np,
               value_cache_pinned, 1);
  per_platform(f, "cache_blocks", "gauge", "Blocks held in device memory.",
               ps, np, value_cache_blocks, 1);
  nam_stats_family(f, "cache_budget_bytes", "gauge",
                   "Device memory the block cache may use.");
  for (size_t i = 0; i < np; i++) {
    if (!ps[i].cache_budget || ps[i].cache_budget == UINT64_MAX) continue;
    fputs("ember_nam_cache_budget_bytes{", f);
    nam_stats_put_label(f, "platform", ps[i].name);
    fprintf(f, "} %llu\n", (unsigned long long)ps[i].cache_budget);
  }
  nam_stats_family(f, "transfer_bytes_total", "counter",
                   "Bytes moved between host and device, by direction.");
  for (size_t i = 0; i < np; i++) {
    if (!ps[i].cache_budget) continue;
    fputs("ember_nam_transfer_bytes_total{", f);
    nam_stats_put_label(f, "platform", ps[i].name);
    fprintf(f, ",direction=\"to_device\"} %llu\n",
            (unsigned long long)ps[i].bytes_to);
    fputs("ember_nam_transfer_bytes_total{", f);
    nam_stats_put_label(f, "platform", ps[i].name);
    fprintf(f, ",direction=\"from_device\"} %llu\n",
            (unsigned long long)ps[i].bytes_from);
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
  per_platform(f, "platform_queued", "gauge",
               "Tasks queued that this platform can run.", ps, np,
               value_queued, 0);
  per_platform(f, "platform_completed_total", "counter",
               "Attempts that succeeded on each platform.", ps, np,
               value_completed, 0);
  per_platform(f, "platform_failed_total", "counter",
               "Attempts that failed on each platform.", ps, np,
               value_failed, 0);
  per_platform(f, "platform_retried_total", "counter",
               "Failed attempts sent on to another platform.", ps, np,
               value_retried_away, 0);
  per_platform(f, "platform_timeouts_total", "counter",
               "Attempts abandoned as hung (past the task timeout).", ps, np,
               value_timeouts, 0);
  nam_stats_family(f, "reprograms_total", "counter",
                   "Bitstreams loaded on each FPGA.");
  nam_stats_family(f, "bitstream_loaded", "gauge",
                   "1 for the bitstream each FPGA has loaded now.");
  for (size_t i = 0; i < np; i++) {
    if (strcmp(ps[i].kind, "fpga-emu") != 0) continue;
    fputs("ember_nam_reprograms_total{", f);
    nam_stats_put_label(f, "platform", ps[i].name);
    fprintf(f, "} %llu\n", (unsigned long long)value_reprograms(&ps[i]));
    if (!ps[i].loaded[0]) continue;
    fputs("ember_nam_bitstream_loaded{", f);
    nam_stats_put_label(f, "platform", ps[i].name);
    fputc(',', f);
    nam_stats_put_label(f, "accelerator", ps[i].loaded);
    fputs("} 1\n", f);
  }
  cache_families(f, ps, np);
  pair_families(f, ps, np);
  nam_engine_counters c;
  nam_engine_get_counters(engine, &c);
  nam_stats_family(f, "retries_total", "counter",
                   "Task attempts moved to another platform after a failure.");
  fprintf(f, "ember_nam_retries_total %llu\n", (unsigned long long)c.retries);
}
