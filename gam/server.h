/*
 * server.h - ember-gam's protocol listener: NAMs (Register, Heartbeat) and
 * apps (Acquire, Release) over TCP, on the daemon's libuv loop, framed as
 * in proto/frame.h and opened with Hello/Welcome like every ember peer.
 *
 * A NAM registers only with the cluster key (proto/node_auth.h): Welcome
 * carries a challenge, Register.auth answers it. A bad or missing answer,
 * or a Register for a node name another live connection holds, is refused
 * with an Error (EDENIED, EBUSY), logged, and the connection closed.
 *
 * A reply that acknowledges a change (a registration, an Allocation, a
 * LeaseEnded, an ack that ends leases) is held until the store's writer
 * has committed the change; replies that changed nothing (most heartbeats)
 * go at once, unless the same connection has one held before them.
 *
 * A Release acts only on the connection's own app (the one its Acquire
 * made) or on one whose key signs Release.proof (core.h); the answer for
 * any other app id is the same whether that app exists or not.
 *
 * Every byte from a peer is hostile, and so is holding a connection open
 * (server_guard.c): connections before Hello have a budget of their own
 * (max_startups with random early drop, max_startups_per_address, and
 * never more than half of max_connections), each address a limit
 * (max_connections_per_address); no Hello within handshake_timeout, a
 * frame begun and not finished within frame_timeout, replies left unread
 * for as long, or nothing held and nothing sent for idle_timeout close
 * it. Before Hello a frame may be at most GAM_HELLO_MAX bytes, refused at
 * its length; partial frames are held in buffers of their exact size,
 * counted against max_read_buffers before they are allocated. Refusals
 * and closes are counted (conn_stats.h) and logged once per interval.
 */
#ifndef EMBER_GAM_SERVER_H
#define EMBER_GAM_SERVER_H

#include <stddef.h>

#include <uv.h>

#include "conn_stats.h"
#include "core.h"
#include "store_writer.h"

typedef struct gam_server gam_server;

typedef struct gam_server_options {
  const char *listen;        /* HOST:PORT */
  size_t max_frame;
  unsigned max_connections;
  uint64_t tick_ms;          /* how often the core's liveness runs */
  uint64_t heartbeat_interval_ms; /* told to NAMs */
  /* A NAM connection silent this long no longer holds its node name: a
   * new authenticated Register for the name takes over (a NAM whose old
   * connection went half-open). Until then a second one is refused. */
  uint64_t nam_silent_ms;
  const lease_key *key;      /* the cluster key NAMs prove they hold */
  /* Replies that acknowledge a change wait until it commits. */
  gam_writer *writer;
  unsigned max_per_address;  /* connections from one address; 0: none */
  unsigned startups_start, startups_rate, startups_full; /* max_startups */
  unsigned startups_per_address; /* 0: no limit */
  uint64_t handshake_ms, frame_ms;
  uint64_t idle_ms;          /* 0: never */
  uint64_t max_read_buffers; /* bytes */
  gam_conn_stats *stats;     /* written here, rendered by /metrics */
} gam_server_options;

int gam_server_start(uv_loop_t *loop, gam_core *core,
                     const gam_server_options *o, gam_server **out,
                     char *err, size_t err_len);
/* Close the listener and every connection; run the loop, then destroy. */
void gam_server_close(gam_server *s);
void gam_server_destroy(gam_server *s);

#endif
