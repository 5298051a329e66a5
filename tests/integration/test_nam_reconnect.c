/* test_nam_reconnect - kill -9 the NAM in the middle of a batch of tasks
 * that cannot run in-process, and start it again on the same socket: the
 * client keeps those tasks while it is disconnected, reconnects, sends them
 * again with their input blocks (the new NAM has none), and every result
 * arrives, equal to an embedded run of the same batch.
 *
 * Two ways a task cannot fall back: a required platform kind the
 * in-process engine lacks (platform fpga-emu, over the unix socket: the
 * blocks are memfds) and no_fallback (platform cpu, over TCP: the blocks
 * are inline).
 *
 * State blocks keep today's rule: the state lived in the dead NAM, so a
 * task on it completes with EMBER_ESTATE at once, while the NAM is away
 * and after it is back; it is never kept for the reconnect window. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

#define PAIRS_PER_TASK 50

typedef struct job {
  ember_client *c;
  const pair_set *ps;
  const char *platform;
  ember_sw_result *got;
  ember_sw_report rep;
  atomic_size_t done;
  int rc;
  pthread_t thread;
} job;

static void on_progress(size_t done, size_t total, void *user) {
  (void)total;
  atomic_store(&((job *)user)->done, done);
}

static void *job_main(void *arg) {
  job *j = arg;
  ember_sw_params p;
  ember_sw_params_default(&p);
  p.pairs_per_task = PAIRS_PER_TASK;
  p.platform = j->platform;
  j->rep.size = sizeof j->rep;
  j->rc = ember_sw_align(j->c, &p, j->ps->queries, j->ps->refs, j->ps->n,
                         j->got, &j->rep, on_progress, j);
  return NULL;
}

/* The batch run by the embedded engine: what every run must give. */
static ember_sw_result *embedded_run(const pair_set *ps) {
  ember_client *c;
  ember_options opts = {.size = sizeof opts, .client_name = "reference"};
  CHECK_EQ(ember_connect("embedded", &opts, &c), 0);
  ember_sw_params p;
  ember_sw_params_default(&p);
  ember_sw_result *want = calloc(ps->n, sizeof *want);
  CHECK(want != NULL);
  CHECK_EQ(ember_sw_align(c, &p, ps->queries, ps->refs, ps->n, want, NULL,
                          NULL, NULL), 0);
  ember_close(c);
  return want;
}

/* One tally task (the test accelerator) on state s; returns its status, and
 * fails the test if it takes more than 5 s (kept waiting for a reconnect). */
static int tally_on(ember_client *c, ember_block *s, uint64_t k) {
  ember_submit_options so = {.size = sizeof so, .platform = "fpga-emu",
                             .states = &s, .n_states = 1};
  ember_task *t;
  CHECK_EQ(ember_submit(c, "tally", &k, sizeof k, NULL, 0, &so, &t), 0);
  CHECK_EQ(ember_task_wait(t, 5000), 0);
  int rc = ember_task_status(t);
  ember_task_free(t);
  return rc;
}

static void state_is_lost(nam_proc *nam) {
  ember_client *c;
  ember_options opts = {.size = sizeof opts, .client_name = "test_reconnect",
                        .reconnect_window_ms = 60000};
  CHECK_EQ(ember_connect(nam->unix_addr, &opts, &c), 0);
  uint64_t v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  ember_block *s;
  CHECK_EQ(ember_block_create(c, v, sizeof v, EMBER_BLOCK_STATE, &s), 0);
  CHECK_EQ(tally_on(c, s, 1), 0);
  nam_kill9(nam);
  CHECK_EQ(tally_on(c, s, 2), EMBER_ESTATE); /* away: not kept */
  CHECK_EQ(nam_restart(nam), 0);
  /* a plain task that needs the NAM waits for it and gets through */
  ember_sw_params p;
  ember_sw_params_default(&p);
  p.platform = "fpga-emu";
  ember_seq q = {"ACGTACGT", 8};
  ember_sw_result r;
  CHECK_EQ(ember_sw_align(c, &p, &q, &q, 1, &r, NULL, NULL, NULL), 0);
  CHECK_EQ(r.score, 24);
  CHECK_EQ(tally_on(c, s, 2), EMBER_ESTATE); /* back: the state is gone */
  printf("state block: EMBER_ESTATE while the NAM was away and after it came "
         "back\n");
  ember_block_release(s);
  ember_close(c);
}

