/* bg_lnl.c - root and edge log-likelihoods (plain, by partition, and the
 * multi-subset sums), site log-likelihoods: the calls that send the queue
 * with their Lnl op as one task. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bg_internal.h"

#define GET_OR_RETURN(in, id)                                                \
  bg_instance *in = bg_get(id);                                              \
  if (!in) return BEAGLE_ERROR_UNINITIALIZED_INSTANCE

static int done(bg_instance *in, int rc) {
  bg_put(in);
  return rc;
}

static int term_ok(const bg_instance *in, const bg_term *t) {
  if (!bg_in_range(t->buffer, in->buffers) ||
      !bg_in_range(t->weights, in->eigens) ||
      !bg_in_range(t->frequencies, in->eigens) ||
      !bg_opt_in_range(t->cumulative, in->scale_buffers))
    return 0;
  if (t->child != -1 &&
      (!bg_in_range(t->child, in->buffers) || t->child == t->buffer ||
       !bg_in_range(t->matrix, in->matrices)))
    return 0;
  if (t->partition != -1 &&
      !bg_in_range(t->partition,
                   in->partition_count ? in->partition_count : 1))
    return 0;
  if (!bg_opt_in_range(t->first, in->matrices) ||
      !bg_opt_in_range(t->second, in->matrices))
    return 0;
  return 1;
}

static Ember__Plf__LnlTerm *make_term(bg_instance *in, const bg_term *t) {
  Ember__Plf__LnlTerm *m = bg_alloc(in, sizeof *m);
  if (!m) return NULL;
  ember__plf__lnl_term__init(m);
  m->buffer = (uint32_t)t->buffer;
  if (t->child >= 0) {
    m->has_child = m->has_matrix = 1;
    m->child = t->child;
    m->matrix = t->matrix;
  }
  m->weights = (uint32_t)t->weights;
  m->frequencies = (uint32_t)t->frequencies;
  if (t->cumulative >= 0) {
    m->has_cumulative_scale = 1;
    m->cumulative_scale = t->cumulative;
  }
  if (t->partition >= 0) {
    m->has_partition = 1;
    m->partition = t->partition;
  }
  if (t->first >= 0) {
    m->has_first_derivative = 1;
    m->first_derivative = t->first;
  }
  if (t->second >= 0) {
    m->has_second_derivative = 1;
    m->second_derivative = t->second;
  }
  return m;
}

/* Queue one Lnl of terms [0, n). */
static int push_lnl(bg_instance *in, const bg_term *terms, int n,
                    int by_partition, int site_lnl) {
  Ember__Plf__Lnl *m = bg_alloc(in, sizeof *m);
  Ember__Plf__LnlTerm **tt =
      m ? bg_alloc(in, (size_t)n * sizeof *tt) : NULL;
  Ember__Plf__Op *op = tt ? bg_push(in, (size_t)n * 16) : NULL;
  if (!op) return BEAGLE_ERROR_OUT_OF_MEMORY;
  ember__plf__lnl__init(m);
  for (int i = 0; i < n; i++)
    if (!(tt[i] = make_term(in, &terms[i]))) return BEAGLE_ERROR_OUT_OF_MEMORY;
  m->n_terms = (size_t)n;
  m->terms = tt;
  m->has_by_partition = m->by_partition = by_partition;
  m->has_site_lnl = m->site_lnl = site_lnl;
  op->op_case = EMBER__PLF__OP__OP_LNL;
  op->lnl = m;
  return BEAGLE_SUCCESS;
}

static int finite_code(double sum) {
  /* BEAGLE's own test: infinite or NaN */
  return sum - sum == 0.0 ? BEAGLE_SUCCESS : BEAGLE_ERROR_FLOATING_POINT;
}

#define BG_SITE_UNUSED_MAX 16

int bg_lnl(bg_instance *in, const bg_term *terms, int n, int by_partition,
           double *per_term, double *sum) {
  int with_site = in->site_with_lnl && n == 1 && !by_partition;
  int rc = push_lnl(in, terms, n, by_partition, with_site);
  Ember__Plf__Result *r = NULL;
  if (!rc) rc = bg_flush(in, &r);
  if (rc) return rc;
  size_t want = by_partition ? (size_t)n : 1;
  if (with_site && r->n_site_lnl != (size_t)in->patterns) with_site = 0;
  if (r->n_lnl != want) {
    bg_warn("instance %d: %zu log-likelihoods back, not %zu", in->id,
            r->n_lnl, want);
    ember__plf__result__free_unpacked(r, NULL);
    return BEAGLE_ERROR_GENERAL;
  }
  double s = 0;
  if (by_partition) {
    for (int i = 0; i < n; i++) {
      if (per_term) per_term[i] = r->lnl[i];
      s += r->lnl[i];
    }
  } else {
    s = r->lnl[0];
  }
  if (with_site) {
    memcpy(in->site_cache, r->site_lnl, (size_t)in->patterns * sizeof(double));
    if (++in->site_unused > BG_SITE_UNUSED_MAX) in->site_with_lnl = 0;
  }
  ember__plf__result__free_unpacked(r, NULL);
  *sum = s;
  in->site_cache_valid = with_site;
  in->last_lnl = s;
  in->have_last_lnl = 1;
  return finite_code(s);
}

