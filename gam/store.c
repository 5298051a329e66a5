/*
 * store.c - ember-gam's SQLite store: opening (WAL, synchronous=FULL,
 * foreign keys, migration), the prepared statements, transactions and
 * every change. The schema is in store_schema.c, the reads in
 * store_load.c.
 *
 * Each function is one change: a single statement is a transaction by
 * itself, and a function of several statements wraps them in a savepoint
 * (its own transaction outside gam_store_begin(), a part of the caller's
 * inside). Every string is bound as a parameter, never put in the SQL.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ember/ember_errors.h"
#include "store_int.h"

/* How long a statement waits for another process's lock (a backup tool,
 * the sqlite3 shell) before it fails. */
#define GAM_STORE_BUSY_MS 5000

static const char *const stmt_sql[GAM_ST_COUNT] = {
  [GAM_ST_BEGIN] = "BEGIN IMMEDIATE",
  [GAM_ST_COMMIT] = "COMMIT",
  [GAM_ST_ROLLBACK] = "ROLLBACK",
  [GAM_ST_SAVEPOINT] = "SAVEPOINT gam_store_op",
  [GAM_ST_RELEASE] = "RELEASE gam_store_op",
  [GAM_ST_ROLLBACK_TO] = "ROLLBACK TO gam_store_op",
  [GAM_ST_USER_VERSION] = "PRAGMA user_version",

  [GAM_ST_NODE_EXISTS] = "SELECT 1 FROM nodes WHERE id = ?1",
  /* A node registering again keeps its drained flag: that is the
   * admin's decision, not the NAM's. */
  [GAM_ST_NODE_REGISTER] =
    "INSERT INTO nodes (id, address, state, drained, registered_ms,"
    "                   last_seen_ms, state_ms)"
    " VALUES (?1, ?2, 0, 0, ?3, ?3, ?3)"
    " ON CONFLICT (id) DO UPDATE SET address = excluded.address,"
    "   registered_ms = excluded.registered_ms,"
    "   last_seen_ms = excluded.last_seen_ms,"
    "   state_ms = CASE WHEN state = 0 THEN state_ms ELSE excluded.state_ms"
    "              END,"
    "   state = 0",
  /* last_seen_ms moves only while the node is up: a node found lost was
   * last seen before that. */
  [GAM_ST_NODE_SET_STATE] =
    "UPDATE nodes SET"
    "   state_ms = CASE WHEN state = ?2 THEN state_ms ELSE ?3 END,"
    "   last_seen_ms = CASE WHEN ?2 = 0 THEN ?3 ELSE last_seen_ms END,"
    "   state = ?2"
    " WHERE id = ?1",
  [GAM_ST_NODE_SET_DRAINED] = "UPDATE nodes SET drained = ?2 WHERE id = ?1",

  [GAM_ST_LABELS_DROP_REPORTED] =
    "DELETE FROM labels WHERE node = ?1 AND origin = 'nam'",
  /* A label reported twice is one label. */
  [GAM_ST_LABEL_ADD_REPORTED] =
    "INSERT INTO labels (node, label, origin, added) VALUES (?1, ?2, 'nam', 1)"
    " ON CONFLICT DO NOTHING",
  [GAM_ST_LABEL_OVERRIDE] =
    "INSERT INTO labels (node, label, origin, added)"
    " VALUES (?1, ?2, 'admin', ?3)"
    " ON CONFLICT (node, label, origin) DO UPDATE SET added = excluded.added",
  [GAM_ST_LABEL_CLEAR] =
    "DELETE FROM labels WHERE node = ?1 AND label = ?2 AND origin = 'admin'",

  /* ?5 = 0: the next id (AUTOINCREMENT); else that id */
  [GAM_ST_APP_CREATE] =
    "INSERT INTO apps (id, name, label, wanted, state, created_ms, state_ms)"
    " VALUES (nullif(?5, 0), ?1, ?2, ?3, 0, ?4, ?4)",
  [GAM_ST_APP_SET_STATE] =
    "UPDATE apps SET state = ?2, state_ms = ?3 WHERE id = ?1",
  [GAM_ST_APP_END_LEASES] =
    "UPDATE leases SET ended_ms = ?2, end_reason = 'app ended'"
    " WHERE app_id = ?1 AND ended_ms IS NULL",

  [GAM_ST_LEASE_CREATE] =
    "INSERT INTO leases (id, app_id, node, label, issued_unix_ms,"
    "                    expires_unix_ms)"
    " VALUES (nullif(?6, 0), ?1, ?2, ?3, ?4, ?5)",
  /* the largest id each table ever used, deleted rows included */
  [GAM_ST_LAST_IDS] =
    "SELECT (SELECT coalesce(max(seq), 0) FROM sqlite_sequence"
    "        WHERE name = 'apps'),"
    "       (SELECT coalesce(max(seq), 0) FROM sqlite_sequence"
    "        WHERE name = 'leases')",
  [GAM_ST_LEASE_END] =
    "UPDATE leases SET ended_ms = ?2, end_reason = ?3"
    " WHERE id = ?1 AND ended_ms IS NULL",
  [GAM_ST_LEASE_EXISTS] = "SELECT 1 FROM leases WHERE id = ?1",

  [GAM_ST_EVENT] =
    "INSERT INTO events (at_ms, kind, node, app_id, detail)"
    " VALUES (?1, ?2, nullif(?3, ''), nullif(?4, 0), nullif(?5, ''))",

  [GAM_ST_LOAD_NODES] =
    "SELECT id, address, state, drained, registered_ms, last_seen_ms"
    " FROM nodes ORDER BY id",
  [GAM_ST_LOAD_LABELS] =
    "SELECT node, label, origin = 'admin', added"
    " FROM labels ORDER BY node, label, origin",
  [GAM_ST_LOAD_APPS] =
    "SELECT id, name, label, wanted, state, created_ms"
    " FROM apps WHERE state <> 2 ORDER BY id",
  [GAM_ST_LOAD_LEASES] =
    "SELECT id, app_id, node, label, issued_unix_ms, expires_unix_ms"
    " FROM leases WHERE ended_ms IS NULL ORDER BY id",
  [GAM_ST_EVENTS] =
    "SELECT id, at_ms, kind, node, app_id, detail"
    " FROM events ORDER BY id DESC LIMIT ?1",
};

