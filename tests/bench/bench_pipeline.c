/*
 * bench_pipeline.c - serial (pipeline_depth 1) vs pipelined (depth 3)
 * device platforms: throughput of a stream of independent sw tasks.
 *
 *   build/tests/bench/bench_pipeline [fpga_tasks] [opencl_tasks]
 *   (defaults 200 24; 0 skips that part)
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
 * around the kernel (validation of results, packing, the next upload).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_jobs.h"

typedef struct figures {
  double seconds;      /* virtual (fpga-emu) or wall (opencl) */
  unsigned tasks;
  char platform[64];
} figures;

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
  uint64_t t0 = ejob_now_ns();
  for (unsigned i = 0; i < n; i++)
    if (ejob_submit(e, &jobs[i]) != 0) return -1;
  if (ejob_wait(n + 1, 600) != 0) return -1;
  uint64_t wall = ejob_now_ns() - t0;
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
  nam_engine_destroy(e);
  for (unsigned i = 0; i < n; i++) ejob_free(&jobs[i]);
  ejob_free(&warm);
  free(jobs);
  return 0;
}

static void part(const char *kind, const char *clock, unsigned n,
                 size_t pairs, size_t qlen, size_t rlen) {
  figures f[2];
  unsigned depth[2] = {1, 3};
  for (int d = 0; d < 2; d++) {
    int rc = run(kind, depth[d], n, pairs, qlen, rlen, &f[d]);
    if (rc > 0) {
      printf("%-9s no platform of this kind here: skipped\n\n", kind);
      return;
    }
    if (rc < 0) {
      fprintf(stderr, "%s depth %u failed\n", kind, depth[d]);
      exit(1);
    }
  }
  printf("%-9s %-10s %6s %6s %12s %12s\n", "kind", "platform", "depth",
         "tasks", clock, "tasks/s");
  for (int d = 0; d < 2; d++)
    printf("%-9s %-10s %6u %6u %12.4f %12.1f\n", kind, f[d].platform,
           depth[d], f[d].tasks, f[d].seconds,
           f[d].tasks / f[d].seconds);
  printf("%-9s pipelined / serial throughput: %.2fx\n\n", kind,
         f[0].seconds / f[1].seconds);
}

int main(int argc, char **argv) {
  unsigned n_fpga = argc > 1 ? (unsigned)atoi(argv[1]) : 200;
  unsigned n_ocl = argc > 2 ? (unsigned)atoi(argv[2]) : 24;
  printf("serial (pipeline_depth 1) vs pipelined (3)\n");
  if (n_fpga) {
    printf("fpga-emu: 512 pairs of 48-55 bp per task, sw model 128 PEs at "
           "200 MHz, 1 GB/s PCIe, virtual clock\n");
    part("fpga-emu", "virtual s", n_fpga, 512, 48, 48);
  }
  if (n_ocl) {
    printf("opencl: 64 pairs of 100-107 x 300-307 bp per task, real time\n");
    part("opencl", "wall s", n_ocl, 64, 100, 300);
  }
  return 0;
}
