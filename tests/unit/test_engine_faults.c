/*
 * test_engine_faults.c - the engine's fault tolerance with emulated boards
 * that inject faults (fpga_emu_board.h), next to the cpu platform:
 *
 *   failures   fail_rate 0.1, fixed seed, 200 sw tasks preferring the
 *              board: every result equals the CPU reference; the failures
 *              the board injected (recounted from its seeded sequence) =
 *              the pair's errors = the engine's retries; each retried task
 *              took 2 attempts and finished on cpu
 *   hangs      hang_rate 0.2 and task_timeout_ms 200: hung tasks are timed
 *              out, counted as timeouts, and rerun on cpu; results right
 *   disable    fail_threshold 3: three failures in a row disable (sw,
 *              fpga0); tasks still complete on cpu; after probe_ms one
 *              task is sent to the board as a probe, and its success makes
 *              the pair "ready" again. The board cannot be healed at run
 *              time (there is no setter for its fault rates), so the board's
 *              seed is chosen - from its deterministic sequence - so that
 *              draws 1-3 fail and draw 4 (the probe) succeeds
 *   probe fails fail_rate 1.0: the probe fails, the pair stays disabled
 *              (not disabled twice) and the probe task completes on cpu
 *
 * The boards run on their virtual clock; only the watchdog and probe
 * intervals take real time.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "ember/ember_errors.h"
#include "engine_jobs.h"
#include "engine_internal.h" /* task state, when a wait fails */
#include "fpga_emu_board.h"

#define WAIT_S 40
#define BOARD "fpga0"
#define WINDOW 3 /* tasks in flight: the pipeline depth */

static nam_fpga_emu_config board_cfg;

static nam_engine *engine_with_board(double fail_rate, double hang_rate,
                                     uint64_t seed, unsigned threshold,
                                     uint64_t probe_ms, uint64_t timeout_ms) {
  ejob_board(&board_cfg, BOARD);
  board_cfg.virtual_clock = 1;
  board_cfg.fail_rate = fail_rate;
  board_cfg.hang_rate = hang_rate;
  board_cfg.seed = seed;
  nam_engine_config cfg = {
    .cpu_workers = 2,
    .fpga = &board_cfg,
    .n_fpga = 1,
    .fail_threshold = threshold,
    .probe_ms = probe_ms,
    .task_timeout_ms = timeout_ms,
  };
  nam_engine *e = NULL;
  assert_int_equal(nam_engine_create(&cfg, &e), 0);
  ejob_reset();
  return e;
}

/* The faults a board with board_cfg injects in its first n draws (the
 * sequence depends only on the seed and the draw's number). */
static void replay_draws(uint64_t n, uint64_t *fails, uint64_t *hangs) {
  nam_fpga_board *b = NULL;
  char err[200] = "";
  assert_int_equal(nam_fpga_board_create(&board_cfg, &b, err, sizeof err), 0);
  *fails = *hangs = 0;
  for (uint64_t i = 0; i < n; i++) {
    enum nam_fpga_fault f = nam_fpga_board_draw_fault(b);
    *fails += f == NAM_FPGA_FAULT_FAIL;
    *hangs += f == NAM_FPGA_FAULT_HANG;
  }
  nam_fpga_board_destroy(b);
}

static const nam_pair_status *sw_pair(const nam_platform_status *ps) {
  for (unsigned i = 0; i < ps->n_pairs; i++)
    if (strcmp(ps->pairs[i].accelerator, "sw") == 0) return &ps->pairs[i];
  fail_msg("%s has no sw pair", ps->name);
  return NULL;
}