/* ------------------------------------------------------------------------ */
/* Errors and statements                                                     */

int gam_store_failf(gam_store *s, int code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(s->err, sizeof s->err, fmt, ap);
  va_end(ap);
  return code;
}

int gam_store_fail(gam_store *s, int rc) {
  if ((rc & 0xff) == SQLITE_FULL)  /* SQLite says only "database or disk is full" */
    snprintf(s->err, sizeof s->err, "the disk is full, or the database "
             "reached database_max_size (%s)", sqlite3_errmsg(s->db));
  else
    snprintf(s->err, sizeof s->err, "%s", sqlite3_errmsg(s->db));
  if (rc == SQLITE_CONSTRAINT_FOREIGNKEY) return EMBER_ENOTFOUND;
  if ((rc & 0xff) == SQLITE_CONSTRAINT) return EMBER_EINVAL;
  if ((rc & 0xff) == SQLITE_NOMEM) return EMBER_ENOMEM;
  return EMBER_EIO;
}

sqlite3_stmt *gam_store_stmt_get(gam_store *s, gam_store_stmt id) {
  sqlite3_stmt *st = s->st[id];
  sqlite3_reset(st);
  sqlite3_clear_bindings(st);
  return st;
}

/* Step a statement that returns no rows; leave it reset. */
static int run(gam_store *s, sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  int ret = rc == SQLITE_DONE ? 0 : gam_store_fail(s, rc);
  sqlite3_reset(st);
  return ret;
}

static int run_id(gam_store *s, gam_store_stmt id) {
  return run(s, gam_store_stmt_get(s, id));
}

/* Does the row asked for by a bound "SELECT 1 ... WHERE id = ?1" exist?
 * 1 or 0, or a negative error. */
static int exists(gam_store *s, sqlite3_stmt *st) {
  int rc = sqlite3_step(st);
  int ret = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0
                                                     : gam_store_fail(s, rc);
  sqlite3_reset(st);
  return ret;
}

