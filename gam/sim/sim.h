/*
 * sim.h - the scheduling simulator's shared types: the model's parameters,
 * the apps of a workload mix, and what one run measured. See README.md in
 * this folder for the model as a whole.
 *
 * Parts: sim_workload.c builds the mixes, sim_cluster.c runs one policy on
 * one mix on a virtual clock (sim_events.c is its event queue),
 * sim_optimum.c computes the offline bound, sim_report.c prints the table,
 * the CSV and the plot, sim_main.c reads the options.
 */
#ifndef EMBER_GAM_SIM_H
#define EMBER_GAM_SIM_H

#include <stddef.h>
#include <stdint.h>

#include "policy.h"

/* The two logical accelerators of Blaze 6.6: LR-like and KM-like apps. */
enum sim_label { SIM_LR = 0, SIM_KM = 1, SIM_LABELS = 2 };

/* The label's name, as the policy and the static rules see it. */
const char *sim_label_name(int label);

#define SIM_MS 1000000ull        /* ns per ms */
#define SIM_S 1000000000ull      /* ns per s */

/* Everything the model is made of; sim_model_defaults() fills it. */
typedef struct sim_model {
  unsigned nodes;               /* one FPGA per node */
  unsigned slots;               /* leases (containers) a node holds */
  uint64_t heartbeat_ns;        /* each node's heartbeat period */
  uint64_t reprogram_min_ns;    /* a reprogram lasts a seeded draw in */
  uint64_t reprogram_max_ns;    /*   [min, max] */
  uint64_t reprogram_bound_ns;  /* the NAM's sticky bound (dispatch.c) */
  unsigned inflight;            /* tasks a container keeps at its NAM */
  double pcie_gbps;             /* host -> board, GB/s */
  uint64_t block_bytes;         /* one task's input block */
  uint64_t kernel_ns[SIM_LABELS]; /* FPGA kernel time per block */
  unsigned iterations[SIM_LABELS]; /* passes over the input */
  unsigned delay_max_skips;     /* delay's parameter */
  double arrival_window;        /* apps arrive within this fraction of
                                   the work's fluid makespan; 0 = batch */
  unsigned apps;                /* apps per mix */
  uint64_t seed;
} sim_model;

void sim_model_defaults(sim_model *m);

/* One app of a mix. */
typedef struct sim_app_spec {
  int label;             /* SIM_LR or SIM_KM */
  unsigned size_gb;      /* input size */
  unsigned tasks;        /* blocks x iterations */
  uint64_t task_ns;      /* FPGA time of one task: PCIe + kernel */
  unsigned wanted;       /* containers it asks for */
  uint64_t arrival_ns;
} sim_app_spec;

/* One workload mix: apps sorted by arrival. */
typedef struct sim_mix {
  unsigned index;        /* 0 .. SIM_MIXES-1 */
  double lr_share;       /* share of LR apps: index / (SIM_MIXES - 1) */
  sim_app_spec *apps;
  size_t n_apps;
} sim_mix;

#define SIM_MIXES 7

/* Builds mix `index` (0: no LR app ... 6: only LR apps) for model m, the
 * same for every policy. Returns 0, or -1 when out of memory. */
int sim_mix_build(const sim_model *m, unsigned index, sim_mix *out);
void sim_mix_free(sim_mix *mix);

/* Total FPGA work of a mix's apps, ns. */
uint64_t sim_mix_work_ns(const sim_mix *mix);

/* What one run measured. */
typedef struct sim_result {
  uint64_t makespan_ns;  /* first arrival (0) to the last app's end */
  uint64_t busy_ns;      /* FPGA time computing tasks, all nodes */
  uint64_t reprogram_ns; /* FPGA time reprogramming, all nodes */
  unsigned reprograms;
  unsigned finished;     /* apps that ended (all of them, normally) */
  double mean_wait_s;    /* arrival to first lease, mean over apps */
} sim_result;

/* Runs policy kind on mix; static gets rules that split the nodes evenly
 * between the two labels (Blaze's fixed partition). Returns 0, or -1 when
 * out of memory or when the apps did not all end within the run's time
 * limit (the result then holds what was measured). */
int sim_run(const sim_model *m, gam_policy_kind kind, const sim_mix *mix,
            sim_result *out);

/* The offline optimum's makespan for mix (a lower bound on any policy's
 * makespan; sim_optimum.c says how and why). */
uint64_t sim_optimum_ns(const sim_model *m, const sim_mix *mix);

#endif
