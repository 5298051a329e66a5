/* lnl_run.c - ember_lnl's instance, tasks and planner (lnl_run.h). */
#include "lnl_run.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelerators/plf/plf.pb-c.h"
#include "plf/plf_layout.h"
#include "plf/plf_plan.h"
#include "plf/plf_plan_ops.h"

/* Work per task: about this many partials ops, at most this many trees;
 * site log-likelihoods in one result at most this many bytes. */
#define BATCH_OPS 65536
#define BATCH_TREES 1024
#define BATCH_SITE_BYTES (16u << 20)

struct lnl_run {
  ember_client *client;
  lnl_setup s;
  int vectors;
  ember_block *tips;                /* the input block (cached) */
  ember_block *state;               /* the instance */
  uint32_t *tip_buffer;             /* taxon -> tip buffer (tip_order) */
  plf_planner *planner;
  plf_plan plan;
  Ember__Plf__Instance instance;
  lnl_stats stats;
};

/* Taxa with compact states, the states-only tips. */
static uint32_t states_only(const lnl_setup *s) {
  uint32_t k = 0;
  for (int i = 0; i < s->taxa; i++) k += !s->tip_partials[i];
  return k;
}

/* The tip buffer of each taxon: those with compact states first (0..K-1),
 * those with partials after them, each group in taxon order. */
static void tip_order(const lnl_setup *s, uint32_t *tip_buffer) {
  uint32_t states = 0, partials = states_only(s);
  for (int i = 0; i < s->taxa; i++)
    tip_buffer[i] = s->tip_partials[i] ? partials++ : states++;
}

static void shape_of(const lnl_setup *s, int vectors, plf_shape *d) {
  memset(d, 0, sizeof *d);
  d->states = (uint32_t)s->states;
  d->patterns = (uint32_t)s->patterns;
  d->categories = (uint32_t)s->categories;
  d->tips = (uint32_t)s->taxa;
  d->compact = states_only(s);
  d->states_only = d->compact;
  d->partials = (uint32_t)s->taxa + (uint32_t)vectors;
  d->eigens = 1;
  d->matrices = 2 * (uint32_t)s->taxa - 1;
  d->scale_buffers = (uint32_t)vectors;
  d->rate_sets = 1;
  d->partitions = 1;
  d->single = s->single;
}

int ember__lnl_min_vectors(int taxa) { return plf_plan_min_vectors(taxa); }

uint64_t ember__lnl_partials_bytes(const lnl_setup *s) {
  return (uint64_t)s->categories * (uint64_t)s->patterns *
         (uint64_t)s->states * (s->single ? sizeof(float) : sizeof(double));
}

uint64_t ember__lnl_state_bytes(const lnl_setup *s, int vectors, char *err,
                                size_t err_len) {
  plf_shape d;
  plf_layout l;
  shape_of(s, vectors, &d);
  if (plf_layout_compute(&d, &l, err, err_len) != 0) return 0;
  return l.total;
}

/* Plan trees in batches of batch with max_vectors slots, dry (nothing
 * runs); *recomputed gets the ops that rebuilt an evicted vector, *vectors
 * the slots used. Returns 0 or an error. */
static int dry_run(plf_tree *const *trees, size_t n, int taxa, size_t batch,
                   int max_vectors, uint64_t *recomputed, int *vectors) {
  plf_planner *p = NULL;
  int rc = plf_planner_create(taxa, max_vectors, 0, &p);
  if (rc) return rc;
  plf_plan plan;
  plf_plan_init(&plan);
  for (size_t i = 0; i < n && rc == 0; i += batch) {
    size_t k = n - i < batch ? n - i : batch;
    plf_plan_clear(&plan);
    rc = plf_planner_add_trees(p, (const plf_tree *const *)trees + i, k,
                               &plan);
  }
  plf_plan_counts c;
  plf_planner_counts(p, &c);
  *recomputed = c.recomputed;
  *vectors = plf_planner_vectors(p);
  plf_plan_free(&plan);
  plf_planner_destroy(p);
  return rc;
}

