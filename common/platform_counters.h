/*
 * platform_counters.h - the figures a NAM reports for each platform,
 * described once. Each line drives the copying code on every hop: the
 * engine's nam_platform_status -> PlatformInfo on the wire
 * (nam/listing.c) -> ember_platform_info (client/lib/introspect.c) ->
 * `ember accelerators --json` (client/cli/cmd_accelerators.c), and the
 * NAM's /metrics (nam/stats_platforms.c).
 *
 * A new figure is one line here, its source in the engine's
 * nam_platform_status, and a field of the same name in PlatformInfo
 * (proto/ember.proto, a new number) and ember_platform_info (ember.h, at
 * the end); a field missing from any of them fails the build. Figures
 * only the NAM's metrics show go in PLATFORM_COUNTERS_LOCAL.
 *
 * X(field, engine, json, key, metric, type, where, label, help):
 *   field   its name in PlatformInfo and ember_platform_info (never renamed:
 *           the wire and the public struct keep their names and numbers)
 *   engine  the nam_platform_status field it comes from
 *   json    the --json object it goes in: top (the platform) or cache
 *   key     its key there
 *   metric  ember_nam_<metric> on /metrics, "" for none; entries next to
 *           each other with one metric name share the family
 *   type    the metric's type: "counter" or "gauge"
 *   where   the platforms it has a series for: all, cached (those with a
 *           block cache), bitstream (those of a bitstream kind)
 *   label   an extra label on its series, "" for none
 *   help    the metric's HELP text
 * A value of UINT64_MAX means "no limit": null in --json, no series.
 *
 * Macros only: the CLI includes it without linking anything of the NAM.
 */
#ifndef EMBER_PLATFORM_COUNTERS_H
#define EMBER_PLATFORM_COUNTERS_H

#define PLATFORM_COUNTERS(X)                                                 \
  X(workers, workers, top, "workers", "", "", all, "", "")                   \
  X(queued, queued, top, "queued", "platform_queued", "gauge", all, "",      \
    "Tasks queued that this platform can run.")                              \
  X(running, running, top, "running", "", "", all, "", "")                   \
  X(completed, completed, top, "completed", "platform_completed_total",      \
    "counter", all, "", "Attempts that succeeded on each platform.")         \
  X(failed, failed, top, "failed", "platform_failed_total", "counter", all,  \
    "", "Attempts that failed on each platform.")                            \
  X(retried, retried_away, top, "retried", "platform_retried_total",         \
    "counter", all, "", "Failed attempts sent on to another platform.")      \
  X(timeouts, timeouts, top, "timeouts", "platform_timeouts_total",          \
    "counter", all, "",                                                      \
    "Attempts abandoned as hung (past the task timeout).")                   \
  X(reprograms, reprograms, top, "reprograms", "reprograms_total",           \
    "counter", bitstream, "", "Bitstreams loaded on each FPGA.")             \
  X(cache_budget, cache_budget, cache, "budget", "cache_budget_bytes",       \
    "gauge", cached, "", "Device memory the block cache may use.")           \
  X(cache_resident, cache_resident, cache, "resident",                       \
    "cache_resident_bytes", "gauge", cached, "",                             \
    "Bytes of blocks held in device memory now.")                            \
  X(cache_blocks, cache_blocks, cache, "blocks", "cache_blocks", "gauge",    \
    cached, "", "Blocks held in device memory.")                             \
  X(cache_hits, cache_hits, cache, "hits", "cache_hits_total", "counter",    \
    cached, "", "Input blocks found on the device already (no copy).")       \
  X(cache_misses, cache_misses, cache, "misses", "cache_misses_total",       \
    "counter", cached, "", "Input blocks copied to the device for a task.")  \
  X(cache_evictions, cache_evictions, cache, "evictions",                    \
    "cache_evictions_total", "counter", cached, "",                          \
    "Cached blocks evicted to make room (least recently used).")             \
  X(bytes_to, bytes_to, cache, "bytes_to", "transfer_bytes_total",           \
    "counter", cached, "direction=\"to_device\"",                            \
    "Bytes moved between host and device, by direction.")                    \
  X(bytes_from, bytes_from, cache, "bytes_from", "transfer_bytes_total",     \
    "counter", cached, "direction=\"from_device\"",                          \
    "Bytes moved between host and device, by direction.")

/* The NAM's own: on /metrics only, not on the wire. */
#define PLATFORM_COUNTERS_LOCAL(X)                                           \
  X(cache_pinned, cache_pinned, none, "", "cache_pinned_bytes", "gauge",     \
    cached, "", "Bytes of those pinned by running tasks.")

#endif
