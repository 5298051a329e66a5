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
#include "proto/ember.pb-c.h"

typedef struct nam_server nam_server;

/* Limits that apply per client; reloadable. */
typedef struct nam_server_limits {
  size_t max_frame;          /* largest frame read or written */
  unsigned max_clients;      /* all listeners together */
  unsigned max_clients_unix; /* unix sockets: a full TCP side leaves these */
  unsigned max_clients_tcp;
  unsigned max_inflight;     /* tasks per client before reading pauses */
  uint64_t max_block_bytes;  /* bytes one client may make the NAM hold:
                                blocks, out blocks, its tasks' out blocks
                                and scratch (reserved at admission) */
  uint64_t max_memory;       /* the same for all clients together, with
                                their read buffers; 0: no bound */
  uint64_t max_send_queue;   /* reply bytes queued before reading pauses */
  uint64_t send_stall_ms;    /* over max_send_queue this long: closed */
  uint64_t handshake_ms;     /* no Hello this long after connecting: closed */
  uint64_t frame_ms;         /* a frame begun and not complete: closed */
  uint64_t idle_ms;          /* nothing sent or in flight: closed; 0 never */
  unsigned max_client_fds;   /* fds a client's frames may have pending
                                (0: PROTO_MAX_FDS_PER_SEND) */
  unsigned max_fds;          /* descriptors all clients together may make
                                the NAM hold (sockets, fds pending): what
                                RLIMIT_NOFILE leaves after the daemon's
                                own; 0: no bound */
  unsigned max_clients_per_uid;     /* unix sockets, per peer uid; 0: none */
  unsigned max_clients_per_address; /* TCP, per client address; 0: none */
  /* connections not through their Hello (sshd's MaxStartups): from
   * startups_start on, each new one drops the oldest of the peer holding
   * the most with a chance that rises from startups_rate percent to 100
   * at startups_full (0: no such budget) */
  unsigned startups_start, startups_rate, startups_full;
} nam_server_limits;

/* What the server holds now, for limits, Stats replies and gauges (the
 * counters live in the daemon's stats struct, stats.h). */
typedef struct nam_server_stats {
  unsigned clients;
  unsigned startups;   /* of them, not through their Hello yet */
  unsigned fds;        /* their sockets and fds waiting (max_fds) */
  unsigned inflight;
  /* bytes held for the clients (conn_memory.c): blocks they put, out
   * blocks of tasks done, reservations of tasks in flight, read buffers,
   * the working copies of state blocks;
   * held_bytes, their sum, is what max_memory bounds */
  uint64_t block_bytes, out_bytes, reserved_bytes, buffer_bytes;
  uint64_t state_bytes; /* working copies of state blocks */
  uint64_t held_bytes, max_memory;
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

/* The daemon's counters (stats.h), owned by the server; the daemon's other
 * parts (the GAM link) count into it too. Loop thread only. */
struct nam_stats *nam_server_metrics(nam_server *s);
/* The name the server gives itself in Welcome and metrics. */
const char *nam_server_name(const nam_server *s);
/* The loop the server runs on. */
uv_loop_t *nam_server_loop(const nam_server *s);
/* Tasks of accelerator acc in flight now (the GAM link's utilization). */
unsigned nam_server_inflight(const nam_server *s, const acc_descriptor *acc);

/* ---- leases of TCP clients (server_leases.c) ----------------------------
 * The server keeps each connection's lease; lease_check.c decides which
 * leases are good and when they end. Loop thread only. */

typedef struct nam_conn nam_conn;
struct nam_lease_check;

/* The lease check that admits TCP clients (lease_check.h), set when it
 * starts and reset to NULL when it closes; NULL: TCP clients need none. */
void nam_server_set_lease_check(nam_server *s, struct nam_lease_check *lc);
struct nam_lease_check *nam_server_lease_check(const nam_server *s);

/* nam_conn_set_lease - c presented this valid lease (label: at most 64
 * bytes are kept) bound to app_key (32 bytes, Ed25519): a fresh challenge
 * is made and the lease is held only once nam_conn_lease_prove accepts
 * the client's answer; then until the connection closes or is dropped
 * below. 0, or EMBER_EINTERNAL (no random bytes). */
int nam_conn_set_lease(nam_conn *c, uint64_t lease_id,
                       uint64_t expires_unix_ms, const char *label,
                       const uint8_t app_key[32]);
/* The challenge (32 bytes) c must answer with a LeaseProof, or NULL. */
const uint8_t *nam_conn_lease_challenge(const nam_conn *c);
/* nam_conn_lease_prove - check c's LeaseProof (proto/lease_proof.h): 0
 * and the lease is held, or EMBER_ELEASE. */
int nam_conn_lease_prove(nam_conn *c, const Ember__LeaseProof *p);
/* The label of the lease c holds, or NULL (no lease: a unix client, or a
 * NAM that checks none). */
const char *nam_conn_lease_label(const nam_conn *c);
/* The client's address, for logs. */
const char *nam_conn_peer(const nam_conn *c);

/* nam_server_leases_in_use - the distinct lease ids that open connections
 * hold (at most max written); returns how many were written. */
size_t nam_server_leases_in_use(const nam_server *s, uint64_t *ids,
                                size_t max);

/* nam_server_drop_lease - every open connection holding lease_id gets
 * Error ELEASE "lease ID ended" and is closed once it is sent. */
void nam_server_drop_lease(nam_server *s, uint64_t lease_id);

/* nam_server_drop_expired - likewise, "lease ID expired", for every open
 * connection whose lease expired by now_unix_ms. */
void nam_server_drop_expired(nam_server *s, uint64_t now_unix_ms);

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
