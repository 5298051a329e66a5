/*
 * plf_budget.c - what a budget of ancestral partials buffers costs.
 *
 * A Yule-shaped unrooted tree of --taxa taxa (default 1000), DNA simulated
 * along it under GTR+G4 (random exchangeabilities and frequencies, gamma
 * alpha 0.5), and the tree with all of its 2(n-3) NNI neighbours scored
 * with BEAGLE (CPU, double) through plf_plan: once with every buffer the
 * planner wants (unbounded), then with 100% (n-1 vectors, what a full
 * traversal holds), 50%, 25%, 10% and the minimum, ceil(log2 n) + 2. Each
 * budget gets its own planner and its own BEAGLE instance with that many
 * partials buffers; the trees go to the planner in batches of --batch
 * (default: all in one), each batch run right after it is planned; the
 * best of --repeat runs (default 3) is kept. Printed per budget, relative
 * to 100% too: time (planning and BEAGLE; wall-clock, and the process's
 * CPU time, which other programs on the machine disturb less) and ops;
 * then vectors recomputed, hits, evictions, and the largest relative
 * difference of any tree's log-likelihood from the unbounded run, and the
 * planning time alone. Asserts nothing.
 *
 * --write DIR writes the data set as `ember lnl`'s input files instead
 * (plf_budget_files.h) and exits: tests/bench/lnl_budget.sh times ember
 * itself on them.
 *
 *   plf_budget [--taxa N] [--sites N] [--batch N] [--repeat N] [--seed N]
 *              [--write DIR]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plf_budget_files.h"
#include "plf_tree_harness.h"

/* gamma alpha = 0.5, four categories, mean rates (Yang 1994) */
static const double gamma4[4] = {0.033388, 0.251916, 0.820268, 2.894428};

typedef struct result {
  double seconds, cpu_seconds, plan_seconds;
  plf_plan_counts counts;
  double max_rel;
  int vectors;
} result;

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double now(void) { return clock_s(CLOCK_MONOTONIC); }

static int score_all(int n, int budget, plf_tree *const *trees, int count,
                     int batch, int patterns, const int *states,
                     const ph_model *m, double *loglik, result *res) {
  plf_planner *p;
  plf_plan plan;
  plf_plan_init(&plan);
  if (plf_planner_create(n, budget, 0, &p) != 0) return -1;
  int vectors = budget ? budget : n - 1;
  if (!budget) { /* how many an unbounded planner takes: plan it once */
    for (int i = 0; i < count; i += batch) {
      int k = count - i < batch ? count - i : batch;
      plf_plan_clear(&plan);
      if (plf_planner_add_trees(p, (const plf_tree *const *)trees + i,
                                (size_t)k, &plan) != 0)
        return -1;
    }
    vectors = plf_planner_vectors(p);
    plf_planner_destroy(p);
    if (plf_planner_create(n, budget, 0, &p) != 0) return -1;
  }
  ph_beagle b;
  if (ph_beagle_create(&b, n, patterns, states, m, vectors, 2 * n - 1) != 0) {
    fprintf(stderr, "plf_budget: cannot create a BEAGLE instance\n");
    return -1;
  }
  double t0 = now(), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), planning = 0;
  for (int i = 0; i < count; i += batch) {
    int k = count - i < batch ? count - i : batch;
    plf_plan_clear(&plan);
    double p0 = now();
    if (plf_planner_add_trees(p, (const plf_tree *const *)trees + i,
                              (size_t)k, &plan) != 0 ||
        (planning += now() - p0, ph_beagle_run(&b, &plan, loglik + i)) != 0) {
      fprintf(stderr, "plf_budget: planning or running failed\n");
      return -1;
    }
  }
  res->seconds = now() - t0;
  res->cpu_seconds = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
  res->plan_seconds = planning;
  plf_planner_counts(p, &res->counts);
  res->vectors = plf_planner_vectors(p);
  ph_beagle_destroy(&b);
  plf_plan_free(&plan);
  plf_planner_destroy(p);
  return 0;
}

static const char *arg_text(int argc, char **argv, const char *name) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0) return argv[i + 1];
  return NULL;
}

static long arg(int argc, char **argv, const char *name, long def) {
  const char *v = arg_text(argc, argv, name);
  return v ? strtol(v, NULL, 10) : def;
}

