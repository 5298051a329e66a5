/*
 * test_engine_dispatch.c - the engine's dispatcher (dispatch.c) and task
 * queues (task_queue.c) with real sw tasks:
 *
 *   sticky      one emulated board (real clock), two accelerators: "sw" and
 *               "sw2" (a copy of the sw descriptor under another name, so
 *               the board holds two bitstreams). Two apps on two threads
 *               each alternate sw and sw2 tasks. The board keeps its
 *               bitstream while its accelerator has tasks, unless the other
 *               one's oldest task has waited reprogram_bound_ms: every
 *               task's queue wait stays within the bound plus what can be
 *               ahead of it (the pipeline's tasks, a reprogram, the tasks
 *               queued before it), and the board reprograms far less often
 *               than first-come-first-served dispatch would (one reprogram
 *               per change of accelerator in arrival order)
 *   fair        NAM_SCHED_FAIR: one app's burst of 50 tasks does not delay
 *               another app's single task behind all 50 (under FCFS it
 *               does: the same run is checked both ways)
 *   priority    a higher-priority task overtakes a queue of lower ones,
 *               under both schedulers
 *   prefer      a task preferring the board runs there while the board has
 *               room, even when the cpu platform would finish it sooner
 *
 * The cpu worker is held by a "gate" task whose done callback waits until
 * the test opens the gate, so that queues fill deterministically.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "engine_internal.h" /* task state, when a wait fails */
#include "engine_jobs.h"
#include "sw/sw.h"

#define WAIT_S 40
#define BOARD "fpga0"

static acc_descriptor sw2;

static void make_sw2(void) {
  sw2 = acc_sw_descriptor;
  sw2.name = "sw2";
}

/* ------------------------------------------------------------------------ */
/* Sticky bitstreams with a bounded wait                                     */

enum {
  REPROGRAM_MS = 50,
  BOUND_MS = 300,
  DEPTH = 3,
  PER_APP = 40,     /* tasks per app */
  WINDOW = 4,       /* an app's tasks in flight at most (closed loop) */
};

/* Each task's modelled kernel time: about TASK_MS for 4 pairs of ~44 x ~94
 * residues (units_per_cycle at 200 MHz set below). */
#define TASK_MS 10.0

typedef struct app {
  nam_engine *e;
  uint64_t id;
  ejob jobs[PER_APP];
  int first_acc;    /* 0: starts with sw, 1: with sw2 */
  int rc;
} app;

static void *app_thread(void *arg) {
  app *a = arg;
  uint64_t rng = 1000 + a->id;
  for (int i = 0; i < PER_APP; i++) {
    if (i >= WINDOW && ejob_wait_job(&a->jobs[i - WINDOW], WAIT_S) != 0) {
      a->rc = -1;
      return NULL;
    }
    ejob *j = &a->jobs[i];
    ejob_make_dna(j, &rng, 4, 40, 90);
    j->acc = (i + a->first_acc) % 2 ? &sw2 : &acc_sw_descriptor;
    j->app = a->id;
    if (ejob_submit(a->e, j) != 0) {
      a->rc = -2;
      return NULL;
    }
  }
  return NULL;
}

static int by_queued(const void *x, const void *y) {
  const ejob *a = *(ejob *const *)x, *b = *(ejob *const *)y;
  uint64_t qa = nam_task_get_times(a->task)->queued;
  uint64_t qb = nam_task_get_times(b->task)->queued;
  return qa < qb ? -1 : qa > qb;
}

