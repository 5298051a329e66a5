/*
 * sim_main.c - ember-gam-sim: the GAM's scheduling policies on Blaze's
 * section 6.6 experiment, on a virtual clock. Reads the options, runs
 * every policy on every mix, prints the table and writes the CSV and plot.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "sim_report.h"

static void usage(FILE *out, const sim_model *d) {
  fprintf(out,
"usage: ember-gam-sim [options]\n"
"\n"
"Runs the GAM's scheduling policies (gam/policy.c: delay, naive, static) on\n"
"Blaze's multi-job experiment (section 6.6) on a virtual clock, and prints,\n"
"for 7 mixes of LR-like and KM-like apps (LR share 0, 1/6, ..., 1), each\n"
"policy's system throughput over the offline optimum and its accelerator\n"
"utilization.\n"
"\n"
"Options:\n"
"  --policy NAME          run only this policy (delay, naive, static)\n"
"  --seed N               workload and reprogram draws (default %llu)\n"
"  --nodes N              nodes, one FPGA each (default %u)\n"
"  --slots N              leases a node holds (default %u)\n"
"  --apps N               apps per mix (default %u)\n"
"  --reprogram-ms MIN:MAX a reprogram lasts a seeded draw in [MIN, MAX]\n"
"                         (default %llu:%llu; MIN alone for a fixed time)\n"
"  --heartbeat-ms N       each node's heartbeat period (default %llu)\n"
"  --delay-max-skips N    skipped opportunities until delay's threshold\n"
"                         reaches 0 (default %u)\n"
"  --reprogram-bound-ms N the NAM's sticky bound (default %llu)\n"
"  --inflight N           tasks a container keeps at its NAM (default %u)\n"
"  --arrival-window F     apps arrive at seeded times within F x the work's\n"
"                         fluid makespan; 0: all at once (default %.2f)\n"
"  --csv FILE             per mix and policy: makespans, ratios, reprograms\n"
"  --plot FILE.png        two panels like Blaze's Figure 11 (writes FILE.dat\n"
"                         and FILE.gp beside it and runs gnuplot)\n"
"  --help                 show this help\n"
"  --version              show the version\n"
"\n"
"Model. Each node heartbeats once per period, the nodes staggered; each\n"
"heartbeat is one scheduling opportunity, decided by gam_policy_offer() on\n"
"the pending apps in arrival order. An app asks for 1-4 containers (1, 2,\n"
"4, 8 GB of input), runs its tasks (256 MiB blocks x 10 passes; a task is\n"
"its PCIe transfer at 6 GB/s plus an LR 40 ms or KM 90 ms kernel) from one\n"
"pool, each container keeping `inflight` tasks at its node, and gives its\n"
"leases back when it ends. A node's FPGA runs one task at a time, by the\n"
"NAM's sticky rule: the loaded bitstream keeps it while it has tasks,\n"
"until the other label's oldest task has waited the sticky bound; loading\n"
"the other bitstream costs a reprogram. static splits the nodes evenly\n"
"between km and lr (Blaze's fixed partition).\n"
"\n"
"Measures. Throughput is the mix's FPGA work over its makespan, shown\n"
"divided by the optimum's (= optimum makespan / makespan). Utilization is\n"
"FPGA time computing over nodes x makespan (reprograms not counted).\n"
"\n"
"Optimum. The smallest makespan any schedule could reach knowing every app\n"
"up front, computed as a lower bound (so every ratio is <= 1): the largest\n"
"of (1) the best partition - over every count of nodes running LR only, KM\n"
"only or both, each node loading once per label it runs (at least the MIN\n"
"reprogram) and the work split freely: covers k LR nodes + the rest KM as\n"
"well as the all-shared cluster; (2) for each arrival time t, t plus the\n"
"work arriving from t on over all nodes; (3) for each app, its arrival plus\n"
"its tasks run `wanted` at a time. Whole apps are not packed (LPT): an\n"
"app's tasks spread over its nodes, so packing would not bound anything.\n",
          (unsigned long long)d->seed, d->nodes, d->slots, d->apps,
          (unsigned long long)(d->reprogram_min_ns / SIM_MS),
          (unsigned long long)(d->reprogram_max_ns / SIM_MS),
          (unsigned long long)(d->heartbeat_ns / SIM_MS), d->delay_max_skips,
          (unsigned long long)(d->reprogram_bound_ns / SIM_MS), d->inflight,
          d->arrival_window);
}

/* A whole number in [lo, hi]; -1 with a message otherwise. */
static int parse_u64(const char *opt, const char *s, uint64_t lo,
                     uint64_t hi, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s || *end || s[0] == '-' || v < lo || v > hi) {
    fprintf(stderr, "ember-gam-sim: --%s %s: want a whole number in "
                    "[%llu, %llu]\n",
            opt, s, (unsigned long long)lo, (unsigned long long)hi);
    return -1;
  }
  *out = v;
  return 0;
}