int ember__lnl_vectors_needed(plf_tree *const *trees, size_t n, int taxa,
                              size_t batch, int cap) {
  /* a sample of the file bounds the search's cost */
  size_t sample = ((size_t)1 << 21) / (size_t)taxa;
  if (sample < batch) sample = batch;
  if (n > sample) n = sample;
  uint64_t recomputed;
  int need, used;
  /* unbounded: every vector kept, the most that could help */
  if (dry_run(trees, n, taxa, batch, PLF_PLAN_UNBOUNDED, &recomputed, &need))
    return -1;
  int lo = plf_plan_min_vectors(taxa), hi = need < cap ? need : cap;
  if (hi <= lo) return lo;
  if (dry_run(trees, n, taxa, batch, hi, &recomputed, &used)) return -1;
  if (recomputed) return hi; /* memory, not recomputation, bounds it */
  /* the fewest slots that recompute nothing (hi always does) */
  if (dry_run(trees, n, taxa, batch, lo, &recomputed, &used)) return -1;
  if (!recomputed) return lo;
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    if (dry_run(trees, n, taxa, batch, mid, &recomputed, &used)) return -1;
    if (recomputed) lo = mid;
    else hi = mid;
  }
  return hi;
}

size_t ember__lnl_run_batch_size(const lnl_setup *s, int site_lnl) {
  size_t per_tree = (size_t)s->taxa; /* partials ops of a tree, at most */
  size_t n = BATCH_OPS / per_tree;
  if (n > BATCH_TREES) n = BATCH_TREES;
  if (site_lnl) {
    size_t by_bytes = BATCH_SITE_BYTES / ((size_t)s->patterns * 8);
    if (n > by_bytes) n = by_bytes;
  }
  return n ? n : 1;
}

/* ---- messages ---------------------------------------------------------- */

static void set_error(char *err, size_t err_len, const char *what, int rc,
                      const char *detail) {
  snprintf(err, err_len, "%s: %s%s%s", what, ember_strerror(rc),
           detail && detail[0] ? ": " : "", detail ? detail : "");
}

static size_t pack(const lnl_run *r, Ember__Plf__Op **ops, size_t n_ops,
                   uint8_t **out) {
  Ember__Plf__Params p = EMBER__PLF__PARAMS__INIT;
  p.instance = (Ember__Plf__Instance *)&r->instance;
  p.n_ops = n_ops;
  p.ops = ops;
  if (r->s.threads) {
    p.has_threads = 1;
    p.threads = r->s.threads;
  }
  size_t len = ember__plf__params__get_packed_size(&p);
  *out = malloc(len ? len : 1);
  if (!*out) return 0;
  return ember__plf__params__pack(&p, *out);
}

static void count_platform(lnl_run *r, const ember_task *t) {
  const ember_task_info *info = ember_task_get_info(t);
  const char *kind = info && info->platform_kind ? info->platform_kind : "";
  if (strcmp(kind, "cpu") == 0) r->stats.tasks_cpu++;
  else if (strcmp(kind, "opencl") == 0) r->stats.tasks_opencl++;
  else if (strcmp(kind, "fpga-emu") == 0) r->stats.tasks_fpga_emu++;
  else r->stats.tasks_other++;
  if (info) r->stats.exec_ns += info->exec_ns;
}

/* Run one task on the state block; *result gets the unpacked Result.
 * Returns 0 or the task's error (reason in err). */
static int run_task(lnl_run *r, const uint8_t *params, size_t len,
                    int with_tips, Ember__Plf__Result **result, char *err,
                    size_t err_len) {
  ember_submit_options o = {.size = sizeof o, .platform = r->s.platform,
                            .states = &r->state, .n_states = 1};
  ember_task *t = NULL;
  int rc = ember_submit(r->client, "plf", params, len,
                        with_tips ? &r->tips : NULL, with_tips ? 1 : 0, &o,
                        &t);
  if (rc) {
    set_error(err, err_len, "cannot submit a task", rc, ember_last_error());
    r->stats.tasks_failed++;
    return rc;
  }
  ember_task_wait(t, -1);
  rc = ember_task_status(t);
  if (rc) {
    set_error(err, err_len, "a plf task failed", rc, ember_task_message(t));
    r->stats.tasks_failed++;
    ember_task_free(t);
    return rc;
  }
  size_t size = 0;
  const void *data = ember_task_output(t, &size);
  *result = ember__plf__result__unpack(NULL, size, data);
  if (!*result) {
    snprintf(err, err_len, "a plf task's result cannot be read");
    r->stats.tasks_failed++;
    ember_task_free(t);
    return EMBER_EFORMAT;
  }
  r->stats.tasks++;
  count_platform(r, t);
  ember_task_free(t);
  return 0;
}

