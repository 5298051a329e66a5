/*
 * sim_workload.c - the seven workload mixes of Blaze 6.6: the same number
 * of apps in each, the share of LR apps 0, 1/6, ..., 1. Within a label the
 * input sizes cycle through 1, 2, 4 and 8 GB, so both labels have the same
 * spread of sizes; the order of arrival is a seeded shuffle, and so are the
 * arrival times. A mix depends only on the model and its index, so every
 * policy runs the very same apps.
 */
#include <math.h>
#include <stdlib.h>

#include "sim.h"
#include "sim_rng.h"

static const unsigned sizes_gb[] = {1, 2, 4, 8};
#define N_SIZES (sizeof sizes_gb / sizeof sizes_gb[0])

/* One task's FPGA time: the block through PCIe, then the kernel. */
static uint64_t task_ns(const sim_model *m, int label) {
  /* GB/s is bytes per ns */
  uint64_t dma = (uint64_t)ceil((double)m->block_bytes / m->pcie_gbps);
  return dma + m->kernel_ns[label];
}

/* 1 GB asks for 1 container, each doubling for one more, at most one per
 * node. */
static unsigned wanted_for(const sim_model *m, unsigned size_gb) {
  unsigned w = 1;
  for (unsigned s = size_gb; s > 1; s /= 2) w++;
  return w < m->nodes ? w : m->nodes;
}

static int by_arrival(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

uint64_t sim_mix_work_ns(const sim_mix *mix) {
  uint64_t w = 0;
  for (size_t i = 0; i < mix->n_apps; i++)
    w += (uint64_t)mix->apps[i].tasks * mix->apps[i].task_ns;
  return w;
}

int sim_mix_build(const sim_model *m, unsigned index, sim_mix *out) {
  *out = (sim_mix){.index = index,
                   .lr_share = (double)index / (SIM_MIXES - 1)};
  size_t n = m->apps;
  sim_app_spec *apps = calloc(n ? n : 1, sizeof *apps);
  uint64_t *times = calloc(n ? n : 1, sizeof *times);
  if (!apps || !times) {
    free(apps);
    free(times);
    return -1;
  }
  size_t n_lr = (size_t)llround((double)n * index / (SIM_MIXES - 1));
  uint64_t blocks_per_gb = (1ull << 30) / m->block_bytes;
  if (blocks_per_gb == 0) blocks_per_gb = 1;
  for (size_t i = 0; i < n; i++) {
    int label = i < n_lr ? SIM_LR : SIM_KM;
    size_t k = i < n_lr ? i : i - n_lr; /* rank within its label */
    sim_app_spec *a = &apps[i];
    a->label = label;
    a->size_gb = sizes_gb[k % N_SIZES];
    a->tasks = (unsigned)(a->size_gb * blocks_per_gb * m->iterations[label]);
    a->task_ns = task_ns(m, label);
    a->wanted = wanted_for(m, a->size_gb);
  }

  /* the mix's own sequence: the same seed gives the same mix */
  uint64_t rng = m->seed * 0x100000001b3ull + index;
  for (size_t i = n; i > 1; i--) { /* Fisher-Yates */
    size_t j = (size_t)(sim_rng_next(&rng) % i);
    sim_app_spec t = apps[i - 1];
    apps[i - 1] = apps[j];
    apps[j] = t;
  }
  out->apps = apps;
  out->n_apps = n;

  /* arrivals: uniform over the window, the first at 0 */
  uint64_t window = (uint64_t)(m->arrival_window *
                               (double)sim_mix_work_ns(out) / m->nodes);
  for (size_t i = 0; i < n; i++)
    times[i] = window ? sim_rng_between(&rng, 0, window) : 0;
  qsort(times, n, sizeof *times, by_arrival);
  for (size_t i = 0; i < n; i++) apps[i].arrival_ns = times[i] - times[0];
  free(times);
  return 0;
}

void sim_mix_free(sim_mix *mix) {
  if (!mix) return;
  free(mix->apps);
  mix->apps = NULL;
  mix->n_apps = 0;
}
