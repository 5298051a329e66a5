/* stats.c - ember-nam's counters and their Prometheus rendering (stats.h). */
#include "stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accels.h"
#include "clock.h"
#include "ember/ember_errors.h"
#include "frame.h"
#include "process_metrics.h"
#include "server.h"

#define NS_PER_S 1000000000.0

const uint64_t nam_stats_bucket_ns[NAM_STATS_BUCKETS] = {
  10000,       25000,       50000,                    /* 10 us .. */
  100000,      250000,      500000,
  1000000,     2500000,     5000000,                  /* 1 ms .. */
  10000000,    25000000,    50000000,
  100000000,   250000000,   500000000,
  1000000000,  2500000000,  5000000000, 10000000000,  /* 1 s .. 10 s */
};

static const char *const outcome_names[NAM_OUTCOME_N] = {"ok", "failed",
                                                         "canceled"};
static const char *const stage_names[NAM_STAGE_N] = {"queue", "exec", "total",
                                                      "stage_in", "stage_out"};
static const char *const transport_names[2] = {"fd", "inline"};

/* ---- recording --------------------------------------------------------- */

void nam_stats_connection(nam_stats *st, int is_unix) {
  if (is_unix)
    st->connections_unix++;
  else
    st->connections_tcp++;
}

void nam_stats_frame(nam_stats *st, uint8_t type) { st->frames[type]++; }

void nam_stats_protocol_error(nam_stats *st) { st->protocol_errors++; }

void nam_stats_lease_refused(nam_stats *st) { st->leases_refused++; }

void nam_stats_refused(nam_stats *st, enum nam_stats_refusal why) {
  st->refused[why]++;
}

void nam_stats_dropped(nam_stats *st, enum nam_stats_drop why) {
  st->dropped[why]++;
}

void nam_stats_block_received(nam_stats *st, enum nam_stats_transport tr,
                              uint64_t bytes) {
  st->blocks[tr]++;
  st->block_bytes[tr] += bytes;
}

void nam_stats_init(nam_stats *st) {
  pthread_mutex_init(&st->results_lock, NULL);
}

void nam_stats_destroy(nam_stats *st) {
  pthread_mutex_destroy(&st->results_lock);
}

void nam_stats_result_sent(nam_stats *st) {
  pthread_mutex_lock(&st->results_lock);
  st->results_sent++;
  pthread_mutex_unlock(&st->results_lock);
}

static void observe(nam_stats_histogram *h, uint64_t ns) {
  for (size_t i = 0; i < NAM_STATS_BUCKETS; i++)
    if (ns <= nam_stats_bucket_ns[i]) {
      h->bucket[i]++;
      break;
    }
  h->count++;
  h->sum_ns += ns;
}

static nam_stats_task_series *task_series(nam_stats *st, const char *acc,
                                          const char *platform) {
  for (size_t i = 0; i < st->n_tasks; i++)
    if (strcmp(st->tasks[i].accelerator, acc) == 0 &&
        strcmp(st->tasks[i].platform, platform) == 0)
      return &st->tasks[i];
  if (st->n_tasks == NAM_STATS_MAX_SERIES) return &st->tasks_other;
  nam_stats_task_series *s = &st->tasks[st->n_tasks++];
  snprintf(s->accelerator, sizeof s->accelerator, "%s", acc);
  snprintf(s->platform, sizeof s->platform, "%s", platform);
  return s;
}

