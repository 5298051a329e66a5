/* plf_tree_harness.c - random trees, models, simulation and the BEAGLE
 * executor of plf_tree_harness.h. */
#include "plf_tree_harness.h"

#include <lapacke.h>
#include <libhmsbeagle/beagle.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- random --------------------------------------------------------------- */

uint64_t ph_next(ph_rng *r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double ph_uniform(ph_rng *r) { return (double)(ph_next(r) >> 11) * 0x1p-53; }

int ph_below(ph_rng *r, int n) { return (int)(ph_uniform(r) * n); }

double ph_exp(ph_rng *r, double mean) {
  return -mean * log(1.0 - ph_uniform(r));
}

/* ---- trees ---------------------------------------------------------------- */

int ph_random_tree(int n, int unrooted, double mean_length, ph_rng *r,
                   plf_tree **out) {
  plf_tree *t;
  if (plf_tree_create(n, &t) != 0) return -1;
  int *pool = malloc((size_t)n * sizeof *pool);
  if (!pool) {
    plf_tree_destroy(t);
    return -1;
  }
  for (int i = 0; i < n; i++) pool[i] = i;
  int left = n, stop = unrooted ? 3 : 1;
  while (left > stop) {
    int i = ph_below(r, left), j = ph_below(r, left - 1);
    if (j >= i) j++;
    int v = plf_tree_join(t, pool[i], ph_exp(r, mean_length), pool[j],
                          ph_exp(r, mean_length));
    if (v < 0) break;
    pool[i] = v;
    pool[j] = pool[--left];
  }
  int ok = !unrooted || plf_tree_join3(t, pool[0], ph_exp(r, mean_length),
                                       pool[1], ph_exp(r, mean_length),
                                       pool[2], ph_exp(r, mean_length)) >= 0;
  free(pool);
  if (!ok || !plf_tree_is_complete(t)) {
    plf_tree_destroy(t);
    return -1;
  }
  *out = t;
  return 0;
}

int ph_caterpillar(int n, int unrooted, ph_rng *r, plf_tree **out) {
  plf_tree *t;
  if (plf_tree_create(n, &t) != 0) return -1;
  int v = 0, last = unrooted ? n - 1 : n;
  for (int i = 1; i < last && v >= 0; i++)
    v = plf_tree_join(t, v, ph_exp(r, 0.1), i, ph_exp(r, 0.1));
  if (unrooted && v >= 0) {
    /* the root: the two subtrees of the last join and taxon n-1 */
    plf_tree_destroy(t);
    if (plf_tree_create(n, &t) != 0) return -1;
    v = 0;
    for (int i = 1; i < n - 2 && v >= 0; i++)
      v = plf_tree_join(t, v, ph_exp(r, 0.1), i, ph_exp(r, 0.1));
    if (v >= 0)
      v = plf_tree_join3(t, v, ph_exp(r, 0.1), n - 2, ph_exp(r, 0.1), n - 1,
                         ph_exp(r, 0.1));
  }
  if (v < 0 || !plf_tree_is_complete(t)) {
    plf_tree_destroy(t);
    return -1;
  }
  *out = t;
  return 0;
}

int ph_balanced(int n, ph_rng *r, plf_tree **out) {
  plf_tree *t;
  if (plf_tree_create(n, &t) != 0) return -1;
  int *level = malloc((size_t)n * sizeof *level);
  if (!level) {
    plf_tree_destroy(t);
    return -1;
  }
  for (int i = 0; i < n; i++) level[i] = i;
  int count = n, v = 0;
  while (count > 1 && v >= 0) {
    int next = 0;
    for (int i = 0; i + 1 < count && v >= 0; i += 2)
      level[next++] = v = plf_tree_join(t, level[i], ph_exp(r, 0.1),
                                        level[i + 1], ph_exp(r, 0.1));
    if (count % 2) level[next++] = level[count - 1];
    count = next;
  }
  free(level);
  if (v < 0 || !plf_tree_is_complete(t)) {
    plf_tree_destroy(t);
    return -1;
  }
  *out = t;
  return 0;
}

/* ---- models --------------------------------------------------------------- */

static void set_cats(ph_model *m, int cats, const double *rates) {
  m->cats = cats;
  for (int k = 0; k < cats; k++) {
    m->rates[k] = rates ? rates[k] : 1.0;
    m->weights[k] = 1.0 / cats;
  }
}

void ph_model_jc(ph_model *m, int cats, const double *rates) {
  memset(m, 0, sizeof *m);
  set_cats(m, cats, rates);
  static const double h[16] = {1, 1, 1, 1, 1, 1, -1, -1,
                               1, -1, 1, -1, 1, -1, -1, 1};
  for (int i = 0; i < 4; i++) {
    m->freqs[i] = 0.25;
    m->eval[i] = i ? -4.0 / 3.0 : 0.0;
    for (int j = 0; j < 4; j++) {
      m->evec[4 * i + j] = h[4 * i + j];
      m->ivec[4 * i + j] = h[4 * j + i] / 4.0;
    }
  }
}

int ph_model_gtr(ph_model *m, int cats, const double *rates, ph_rng *r) {
  memset(m, 0, sizeof *m);
  set_cats(m, cats, rates);
  double sum = 0, q[16] = {0}, s[16], w[4];
  for (int i = 0; i < 4; i++) sum += m->freqs[i] = 0.1 + ph_uniform(r);
  for (int i = 0; i < 4; i++) m->freqs[i] /= sum;
  for (int i = 0; i < 4; i++)
    for (int j = i + 1; j < 4; j++) {
      double x = 0.2 + 2.0 * ph_uniform(r);
      q[4 * i + j] = x * m->freqs[j];
      q[4 * j + i] = x * m->freqs[i];
    }
  double mu = 0;
  for (int i = 0; i < 4; i++) {
    double row = 0;
    for (int j = 0; j < 4; j++) row += j != i ? q[4 * i + j] : 0;
    q[4 * i + i] = -row;
    mu += m->freqs[i] * row;
  }
  for (int i = 0; i < 16; i++) q[i] /= mu;
  /* S = D^1/2 Q D^-1/2 is symmetric: S = U L U^T, E = D^-1/2 U,
   * E^-1 = U^T D^1/2 */
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++)
      s[4 * i + j] =
          sqrt(m->freqs[i]) * q[4 * i + j] / sqrt(m->freqs[j]);
  if (LAPACKE_dsyev(LAPACK_ROW_MAJOR, 'V', 'U', 4, s, 4, w) != 0) return -1;
  for (int i = 0; i < 4; i++) {
    m->eval[i] = w[i];
    for (int j = 0; j < 4; j++) {
      m->evec[4 * i + j] = s[4 * i + j] / sqrt(m->freqs[i]);
      m->ivec[4 * i + j] = s[4 * j + i] * sqrt(m->freqs[j]);
    }
  }
  return 0;
}

