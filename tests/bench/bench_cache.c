/*
 * bench_cache.c - what the block cache saves on an iterative workload, on
 * one emulated FPGA board (virtual clock: the board's own time, so the
 * figures are the model's, not this machine's).
 *
 *   build/tests/bench/bench_cache [rounds] [ref_blocks] [query_blocks]
 *   (defaults 10 8 4)
 *
 * The workload is shaped like Blaze's iterative LR/KM (section 6): a large
 * data set is read again in every round while the per-round work on each
 * byte is small, so copying the data to the board each time dominates.
 * Here: ref_blocks blocks of 256 reference windows of ~1000 bp (~256 KB
 * each, the data set), query_blocks blocks of 256 short queries of 6-9 bp
 * (seeds); each round runs every query block against every reference block
 * and waits for the round to end (an iteration). The board: 512 PEs at
 * 250 MHz (128 GCUPS, a wider array than sw's default model) and 2 GB/s of
 * effective PCIe each way, default pipeline depth 3; the first bitstream
 * load is not counted (reprogram_ms 0).
 *
 *   cached    every block put once with EMBER_BLOCK_CACHE and named by id:
 *             it crosses PCIe once and stays on the board
 *   uncached  no block ids: each task's inputs are copied for it
 *
 * Printed: the board's virtual makespan, bytes host->board, cache hits and
 * misses, and the speedup. The real clock is not used: there the kernel
 * stage lasts at least as long as the CPU code that computes the result,
 * which on a CPU is far slower than the modelled array and hides the link.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block_cache.h"
#include "engine_jobs.h"

typedef struct figures {
  double makespan_ms, wall_s;
  unsigned long long bytes_to, hits, misses, tasks;
} figures;

static int run(int cached, int rounds, int n_ref, int n_query, figures *f) {
  nam_fpga_emu_config board;
  ejob_board(&board, "fpga0");
  board.virtual_clock = 1;
  board.pcie_gbps = 2;
  board.reprogram_ms = 0; /* one accelerator: its first load is not the
                             workload's */
  snprintf(board.timing[0].accelerator, sizeof board.timing[0].accelerator,
           "sw");
  board.timing[0].units_per_cycle = 512;
  board.timing[0].clock_mhz = 250;
  board.n_timing = 1;
  nam_engine_config cfg = {.no_cpu = 1, .fpga = &board, .n_fpga = 1};
  nam_engine *e = NULL;
  if (nam_engine_create(&cfg, &e) != 0) return -1;

  uint64_t rng = 2024;
  acc_block *refs = calloc((size_t)n_ref, sizeof *refs);
  acc_block *queries = calloc((size_t)n_query, sizeof *queries);
  uint8_t **owned = calloc((size_t)(n_ref + n_query), sizeof *owned);
  size_t per_round = (size_t)n_ref * (size_t)n_query;
  ejob *jobs = calloc(per_round, sizeof *jobs);
  if (!refs || !queries || !owned || !jobs) return -1;
  nam_block_cache *cache = nam_engine_block_cache(e);
  for (int r = 0; r < n_ref; r++) {
    owned[r] = ejob_dna_block(&rng, 256, 1000, 32, &refs[r]);
    if (cached && nam_block_cache_put(cache, 1, 1 + (uint64_t)r,
                                      EMBER_BLOCK_CACHE, refs[r].data,
                                      refs[r].size, NULL, NULL) != 0)
      return -1;
  }
  for (int q = 0; q < n_query; q++) {
    owned[n_ref + q] = ejob_dna_block(&rng, 256, 6, 4, &queries[q]);
    if (cached && nam_block_cache_put(cache, 1, 1000 + (uint64_t)q,
                                      EMBER_BLOCK_CACHE, queries[q].data,
                                      queries[q].size, NULL, NULL) != 0)
      return -1;
  }
  uint64_t t0 = ejob_now_ns();
  ejob_reset();
  for (int round = 0; round < rounds; round++) {
    size_t k = 0;
    for (int q = 0; q < n_query; q++)
      for (int r = 0; r < n_ref; r++, k++) {
        ejob *j = &jobs[k];
        ejob_free(j);
        memset(j, 0, sizeof *j);
        j->in[0] = queries[q];
        j->in[1] = refs[r];
        ejob_params_dna(j, 3, -3, 6, 1);
        j->app = 1;
        j->use_ids = cached;
        j->block_ids[0] = 1000 + (uint64_t)q;
        j->block_ids[1] = 1 + (uint64_t)r;
        if (ejob_submit(e, j) != 0) return -1;
      }
    if (ejob_wait((unsigned)(per_round * (size_t)(round + 1)), 600) != 0)
      return -1;
    for (k = 0; k < per_round; k++)
      if (jobs[k].status != 0) {
        fprintf(stderr, "task failed: %s\n", nam_task_message(jobs[k].task));
        return -1;
      }
  }
  f->wall_s = (double)(ejob_now_ns() - t0) / 1e9;
  nam_platform_status ps;
  if (ejob_platform(e, "fpga0", &ps) != 0) return -1;
  f->makespan_ms = (double)ps.virtual_ns / 1e6;
  f->bytes_to = ps.bytes_to;
  f->hits = ps.cache_hits;
  f->misses = ps.cache_misses;
  f->tasks = ps.completed;
  nam_engine_destroy(e);
  for (size_t k = 0; k < per_round; k++) ejob_free(&jobs[k]);
  for (int i = 0; i < n_ref + n_query; i++) free(owned[i]);
  free(owned);
  free(jobs);
  free(refs);
  free(queries);
  return 0;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 10;
  int n_ref = argc > 2 ? atoi(argv[2]) : 8;
  int n_query = argc > 3 ? atoi(argv[3]) : 4;
  if (rounds < 1 || n_ref < 1 || n_query < 1) {
    fprintf(stderr, "usage: %s [rounds] [ref_blocks] [query_blocks]\n",
            argv[0]);
    return 2;
  }
  printf("iterative sw: %d rounds x %d query blocks x %d reference blocks "
         "(256 pairs each: 6-9 bp queries, ~1000 bp windows); board: 512 "
         "PEs at 250 MHz, 2 GB/s PCIe, virtual clock\n\n",
         rounds, n_query, n_ref);
  figures f[2];
  const char *name[2] = {"uncached", "cached"};
  for (int c = 0; c < 2; c++)
    if (run(c, rounds, n_ref, n_query, &f[c]) != 0) {
      fprintf(stderr, "%s run failed\n", name[c]);
      return 1;
    }
  printf("%-9s %7s %14s %14s %8s %8s %10s\n", "mode", "tasks",
         "makespan (ms)", "bytes to board", "hits", "misses", "wall (s)");
  for (int c = 0; c < 2; c++)
    printf("%-9s %7llu %14.2f %14llu %8llu %8llu %10.2f\n", name[c],
           f[c].tasks, f[c].makespan_ms, f[c].bytes_to, f[c].hits,
           f[c].misses, f[c].wall_s);
  printf("\nspeedup of caching (board makespan): %.1fx; bytes moved: %.1fx "
         "fewer\n", f[0].makespan_ms / f[1].makespan_ms,
         (double)f[0].bytes_to / (double)f[1].bytes_to);
  return 0;
}
