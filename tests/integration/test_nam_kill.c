/* test_nam_kill - kill -9 the NAM in the middle of a batch: every result
 * still arrives exactly once and equals the reference (the in-flight tasks
 * fall back to the CPU in-process); restart it and the client reconnects. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define COPIES 40 /* make the batch long enough to be killed in the middle */

typedef struct job {
  ember_client *c;
  size_t n;
  ember_seq *q, *r;
  ember_sw_result *got;
  ember_sw_report rep;
  atomic_size_t done;
  int rc;
} job;

static void on_progress(size_t done, size_t total, void *user) {
  atomic_store(&((job *)user)->done, done);
}

static void *run(void *arg) {
  job *j = arg;
  ember_sw_params p;
  ember_sw_params_default(&p);
  p.pairs_per_task = 50;
  j->rc = ember_sw_align(j->c, &p, j->q, j->r, j->n, j->got, &j->rep, on_progress, j);
  return NULL;
}

int main(void) {
  pair_set ps;
  CHECK_EQ(pairs_load_dna(&ps, 0), 0);
  ember_sw_params p;
  ember_sw_params_default(&p);
  ember_sw_result *want = calloc(ps.n, sizeof *want);
  CHECK_EQ(pairs_reference(&ps, &p, want), 0);

  job j = {.n = ps.n * COPIES};
  j.q = malloc(j.n * sizeof *j.q);
  j.r = malloc(j.n * sizeof *j.r);
  j.got = calloc(j.n, sizeof *j.got);
  ember_sw_result *want_all = malloc(j.n * sizeof *want_all);
  for (size_t i = 0; i < j.n; i++) {
    j.q[i] = ps.queries[i % ps.n];
    j.r[i] = ps.refs[i % ps.n];
    want_all[i] = want[i % ps.n];
  }

  nam_proc nam;
  const char *sets[] = {"cpu_workers=1", NULL};
  CHECK_EQ(nam_start(&nam, sets), 0);
  ember_options opts = {.client_name = "test_nam_kill", .embedded_threads = 2};
  CHECK_EQ(ember_connect(nam.unix_addr, &opts, &j.c), 0);
  CHECK_EQ(ember_is_connected(j.c), 1);

  pthread_t th;
  atomic_init(&j.done, 0);
  pthread_create(&th, NULL, run, &j);
  /* wait until the NAM has produced some results, then kill it */
  struct timespec tick = {0, 1000000};
  for (int i = 0; i < 20000 && atomic_load(&j.done) < j.n / 10; i++)
    nanosleep(&tick, NULL);
  size_t at_kill = atomic_load(&j.done);
  nam_kill9(&nam);
  pthread_join(th, NULL);
  printf("killed the NAM after %zu of %zu pairs\n", at_kill, j.n);
  CHECK(at_kill > 0 && at_kill < j.n);
  CHECK_EQ(j.rc, 0);
  CHECK_EQ(results_compare(j.got, want_all, j.n, "after kill -9"), j.n);
  CHECK(j.rep.tasks_fallback > 0);
  CHECK(j.rep.tasks_by_platform[0] > 0); /* some did run on the NAM */
  printf("%zu tasks: %zu on the NAM's cpu, %zu fell back; all %zu results equal\n",
         j.rep.tasks, j.rep.tasks_by_platform[0], j.rep.tasks_fallback, j.n);

  /* restart: the same client goes back to the NAM by itself */
  CHECK_EQ(nam_restart(&nam), 0);
  ember_sw_report rep = {0};
  int reconnected = 0;
  for (int attempt = 0; attempt < 100 && !reconnected; attempt++) {
    memset(j.got, 0, ps.n * sizeof *j.got);
    CHECK_EQ(ember_sw_align(j.c, &p, ps.queries, ps.refs, ps.n, j.got, &rep, NULL,
                            NULL), 0);
    CHECK_EQ(results_compare(j.got, want, ps.n, "after restart"), ps.n);
    reconnected = rep.tasks_fallback == 0 && ember_is_connected(j.c);
    if (!reconnected) nanosleep(&(struct timespec){0, 50000000}, NULL);
  }
  CHECK(reconnected);
  ember_client_stats st;
  ember_client_get_stats(j.c, &st);
  CHECK(st.reconnects >= 1);
  printf("reconnected (%llu reconnects), %zu tasks on cpu after the restart\n",
         (unsigned long long)st.reconnects, rep.tasks_by_platform[0]);
  ember_close(j.c);
  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
  free(j.q);
  free(j.r);
  free(j.got);
  free(want_all);
  free(want);
  pairs_free(&ps);
  printf("1 passed, 0 failed\n");
  return 0;
}
