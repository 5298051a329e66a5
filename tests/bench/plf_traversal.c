/*
 * plf_traversal.c - part (2) of plf_vs_beagle: full traversals, the same
 * ops on BEAGLE and on ember's plf executor.
 *
 * A data set (plf_traversal_data.h: (2a) simulated, 1,024 taxa x 100,000
 * patterns by default; (2b) a real alignment and its tree) is planned once
 * by plf_plan with a budget of partials buffers (default the planner's
 * minimum, ceil(log2 n) + 2: 12 buffers of C x P x S values for 1,024
 * taxa, instead of n - 1), which gives one op sequence: the 2n - 3 matrix
 * updates from the eigen system (every category), every internal node's
 * partials update in post-order with rescaling, each followed by the
 * accumulation of its children's cumulative scale factors into its own,
 * and the root log-likelihood with the root's cumulative factors. Tips are
 * compact states on both sides.
 *
 * BEAGLE runs the plan through tests/unit's plf_tree_harness
 * (beagleUpdateTransitionMatrices, beagleUpdatePartials in runs,
 * beagleAccumulateScaleFactors, beagleCalculateRootLogLikelihoods; CPU,
 * SSE preferred, log scalers, manual scaling). ember runs it as the plf
 * accelerator's cpu platform does: the plan as a task's ops
 * (plf_plan_ops.h), checked by plf_task_prepare once, then plf_exec_run on
 * a state block in this process (the default kernel variant). Setting the
 * tips and the model is not timed on either side.
 *
 * Rows per precision (double; single when asked: BEAGLE's
 * CPU-4State-Single, ember's float kernels) and thread count (1; 2 when
 * asked: BEAGLE_FLAG_THREADING_CPP with beagleSetCPUThreadCount, ember's
 * Params.threads; whether BEAGLE's instance took the flag is printed).
 * Figures: the best of --reps traversals (20 times as many for a data set
 * under 10^7 taxa x patterns) after a warm-up, BEAGLE and ember
 * interleaved; the CPU time of the best and its ratio to the wall-clock
 * time (about 1 when only one thread worked: Debian's BEAGLE 3.1.2 takes
 * BEAGLE_FLAG_THREADING_CPP and beagleSetCPUThreadCount(2) without an
 * error, yet on the 2-core machine measured its updates ran on one
 * thread); ember's speedup over BEAGLE; the bytes one traversal moves,
 * estimated per pattern from the plan (each op: children read, 4 B for a
 * tip's state, C x S reals for partials; C x S reals and 1 scale written;
 * an accumulation reads its k scales and the op's and writes it, k + 2
 * reals; the root: its partials, its scale and the pattern weights), as
 * GB/s and % of the triad; and
 * |lnL_ember - lnL_BEAGLE| / |lnL_BEAGLE|.
 *
 * ember's state block has room for a partials buffer per tip too (plf
 * layout), 13 GB for 1,024 x 100,000 x 4 categories in double: it is
 * mapped lazily here and the compact tips never touch theirs.
 */
#include <libhmsbeagle/beagle.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ember/ember_errors.h"
#include "plf_bench_common.h"
#include "plf_exec.h"
#include "plf_plan_ops.h"
#include "plf_task.h"
#include "plf_traversal_data.h"

/* ---- ember's side ---------------------------------------------------------- */

typedef struct ember_side {
  plf_task *traversal;
  uint8_t *state;
  size_t state_bytes;
} ember_side;

static void instance_of(const pb_tdata *d, int vectors, int single,
                        Ember__Plf__Instance *in) {
  ember__plf__instance__init(in);
  in->states = 4;
  in->patterns = (uint32_t)d->patterns;
  in->has_categories = 1;
  in->categories = (uint32_t)d->model.cats;
  in->tips = (uint32_t)d->taxa;
  in->partials = (uint32_t)(d->taxa + vectors);
  in->has_compact = 1;
  in->compact = (uint32_t)d->taxa;
  in->matrices = 2 * (uint32_t)d->taxa - 1;
  in->has_scale_buffers = 1;
  in->scale_buffers = (uint32_t)vectors;
  in->has_precision = 1;
  in->precision = single ? EMBER__PLF__PRECISION__SINGLE
                         : EMBER__PLF__PRECISION__DOUBLE;
}