int main(int argc, char **argv) {
  int n = (int)arg(argc, argv, "--taxa", 1000);
  int patterns = (int)arg(argc, argv, "--sites", 1000);
  int batch = (int)arg(argc, argv, "--batch", 0);
  int repeat = (int)arg(argc, argv, "--repeat", 3);
  ph_rng r = {(uint64_t)arg(argc, argv, "--seed", 42)};
  if (n < 8 || patterns < 1 || batch < 0 || repeat < 1) {
    fprintf(stderr, "usage: plf_budget [--taxa N>=8] [--sites N] [--batch N] "
                    "[--repeat N] [--seed N] [--write DIR]\n");
    return 2;
  }
  plf_tree *t;
  ph_model m;
  int *states = malloc((size_t)n * (size_t)patterns * sizeof *states);
  if (!states || ph_random_tree(n, 1, 0.05, &r, &t) != 0 ||
      ph_model_gtr(&m, 4, gamma4, &r) != 0 ||
      ph_simulate(t, &m, patterns, &r, states) != 0) {
    fprintf(stderr, "plf_budget: setup failed\n");
    return 1;
  }
  int nni = plf_nni_count(t), count = nni + 1;
  if (batch == 0) batch = count;
  plf_tree **trees = malloc((size_t)count * sizeof *trees);
  double *ref = malloc((size_t)count * sizeof *ref);
  double *ll = malloc((size_t)count * sizeof *ll);
  if (!trees || !ref || !ll) return 1;
  trees[0] = t;
  for (int i = 0; i < nni; i++)
    if (plf_tree_create(n, &trees[i + 1]) != 0 ||
        plf_nni_neighbour(t, i, trees[i + 1]) != 0)
      return 1;
  const char *dir = arg_text(argc, argv, "--write");
  if (dir) {
    if (pb_budget_write_files(dir, n, patterns, states, trees, count, &m,
                              0.5) != 0) {
      perror("plf_budget: --write");
      return 1;
    }
    printf("plf_budget: %d taxa, %d sites, %d trees written to %s\n", n,
           patterns, count, dir);
    return 0;
  }

  int min = plf_plan_min_vectors(n);
  int budgets[6] = {PLF_PLAN_UNBOUNDED, n - 1, (n - 1) / 2, (n - 1) / 4,
                    (n - 1) / 10, min};
  const char *names[6] = {"unbounded", "100%", "50%", "25%", "10%", "min"};
  result res[6];
  printf("plf_budget: %d taxa, %d sites, GTR+G4, %d trees (the tree and its "
         "NNI neighbours), batches of %d, best of %d\n",
         n, patterns, count, batch, repeat);
  for (int k = 0; k < 6; k++) {
    if (budgets[k] && budgets[k] < min) budgets[k] = min;
    result best = {0};
    for (int rep = 0; rep < repeat; rep++) {
      result cur = {0};
      if (score_all(n, budgets[k], trees, count, batch, patterns, states, &m,
                    k == 0 ? ref : ll, &cur) != 0)
        return 1;
      if (rep == 0 || cur.seconds < best.seconds) best = cur;
    }
    best.max_rel = 0;
    for (int i = 0; k > 0 && i < count; i++) {
      double rel = fabs(ll[i] - ref[i]) / fabs(ref[i]);
      if (rel > best.max_rel) best.max_rel = rel;
    }
    res[k] = best;
  }
  printf("%-9s %7s %7s %6s %7s %6s %8s %6s %7s %7s %9s %7s\n", "budget",
         "vectors", "wall_s", "wall", "cpu_s", "cpu", "ops", "ops", "recomp",
         "hits", "evictions", "max_rel");
  const result *full = &res[1];
  for (int k = 0; k < 6; k++) {
    const result *x = &res[k];
    printf("%-9s %7d %7.3f %+5.1f%% %7.3f %+5.1f%% %8llu %+5.1f%% %7llu %7llu "
           "%9llu %7.1e\n",
           names[k], x->vectors, x->seconds,
           100.0 * (x->seconds / full->seconds - 1.0), x->cpu_seconds,
           100.0 * (x->cpu_seconds / full->cpu_seconds - 1.0),
           (unsigned long long)x->counts.ops,
           100.0 * ((double)x->counts.ops / (double)full->counts.ops - 1.0),
           (unsigned long long)x->counts.recomputed,
           (unsigned long long)x->counts.hits,
           (unsigned long long)x->counts.evictions, x->max_rel);
  }
  printf("planning time (s): ");
  for (int k = 0; k < 6; k++) printf("%s %.3f  ", names[k], res[k].plan_seconds);
  printf("\n");
  for (int i = 0; i < count; i++) plf_tree_destroy(trees[i]);
  free(trees);
  free(ref);
  free(ll);
  free(states);
  return 0;
}
