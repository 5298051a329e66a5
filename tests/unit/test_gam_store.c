/*
 * test_gam_store.c - ember-gam's SQLite store (gam/store*.c) on files in a
 * temporary directory: create, reopen and keep everything; the pragmas
 * (WAL, synchronous=FULL, foreign keys, user_version); a newer file
 * refused; migrations from an empty file and step by step with hand-made
 * steps, all or nothing; ids never reused; reported labels replaced
 * atomically; admin overrides; leases ended once; what a load visits;
 * events newest first; transactions; errors; and a child process killed
 * with SIGKILL in the middle of committing, after which the file is intact
 * and holds every change the child saw committed.
 *
 * The crash test's seed is printed; EMBER_TEST_SEED=N replays one.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "ember/ember_errors.h"
#include "store.h"
#include "gam_store_tmp.h"
#include "store_int.h"   /* the handle's sqlite3 *, and gam_store_migrate */

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

/* An integer from a query on a raw connection; the optional argument is
 * bound as text to ?1. */
static long long raw_int(sqlite3 *db, const char *sql, const char *arg) {
  sqlite3_stmt *st = NULL;
  int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
  if (rc != SQLITE_OK) print_error("%s: %s\n", sql, sqlite3_errmsg(db));
  assert_int_equal(rc, SQLITE_OK);
  if (arg) sqlite3_bind_text(st, 1, arg, -1, SQLITE_TRANSIENT);
  rc = sqlite3_step(st);
  if (rc != SQLITE_ROW) print_error("%s: %s\n", sql, sqlite3_errmsg(db));
  assert_int_equal(rc, SQLITE_ROW);
  long long v = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return v;
}

static void raw_text(sqlite3 *db, const char *sql, char *out, size_t len) {
  sqlite3_stmt *st = NULL;
  assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  const unsigned char *t = sqlite3_column_text(st, 0);
  snprintf(out, len, "%s", t ? (const char *)t : "(null)");
  sqlite3_finalize(st);
}

static void raw_exec(sqlite3 *db, const char *sql) {
  char *msg = NULL;
  int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
  if (rc != SQLITE_OK) print_error("%s: %s\n", sql, msg ? msg : "?");
  sqlite3_free(msg);
  assert_int_equal(rc, SQLITE_OK);
}

static sqlite3 *raw_open(const char *path) {
  sqlite3 *db = NULL;
  assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
  return db;
}

/* Everything a load visits, one line per row: easy to compare, and the
 * comparison prints both sides. */
typedef struct dump {
  char text[8192];
  size_t len;
  int stop_after;   /* nonzero: the nth row returns 7 */
  int rows;
} dump;