/* The setup task: tips from the input block, the model, pattern weights. */
static int run_setup(lnl_run *r, char *err, size_t err_len) {
  const lnl_setup *s = &r->s;
  size_t n = (size_t)s->taxa + 5;
  Ember__Plf__Op *ops = calloc(n, sizeof *ops);
  Ember__Plf__Op **list = calloc(n, sizeof *list);
  Ember__Plf__SetTipStates *ts = calloc((size_t)s->taxa, sizeof *ts);
  Ember__Plf__SetPartials *tp = calloc((size_t)s->taxa, sizeof *tp);
  Ember__Plf__InputSlice *from = calloc((size_t)s->taxa, sizeof *from);
  if (!ops || !list || !ts || !tp || !from) {
    free(ops), free(list), free(ts), free(tp), free(from);
    snprintf(err, err_len, "out of memory");
    return EMBER_ENOMEM;
  }
  size_t k = 0;
  for (int i = 0; i < s->taxa; i++) {
    Ember__Plf__Op *op = &ops[k];
    ember__plf__op__init(op);
    list[k++] = op;
    ember__plf__input_slice__init(&from[i]);
    from[i].input = 0;
    from[i].offset = s->tip_offset[i];
    if (s->tip_partials[i]) {
      ember__plf__set_partials__init(&tp[i]);
      tp[i].buffer = r->tip_buffer[i];
      tp[i].from = &from[i];
      tp[i].has_tip = 1;
      tp[i].tip = 1;
      op->op_case = EMBER__PLF__OP__OP_PARTIALS;
      op->partials = &tp[i];
    } else {
      ember__plf__set_tip_states__init(&ts[i]);
      ts[i].tip = r->tip_buffer[i];
      ts[i].from = &from[i];
      op->op_case = EMBER__PLF__OP__OP_TIP_STATES;
      op->tip_states = &ts[i];
    }
  }
  size_t ss = (size_t)s->states * (size_t)s->states;
  Ember__Plf__SetEigen eig = EMBER__PLF__SET_EIGEN__INIT;
  eig.eigen = 0;
  eig.n_vectors = ss;
  eig.vectors = (double *)s->evec;
  eig.n_inverse = ss;
  eig.inverse = (double *)s->ivec;
  eig.n_values = (size_t)s->states;
  eig.values = (double *)s->eval;
  ember__plf__op__init(&ops[k]);
  ops[k].op_case = EMBER__PLF__OP__OP_EIGEN;
  ops[k].eigen = &eig;
  list[k] = &ops[k];
  k++;
  Ember__Plf__SetVector vec[4];
  const struct {
    Ember__Plf__SetVector__Kind kind;
    const double *values;
    size_t n;
  } vectors[4] = {
      {EMBER__PLF__SET_VECTOR__KIND__FREQUENCIES, s->freqs, (size_t)s->states},
      {EMBER__PLF__SET_VECTOR__KIND__CATEGORY_WEIGHTS, s->cat_weights,
       (size_t)s->categories},
      {EMBER__PLF__SET_VECTOR__KIND__CATEGORY_RATES, s->cat_rates,
       (size_t)s->categories},
      {EMBER__PLF__SET_VECTOR__KIND__PATTERN_WEIGHTS, s->pattern_weights,
       (size_t)s->patterns}};
  for (int v = 0; v < 4; v++) {
    ember__plf__set_vector__init(&vec[v]);
    vec[v].kind = vectors[v].kind;
    vec[v].has_index = 1;
    vec[v].index = 0;
    vec[v].n_values = vectors[v].n;
    vec[v].values = (double *)vectors[v].values;
    ember__plf__op__init(&ops[k]);
    ops[k].op_case = EMBER__PLF__OP__OP_VECTOR;
    ops[k].vector = &vec[v];
    list[k] = &ops[k];
    k++;
  }
  uint8_t *buf = NULL;
  size_t len = pack(r, list, k, &buf);
  free(ops), free(list), free(ts), free(tp), free(from);
  if (!buf) {
    snprintf(err, err_len, "out of memory");
    return EMBER_ENOMEM;
  }
  Ember__Plf__Result *res = NULL;
  int rc = run_task(r, buf, len, 1, &res, err, err_len);
  free(buf);
  if (rc == 0) {
    r->stats.setups++;
    ember__plf__result__free_unpacked(res, NULL);
  }
  return rc;
}

