/*
 * test_gam_store_writer.c - the GAM store's writer thread
 * (gam/store_writer.c) on a file in a temporary directory: changes are
 * numbered as they are queued, committed only once published, and found
 * in the file after a reopen, with the ids the caller chose (and
 * gam_store_last_ids past them); a change the store refuses is counted
 * while the rest of its batch commits; events are read on the writer's
 * thread; a commit that fails (the file may not grow) is fatal: wait says
 * EMBER_EIO, failed() says why, and nothing more becomes durable.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "ember/ember_errors.h"
#include "gam_store_tmp.h"
#include "store.h"
#include "store_int.h"   /* the handle's sqlite3 *, to cap the file */
#include "store_writer.h"

static gam_writer *writer_ok(gam_store *s) {
  gam_writer *w = NULL;
  char err[256];
  int rc = gam_writer_start(s, &w, err, sizeof err);
  if (rc) print_error("writer: %s\n", err);
  assert_int_equal(rc, 0);
  return w;
}

/* What a load finds, as counts and the ids seen. */
typedef struct found {
  int nodes, labels, apps, leases;
  uint64_t app_ids[8], lease_ids[8];
} found;

static int on_node(void *u, const gam_store_node_row *r) {
  (void)r;
  ((found *)u)->nodes++;
  return 0;
}
static int on_label(void *u, const gam_store_label_row *r) {
  (void)r;
  ((found *)u)->labels++;
  return 0;
}
static int on_app(void *u, const gam_store_app_row *r) {
  found *f = u;
  if (f->apps < 8) f->app_ids[f->apps] = r->id;
  f->apps++;
  return 0;
}
static int on_lease(void *u, const gam_store_lease_row *r) {
  found *f = u;
  if (f->leases < 8) f->lease_ids[f->leases] = r->id;
  f->leases++;
  return 0;
}

static found load(gam_store *s) {
  found f = {0};
  gam_store_visitor v = {on_node, on_label, on_app, on_lease};
  assert_int_equal(gam_store_load(s, &v, &f), 0);
  return f;
}

static void queue_cluster(gam_writer *w) {
  const char *labels[] = {"sw", "sw@fpga-emu"};
  gam_writer_node_register(w, "n1", "127.0.0.1:7001", 100);
  gam_writer_node_set_reported(w, "n1", labels, 2);
  gam_writer_app_insert(w, 5, "app", "sw", 1, 110);
  gam_writer_lease_insert(w, 9, 5, "n1", "sw", 120, 99999);
  gam_writer_event(w, 120, "lease_granted", "n1", 5, "sw");
}

static void published_changes_commit(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  gam_writer *w = writer_ok(s);
  assert_true(gam_writer_queued(w) == 0);
  queue_cluster(w);
  uint64_t seq = gam_writer_queued(w);
  assert_true(seq == 5);
  /* not published: nothing is committed, however long we wait */
  usleep(50 * 1000);
  assert_true(gam_writer_durable(w) == 0);
  gam_writer_publish(w);
  assert_int_equal(gam_writer_wait(w, seq), 0);
  assert_true(gam_writer_durable(w) >= seq);
  gam_writer_stats st;
  gam_writer_get_stats(w, &st);
  assert_true(st.changes == 5);
  assert_true(st.commits >= 1 && st.commits <= 5);
  assert_true(st.refused == 0);
  assert_false(gam_writer_failed(w, NULL, 0));
  gam_writer_stop(w);
  gam_store_close(s);

  s = open_ok(t->db);
  found f = load(s);
  assert_int_equal(f.nodes, 1);
  assert_int_equal(f.labels, 2);
  assert_int_equal(f.apps, 1);
  assert_true(f.app_ids[0] == 5);
  assert_int_equal(f.leases, 1);
  assert_true(f.lease_ids[0] == 9);
  uint64_t last_app = 0, last_lease = 0;
  assert_int_equal(gam_store_last_ids(s, &last_app, &last_lease), 0);
  assert_true(last_app == 5 && last_lease == 9);
  /* an id already used is refused */
  assert_int_equal(gam_store_app_insert(s, 5, "again", "sw", 1, 200),
                   EMBER_EINVAL);
  assert_int_equal(gam_store_app_insert(s, 0, "zero", "sw", 1, 200),
                   EMBER_EINVAL);
  gam_store_close(s);
}

static void stop_commits_what_is_queued(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  gam_writer *w = writer_ok(s);
  queue_cluster(w);
  gam_writer_stop(w);  /* publishes, commits, joins */
  found f = load(s);
  assert_int_equal(f.apps, 1);
  assert_int_equal(f.leases, 1);
  gam_store_close(s);
}