static void put(dump *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void put(dump *d, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(d->text + d->len, sizeof d->text - d->len, fmt, ap);
  va_end(ap);
  assert_true(n >= 0 && (size_t)n < sizeof d->text - d->len);
  d->len += (size_t)n;
}

static int row_done(dump *d) {
  d->rows++;
  return d->stop_after && d->rows == d->stop_after ? 7 : 0;
}

static int dump_node(void *user, const gam_store_node_row *r) {
  put(user, "node %s %s %s%s reg=%llu seen=%llu\n", r->id, r->address,
      r->state == GAM_NODE_UP ? "up" : "lost", r->drained ? " drained" : "",
      (unsigned long long)r->registered_ms,
      (unsigned long long)r->last_seen_ms);
  return row_done(user);
}

static int dump_label(void *user, const gam_store_label_row *r) {
  put(user, "label %s %s %s\n", r->node, r->label,
      !r->admin ? "nam" : r->on ? "admin+" : "admin-");
  return row_done(user);
}

static int dump_app(void *user, const gam_store_app_row *r) {
  static const char *const states[] = {"pending", "running", "ended"};
  put(user, "app %llu %s %s x%u %s at=%llu\n", (unsigned long long)r->id,
      r->name, r->label, r->wanted, states[r->state],
      (unsigned long long)r->created_ms);
  return row_done(user);
}

static int dump_lease(void *user, const gam_store_lease_row *r) {
  put(user, "lease %llu app=%llu %s %s %llu-%llu\n", (unsigned long long)r->id,
      (unsigned long long)r->app_id, r->node, r->label,
      (unsigned long long)r->issued_unix_ms,
      (unsigned long long)r->expires_unix_ms);
  return row_done(user);
}

static int dump_event(void *user, const gam_store_event_row *r) {
  put(user, "event %llu at=%llu %s node=%s app=%llu %s\n",
      (unsigned long long)r->id, (unsigned long long)r->at_ms, r->kind,
      r->node, (unsigned long long)r->app_id, r->detail);
  return row_done(user);
}

static const gam_store_visitor all = {dump_node, dump_label, dump_app,
                                      dump_lease};

static void load_into(gam_store *s, dump *d) {
  memset(d, 0, sizeof *d);
  int rc = gam_store_load(s, &all, d);
  if (rc) print_error("load: %d %s\n", rc, gam_store_error(s));
  assert_int_equal(rc, 0);
}

static void events_into(gam_store *s, unsigned limit, dump *d) {
  memset(d, 0, sizeof *d);
  assert_int_equal(gam_store_events(s, limit, dump_event, d), 0);
}

static void register_node(gam_store *s, const char *id, uint64_t now) {
  char addr[64];
  snprintf(addr, sizeof addr, "tcp:127.0.0.1:%llu",
           7000 + (unsigned long long)(now % 1000));
  assert_int_equal(gam_store_node_register(s, id, addr, now), 0);
}

/* ------------------------------------------------------------------------ */
/* Open, reopen, pragmas, versions                                           */

/* A small cluster's worth of every kind of row. */
static void fill(gam_store *s) {
  assert_int_equal(gam_store_node_register(s, "n1", "tcp:10.0.0.1:7001", 100),
                   0);
  assert_int_equal(gam_store_node_register(s, "n2", "tcp:10.0.0.2:7001", 110),
                   0);
  const char *rep[] = {"sw", "plf"};
  assert_int_equal(gam_store_node_set_reported(s, "n1", rep, 2), 0);
  assert_int_equal(gam_store_label_override(s, "n2", "gpu", true), 0);
  assert_int_equal(gam_store_label_override(s, "n1", "plf", false), 0);
  assert_int_equal(gam_store_node_set_drained(s, "n2", true), 0);
  assert_int_equal(gam_store_node_set_state(s, "n2", GAM_NODE_LOST, 150), 0);
  uint64_t a1 = 0, a2 = 0, l1 = 0;
  assert_int_equal(gam_store_app_create(s, "demo", "sw", 2, 200, &a1), 0);
  assert_int_equal(gam_store_app_create(s, "train", "gpu", 1, 210, &a2), 0);
  assert_int_equal(a1, 1);
  assert_int_equal(a2, 2);
  assert_int_equal(gam_store_app_set_state(s, a2, GAM_APP_RUNNING, 220), 0);
  assert_int_equal(
      gam_store_lease_create(s, a1, "n1", "sw", 1000, 61000, &l1), 0);
  assert_int_equal(l1, 1);
  assert_int_equal(gam_store_event(s, 300, "node_lost", "n2", 0, "3 missed"),
                   0);
}

static const char filled[] =
    "node n1 tcp:10.0.0.1:7001 up reg=100 seen=100\n"
    "node n2 tcp:10.0.0.2:7001 lost drained reg=110 seen=110\n"
    "label n1 plf admin-\n"
    "label n1 plf nam\n"
    "label n1 sw nam\n"
    "label n2 gpu admin+\n"
    "app 1 demo sw x2 pending at=200\n"
    "app 2 train gpu x1 running at=210\n"
    "lease 1 app=1 n1 sw 1000-61000\n";

static void reopen_keeps_everything(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  fill(s);
  dump before, after, ev;
  load_into(s, &before);
  assert_string_equal(before.text, filled);
  gam_store_close(s);

  for (int round = 0; round < 2; round++) {
    s = open_ok(t->db);
    load_into(s, &after);
    assert_string_equal(after.text, filled);
    events_into(s, 10, &ev);
    assert_string_equal(ev.text,
                        "event 1 at=300 node_lost node=n2 app=0 3 missed\n");
    gam_store_close(s);
  }
}

static void pragmas_and_user_version(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  assert_int_equal(gam_store_user_version(s), GAM_STORE_SCHEMA_VERSION);
  char mode[32];
  raw_text(s->db, "PRAGMA journal_mode", mode, sizeof mode);
  assert_string_equal(mode, "wal");
  assert_int_equal(raw_int(s->db, "PRAGMA synchronous", NULL), 2);  /* FULL */
  assert_int_equal(raw_int(s->db, "PRAGMA foreign_keys", NULL), 1);
  assert_int_equal(raw_int(s->db, "PRAGMA application_id", NULL),
                   GAM_STORE_APPLICATION_ID);

  /* Statements are prepared once at open and reused. */
  int n = 0;
  for (sqlite3_stmt *st = sqlite3_next_stmt(s->db, NULL); st;
       st = sqlite3_next_stmt(s->db, st))
    n++;
  assert_int_equal(n, GAM_ST_COUNT);
  fill(s);
  dump d;
  load_into(s, &d);
  events_into(s, 0, &d);
  n = 0;
  for (sqlite3_stmt *st = sqlite3_next_stmt(s->db, NULL); st;
       st = sqlite3_next_stmt(s->db, st))
    n++;
  assert_int_equal(n, GAM_ST_COUNT);
  gam_store_close(s);

  /* WAL and the version are in the file, seen by any connection. */
  sqlite3 *db = raw_open(t->db);
  raw_text(db, "PRAGMA journal_mode", mode, sizeof mode);
  assert_string_equal(mode, "wal");
  assert_int_equal(raw_int(db, "PRAGMA user_version", NULL),
                   GAM_STORE_SCHEMA_VERSION);
  sqlite3_close(db);
}

static void memory_store(void **state) {
  (void)state;
  for (int i = 0; i < 2; i++) {
    gam_store *s = open_ok(i ? ":memory:" : "");
    assert_int_equal(gam_store_user_version(s), GAM_STORE_SCHEMA_VERSION);
    fill(s);
    dump d;
    load_into(s, &d);
    assert_string_equal(d.text, filled);
    gam_store_close(s);
  }
}

static void newer_file_refused(void **state) {
  tmp *t = *state;
  gam_store_close(open_ok(t->db));
  sqlite3 *db = raw_open(t->db);
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA user_version = %d",
           GAM_STORE_SCHEMA_VERSION + 1);
  raw_exec(db, sql);
  sqlite3_close(db);

  gam_store *s = (gam_store *)&s;   /* must come back NULL */
  char err[256];
  assert_int_equal(gam_store_open(t->db, &s, err, sizeof err),
                   EMBER_EVERSION);
  assert_null(s);
  print_message("refused: %s\n", err);
  assert_non_null(strstr(err, "newer"));
  assert_non_null(strstr(err, t->db));

  /* Left as it was. */
  db = raw_open(t->db);
  assert_int_equal(raw_int(db, "PRAGMA user_version", NULL),
                   GAM_STORE_SCHEMA_VERSION + 1);
  sqlite3_close(db);
}

