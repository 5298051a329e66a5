/*
 * store_int.h - what the store's files share (store.c: opening, writes and
 * transactions; store_schema.c: the schema and its migrations;
 * store_load.c: the reads). Not for the daemon: it uses store.h.
 */
#ifndef EMBER_GAM_STORE_INT_H
#define EMBER_GAM_STORE_INT_H

#include <stdbool.h>
#include <stddef.h>

#include <sqlite3.h>

#include "store.h"

/* Every statement the store runs, prepared once at open (store.c holds
 * their SQL in one table indexed by these). */
typedef enum gam_store_stmt {
  GAM_ST_BEGIN,
  GAM_ST_COMMIT,
  GAM_ST_ROLLBACK,
  GAM_ST_SAVEPOINT,
  GAM_ST_RELEASE,
  GAM_ST_ROLLBACK_TO,
  GAM_ST_USER_VERSION,
  GAM_ST_NODE_EXISTS,
  GAM_ST_NODE_REGISTER,
  GAM_ST_NODE_SET_STATE,
  GAM_ST_NODE_SET_DRAINED,
  GAM_ST_LABELS_DROP_REPORTED,
  GAM_ST_LABEL_ADD_REPORTED,
  GAM_ST_LABEL_OVERRIDE,
  GAM_ST_LABEL_CLEAR,
  GAM_ST_APP_CREATE,
  GAM_ST_APP_SET_STATE,
  GAM_ST_APP_END_LEASES,
  GAM_ST_LEASE_CREATE,
  GAM_ST_LEASE_END,
  GAM_ST_LEASE_EXISTS,
  GAM_ST_LAST_IDS,
  GAM_ST_EVENT,
  GAM_ST_LOAD_NODES,
  GAM_ST_LOAD_LABELS,
  GAM_ST_LOAD_APPS,
  GAM_ST_LOAD_LEASES,
  GAM_ST_EVENTS,
  GAM_ST_COUNT
} gam_store_stmt;

struct gam_store {
  sqlite3 *db;
  sqlite3_stmt *st[GAM_ST_COUNT];
  char err[256];   /* the last failure, for gam_store_error() */
};

/* ---- store.c: helpers for the other files */

/* A statement, reset and with no bindings, ready to bind and step. */
sqlite3_stmt *gam_store_stmt_get(gam_store *s, gam_store_stmt id);
/* Record SQLite's failure rc (its message included) and map it to an
 * EMBER_E* code: a FOREIGN KEY failure is EMBER_ENOTFOUND, another
 * constraint EMBER_EINVAL, SQLITE_NOMEM EMBER_ENOMEM, the rest EMBER_EIO. */
int gam_store_fail(gam_store *s, int rc);
/* Record a failure of our own; returns code. */
int gam_store_failf(gam_store *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Make the next steps one change: a savepoint, which is a transaction of
 * its own outside gam_store_begin() and a part of the caller's inside.
 * write: outside a transaction, take the write lock first (BEGIN
 * IMMEDIATE), so a read inside cannot fail to upgrade later.
 * gam_store_op_end() releases it when rc is 0 and undoes it otherwise;
 * it returns rc, or the release's failure. */
int gam_store_op_begin(gam_store *s, bool write, bool *outer);
int gam_store_op_end(gam_store *s, bool outer, int rc);

/* ---- store_schema.c */

/* One step of the schema: the SQL that takes a database from version - 1
 * to version. */
typedef struct gam_store_migration {
  int version;
  const char *sql;
} gam_store_migration;

extern const gam_store_migration gam_store_migrations[];
extern const size_t gam_store_migration_count;

/* Bring db from its user_version to steps[n - 1].version, applying each
 * step in order inside one transaction (all or nothing). steps[i].version
 * must be i + 1. EMBER_EVERSION when the file is newer, EMBER_EFORMAT
 * when it is not an ember-gam database (another application_id, or tables
 * at version 0), EMBER_EIO when SQLite fails; err gets the reason. Run it
 * with foreign_keys off: a step may rebuild a table. */
int gam_store_migrate(sqlite3 *db, const gam_store_migration *steps,
                      size_t n, char *err, size_t err_len);

/* The application_id that marks our files ("EMBG"). */
#define GAM_STORE_APPLICATION_ID 0x454D4247

#endif
