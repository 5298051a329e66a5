/*
 * store_schema.c - the GAM database's schema as an ordered list of
 * migration steps, and the code that applies them.
 *
 * A file records its version in PRAGMA user_version. Opening it applies
 * the steps after that version, in order, inside one transaction, so a
 * crash or a failing step leaves the file as it was. A step is never
 * edited once released: a change to the schema is a new step at the end
 * (and GAM_STORE_SCHEMA_VERSION goes up by one).
 */
#include <stdio.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "store_int.h"

/* Version 1. Tables are STRICT (types enforced). Ids of apps, leases and
 * events are AUTOINCREMENT: SQLite keeps the highest id ever handed out
 * in sqlite_sequence, so an id is never given twice, even after the row
 * with the highest id is deleted or the GAM restarts. Node ids are the
 * names the NAMs register with. Events name nodes and apps without
 * foreign keys: the log outlives what it talks about. */
static const char schema_v1[] =
  "PRAGMA application_id = 1162691143;\n"   /* GAM_STORE_APPLICATION_ID */
  "CREATE TABLE nodes (\n"
  "  id            TEXT NOT NULL PRIMARY KEY\n"
  "                CHECK (length(id) BETWEEN 1 AND 255),\n"
  "  address       TEXT NOT NULL,\n"
  "  state         INTEGER NOT NULL DEFAULT 0 CHECK (state IN (0, 1)),\n"
  "  drained       INTEGER NOT NULL DEFAULT 0 CHECK (drained IN (0, 1)),\n"
  "  registered_ms INTEGER NOT NULL,\n"   /* its latest Register */
  "  last_seen_ms  INTEGER NOT NULL,\n"   /* when it was last known up */
  "  state_ms      INTEGER NOT NULL\n"    /* when state last changed */
  ") STRICT;\n"
  /* origin 'nam': reported by the node (added is 1); origin 'admin': an
   * override, added 1 or removed 0. */
  "CREATE TABLE labels (\n"
  "  node   TEXT NOT NULL REFERENCES nodes (id) ON DELETE CASCADE,\n"
  "  label  TEXT NOT NULL CHECK (length(label) BETWEEN 1 AND 64),\n"
  "  origin TEXT NOT NULL CHECK (origin IN ('nam', 'admin')),\n"
  "  added  INTEGER NOT NULL DEFAULT 1 CHECK (added IN (0, 1)),\n"
  "  PRIMARY KEY (node, label, origin),\n"
  "  CHECK (origin = 'admin' OR added = 1)\n"
  ") STRICT, WITHOUT ROWID;\n"
  "CREATE TABLE apps (\n"
  "  id         INTEGER PRIMARY KEY AUTOINCREMENT,\n"
  "  name       TEXT NOT NULL,\n"
  "  label      TEXT NOT NULL CHECK (length(label) BETWEEN 1 AND 64),\n"
  "  wanted     INTEGER NOT NULL CHECK (wanted >= 1),\n"
  "  state      INTEGER NOT NULL DEFAULT 0 CHECK (state IN (0, 1, 2)),\n"
  "  created_ms INTEGER NOT NULL,\n"
  "  state_ms   INTEGER NOT NULL\n"
  ") STRICT;\n"
  /* The apps a restart loads: those not ended, in id order. */
  "CREATE INDEX apps_live ON apps (id) WHERE state <> 2;\n"
  "CREATE TABLE leases (\n"
  "  id              INTEGER PRIMARY KEY AUTOINCREMENT,\n"
  "  app_id          INTEGER NOT NULL REFERENCES apps (id),\n"
  "  node            TEXT NOT NULL REFERENCES nodes (id),\n"
  "  label           TEXT NOT NULL CHECK (length(label) BETWEEN 1 AND 64),\n"
  "  issued_unix_ms  INTEGER NOT NULL,\n"
  "  expires_unix_ms INTEGER NOT NULL,\n"
  "  ended_ms        INTEGER,\n"          /* NULL while active */
  "  end_reason      TEXT,\n"
  "  CHECK (expires_unix_ms >= issued_unix_ms),\n"
  "  CHECK ((ended_ms IS NULL) = (end_reason IS NULL))\n"
  ") STRICT;\n"
  "CREATE INDEX leases_active ON leases (id) WHERE ended_ms IS NULL;\n"
  /* Foreign keys are checked through their child's index. */
  "CREATE INDEX leases_app ON leases (app_id);\n"
  "CREATE INDEX leases_node ON leases (node);\n"
  "CREATE TABLE events (\n"
  "  id     INTEGER PRIMARY KEY AUTOINCREMENT,\n"
  "  at_ms  INTEGER NOT NULL,\n"
  "  kind   TEXT NOT NULL CHECK (length(kind) >= 1),\n"
  "  node   TEXT,\n"
  "  app_id INTEGER,\n"
  "  detail TEXT\n"
  ") STRICT;\n";