/* ops as a packed Params, checked by plf_task_prepare into *out */
static int prepare(Ember__Plf__Instance *in, Ember__Plf__Op **ops, size_t n,
                   int threads, const acc_block *inputs, size_t n_inputs,
                   plf_task **out) {
  Ember__Plf__Params p = EMBER__PLF__PARAMS__INIT;
  p.instance = in;
  p.n_ops = n;
  p.ops = ops;
  if (threads > 1) {
    p.has_threads = 1;
    p.threads = (uint32_t)threads;
  }
  size_t len = ember__plf__params__get_packed_size(&p);
  uint8_t *buf = pb_xmalloc(len);
  ember__plf__params__pack(&p, buf);
  char err[256] = "";
  int rc = plf_task_prepare(buf, len, inputs, n_inputs, out, err, sizeof err);
  free(buf);
  if (rc) fprintf(stderr, "plf_task_prepare: %s: %s\n", ember_strerror(rc),
                  err);
  return rc;
}

static void ember_destroy(ember_side *e) {
  plf_task_free(e->traversal);
  if (e->state) munmap(e->state, e->state_bytes);
  memset(e, 0, sizeof *e);
}

/* The instance's state block, set up (tips from an input block, the eigen
 * system, frequencies, category weights and rates, pattern weights), and
 * the plan's task. Returns 0, or an error after a message. */
