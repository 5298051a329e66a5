/*
 * test_engine_calibrate.c - a slow platform never makes the engine slower
 * than the fastest one alone (nam/engine/calibrate.c, dispatch.c), with
 * real sw tasks beside a fake "slow" platform: a whole-task platform in
 * this file that runs the CPU code and then holds each task for
 * SLOW_FIXED_MS + work x SLOW_NS_PER_CELL more (a device whose launch
 * costs a lot, like pocl's CPU device on one sw pair): slower than the
 * cpu platform in both terms, however fast the build (sanitizers) runs
 * the CPU code.
 *
 *   cold batch     a batch submitted right after the engine starts, while
 *                  the slow platform has no figures yet (calibrating), runs
 *                  on cpu only: under the old rule ("unmeasured: take it
 *                  and learn") the slow platform took the first task it saw
 *   calibrated     calibration finishes (nam_engine_wait_calibrated) and
 *                  shows in the pairs' status: "calibrated", with figures
 *                  that make one pair slower on the slow platform
 *   one-pair tasks one-pair tasks one after another all run on cpu: the
 *                  slow platform is free but would finish later
 *   slow helps     while cpu is busy with a long task, a one-pair task goes
 *                  to the slow platform, which finishes it sooner
 *   cpu alone      an engine whose cpu alone runs sw is not calibrated:
 *                  its first real task measures it
 *   board model    a real-clock fpga-emu board is not calibrated (it would
 *                  load a bitstream): its pair's speed is "model", nothing
 *                  was loaded, and its model (faster than cpu for a large
 *                  task) takes the task
 *
 * Placement is asserted, never a time: the fake platform's delays come on
 * top of the cpu platform's own time, so the figures compare the same way
 * on a loaded machine and under sanitizers.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "engine_internal.h" /* the fake platform's table and worker */
#include "engine_jobs.h"
#include "host_memory.h"
#include "sw/sw.h"

#define WAIT_S 60
#define SLOW "slow0"
#define SLOW_FIXED_MS 20
#define SLOW_NS_PER_CELL 20

/* ------------------------------------------------------------------------ */
/* The slow platform: one worker                                             */

static void *slow_worker(void *arg) {
  nam_platform *p = arg;
  nam_task *t;
  while ((t = nam_dispatch_next(p))) nam_whole_task_run(p, t);
  return NULL;
}

static int slow_start(nam_platform *p) {
  pthread_t *th = malloc(sizeof *th);
  if (!th) return -1;
  if (pthread_create(th, NULL, slow_worker, p) != 0) {
    free(th);
    return -1;
  }
  p->impl = th;
  return 0;
}

static void slow_stop(nam_platform *p) {
  pthread_t *th = p->impl;
  if (!th) return;
  pthread_join(*th, NULL);
  free(th);
  p->impl = NULL;
}

static int slow_supports(const nam_platform *p, const acc_descriptor *acc) {
  (void)p;
  return acc->run_cpu != NULL;
}

static int slow_run(nam_platform *p, nam_task *t, const nam_task_io *io,
                    acc_output *out, char *err, size_t err_len) {
  (void)p;
  acc_run_ctx ctx;
  nam_task_run_ctx(t, io, &ctx);
  int rc = t->acc->run_cpu(t->prepared, io->inputs, t->n_inputs, &ctx, out,
                           err, err_len);
  uint64_t until = ejob_now_ns() + SLOW_FIXED_MS * 1000000ull +
                   t->work * SLOW_NS_PER_CELL;
  struct timespec at = {(time_t)(until / 1000000000u),
                        (long)(until % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) != 0) {}
  return rc;
}

static const nam_platform_ops slow_ops = {
  .kind = "slow",
  .start = slow_start,
  .stop = slow_stop,
  .supports = slow_supports,
  .run = slow_run,
  .cache_ops = &nam_host_memory_ops,
};

/* An engine with a cpu platform of one worker and the slow platform, both
 * added under the engine lock, so that each plans its calibration knowing
 * the other (a platform alone with an accelerator is not calibrated). */
static nam_engine *cpu_and_slow(void) {
  nam_engine_config cfg = {.no_cpu = 1};
  nam_engine *e = NULL;
  assert_int_equal(nam_engine_create(&cfg, &e), 0);
  pthread_mutex_lock(&e->lock);
  int rc = nam_engine_add_platform(e, &nam_platform_cpu_ops, "cpu", 1, NULL);
  if (!rc) rc = nam_engine_add_platform(e, &slow_ops, SLOW, 1, NULL);
  pthread_mutex_unlock(&e->lock);
  assert_int_equal(rc, 0);
  ejob_reset();
  return e;
}