static void sticky_bounded_wait(void **state) {
  (void)state;
  make_sw2();
  nam_fpga_emu_config board;
  ejob_board(&board, BOARD);
  snprintf(board.bitstreams[1], sizeof board.bitstreams[1], "sw2");
  board.n_bitstreams = 2;
  board.reprogram_ms = REPROGRAM_MS;
  /* ~17,600 cells per task in TASK_MS: 1.76 M cells/s at 200 MHz */
  double upc = 17600.0 / (TASK_MS / 1000.0) / 200e6;
  const char *names[2] = {"sw", "sw2"};
  for (int k = 0; k < 2; k++) {
    snprintf(board.timing[k].accelerator, sizeof board.timing[k].accelerator,
             "%s", names[k]);
    board.timing[k].units_per_cycle = upc;
    board.timing[k].clock_mhz = 200;
  }
  board.n_timing = 2;
  const acc_descriptor *accs[2] = {&acc_sw_descriptor, &sw2};
  nam_engine_config cfg = {
    .no_cpu = 1,
    .fpga = &board,
    .n_fpga = 1,
    .accelerators = accs,
    .n_accelerators = 2,
    .pipeline_depth = DEPTH,
    .reprogram_bound_ms = BOUND_MS,
  };
  nam_engine *e = NULL;
  assert_int_equal(nam_engine_create(&cfg, &e), 0);
  ejob_reset();
  app apps[2];
  memset(apps, 0, sizeof apps);
  pthread_t th[2];
  for (int a = 0; a < 2; a++) {
    apps[a].e = e;
    apps[a].id = (uint64_t)a + 1;
    apps[a].first_acc = a;
    assert_int_equal(pthread_create(&th[a], NULL, app_thread, &apps[a]), 0);
  }
  for (int a = 0; a < 2; a++) {
    pthread_join(th[a], NULL);
    assert_int_equal(apps[a].rc, 0);
  }
  assert_int_equal(ejob_wait(2 * PER_APP, WAIT_S), 0);

  /* all right, all on the board */
  ejob *all[2 * PER_APP];
  uint64_t max_exec = 0, sum_exec = 0;
  for (int a = 0; a < 2; a++)
    for (int i = 0; i < PER_APP; i++) {
      ejob *j = &apps[a].jobs[i];
      all[a * PER_APP + i] = j;
      assert_true(ejob_check_output(j, NULL, "sticky"));
      assert_string_equal(nam_task_platform(j->task), BOARD);
      const nam_task_times *tm = nam_task_get_times(j->task);
      assert_int_equal(tm->attempts, 1);
      uint64_t exec = tm->executed - tm->staged;
      sum_exec += exec;
      if (exec > max_exec) max_exec = exec;
    }
  uint64_t mean_exec = sum_exec / (2 * PER_APP);
  /* first come, first served reprograms at each change of accelerator in
   * arrival order */
  qsort(all, 2 * PER_APP, sizeof all[0], by_queued);
  unsigned naive = 1;
  for (int i = 1; i < 2 * PER_APP; i++)
    naive += all[i]->acc != all[i - 1]->acc;
  nam_platform_status ps;
  assert_int_equal(ejob_platform(e, BOARD, &ps), 0);

  /* What may be ahead of task T once the other accelerator's oldest task
   * has waited the bound: the pipeline's DEPTH tasks (each at most the
   * longest execute seen, which includes a reprogram), one reprogram, the
   * tasks of T's accelerator still waiting when T came (each 1.5 times the
   * mean execute), the dispatcher's 50 ms re-check, and 250 ms for a slow,
   * shared machine. Without the bound, T could wait until the other
   * accelerator's backlog is gone. */
  uint64_t fixed_ns = (BOUND_MS + REPROGRAM_MS + 50 + 250) * 1000000ull +
                      DEPTH * max_exec;
  uint64_t max_wait = 0, max_allowed = 0;
  unsigned max_ahead = 0;
  for (int i = 0; i < 2 * PER_APP; i++) {
    const nam_task_times *ti = nam_task_get_times(all[i]->task);
    unsigned ahead = 0;
    for (int k = 0; k < i; k++)
      ahead += all[k]->acc == all[i]->acc &&
               nam_task_get_times(all[k]->task)->started > ti->queued;
    uint64_t wait = ti->started - ti->queued;
    uint64_t allowed = fixed_ns + ahead * mean_exec * 3 / 2;
    if (wait > max_wait) max_wait = wait;
    if (allowed > max_allowed) max_allowed = allowed;
    if (ahead > max_ahead) max_ahead = ahead;
    if (wait > allowed)
      fail_msg("task %d (%s) waited %.1f ms, more than the %.1f ms allowed "
               "(%u of its accelerator ahead of it)", i, all[i]->acc->name,
               wait / 1e6, allowed / 1e6, ahead);
  }
  printf("sticky: %llu reprograms (FCFS would do %u), longest queue wait "
         "%.1f ms (bound %d ms; allowances up to %.1f ms, up to %u tasks "
         "ahead), execute mean %.1f ms, longest %.1f ms\n",
         (unsigned long long)ps.reprograms, naive, max_wait / 1e6, BOUND_MS,
         max_allowed / 1e6, max_ahead, mean_exec / 1e6, max_exec / 1e6);
  assert_true(naive >= PER_APP); /* the apps really alternate */
  assert_true(ps.reprograms >= 2); /* the bound made it switch */
  assert_true(ps.reprograms * 4 <= naive);
  nam_engine_destroy(e);
  for (int a = 0; a < 2; a++)
    for (int i = 0; i < PER_APP; i++) ejob_free(&apps[a].jobs[i]);
}

