/*
 * gam_load.h - the scale load program for ember-gam (gam_load.c: options,
 * spawning the GAM, sampling it, the report; gam_load_traffic.c: the
 * simulated NAMs and apps on one epoll loop).
 */
#ifndef EMBER_BENCH_GAM_LOAD_H
#define EMBER_BENCH_GAM_LOAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "lease.h"

/* ------------------------------------------------------------ histogram */

/* Latencies in ns, in log-linear buckets: 64 per power of two, so a
 * quantile is within 1.6% of the true sample (HDR-like, fixed size). */
#define LH_SUB_BITS 6
#define LH_SUB (1u << LH_SUB_BITS)
#define LH_BUCKETS ((64 - LH_SUB_BITS + 1) * LH_SUB)

typedef struct lat_hist {
  uint64_t count, sum_ns, max_ns;
  uint64_t b[LH_BUCKETS];
} lat_hist;

static inline size_t lh_index(uint64_t v) {
  if (v < LH_SUB) return (size_t)v;
  unsigned e = 63u - (unsigned)__builtin_clzll(v);  /* >= LH_SUB_BITS */
  uint64_t m = (v >> (e - LH_SUB_BITS)) - LH_SUB;   /* 0..LH_SUB-1 */
  return (size_t)(e - LH_SUB_BITS + 1) * LH_SUB + (size_t)m;
}

/* The middle of bucket i, in ns. */
static inline uint64_t lh_value(size_t i) {
  if (i < LH_SUB) return i;
  unsigned e = (unsigned)(i / LH_SUB) + LH_SUB_BITS - 1;
  uint64_t m = LH_SUB + i % LH_SUB;
  uint64_t lo = m << (e - LH_SUB_BITS), width = 1ull << (e - LH_SUB_BITS);
  return lo + width / 2;
}

static inline void lh_add(lat_hist *h, uint64_t ns) {
  h->b[lh_index(ns)]++;
  h->count++;
  h->sum_ns += ns;
  if (ns > h->max_ns) h->max_ns = ns;
}

static inline void lh_merge(lat_hist *into, const lat_hist *from) {
  for (size_t i = 0; i < LH_BUCKETS; i++) into->b[i] += from->b[i];
  into->count += from->count;
  into->sum_ns += from->sum_ns;
  if (from->max_ns > into->max_ns) into->max_ns = from->max_ns;
}

/* q in [0, 1]; 0 for an empty histogram; the maximum is exact. */
static inline uint64_t lh_quantile(const lat_hist *h, double q) {
  if (!h->count) return 0;
  uint64_t rank = (uint64_t)(q * (double)h->count + 0.5);
  if (rank < 1) rank = 1;
  if (rank >= h->count) return h->max_ns;
  uint64_t seen = 0;
  for (size_t i = 0; i < LH_BUCKETS; i++) {
    seen += h->b[i];
    if (seen >= rank) {
      uint64_t v = lh_value(i);
      return v < h->max_ns ? v : h->max_ns;
    }
  }
  return h->max_ns;
}

static inline double lh_mean(const lat_hist *h) {
  return h->count ? (double)h->sum_ns / (double)h->count : 0.0;
}

/* ------------------------------------------------------------- traffic */

typedef struct load_options {
  struct sockaddr_storage gam;   /* where NAMs and apps connect */
  socklen_t gam_len;
  unsigned nams;
  double rate;                   /* heartbeats per second per NAM */
  double duration_s;             /* steady phase */
  double apps_per_s;
  double hold_min_s, hold_max_s; /* an app holds its nodes this long */
  unsigned app_wait_ms;          /* Acquire.wait_ms */
  unsigned connect_per_s;        /* NAM connections opened per second */
  double ramp_timeout_s;         /* registering longer than this: go on */
  const char *const *labels;
  size_t n_labels;
  uint64_t seed;
  lease_key key;                 /* the GAM's cluster key: NAMs register */
} load_options;

/* Cumulative counts over the run. */
typedef struct load_counters {
  uint64_t connects, connect_failures, registered, register_errors;
  uint64_t disconnects;          /* the GAM closed a connection we kept */
  uint64_t hb_sent, hb_acked, hb_missing, hb_unexpected_acks;
  uint64_t nam_errors;           /* Error frames on NAM connections */
  uint64_t bad_frames;           /* undecodable or oversized */
  uint64_t ended_in_acks;        /* HeartbeatAck.ended_leases */
  uint64_t apps_started, app_connect_failures, acquires, allocations;
  uint64_t acquire_errors, acquire_timeouts, grants, bad_grants;
  uint64_t releases;
  uint64_t app_errors;           /* Error frames after an Allocation */
  uint64_t lease_ended_msgs;
} load_counters;

enum load_phase { LOAD_RAMP, LOAD_STEADY, LOAD_DRAIN };

/* What the hooks see once per second. The histograms hold this interval
 * only. */
typedef struct load_interval {
  enum load_phase phase;
  double t_s;                    /* since the run started */
  unsigned nams_up;
  unsigned apps_open;
  const load_counters *total;
  const lat_hist *hb, *lag, *alloc;
} load_interval;

typedef struct load_hooks {
  void *user;
  void (*second)(void *user, const load_interval *iv);
  /* Entering a phase (STEADY: every NAM registered or the ramp timed
   * out; DRAIN: the steady phase is over). */
  void (*phase)(void *user, enum load_phase entering, double t_s);
} load_hooks;

typedef struct load_result {
  load_counters at_steady, at_drain, total;
  lat_hist reg;                  /* Register -> ack */
  lat_hist hb_ramp, hb_steady;   /* Heartbeat -> ack, by phase */
  lat_hist hb_steady_read;       /* the same, to when this program read it */
  lat_hist lag_steady;           /* heartbeats sent behind schedule */
  lat_hist alloc;                /* Acquire -> Allocation */
  double ramp_s, steady_s;
  unsigned nams_up;
  char first_error[256];
} load_result;

/* gam_load_run - connect and register o->nams NAMs, heartbeat for
 * o->duration_s with apps coming and going, drain. Returns 0 (problems
 * are counted in *out), or -1 with a message in out->first_error when it
 * could not start at all. */
int gam_load_run(const load_options *o, const load_hooks *hooks,
                 load_result *out);
/* Ends the steady phase early (from a signal handler: it only sets a
 * flag). */
void gam_load_stop(void);

#endif