static const nam_pair_status *sw_pair(const nam_platform_status *ps) {
  for (unsigned k = 0; k < ps->n_pairs; k++)
    if (strcmp(ps->pairs[k].accelerator, "sw") == 0) return &ps->pairs[k];
  fail_msg("%s has no sw pair", ps->name);
  return NULL;
}

static double estimate(const nam_pair_status *s, double work) {
  return s->fixed_ns + s->ns_per_unit * work;
}

/* ------------------------------------------------------------------------ */

static void cold_batch_not_to_unmeasured(void **state) {
  (void)state;
  enum { N = 20 };
  nam_engine *e = cpu_and_slow();
  uint64_t rng = 11;
  ejob jobs[N];
  for (int i = 0; i < N; i++) {
    ejob_make_dna(&jobs[i], &rng, 4, 40, 90);
    assert_int_equal(ejob_submit(e, &jobs[i]), 0);
  }
  assert_int_equal(ejob_wait(N, WAIT_S), 0);
  for (int i = 0; i < N; i++) {
    assert_true(ejob_check_output(&jobs[i], NULL, "cold batch"));
    if (strcmp(nam_task_platform(jobs[i].task), "cpu") != 0)
      fail_msg("task %d of the first batch ran on %s, a platform with no "
               "figures yet", i, nam_task_platform(jobs[i].task));
  }
  /* calibration went on beside the batch and ends */
  assert_int_equal(nam_engine_wait_calibrated(e, 1000 * WAIT_S), 0);
  nam_platform_status cpu, slow;
  assert_int_equal(ejob_platform(e, "cpu", &cpu), 0);
  assert_int_equal(ejob_platform(e, SLOW, &slow), 0);
  assert_int_equal(slow.completed, 0); /* calibration tasks are not counted */
  assert_int_equal(cpu.completed, N);
  assert_string_equal(sw_pair(&cpu)->speed, "calibrated");
  assert_string_equal(sw_pair(&slow)->speed, "calibrated");
  nam_engine_destroy(e);
  for (int i = 0; i < N; i++) ejob_free(&jobs[i]);
}

static void one_pair_tasks_stay_on_fast(void **state) {
  (void)state;
  enum { N = 30 };
  nam_engine *e = cpu_and_slow();
  assert_int_equal(nam_engine_wait_calibrated(e, 1000 * WAIT_S), 0);
  nam_platform_status cpu, slow;
  assert_int_equal(ejob_platform(e, "cpu", &cpu), 0);
  assert_int_equal(ejob_platform(e, SLOW, &slow), 0);
  const nam_pair_status *c = sw_pair(&cpu), *s = sw_pair(&slow);
  printf("calibrated: cpu %.1f us + %.3f ns/cell, %s %.1f us + %.3f "
         "ns/cell\n", c->fixed_ns / 1e3, c->ns_per_unit, SLOW,
         s->fixed_ns / 1e3, s->ns_per_unit);
  assert_string_equal(c->speed, "calibrated");
  assert_string_equal(s->speed, "calibrated");
  /* the fixed cost shows: one pair is slower there */
  assert_true(estimate(s, 4000) > estimate(c, 4000));

  uint64_t rng = 12;
  ejob jobs[N];
  for (int i = 0; i < N; i++) {
    ejob_make_dna(&jobs[i], &rng, 1, 40, 90);
    assert_int_equal(ejob_submit(e, &jobs[i]), 0);
    assert_int_equal(ejob_wait_job(&jobs[i], WAIT_S), 0);
    assert_true(ejob_check_output(&jobs[i], NULL, "one pair"));
    if (strcmp(nam_task_platform(jobs[i].task), "cpu") != 0)
      fail_msg("one-pair task %d ran on %s while cpu was free", i,
               nam_task_platform(jobs[i].task));
  }
  /* real tasks refine the figures */
  assert_int_equal(ejob_platform(e, "cpu", &cpu), 0);
  assert_true(sw_pair(&cpu)->measured >= N);
  nam_engine_destroy(e);
  for (int i = 0; i < N; i++) ejob_free(&jobs[i]);
}