/* ------------------------------------------------------------------------ */
/* Fair scheduling and priorities on one cpu worker                          */

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cond = PTHREAD_COND_INITIALIZER;
static int gate_open, gate_entered;

static void gate_hook(ejob *j) {
  (void)j;
  pthread_mutex_lock(&gate_lock);
  gate_entered = 1;
  pthread_cond_broadcast(&gate_cond);
  while (!gate_open) pthread_cond_wait(&gate_cond, &gate_lock);
  pthread_mutex_unlock(&gate_lock);
}

/* An engine with one cpu worker, held by a gate task of app 1. */
static nam_engine *held_cpu(int scheduler, ejob *gate, uint64_t *rng) {
  nam_engine_config cfg = {.cpu_workers = 1, .scheduler = scheduler};
  nam_engine *e = NULL;
  assert_int_equal(nam_engine_create(&cfg, &e), 0);
  ejob_reset();
  gate_open = gate_entered = 0;
  ejob_make_dna(gate, rng, 1, 20, 40);
  gate->app = 1;
  gate->hook = gate_hook;
  assert_int_equal(ejob_submit(e, gate), 0);
  pthread_mutex_lock(&gate_lock);
  while (!gate_entered) pthread_cond_wait(&gate_cond, &gate_lock);
  pthread_mutex_unlock(&gate_lock);
  return e;
}

static void release_gate(void) {
  pthread_mutex_lock(&gate_lock);
  gate_open = 1;
  pthread_cond_broadcast(&gate_cond);
  pthread_mutex_unlock(&gate_lock);
}

enum { BURST = 50 };

/* App 1's burst, then app 2's single task (priority prio); returns the
 * single task's completion order (the gate is 0). */
static unsigned burst_then_single(int scheduler, int prio) {
  uint64_t rng = 77;
  ejob gate, burst[BURST], single;
  nam_engine *e = held_cpu(scheduler, &gate, &rng);
  for (int i = 0; i < BURST; i++) {
    ejob_make_dna(&burst[i], &rng, 2, 30, 60);
    burst[i].app = 1;
    assert_int_equal(ejob_submit(e, &burst[i]), 0);
  }
  ejob_make_dna(&single, &rng, 2, 30, 60);
  single.app = 2;
  single.priority = prio;
  assert_int_equal(ejob_submit(e, &single), 0);
  assert_int_equal(nam_engine_queue_length(e, &acc_sw_descriptor), BURST + 1);
  release_gate();
  assert_int_equal(ejob_wait(BURST + 2, WAIT_S), 0);
  for (int i = 0; i < BURST; i++)
    assert_true(ejob_check_output(&burst[i], NULL, "burst"));
  assert_true(ejob_check_output(&single, NULL, "single"));
  /* app 1's burst keeps its own order */
  for (int i = 1; i < BURST; i++)
    assert_true(burst[i].order > burst[i - 1].order);
  unsigned order = single.order;
  nam_engine_destroy(e);
  ejob_free(&gate);
  for (int i = 0; i < BURST; i++) ejob_free(&burst[i]);
  ejob_free(&single);
  return order;
}