static void migrate_empty_files(void **state) {
  tmp *t = *state;
  /* A zero-byte file, as an installer's touch would leave it. */
  int fd = open(t->db, O_CREAT | O_WRONLY | O_TRUNC, 0600);
  assert_true(fd >= 0);
  close(fd);
  gam_store *s = open_ok(t->db);
  assert_int_equal(gam_store_user_version(s), GAM_STORE_SCHEMA_VERSION);
  fill(s);
  gam_store_close(s);
  rm_db_files(t->db);

  /* A hand-made SQLite file at version 0 with no tables left in it. */
  sqlite3 *db = raw_open(t->db);
  raw_exec(db, "CREATE TABLE scratch (x); DROP TABLE scratch;");
  assert_int_equal(raw_int(db, "PRAGMA user_version", NULL), 0);
  sqlite3_close(db);
  s = open_ok(t->db);
  assert_int_equal(gam_store_user_version(s), GAM_STORE_SCHEMA_VERSION);
  fill(s);
  dump d;
  load_into(s, &d);
  assert_string_equal(d.text, filled);
  gam_store_close(s);
}

static void foreign_files_refused(void **state) {
  tmp *t = *state;
  char err[256];
  gam_store *s = NULL;

  /* Someone else's database: tables but no version. */
  sqlite3 *db = raw_open(t->db);
  raw_exec(db, "CREATE TABLE theirs (x); INSERT INTO theirs VALUES (1);");
  sqlite3_close(db);
  assert_int_equal(gam_store_open(t->db, &s, err, sizeof err), EMBER_EFORMAT);
  print_message("refused: %s\n", err);
  db = raw_open(t->db);
  assert_int_equal(
      raw_int(db, "SELECT count(*) FROM sqlite_master WHERE name = 'nodes'",
              NULL), 0);
  sqlite3_close(db);
  rm_db_files(t->db);

  /* Another application's id. */
  db = raw_open(t->db);
  raw_exec(db, "PRAGMA application_id = 42; PRAGMA user_version = 1;");
  sqlite3_close(db);
  assert_int_equal(gam_store_open(t->db, &s, err, sizeof err), EMBER_EFORMAT);
  rm_db_files(t->db);

  /* Not SQLite at all. */
  FILE *f = fopen(t->db, "w");
  assert_non_null(f);
  for (int i = 0; i < 200; i++) fputs("this is not a database\n", f);
  fclose(f);
  assert_int_equal(gam_store_open(t->db, &s, err, sizeof err), EMBER_EIO);
  print_message("refused: %s\n", err);
  assert_null(s);

  /* A directory that is not there. */
  char path[400];
  snprintf(path, sizeof path, "%s/missing/gam.db", t->dir);
  assert_int_equal(gam_store_open(path, &s, err, sizeof err), EMBER_EIO);
  assert_non_null(strstr(err, "missing"));
  assert_int_equal(gam_store_open(NULL, &s, err, sizeof err), EMBER_EINVAL);
}

static void migrate_ok(sqlite3 *db, const gam_store_migration *steps,
                       size_t n) {
  char err[256] = "";
  int rc = gam_store_migrate(db, steps, n, err, sizeof err);
  if (rc) print_error("migrate to %zu: %d %s\n", n, rc, err);
  assert_int_equal(rc, 0);
}

/* Hand-made steps through the migration code: version by version, each
 * step once, all or nothing. */
static void migration_steps(void **state) {
  tmp *t = *state;
  static const gam_store_migration steps[] = {
    {1, "CREATE TABLE a (x INTEGER PRIMARY KEY);"},
    {2, "ALTER TABLE a ADD COLUMN y INTEGER; INSERT INTO a VALUES (1, 2);"},
    {3, "CREATE TABLE b (z INTEGER REFERENCES a (x));"},
    {4, "INSERT INTO b VALUES (99);"},   /* a dangling reference */
  };
  char err[256] = "";
  sqlite3 *db = raw_open(t->db);
  migrate_ok(db, steps, 2);
  assert_int_equal(raw_int(db, "PRAGMA user_version", NULL), 2);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM a", NULL), 1);
  /* Up to date: nothing runs again. */
  migrate_ok(db, steps, 2);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM a", NULL), 1);
  /* One more step: only step 3 runs. */
  migrate_ok(db, steps, 3);
  assert_int_equal(raw_int(db, "PRAGMA user_version", NULL), 3);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM a", NULL), 1);
  /* Step 4 leaves a dangling foreign key: refused, nothing kept. */
  assert_int_equal(gam_store_migrate(db, steps, 4, err, sizeof err),
                   EMBER_EIO);
  print_message("refused: %s\n", err);
  assert_int_equal(raw_int(db, "PRAGMA user_version", NULL), 3);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM b", NULL), 0);
  /* This build knows 3 steps; a file at 3 is newer than one knowing 2. */
  assert_int_equal(gam_store_migrate(db, steps, 2, err, sizeof err),
                   EMBER_EVERSION);
  sqlite3_close(db);
  rm_db_files(t->db);

  /* A failing step from version 0: the steps before it are undone too. */
  static const gam_store_migration bad[] = {
    {1, "CREATE TABLE a (x INTEGER);"},
    {2, "CREATE TABLE a (x INTEGER);"},   /* already there */
  };
  db = raw_open(t->db);
  assert_int_equal(gam_store_migrate(db, bad, 2, err, sizeof err), EMBER_EIO);
  assert_non_null(strstr(err, "version 2"));
  assert_int_equal(raw_int(db, "PRAGMA user_version", NULL), 0);
  assert_int_equal(raw_int(db, "SELECT count(*) FROM sqlite_master", NULL),
                   0);
  /* Steps out of order are a bug in the table. */
  static const gam_store_migration swapped[] = {
    {2, "SELECT 1;"},
    {1, "SELECT 1;"},
  };
  assert_int_equal(gam_store_migrate(db, swapped, 2, err, sizeof err),
                   EMBER_EINTERNAL);
  sqlite3_close(db);
}