/* What the engine holds, when a wait failed. */
static void show_engine(nam_engine *e) {
  nam_engine_counters c;
  nam_engine_get_counters(e, &c);
  printf("engine: submitted %llu completed %llu queued %u running %u "
         "retries %llu\n", (unsigned long long)c.submitted,
         (unsigned long long)c.completed, c.queued, c.running,
         (unsigned long long)c.retries);
  nam_platform_status ps[4];
  size_t n = nam_engine_platforms(e, ps, 4);
  for (size_t i = 0; i < n; i++)
    printf("%s: %s running %u queued %u completed %llu failed %llu\n",
           ps[i].name, ps[i].state, ps[i].running, ps[i].queued,
           (unsigned long long)ps[i].completed,
           (unsigned long long)ps[i].failed);
}

/* Run n small tasks preferring the board; check every result and the
 * retry bookkeeping; returns the board's status. */
static nam_platform_status run_batch(nam_engine *e, unsigned n,
                                     uint64_t seed) {
  ejob *jobs = calloc(n, sizeof *jobs);
  assert_non_null(jobs);
  uint64_t rng = seed;
  /* at most WINDOW in flight: the board mostly has room, so it gets most
   * first attempts (cpu takes a task preferring it only while it is full) */
  for (unsigned i = 0; i < n; i++) {
    if (i >= WINDOW && ejob_wait(i - WINDOW + 1, WAIT_S) != 0) {
      show_engine(e);
      for (unsigned k = 0; k < i; k++)
        if (!jobs[k].done)
          printf("task %u not done: state %d, attempts %u, platform '%s'\n",
                 k, jobs[k].task->state, jobs[k].task->times.attempts,
                 nam_task_platform(jobs[k].task));
      fail_msg("tasks did not complete");
    }
    ejob_make_dna(&jobs[i], &rng, 4, 40, 90);
    jobs[i].prefer_kind = "fpga-emu";
    assert_int_equal(ejob_submit(e, &jobs[i]), 0);
  }
  assert_int_equal(ejob_wait(n, WAIT_S), 0);
  unsigned retried = 0, on_board = 0, bad = 0;
  for (unsigned i = 0; i < n; i++) {
    char label[32];
    snprintf(label, sizeof label, "task %u", i);
    bad += !ejob_check_output(&jobs[i], NULL, label);
    const nam_task_times *tm = nam_task_get_times(jobs[i].task);
    const char *where = nam_task_platform(jobs[i].task);
    if (tm->attempts == 2) {
      retried++;
      assert_string_equal(where, "cpu");
    } else {
      assert_int_equal(tm->attempts, 1);
    }
    on_board += strcmp(where, BOARD) == 0;
  }
  assert_int_equal(bad, 0);
  nam_engine_counters c;
  nam_engine_get_counters(e, &c);
  assert_int_equal(c.submitted, n);
  assert_int_equal(c.completed, n);
  assert_int_equal(c.failed, 0);
  assert_int_equal(c.retries, retried);
  nam_platform_status ps;
  assert_int_equal(ejob_platform(e, BOARD, &ps), 0);
  const nam_pair_status *pair = sw_pair(&ps);
  assert_int_equal(pair->completed, on_board);
  assert_int_equal(pair->errors, retried);
  assert_int_equal(ps.failed, retried);
  assert_int_equal(ps.retried_away, retried);
  printf("%u tasks: %u finished on %s, %u retried on cpu after a board "
         "failure (%llu of them timeouts)\n", n, on_board, BOARD, retried,
         (unsigned long long)pair->timeouts);
  for (unsigned i = 0; i < n; i++) ejob_free(&jobs[i]);
  free(jobs);
  return ps;
}

static void injected_failures_retried(void **state) {
  (void)state;
  nam_engine *e = engine_with_board(0.1, 0, 42, 1000, 0, 0);
  nam_platform_status ps = run_batch(e, 200, 1);
  const nam_pair_status *pair = sw_pair(&ps);
  uint64_t fails, hangs;
  replay_draws(pair->completed + pair->errors, &fails, &hangs);
  printf("the board drew %llu times: %llu failures injected\n",
         (unsigned long long)(pair->completed + pair->errors),
         (unsigned long long)fails);
  assert_true(fails > 0);
  assert_int_equal(hangs, 0);
  assert_int_equal(pair->errors, fails);
  assert_int_equal(pair->timeouts, 0);
  nam_engine_counters c;
  nam_engine_get_counters(e, &c);
  assert_int_equal(c.retries, fails);
  assert_int_equal(c.pairs_disabled, 0);
  assert_string_equal(pair->state, "ready");
  nam_engine_destroy(e);
}