/* BEAGLE's count > 1 form: the subsets are one mixture, summed per site
 * (L = sum_i L_i exp(cumulative_i)) before the log; each subset's site
 * log-likelihoods come back from its own Lnl and are combined here. */
int bg_lnl_multi(bg_instance *in, const bg_term *terms, int n, int scaled,
                 double *sum) {
  int rc = BEAGLE_SUCCESS;
  for (int i = 0; i < n && !rc; i++) {
    bg_term t = terms[i];
    if (!scaled) t.cumulative = -1;
    rc = push_lnl(in, &t, 1, 0, 1);
  }
  Ember__Plf__Result *r = NULL;
  if (!rc) rc = bg_flush(in, &r);
  if (rc) return rc;
  size_t P = (size_t)in->patterns;
  if (r->n_site_lnl != (size_t)n * P) {
    bg_warn("instance %d: %zu site log-likelihoods back, not %zu", in->id,
            r->n_site_lnl, (size_t)n * P);
    ember__plf__result__free_unpacked(r, NULL);
    return BEAGLE_ERROR_GENERAL;
  }
  double s = 0;
  for (size_t p = 0; p < P; p++) {
    double m = -INFINITY;
    for (int i = 0; i < n; i++) {
      double v = r->site_lnl[(size_t)i * P + p];
      if (v > m || isnan(v)) m = v;
    }
    double site = m;
    if (isfinite(m)) {
      double acc = 0;
      for (int i = 0; i < n; i++) acc += exp(r->site_lnl[(size_t)i * P + p] - m);
      site = m + log(acc);
    }
    in->site_cache[p] = site;
    s += site * in->pattern_weights[p];
  }
  ember__plf__result__free_unpacked(r, NULL);
  in->site_cache_valid = 1;
  in->last_lnl = s;
  in->have_last_lnl = 1;
  *sum = s;
  return finite_code(s);
}

int bg_lnl_derivatives(bg_instance *in, const bg_term *term, double *sum,
                       double *first, double *second) {
  int rc = push_lnl(in, term, 1, 0, 1);
  Ember__Plf__Result *r = NULL;
  if (!rc) rc = bg_flush(in, &r);
  if (rc) return rc;
  size_t P = (size_t)in->patterns;
  if (r->n_lnl != 1 || r->n_site_lnl != P || r->n_first_derivative != 1 ||
      r->n_second_derivative != 1 || r->n_site_first_derivative != P ||
      r->n_site_second_derivative != P) {
    bg_warn("instance %d: derivatives not all back", in->id);
    ember__plf__result__free_unpacked(r, NULL);
    return BEAGLE_ERROR_GENERAL;
  }
  memcpy(in->site_cache, r->site_lnl, P * sizeof(double));
  memcpy(in->site_first, r->site_first_derivative, P * sizeof(double));
  memcpy(in->site_second, r->site_second_derivative, P * sizeof(double));
  in->site_cache_valid = 1;
  in->last_lnl = *sum = r->lnl[0];
  in->have_last_lnl = 1;
  in->last_first = r->first_derivative[0];
  in->last_second = r->second_derivative[0];
  in->have_derivatives = 1;
  if (first) *first = in->last_first;
  if (second) *second = in->last_second;
  ember__plf__result__free_unpacked(r, NULL);
  return finite_code(*sum);
}

/* ---- BEAGLE's calls ----------------------------------------------------------- */

/* The terms of a root (children NULL) or edge log-likelihood call, checked
 * and computed: by partition when partitions is given (count terms, one
 * per partition), else summed over count subsets (bg_lnl_multi); an edge
 * with derivative matrices (d1, d2: either may be NULL) is one term, its
 * derivatives' sums into *first and *second. */