/* ------------------------------------------------------------------------ */
/* Ids                                                                       */

static void ids_never_reused(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  register_node(s, "n1", 1);
  uint64_t app[3], lease[3];
  for (int i = 0; i < 3; i++) {
    assert_int_equal(gam_store_app_create(s, "a", "sw", 1, 10, &app[i]), 0);
    assert_int_equal(gam_store_lease_create(s, app[0], "n1", "sw", 10, 20,
                                            &lease[i]), 0);
    assert_int_equal(gam_store_event(s, 10, "x", NULL, 0, NULL), 0);
  }
  assert_int_equal(app[2], 3);
  assert_int_equal(lease[2], 3);
  /* An id handed out inside a transaction that commits is kept even if
   * its row goes later. */
  gam_store_close(s);

  /* Remove the newest rows behind the store's back (an admin with the
   * sqlite3 shell): plain rowids would hand those ids out again. */
  sqlite3 *db = raw_open(t->db);
  raw_exec(db, "DELETE FROM leases WHERE id = 3;"
               "DELETE FROM apps WHERE id = 3;"
               "DELETE FROM events WHERE id = 3;");
  sqlite3_close(db);

  s = open_ok(t->db);
  uint64_t id = 0;
  assert_int_equal(gam_store_app_create(s, "a", "sw", 1, 10, &id), 0);
  assert_int_equal(id, 4);
  assert_int_equal(gam_store_lease_create(s, id, "n1", "sw", 10, 20, &id), 0);
  assert_int_equal(id, 4);
  assert_int_equal(gam_store_event(s, 10, "x", NULL, 0, NULL), 0);
  dump d;
  events_into(s, 1, &d);
  assert_string_equal(d.text, "event 4 at=10 x node= app=0 \n");
  gam_store_close(s);
}

/* ------------------------------------------------------------------------ */
/* Labels                                                                    */

static void reported_labels_replace(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  register_node(s, "n1", 1);
  register_node(s, "n2", 2);
  assert_int_equal(gam_store_label_override(s, "n1", "gpu", true), 0);
  const char *first[] = {"a", "b"};
  const char *second[] = {"b", "c", "c"};   /* a duplicate is one label */
  const char *other[] = {"z"};
  assert_int_equal(gam_store_node_set_reported(s, "n1", first, 2), 0);
  assert_int_equal(gam_store_node_set_reported(s, "n2", other, 1), 0);
  assert_int_equal(gam_store_node_set_reported(s, "n1", second, 3), 0);
  dump d = {0};
  gam_store_visitor labels_only = {.label = dump_label};
  assert_int_equal(gam_store_load(s, &labels_only, &d), 0);
  assert_string_equal(d.text,
                      "label n1 b nam\n"
                      "label n1 c nam\n"
                      "label n1 gpu admin+\n"
                      "label n2 z nam\n");

  /* A bad label in the list: nothing of the replacement is kept. */
  char long_label[80];
  memset(long_label, 'x', 65);
  long_label[65] = '\0';
  const char *bad[] = {"d", long_label};
  assert_int_equal(gam_store_node_set_reported(s, "n1", bad, 2), EMBER_EINVAL);
  print_message("refused: %s\n", gam_store_error(s));
  const char *with_null[] = {"d", NULL};
  assert_int_equal(gam_store_node_set_reported(s, "n1", with_null, 2),
                   EMBER_EINVAL);
  assert_int_equal(gam_store_node_set_reported(s, "nx", first, 2),
                   EMBER_ENOTFOUND);
  /* The same inside the caller's transaction: that failed change goes,
   * the rest of the transaction stays. */
  assert_int_equal(gam_store_begin(s), 0);
  register_node(s, "n3", 3);
  assert_int_equal(gam_store_node_set_reported(s, "n1", bad, 2), EMBER_EINVAL);
  assert_int_equal(gam_store_node_set_reported(s, "n3", other, 1), 0);
  assert_int_equal(gam_store_commit(s), 0);

  memset(&d, 0, sizeof d);
  assert_int_equal(gam_store_load(s, &labels_only, &d), 0);
  assert_string_equal(d.text,
                      "label n1 b nam\n"
                      "label n1 c nam\n"
                      "label n1 gpu admin+\n"
                      "label n2 z nam\n"
                      "label n3 z nam\n");

  /* None reported: only the admin's remain. */
  assert_int_equal(gam_store_node_set_reported(s, "n1", NULL, 0), 0);
  memset(&d, 0, sizeof d);
  assert_int_equal(gam_store_load(s, &labels_only, &d), 0);
  assert_string_equal(d.text,
                      "label n1 gpu admin+\n"
                      "label n2 z nam\n"
                      "label n3 z nam\n");
  gam_store_close(s);
}