static void kill_and_restart(nam_proc *nam, const char *address,
                             const char *platform, int no_fallback,
                             const pair_set *ps, const ember_sw_result *want) {
  ember_client *c;
  ember_options opts = {.size = sizeof opts, .client_name = "test_reconnect",
                        .no_fallback = no_fallback,
                        .reconnect_window_ms = 60000};
  CHECK_EQ(ember_connect(address, &opts, &c), 0);
  CHECK_EQ(ember_is_connected(c), 1);

  job j = {.c = c, .ps = ps, .platform = platform};
  j.got = calloc(ps->n, sizeof *j.got);
  CHECK(j.got != NULL);
  atomic_init(&j.done, 0);
  CHECK_EQ(pthread_create(&j.thread, NULL, job_main, &j), 0);
  struct timespec tick = {0, 1000000};
  for (int i = 0; i < 60000 && atomic_load(&j.done) < ps->n / 10; i++)
    nanosleep(&tick, NULL);
  size_t at_kill = atomic_load(&j.done);
  nam_kill9(nam);
  /* the NAM is away for a moment: tasks pile up on the client meanwhile */
  nanosleep(&(struct timespec){0, 200000000}, NULL);
  CHECK_EQ(nam_restart(nam), 0);
  pthread_join(j.thread, NULL);

  ember_client_stats st = {.size = sizeof st};
  ember_client_get_stats(c, &st);
  printf("%s --platform %s: killed after %zu of %zu pairs; rc %d; %zu tasks (%zu cpu, "
         "%zu fpga-emu, %zu fallback, %zu failed), %llu reconnects, %llu "
         "resubmitted\n", address, platform,
         at_kill, ps->n, j.rc, j.rep.tasks, j.rep.tasks_cpu,
         j.rep.tasks_fpga_emu, j.rep.tasks_fallback, j.rep.tasks_failed,
         (unsigned long long)st.reconnects,
         (unsigned long long)st.tasks_resubmitted);
  if (j.rc) printf("  error: %s\n", ember_last_error());
  CHECK(at_kill > 0 && at_kill < ps->n);
  CHECK_EQ(j.rc, 0);
  CHECK_EQ(j.rep.tasks_failed, 0);
  CHECK_EQ(j.rep.tasks_fallback, 0);
  CHECK_EQ(results_compare(j.got, want, ps->n, "after the restart"), ps->n);
  CHECK(st.reconnects >= 1);
  CHECK(st.tasks_resubmitted >= 1);
  CHECK_EQ(strcmp(platform, "cpu") == 0 ? j.rep.tasks_cpu
                                         : j.rep.tasks_fpga_emu, j.rep.tasks);
  ember_close(c);
  free(j.got);
}

int main(void) {
  /* the scalar kernel, here and in the NAM: a cpu batch lasts long enough
   * to be killed in its middle */
  setenv("EMBER_SW_ISA", "scalar", 1);
  pair_set ps;
  CHECK_EQ(pairs_load_dna(&ps, 0), 0);
  ember_sw_result *want = embedded_run(&ps);

  /* one slow emulated board (sw at 50 Mcells/s) and one cpu worker, so that
   * the batch lasts seconds and is killed in its middle */
  nam_proc nam;
  char plugin_set[600];
  snprintf(plugin_set, sizeof plugin_set, "plugin_dir=%s",
           EMBER_TEST_PLUGIN_DIR);
  const char *sets[] = {"cpu_workers=1", "opencl.enabled=false",
                        "fpga-emu.boards=1", "fpga-emu.reprogram_time=0ms",
                        "fpga-emu.timing=sw:1:50", plugin_set,
                        "fpga-emu.bitstreams=sw,tally", NULL};
  CHECK_EQ(nam_start(&nam, sets), 0);
  kill_and_restart(&nam, nam.unix_addr, "fpga-emu", 0, &ps, want);
  kill_and_restart(&nam, nam.tcp_addr, "cpu", 1, &ps, want);
  state_is_lost(&nam);
  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
  free(want);
  pairs_free(&ps);
  printf("3 passed, 0 failed\n");
  return 0;
}