static int lnl_terms_d(bg_instance *in, int count, const int *buffers,
                       const int *children, const int *matrices,
                       const int *d1, const int *d2, const int *weights,
                       const int *freqs, const int *scales,
                       const int *partitions, double *by_partition,
                       double *sum, double *first, double *second) {
  if (count < 1) return BEAGLE_ERROR_OUT_OF_RANGE;
  int derivatives = d1 || d2;
  if (derivatives &&
      (count != 1 || partitions || !children || !bg_derivatives_here(in)))
    return BEAGLE_ERROR_NO_IMPLEMENTATION;
  /* scaling by the instance: the factors of the root's subtree, or of the
   * edge's two sides summed into the last scale buffer (one edge) */
  int edge_sum = in->scale_buffers - 1;
  if (in->auto_scale && children) {
    if (count != 1 || partitions) return BEAGLE_ERROR_NO_IMPLEMENTATION;
    if (!bg_in_range(buffers[0], in->buffers) ||
        !bg_in_range(children[0], in->buffers))
      return BEAGLE_ERROR_OUT_OF_RANGE;
    int sides[2], n = 0;
    if (buffers[0] >= in->tips) sides[n++] = buffers[0] - in->tips;
    if (children[0] >= in->tips) sides[n++] = children[0] - in->tips;
    int rc = bg_scale_op(in, EMBER__PLF__SCALE_OP__KIND__RESET, NULL, 0,
                         edge_sum, -1);
    if (!rc && n)
      rc = bg_scale_op(in, EMBER__PLF__SCALE_OP__KIND__ACCUMULATE, sides, n,
                       edge_sum, -1);
    if (rc) return rc;
  }
  bg_term *t = calloc((size_t)count, sizeof *t);
  if (!t) return BEAGLE_ERROR_OUT_OF_MEMORY;
  for (int i = 0; i < count; i++) {
    int cum = scales ? scales[i] : -1;
    if (in->auto_scale)
      cum = children ? edge_sum
            : buffers[i] >= in->tips ? buffers[i] - in->tips
                                     : BEAGLE_OP_NONE;
    t[i] = (bg_term){buffers[i], children ? children[i] : -1,
                     children ? matrices[i] : -1, weights[i], freqs[i], cum,
                     partitions ? partitions[i] : -1, d1 ? d1[i] : -1,
                     d2 ? d2[i] : -1};
    if ((children && t[i].child < 0) || (partitions && t[i].partition < 0) ||
        !term_ok(in, &t[i])) {
      free(t);
      return BEAGLE_ERROR_OUT_OF_RANGE;
    }
  }
  int rc;
  if (derivatives)
    rc = bg_lnl_derivatives(in, t, sum, first, second);
  else if (partitions)
    rc = bg_lnl(in, t, count, 1, by_partition, sum);
  else if (count == 1)
    rc = bg_lnl(in, t, 1, 0, NULL, sum);
  else
    rc = bg_lnl_multi(in, t, count,
                      in->auto_scale ||
                          (scales && scales[0] != BEAGLE_OP_NONE),
                      sum);
  free(t);
  return rc;
}

static int lnl_terms(bg_instance *in, int count, const int *buffers,
                     const int *children, const int *matrices,
                     const int *weights, const int *freqs, const int *scales,
                     const int *partitions, double *by_partition,
                     double *sum) {
  return lnl_terms_d(in, count, buffers, children, matrices, NULL, NULL,
                     weights, freqs, scales, partitions, by_partition, sum,
                     NULL, NULL);
}

int beagleCalculateRootLogLikelihoods(int instance, const int *bufferIndices,
                                      const int *categoryWeightsIndices,
                                      const int *stateFrequenciesIndices,
                                      const int *cumulativeScaleIndices,
                                      int count,
                                      double *outSumLogLikelihood) {
  GET_OR_RETURN(in, instance);
  return done(in, lnl_terms(in, count, bufferIndices, NULL, NULL,
                            categoryWeightsIndices, stateFrequenciesIndices,
                            cumulativeScaleIndices, NULL, NULL,
                            outSumLogLikelihood));
}

int beagleCalculateRootLogLikelihoodsByPartition(
    int instance, const int *bufferIndices, const int *categoryWeightsIndices,
    const int *stateFrequenciesIndices, const int *cumulativeScaleIndices,
    const int *partitionIndices, int partitionCount, int count,
    double *outSumLogLikelihoodByPartition, double *outSumLogLikelihood) {
  GET_OR_RETURN(in, instance);
  if (count != 1) return done(in, BEAGLE_ERROR_NO_IMPLEMENTATION);
  return done(in, lnl_terms(in, partitionCount, bufferIndices, NULL, NULL,
                            categoryWeightsIndices, stateFrequenciesIndices,
                            cumulativeScaleIndices, partitionIndices,
                            outSumLogLikelihoodByPartition,
                            outSumLogLikelihood));
}