void nam_stats_task_done(nam_stats *st, const acc_descriptor *acc,
                         const nam_task *task, uint64_t received_ns) {
  int status = nam_task_status(task);
  const char *platform = nam_task_platform(task);
  enum nam_stats_outcome o = status == 0                  ? NAM_OUTCOME_OK
                             : status == EMBER_ECANCELED ? NAM_OUTCOME_CANCELED
                                                          : NAM_OUTCOME_FAILED;
  pthread_mutex_lock(&st->results_lock);
  task_series(st, acc->name, platform && platform[0] ? platform : "none")
      ->outcome[o]++;
  const nam_task_times *tm = nam_task_get_times(task);
  if (tm->started) {
    observe(&st->latency[NAM_STAGE_QUEUE], tm->started - tm->queued);
    observe(&st->latency[NAM_STAGE_EXEC], tm->finished - tm->started);
  }
  /* device platforms: the copies in and out, parts of exec */
  if (tm->staged >= tm->started && tm->executed >= tm->staged && tm->staged) {
    observe(&st->latency[NAM_STAGE_STAGE_IN], tm->staged - tm->started);
    observe(&st->latency[NAM_STAGE_STAGE_OUT], tm->finished - tm->executed);
  }
  uint64_t now = clock_now_ns();
  observe(&st->latency[NAM_STAGE_TOTAL], now > received_ns ? now - received_ns : 0);
  pthread_mutex_unlock(&st->results_lock);
}

void nam_stats_task_rejected(nam_stats *st, const acc_descriptor *acc,
                             int error) {
  const char *name = acc ? acc->name : "unknown";
  for (size_t i = 0; i < st->n_rejected; i++)
    if (st->rejected[i].error == error &&
        strcmp(st->rejected[i].accelerator, name) == 0) {
      st->rejected[i].count++;
      return;
    }
  if (st->n_rejected == NAM_STATS_MAX_SERIES) {
    st->rejected_other++;
    return;
  }
  nam_stats_reject_series *s = &st->rejected[st->n_rejected++];
  snprintf(s->accelerator, sizeof s->accelerator, "%s", name);
  s->error = error;
  s->count = 1;
}

/* ---- rendering --------------------------------------------------------- */

/* A label value with \, " and newline escaped, as the format requires. */
void nam_stats_put_label(FILE *f, const char *name, const char *value) {
  fprintf(f, "%s=\"", name);
  for (const char *p = value; *p; p++) {
    if (*p == '\\')
      fputs("\\\\", f);
    else if (*p == '"')
      fputs("\\\"", f);
    else if (*p == '\n')
      fputs("\\n", f);
    else
      fputc(*p, f);
  }
  fputc('"', f);
}

void nam_stats_family(FILE *f, const char *name, const char *type,
                   const char *help) {
  fprintf(f, "# HELP ember_nam_%s %s\n# TYPE ember_nam_%s %s\n", name, help,
          name, type);
}

/* A counter family with one series per block transport. */
static void by_transport(FILE *f, const char *name, const char *help,
                         const uint64_t values[2]) {
  nam_stats_family(f, name, "counter", help);
  for (int t = 0; t < 2; t++) {
    fprintf(f, "ember_nam_%s{", name);
    nam_stats_put_label(f, "transport", transport_names[t]);
    fprintf(f, "} %llu\n", (unsigned long long)values[t]);
  }
}

static void histogram(FILE *f, const char *name, const char *label,
                      const char *value, const nam_stats_histogram *h) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < NAM_STATS_BUCKETS; i++) {
    cumulative += h->bucket[i];
    fprintf(f, "ember_nam_%s_bucket{", name);
    nam_stats_put_label(f, label, value);
    fprintf(f, ",le=\"%g\"} %llu\n", (double)nam_stats_bucket_ns[i] / NS_PER_S,
            (unsigned long long)cumulative);
  }
  fprintf(f, "ember_nam_%s_bucket{", name);
  nam_stats_put_label(f, label, value);
  fprintf(f, ",le=\"+Inf\"} %llu\n", (unsigned long long)h->count);
  fprintf(f, "ember_nam_%s_sum{", name);
  nam_stats_put_label(f, label, value);
  fprintf(f, "} %.9f\n", (double)h->sum_ns / NS_PER_S);
  fprintf(f, "ember_nam_%s_count{", name);
  nam_stats_put_label(f, label, value);
  fprintf(f, "} %llu\n", (unsigned long long)h->count);
}