static int parse_uint(const char *opt, const char *s, unsigned lo,
                      unsigned hi, unsigned *out) {
  uint64_t v;
  if (parse_u64(opt, s, lo, hi, &v) < 0) return -1;
  *out = (unsigned)v;
  return 0;
}

static int parse_ms(const char *opt, const char *s, uint64_t lo, uint64_t *ns) {
  uint64_t v;
  if (parse_u64(opt, s, lo, 86400000ull, &v) < 0) return -1;
  *ns = v * SIM_MS;
  return 0;
}

static int parse_reprogram(const char *s, sim_model *m) {
  char min[32];
  const char *colon = strchr(s, ':');
  size_t len = colon ? (size_t)(colon - s) : strlen(s);
  if (len == 0 || len >= sizeof min) {
    fprintf(stderr, "ember-gam-sim: --reprogram-ms %s: want MIN:MAX\n", s);
    return -1;
  }
  memcpy(min, s, len);
  min[len] = '\0';
  if (parse_ms("reprogram-ms", min, 0, &m->reprogram_min_ns) < 0) return -1;
  m->reprogram_max_ns = m->reprogram_min_ns;
  if (colon && parse_ms("reprogram-ms", colon + 1, 0, &m->reprogram_max_ns) < 0)
    return -1;
  if (m->reprogram_max_ns < m->reprogram_min_ns) {
    fprintf(stderr, "ember-gam-sim: --reprogram-ms %s: MAX below MIN\n", s);
    return -1;
  }
  return 0;
}

static int parse_window(const char *s, double *out) {
  char *end;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || *end || !(v >= 0 && v <= 100)) {
    fprintf(stderr, "ember-gam-sim: --arrival-window %s: want 0 to 100\n", s);
    return -1;
  }
  *out = v;
  return 0;
}

