/*
 * sim_optimum.c - the offline optimum a mix is measured against: the
 * shortest makespan any schedule could reach knowing every app up front.
 * It is computed as a lower bound on the makespan, so throughput / optimum
 * is at most 1 for every policy and a policy's distance from 1 is at least
 * what it really loses.
 *
 * Apps are malleable here (their tasks spread over their containers), so
 * packing whole apps onto nodes (LPT) would not bound anything. Instead,
 * the largest of three bounds, each true of every schedule:
 *
 *  1. Partition. Every schedule gives each node the set of labels it ever
 *     runs: LR only, KM only, both, or none. A node starts with no
 *     bitstream, so it loads once per label it runs, each load lasting at
 *     least reprogram_min. With a nodes on LR only, b on KM only and s on
 *     both, a makespan M needs
 *        W_lr <= a (M - r) + s (M - 2r)
 *        W_km <= b (M - r) + s (M - 2r)
 *        W_lr + W_km <= (a + b)(M - r) + s (M - 2r)
 *     (W: a label's total task time; r = reprogram_min; work split freely
 *     within a node and between nodes). The bound is the smallest M over
 *     every (a, b, s) with a + b + s <= nodes: it covers k nodes for LR and
 *     the rest for KM (static's split among them), the all-shared cluster,
 *     and everything between.
 *  2. Arrivals. The apps that arrive at or after t can only run after t,
 *     on at most `nodes` FPGAs: M >= t + (their work) / nodes, for every
 *     arrival time t.
 *  3. One app. An app holds at most `wanted` leases, on distinct nodes, and
 *     an FPGA runs one task at a time: M >= arrival + ceil(tasks / wanted)
 *     x task time, plus reprogram_min for an app that arrives at 0 (no
 *     FPGA is loaded then).
 *
 * What it leaves out - heartbeat latency before the first lease, reprograms
 * longer than the minimum, tasks that do not split evenly between nodes -
 * costs every policy alike.
 */
#include "sim.h"

/* Smallest M with (W + loads) / nodes_serving <= M, i.e. W <= n M - loads. */
static double need(double work, double loads, unsigned serving) {
  if (work <= 0) return 0;
  if (serving == 0) return -1; /* this label has nowhere to run */
  return (work + loads) / serving;
}

static double partition_bound(const sim_model *m, const sim_mix *mix) {
  double w[SIM_LABELS] = {0};
  for (size_t i = 0; i < mix->n_apps; i++)
    w[mix->apps[i].label] +=
        (double)mix->apps[i].tasks * (double)mix->apps[i].task_ns;
  double r = (double)m->reprogram_min_ns;
  double best = -1;
  for (unsigned a = 0; a <= m->nodes; a++)
    for (unsigned b = 0; a + b <= m->nodes; b++)
      for (unsigned s = 0; a + b + s <= m->nodes; s++) {
        double lr = need(w[SIM_LR], a * r + 2 * s * r, a + s);
        double km = need(w[SIM_KM], b * r + 2 * s * r, b + s);
        double all = need(w[SIM_LR] + w[SIM_KM], (a + b) * r + 2 * s * r,
                          a + b + s);
        if (lr < 0 || km < 0 || all < 0) continue;
        double M = lr > km ? lr : km;
        if (all > M) M = all;
        if (best < 0 || M < best) best = M;
      }
  return best < 0 ? 0 : best;
}

static double arrival_bound(const sim_model *m, const sim_mix *mix) {
  double best = 0, after = 0;
  for (size_t i = mix->n_apps; i-- > 0;) { /* latest arrivals first */
    const sim_app_spec *a = &mix->apps[i];
    after += (double)a->tasks * (double)a->task_ns;
    double M = (double)a->arrival_ns + after / m->nodes;
    if (M > best) best = M;
  }
  return best;
}

static double app_bound(const sim_model *m, const sim_mix *mix) {
  double best = 0;
  for (size_t i = 0; i < mix->n_apps; i++) {
    const sim_app_spec *a = &mix->apps[i];
    unsigned w = a->wanted ? a->wanted : 1;
    double rounds = (double)((a->tasks + w - 1) / w);
    double M = (double)a->arrival_ns + rounds * (double)a->task_ns;
    if (a->arrival_ns == 0) M += (double)m->reprogram_min_ns;
    if (M > best) best = M;
  }
  return best;
}

uint64_t sim_optimum_ns(const sim_model *m, const sim_mix *mix) {
  double M = partition_bound(m, mix);
  double b = arrival_bound(m, mix);
  if (b > M) M = b;
  b = app_bound(m, mix);
  if (b > M) M = b;
  return (uint64_t)M;
}