static void label_overrides(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  register_node(s, "n1", 1);
  const char *rep[] = {"sw"};
  assert_int_equal(gam_store_node_set_reported(s, "n1", rep, 1), 0);
  gam_store_visitor labels_only = {.label = dump_label};
  dump d = {0};

  assert_int_equal(gam_store_label_override(s, "n1", "plf", true), 0);
  assert_int_equal(gam_store_label_override(s, "n1", "plf", true), 0);
  assert_int_equal(gam_store_label_override(s, "n1", "sw", false), 0);
  assert_int_equal(gam_store_load(s, &labels_only, &d), 0);
  assert_string_equal(d.text,
                      "label n1 plf admin+\n"
                      "label n1 sw admin-\n"
                      "label n1 sw nam\n");

  /* One admin row per label: off replaces on. */
  assert_int_equal(gam_store_label_override(s, "n1", "plf", false), 0);
  assert_int_equal(
      raw_int(s->db, "SELECT count(*) FROM labels WHERE label = 'plf'", NULL),
      1);
  /* Clearing goes back to what the NAM reports; clearing twice is fine. */
  assert_int_equal(gam_store_label_clear(s, "n1", "sw"), 0);
  assert_int_equal(gam_store_label_clear(s, "n1", "sw"), 0);
  memset(&d, 0, sizeof d);
  assert_int_equal(gam_store_load(s, &labels_only, &d), 0);
  assert_string_equal(d.text,
                      "label n1 plf admin-\n"
                      "label n1 sw nam\n");

  assert_int_equal(gam_store_label_override(s, "nx", "plf", true),
                   EMBER_ENOTFOUND);
  assert_non_null(strstr(gam_store_error(s), "nx"));
  assert_int_equal(gam_store_label_clear(s, "nx", "plf"), EMBER_ENOTFOUND);
  assert_int_equal(gam_store_label_override(s, "n1", "", true), EMBER_EINVAL);
  assert_int_equal(gam_store_label_override(s, "n1", NULL, true),
                   EMBER_EINVAL);
  gam_store_close(s);
}

/* ------------------------------------------------------------------------ */
/* Apps, leases, load                                                        */

static void lease_end_idempotent(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  register_node(s, "n1", 1);
  uint64_t app = 0, lease = 0;
  assert_int_equal(gam_store_app_create(s, "a", "sw", 1, 10, &app), 0);
  assert_int_equal(gam_store_lease_create(s, app, "n1", "sw", 10, 20, &lease),
                   0);
  assert_int_equal(gam_store_lease_end(s, lease, "released", 100), 0);
  assert_int_equal(gam_store_lease_end(s, lease, "expired", 200), 0);
  char reason[64];
  raw_text(s->db, "SELECT end_reason || ' ' || ended_ms FROM leases", reason,
           sizeof reason);
  assert_string_equal(reason, "released 100");
  assert_int_equal(gam_store_lease_end(s, 999, "released", 100),
                   EMBER_ENOTFOUND);
  assert_int_equal(gam_store_lease_end(s, lease, NULL, 100), EMBER_EINVAL);
  gam_store_close(s);
}

static void load_visits_live_rows_in_order(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  register_node(s, "n2", 2);   /* registered first, visited second */
  register_node(s, "n1", 1);
  uint64_t a[3], l[4];
  assert_int_equal(gam_store_app_create(s, "p", "sw", 1, 10, &a[0]), 0);
  assert_int_equal(gam_store_app_create(s, "r", "sw", 2, 11, &a[1]), 0);
  assert_int_equal(gam_store_app_create(s, "e", "sw", 1, 12, &a[2]), 0);
  assert_int_equal(gam_store_lease_create(s, a[0], "n1", "sw", 1, 2, &l[0]),
                   0);
  assert_int_equal(gam_store_lease_create(s, a[1], "n1", "sw", 3, 4, &l[1]),
                   0);
  assert_int_equal(gam_store_lease_create(s, a[1], "n2", "sw", 5, 6, &l[2]),
                   0);
  assert_int_equal(gam_store_lease_create(s, a[2], "n2", "sw", 7, 8, &l[3]),
                   0);
  assert_int_equal(gam_store_app_set_state(s, a[1], GAM_APP_RUNNING, 20), 0);
  assert_int_equal(gam_store_lease_end(s, l[1], "released", 21), 0);
  /* Ending an app ends the leases it still holds. */
  assert_int_equal(gam_store_app_set_state(s, a[2], GAM_APP_ENDED, 22), 0);
  char reason[64];
  raw_text(s->db, "SELECT end_reason FROM leases WHERE id = 4", reason,
           sizeof reason);
  assert_string_equal(reason, "app ended");

  dump d;
  load_into(s, &d);
  assert_string_equal(d.text,
                      "node n1 tcp:127.0.0.1:7001 up reg=1 seen=1\n"
                      "node n2 tcp:127.0.0.1:7002 up reg=2 seen=2\n"
                      "app 1 p sw x1 pending at=10\n"
                      "app 2 r sw x2 running at=11\n"
                      "lease 1 app=1 n1 sw 1-2\n"
                      "lease 3 app=2 n2 sw 5-6\n");

  /* A callback that says stop ends the load with its value. */
  memset(&d, 0, sizeof d);
  d.stop_after = 3;
  assert_int_equal(gam_store_load(s, &all, &d), 7);
  assert_int_equal(d.rows, 3);
  assert_string_equal(d.text,
                      "node n1 tcp:127.0.0.1:7001 up reg=1 seen=1\n"
                      "node n2 tcp:127.0.0.1:7002 up reg=2 seen=2\n"
                      "app 1 p sw x1 pending at=10\n");
  /* ...and leaves no transaction open behind it. */
  assert_int_equal(gam_store_begin(s), 0);
  assert_int_equal(gam_store_commit(s), 0);
  assert_int_equal(gam_store_load(s, NULL, NULL), EMBER_EINVAL);
  gam_store_close(s);
}

