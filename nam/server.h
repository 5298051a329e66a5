/*
 * server.h - ember-nam's sockets: listeners (unix, TCP) and client
 * connections speaking the frame protocol, on the daemon's libuv loop.
 * The loop thread owns every connection; engine workers hand finished tasks
 * back through a uv_async_t.
 */
#ifndef EMBER_NAM_SERVER_H
#define EMBER_NAM_SERVER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#include "engine.h"

typedef struct nam_server nam_server;

/* Limits that apply per client; reloadable. */
typedef struct nam_server_limits {
  size_t max_frame;          /* largest frame read or written */
  unsigned max_clients;
  unsigned max_inflight;     /* tasks per client before reading pauses */
  uint64_t max_block_bytes;  /* block bytes one client may hold */
} nam_server_limits;

/* What the server holds now, for limits, Stats replies and gauges (the
 * counters live in the daemon's stats struct, stats.h). */
typedef struct nam_server_stats {
  unsigned clients;
  unsigned inflight;
  uint64_t block_bytes;
} nam_server_stats;

int nam_server_create(uv_loop_t *loop, nam_engine *engine,
                      const nam_server_limits *limits, const char *name,
                      nam_server **out);

/* nam_server_listen - listen on "unix:PATH" (created with mode, and group
 * if not empty; a stale socket file is replaced) or "tcp:HOST:PORT". */
int nam_server_listen(nam_server *s, const char *address, unsigned mode,
                      const char *group, char *err, size_t err_len);

void nam_server_set_limits(nam_server *s, const nam_server_limits *limits);

/* nam_server_drain - close the listeners and refuse new tasks
 * (ESHUTDOWN); in-flight tasks still deliver their results. on_idle is
 * called on the loop once nothing is in flight. */
void nam_server_drain(nam_server *s, void (*on_idle)(nam_server *s, void *user),
                      void *user);

void nam_server_get_stats(nam_server *s, nam_server_stats *out);

/* The daemon's counters (stats.h), owned by the server; loop thread only. */
const struct nam_stats *nam_server_metrics(const nam_server *s);
/* The name the server gives itself in Welcome and metrics. */
const char *nam_server_name(const nam_server *s);

/* nam_server_flush - deliver the results of tasks that finished (also run
 * from the loop whenever a worker signals). Used at shutdown after the
 * engine was destroyed, so every task has finished. */
void nam_server_flush(nam_server *s);

/* nam_server_forget_engine - the engine was destroyed (its block cache
 * with it): connections closed from now on leave it alone. */
void nam_server_forget_engine(nam_server *s);

/* Close every connection and handle; the loop can then end. Tasks still
 * running are canceled and their results dropped. */
void nam_server_close(nam_server *s);
/* Free once the loop has run the close callbacks. */
void nam_server_destroy(nam_server *s);

#endif