static int node_exists(gam_store *s, const char *id) {
  sqlite3_stmt *st = gam_store_stmt_get(s, GAM_ST_NODE_EXISTS);
  sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
  return exists(s, st);
}

static void bind_u64(sqlite3_stmt *st, int i, uint64_t v) {
  sqlite3_bind_int64(st, i, (sqlite3_int64)v);
}

/* Strings the store needs. NULL is refused here rather than bound as an
 * SQL NULL, which some statements (nullif, ON CONFLICT) would accept. */
#define NEED(s, arg)                                                      \
  do {                                                                    \
    if (!(arg))                                                           \
      return gam_store_failf((s), EMBER_EINVAL, "%s: %s is NULL",         \
                             __func__, #arg);                             \
  } while (0)

/* ------------------------------------------------------------------------ */
/* Changes of several statements                                             */

int gam_store_op_begin(gam_store *s, bool write, bool *outer) {
  *outer = sqlite3_get_autocommit(s->db) != 0;
  if (*outer && write) {
    int ret = run_id(s, GAM_ST_BEGIN);
    if (ret) return ret;
  }
  int ret = run_id(s, GAM_ST_SAVEPOINT);
  if (ret && *outer && write) gam_store_op_end(s, true, ret);
  return ret;
}

int gam_store_op_end(gam_store *s, bool outer, int rc) {
  if (rc == 0) {
    rc = run_id(s, GAM_ST_RELEASE);
    /* Released in a transaction we began: commit it. */
    if (rc == 0 && outer && !sqlite3_get_autocommit(s->db))
      rc = run_id(s, GAM_ST_COMMIT);
    if (rc == 0) return 0;
  }
  /* Undo this change only, keeping the first failure's message. SQLite
   * may already have rolled the whole transaction back (a full disk, an
   * I/O error): then there is nothing left to undo. */
  char keep[sizeof s->err];
  memcpy(keep, s->err, sizeof keep);
  if (outer) {
    if (!sqlite3_get_autocommit(s->db)) run_id(s, GAM_ST_ROLLBACK);
  } else if (!sqlite3_get_autocommit(s->db)) {
    if (run_id(s, GAM_ST_ROLLBACK_TO) == 0) run_id(s, GAM_ST_RELEASE);
  }
  memcpy(s->err, keep, sizeof keep);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Opening and closing                                                       */

/* WAL: readers never block the writer, and a commit is one append to the
 * log. An in-memory database has no log and says "memory". */
static int set_wal(gam_store *s, bool memory) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(s->db, "PRAGMA journal_mode = WAL", -1, &st,
                              NULL);
  if (rc != SQLITE_OK) return gam_store_fail(s, rc);
  rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) {
    int ret = gam_store_fail(s, rc);
    sqlite3_finalize(st);
    return ret;
  }
  const char *mode = (const char *)sqlite3_column_text(st, 0);
  int ret = 0;
  if (!mode || strcmp(mode, memory ? "memory" : "wal") != 0)
    ret = gam_store_failf(s, EMBER_EIO,
                          "cannot use WAL journal mode (got \"%s\")",
                          mode ? mode : "?");
  sqlite3_finalize(st);
  return ret;
}

static int exec(gam_store *s, const char *sql) {
  int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
  return rc == SQLITE_OK ? 0 : gam_store_fail(s, rc);
}

static int prepare_all(gam_store *s) {
  for (int i = 0; i < GAM_ST_COUNT; i++) {
    if (!stmt_sql[i])
      return gam_store_failf(s, EMBER_EINTERNAL, "statement %d has no SQL",
                             i);
    int rc = sqlite3_prepare_v3(s->db, stmt_sql[i], -1,
                                SQLITE_PREPARE_PERSISTENT, &s->st[i], NULL);
    if (rc != SQLITE_OK) {
      int ret = gam_store_fail(s, rc);
      char msg[sizeof s->err];
      memcpy(msg, s->err, sizeof msg);
      gam_store_failf(s, ret, "preparing statement %d: %s", i, msg);
      return ret;
    }
  }
  return 0;
}

/* SQLite says only "unable to open database file" when the directory is
 * the trouble; it must be writable for the file, its log and shared
 * memory index. */
