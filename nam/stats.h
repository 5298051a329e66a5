/*
 * stats.h - ember-nam's one stats struct: what the daemon counts (tasks by
 * accelerator, platform and outcome; submits refused and why; latency per
 * stage; block bytes received; connections; frames; protocol errors), and
 * the one function that renders it, with gauges read from the server and
 * the engine, as Prometheus text (served on /metrics by metrics_http.c).
 *
 * Threads: the loop thread owns the struct. Every function here, the
 * render included, runs on the loop thread only; nothing here locks.
 */
#ifndef EMBER_NAM_STATS_H
#define EMBER_NAM_STATS_H

#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "accel.h"
#include "engine.h"
#include "plugins.h"

typedef struct nam_server nam_server;

/* Latency histogram buckets, upper bounds in nanoseconds: 10 us to 10 s,
 * 1-2.5-5 per decade. An observation above the last lands only in +Inf. */
#define NAM_STATS_BUCKETS 19
extern const uint64_t nam_stats_bucket_ns[NAM_STATS_BUCKETS];

/* Distinct label sets kept per family; beyond that, the rest are counted
 * together under the label value "other". */
#define NAM_STATS_MAX_SERIES 64

enum nam_stats_outcome {
  NAM_OUTCOME_OK,        /* status 0 */
  NAM_OUTCOME_FAILED,    /* any other error */
  NAM_OUTCOME_CANCELED,  /* EMBER_ECANCELED */
  NAM_OUTCOME_N
};

enum nam_stats_stage {
  NAM_STAGE_QUEUE,  /* queued in the engine until a worker took it */
  NAM_STAGE_EXEC,   /* run on the platform */
  NAM_STAGE_TOTAL,  /* Submit received to result ready, inside the NAM */
  NAM_STAGE_STAGE_IN,  /* device platforms: input blocks copied in */
  NAM_STAGE_STAGE_OUT, /* device platforms: output copied back */
  NAM_STAGE_N
};

enum nam_stats_transport { NAM_TRANSPORT_FD, NAM_TRANSPORT_INLINE };

typedef struct nam_stats_histogram {
  uint64_t bucket[NAM_STATS_BUCKETS]; /* per bucket, not cumulative */
  uint64_t count;
  uint64_t sum_ns;
} nam_stats_histogram;

typedef struct nam_stats_task_series {
  char accelerator[64];
  char platform[64];  /* "none" for a task canceled before it ran */
  uint64_t outcome[NAM_OUTCOME_N];
} nam_stats_task_series;

typedef struct nam_stats_reject_series {
  char accelerator[64];  /* "unknown" when the name is not registered */
  int error;             /* EMBER_E* */
  uint64_t count;
} nam_stats_reject_series;

/* Why a client was refused at accept, or dropped by conn_guard.c. */
enum nam_stats_refusal {
  NAM_REFUSED_MAX_CLIENTS_UNIX,
  NAM_REFUSED_MAX_CLIENTS_TCP,
  NAM_REFUSED_MAX_CLIENTS,
  NAM_REFUSED_PER_UID,
  NAM_REFUSED_PER_ADDRESS,
  NAM_REFUSED_NOFILE,         /* the clients' share of RLIMIT_NOFILE */
  NAM_REFUSED_N
};
enum nam_stats_drop {
  NAM_DROPPED_SEND_STALL,
  NAM_DROPPED_HANDSHAKE_TIMEOUT,
  NAM_DROPPED_FRAME_TIMEOUT,
  NAM_DROPPED_IDLE_TIMEOUT,
  NAM_DROPPED_MAX_STARTUPS,   /* a startup that made way for a newer one */
  NAM_DROPPED_NOFILE,         /* a startup that made way: out of descriptors */
  NAM_DROPPED_MAX_CLIENT_FDS,
  NAM_DROPPED_N
};

