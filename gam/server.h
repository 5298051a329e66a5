/*
 * server.h - ember-gam's protocol listener: NAMs (Register, Heartbeat) and
 * apps (Acquire, Release) over TCP, on the daemon's libuv loop, framed as
 * in proto/frame.h and opened with Hello/Welcome like every ember peer.
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