static void render_counters(FILE *f, const nam_stats *st) {
  nam_stats_family(f, "tasks_total", "counter",
         "Tasks finished, by accelerator, platform and outcome.");
  for (size_t i = 0; i < st->n_tasks; i++)
    for (int o = 0; o < NAM_OUTCOME_N; o++) {
      fputs("ember_nam_tasks_total{", f);
      nam_stats_put_label(f, "accelerator", st->tasks[i].accelerator);
      fputc(',', f);
      nam_stats_put_label(f, "platform", st->tasks[i].platform);
      fputc(',', f);
      nam_stats_put_label(f, "outcome", outcome_names[o]);
      fprintf(f, "} %llu\n", (unsigned long long)st->tasks[i].outcome[o]);
    }
  if (st->n_tasks == NAM_STATS_MAX_SERIES)
    for (int o = 0; o < NAM_OUTCOME_N; o++)
      fprintf(f,
              "ember_nam_tasks_total{accelerator=\"other\",platform=\"other\","
              "outcome=\"%s\"} %llu\n",
              outcome_names[o], (unsigned long long)st->tasks_other.outcome[o]);

  nam_stats_family(f, "tasks_rejected_total", "counter",
         "Submits refused before queueing, by accelerator and error.");
  for (size_t i = 0; i < st->n_rejected; i++) {
    fputs("ember_nam_tasks_rejected_total{", f);
    nam_stats_put_label(f, "accelerator", st->rejected[i].accelerator);
    fputc(',', f);
    nam_stats_put_label(f, "error", ember_errname(st->rejected[i].error));
    fprintf(f, "} %llu\n", (unsigned long long)st->rejected[i].count);
  }
  if (st->n_rejected == NAM_STATS_MAX_SERIES)
    fprintf(f,
            "ember_nam_tasks_rejected_total{accelerator=\"other\","
            "error=\"other\"} %llu\n",
            (unsigned long long)st->rejected_other);

  nam_stats_family(f, "task_latency_seconds", "histogram",
         "Task latency by stage: queue (waiting for a platform), exec (on "
         "the platform), total (Submit received to result, inside the NAM); "
         "on device platforms also stage_in (blocks copied to the device) "
         "and stage_out (output copied back), both within exec.");
  for (int s = 0; s < NAM_STAGE_N; s++)
    histogram(f, "task_latency_seconds", "stage", stage_names[s],
              &st->latency[s]);

  nam_stats_family(f, "results_sent_total", "counter",
         "Result frames queued to clients still connected.");
  fprintf(f, "ember_nam_results_sent_total %llu\n",
          (unsigned long long)st->results_sent);

  by_transport(f, "blocks_received_total",
               "Input blocks accepted, by transport (fd: sealed memfd, inline).",
               st->blocks);
  by_transport(f, "block_received_bytes_total",
               "Bytes of input blocks accepted, by transport.", st->block_bytes);

  nam_stats_family(f, "connections_total", "counter",
         "Client connections accepted, by socket kind.");
  fprintf(f, "ember_nam_connections_total{socket=\"unix\"} %llu\n",
          (unsigned long long)st->connections_unix);
  fprintf(f, "ember_nam_connections_total{socket=\"tcp\"} %llu\n",
          (unsigned long long)st->connections_tcp);

  nam_stats_family(f, "protocol_errors_total", "counter",
         "Frames that broke the protocol (bad, unknown or out of place).");
  fprintf(f, "ember_nam_protocol_errors_total %llu\n",
          (unsigned long long)st->protocol_errors);

  nam_stats_family(f, "frames_received_total", "counter",
         "Frames received from clients, by message type.");
  uint64_t unknown = 0;
  for (int t = 0; t < 256; t++) {
    if (!proto_descriptor((uint8_t)t)) {
      unknown += st->frames[t];
      continue;
    }
    fputs("ember_nam_frames_received_total{", f);
    nam_stats_put_label(f, "type", proto_type_name((uint8_t)t));
    fprintf(f, "} %llu\n", (unsigned long long)st->frames[t]);
  }
  fprintf(f, "ember_nam_frames_received_total{type=\"unknown\"} %llu\n",
          (unsigned long long)unknown);

  nam_stats_family(f, "leases_refused_total", "counter",
         "TCP clients refused for their lease (none, forged, expired, for "
         "another node or a label not served).");
  fprintf(f, "ember_nam_leases_refused_total %llu\n",
          (unsigned long long)st->leases_refused);

  static const char *const refusal[NAM_REFUSED_N] = {
      "max_clients_unix", "max_clients_tcp", "max_clients",
      "max_clients_per_uid", "max_clients_per_address", "nofile"};
  nam_stats_family(f, "connections_refused_total", "counter",
         "Connections refused at accept, by the limit that was full.");
  for (int i = 0; i < NAM_REFUSED_N; i++)
    fprintf(f, "ember_nam_connections_refused_total{limit=\"%s\"} %llu\n",
            refusal[i], (unsigned long long)st->refused[i]);
  static const char *const drop[NAM_DROPPED_N] = {
      "send_stall_timeout", "handshake_timeout", "frame_timeout",
      "idle_timeout", "max_startups", "nofile", "max_client_fds"};
  nam_stats_family(f, "connections_dropped_total", "counter",
         "Connections the NAM closed for a limit: replies left unread past "
         "send_stall_timeout, no Hello, a frame not finished, idle, a "
         "connection without Hello dropped for a newer one (max_startups, "
         "or out of descriptors), file descriptors over max_client_fds.");
  for (int i = 0; i < NAM_DROPPED_N; i++)
    fprintf(f, "ember_nam_connections_dropped_total{limit=\"%s\"} %llu\n",
            drop[i], (unsigned long long)st->dropped[i]);
  if (!st->gam_configured) return;
  nam_stats_family(f, "gam_connected", "gauge",
         "1 while the NAM is registered with the GAM, else 0.");
  fprintf(f, "ember_nam_gam_connected %d\n", st->gam_connected);
  nam_stats_family(f, "gam_heartbeats_sent_total", "counter",
         "Heartbeats sent to the GAM.");
  fprintf(f, "ember_nam_gam_heartbeats_sent_total %llu\n",
          (unsigned long long)st->gam_heartbeats_sent);
  nam_stats_family(f, "gam_reconnects_total", "counter",
         "Connection attempts to the GAM after the first one (after a "
         "failure or a lost connection).");
  fprintf(f, "ember_nam_gam_reconnects_total %llu\n",
          (unsigned long long)st->gam_reconnects);
}