static int check_dir(gam_store *s, const char *path) {
  char copy[4096];
  if (snprintf(copy, sizeof copy, "%s", path) >= (int)sizeof copy)
    return gam_store_failf(s, EMBER_EINVAL, "path too long");
  const char *dir = dirname(copy);
  struct stat st;
  if (stat(dir, &st) == 0 && !S_ISDIR(st.st_mode)) errno = ENOTDIR;
  else if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) == 0) return 0;
  return gam_store_failf(s, EMBER_EIO, "state directory %s is not "
                         "writable: %s", dir, strerror(errno));
}

static int open_db(gam_store *s, const char *path) {
  bool memory = !*path || strcmp(path, ":memory:") == 0;
  if (!memory) {
    int ret = check_dir(s, path);
    if (ret) return ret;
  }
  int rc = sqlite3_open_v2(memory ? ":memory:" : path, &s->db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                               SQLITE_OPEN_NOMUTEX,
                           NULL);
  if (rc != SQLITE_OK) {
    if (!s->db) return gam_store_failf(s, EMBER_ENOMEM, "out of memory");
    return gam_store_fail(s, rc) == EMBER_ENOMEM ? EMBER_ENOMEM : EMBER_EIO;
  }
  sqlite3_extended_result_codes(s->db, 1);
  sqlite3_busy_timeout(s->db, GAM_STORE_BUSY_MS);

  int ret = set_wal(s, memory);
  /* FULL: a commit is on disk before the GAM acknowledges it, even if
   * the power goes (NORMAL would only survive a process crash). The
   * daemon commits on its writer thread (store_writer.h), so the loop
   * never waits for the disk. */
  if (!ret) ret = exec(s, "PRAGMA synchronous = FULL");
  /* A burst (10,000 NAMs registering) can grow the log to hundreds of
   * MiB; once checkpointed and started over, it is cut back to this. */
  if (!ret) ret = exec(s, "PRAGMA journal_size_limit = 67108864");
  if (ret) return ret;

  /* Migrate with foreign keys off (a step may rebuild a table; the step
   * is checked with foreign_key_check instead), then turn them on: the
   * pragma cannot change inside a transaction. */
  ret = gam_store_migrate(s->db, gam_store_migrations,
                          gam_store_migration_count, s->err, sizeof s->err);
  if (ret) return ret;
  ret = exec(s, "PRAGMA foreign_keys = ON");
  if (ret) return ret;
  return prepare_all(s);
}

int gam_store_open(const char *path, gam_store **out, char *err,
                   size_t err_len) {
  if (err && err_len) err[0] = '\0';
  if (!out || !path) {
    if (err && err_len) snprintf(err, err_len, "no path");
    return EMBER_EINVAL;
  }
  *out = NULL;
  gam_store *s = calloc(1, sizeof *s);
  if (!s) {
    if (err && err_len) snprintf(err, err_len, "out of memory");
    return EMBER_ENOMEM;
  }
  int ret = open_db(s, path);
  if (ret) {
    if (err && err_len)
      snprintf(err, err_len, "%s: %s", *path ? path : ":memory:", s->err);
    gam_store_close(s);
    return ret;
  }
  *out = s;
  return 0;
}

void gam_store_close(gam_store *s) {
  if (!s) return;
  for (int i = 0; i < GAM_ST_COUNT; i++) sqlite3_finalize(s->st[i]);
  /* The last connection to close checkpoints the log into the file. */
  sqlite3_close(s->db);
  free(s);
}

int gam_store_set_max_size(gam_store *s, uint64_t bytes) {
  if (bytes == 0) return 0;
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(s->db, "PRAGMA page_size", -1, &st, NULL);
  int64_t page = rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW
                     ? sqlite3_column_int64(st, 0) : 0;
  sqlite3_finalize(st);
  if (page <= 0) return gam_store_fail(s, rc ? rc : SQLITE_ERROR);
  char sql[80];
  uint64_t pages = bytes / (uint64_t)page;
  snprintf(sql, sizeof sql, "PRAGMA max_page_count = %llu",
           (unsigned long long)(pages ? pages : 1));
  return exec(s, sql);
}