void ph_model_p(const ph_model *m, double t, double p[16]) {
  double e[4];
  for (int k = 0; k < 4; k++) e[k] = exp(m->eval[k] * t);
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      double x = 0;
      for (int k = 0; k < 4; k++)
        x += m->evec[4 * i + k] * e[k] * m->ivec[4 * k + j];
      p[4 * i + j] = x > 0 ? x : 0;
    }
}

/* ---- data ----------------------------------------------------------------- */

void ph_random_states(int n, int patterns, ph_rng *r, int *states) {
  for (long i = 0; i < (long)n * patterns; i++) states[i] = ph_below(r, 4);
}

static int draw(ph_rng *r, const double *probs) {
  double u = ph_uniform(r), acc = 0;
  for (int i = 0; i < 3; i++)
    if (u < (acc += probs[i])) return i;
  return 3;
}

int ph_simulate(const plf_tree *t, const ph_model *m, int patterns,
                ph_rng *r, int *states) {
  int n = plf_tree_tip_count(t), total = 2 * n - 1;
  int *order = malloc((size_t)total * sizeof *order);
  int *state = malloc((size_t)total * sizeof *state);
  double *p = malloc((size_t)total * (size_t)m->cats * 16 * sizeof *p);
  if (!order || !state || !p || plf_tree_bottom_up(t, order) != 0) {
    free(order);
    free(state);
    free(p);
    return -1;
  }
  for (int v = 0; v < total; v++)
    for (int k = 0; k < m->cats; k++)
      ph_model_p(m, m->rates[k] * plf_tree_length(t, v),
                 p + ((size_t)v * (size_t)m->cats + (size_t)k) * 16);
  for (int site = 0; site < patterns; site++) {
    int k = ph_below(r, m->cats);
    for (int i = total - 1; i >= 0; i--) { /* top down */
      int v = order[i], up = plf_tree_parent(t, v);
      if (up == PLF_NONE) {
        state[v] = draw(r, m->freqs);
        continue;
      }
      const double *pv = p + ((size_t)v * (size_t)m->cats + (size_t)k) * 16;
      state[v] = draw(r, pv + 4 * state[up]);
      if (v < n) states[(size_t)v * (size_t)patterns + (size_t)site] =
                     state[v];
    }
  }
  free(order);
  free(state);
  free(p);
  return 0;
}

