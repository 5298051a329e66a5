/*
 * bench_pipeline.c - serial (pipeline_depth 1) vs pipelined (depth 3)
 * device platforms: throughput of a stream of independent sw tasks.
 *
 *   build/tests/bench/bench_pipeline [fpga_tasks] [opencl_tasks] [rounds]
 *   (defaults 200 48 5; 0 tasks skips that part)
 *
 * fpga-emu (virtual clock, the board's model): 512 pairs of 48-55 bp
 * queries and references per task, inputs copied per task (no block ids).
 * With sw's default model (128 PEs at 200 MHz, 5 us per launch) a task's
 * kernel is ~60 us; at 1 GB/s of PCIe its ~57 KB of inputs take ~57 us, so
 * the input DMA about equals the kernel and the output (~4 KB) is small:
 * serial stages cost in + kernel + out per task, a pipeline hides the DMA
 * behind the previous task's kernel (ideal: ~2x).
 *
 * opencl (real time, every OpenCL device found, e.g. pocl on the CPU): 64
 * pairs of 100 x 300 bp per task; here transfers are host memcpy and the
 * kernel dominates, so the pipeline mostly overlaps the host-side work
 * around the kernel (validation of results, packing, the next upload). On
 * a device that shares host memory the inputs are wrapped, not copied, so
 * stage-in costs microseconds and what a pipeline can hide is the execute
 * thread's idle time between two serial tasks: the "idle" column.
 *
 * Wall time on a shared machine drifts with other load, so the opencl
 * part runs serial and pipelined alternately, rounds times each, and
 * prints every round and the median ratio with its range; "cpu ms/t" (the
 * process's CPU time per task, pocl's worker threads included) shows
 * whether a depth costs more work, whatever the load. fpga-emu's virtual
 * clock does not drift: one round.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "engine_jobs.h"

typedef struct figures {
  double seconds;      /* virtual (fpga-emu) or wall (opencl) */
  unsigned tasks;
  char platform[64];
  /* wall-clock means per task (ms): stage-in (dispatch to staged), execute
   * (from when the execute thread could start it to executed), and the
   * execute thread's idle time between two tasks */
  double stage_in_ms, execute_ms, idle_ms;
  double cpu_ms;       /* the process's CPU time per task (all threads) */
} figures;

