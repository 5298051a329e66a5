/*
 * store_load.c - reading the store back: everything the daemon needs at
 * start (gam_store_load) and the newest events (gam_store_events). Rows
 * go to callbacks; their strings live until the callback returns.
 */
#include "ember/ember_errors.h"
#include "store_int.h"

/* A text column; "" for NULL, so callers never test. */
static const char *text(sqlite3_stmt *st, int col) {
  const unsigned char *t = sqlite3_column_text(st, col);
  return t ? (const char *)t : "";
}

static uint64_t u64(sqlite3_stmt *st, int col) {
  return (uint64_t)sqlite3_column_int64(st, col);
}

/* One row of a query to its callback. */
typedef int (*row_fn)(void *user, const void *fn, sqlite3_stmt *st);

/* Step through a statement, handing each row to emit; stops at the
 * first nonzero from the callback and returns it. */
static int each_row(gam_store *s, sqlite3_stmt *st, row_fn emit,
                    const void *fn, void *user) {
  int ret = 0;
  for (;;) {
    int rc = sqlite3_step(st);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      ret = gam_store_fail(s, rc);
      break;
    }
    ret = emit(user, fn, st);
    if (ret) break;
  }
  sqlite3_reset(st);
  return ret;
}

/* The callbacks' types differ; each emitter knows its own. */
typedef int (*node_cb)(void *, const gam_store_node_row *);
typedef int (*label_cb)(void *, const gam_store_label_row *);
typedef int (*app_cb)(void *, const gam_store_app_row *);
typedef int (*lease_cb)(void *, const gam_store_lease_row *);
typedef int (*event_cb)(void *, const gam_store_event_row *);

typedef struct fn_box {
  node_cb node;
  label_cb label;
  app_cb app;
  lease_cb lease;
  event_cb event;
} fn_box;

static int emit_node(void *user, const void *fn, sqlite3_stmt *st) {
  gam_store_node_row row = {
    .id = text(st, 0),
    .address = text(st, 1),
    .state = sqlite3_column_int(st, 2) ? GAM_NODE_LOST : GAM_NODE_UP,
    .drained = sqlite3_column_int(st, 3) != 0,
    .registered_ms = u64(st, 4),
    .last_seen_ms = u64(st, 5),
  };
  return ((const fn_box *)fn)->node(user, &row);
}

static int emit_label(void *user, const void *fn, sqlite3_stmt *st) {
  gam_store_label_row row = {
    .node = text(st, 0),
    .label = text(st, 1),
    .admin = sqlite3_column_int(st, 2) != 0,
    .on = sqlite3_column_int(st, 3) != 0,
  };
  return ((const fn_box *)fn)->label(user, &row);
}

static int emit_app(void *user, const void *fn, sqlite3_stmt *st) {
  gam_store_app_row row = {
    .id = u64(st, 0),
    .name = text(st, 1),
    .label = text(st, 2),
    .wanted = (unsigned)sqlite3_column_int64(st, 3),
    .state = (gam_app_state)sqlite3_column_int(st, 4),
    .created_ms = u64(st, 5),
  };
  return ((const fn_box *)fn)->app(user, &row);
}

static int emit_lease(void *user, const void *fn, sqlite3_stmt *st) {
  gam_store_lease_row row = {
    .id = u64(st, 0),
    .app_id = u64(st, 1),
    .node = text(st, 2),
    .label = text(st, 3),
    .issued_unix_ms = u64(st, 4),
    .expires_unix_ms = u64(st, 5),
  };
  return ((const fn_box *)fn)->lease(user, &row);
}

static int emit_event(void *user, const void *fn, sqlite3_stmt *st) {
  gam_store_event_row row = {
    .id = u64(st, 0),
    .at_ms = u64(st, 1),
    .kind = text(st, 2),
    .node = text(st, 3),
    .app_id = u64(st, 4),   /* NULL reads as 0: no app */
    .detail = text(st, 5),
  };
  return ((const fn_box *)fn)->event(user, &row);
}

static int load_all(gam_store *s, const fn_box *fns, void *user) {
  static const struct {
    gam_store_stmt stmt;
    row_fn emit;
  } parts[] = {
    {GAM_ST_LOAD_NODES, emit_node},
    {GAM_ST_LOAD_LABELS, emit_label},
    {GAM_ST_LOAD_APPS, emit_app},
    {GAM_ST_LOAD_LEASES, emit_lease},
  };
  const bool wanted[] = {fns->node, fns->label, fns->app, fns->lease};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    if (!wanted[i]) continue;
    int ret = each_row(s, gam_store_stmt_get(s, parts[i].stmt), parts[i].emit,
                       fns, user);
    if (ret) return ret;
  }
  return 0;
}

int gam_store_load(gam_store *s, const gam_store_visitor *v, void *user) {
  if (!v) return gam_store_failf(s, EMBER_EINVAL, "no visitor");
  fn_box fns = {v->node, v->label, v->app, v->lease, NULL};
  /* One read transaction: the four queries see the same state. */
  bool outer;
  int ret = gam_store_op_begin(s, false, &outer);
  if (ret) return ret;
  ret = load_all(s, &fns, user);
  /* A callback that stopped the load is not a failure of the store:
   * whatever it changed meanwhile stays. */
  int end = gam_store_op_end(s, outer, 0);
  return ret ? ret : end;
}

int gam_store_events(gam_store *s, unsigned limit,
                     int (*fn)(void *user, const gam_store_event_row *row),
                     void *user) {
  if (!fn) return gam_store_failf(s, EMBER_EINVAL, "no callback");
  fn_box fns = {.event = fn};
  sqlite3_stmt *st = gam_store_stmt_get(s, GAM_ST_EVENTS);
  sqlite3_bind_int64(st, 1, limit ? (sqlite3_int64)limit : -1);
  return each_row(s, st, emit_event, &fns, user);
}