static void hung_tasks_time_out(void **state) {
  (void)state;
  nam_engine *e = engine_with_board(0, 0.2, 7, 1000, 0, 200);
  nam_platform_status ps = run_batch(e, 40, 2);
  const nam_pair_status *pair = sw_pair(&ps);
  uint64_t fails, hangs;
  replay_draws(pair->completed + pair->errors, &fails, &hangs);
  printf("the board drew %llu times: %llu hangs injected\n",
         (unsigned long long)(pair->completed + pair->errors),
         (unsigned long long)hangs);
  assert_true(hangs > 0);
  assert_int_equal(fails, 0);
  assert_int_equal(pair->timeouts, hangs);
  assert_int_equal(pair->errors, hangs);
  assert_int_equal(ps.timeouts, hangs);
  nam_engine_destroy(e);
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  nanosleep(&ts, NULL);
}

/* Submit one task preferring the board and wait for it. */
static void run_one(nam_engine *e, ejob *j, uint64_t *rng, unsigned *n_done) {
  ejob_make_dna(j, rng, 4, 40, 90);
  j->prefer_kind = "fpga-emu";
  assert_int_equal(ejob_submit(e, j), 0);
  assert_int_equal(ejob_wait(++*n_done, WAIT_S), 0);
  assert_true(ejob_check_output(j, NULL, "task"));
}

static nam_pair_status pair_now(nam_engine *e) {
  nam_platform_status ps;
  assert_int_equal(ejob_platform(e, BOARD, &ps), 0);
  return *sw_pair(&ps);
}

/* A seed whose first draws are FAIL FAIL FAIL NONE at fail_rate. */
static uint64_t seed_fff_ok(double fail_rate) {
  ejob_board(&board_cfg, BOARD);
  board_cfg.fail_rate = fail_rate;
  for (uint64_t seed = 1; seed < 100000; seed++) {
    board_cfg.seed = seed;
    nam_fpga_board *b = NULL;
    char err[200];
    assert_int_equal(nam_fpga_board_create(&board_cfg, &b, err, sizeof err),
                     0);
    int ok = 1;
    for (int i = 0; i < 4; i++) {
      enum nam_fpga_fault f = nam_fpga_board_draw_fault(b);
      ok &= f == (i < 3 ? NAM_FPGA_FAULT_FAIL : NAM_FPGA_FAULT_NONE);
    }
    nam_fpga_board_destroy(b);
    if (ok) return seed;
  }
  fail_msg("no seed gives three failures then a success");
  return 0;
}

enum { THRESHOLD = 3, PROBE_MS = 300 };

/* Three failures in a row: each task still completes (on cpu, second
 * attempt) and the third disables the pair. Returns when it was seen. */
static uint64_t fail_until_disabled(nam_engine *e, ejob *jobs, uint64_t *rng,
                                    unsigned *n_done) {
  for (unsigned i = 0; i < THRESHOLD; i++) {
    run_one(e, &jobs[i], rng, n_done);
    assert_string_equal(nam_task_platform(jobs[i].task), "cpu");
    assert_int_equal(nam_task_get_times(jobs[i].task)->attempts, 2);
    nam_pair_status p = pair_now(e);
    assert_int_equal(p.consecutive_failures, i + 1);
    assert_string_equal(p.state, i + 1 < THRESHOLD ? "ready" : "disabled");
  }
  uint64_t disabled_seen = ejob_now_ns();
  nam_pair_status p = pair_now(e);
  assert_int_equal(p.disabled_count, 1);
  assert_int_equal(p.errors, THRESHOLD);
  nam_engine_counters c;
  nam_engine_get_counters(e, &c);
  assert_int_equal(c.pairs_disabled, 1);
  /* while disabled, before probe_ms: the next task goes to cpu at once */
  run_one(e, &jobs[THRESHOLD], rng, n_done);
  uint64_t elapsed_ms = (ejob_now_ns() - disabled_seen) / 1000000;
  if (elapsed_ms < PROBE_MS) {
    assert_string_equal(nam_task_platform(jobs[THRESHOLD].task), "cpu");
    assert_int_equal(nam_task_get_times(jobs[THRESHOLD].task)->attempts, 1);
  } else {
    printf("note: the machine was too slow (%llu ms) to check a task while "
           "the pair rests\n", (unsigned long long)elapsed_ms);
  }
  return disabled_seen;
}