/* A new, zeroed state block of the instance's size. */
static int make_state(lnl_run *r, char *err, size_t err_len) {
  void *data = NULL;
  int rc = ember_block_alloc(r->client, (size_t)r->stats.state_bytes,
                             EMBER_BLOCK_STATE, &data, &r->state);
  if (rc == 0) {
    memset(data, 0, (size_t)r->stats.state_bytes);
    rc = ember_block_seal(r->state);
  }
  if (rc) {
    set_error(err, err_len, "cannot make the state block", rc,
              ember_last_error());
    ember_block_release(r->state);
    r->state = NULL;
  }
  return rc;
}

/* After a failed task: forget the resident vectors, take the state back
 * to its first bytes (or make it anew when it is lost) and set it up; a
 * setup that fails is tried again, RECOVER_TRIES times in all. */
#define RECOVER_TRIES 3
static int recover(lnl_run *r, char *err, size_t err_len) {
  plf_planner_reset(r->planner);
  int rc = 0;
  for (int i = 0; i < RECOVER_TRIES; i++) {
    if (!r->state || ember_block_restore(r->state, NULL) != 0) {
      ember_block_release(r->state);
      r->state = NULL;
      if ((rc = make_state(r, err, err_len))) continue;
    }
    if ((rc = run_setup(r, err, err_len)) == 0) return 0;
  }
  return rc;
}

int ember__lnl_run_create(ember_client *client, const lnl_setup *s,
                          int vectors, lnl_run **out, char *err,
                          size_t err_len) {
  *out = NULL;
  lnl_run *r = calloc(1, sizeof *r);
  if (!r) {
    snprintf(err, err_len, "out of memory");
    return EMBER_ENOMEM;
  }
  r->client = client;
  r->s = *s;
  r->vectors = vectors;
  plf_plan_init(&r->plan);
  r->tip_buffer = malloc((size_t)s->taxa * sizeof *r->tip_buffer);
  if (!r->tip_buffer) {
    free(r);
    snprintf(err, err_len, "out of memory");
    return EMBER_ENOMEM;
  }
  tip_order(s, r->tip_buffer);
  r->stats.state_bytes = ember__lnl_state_bytes(s, vectors, err, err_len);
  if (r->stats.state_bytes == 0) {
    free(r->tip_buffer);
    free(r);
    return EMBER_EPARAM;
  }
  plf_shape d;
  shape_of(s, vectors, &d);
  Ember__Plf__Instance *in = &r->instance;
  ember__plf__instance__init(in);
  in->states = d.states;
  in->patterns = d.patterns;
  in->has_categories = 1;
  in->categories = d.categories;
  in->tips = d.tips;
  in->partials = d.partials;
  in->has_compact = 1;
  in->compact = d.compact;
  in->has_states_only_tips = d.states_only > 0;
  in->states_only_tips = d.states_only;
  in->matrices = d.matrices;
  in->has_scale_buffers = 1;
  in->scale_buffers = d.scale_buffers;
  in->has_precision = 1;
  in->precision = s->single ? EMBER__PLF__PRECISION__SINGLE
                            : EMBER__PLF__PRECISION__DOUBLE;

  int rc = plf_planner_create(s->taxa, vectors, 0, &r->planner);
  if (rc) {
    snprintf(err, err_len, "planner: %s", ember_strerror(rc));
    ember__lnl_run_destroy(r);
    return rc;
  }
  rc = ember_block_create(client, s->tips, s->tips_size, EMBER_BLOCK_CACHE,
                          &r->tips);
  if (rc) {
    set_error(err, err_len, "cannot make the tips' input block", rc,
              ember_last_error());
    ember__lnl_run_destroy(r);
    return rc;
  }
  if ((rc = make_state(r, err, err_len)) == 0 &&
      (rc = run_setup(r, err, err_len)) != 0)
    rc = recover(r, err, err_len); /* a failed setup is tried again too */
  if (rc) {
    ember__lnl_run_destroy(r);
    return rc;
  }
  *out = r;
  return 0;
}

