/*
 * store.h - ember-gam's state in SQLite: nodes, labels, apps, leases and
 * an event log. The daemon's in-memory state is a cache of this; every
 * change is committed here before the GAM acknowledges it, so a kill -9
 * and restart loses nothing, and ids come from AUTOINCREMENT so nothing
 * is handed out twice.
 *
 * The database runs in WAL mode with synchronous=FULL: a commit is on
 * disk when the call returns. The daemon makes its changes through
 * store_writer.h, which runs these calls on a thread of its own, many
 * changes to a commit. The schema carries
 * its version in PRAGMA user_version; gam_store_open() migrates an older
 * file step by step inside one transaction and refuses a newer one.
 *
 * Labels: a node's effective labels are those its NAM reports (origin
 * "nam") plus those an admin added (origin "admin", on), minus those an
 * admin removed (origin "admin", off). Disabled accelerators are volatile
 * (heartbeat state) and live in memory only.
 *
 * Each function is one committed change (several statements go through a
 * savepoint), unless called between gam_store_begin() and
 * gam_store_commit(), where a failing function undoes only its own part.
 * Strings are bound as parameters: any bytes are data, never SQL.
 *
 * Threads: one gam_store is used by one thread at a time (in the daemon,
 * the start-up load, then only the writer thread). Errors: 0 or a negative EMBER_E*, with the detail (often
 * SQLite's own message) in the store for gam_store_error():
 *   EMBER_EINVAL    a NULL string, a value out of range, or a row the
 *                   schema refuses (an empty id, a label longer than 64,
 *                   wanted 0, a lease that expires before it is issued)
 *   EMBER_ENOTFOUND the node, app or lease named does not exist
 *   EMBER_ENOMEM    SQLite ran out of memory
 *   EMBER_EIO       anything else SQLite reports (disk, locks, corruption)
 */
#ifndef EMBER_GAM_STORE_H
#define EMBER_GAM_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GAM_STORE_SCHEMA_VERSION 1

typedef struct gam_store gam_store;

/* Open (creating) the database at path ("" or ":memory:" for a private
 * in-memory one, for tests) and migrate it; *out is the handle (NULL on
 * failure), closed with gam_store_close(). err (may be NULL) gets
 * "path: reason" on failure ("state directory DIR is not writable:
 * REASON" when the directory is the trouble). EMBER_EIO when it cannot be
 * opened or is not
 * SQLite, EMBER_EVERSION when its user_version is newer than this build
 * (the file is left untouched), EMBER_EFORMAT when it is another
 * application's database (another application_id, or tables but no
 * schema version). */
int gam_store_open(const char *path, gam_store **out, char *err,
                   size_t err_len);
/* Finalize the statements and close (an open transaction is rolled
 * back). NULL is a no-op. */
void gam_store_close(gam_store *s);
/* Cap the database file at about bytes (0: no cap; SQLite's
 * max_page_count, never below what the file holds now): a change that
 * needs more fails as on a full disk (EMBER_EIO, "the disk is full..."). */
int gam_store_set_max_size(gam_store *s, uint64_t bytes);
/* The last failure's detail; valid until the next call on s. */
const char *gam_store_error(const gam_store *s);
/* The file's schema version (GAM_STORE_SCHEMA_VERSION once open). */
int gam_store_user_version(gam_store *s);

/* Group several changes into one commit. begin takes the write lock at
 * once; begin inside a transaction, or commit with none open, is
 * EMBER_EINVAL (no nesting). After a failed commit, call rollback.
 * rollback with none open (SQLite may have rolled back after an I/O
 * error) is a no-op. */
int gam_store_begin(gam_store *s);
int gam_store_commit(gam_store *s);
int gam_store_rollback(gam_store *s);

/* ---- nodes */
typedef enum gam_node_state { GAM_NODE_UP = 0, GAM_NODE_LOST = 1 } gam_node_state;

/* Insert or update a node on Register: address, state up, registered and
 * last seen now. A node registering again keeps its drained flag. */
int gam_store_node_register(gam_store *s, const char *id, const char *address,
                            uint64_t now_ms);
/* last_seen becomes now_ms when the state is up; a node found lost keeps
 * the time it was last up. EMBER_ENOTFOUND for an unknown node (also for
 * set_drained). */
int gam_store_node_set_state(gam_store *s, const char *id,
                             gam_node_state state, uint64_t now_ms);
int gam_store_node_set_drained(gam_store *s, const char *id, bool drained);
/* Replace the labels the NAM reports (origin "nam") in one change: all of
 * labels[0..n) or, on failure, none (a duplicate counts once). Admin
 * overrides stay. EMBER_ENOTFOUND for an unknown node. */
int gam_store_node_set_reported(gam_store *s, const char *id,
                                const char *const *labels, size_t n);