static void disabled_then_probed(void **state) {
  (void)state;
  uint64_t seed = seed_fff_ok(0.75);
  printf("seed %llu: draws 1-3 fail, draw 4 succeeds\n",
         (unsigned long long)seed);
  nam_engine *e = engine_with_board(0.75, 0, seed, THRESHOLD, PROBE_MS, 0);
  ejob jobs[THRESHOLD + 2];
  memset(jobs, 0, sizeof jobs);
  uint64_t rng = 3;
  unsigned n_done = 0;
  fail_until_disabled(e, jobs, &rng, &n_done);
  assert_string_equal(pair_now(e).state, "disabled");

  /* after probe_ms the next task is the probe: it runs on the board, its
   * success re-enables the pair */
  sleep_ms(PROBE_MS + 100);
  ejob *probe = &jobs[THRESHOLD + 1];
  run_one(e, probe, &rng, &n_done);
  assert_string_equal(nam_task_platform(probe->task), BOARD);
  assert_int_equal(nam_task_get_times(probe->task)->attempts, 1);
  nam_pair_status p = pair_now(e);
  assert_string_equal(p.state, "ready");
  assert_int_equal(p.consecutive_failures, 0);
  assert_int_equal(p.completed, 1);
  assert_int_equal(p.disabled_count, 1);
  nam_platform_status ps;
  assert_int_equal(ejob_platform(e, BOARD, &ps), 0);
  assert_string_equal(ps.state, "ready");
  nam_engine_destroy(e);
  for (unsigned i = 0; i < THRESHOLD + 2; i++) ejob_free(&jobs[i]);
}

static void failed_probe_stays_disabled(void **state) {
  (void)state;
  nam_engine *e = engine_with_board(1.0, 0, 5, THRESHOLD, PROBE_MS, 0);
  ejob jobs[THRESHOLD + 2];
  memset(jobs, 0, sizeof jobs);
  uint64_t rng = 4;
  unsigned n_done = 0;
  fail_until_disabled(e, jobs, &rng, &n_done);
  sleep_ms(PROBE_MS + 100);
  ejob *probe = &jobs[THRESHOLD + 1];
  run_one(e, probe, &rng, &n_done);
  /* the probe went to the board, failed, and was rerun on cpu */
  assert_string_equal(nam_task_platform(probe->task), "cpu");
  assert_int_equal(nam_task_get_times(probe->task)->attempts, 2);
  nam_pair_status p = pair_now(e);
  assert_string_equal(p.state, "disabled");
  assert_int_equal(p.errors, THRESHOLD + 1);
  assert_int_equal(p.disabled_count, 1);
  assert_int_equal(p.completed, 0);
  nam_engine_counters c;
  nam_engine_get_counters(e, &c);
  assert_int_equal(c.pairs_disabled, 1);
  assert_int_equal(c.failed, 0);
  nam_engine_destroy(e);
  for (unsigned i = 0; i < THRESHOLD + 2; i++) ejob_free(&jobs[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(injected_failures_retried),
    cmocka_unit_test(hung_tasks_time_out),
    cmocka_unit_test(disabled_then_probed),
    cmocka_unit_test(failed_probe_stays_disabled),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