static void fair_between_apps(void **state) {
  (void)state;
  unsigned fcfs = burst_then_single(NAM_SCHED_FCFS, 0);
  unsigned fair = burst_then_single(NAM_SCHED_FAIR, 0);
  printf("app 2's task after app 1's burst of %d ran #%u under FCFS, #%u "
         "under fair scheduling\n", BURST, fcfs, fair);
  assert_int_equal(fcfs, BURST + 1);
  /* round robin: at most one of app 1's tasks goes before it */
  assert_in_range(fair, 1, 2);
}

static void priority_overtakes(void **state) {
  (void)state;
  unsigned fcfs = burst_then_single(NAM_SCHED_FCFS, 5);
  unsigned fair = burst_then_single(NAM_SCHED_FAIR, 5);
  assert_int_equal(fcfs, 1);
  assert_int_equal(fair, 1);

  /* within one app under fair scheduling: priority beats rounds */
  uint64_t rng = 91;
  ejob gate, low[10], high;
  nam_engine *e = held_cpu(NAM_SCHED_FAIR, &gate, &rng);
  for (int i = 0; i < 10; i++) {
    ejob_make_dna(&low[i], &rng, 2, 30, 60);
    low[i].app = 1;
    low[i].priority = -1;
    assert_int_equal(ejob_submit(e, &low[i]), 0);
  }
  ejob_make_dna(&high, &rng, 2, 30, 60);
  high.app = 1;
  high.priority = 3;
  assert_int_equal(ejob_submit(e, &high), 0);
  release_gate();
  assert_int_equal(ejob_wait(12, WAIT_S), 0);
  assert_true(ejob_check_output(&high, NULL, "high"));
  assert_int_equal(high.order, 1);
  nam_engine_destroy(e);
  ejob_free(&gate);
  for (int i = 0; i < 10; i++) ejob_free(&low[i]);
  ejob_free(&high);
}

/* ------------------------------------------------------------------------ */
/* A preferred kind                                                          */

/* The board's model makes it slower than the cpu (measured first), yet a
 * task preferring fpga-emu must run there while it has room: cpu leaves
 * it alone, so if the board declined it for the faster cpu, nobody would
 * take it. */
static void prefer_slower_board(void **state) {
  (void)state;
  nam_fpga_emu_config board;
  ejob_board(&board, BOARD);
  snprintf(board.timing[0].accelerator, sizeof board.timing[0].accelerator,
           "sw");
  board.timing[0].units_per_cycle = 0.001; /* ~90 ms for the task below */
  board.timing[0].clock_mhz = 200;
  board.n_timing = 1;
  board.reprogram_ms = 1;
  nam_engine_config cfg = {.cpu_workers = 1, .fpga = &board, .n_fpga = 1};
  nam_engine *e = NULL;
  assert_int_equal(nam_engine_create(&cfg, &e), 0);
  ejob_reset();
  uint64_t rng = 5;
  ejob on_cpu, pref;
  ejob_make_dna(&on_cpu, &rng, 4, 40, 90);
  on_cpu.platform_kind = "cpu"; /* measures the cpu's speed */
  assert_int_equal(ejob_submit(e, &on_cpu), 0);
  assert_int_equal(ejob_wait(1, WAIT_S), 0);
  assert_true(ejob_check_output(&on_cpu, NULL, "on cpu"));
  ejob_make_dna(&pref, &rng, 4, 40, 90);
  pref.prefer_kind = "fpga-emu";
  assert_int_equal(ejob_submit(e, &pref), 0);
  if (ejob_wait(2, 10) != 0) {
    nam_engine_counters c;
    nam_engine_get_counters(e, &c);
    fail_msg("the task preferring fpga-emu was never dispatched (state %d, "
             "%u queued, %u running): the board declines it for the faster "
             "cpu, which declines it because the board has room",
             pref.task->state, c.queued, c.running);
  }
  assert_true(ejob_check_output(&pref, NULL, "preferring the board"));
  assert_string_equal(nam_task_platform(pref.task), BOARD);
  nam_engine_destroy(e);
  ejob_free(&on_cpu);
  ejob_free(&pref);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(sticky_bounded_wait),
    cmocka_unit_test(fair_between_apps),
    cmocka_unit_test(priority_overtakes),
    cmocka_unit_test(prefer_slower_board),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