static int ember_create(const pb_tdata *d, const plf_plan *plan, int vectors,
                        int single, int threads, ember_side *e) {
  memset(e, 0, sizeof *e);
  Ember__Plf__Instance in;
  instance_of(d, vectors, single, &in);
  size_t n = (size_t)d->taxa + 5, k = 0, P = (size_t)d->patterns;
  Ember__Plf__Op *ops = pb_xmalloc(n * sizeof *ops);
  Ember__Plf__Op **list = pb_xmalloc(n * sizeof *list);
  Ember__Plf__SetTipStates *ts = pb_xmalloc((size_t)d->taxa * sizeof *ts);
  Ember__Plf__InputSlice *from = pb_xmalloc((size_t)d->taxa * sizeof *from);
  for (int i = 0; i < d->taxa; i++, k++) {
    ember__plf__input_slice__init(&from[i]);
    from[i].input = 0;
    from[i].offset = (uint64_t)i * P * sizeof(int32_t);
    ember__plf__set_tip_states__init(&ts[i]);
    ts[i].tip = (uint32_t)i;
    ts[i].from = &from[i];
    ember__plf__op__init(&ops[k]);
    ops[k].op_case = EMBER__PLF__OP__OP_TIP_STATES;
    ops[k].tip_states = &ts[i];
  }
  const ph_model *m = &d->model;
  Ember__Plf__SetEigen eig = EMBER__PLF__SET_EIGEN__INIT;
  eig.n_vectors = eig.n_inverse = 16;
  eig.vectors = (double *)m->evec;
  eig.inverse = (double *)m->ivec;
  eig.n_values = 4;
  eig.values = (double *)m->eval;
  ember__plf__op__init(&ops[k]);
  ops[k].op_case = EMBER__PLF__OP__OP_EIGEN;
  ops[k++].eigen = &eig;
  Ember__Plf__SetVector vec[4];
  const struct {
    Ember__Plf__SetVector__Kind kind;
    const double *values;
    size_t n;
  } sets[4] = {
      {EMBER__PLF__SET_VECTOR__KIND__FREQUENCIES, m->freqs, 4},
      {EMBER__PLF__SET_VECTOR__KIND__CATEGORY_WEIGHTS, m->weights,
       (size_t)m->cats},
      {EMBER__PLF__SET_VECTOR__KIND__CATEGORY_RATES, m->rates,
       (size_t)m->cats},
      {EMBER__PLF__SET_VECTOR__KIND__PATTERN_WEIGHTS, d->weights, P}};
  for (int v = 0; v < 4; v++, k++) {
    ember__plf__set_vector__init(&vec[v]);
    vec[v].kind = sets[v].kind;
    vec[v].has_index = 1;
    vec[v].n_values = sets[v].n;
    vec[v].values = (double *)sets[v].values;
    ember__plf__op__init(&ops[k]);
    ops[k].op_case = EMBER__PLF__OP__OP_VECTOR;
    ops[k].vector = &vec[v];
  }
  for (size_t i = 0; i < k; i++) list[i] = &ops[i];
  acc_block input = {(const uint8_t *)d->states,
                     (size_t)d->taxa * P * sizeof(int32_t)};
  plf_task *setup = NULL;
  int rc = prepare(&in, list, k, threads, &input, 1, &setup);
  free(ops), free(list), free(ts), free(from);
  if (rc) return rc;
  /* zeroed and lazily committed: the tips' partials are never touched */
  e->state_bytes = (size_t)setup->layout.total;
  e->state = mmap(NULL, e->state_bytes, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (e->state == MAP_FAILED) {
    e->state = NULL;
    fprintf(stderr, "cannot map an ember state block of %zu bytes\n",
            e->state_bytes);
    plf_task_free(setup);
    return EMBER_ENOMEM;
  }
  char err[256] = "";
  plf_answers ans = {0};
  rc = plf_exec_run(setup, e->state, &input, NULL, NULL, &ans, err,
                    sizeof err);
  plf_task_free(setup);
  plf_plan_ops po;
  if (!rc && (rc = plf_plan_ops_build(plan, 0, &po)) == 0) {
    rc = prepare(&in, po.list, po.n, threads, NULL, 0, &e->traversal);
    plf_plan_ops_free(&po);
  }
  if (rc) {
    fprintf(stderr, "ember setup: %s %s\n", ember_strerror(rc), err);
    ember_destroy(e);
  }
  return rc;
}

static int ember_traverse(ember_side *e, double *lnl) {
  char err[256] = "";
  plf_answers ans = {.lnl = lnl};
  int rc = plf_exec_run(e->traversal, e->state, NULL, NULL, NULL, &ans, err,
                        sizeof err);
  if (rc) fprintf(stderr, "ember: %s %s\n", ember_strerror(rc), err);
  return rc;
}

/* ---- one data set ------------------------------------------------------ */

/* Bytes one traversal moves (the header's estimate). */
static double traversal_bytes(const plf_plan *plan, int tips, int P, int C,
                              double real) {
  double part = (double)C * 4 * real, per = 0;
  for (size_t i = 0; i < plan->op_count; i++) {
    const plf_op *o = &plan->ops[i];
    per += part + real;
    per += o->child1 < tips ? 4 : part;
    per += o->child2 < tips ? 4 : part;
    int k = (o->child1_scale != PLF_NONE) + (o->child2_scale != PLF_NONE);
    if (o->dest_scale_write != PLF_NONE && k) per += (k + 2) * real;
  }
  per += part + 2 * real;
  return per * P + (double)plan->matrix_count * C * 16 * real;
}

typedef struct timing {
  double wall, cpu, lnl;
} timing;

static void keep_best(timing *best, double wall, double cpu, double lnl) {
  if (wall < best->wall) *best = (timing){wall, cpu, lnl};
}

static void print_row(const char *prec, int threads, const char *impl,
                      const timing *t, const timing *beagle, double bytes,
                      double triad) {
  double gbs = bytes / t->wall / 1e9;
  printf("  %-6s %3d  %-30s %9.3f %9.3f %5.2f %7.2fx %8.2f %6.1f%%  %.1e\n",
         prec, threads, impl, t->wall * 1e3, t->cpu * 1e3, t->cpu / t->wall,
         beagle->wall / t->wall, gbs,
         100 * gbs / triad, fabs(t->lnl - beagle->lnl) / fabs(beagle->lnl));
}

static int bench_data(const pb_tdata *d, const pb_traversal_opts *o,
                      double triad) {
  int n = d->taxa, min = plf_plan_min_vectors(n);
  int budget = o->vectors > min ? o->vectors : min;
  plf_planner *p = NULL;
  plf_plan plan;
  plf_plan_init(&plan);
  if (plf_planner_create(n, budget, 0, &p) != 0 ||
      plf_planner_add_tree(p, d->tree, &plan) != 0) {
    fprintf(stderr, "plf_vs_beagle: cannot plan %s\n", d->name);
    plf_planner_destroy(p);
    return 1;
  }
  int vectors = plf_planner_vectors(p);
  /* small data sets: more repetitions, for a steadier best */
  int reps = (double)n * d->patterns < 1e7 ? 20 * o->reps : o->reps;
  double part_mb = (double)d->model.cats * d->patterns * 4 * 8 / 1e6;
  printf("%s: %d taxa, %d sites, %d patterns, GTR+G%d; %zu matrix updates, "
         "%zu partials ops, %d partials buffers (budget %d): %.1f MB "
         "each in double\n",
         d->name, n, d->sites, d->patterns, d->model.cats, plan.matrix_count,
         plan.op_count, vectors, budget, part_mb);
  printf("  best of %d\n", reps);
  if (d->ambiguous)
    printf("  %d partial ambiguity codes read as missing data (tips as "
           "compact states on both sides)\n", d->ambiguous);
  printf("  %-6s %3s  %-30s %9s %9s %5s %8s %8s %7s  %s\n", "prec", "thr",
         "implementation", "wall ms", "cpu ms", "cpu/w", "speedup", "GB/s",
         "%triad",
         "lnL rel. to BEAGLE");
  int rc = 0;
  for (int single = 0; single <= o->single && !rc; single++)
    for (int threads = 1; threads <= o->max_threads && !rc; threads++) {
      const char *prec = single ? "single" : "double";
      ph_beagle b;
      ph_beagle_opts bo = {single, threads, d->weights};
      if (ph_beagle_create_opts(&b, n, d->patterns, d->states, &d->model,
                                vectors, 2 * n - 1, &bo) != 0) {
        fprintf(stderr, "plf_vs_beagle: no BEAGLE instance (%s, %d "
                "threads)\n", prec, threads);
        rc = 1;
        break;
      }
      ember_side e;
      if (ember_create(d, &plan, vectors, single, threads, &e) != 0) {
        ph_beagle_destroy(&b);
        rc = 1;
        break;
      }
      timing tb = {1e30, 0, 0}, te = {1e30, 0, 0};
      for (int rep = 0; rep <= reps && !rc; rep++) {
        double lnl = 0, w = pb_now(), c = pb_cpu_now();
        if (ph_beagle_run(&b, &plan, &lnl) != 0) {
          fprintf(stderr, "plf_vs_beagle: BEAGLE failed\n");
          rc = 1;
          break;
        }
        if (rep) keep_best(&tb, pb_now() - w, pb_cpu_now() - c, lnl);
        w = pb_now();
        c = pb_cpu_now();
        if (ember_traverse(&e, &lnl) != 0) {
          rc = 1;
          break;
        }
        if (rep) keep_best(&te, pb_now() - w, pb_cpu_now() - c, lnl);
      }
      if (!rc) {
        double bytes = traversal_bytes(&plan, n, d->patterns, d->model.cats,
                                       single ? 4.0 : 8.0);
        char name[96];
        int honoured = threads == 1 || (b.flags & BEAGLE_FLAG_THREADING_CPP);
        snprintf(name, sizeof name, "BEAGLE %s%s", b.impl,
                 honoured ? "" : " (no threads)");
        print_row(prec, threads, name, &tb, &tb, bytes, triad);
        snprintf(name, sizeof name, "ember %s",
                 plf_isa_name(plf_kernels_isa(NULL)));
        print_row(prec, threads, name, &te, &tb, bytes, triad);
        if (single == 0 && threads == 1) {
          printf("  (%.0f MB moved per traversal, estimated", bytes / 1e6);
          if (d->reference_lnl != 0)
            printf("; BEAGLE lnL %.6f, tests/data/plf's reference %.6f",
                   tb.lnl, d->reference_lnl);
          printf(")\n");
        }
      }
      ember_destroy(&e);
      ph_beagle_destroy(&b);
    }
  printf("\n");
  plf_plan_free(&plan);
  plf_planner_destroy(p);
  return rc;
}

int pb_traversal_bench(const pb_traversal_opts *o, double triad) {
  printf("(2) full traversals, BEAGLE %s against ember's plf executor\n",
         beagleGetVersion());
  int rc = 0;
  pb_tdata d;
  if (o->simulated) {
    if (pb_tdata_simulate(o->taxa, o->patterns, o->seed, &d) != 0) return 1;
    rc = bench_data(&d, o, triad);
    pb_tdata_free(&d);
  }
  if (!rc && o->real) {
    if (pb_tdata_read(o->alignment, o->tree, o->model, o->reference, &d) != 0)
      return 1;
    rc = bench_data(&d, o, triad);
    pb_tdata_free(&d);
  }
  return rc;
}