const char *gam_store_error(const gam_store *s) {
  return s ? s->err : "no store";
}

int gam_store_user_version(gam_store *s) {
  sqlite3_stmt *st = gam_store_stmt_get(s, GAM_ST_USER_VERSION);
  int rc = sqlite3_step(st);
  int ret = rc == SQLITE_ROW ? sqlite3_column_int(st, 0)
                             : gam_store_fail(s, rc);
  sqlite3_reset(st);
  return ret;
}

/* ------------------------------------------------------------------------ */
/* Transactions                                                              */

int gam_store_begin(gam_store *s) {
  if (!sqlite3_get_autocommit(s->db))
    return gam_store_failf(s, EMBER_EINVAL,
                           "a transaction is already open (no nesting)");
  /* IMMEDIATE takes the write lock now, so no statement inside can fail
   * to upgrade a read lock later. */
  return run_id(s, GAM_ST_BEGIN);
}

int gam_store_commit(gam_store *s) {
  if (sqlite3_get_autocommit(s->db))
    return gam_store_failf(s, EMBER_EINVAL, "no transaction to commit");
  return run_id(s, GAM_ST_COMMIT);
}

int gam_store_rollback(gam_store *s) {
  /* SQLite may have rolled back already after an I/O error. */
  if (sqlite3_get_autocommit(s->db)) return 0;
  return run_id(s, GAM_ST_ROLLBACK);
}

/* ------------------------------------------------------------------------ */
/* Nodes and labels                                                          */

int gam_store_node_register(gam_store *s, const char *id, const char *address,
                            uint64_t now_ms) {
  NEED(s, id);
  NEED(s, address);
  sqlite3_stmt *st = gam_store_stmt_get(s, GAM_ST_NODE_REGISTER);
  sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, address, -1, SQLITE_STATIC);
  bind_u64(st, 3, now_ms);
  return run(s, st);
}

/* An UPDATE that must have matched a row. */
static int run_update(gam_store *s, sqlite3_stmt *st, const char *what,
                      const char *key) {
  int ret = run(s, st);
  if (ret == 0 && sqlite3_changes(s->db) == 0)
    ret = gam_store_failf(s, EMBER_ENOTFOUND, "no %s \"%s\"", what, key);
  return ret;
}

int gam_store_node_set_state(gam_store *s, const char *id,
                             gam_node_state state, uint64_t now_ms) {
  NEED(s, id);
  if (state != GAM_NODE_UP && state != GAM_NODE_LOST)
    return gam_store_failf(s, EMBER_EINVAL, "bad node state %d", (int)state);
  sqlite3_stmt *st = gam_store_stmt_get(s, GAM_ST_NODE_SET_STATE);
  sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 2, (int)state);
  bind_u64(st, 3, now_ms);
  return run_update(s, st, "node", id);
}

int gam_store_node_set_drained(gam_store *s, const char *id, bool drained) {
  NEED(s, id);
  sqlite3_stmt *st = gam_store_stmt_get(s, GAM_ST_NODE_SET_DRAINED);
  sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 2, drained ? 1 : 0);
  return run_update(s, st, "node", id);
}

static int replace_reported(gam_store *s, const char *id,
                            const char *const *labels, size_t n) {
  int found = node_exists(s, id);
  if (found < 0) return found;
  if (!found) return gam_store_failf(s, EMBER_ENOTFOUND, "no node \"%s\"", id);
  sqlite3_stmt *st = gam_store_stmt_get(s, GAM_ST_LABELS_DROP_REPORTED);
  sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
  int ret = run(s, st);
  for (size_t i = 0; ret == 0 && i < n; i++) {
    if (!labels[i])
      return gam_store_failf(s, EMBER_EINVAL, "label %zu is NULL", i);
    st = gam_store_stmt_get(s, GAM_ST_LABEL_ADD_REPORTED);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, labels[i], -1, SQLITE_STATIC);
    ret = run(s, st);
  }
  return ret;
}

int gam_store_node_set_reported(gam_store *s, const char *id,
                                const char *const *labels, size_t n) {
  NEED(s, id);
  if (n > 0) NEED(s, labels);
  bool outer;
  int ret = gam_store_op_begin(s, true, &outer);
  if (ret) return ret;
  return gam_store_op_end(s, outer, replace_reported(s, id, labels, n));
}