/* ---- a batch of trees --------------------------------------------------- */

static int try_batch(lnl_run *r, plf_tree *const *trees, size_t n,
                     double *lnl, double *site, char *err, size_t err_len) {
  plf_plan_clear(&r->plan);
  int rc = plf_planner_add_trees(r->planner, (const plf_tree *const *)trees,
                                 n, &r->plan);
  if (rc) {
    snprintf(err, err_len, "planner: %s", ember_strerror(rc));
    return rc;
  }
  plf_plan_ops m;
  if (plf_plan_ops_build(&r->plan, site != NULL, &m) != 0) {
    plf_planner_reset(r->planner);
    snprintf(err, err_len, "out of memory");
    return EMBER_ENOMEM;
  }
  plf_plan_ops_map_tips(&m, r->tip_buffer, (uint32_t)r->s.taxa);
  uint8_t *buf = NULL;
  size_t len = pack(r, m.list, m.n, &buf);
  plf_plan_ops_free(&m);
  if (!buf) {
    plf_planner_reset(r->planner);
    snprintf(err, err_len, "out of memory");
    return EMBER_ENOMEM;
  }
  Ember__Plf__Result *res = NULL;
  rc = run_task(r, buf, len, 0, &res, err, err_len);
  free(buf);
  if (rc) return rc;
  size_t P = (size_t)r->s.patterns;
  if (res->n_lnl != n || (site && res->n_site_lnl != n * P)) {
    snprintf(err, err_len, "a plf task gave %zu log-likelihoods for %zu "
             "trees", res->n_lnl, n);
    ember__plf__result__free_unpacked(res, NULL);
    return EMBER_EFORMAT;
  }
  memcpy(lnl, res->lnl, n * sizeof *lnl);
  if (site) memcpy(site, res->site_lnl, n * P * sizeof *site);
  ember__plf__result__free_unpacked(res, NULL);
  return 0;
}

int ember__lnl_run_batch(lnl_run *r, plf_tree *const *trees, size_t n,
                         double *lnl, double *site, int *fatal, char *err,
                         size_t err_len) {
  *fatal = 0;
  int rc = try_batch(r, trees, n, lnl, site, err, err_len);
  for (int attempt = 0; rc && attempt < 2; attempt++) {
    /* the state no longer matches the planner's book: start both anew,
     * then try the batch once more (attempt 0), or leave the instance
     * ready for the next batch (attempt 1) */
    char why[512];
    int rrc = recover(r, why, sizeof why);
    if (rrc) {
      size_t used = strlen(err);
      snprintf(err + used, err_len - used, "; setting the instance up "
               "again failed: %s", why);
      *fatal = 1;
      return rc;
    }
    if (attempt == 0) rc = try_batch(r, trees, n, lnl, site, err, err_len);
    else break;
  }
  return rc;
}

void ember__lnl_run_stats(const lnl_run *r, lnl_stats *out) {
  *out = r->stats;
  plf_plan_counts c;
  plf_planner_counts(r->planner, &c);
  out->ops = c.ops;
  out->recomputed = c.recomputed;
  out->hits = c.hits;
  out->vectors = plf_planner_vectors(r->planner);
}

void ember__lnl_run_destroy(lnl_run *r) {
  if (!r) return;
  ember_block_release(r->state);
  ember_block_release(r->tips);
  plf_planner_destroy(r->planner);
  plf_plan_free(&r->plan);
  free(r->tip_buffer);
  free(r);
}