static void render_gauges(FILE *f, nam_server *server, nam_engine *engine) {
  nam_server_stats ss;
  nam_server_get_stats(server, &ss);
  nam_stats_family(f, "info", "gauge", "Always 1; labels name this NAM and its version.");
  fputs("ember_nam_info{", f);
  nam_stats_put_label(f, "node", nam_server_name(server));
  fputc(',', f);
  nam_stats_put_label(f, "version", EMBER_VERSION);
  fputs("} 1\n", f);
  nam_stats_family(f, "build_info", "gauge",
                   "Always 1; labels give the version and wire protocol.");
  fputs("ember_nam_build_info{", f);
  nam_stats_put_label(f, "version", EMBER_VERSION);
  fprintf(f, ",protocol=\"%d\"} 1\n", PROTO_VERSION);
  nam_stats_family(f, "clients", "gauge", "Clients connected now.");
  fprintf(f, "ember_nam_clients %u\n", ss.clients);
  nam_stats_family(f, "clients_without_hello", "gauge",
         "Connections not through their Hello yet (max_startups).");
  fprintf(f, "ember_nam_clients_without_hello %u\n", ss.startups);
  nam_stats_family(f, "client_fds", "gauge",
         "File descriptors the clients make the NAM hold: their sockets "
         "and the fds that came with frames not yet read.");
  fprintf(f, "ember_nam_client_fds %u\n", ss.fds);
  nam_stats_family(f, "tasks_in_flight", "gauge",
         "Tasks received and not yet finished, all clients.");
  fprintf(f, "ember_nam_tasks_in_flight %u\n", ss.inflight);
  nam_stats_family(f, "block_bytes", "gauge", "Bytes of input blocks held now.");
  fprintf(f, "ember_nam_block_bytes %llu\n", (unsigned long long)ss.block_bytes);
  nam_stats_family(f, "out_block_bytes", "gauge",
         "Bytes of out blocks of finished tasks held now.");
  fprintf(f, "ember_nam_out_block_bytes %llu\n",
          (unsigned long long)ss.out_bytes);
  nam_stats_family(f, "state_copy_bytes", "gauge",
         "Bytes of the working copies of state blocks, counted when the "
         "block is put.");
  fprintf(f, "ember_nam_state_copy_bytes %llu\n",
          (unsigned long long)ss.state_bytes);
  nam_stats_family(f, "reserved_bytes", "gauge",
         "Bytes reserved by tasks in flight at admission: the out blocks "
         "and scratch their plans declare.");
  fprintf(f, "ember_nam_reserved_bytes %llu\n",
          (unsigned long long)ss.reserved_bytes);
  nam_stats_family(f, "read_buffer_bytes", "gauge",
         "Bytes of the clients' read buffers.");
  fprintf(f, "ember_nam_read_buffer_bytes %llu\n",
          (unsigned long long)ss.buffer_bytes);
  nam_stats_family(f, "held_bytes", "gauge",
         "Bytes the clients make the NAM hold in all (blocks, out blocks, "
         "reservations, read buffers): what max_memory bounds.");
  fprintf(f, "ember_nam_held_bytes %llu\n", (unsigned long long)ss.held_bytes);
  nam_stats_family(f, "max_memory_bytes", "gauge",
         "max_memory: the bound on held_bytes (0: none).");
  fprintf(f, "ember_nam_max_memory_bytes %llu\n",
          (unsigned long long)ss.max_memory);
  if (!engine) return;

  nam_stats_family(f, "queue_length", "gauge",
         "Tasks waiting in each accelerator's queue.");
  for (size_t i = 0; i < nam_accels_count(); i++) {
    const acc_descriptor *acc = nam_accels_get(i);
    fputs("ember_nam_queue_length{", f);
    nam_stats_put_label(f, "accelerator", acc->name);
    fprintf(f, "} %u\n", nam_engine_queue_length(engine, acc));
  }
  nam_platform_status ps[16];
  size_t np = nam_engine_platforms(engine, ps, 16);
  nam_stats_family(f, "platform_workers", "gauge", "Worker threads of each platform.");
  for (size_t i = 0; i < np; i++) {
    fputs("ember_nam_platform_workers{", f);
    nam_stats_put_label(f, "platform", ps[i].name);
    fputc(',', f);
    nam_stats_put_label(f, "kind", ps[i].kind);
    fputc(',', f);
    nam_stats_put_label(f, "state", ps[i].state);
    fprintf(f, "} %u\n", ps[i].workers);
  }
  nam_stats_family(f, "platform_tasks_running", "gauge",
         "Tasks running on each platform now.");
  for (size_t i = 0; i < np; i++) {
    fputs("ember_nam_platform_tasks_running{", f);
    nam_stats_put_label(f, "platform", ps[i].name);
    fprintf(f, "} %u\n", ps[i].running);
  }
  nam_stats_render_platforms(f, engine, ps, np);
}

int nam_stats_render(nam_stats *st, nam_server *server,
                     nam_engine *engine, char **text, size_t *len) {
  char *buf = NULL;
  size_t size = 0;
  FILE *f = open_memstream(&buf, &size);
  if (!f) return EMBER_ENOMEM;
  pthread_mutex_lock(&st->results_lock);
  render_counters(f, st);
  pthread_mutex_unlock(&st->results_lock);
  nam_stats_render_plugins(f, nam_accels_plugins());
  render_gauges(f, server, engine);
  process_metrics_write(f);
  int bad = ferror(f);
  if (fclose(f) != 0 || bad) {
    free(buf);
    return EMBER_ENOMEM;
  }
  *text = buf;
  *len = size;
  return 0;
}