static void node_state(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  register_node(s, "n1", 100);
  assert_int_equal(gam_store_node_set_state(s, "n1", GAM_NODE_UP, 150), 0);
  assert_int_equal(gam_store_node_set_drained(s, "n1", true), 0);
  /* Lost: last seen stays when it was last up. */
  assert_int_equal(gam_store_node_set_state(s, "n1", GAM_NODE_LOST, 200), 0);
  dump d;
  load_into(s, &d);
  assert_string_equal(d.text,
                      "node n1 tcp:127.0.0.1:7100 lost drained reg=100 "
                      "seen=150\n");
  /* Registering again: up, new address, still drained (the admin's). */
  assert_int_equal(gam_store_node_register(s, "n1", "tcp:10.1.1.1:9", 300),
                   0);
  load_into(s, &d);
  assert_string_equal(d.text,
                      "node n1 tcp:10.1.1.1:9 up drained reg=300 seen=300\n");

  assert_int_equal(gam_store_node_set_state(s, "nx", GAM_NODE_UP, 1),
                   EMBER_ENOTFOUND);
  assert_non_null(strstr(gam_store_error(s), "nx"));
  assert_int_equal(gam_store_node_set_drained(s, "nx", true),
                   EMBER_ENOTFOUND);
  assert_int_equal(gam_store_node_set_state(s, "n1", (gam_node_state)5, 1),
                   EMBER_EINVAL);
  assert_int_equal(gam_store_node_register(s, "", "tcp:x:1", 1), EMBER_EINVAL);
  assert_int_equal(gam_store_node_register(s, NULL, "tcp:x:1", 1),
                   EMBER_EINVAL);
  gam_store_close(s);
}

static void app_and_lease_errors(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  register_node(s, "n1", 1);
  uint64_t id = 77;
  assert_int_equal(gam_store_app_create(s, "a", "sw", 0, 1, &id),
                   EMBER_EINVAL);
  assert_int_equal(id, 77);
  assert_int_equal(gam_store_app_create(s, "a", "sw", 1, 1, &id), 0);
  assert_int_equal(gam_store_app_set_state(s, 999, GAM_APP_RUNNING, 1),
                   EMBER_ENOTFOUND);
  assert_int_equal(gam_store_app_set_state(s, id, (gam_app_state)9, 1),
                   EMBER_EINVAL);
  assert_int_equal(gam_store_lease_create(s, 999, "n1", "sw", 1, 2, NULL),
                   EMBER_ENOTFOUND);
  assert_int_equal(gam_store_lease_create(s, id, "nx", "sw", 1, 2, NULL),
                   EMBER_ENOTFOUND);
  print_message("refused: %s\n", gam_store_error(s));
  assert_int_equal(gam_store_lease_create(s, id, "n1", "sw", 5, 2, NULL),
                   EMBER_EINVAL);
  assert_int_equal(gam_store_event(s, 1, NULL, NULL, 0, NULL), EMBER_EINVAL);
  dump d;
  load_into(s, &d);
  assert_string_equal(d.text,
                      "node n1 tcp:127.0.0.1:7001 up reg=1 seen=1\n"
                      "app 1 a sw x1 pending at=1\n");
  gam_store_close(s);
  gam_store_close(NULL);   /* a no-op */
}

/* Quotes and SQL in names are data: everything is a bound parameter. */
static void strings_are_parameters(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  const char *id = "n'); DROP TABLE nodes; --";
  assert_int_equal(gam_store_node_register(s, id, "tcp:\"x\":1", 1), 0);
  const char *rep[] = {"it's"};
  assert_int_equal(gam_store_node_set_reported(s, id, rep, 1), 0);
  uint64_t app = 0;
  assert_int_equal(gam_store_app_create(s, "O'Brien \"app\"", "it's", 1, 2,
                                        &app), 0);
  assert_int_equal(gam_store_event(s, 3, "k'", id, app, "%s %n '"), 0);
  gam_store_close(s);
  s = open_ok(t->db);
  dump d;
  load_into(s, &d);
  assert_string_equal(d.text,
                      "node n'); DROP TABLE nodes; -- tcp:\"x\":1 up reg=1 "
                      "seen=1\n"
                      "label n'); DROP TABLE nodes; -- it's nam\n"
                      "app 1 O'Brien \"app\" it's x1 pending at=2\n");
  events_into(s, 0, &d);
  assert_string_equal(d.text,
                      "event 1 at=3 k' node=n'); DROP TABLE nodes; -- app=1 "
                      "%s %n '\n");
  gam_store_close(s);
}

/* ------------------------------------------------------------------------ */
/* Events and transactions                                                   */

static void events_newest_first(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  for (int i = 1; i <= 5; i++) {
    char kind[16];
    snprintf(kind, sizeof kind, "k%d", i);
    assert_int_equal(gam_store_event(s, (uint64_t)i * 10, kind,
                                     i % 2 ? "n1" : NULL, (uint64_t)i % 3,
                                     i == 5 ? "last" : ""), 0);
  }
  dump d;
  events_into(s, 3, &d);
  assert_string_equal(d.text,
                      "event 5 at=50 k5 node=n1 app=2 last\n"
                      "event 4 at=40 k4 node= app=1 \n"
                      "event 3 at=30 k3 node=n1 app=0 \n");
  events_into(s, 0, &d);   /* 0: all of them */
  assert_int_equal(d.rows, 5);
  events_into(s, 100, &d);
  assert_int_equal(d.rows, 5);
  assert_non_null(strstr(d.text, "event 1 at=10 k1 node=n1 app=1 \n"));
  memset(&d, 0, sizeof d);
  d.stop_after = 2;
  assert_int_equal(gam_store_events(s, 0, dump_event, &d), 7);
  assert_int_equal(d.rows, 2);
  assert_int_equal(gam_store_events(s, 0, NULL, NULL), EMBER_EINVAL);
  gam_store_close(s);
}