/* ---- BEAGLE --------------------------------------------------------------- */

int ph_beagle_create(ph_beagle *b, int tips, int patterns, const int *states,
                     const ph_model *m, int vectors, int matrices) {
  return ph_beagle_create_opts(b, tips, patterns, states, m, vectors,
                               matrices, NULL);
}

int ph_beagle_create_opts(ph_beagle *b, int tips, int patterns,
                          const int *states, const ph_model *m, int vectors,
                          int matrices, const ph_beagle_opts *o) {
  static const ph_beagle_opts defaults = {0, 0, NULL};
  if (!o) o = &defaults;
  memset(b, 0, sizeof *b);
  BeagleInstanceDetails d;
  long req = BEAGLE_FLAG_SCALERS_LOG | BEAGLE_FLAG_PROCESSOR_CPU |
             BEAGLE_FLAG_SCALING_MANUAL |
             (o->single ? BEAGLE_FLAG_PRECISION_SINGLE
                        : BEAGLE_FLAG_PRECISION_DOUBLE);
  long pref = BEAGLE_FLAG_VECTOR_SSE | (o->threads > 1
                                            ? BEAGLE_FLAG_THREADING_CPP
                                            : BEAGLE_FLAG_THREADING_NONE);
  b->instance = beagleCreateInstance(tips, tips + vectors, tips, 4, patterns,
                                     1, matrices, m->cats, vectors, NULL, 0,
                                     pref, req, &d);
  if (b->instance < 0) return -1;
  snprintf(b->impl, sizeof b->impl, "%s", d.implName);
  b->flags = d.flags;
  b->tips = tips;
  b->vectors = vectors;
  b->matrices = matrices;
  b->op_cap = vectors > 0 ? vectors : 1;
  b->ops = malloc((size_t)b->op_cap * sizeof(BeagleOperation));
  b->pending = calloc((size_t)(vectors > 0 ? vectors : 1), sizeof(int));
  double *ones = o->pattern_weights
                     ? NULL
                     : malloc((size_t)patterns * sizeof *ones);
  int rc = b->ops && b->pending && (ones || o->pattern_weights) ? 0 : -1;
  for (int i = 0; i < patterns && ones; i++) ones[i] = 1.0;
  if (rc == 0 && o->threads > 1)
    rc = beagleSetCPUThreadCount(b->instance, o->threads);
  for (int i = 0; i < tips && rc == 0; i++)
    rc = beagleSetTipStates(b->instance, i, states + (size_t)i * patterns);
  if (rc == 0)
    rc = beagleSetEigenDecomposition(b->instance, 0, m->evec, m->ivec,
                                     m->eval);
  if (rc == 0) rc = beagleSetStateFrequencies(b->instance, 0, m->freqs);
  if (rc == 0) rc = beagleSetCategoryWeights(b->instance, 0, m->weights);
  if (rc == 0) rc = beagleSetCategoryRates(b->instance, m->rates);
  if (rc == 0)
    rc = beagleSetPatternWeights(b->instance,
                                 ones ? ones : o->pattern_weights);
  free(ones);
  if (rc != 0) {
    ph_beagle_destroy(b);
    return -1;
  }
  return 0;
}

void ph_beagle_destroy(ph_beagle *b) {
  if (b->instance >= 0) beagleFinalizeInstance(b->instance);
  b->instance = -1;
  free(b->ops);
  free(b->pending);
  b->ops = NULL;
  b->pending = NULL;
}