const gam_store_migration gam_store_migrations[] = {
  {1, schema_v1},
};
const size_t gam_store_migration_count =
  sizeof gam_store_migrations / sizeof gam_store_migrations[0];

_Static_assert(sizeof gam_store_migrations / sizeof gam_store_migrations[0]
                   == GAM_STORE_SCHEMA_VERSION,
               "one migration step per schema version");

/* One integer from a statement's first row (a PRAGMA or a count). */
static int query_int(sqlite3 *db, const char *sql, int *value) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
  if (rc == SQLITE_OK) {
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
      *value = sqlite3_column_int(st, 0);
      rc = SQLITE_OK;
    }
  }
  sqlite3_finalize(st);
  return rc;
}

static int sqlite_failed(sqlite3 *db, const char *what, char *err,
                         size_t err_len) {
  snprintf(err, err_len, "%s: %s", what, sqlite3_errmsg(db));
  return sqlite3_errcode(db) == SQLITE_NOMEM ? EMBER_ENOMEM : EMBER_EIO;
}

/* Is this file ours, at a version this build can use? */
static int check_file(sqlite3 *db, int version, int target, char *err,
                      size_t err_len) {
  if (version > target) {
    snprintf(err, err_len,
             "the database has schema version %d, newer than this "
             "ember-gam's %d: run a newer ember-gam (or restore a backup)",
             version, target);
    return EMBER_EVERSION;
  }
  int app_id = 0;
  if (query_int(db, "PRAGMA application_id", &app_id) != SQLITE_OK)
    return sqlite_failed(db, "reading application_id", err, err_len);
  if (app_id != 0 && app_id != GAM_STORE_APPLICATION_ID) {
    snprintf(err, err_len,
             "not an ember-gam database (application_id 0x%08x)",
             (unsigned)app_id);
    return EMBER_EFORMAT;
  }
  if (version == 0) {
    /* Version 0 is an empty file: never add our tables to someone
     * else's database. */
    int tables = 0;
    if (query_int(db, "SELECT count(*) FROM sqlite_master", &tables)
        != SQLITE_OK)
      return sqlite_failed(db, "reading the schema", err, err_len);
    if (tables > 0) {
      snprintf(err, err_len,
               "not an ember-gam database (it has tables but no schema "
               "version)");
      return EMBER_EFORMAT;
    }
  }
  return 0;
}

static int apply_steps(sqlite3 *db, const gam_store_migration *steps,
                       size_t n, char *err, size_t err_len) {
  int target = (int)n;
  int version = 0;
  /* Read again inside the transaction: another process may have
   * migrated the file since we looked. */
  if (query_int(db, "PRAGMA user_version", &version) != SQLITE_OK)
    return sqlite_failed(db, "reading user_version", err, err_len);
  int rc = check_file(db, version, target, err, err_len);
  if (rc) return rc;
  for (int v = version + 1; v <= target; v++) {
    char *msg = NULL;
    if (sqlite3_exec(db, steps[v - 1].sql, NULL, NULL, &msg) != SQLITE_OK) {
      snprintf(err, err_len, "migrating to schema version %d: %s", v,
               msg ? msg : sqlite3_errmsg(db));
      sqlite3_free(msg);
      return EMBER_EIO;
    }
  }
  /* A step that rebuilt a table must leave no dangling reference. */
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(db, "PRAGMA foreign_key_check", -1, &st, NULL)
      != SQLITE_OK)
    return sqlite_failed(db, "checking foreign keys", err, err_len);
  int step = sqlite3_step(st);
  if (step == SQLITE_ROW)
    snprintf(err, err_len,
             "migrating to schema version %d: a row of table %s has a "
             "dangling foreign key", target,
             (const char *)sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
  if (step == SQLITE_ROW) return EMBER_EIO;
  if (step != SQLITE_DONE)
    return sqlite_failed(db, "checking foreign keys", err, err_len);
  /* A PRAGMA takes no parameters; the version is our own integer. */
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA user_version = %d", target);
  if (sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
    return sqlite_failed(db, "setting user_version", err, err_len);
  return 0;
}

int gam_store_migrate(sqlite3 *db, const gam_store_migration *steps,
                      size_t n, char *err, size_t err_len) {
  for (size_t i = 0; i < n; i++) {
    if (steps[i].version != (int)i + 1 || !steps[i].sql) {
      snprintf(err, err_len, "migration step %zu is out of order", i);
      return EMBER_EINTERNAL;
    }
  }
  int version = 0;
  if (query_int(db, "PRAGMA user_version", &version) != SQLITE_OK)
    return sqlite_failed(db, "reading user_version", err, err_len);
  int rc = check_file(db, version, (int)n, err, err_len);
  if (rc || version == (int)n) return rc;

  if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
    return sqlite_failed(db, "starting the migration", err, err_len);
  rc = apply_steps(db, steps, n, err, err_len);
  if (rc == 0 && sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
    rc = sqlite_failed(db, "committing the migration", err, err_len);
  if (rc && !sqlite3_get_autocommit(db))
    sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}