static void transactions(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  register_node(s, "n1", 1);
  uint64_t id = 0;
  assert_int_equal(gam_store_begin(s), 0);
  assert_int_equal(gam_store_begin(s), EMBER_EINVAL);   /* no nesting */
  assert_int_equal(gam_store_app_create(s, "gone", "sw", 1, 1, &id), 0);
  assert_int_equal(gam_store_event(s, 1, "app_pending", NULL, id, NULL), 0);
  assert_int_equal(gam_store_rollback(s), 0);
  assert_int_equal(gam_store_commit(s), EMBER_EINVAL);   /* none open */
  assert_int_equal(gam_store_rollback(s), 0);            /* harmless */

  assert_int_equal(gam_store_begin(s), 0);
  assert_int_equal(gam_store_app_create(s, "kept", "sw", 1, 2, &id), 0);
  assert_int_equal(gam_store_lease_create(s, id, "n1", "sw", 2, 3, NULL), 0);
  assert_int_equal(gam_store_app_set_state(s, id, GAM_APP_RUNNING, 2), 0);
  assert_int_equal(gam_store_commit(s), 0);
  gam_store_close(s);

  s = open_ok(t->db);
  dump d;
  load_into(s, &d);
  assert_string_equal(d.text,
                      "node n1 tcp:127.0.0.1:7001 up reg=1 seen=1\n"
                      "app 1 kept sw x1 running at=2\n"
                      "lease 1 app=1 n1 sw 2-3\n");
  events_into(s, 0, &d);
  assert_string_equal(d.text, "");
  gam_store_close(s);
}

/* ------------------------------------------------------------------------ */
/* kill -9 in the middle of committing                                       */

/* What the child tells the parent once a change is committed. */
typedef struct report {
  char what;   /* N node, A app, L lease, E lease ended, G app + event */
  uint64_t id;
} report;

static void say(int fd, char what, uint64_t id) {
  report r = {what, id};
  if (write(fd, &r, sizeof r) != (ssize_t)sizeof r) _exit(3);
}

/* The child: commit changes of every kind, one by one and grouped, until
 * killed. Each report is written only after its commit returned. */
static void child_commit_forever(const char *path, int fd, int round) {
  gam_store *s = NULL;
  char err[256];
  if (gam_store_open(path, &s, err, sizeof err) != 0) _exit(2);
  char node[32] = "";
  uint64_t app = 0, lease = 0;
  for (uint64_t i = 0; i < 1000000; i++) {
    uint64_t id = 0;
    switch (i % 5) {
    case 0:
      snprintf(node, sizeof node, "r%dn%llu", round, (unsigned long long)i);
      if (gam_store_node_register(s, node, "tcp:127.0.0.1:7000", i) != 0)
        _exit(4);
      const char *labels[] = {"sw", "plf"};
      if (gam_store_node_set_reported(s, node, labels, 2) != 0) _exit(4);
      say(fd, 'N', i);
      break;
    case 1:
      if (gam_store_app_create(s, "crash", "sw", 1, i, &app) != 0) _exit(4);
      say(fd, 'A', app);
      break;
    case 2:
      if (gam_store_lease_create(s, app, node, "sw", i, i + 1, &lease) != 0)
        _exit(4);
      say(fd, 'L', lease);
      break;
    case 3:
      if (gam_store_lease_end(s, lease, "released", i) != 0) _exit(4);
      say(fd, 'E', lease);
      break;
    case 4:
      if (gam_store_begin(s) != 0 ||
          gam_store_app_create(s, "group", "plf", 2, i, &id) != 0 ||
          gam_store_app_set_state(s, id, GAM_APP_RUNNING, i) != 0 ||
          gam_store_event(s, i, "app_pending", NULL, id, "grouped") != 0 ||
          gam_store_commit(s) != 0)
        _exit(4);
      say(fd, 'G', id);
      break;
    }
  }
  _exit(0);
}

static int read_report(int fd, report *r) {
  size_t got = 0;
  while (got < sizeof *r) {
    ssize_t n = read(fd, (char *)r + got, sizeof *r - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    got += (size_t)n;
  }
  return 1;
}

static void check_reported(sqlite3 *db, int round, const report *r) {
  char sql[160], node[32];
  switch (r->what) {
  case 'N':
    /* The node and the labels it reported right after. */
    snprintf(node, sizeof node, "r%dn%llu", round, (unsigned long long)r->id);
    assert_int_equal(
        raw_int(db, "SELECT count(*) FROM nodes n JOIN labels l"
                    " ON l.node = n.id AND l.origin = 'nam' WHERE n.id = ?1",
                node),
        2);
    return;
  case 'A':
    snprintf(sql, sizeof sql, "SELECT count(*) FROM apps WHERE id = %llu",
             (unsigned long long)r->id);
    break;
  case 'L':
    snprintf(sql, sizeof sql, "SELECT count(*) FROM leases WHERE id = %llu",
             (unsigned long long)r->id);
    break;
  case 'E':
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM leases WHERE id = %llu"
             " AND end_reason = 'released'", (unsigned long long)r->id);
    break;
  case 'G':
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM apps a JOIN events e ON e.app_id = a.id"
             " WHERE a.id = %llu AND a.state = 1 AND e.detail = 'grouped'",
             (unsigned long long)r->id);
    break;
  default:
    fail_msg("bad report %c", r->what);
  }
  long long n = raw_int(db, sql, NULL);
  if (n != 1) print_error("lost: %c %llu\n", r->what,
                          (unsigned long long)r->id);
  assert_int_equal(n, 1);
}

static unsigned test_seed(void) {
  const char *env = getenv("EMBER_TEST_SEED");
  if (env && *env) return (unsigned)strtoul(env, NULL, 10);
  return (unsigned)time(NULL) ^ ((unsigned)getpid() << 8);
}