/* flush: the run's ops in one call, then their scale accumulations in
 * order (plf_plan.h: each adds its children's cumulative factors) */
static int flush(ph_beagle *b, const plf_op *ops, int count) {
  if (count == 0) return 0;
  BeagleOperation *bo = b->ops;
  if (beagleUpdatePartials(b->instance, bo, count, BEAGLE_OP_NONE) != 0)
    return -1;
  for (int i = 0; i < count; i++) {
    if (ops[i].dest_scale_write == PLF_NONE) continue;
    int idx[2], k = 0;
    if (ops[i].child1_scale != PLF_NONE) idx[k++] = ops[i].child1_scale;
    if (ops[i].child2_scale != PLF_NONE) idx[k++] = ops[i].child2_scale;
    if (k && beagleAccumulateScaleFactors(b->instance, idx, k,
                                          ops[i].dest_scale_write) != 0)
      return -1;
  }
  b->run++;
  return 0;
}

static int run_ops(ph_beagle *b, const plf_op *ops, size_t count) {
  BeagleOperation *bo = b->ops;
  size_t start = 0;
  int n = 0;
  b->run++;
  for (size_t i = 0; i < count; i++) {
    const plf_op *o = &ops[i];
    int slot = o->dest - b->tips;
    if (slot < 0 || slot >= b->vectors) return -1;
    /* a buffer that a pending accumulation reads or writes must not be
     * overwritten before it: flush first */
    if (n == b->op_cap || b->pending[slot] == b->run) {
      if (flush(b, ops + start, n) != 0) return -1;
      start = i;
      n = 0;
    }
    bo[n++] = (BeagleOperation){o->dest, o->dest_scale_write,
                                o->dest_scale_read, o->child1,
                                o->child1_matrix, o->child2,
                                o->child2_matrix};
    b->pending[slot] = b->run;
    if (o->child1 >= b->tips) b->pending[o->child1 - b->tips] = b->run;
    if (o->child2 >= b->tips) b->pending[o->child2 - b->tips] = b->run;
  }
  return flush(b, ops + start, n);
}

int ph_beagle_run(ph_beagle *b, const plf_plan *plan, double *loglik) {
  int *idx = NULL;
  double *len = NULL;
  int rc = 0;
  for (size_t s = 0; s < plan->tree_count && rc == 0; s++) {
    const plf_plan_tree *seg = &plan->trees[s];
    if (seg->matrix_count) {
      int *ni = realloc(idx, seg->matrix_count * sizeof *idx);
      if (ni) idx = ni;
      double *nl = realloc(len, seg->matrix_count * sizeof *len);
      if (nl) len = nl;
      if (!ni || !nl) {
        rc = -1;
        break;
      }
      for (size_t i = 0; i < seg->matrix_count; i++) {
        idx[i] = plan->matrices[seg->first_matrix + i].matrix;
        len[i] = plan->matrices[seg->first_matrix + i].length;
      }
      if (beagleUpdateTransitionMatrices(b->instance, 0, idx, NULL, NULL, len,
                                         (int)seg->matrix_count) != 0) {
        rc = -1;
        break;
      }
    }
    if (run_ops(b, plan->ops + seg->first_op, seg->op_count) != 0) {
      rc = -1;
      break;
    }
    int root = seg->root, zero = 0;
    int scale = seg->root_scale == PLF_NONE ? BEAGLE_OP_NONE : seg->root_scale;
    if (beagleCalculateRootLogLikelihoods(b->instance, &root, &zero, &zero,
                                          &scale, 1, &loglik[s]) != 0)
      rc = -1;
  }
  free(idx);
  free(len);
  return rc;
}

int ph_score(ph_beagle *b, const plf_tree *t, double *loglik) {
  plf_planner *p;
  plf_plan plan;
  plf_plan_init(&plan);
  if (plf_planner_create(plf_tree_tip_count(t), PLF_PLAN_UNBOUNDED, 0, &p))
    return -1;
  int rc = plf_planner_add_tree(p, t, &plan) == 0 &&
                   plf_planner_vectors(p) <= b->vectors
               ? ph_beagle_run(b, &plan, loglik)
               : -1;
  plf_plan_free(&plan);
  plf_planner_destroy(p);
  return rc;
}
