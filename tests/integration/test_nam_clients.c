/* test_nam_clients - 8 concurrent clients (4 unix, 4 TCP) and one client
 * shared by 8 threads, all against one NAM: every result equals the
 * reference and nothing falls back. Then one client shared by threads that
 * align one pair per call (ember_run: the caller reads its own result,
 * and hands the reading on) and threads whose batches of many tasks are
 * read by the client's reader thread. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

#define N_CLIENTS 8

typedef struct worker {
  const char *address;
  ember_client *shared;
  const pair_set *ps;
  const ember_sw_result *want;
  size_t equal, fallbacks;
  int rc;
  int one_by_one;  /* one ember_sw_align call per pair */
} worker;

/* Each pair on its own: a single task per call, so ember_run. */
static int align_one_by_one(worker *w, ember_client *c, ember_sw_result *got) {
  for (size_t i = 0; i < w->ps->n; i++) {
    int rc = ember_sw_align(c, NULL, &w->ps->queries[i], &w->ps->refs[i], 1,
                            &got[i], NULL, NULL, NULL);
    if (rc) return rc;
  }
  return 0;
}

static void *run(void *arg) {
  worker *w = arg;
  ember_client *c = w->shared;
  ember_options opts = {.client_name = "test_nam_clients", .no_fallback = 1};
  if (!c && (w->rc = ember_connect(w->address, &opts, &c)) != 0) return NULL;
  ember_sw_params p;
  ember_sw_params_default(&p);
  p.pairs_per_task = 97; /* odd size: chunks of many shapes */
  ember_sw_result *got = calloc(w->ps->n, sizeof *got);
  ember_sw_report rep = {.size = sizeof rep};
  w->rc = w->one_by_one ? align_one_by_one(w, c, got)
                        : ember_sw_align(c, &p, w->ps->queries, w->ps->refs,
                                         w->ps->n, got, &rep, NULL, NULL);
  if (w->rc) fprintf(stderr, "%s: %s\n", w->address, ember_last_error());
  w->equal = results_compare(got, w->want, w->ps->n, w->address);
  w->fallbacks = rep.tasks_fallback;
  free(got);
  if (!w->shared) ember_close(c);
  return NULL;
}

static void run_all(worker *ws) {
  pthread_t th[N_CLIENTS];
  for (int i = 0; i < N_CLIENTS; i++) pthread_create(&th[i], NULL, run, &ws[i]);
  for (int i = 0; i < N_CLIENTS; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < N_CLIENTS; i++) {
    CHECK_EQ(ws[i].rc, 0);
    CHECK_EQ(ws[i].equal, ws[i].ps->n);
    CHECK_EQ(ws[i].fallbacks, 0);
  }
}

int main(void) {
  pair_set ps;
  CHECK_EQ(pairs_load_dna(&ps, 1000), 0);
  ember_sw_result *want = pairs_reference_default(&ps);
  nam_proc nam;
  const char *sets[] = {"max_inflight=8", NULL}; /* exercise backpressure */
  CHECK_EQ(nam_start(&nam, sets), 0);

  worker ws[N_CLIENTS];
  for (int i = 0; i < N_CLIENTS; i++)
    ws[i] = (worker){.address = i % 2 ? nam.tcp_addr : nam.unix_addr, .ps = &ps,
                     .want = want};
  run_all(ws);
  printf("%d separate clients: all %zu pairs each equal to the reference\n",
         N_CLIENTS, ps.n);

  ember_client *shared;
  ember_options opts = {.client_name = "shared", .no_fallback = 1};
  CHECK_EQ(ember_connect(nam.unix_addr, &opts, &shared), 0);
  for (int i = 0; i < N_CLIENTS; i++)
    ws[i] = (worker){.address = "shared", .shared = shared, .ps = &ps, .want = want};
  run_all(ws);
  ember_close(shared);
  printf("one client shared by %d threads: all equal\n", N_CLIENTS);

  pair_set few = ps;
  few.n = 150;
  CHECK_EQ(ember_connect(nam.tcp_addr, &opts, &shared), 0);
  for (int i = 0; i < N_CLIENTS; i++)
    ws[i] = (worker){.address = "shared", .shared = shared,
                     .ps = i % 2 ? &ps : &few, .want = want,
                     .one_by_one = i % 2 == 0};
  run_all(ws);
  ember_close(shared);
  printf("one client, %d threads one pair a call and %d in batches: all "
         "equal\n", N_CLIENTS / 2, N_CLIENTS / 2);

  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
  free(want);
  pairs_free(&ps);
  printf("1 passed, 0 failed\n");
  return 0;
}
