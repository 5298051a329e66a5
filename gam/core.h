/*
 * core.h - ember-gam's core: the cluster state (nodes, labels, apps,
 * leases) kept in memory over the SQLite store, and what changes it: NAM
 * registrations and heartbeats, app acquires and releases, liveness. The
 * server (loop thread) calls these; the admin API calls core_admin.h from
 * its own thread; one lock covers both.
 *
 * Threads and the lock:
 *   - main thread: gam_core_create before any other thread uses the core,
 *     gam_core_destroy after they stopped (the admin API first: its stop
 *     joins libmicrohttpd's thread).
 *   - loop thread (server.c): every other call in this file.
 *   - admin thread (libmicrohttpd's one polling thread, admin_http.c):
 *     the calls in core_admin.h, nothing else.
 *   - writer thread (store_writer.h): never touches the core.
 * gam_core.lock guards all of the core's state (nodes, apps, leases, the
 * outbox, counters) and the writer's queueing calls, which need one
 * caller at a time. Every call that reads or changes that state (all but
 * gam_core_last_change, an atomic read, and the two frees) takes it on
 * entry and drops it (core_unlock, which publishes the call's changes)
 * before returning, so a call sees the state whole and no pointer into it
 * leaves the core: views are copied into JSON or text under the lock.
 * Read without it: what create sets and nothing changes (opt, rules,
 * version, w, started_ns). Lock order: the core's lock, then the
 * writer's (publish, stats); never the reverse. With the lock held the
 * core calls only wake (which must only uv_async_send), the writer's
 * non-blocking calls and the log; waiting for a commit (gam_writer_wait,
 * an admin's change) and reading events (gam_writer_events) happen after
 * the lock is dropped, so the loop never waits behind the disk. The cost:
 * an admin view holds the lock while it walks every node, and a heartbeat
 * arriving then waits that long.
 *
 * Why a lock and not the loop thread (as the NAM's /metrics does): every
 * entry point is a short critical section over memory (no disk, no
 * waiting), so the lock is held no longer than the loop would be busy
 * with the same request; an admin change must block its own thread until
 * the commit either way; and the loop route needs a uv_async_t, a request
 * queue and a reply handshake per request. One mutex and these rules are
 * less code. tests/integration/test_gam_admin_hammer.c checks them under
 * ThreadSanitizer (-DEMBER_TSAN=ON): admins read and change while NAMs
 * heartbeat, an app acquires and releases, and SIGHUP reloads.
 *
 * Every change is queued to the store's writer thread (store_writer.h)
 * before the call returns; the server holds the reply that acknowledges
 * it until the writer has committed it (gam_core_last_change), and the
 * admin calls wait for that themselves, so nothing acknowledged is lost
 * to a crash or a power cut, and the loop never waits for the disk.
 *
 * Messages for apps (Allocation, Error, LeaseEnded) can arise on any
 * thread (an admin drains a node): the core queues them as packed frames
 * in an outbox and calls wake(); the server takes them on its loop.
 */
#ifndef EMBER_GAM_CORE_H
#define EMBER_GAM_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "conn_stats.h"
#include "core_admin.h"
#include "lease.h"
#include "policy.h"
#include "store.h"
#include "store_writer.h"

typedef struct gam_core_options {
  gam_policy_params policy;        /* rules are copied */
  uint64_t heartbeat_interval_ms;
  unsigned lost_after;             /* missed heartbeats */
  unsigned slots_per_node;         /* 0 = no limit */
  uint64_t lease_ttl_ms;
  uint64_t acquire_timeout_ms;
  uint64_t app_grace_ms;           /* an app's connection gone this long:
                                      its leases end */
  lease_key key;
  const char *version;
  gam_writer *writer;              /* commits the changes (required) */
  /* the protocol port's connections, rendered in /metrics (NULL: none);
   * it must outlive the core */
  const gam_conn_stats *conn_stats;
} gam_core_options;

/* A frame for an app, already packed. */
typedef struct gam_outbox_item {
  uint64_t app_id;
  uint8_t type;                    /* EMBER__MSG_TYPE__* */
  uint8_t *payload;
  size_t len;
  struct gam_outbox_item *next;
} gam_outbox_item;

/* Loads the store's state (before o->writer has anything to do: the load
 * reads the store on the caller's thread). Nodes come back lost until they
 * heartbeat; their leases and apps stay. */
int gam_core_create(const gam_core_options *o, gam_store *store,
                    gam_core **out, char *err, size_t err_len);
void gam_core_destroy(gam_core *c);
void gam_core_set_wake(gam_core *c, void (*wake)(void *user), void *user);
/* The newest change queued: a reply made now acknowledges at most this
 * one. Any thread. */
uint64_t gam_core_last_change(gam_core *c);

int gam_core_register(gam_core *c, const Ember__Register *m, char *err,
                      size_t err_len);
/* Fills ack (free its arrays with gam_core_ack_clear) and *ack_needs: the
 * change the ack acknowledges (the node back up, new labels, leases it
 * ends, a drain), 0 when none; a lease this heartbeat granted to an app
 * is not the NAM's to wait for. EMBER_ENOTFOUND for a node that never
 * registered. */
int gam_core_heartbeat(gam_core *c, const Ember__Heartbeat *m,
                       Ember__HeartbeatAck *ack, uint64_t *ack_needs,
                       char *err, size_t err_len);
void gam_core_ack_clear(Ember__HeartbeatAck *ack);

/* Records a pending app; it is answered through the outbox once placed
 * (Allocation) or when its wait runs out. */
int gam_core_acquire(gam_core *c, const Ember__Acquire *m, uint64_t *app_id,
                     char *err, size_t err_len);
/* Who sends a request: the app its connection's Acquire made (0: none)
 * and the challenge that connection's Welcome carried (NULL: none). */
typedef struct gam_requester {
  uint64_t app_id;
  const uint8_t *challenge;        /* 32 bytes */
} gam_requester;

/* Ends leases of app m->app_id (all of them when m lists none, and the
 * app). It must be who's own app, or m->proof must be its key's signature
 * over who's challenge (proto/lease_proof.h); otherwise EMBER_EDENIED with
 * the same message whether that app exists or not. EMBER_ENOTFOUND: who's
 * own app has ended, or it holds a listed lease not (then none ends). The
 * app hears of each lease ended through the outbox (LeaseEnded). */
int gam_core_release(gam_core *c, const gam_requester *who,
                     const Ember__Release *m, char *err, size_t err_len);
/* Whether app_id has not ended (its connection holds something). */
bool gam_core_app_live(gam_core *c, uint64_t app_id);
/* The app's connection closed: a pending app ends; a running one keeps
 * its leases for app_grace (it may come back and Release them), then they
 * end (gam_core_tick). */
void gam_core_app_disconnected(gam_core *c, uint64_t app_id);

/* Liveness, acquire timeouts, lease expiry. Call a few times per
 * heartbeat interval. */
void gam_core_tick(gam_core *c);

/* Everything queued for apps, oldest first; free with gam_outbox_free. */
gam_outbox_item *gam_core_take_outbox(gam_core *c);
void gam_outbox_free(gam_outbox_item *items);

#endif