static void kill9_loses_nothing_committed(void **state) {
  tmp *t = *state;
  unsigned seed = test_seed();
  print_message("crash test seed %u (EMBER_TEST_SEED=%u to replay)\n", seed,
                seed);
  srand(seed);
  gam_store_close(open_ok(t->db));
  uint64_t max_app = 0, total = 0;

  for (int round = 0; round < 4; round++) {
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      close(p[0]);
      child_commit_forever(t->db, p[1], round);
    }
    close(p[1]);
    /* Kill it somewhere between 1 and 3000 commits in (past a few
     * WAL checkpoints), and up to a
     * millisecond after the last one it reported. */
    unsigned kill_after = 1 + (unsigned)rand() % 3000;
    report r;
    /* A pipe holds a few thousand reports; the child blocks beyond. */
    size_t cap = kill_after + 65536 / sizeof r + 1;
    report *seen = calloc(cap, sizeof *seen);
    assert_non_null(seen);
    size_t n = 0;
    while (n < kill_after && read_report(p[0], &r)) seen[n++] = r;
    usleep((useconds_t)(rand() % 1000));
    kill(pid, SIGKILL);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFSIGNALED(status))
      print_error("child exited with %d\n", WEXITSTATUS(status));
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGKILL);
    while (read_report(p[0], &r)) {   /* what it said last */
      assert_true(n < cap);
      seen[n++] = r;
    }
    close(p[0]);
    print_message("round %d: killed after %zu reported commits\n", round, n);
    total += n;

    /* A raw connection first: it recovers the log, then checks. */
    sqlite3 *db = raw_open(t->db);
    char ok[64];
    raw_text(db, "PRAGMA integrity_check", ok, sizeof ok);
    assert_string_equal(ok, "ok");
    sqlite3_stmt *st = NULL;
    assert_int_equal(
        sqlite3_prepare_v2(db, "PRAGMA foreign_key_check", -1, &st, NULL),
        SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    for (size_t i = 0; i < n; i++) {
      check_reported(db, round, &seen[i]);
      if ((seen[i].what == 'A' || seen[i].what == 'G') &&
          seen[i].id > max_app)
        max_app = seen[i].id;
    }
    sqlite3_close(db);
    free(seen);

    /* The store opens it, and the next id is past all it handed out. */
    gam_store *s = open_ok(t->db);
    uint64_t id = 0;
    assert_int_equal(gam_store_app_create(s, "after", "sw", 1, 1, &id), 0);
    assert_true(id > max_app);
    max_app = id;
    gam_store_close(s);
  }
  assert_true(total >= 4);
}

/* A capped store refuses growth as a full disk would, and says so. */
static void full_store_says_so(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  assert_int_equal(gam_store_set_max_size(s, 64 * 1024), 0);
  char detail[200];
  memset(detail, 'x', sizeof detail - 1);
  detail[sizeof detail - 1] = '\0';
  int rc = 0, i = 0;
  for (; i < 100000 && rc == 0; i++)
    rc = gam_store_event(s, (uint64_t)i, "test", "n1", 0, detail);
  assert_int_equal(rc, EMBER_EIO);
  assert_true(i > 10);  /* some fitted first */
  assert_non_null(strstr(gam_store_error(s), "the disk is full"));
  gam_store_close(s);
}

/* A directory the store cannot write is named, not "unable to open". */
static void unwritable_dir_named(void **state) {
  tmp *t = *state;
  char file[320], path[400], err[512];
  snprintf(file, sizeof file, "%s/afile", t->dir);
  int fd = open(file, O_CREAT | O_WRONLY, 0600);
  assert_true(fd >= 0);
  close(fd);
  snprintf(path, sizeof path, "%s/gam.db", file);  /* under a regular file */
  gam_store *s = NULL;
  assert_int_equal(gam_store_open(path, &s, err, sizeof err), EMBER_EIO);
  assert_null(s);
  char want[400];
  snprintf(want, sizeof want, "state directory %s is not writable: %s", file,
           strerror(ENOTDIR));
  if (!strstr(err, want)) fail_msg("got '%s', want '%s'", err, want);
  unlink(file);
  if (geteuid() == 0) return;  /* root writes a 0500 directory anyway */
  char ro[320];
  snprintf(ro, sizeof ro, "%s/ro", t->dir);
  assert_int_equal(mkdir(ro, 0500), 0);
  snprintf(path, sizeof path, "%s/gam.db", ro);
  assert_int_equal(gam_store_open(path, &s, err, sizeof err), EMBER_EIO);
  snprintf(want, sizeof want, "state directory %s is not writable: %s", ro,
           strerror(EACCES));
  if (!strstr(err, want)) fail_msg("got '%s', want '%s'", err, want);
  rmdir(ro);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(reopen_keeps_everything, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(pragmas_and_user_version, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test(memory_store),
    cmocka_unit_test_setup_teardown(newer_file_refused, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(migrate_empty_files, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(foreign_files_refused, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(migration_steps, tmp_setup, tmp_teardown),
    cmocka_unit_test_setup_teardown(ids_never_reused, tmp_setup, tmp_teardown),
    cmocka_unit_test_setup_teardown(reported_labels_replace, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(label_overrides, tmp_setup, tmp_teardown),
    cmocka_unit_test_setup_teardown(lease_end_idempotent, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(load_visits_live_rows_in_order, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(node_state, tmp_setup, tmp_teardown),
    cmocka_unit_test_setup_teardown(app_and_lease_errors, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(strings_are_parameters, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(events_newest_first, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(transactions, tmp_setup, tmp_teardown),
    cmocka_unit_test_setup_teardown(kill9_loses_nothing_committed, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(full_store_says_so, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(unwritable_dir_named, tmp_setup,
                                    tmp_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
