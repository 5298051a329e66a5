/*
 * test_gam_store_sync.c - group commit (gam/store_sync.c): the store
 * counts its commits (none in memory); the syncer brings the durable
 * sequence up to every commit made, with fewer flushes than commits when
 * they come in bursts; it checkpoints a long log into the database file,
 * so the log starts over;
 * a NULL syncer means "durable at once", and so does an in-memory
 * store.
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

#include "ember/ember_errors.h"
#include "store.h"
#include "store_int.h"   /* the log's length after a commit */
#include "store_sync.h"

typedef struct tmp {
  char dir[256];
  char db[300];
} tmp;

static void unlink_db(const char *db, const char *suffix) {
  char p[320];
  snprintf(p, sizeof p, "%s%s", db, suffix);
  unlink(p);
}

static int tmp_setup(void **state) {
  tmp *t = calloc(1, sizeof *t);
  if (!t) return -1;
  const char *base = getenv("TMPDIR");
  snprintf(t->dir, sizeof t->dir, "%s/ember-sync-XXXXXX",
           base && *base ? base : "/tmp");
  if (!mkdtemp(t->dir)) {
    free(t);
    return -1;
  }
  snprintf(t->db, sizeof t->db, "%s/gam.db", t->dir);
  *state = t;
  return 0;
}

static int tmp_teardown(void **state) {
  tmp *t = *state;
  unlink_db(t->db, "");
  unlink_db(t->db, "-wal");
  unlink_db(t->db, "-shm");
  rmdir(t->dir);
  free(t);
  return 0;
}

static gam_store *open_ok(const char *path) {
  gam_store *s = NULL;
  char err[256];
  int rc = gam_store_open(path, &s, err, sizeof err);
  if (rc) print_error("open %s: %s\n", path, err);
  assert_int_equal(rc, 0);
  return s;
}

static gam_syncer *syncer_ok(gam_store *s) {
  gam_syncer *y = NULL;
  char err[256];
  int rc = gam_syncer_start(s, &y, err, sizeof err);
  if (rc) print_error("syncer: %s\n", err);
  assert_int_equal(rc, 0);
  return y;
}

/* One change per call: each is a commit of its own. */
static void register_nodes(gam_store *s, int from, int n) {
  for (int i = from; i < from + n; i++) {
    char id[32];
    snprintf(id, sizeof id, "node-%05d", i);
    assert_int_equal(gam_store_node_register(s, id, "127.0.0.1:7000",
                                             1000 + (uint64_t)i), 0);
  }
}

static void commits_are_counted(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  uint64_t before = gam_store_commit_seq(s);
  register_nodes(s, 0, 5);
  assert_int_equal(gam_store_commit_seq(s), before + 5);
  /* a transaction of several changes is one commit */
  assert_int_equal(gam_store_begin(s), 0);
  register_nodes(s, 5, 3);
  assert_int_equal(gam_store_commit_seq(s), before + 5);
  assert_int_equal(gam_store_commit(s), 0);
  assert_int_equal(gam_store_commit_seq(s), before + 6);
  /* a rolled-back one is none */
  assert_int_equal(gam_store_begin(s), 0);
  register_nodes(s, 8, 1);
  assert_int_equal(gam_store_rollback(s), 0);
  assert_int_equal(gam_store_commit_seq(s), before + 6);
  gam_store_close(s);

  gam_store *m = open_ok(":memory:");
  register_nodes(m, 0, 3);
  assert_int_equal(gam_store_commit_seq(m), 0);
  gam_store_close(m);
}

static void durable_reaches_every_commit(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  gam_syncer *y = syncer_ok(s);
  for (int burst = 0; burst < 20; burst++) {
    register_nodes(s, burst * 50, 50);
    uint64_t seq = gam_store_commit_seq(s);
    assert_int_equal(gam_syncer_wait(y, seq), 0);
    assert_true(gam_syncer_durable(y) >= seq);
  }
  uint64_t flushes, ns, checkpoints;
  gam_syncer_stats(y, &flushes, &ns, &checkpoints);
  /* 1,000 commits: one flush per burst at most, plus the start-up one */
  assert_true(flushes >= 1);
  assert_true(flushes <= 21);
  assert_false(gam_syncer_failed(y, NULL, 0));
  gam_syncer_stop(y);
  gam_store_close(s);
}

static uint64_t checkpoints_done(gam_syncer *y) {
  uint64_t flushes, ns, checkpoints;
  gam_syncer_stats(y, &flushes, &ns, &checkpoints);
  return checkpoints;
}

static void long_log_is_checkpointed(void **state) {
  tmp *t = *state;
  gam_store *s = open_ok(t->db);
  gam_syncer *y = syncer_ok(s);
  /* each commit writes a few pages: enough to pass the threshold */
  for (int round = 0; round < 200 &&
       atomic_load(&s->wal_pages) < GAM_SYNC_CHECKPOINT_PAGES; round++)
    register_nodes(s, round * 100, 100);
  assert_true(atomic_load(&s->wal_pages) >= GAM_SYNC_CHECKPOINT_PAGES);
  /* with no commit in between, two more wakes: the second checkpoint
   * started after the last commit, so it copied every frame */
  uint64_t c0 = checkpoints_done(y);
  for (int i = 0; i < 50 && checkpoints_done(y) < c0 + 2; i++) {
    gam_syncer_request(y);
    usleep(100 * 1000);
  }
  assert_true(checkpoints_done(y) >= c0 + 2);
  /* everything is in the file: the next commit starts the log over
   * instead of growing it */
  register_nodes(s, 90000, 1);
  assert_true(atomic_load(&s->wal_pages) < GAM_SYNC_CHECKPOINT_PAGES);
  gam_syncer_stop(y);
  gam_store_close(s);
}

static void null_syncer_is_durable_at_once(void **state) {
  (void)state;
  assert_true(gam_syncer_durable(NULL) == UINT64_MAX);
  assert_int_equal(gam_syncer_wait(NULL, 12345), 0);
  assert_false(gam_syncer_failed(NULL, NULL, 0));
  gam_syncer_request(NULL);
  gam_syncer_set_notify(NULL, NULL, NULL);
  gam_syncer_stop(NULL);
}

static void memory_store_syncer(void **state) {
  (void)state;
  gam_store *m = open_ok(":memory:");
  gam_syncer *y = syncer_ok(m);
  register_nodes(m, 0, 10);
  assert_int_equal(gam_syncer_wait(y, gam_store_commit_seq(m)), 0);
  assert_false(gam_syncer_failed(y, NULL, 0));
  gam_syncer_stop(y);
  gam_store_close(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup_teardown(commits_are_counted, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(durable_reaches_every_commit, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test_setup_teardown(long_log_is_checkpointed, tmp_setup,
                                    tmp_teardown),
    cmocka_unit_test(null_syncer_is_durable_at_once),
    cmocka_unit_test(memory_store_syncer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
