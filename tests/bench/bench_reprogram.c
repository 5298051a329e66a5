/*
 * bench_reprogram.c - sticky bitstreams vs naive dispatch on one emulated
 * FPGA board shared by two accelerators (real clock: the dispatcher's
 * bound is in real time).
 *
 *   build/tests/bench/bench_reprogram [tasks_per_app] [bound_ms]
 *   (defaults 40 300)
 *
 * Two apps on two threads each alternate "sw" and "sw2" tasks ("sw2" is
 * the sw descriptor under another name: a second bitstream). The board:
 * reprogram 50 ms, each task ~10 ms of modelled kernel (4 pairs of ~44 x
 * ~94 bp, the sw timing scaled down), pipeline depth 3.
 *
 *   sticky  cfg.sticky_off = 0, reprogram_bound_ms = bound: the loaded
 *           bitstream keeps the board while its queue has tasks, until the
 *           other accelerator's oldest task has waited the bound
 *   naive   cfg.sticky_off = 1: first come, first served
 *
 * Two loads:
 *   window  each app keeps 4 tasks in flight (closed loop)
 *   burst   each app submits all its tasks at once (a backlog of both
 *           accelerators for the whole run)
 *
 * Printed per run: reprograms, throughput, the longest queue wait (dispatch
 * minus submit) and how many tasks waited longer than the bound.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_jobs.h"
#include "sw/sw.h"

enum { REPROGRAM_MS = 50, WINDOW = 4 };

static acc_descriptor sw2;
static int per_app = 40;

typedef struct app {
  nam_engine *e;
  uint64_t id;
  ejob *jobs;
  int window;       /* 0: all at once */
  int rc;
} app;

static void *app_thread(void *arg) {
  app *a = arg;
  uint64_t rng = 1000 + a->id;
  for (int i = 0; i < per_app; i++) {
    if (a->window && i >= a->window &&
        ejob_wait_job(&a->jobs[i - a->window], 600) != 0) {
      a->rc = -1;
      return NULL;
    }
    ejob *j = &a->jobs[i];
    ejob_make_dna(j, &rng, 4, 40, 90);
    j->acc = (i + (int)a->id) % 2 ? &sw2 : &acc_sw_descriptor;
    j->app = a->id;
    if (ejob_submit(a->e, j) != 0) {
      a->rc = -2;
      return NULL;
    }
  }
  return NULL;
}

typedef struct figures {
  unsigned long long reprograms;
  double seconds, max_wait_ms;
  unsigned over_bound, tasks;
} figures;

static int run(int sticky_off, int window, unsigned bound_ms, figures *f) {
  nam_fpga_emu_config board;
  ejob_board(&board, "fpga0");
  snprintf(board.bitstreams[1], sizeof board.bitstreams[1], "sw2");
  board.n_bitstreams = 2;
  board.reprogram_ms = REPROGRAM_MS;
  const char *names[2] = {"sw", "sw2"};
  for (int k = 0; k < 2; k++) {
    snprintf(board.timing[k].accelerator, sizeof board.timing[k].accelerator,
             "%s", names[k]);
    board.timing[k].units_per_cycle = 17600.0 / 0.010 / 200e6; /* ~10 ms */
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
    .reprogram_bound_ms = bound_ms,
    .sticky_off = sticky_off,
  };
  nam_engine *e = NULL;
  if (nam_engine_create(&cfg, &e) != 0) return -1;
  ejob_reset();
  app apps[2];
  pthread_t th[2];
  uint64_t t0 = ejob_now_ns();
  for (int a = 0; a < 2; a++) {
    apps[a] = (app){.e = e, .id = (uint64_t)a + 1, .window = window};
    apps[a].jobs = calloc((size_t)per_app, sizeof *apps[a].jobs);
    if (!apps[a].jobs) return -1;
    pthread_create(&th[a], NULL, app_thread, &apps[a]);
  }
  for (int a = 0; a < 2; a++) {
    pthread_join(th[a], NULL);
    if (apps[a].rc) return -1;
  }
  if (ejob_wait((unsigned)(2 * per_app), 600) != 0) return -1;
  f->seconds = (double)(ejob_now_ns() - t0) / 1e9;
  f->max_wait_ms = 0;
  f->over_bound = 0;
  f->tasks = (unsigned)(2 * per_app);
  for (int a = 0; a < 2; a++)
    for (int i = 0; i < per_app; i++) {
      ejob *j = &apps[a].jobs[i];
      if (j->status != 0) return -1;
      const nam_task_times *tm = nam_task_get_times(j->task);
      double w = (double)(tm->started - tm->queued) / 1e6;
      if (w > f->max_wait_ms) f->max_wait_ms = w;
      f->over_bound += w > bound_ms;
    }
  nam_platform_status ps;
  if (ejob_platform(e, "fpga0", &ps) != 0) return -1;
  f->reprograms = ps.reprograms;
  nam_engine_destroy(e);
  for (int a = 0; a < 2; a++) {
    for (int i = 0; i < per_app; i++) ejob_free(&apps[a].jobs[i]);
    free(apps[a].jobs);
  }
  return 0;
}

int main(int argc, char **argv) {
  per_app = argc > 1 ? atoi(argv[1]) : 40;
  unsigned bound = argc > 2 ? (unsigned)atoi(argv[2]) : 300;
  if (per_app < 1) return 2;
  sw2 = acc_sw_descriptor;
  sw2.name = "sw2";
  printf("two apps x %d tasks alternating sw and sw2 on one board "
         "(reprogram %d ms, ~10 ms per task, depth 3), bound %u ms\n\n",
         per_app, REPROGRAM_MS, bound);
  printf("%-7s %-7s %11s %9s %10s %14s %12s\n", "load", "mode", "reprograms",
         "time (s)", "tasks/s", "max wait (ms)", "over bound");
  const char *load[2] = {"window", "burst"};
  for (int l = 0; l < 2; l++) {
    figures f[2];
    for (int naive = 0; naive < 2; naive++) {
      if (run(naive, l == 0 ? WINDOW : 0, bound, &f[naive]) != 0) {
        fprintf(stderr, "run failed\n");
        return 1;
      }
      printf("%-7s %-7s %11llu %9.2f %10.1f %14.1f %12u\n", load[l],
             naive ? "naive" : "sticky", f[naive].reprograms,
             f[naive].seconds, f[naive].tasks / f[naive].seconds,
             f[naive].max_wait_ms, f[naive].over_bound);
    }
    printf("%-7s naive / sticky reprograms: %.1fx, sticky throughput "
           "%.2fx\n\n", load[l],
           (double)f[1].reprograms / (double)f[0].reprograms,
           f[1].seconds / f[0].seconds);
  }
  return 0;
}