int gam_store_label_override(gam_store *s, const char *node,
                             const char *label, bool on) {
  NEED(s, node);
  NEED(s, label);
  sqlite3_stmt *st = gam_store_stmt_get(s, GAM_ST_LABEL_OVERRIDE);
  sqlite3_bind_text(st, 1, node, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, label, -1, SQLITE_STATIC);
  sqlite3_bind_int(st, 3, on ? 1 : 0);
  int ret = run(s, st);
  if (ret == EMBER_ENOTFOUND)   /* the foreign key to nodes */
    gam_store_failf(s, ret, "no node \"%s\"", node);
  return ret;
}

int gam_store_label_clear(gam_store *s, const char *node, const char *label) {
  NEED(s, node);
  NEED(s, label);
  sqlite3_stmt *st = gam_store_stmt_get(s, GAM_ST_LABEL_CLEAR);
  sqlite3_bind_text(st, 1, node, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, label, -1, SQLITE_STATIC);
  int ret = run(s, st);
  if (ret || sqlite3_changes(s->db) > 0) return ret;
  /* Nothing to clear: fine for a known node, an error for an unknown. */
  int found = node_exists(s, node);
  if (found < 0) return found;
  return found ? 0
               : gam_store_failf(s, EMBER_ENOTFOUND, "no node \"%s\"", node);
}

/* ------------------------------------------------------------------------ */
/* Apps and leases                                                           */

static int app_insert(gam_store *s, uint64_t id, const char *name,
                      const char *label, unsigned wanted, uint64_t now_ms,
                      uint64_t *id_out) {
  NEED(s, name);
  NEED(s, label);
  sqlite3_stmt *st = gam_store_stmt_get(s, GAM_ST_APP_CREATE);
  sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 2, label, -1, SQLITE_STATIC);
  sqlite3_bind_int64(st, 3, (sqlite3_int64)wanted);
  bind_u64(st, 4, now_ms);
  bind_u64(st, 5, id);
  int ret = run(s, st);
  if (ret == 0 && id_out)
    *id_out = (uint64_t)sqlite3_last_insert_rowid(s->db);
  return ret;
}

int gam_store_app_create(gam_store *s, const char *name, const char *label,
                         unsigned wanted, uint64_t now_ms, uint64_t *id_out) {
  return app_insert(s, 0, name, label, wanted, now_ms, id_out);
}

int gam_store_app_insert(gam_store *s, uint64_t id, const char *name,
                         const char *label, unsigned wanted,
                         uint64_t now_ms) {
  if (id == 0) return gam_store_failf(s, EMBER_EINVAL, "app id 0");
  return app_insert(s, id, name, label, wanted, now_ms, NULL);
}

int gam_store_last_ids(gam_store *s, uint64_t *app_id, uint64_t *lease_id) {
  sqlite3_stmt *st = gam_store_stmt_get(s, GAM_ST_LAST_IDS);
  int rc = sqlite3_step(st);
  int ret = rc == SQLITE_ROW ? 0 : gam_store_fail(s, rc);
  if (ret == 0) {
    *app_id = (uint64_t)sqlite3_column_int64(st, 0);
    *lease_id = (uint64_t)sqlite3_column_int64(st, 1);
  }
  sqlite3_reset(st);
  return ret;
}

static int set_app_state(gam_store *s, uint64_t id, gam_app_state state,
                         uint64_t now_ms) {
  sqlite3_stmt *st = gam_store_stmt_get(s, GAM_ST_APP_SET_STATE);
  bind_u64(st, 1, id);
  sqlite3_bind_int(st, 2, (int)state);
  bind_u64(st, 3, now_ms);
  int ret = run(s, st);
  if (ret) return ret;
  if (sqlite3_changes(s->db) == 0)
    return gam_store_failf(s, EMBER_ENOTFOUND, "no app %llu",
                           (unsigned long long)id);
  if (state != GAM_APP_ENDED) return 0;
  /* An ended app holds nothing: a restart must not load its leases. */
  st = gam_store_stmt_get(s, GAM_ST_APP_END_LEASES);
  bind_u64(st, 1, id);
  bind_u64(st, 2, now_ms);
  return run(s, st);
}

