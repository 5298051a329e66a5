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
 */
#ifndef EMBER_GAM_SERVER_H
#define EMBER_GAM_SERVER_H

#include <stddef.h>

#include <uv.h>

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
} gam_server_options;

int gam_server_start(uv_loop_t *loop, gam_core *core,
                     const gam_server_options *o, gam_server **out,
                     char *err, size_t err_len);
/* Close the listener and every connection; run the loop, then destroy. */
void gam_server_close(gam_server *s);
void gam_server_destroy(gam_server *s);

#endif