static void refused_change_skipped(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  gam_writer *w = writer_ok(s);
  gam_writer_node_register(w, "n1", "127.0.0.1:7001", 100);
  /* no app 77: the foreign key refuses it */
  gam_writer_lease_insert(w, 1, 77, "n1", "sw", 120, 99999);
  gam_writer_event(w, 130, "node_registered", "n1", 0, NULL);
  gam_writer_publish(w);
  assert_int_equal(gam_writer_wait(w, gam_writer_queued(w)), 0);
  gam_writer_stats st;
  gam_writer_get_stats(w, &st);
  assert_true(st.refused == 1);
  assert_true(st.changes == 2);
  assert_false(gam_writer_failed(w, NULL, 0));
  gam_writer_stop(w);
  found f = load(s);
  assert_int_equal(f.nodes, 1);
  assert_int_equal(f.leases, 0);
  gam_store_close(s);
}

typedef struct events_seen {
  int n;
  char kinds[4][32];
} events_seen;

static int on_event(void *u, const gam_store_event_row *r) {
  events_seen *e = u;
  if (e->n < 4) snprintf(e->kinds[e->n], sizeof e->kinds[0], "%s", r->kind);
  e->n++;
  return 0;
}

static void events_read_after_published(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  gam_writer *w = writer_ok(s);
  gam_writer_event(w, 1, "first", NULL, 0, NULL);
  gam_writer_event(w, 2, "second", NULL, 0, "x");
  gam_writer_event(w, 3, "third", NULL, 0, NULL);
  gam_writer_publish(w);
  events_seen e = {0};
  /* the read runs after what was published: all three are there */
  assert_int_equal(gam_writer_events(w, 2, on_event, &e), 0);
  assert_int_equal(e.n, 2);
  assert_string_equal(e.kinds[0], "third");
  assert_string_equal(e.kinds[1], "second");
  gam_writer_stop(w);
  gam_store_close(s);
}

static void memory_store_works(void **state) {
  (void)state;
  gam_store *s = open_ok(":memory:");
  gam_writer *w = writer_ok(s);
  queue_cluster(w);
  gam_writer_publish(w);
  assert_int_equal(gam_writer_wait(w, gam_writer_queued(w)), 0);
  gam_writer_stop(w);
  found f = load(s);
  assert_int_equal(f.leases, 1);
  gam_store_close(s);
}

static int failures_notified;
static void count_failure(void *user) {
  (void)user;
  __atomic_add_fetch(&failures_notified, 1, __ATOMIC_SEQ_CST);
}

static void failed_commit_is_fatal(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  /* the file may not grow past its current pages: the next inserts that
   * need a page fail with SQLITE_FULL, as on a full disk */
  sqlite3_stmt *st;
  assert_int_equal(sqlite3_prepare_v2(s->db, "PRAGMA page_count", -1, &st,
                                      NULL), SQLITE_OK);
  assert_int_equal(sqlite3_step(st), SQLITE_ROW);
  int pages = sqlite3_column_int(st, 0);
  sqlite3_finalize(st);
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA max_page_count = %d", pages);
  assert_int_equal(sqlite3_exec(s->db, sql, NULL, NULL, NULL), SQLITE_OK);

  gam_writer *w = writer_ok(s);
  gam_writer_set_notify(w, count_failure, NULL);
  char detail[512];
  memset(detail, 'x', sizeof detail - 1);
  detail[sizeof detail - 1] = '\0';
  for (int i = 0; i < 2000; i++)
    gam_writer_event(w, (uint64_t)i, "filler", NULL, 0, detail);
  gam_writer_publish(w);
  assert_int_equal(gam_writer_wait(w, gam_writer_queued(w)), EMBER_EIO);
  char why[400];
  assert_true(gam_writer_failed(w, why, sizeof why));
  assert_non_null(strstr(why, "committing failed"));
  assert_true(gam_writer_durable(w) < gam_writer_queued(w));
  assert_true(__atomic_load_n(&failures_notified, __ATOMIC_SEQ_CST) >= 1);
  /* later changes are not committed either */
  uint64_t before = gam_writer_durable(w);
  gam_writer_event(w, 1, "later", NULL, 0, NULL);
  gam_writer_publish(w);
  assert_int_equal(gam_writer_wait(w, gam_writer_queued(w)), EMBER_EIO);
  assert_true(gam_writer_durable(w) == before);
  events_seen e = {0};
  assert_int_equal(gam_writer_events(w, 1, on_event, &e), EMBER_EIO);
  gam_writer_stop(w);
  gam_store_close(s);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(published_changes_commit, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(stop_commits_what_is_queued, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(refused_change_skipped, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(events_read_after_published, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test(memory_store_works),
    cmocka_unit_test_setup_teardown(failed_commit_is_fatal, tmp_setup,
                                    tmp_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