static void slow_takes_what_it_finishes_sooner(void **state) {
  (void)state;
  nam_engine *e = cpu_and_slow();
  assert_int_equal(nam_engine_wait_calibrated(e, 1000 * WAIT_S), 0);
  /* seconds of work for cpu (4e9 cells), canceled once it served */
  uint64_t rng = 13;
  ejob big, small;
  ejob_make_dna(&big, &rng, 200, 2000, 10000);
  assert_int_equal(ejob_submit(e, &big), 0);
  nam_platform_status cpu;
  for (int tries = 0;; tries++) {
    assert_int_equal(ejob_platform(e, "cpu", &cpu), 0);
    if (cpu.running == 1) break;
    assert_true(tries < 1000 * WAIT_S);
    nanosleep(&(struct timespec){0, 1000000}, NULL);
  }
  ejob_make_dna(&small, &rng, 1, 40, 90);
  assert_int_equal(ejob_submit(e, &small), 0);
  assert_int_equal(ejob_wait_job(&small, WAIT_S), 0);
  assert_true(ejob_check_output(&small, NULL, "small beside a big one"));
  assert_string_equal(nam_task_platform(small.task), SLOW);
  assert_int_equal(nam_task_cancel(big.task), 0);
  assert_int_equal(ejob_wait_job(&big, WAIT_S), 0);
  assert_string_equal(nam_task_platform(big.task), "cpu");
  nam_engine_destroy(e);
  ejob_free(&big);
  ejob_free(&small);
}

/* Nothing to choose: an engine whose cpu alone runs sw (libember's
 * embedded mode) spends no time calibrating; real tasks measure it. */
static void cpu_alone_not_calibrated(void **state) {
  (void)state;
  nam_engine_config cfg = {.cpu_workers = 1};
  nam_engine *e = NULL;
  assert_int_equal(nam_engine_create(&cfg, &e), 0);
  ejob_reset();
  assert_int_equal(nam_engine_wait_calibrated(e, 1000 * WAIT_S), 0);
  nam_platform_status ps;
  assert_int_equal(ejob_platform(e, "cpu", &ps), 0);
  assert_string_equal(sw_pair(&ps)->speed, "unknown");
  uint64_t rng = 15;
  ejob j;
  ejob_make_dna(&j, &rng, 4, 40, 90);
  assert_int_equal(ejob_submit(e, &j), 0);
  assert_int_equal(ejob_wait_job(&j, WAIT_S), 0);
  assert_true(ejob_check_output(&j, NULL, "alone"));
  assert_int_equal(ejob_platform(e, "cpu", &ps), 0);
  assert_string_equal(sw_pair(&ps)->speed, "measured");
  nam_engine_destroy(e);
  ejob_free(&j);
}

static void board_keeps_its_model(void **state) {
  (void)state;
  nam_fpga_emu_config board;
  ejob_board(&board, "fpga0");
  board.reprogram_ms = 1;
  nam_engine_config cfg = {.cpu_workers = 1, .fpga = &board, .n_fpga = 1};
  nam_engine *e = NULL;
  assert_int_equal(nam_engine_create(&cfg, &e), 0);
  ejob_reset();
  assert_int_equal(nam_engine_wait_calibrated(e, 1000 * WAIT_S), 0);
  nam_platform_status ps;
  assert_int_equal(ejob_platform(e, "fpga0", &ps), 0);
  assert_string_equal(sw_pair(&ps)->speed, "model");
  assert_string_equal(ps.loaded, ""); /* no bitstream loaded to calibrate */
  assert_int_equal(ps.reprograms, 0);
  /* 64 M cells: ~2.5 ms on the modelled 25.6 GCUPS array, far more on
   * one cpu worker */
  uint64_t rng = 14;
  ejob j;
  ejob_make_dna(&j, &rng, 64, 1000, 1000);
  assert_int_equal(ejob_submit(e, &j), 0);
  assert_int_equal(ejob_wait_job(&j, WAIT_S), 0);
  assert_true(ejob_check_output(&j, NULL, "large task"));
  assert_string_equal(nam_task_platform(j.task), "fpga0");
  nam_engine_destroy(e);
  ejob_free(&j);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(cold_batch_not_to_unmeasured),
    cmocka_unit_test(one_pair_tasks_stay_on_fast),
    cmocka_unit_test(slow_takes_what_it_finishes_sooner),
    cmocka_unit_test(cpu_alone_not_calibrated),
    cmocka_unit_test(board_keeps_its_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