int gam_store_app_set_state(gam_store *s, uint64_t id, gam_app_state state,
                            uint64_t now_ms) {
  if (state != GAM_APP_PENDING && state != GAM_APP_RUNNING &&
      state != GAM_APP_ENDED)
    return gam_store_failf(s, EMBER_EINVAL, "bad app state %d", (int)state);
  bool outer;
  int ret = gam_store_op_begin(s, true, &outer);
  if (ret) return ret;
  return gam_store_op_end(s, outer, set_app_state(s, id, state, now_ms));
}

static int lease_insert(gam_store *s, uint64_t id, uint64_t app_id,
                        const char *node, const char *label,
                        uint64_t issued_unix_ms, uint64_t expires_unix_ms,
                        uint64_t *id_out) {
  NEED(s, node);
  NEED(s, label);
  sqlite3_stmt *st = gam_store_stmt_get(s, GAM_ST_LEASE_CREATE);
  bind_u64(st, 1, app_id);
  sqlite3_bind_text(st, 2, node, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, label, -1, SQLITE_STATIC);
  bind_u64(st, 4, issued_unix_ms);
  bind_u64(st, 5, expires_unix_ms);
  bind_u64(st, 6, id);
  int ret = run(s, st);
  if (ret == EMBER_ENOTFOUND)   /* a foreign key: apps or nodes */
    gam_store_failf(s, ret, "no app %llu or no node \"%s\"",
                    (unsigned long long)app_id, node);
  if (ret == 0 && id_out)
    *id_out = (uint64_t)sqlite3_last_insert_rowid(s->db);
  return ret;
}

int gam_store_lease_create(gam_store *s, uint64_t app_id, const char *node,
                           const char *label, uint64_t issued_unix_ms,
                           uint64_t expires_unix_ms, uint64_t *id_out) {
  return lease_insert(s, 0, app_id, node, label, issued_unix_ms,
                      expires_unix_ms, id_out);
}

int gam_store_lease_insert(gam_store *s, uint64_t id, uint64_t app_id,
                           const char *node, const char *label,
                           uint64_t issued_unix_ms, uint64_t expires_unix_ms) {
  if (id == 0) return gam_store_failf(s, EMBER_EINVAL, "lease id 0");
  return lease_insert(s, id, app_id, node, label, issued_unix_ms,
                      expires_unix_ms, NULL);
}

int gam_store_lease_end(gam_store *s, uint64_t id, const char *reason,
                        uint64_t now_ms) {
  NEED(s, reason);
  sqlite3_stmt *st = gam_store_stmt_get(s, GAM_ST_LEASE_END);
  bind_u64(st, 1, id);
  bind_u64(st, 2, now_ms);
  sqlite3_bind_text(st, 3, reason, -1, SQLITE_STATIC);
  int ret = run(s, st);
  if (ret || sqlite3_changes(s->db) > 0) return ret;
  /* Ended already (a no-op), or never there. */
  st = gam_store_stmt_get(s, GAM_ST_LEASE_EXISTS);
  bind_u64(st, 1, id);
  int found = exists(s, st);
  if (found < 0) return found;
  return found ? 0
               : gam_store_failf(s, EMBER_ENOTFOUND, "no lease %llu",
                                 (unsigned long long)id);
}

/* ------------------------------------------------------------------------ */
/* Event log                                                                 */

int gam_store_event(gam_store *s, uint64_t now_ms, const char *kind,
                    const char *node, uint64_t app_id, const char *detail) {
  NEED(s, kind);
  sqlite3_stmt *st = gam_store_stmt_get(s, GAM_ST_EVENT);
  bind_u64(st, 1, now_ms);
  sqlite3_bind_text(st, 2, kind, -1, SQLITE_STATIC);
  sqlite3_bind_text(st, 3, node, -1, SQLITE_STATIC);   /* NULL or "": none */
  bind_u64(st, 4, app_id);
  sqlite3_bind_text(st, 5, detail, -1, SQLITE_STATIC);
  return run(s, st);
}
