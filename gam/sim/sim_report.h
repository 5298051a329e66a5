/*
 * sim_report.h - what the simulator prints: the table (stdout), a CSV, and
 * a two-panel PNG through gnuplot (Blaze's Figure 11: throughput over the
 * optimum, accelerator utilization, per mix and policy).
 */
#ifndef EMBER_GAM_SIM_REPORT_H
#define EMBER_GAM_SIM_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "sim.h"

#define SIM_POLICIES 3 /* gam_policy_kind values 0 .. 2 */

/* One mix: its optimum, and each policy's run (ran[k]: kind k was run). */
typedef struct sim_row {
  unsigned mix;
  double lr_share;
  uint64_t work_ns;
  uint64_t optimum_ns;
  bool ran[SIM_POLICIES];
  sim_result res[SIM_POLICIES];
} sim_row;

/* makespan optimum / makespan: throughput normalised to the optimum. */
double sim_row_throughput(const sim_row *r, int kind);
/* computing time / (nodes x makespan). */
double sim_row_utilization(const sim_row *r, const sim_model *m, int kind);

void sim_report_table(FILE *out, const sim_model *m, const sim_row *rows,
                      size_t n);
/* Returns 0, or -1 with the reason on stderr. */
int sim_report_csv(const char *path, const sim_model *m, const sim_row *rows,
                   size_t n);
/* Writes PATH's data (.dat) and script (.gp) beside it and runs gnuplot.
 * Returns 0, or -1 with the reason on stderr. */
int sim_report_plot(const char *png, const sim_model *m, const sim_row *rows,
                    size_t n);

#endif