/* Admin override: on adds the label, off removes it (even a reported one).
 * EMBER_ENOTFOUND for an unknown node. */
int gam_store_label_override(gam_store *s, const char *node,
                             const char *label, bool on);
/* Drop an admin override, going back to what the NAM reports; 0 when
 * there was none, EMBER_ENOTFOUND for an unknown node. */
int gam_store_label_clear(gam_store *s, const char *node, const char *label);

/* ---- apps and leases */
typedef enum gam_app_state {
  GAM_APP_PENDING = 0,   /* waiting for leases */
  GAM_APP_RUNNING = 1,   /* holds every lease it asked for */
  GAM_APP_ENDED = 2,
} gam_app_state;

/* A new app, pending; *id_out (may be NULL) gets its id. Ids of apps,
 * leases and events are never handed out twice, across restarts too. */
int gam_store_app_create(gam_store *s, const char *name, const char *label,
                         unsigned wanted, uint64_t now_ms, uint64_t *id_out);
/* The same with the id chosen by the caller (the daemon numbers its apps
 * and leases itself, so that its writer thread can commit them later):
 * EMBER_EINVAL for id 0 or one already used. */
int gam_store_app_insert(gam_store *s, uint64_t id, const char *name,
                         const char *label, unsigned wanted, uint64_t now_ms);
/* The largest app and lease ids ever used (0 when none), so that the next
 * ones are new across restarts. */
int gam_store_last_ids(gam_store *s, uint64_t *app_id, uint64_t *lease_id);
/* EMBER_ENOTFOUND for an unknown app. Ending an app also ends the leases
 * it still holds (reason "app ended"), so none of them is loaded again. */
int gam_store_app_set_state(gam_store *s, uint64_t id, gam_app_state state,
                            uint64_t now_ms);

/* A new active lease; EMBER_ENOTFOUND for an unknown app or node. */
int gam_store_lease_create(gam_store *s, uint64_t app_id, const char *node,
                           const char *label, uint64_t issued_unix_ms,
                           uint64_t expires_unix_ms, uint64_t *id_out);
int gam_store_lease_insert(gam_store *s, uint64_t id, uint64_t app_id,
                           const char *node, const char *label,
                           uint64_t issued_unix_ms, uint64_t expires_unix_ms);
/* End a lease (no-op if it already ended: the first reason stays);
 * reason: "released", "node lost", "drained", "label removed", "expired".
 * EMBER_ENOTFOUND for an unknown lease. */
int gam_store_lease_end(gam_store *s, uint64_t id, const char *reason,
                        uint64_t now_ms);

/* ---- event log: node NULL or "", app_id 0 and detail NULL or "" mean
 * none. */
int gam_store_event(gam_store *s, uint64_t now_ms, const char *kind,
                    const char *node, uint64_t app_id, const char *detail);

/* ---- loading at start: each row once, nodes by id, labels by node then
 * label, apps and leases by id; all four from one read transaction. A
 * NULL callback skips its rows. A callback returning nonzero stops the
 * load and gam_store_load returns that value. A row's strings are valid
 * until its callback returns. */
typedef struct gam_store_node_row {
  const char *id, *address;
  gam_node_state state;
  bool drained;
  uint64_t registered_ms, last_seen_ms;
} gam_store_node_row;

typedef struct gam_store_label_row {
  const char *node, *label;
  bool admin;   /* origin admin (else nam) */
  bool on;      /* admin: added (true) or removed (false) */
} gam_store_label_row;

typedef struct gam_store_app_row {
  uint64_t id;
  const char *name, *label;
  unsigned wanted;
  gam_app_state state;
  uint64_t created_ms;
} gam_store_app_row;

typedef struct gam_store_lease_row {
  uint64_t id, app_id;
  const char *node, *label;
  uint64_t issued_unix_ms, expires_unix_ms;
} gam_store_lease_row;

typedef struct gam_store_visitor {
  int (*node)(void *user, const gam_store_node_row *row);
  int (*label)(void *user, const gam_store_label_row *row);
  int (*app)(void *user, const gam_store_app_row *row);      /* not ended */
  int (*lease)(void *user, const gam_store_lease_row *row);  /* active */
} gam_store_visitor;

int gam_store_load(gam_store *s, const gam_store_visitor *v, void *user);

/* The newest limit events (0: all), newest first (for GET /v1/events);
 * callback as above. node and detail are "" when there was none. */
typedef struct gam_store_event_row {
  uint64_t id, at_ms, app_id;
  const char *kind, *node, *detail;
} gam_store_event_row;
int gam_store_events(gam_store *s, unsigned limit,
                     int (*fn)(void *user, const gam_store_event_row *row),
                     void *user);

#endif