int main(int argc, char **argv) {
  sim_model m, defaults;
  sim_model_defaults(&m);
  defaults = m;
  const char *csv = NULL, *plot = NULL;
  int only = -1;
  enum { O_SEED = 256, O_NODES, O_SLOTS, O_APPS, O_REPROGRAM, O_HEARTBEAT,
         O_SKIPS, O_BOUND, O_INFLIGHT, O_WINDOW, O_CSV, O_PLOT, O_POLICY,
         O_HELP, O_VERSION };
  static const struct option opts[] = {
      {"seed", required_argument, NULL, O_SEED},
      {"nodes", required_argument, NULL, O_NODES},
      {"slots", required_argument, NULL, O_SLOTS},
      {"apps", required_argument, NULL, O_APPS},
      {"reprogram-ms", required_argument, NULL, O_REPROGRAM},
      {"heartbeat-ms", required_argument, NULL, O_HEARTBEAT},
      {"delay-max-skips", required_argument, NULL, O_SKIPS},
      {"reprogram-bound-ms", required_argument, NULL, O_BOUND},
      {"inflight", required_argument, NULL, O_INFLIGHT},
      {"arrival-window", required_argument, NULL, O_WINDOW},
      {"csv", required_argument, NULL, O_CSV},
      {"plot", required_argument, NULL, O_PLOT},
      {"policy", required_argument, NULL, O_POLICY},
      {"help", no_argument, NULL, O_HELP},
      {"version", no_argument, NULL, O_VERSION},
      {NULL, 0, NULL, 0},
  };
  int o, bad = 0;
  while (!bad && (o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
    switch (o) {
      case O_SEED: bad = parse_u64("seed", optarg, 0, UINT64_MAX, &m.seed); break;
      case O_NODES: bad = parse_uint("nodes", optarg, 1, 1024, &m.nodes); break;
      case O_SLOTS: bad = parse_uint("slots", optarg, 1, 1024, &m.slots); break;
      case O_APPS: bad = parse_uint("apps", optarg, 1, 100000, &m.apps); break;
      case O_REPROGRAM: bad = parse_reprogram(optarg, &m); break;
      case O_HEARTBEAT:
        bad = parse_ms("heartbeat-ms", optarg, 1, &m.heartbeat_ns);
        break;
      case O_SKIPS:
        bad = parse_uint("delay-max-skips", optarg, 0, 1000000,
                         &m.delay_max_skips);
        break;
      case O_BOUND:
        bad = parse_ms("reprogram-bound-ms", optarg, 0, &m.reprogram_bound_ns);
        break;
      case O_INFLIGHT:
        bad = parse_uint("inflight", optarg, 1, 64, &m.inflight);
        break;
      case O_WINDOW: bad = parse_window(optarg, &m.arrival_window); break;
      case O_CSV: csv = optarg; break;
      case O_PLOT: plot = optarg; break;
      case O_POLICY: {
        gam_policy_kind k;
        if (gam_policy_parse(optarg, &k) < 0) {
          fprintf(stderr, "ember-gam-sim: --policy %s: want delay, naive or "
                          "static\n", optarg);
          bad = -1;
        } else {
          only = (int)k;
        }
        break;
      }
      case O_HELP: usage(stdout, &defaults); return 0;
      case O_VERSION: printf("ember-gam-sim %s\n", EMBER_VERSION); return 0;
      default: bad = -1; break;
    }
  }
  if (bad || optind < argc) {
    if (!bad) fprintf(stderr, "ember-gam-sim: unexpected '%s'\n", argv[optind]);
    fprintf(stderr, "try ember-gam-sim --help\n");
    return 2;
  }
  if (m.nodes < SIM_LABELS && (only < 0 || only == GAM_POLICY_STATIC)) {
    fprintf(stderr, "ember-gam-sim: static needs at least %d nodes (one per "
                    "label); use --policy to leave it out\n", SIM_LABELS);
    return 2;
  }

  sim_row rows[SIM_MIXES] = {0};
  int rc = 0;
  for (unsigned i = 0; i < SIM_MIXES && rc == 0; i++) {
    sim_mix mix;
    if (sim_mix_build(&m, i, &mix) < 0) {
      fprintf(stderr, "ember-gam-sim: out of memory\n");
      return 1;
    }
    rows[i].mix = i;
    rows[i].lr_share = mix.lr_share;
    rows[i].work_ns = sim_mix_work_ns(&mix);
    rows[i].optimum_ns = sim_optimum_ns(&m, &mix);
    for (int k = 0; k < SIM_POLICIES; k++) {
      if (only >= 0 && k != only) continue;
      if (sim_run(&m, (gam_policy_kind)k, &mix, &rows[i].res[k]) < 0) {
        fprintf(stderr, "ember-gam-sim: mix %u, %s: %u of %zu apps ended "
                        "(out of memory, or stuck)\n",
                i, gam_policy_name((gam_policy_kind)k),
                rows[i].res[k].finished, mix.n_apps);
        rc = 1;
        break;
      }
      rows[i].ran[k] = true;
    }
    sim_mix_free(&mix);
  }
  if (rc) return rc;
  sim_report_table(stdout, &m, rows, SIM_MIXES);
  if (csv && sim_report_csv(csv, &m, rows, SIM_MIXES) < 0) rc = 1;
  if (plot && sim_report_plot(plot, &m, rows, SIM_MIXES) < 0) rc = 1;
  return rc;
}