typedef struct nam_stats {
  /* the engine workers that send results count them (conn_reply.c): the
   * fields up to results_sent only under results_lock, so that a client
   * that has its result sees it counted */
  pthread_mutex_t results_lock;
  nam_stats_task_series tasks[NAM_STATS_MAX_SERIES];
  size_t n_tasks;
  nam_stats_task_series tasks_other;   /* once tasks[] is full */
  nam_stats_reject_series rejected[NAM_STATS_MAX_SERIES];
  size_t n_rejected;
  uint64_t rejected_other;             /* once rejected[] is full */
  nam_stats_histogram latency[NAM_STAGE_N];
  uint64_t results_sent;
  uint64_t blocks[2], block_bytes[2];  /* by enum nam_stats_transport */
  uint64_t connections_unix, connections_tcp;
  uint64_t protocol_errors;
  uint64_t frames[256];                /* received, by frame type */
  uint64_t leases_refused;             /* TCP clients refused a lease */
  uint64_t refused[NAM_REFUSED_N];     /* connections refused at accept */
  uint64_t dropped[NAM_DROPPED_N];     /* connections closed by a limit */
  /* the GAM link (gam_link.c); rendered when gam_configured */
  int gam_configured, gam_connected;
  uint64_t gam_heartbeats_sent, gam_reconnects;
} nam_stats;

/* st zeroed (calloc or memset), then nam_stats_init before the first
 * call; nam_stats_destroy after the last. */
void nam_stats_init(nam_stats *st);
void nam_stats_destroy(nam_stats *st);

/* Recording: from the loop thread, but nam_stats_task_done and
 * nam_stats_result_sent from any thread. */
void nam_stats_connection(nam_stats *st, int is_unix);
void nam_stats_frame(nam_stats *st, uint8_t type);
void nam_stats_protocol_error(nam_stats *st);
void nam_stats_lease_refused(nam_stats *st);
void nam_stats_refused(nam_stats *st, enum nam_stats_refusal why);
void nam_stats_dropped(nam_stats *st, enum nam_stats_drop why);
void nam_stats_block_received(nam_stats *st, enum nam_stats_transport tr,
                              uint64_t bytes);
/* A Submit refused with error (acc NULL: the accelerator is unknown). */
void nam_stats_task_rejected(nam_stats *st, const acc_descriptor *acc,
                             int error);
/* A task of acc whose done callback has run, received at received_ns
 * (CLOCK_MONOTONIC); counts its outcome and its stage latencies. */
void nam_stats_task_done(nam_stats *st, const acc_descriptor *acc,
                         const nam_task *task, uint64_t received_ns);
void nam_stats_result_sent(nam_stats *st);

/*
 * nam_stats_render - st, plus gauges read now from server (clients, tasks
 * in flight, block bytes held, node name) and engine (queue lengths,
 * platforms), as Prometheus text exposition format 0.0.4: every family
 * with HELP and TYPE, names prefixed ember_nam_, base units, label values
 * escaped. engine may be NULL (no engine gauges).
 * Returns 0 with a malloc'd, NUL-terminated text in *text (caller frees)
 * and its length in *len, or EMBER_ENOMEM.
 */
int nam_stats_render(nam_stats *st, nam_server *server,
                     nam_engine *engine, char **text, size_t *len);

/* Rendering helpers shared by stats.c and stats_platforms.c. */
void nam_stats_put_label(FILE *f, const char *name, const char *value);
void nam_stats_family(FILE *f, const char *name, const char *type,
                      const char *help);
/* The engine's platform families: tasks and failures per platform, block
 * cache, reprograms, accelerator/platform pair health, retries. */
void nam_stats_render_platforms(FILE *f, nam_engine *engine,
                                const nam_platform_status *ps, size_t np);
/* The plugin loader's families: plugins loaded, plugins refused by
 * reason (stats_plugins.c). */
void nam_stats_render_plugins(FILE *f, const nam_plugins *plugins);

#endif
