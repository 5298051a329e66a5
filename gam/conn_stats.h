/*
 * conn_stats.h - what ember-gam's protocol port did with its connections,
 * for /metrics: written by the loop thread (server.c, server_guard.c),
 * read by the admin thread (core_metrics.c), hence atomics. main.c owns
 * the struct; it outlives both.
 */
#ifndef EMBER_GAM_CONN_STATS_H
#define EMBER_GAM_CONN_STATS_H

#include <stdatomic.h>
#include <stdint.h>

/* Why a new connection was refused at accept. */
typedef enum gam_refusal {
  GAM_REFUSED_MAX_CONNECTIONS,     /* max_connections */
  GAM_REFUSED_PER_ADDRESS,         /* max_connections_per_address */
  GAM_REFUSED_STARTUPS_PER_ADDRESS, /* max_startups_per_address */
  GAM_REFUSED_STARTUPS,            /* max_startups: dropped, the newcomer */
  GAM_REFUSED_NO_MEMORY,
  GAM_REFUSED_N
} gam_refusal;

/* Why the GAM closed a connection it had accepted (peers closing, and
 * protocol errors, are not counted here). */
typedef enum gam_closing {
  GAM_CLOSED_HANDSHAKE_TIMEOUT,    /* no Hello within handshake_timeout */
  GAM_CLOSED_FRAME_TIMEOUT,        /* a frame not finished in time */
  GAM_CLOSED_IDLE_TIMEOUT,         /* idle_timeout */
  GAM_CLOSED_SEND_STALL,           /* its replies unread for frame_timeout */
  GAM_CLOSED_EVICTED,              /* max_startups: an older one dropped */
  GAM_CLOSED_TOO_BIG,              /* a frame over the limit (Hello's, or
                                      max_frame) */
  GAM_CLOSED_BUFFERS_FULL,         /* max_read_buffers */
  GAM_CLOSED_N
} gam_closing;

typedef struct gam_conn_stats {
  atomic_uint_fast64_t open;       /* connections now */
  atomic_uint_fast64_t startups;   /* of them before Hello */
  atomic_uint_fast64_t read_buffered; /* bytes of partial frames held */
  atomic_uint_fast64_t refused[GAM_REFUSED_N];
  atomic_uint_fast64_t closed[GAM_CLOSED_N];
} gam_conn_stats;

/* Prometheus label values, by index. */
extern const char *const gam_refusal_names[GAM_REFUSED_N];
extern const char *const gam_closing_names[GAM_CLOSED_N];

#endif
