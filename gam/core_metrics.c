/* core_metrics.c - GET /metrics: the GAM's Prometheus text. */
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "core_internal.h"
#include "ember/ember_errors.h"
#include "frame.h"
#include "process_metrics.h"

static void family(FILE *f, const char *name, const char *type,
                   const char *help) {
  fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void counter(FILE *f, const char *name, const char *help, uint64_t v) {
  family(f, name, "counter", help);
  fprintf(f, "%s %llu\n", name, (unsigned long long)v);
}

const char *const gam_refusal_names[GAM_REFUSED_N] = {
  [GAM_REFUSED_MAX_CONNECTIONS] = "max_connections",
  [GAM_REFUSED_PER_ADDRESS] = "per_address",
  [GAM_REFUSED_STARTUPS_PER_ADDRESS] = "startups_per_address",
  [GAM_REFUSED_STARTUPS] = "startups",
  [GAM_REFUSED_NO_MEMORY] = "no_memory",
};

const char *const gam_closing_names[GAM_CLOSED_N] = {
  [GAM_CLOSED_HANDSHAKE_TIMEOUT] = "handshake_timeout",
  [GAM_CLOSED_FRAME_TIMEOUT] = "frame_timeout",
  [GAM_CLOSED_IDLE_TIMEOUT] = "idle_timeout",
  [GAM_CLOSED_SEND_STALL] = "send_stall",
  [GAM_CLOSED_EVICTED] = "startups_dropped",
  [GAM_CLOSED_TOO_BIG] = "frame_too_big",
  [GAM_CLOSED_BUFFERS_FULL] = "read_buffers_full",
};

/* The protocol port's connections (atomics: no lock needed). */
static void conn_metrics(FILE *f, const gam_conn_stats *s) {
  family(f, "ember_gam_connections", "gauge",
         "Connections to the protocol port, by state (handshake: no Hello "
         "yet).");
  uint64_t open = atomic_load(&s->open), startups = atomic_load(&s->startups);
  fprintf(f, "ember_gam_connections{state=\"handshake\"} %llu\n",
          (unsigned long long)startups);
  fprintf(f, "ember_gam_connections{state=\"open\"} %llu\n",
          (unsigned long long)(open > startups ? open - startups : 0));
  family(f, "ember_gam_read_buffer_bytes", "gauge",
         "Bytes of partly received frames held (max_read_buffers).");
  fprintf(f, "ember_gam_read_buffer_bytes %llu\n",
          (unsigned long long)atomic_load(&s->read_buffered));
  family(f, "ember_gam_connections_refused_total", "counter",
         "Connections refused at accept, by the limit that refused them.");
  for (int i = 0; i < GAM_REFUSED_N; i++)
    fprintf(f, "ember_gam_connections_refused_total{reason=\"%s\"} %llu\n",
            gam_refusal_names[i],
            (unsigned long long)atomic_load(&s->refused[i]));
  family(f, "ember_gam_connections_closed_total", "counter",
         "Connections the GAM closed, by reason (timeouts and limits).");
  for (int i = 0; i < GAM_CLOSED_N; i++)
    fprintf(f, "ember_gam_connections_closed_total{reason=\"%s\"} %llu\n",
            gam_closing_names[i],
            (unsigned long long)atomic_load(&s->closed[i]));
}

int gam_core_metrics_text(gam_core *c, char **text, size_t *len) {
  char *buf = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&buf, &size);
  if (!f) return EMBER_ENOMEM;
  pthread_mutex_lock(&c->lock);
  const gam_core_counters *n = &c->n;
  size_t up = 0, lost = 0, drained = 0, pending = 0, running = 0, leases = 0;
  for (size_t i = 0; i < c->n_nodes; i++) {
    if (c->nodes[i]->state == GAM_NODE_UP) up++;
    else lost++;
    if (c->nodes[i]->drained) drained++;
    leases += c->nodes[i]->n_leases;
  }
  for (gam_app *a = c->apps; a; a = a->next) {
    if (a->state == GAM_APP_PENDING) pending++;
    else running++;
  }
  family(f, "ember_gam_nodes", "gauge", "Nodes known to the GAM, by state.");
  fprintf(f, "ember_gam_nodes{state=\"up\"} %zu\n", up);
  fprintf(f, "ember_gam_nodes{state=\"lost\"} %zu\n", lost);
  family(f, "ember_gam_nodes_drained", "gauge", "Nodes drained by an admin.");
  fprintf(f, "ember_gam_nodes_drained %zu\n", drained);
  family(f, "ember_gam_apps", "gauge", "Apps not ended, by state.");
  fprintf(f, "ember_gam_apps{state=\"pending\"} %zu\n", pending);
  fprintf(f, "ember_gam_apps{state=\"running\"} %zu\n", running);
  family(f, "ember_gam_leases", "gauge", "Active leases.");
  fprintf(f, "ember_gam_leases %zu\n", leases);
  counter(f, "ember_gam_heartbeats_total", "Heartbeats handled.",
          n->heartbeats);
  counter(f, "ember_gam_registrations_total", "NAM registrations.",
          n->registrations);
  counter(f, "ember_gam_acquires_total", "Acquire requests accepted.",
          n->acquires);
  counter(f, "ember_gam_allocations_total", "Allocations sent to apps.",
          n->allocations);
  counter(f, "ember_gam_leases_granted_total", "Leases granted.",
          n->leases_granted);
  family(f, "ember_gam_leases_ended_total", "counter",
         "Leases ended, by reason.");
  fprintf(f, "ember_gam_leases_ended_total{reason=\"released\"} %llu\n",
          (unsigned long long)n->ended_released);
  fprintf(f, "ember_gam_leases_ended_total{reason=\"node_lost\"} %llu\n",
          (unsigned long long)n->ended_lost);
  fprintf(f, "ember_gam_leases_ended_total{reason=\"drained\"} %llu\n",
          (unsigned long long)n->ended_drained);
  fprintf(f, "ember_gam_leases_ended_total{reason=\"label\"} %llu\n",
          (unsigned long long)n->ended_label);
  fprintf(f, "ember_gam_leases_ended_total{reason=\"expired\"} %llu\n",
          (unsigned long long)n->ended_expired);
  counter(f, "ember_gam_nodes_lost_total", "Nodes declared lost.",
          n->nodes_lost);
  counter(f, "ember_gam_scheduling_skips_total",
          "Opportunities pending apps skipped waiting for affinity.",
          n->skips);
  gam_writer_stats ws;
  gam_writer_get_stats(c->w, &ws);
  counter(f, "ember_gam_store_errors_total",
          "Changes the state store refused (a bug: the core checks first).",
          ws.refused);
  counter(f, "ember_gam_store_changes_total",
          "Changes committed to the state store.", ws.changes);
  counter(f, "ember_gam_store_commits_total",
          "Transactions the writer thread committed (one fsync each).",
          ws.commits);
  family(f, "ember_gam_store_commit_seconds_total", "counter",
         "Time the writer thread spent committing, off the loop thread.");
  fprintf(f, "ember_gam_store_commit_seconds_total %.9f\n",
          (double)ws.commit_ns / 1e9);
  static const uint64_t bounds[] = GAM_HB_BUCKETS_US;
  family(f, "ember_gam_heartbeat_seconds", "histogram",
         "Time to handle one heartbeat in the core.");
  for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++)
    fprintf(f, "ember_gam_heartbeat_seconds_bucket{le=\"%g\"} %llu\n",
            (double)bounds[i] / 1e6, (unsigned long long)n->hb_buckets[i]);
  fprintf(f, "ember_gam_heartbeat_seconds_bucket{le=\"+Inf\"} %llu\n",
          (unsigned long long)n->hb_count);
  fprintf(f, "ember_gam_heartbeat_seconds_sum %.9f\n", (double)n->hb_sum_ns / 1e9);
  fprintf(f, "ember_gam_heartbeat_seconds_count %llu\n",
          (unsigned long long)n->hb_count);
  family(f, "ember_gam_uptime_seconds", "gauge", "Seconds since start.");
  fprintf(f, "ember_gam_uptime_seconds %llu\n",
          (unsigned long long)((clock_now_ns() - c->started_ns) / 1000000000u));
  family(f, "ember_gam_build_info", "gauge",
         "Always 1; labels give the version and wire protocol.");
  fprintf(f, "ember_gam_build_info{version=\"%s\",protocol=\"%d\"} 1\n",
          c->version ? c->version : "", PROTO_VERSION);
  core_unlock(c);
  if (c->opt.conn_stats) conn_metrics(f, c->opt.conn_stats);
  process_metrics_write(f);  /* /proc reads: outside the core's lock */
  if (fclose(f) != 0) {
    free(buf);
    return EMBER_ENOMEM;
  }
  *text = buf;
  *len = size;
  return 0;
}