static uint64_t cpu_ns(void) {
  struct rusage ru;
  if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000u +
         (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000u;
}

static int by_executed(const void *a, const void *b) {
  const nam_task_times *x = *(const nam_task_times *const *)a;
  const nam_task_times *y = *(const nam_task_times *const *)b;
  return (x->executed > y->executed) - (x->executed < y->executed);
}

/* The stages' wall-clock means from the tasks' timestamps: the execute
 * thread takes tasks in order, so task k's execute starts at the later of
 * its stage-in's end and task k-1's execute's end. */
static void stage_means(ejob *jobs, unsigned n, figures *f) {
  const nam_task_times **t = calloc(n, sizeof *t);
  if (!t || n < 2) {
    free(t);
    return;
  }
  for (unsigned i = 0; i < n; i++) t[i] = nam_task_get_times(jobs[i].task);
  qsort(t, n, sizeof *t, by_executed);
  double in = 0, ex = 0, idle = 0;
  for (unsigned k = 0; k < n; k++) {
    /* from dispatch: `started` moves to when the task ahead finished
     * when its stage-in overlapped that task's run, and may then be later
     * than staged */
    in += (double)(t[k]->staged - t[k]->dispatched);
    if (k == 0) continue;
    uint64_t from = t[k]->staged > t[k - 1]->executed ? t[k]->staged
                                                      : t[k - 1]->executed;
    ex += (double)(t[k]->executed - from);
    idle += (double)(from - t[k - 1]->executed);
  }
  f->stage_in_ms = in / n / 1e6;
  f->execute_ms = ex / (n - 1) / 1e6;
  f->idle_ms = idle / (n - 1) / 1e6;
  free(t);
}

/* Run n tasks (sized pairs x qlen x rlen) on the first platform of kind
 * with the given depth. */
static int run(const char *kind, unsigned depth, unsigned n, size_t pairs,
               size_t qlen, size_t rlen, figures *f) {
  nam_fpga_emu_config board;
  ejob_board(&board, "fpga0");
  board.virtual_clock = 1;
  board.pcie_gbps = 1;
  board.reprogram_ms = 0; /* one accelerator: its first load is not counted */
  int fpga = strcmp(kind, "fpga-emu") == 0;
  nam_engine_config cfg = {
    .no_cpu = 1,
    .pipeline_depth = depth,
    .fpga = fpga ? &board : NULL,
    .n_fpga = fpga ? 1 : 0,
    .opencl = {.enabled = !fpga},
  };
  nam_engine *e = NULL;
  if (nam_engine_create(&cfg, &e) != 0) return -1;
  nam_platform_status ps[16];
  size_t np = nam_engine_platforms(e, ps, 16);
  if (np == 0) {
    nam_engine_destroy(e);
    return 1; /* no such platform here */
  }
  snprintf(f->platform, sizeof f->platform, "%s", ps[0].name);
  uint64_t rng = 99;
  ejob *jobs = calloc(n, sizeof *jobs);
  if (!jobs) return -1;
  for (unsigned i = 0; i < n; i++) {
    ejob_make_dna(&jobs[i], &rng, pairs, qlen, rlen);
    jobs[i].platform_kind = kind;
  }
  /* one warm-up task: kernels built, speeds measured */
  ejob warm;
  ejob_make_dna(&warm, &rng, pairs, qlen, rlen);
  warm.platform_kind = kind;
  ejob_reset();
  if (ejob_submit(e, &warm) != 0 || ejob_wait(1, 600) != 0) return -1;
  nam_platform_status before;
  if (ejob_platform(e, f->platform, &before) != 0) return -1;
  uint64_t t0 = ejob_now_ns(), c0 = cpu_ns();
  for (unsigned i = 0; i < n; i++)
    if (ejob_submit(e, &jobs[i]) != 0) return -1;
  if (ejob_wait(n + 1, 600) != 0) return -1;
  uint64_t wall = ejob_now_ns() - t0;
  f->cpu_ms = (double)(cpu_ns() - c0) / n / 1e6;
  nam_platform_status after;
  if (ejob_platform(e, f->platform, &after) != 0) return -1;
  for (unsigned i = 0; i < n; i++)
    if (jobs[i].status != 0) {
      fprintf(stderr, "task failed: %s\n", nam_task_message(jobs[i].task));
      return -1;
    }
  f->seconds = fpga ? (double)(after.virtual_ns - before.virtual_ns) / 1e9
                    : (double)wall / 1e9;
  f->tasks = n;
  stage_means(jobs, n, f);
  nam_engine_destroy(e);
  for (unsigned i = 0; i < n; i++) ejob_free(&jobs[i]);
  ejob_free(&warm);
  free(jobs);
  return 0;
}

static int by_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* rounds x (serial, pipelined), alternating so that a shared machine's
 * load drifts over both alike; the figures are medians over the rounds. */
static void part(const char *kind, const char *clock, unsigned n,
                 unsigned rounds, size_t pairs, size_t qlen, size_t rlen) {
  enum { MAX_ROUNDS = 64 };
  if (rounds > MAX_ROUNDS) rounds = MAX_ROUNDS;
  if (rounds == 0) rounds = 1;
  figures f[MAX_ROUNDS][2];
  unsigned depth[2] = {1, 3};
  for (unsigned r = 0; r < rounds; r++)
    for (int d = 0; d < 2; d++) {
      int rc = run(kind, depth[d], n, pairs, qlen, rlen, &f[r][d]);
      if (rc > 0) {
        printf("%-9s no platform of this kind here: skipped\n\n", kind);
        return;
      }
      if (rc < 0) {
        fprintf(stderr, "%s depth %u failed\n", kind, depth[d]);
        exit(1);
      }
    }
  printf("%-9s %-10s %6s %6s %12s %12s %9s %9s %9s %9s\n", "kind",
         "platform", "depth", "tasks", clock, "tasks/s", "cpu ms/t",
         "stage-in", "execute", "idle");
  double ratio[MAX_ROUNDS];
  for (unsigned r = 0; r < rounds; r++) {
    for (int d = 0; d < 2; d++) {
      const figures *x = &f[r][d];
      printf("%-9s %-10s %6u %6u %12.4f %12.1f %9.3f %9.3f %9.3f %9.3f\n",
             kind, x->platform, depth[d], x->tasks, x->seconds,
             x->tasks / x->seconds, x->cpu_ms, x->stage_in_ms, x->execute_ms,
             x->idle_ms);
    }
    ratio[r] = f[r][0].seconds / f[r][1].seconds;
  }
  qsort(ratio, rounds, sizeof *ratio, by_double);
  printf("%-9s pipelined / serial throughput: median %.3fx over %u "
         "round%s (min %.3f, max %.3f)\n\n", kind, ratio[rounds / 2], rounds,
         rounds == 1 ? "" : "s", ratio[0], ratio[rounds - 1]);
}

int main(int argc, char **argv) {
  unsigned n_fpga = argc > 1 ? (unsigned)atoi(argv[1]) : 200;
  unsigned n_ocl = argc > 2 ? (unsigned)atoi(argv[2]) : 48;
  unsigned rounds = argc > 3 ? (unsigned)atoi(argv[3]) : 5;
  printf("serial (pipeline_depth 1) vs pipelined (3); per task: cpu ms "
         "(the process's, pocl's threads included), wall ms in stage-in, "
         "in execute, and the execute thread idle between tasks\n");
  if (n_fpga) {
    printf("fpga-emu: 512 pairs of 48-55 bp per task, sw model 128 PEs at "
           "200 MHz, 1 GB/s PCIe, virtual clock\n");
    part("fpga-emu", "virtual s", n_fpga, 1, 512, 48, 48);
  }
  if (n_ocl) {
    printf("opencl: 64 pairs of 100-107 x 300-307 bp per task, real time\n");
    part("opencl", "wall s", n_ocl, rounds, 64, 100, 300);
  }
  return 0;
}