int beagleCalculateEdgeLogLikelihoods(
    int instance, const int *parentBufferIndices,
    const int *childBufferIndices, const int *probabilityIndices,
    const int *firstDerivativeIndices, const int *secondDerivativeIndices,
    const int *categoryWeightsIndices, const int *stateFrequenciesIndices,
    const int *cumulativeScaleIndices, int count,
    double *outSumLogLikelihood, double *outSumFirstDerivative,
    double *outSumSecondDerivative) {
  GET_OR_RETURN(in, instance);
  return done(in, lnl_terms_d(in, count, parentBufferIndices,
                              childBufferIndices, probabilityIndices,
                              firstDerivativeIndices, secondDerivativeIndices,
                              categoryWeightsIndices, stateFrequenciesIndices,
                              cumulativeScaleIndices, NULL, NULL,
                              outSumLogLikelihood, outSumFirstDerivative,
                              outSumSecondDerivative));
}

int beagleCalculateEdgeLogLikelihoodsByPartition(
    int instance, const int *parentBufferIndices,
    const int *childBufferIndices, const int *probabilityIndices,
    const int *firstDerivativeIndices, const int *secondDerivativeIndices,
    const int *categoryWeightsIndices, const int *stateFrequenciesIndices,
    const int *cumulativeScaleIndices, const int *partitionIndices,
    int partitionCount, int count, double *outSumLogLikelihoodByPartition,
    double *outSumLogLikelihood, double *outSumFirstDerivativeByPartition,
    double *outSumFirstDerivative, double *outSumSecondDerivativeByPartition,
    double *outSumSecondDerivative) {
  GET_OR_RETURN(in, instance);
  if (firstDerivativeIndices || secondDerivativeIndices || count != 1)
    return done(in, BEAGLE_ERROR_NO_IMPLEMENTATION);
  return done(in, lnl_terms(in, partitionCount, parentBufferIndices,
                            childBufferIndices, probabilityIndices,
                            categoryWeightsIndices, stateFrequenciesIndices,
                            cumulativeScaleIndices, partitionIndices,
                            outSumLogLikelihoodByPartition,
                            outSumLogLikelihood));
}

int beagleGetLogLikelihood(int instance, double *outSumLogLikelihood) {
  GET_OR_RETURN(in, instance);
  if (!in->have_last_lnl) return done(in, BEAGLE_ERROR_GENERAL);
  *outSumLogLikelihood = in->last_lnl;
  return done(in, finite_code(in->last_lnl));
}

int beagleGetDerivatives(int instance, double *outSumFirstDerivative,
                         double *outSumSecondDerivative) {
  GET_OR_RETURN(in, instance);
  if (!in->have_derivatives) return done(in, BEAGLE_ERROR_GENERAL);
  if (outSumFirstDerivative) *outSumFirstDerivative = in->last_first;
  if (outSumSecondDerivative) *outSumSecondDerivative = in->last_second;
  return done(in, BEAGLE_SUCCESS);
}

int beagleGetSiteLogLikelihoods(int instance, double *outLogLikelihoods) {
  GET_OR_RETURN(in, instance);
  size_t P = (size_t)in->patterns;
  if (in->site_cache_valid) {
    memcpy(outLogLikelihoods, in->site_cache, P * sizeof(double));
    in->site_unused = 0;
    return done(in, BEAGLE_SUCCESS);
  }
  /* asked after a log-likelihood: from now on they come with it */
  if (in->have_last_lnl) {
    in->site_with_lnl = 1;
    in->site_unused = 0;
  }
  Ember__Plf__Get *m = bg_alloc(in, sizeof *m);
  Ember__Plf__Op *op = m ? bg_push(in, 8) : NULL;
  if (!op) return done(in, BEAGLE_ERROR_OUT_OF_MEMORY);
  ember__plf__get__init(m);
  m->kind = EMBER__PLF__GET__KIND__SITE_LNL;
  op->op_case = EMBER__PLF__OP__OP_GET;
  op->get = m;
  Ember__Plf__Result *r;
  int rc = bg_flush(in, &r);
  if (rc) return done(in, rc);
  if (r->n_values < P) {
    ember__plf__result__free_unpacked(r, NULL);
    return done(in, BEAGLE_ERROR_GENERAL);
  }
  memcpy(outLogLikelihoods, r->values, P * sizeof(double));
  ember__plf__result__free_unpacked(r, NULL);
  return done(in, BEAGLE_SUCCESS);
}

int beagleGetSiteDerivatives(int instance, double *outFirstDerivatives,
                             double *outSecondDerivatives) {
  GET_OR_RETURN(in, instance);
  if (!in->have_derivatives) return done(in, BEAGLE_ERROR_GENERAL);
  size_t n = (size_t)in->patterns * sizeof(double);
  if (outFirstDerivatives) memcpy(outFirstDerivatives, in->site_first, n);
  if (outSecondDerivatives) memcpy(outSecondDerivatives, in->site_second, n);
  return done(in, BEAGLE_SUCCESS);
}
