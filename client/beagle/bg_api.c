/* bg_api.c - BEAGLE 3.1's instance, data, matrix, partials and scale
 * calls: checked with BEAGLE's return codes and queued as plf operations
 * (getters send the queue and wait). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bg_internal.h"

/* The instance or return BEAGLE_ERROR_UNINITIALIZED_INSTANCE. */
#define GET_OR_RETURN(in, id)                                                \
  bg_instance *in = bg_get(id);                                              \
  if (!in) return BEAGLE_ERROR_UNINITIALIZED_INSTANCE

/* Unlock and return rc. */
static int done(bg_instance *in, int rc) {
  bg_put(in);
  return rc;
}

/* ---- instances ------------------------------------------------------------ */

#define BG_UNSUPPORTED_REQUIRED                                              \
  (BEAGLE_FLAG_SCALING_DYNAMIC | BEAGLE_FLAG_EIGEN_COMPLEX)

int beagleCreateInstance(int tipCount, int partialsBufferCount,
                         int compactBufferCount, int stateCount,
                         int patternCount, int eigenBufferCount,
                         int matrixBufferCount, int categoryCount,
                         int scaleBufferCount, int *resourceList,
                         int resourceCount, long preferenceFlags,
                         long requirementFlags,
                         BeagleInstanceDetails *returnInfo) {
  if (tipCount < 1 || partialsBufferCount < 0 || compactBufferCount < 0 ||
      stateCount < 2 || patternCount < 1 || eigenBufferCount < 1 ||
      matrixBufferCount < 1 || categoryCount < 1 || scaleBufferCount < 0 ||
      (long)partialsBufferCount + compactBufferCount <= tipCount ||
      (long)partialsBufferCount + compactBufferCount > PLF_MAX_BUFFERS)
    return BEAGLE_ERROR_OUT_OF_RANGE;
  /* what BEAGLE 3.1 would choose: precision, scalers, eigen vectors */
  long req = requirementFlags, pref = preferenceFlags;
  if (req & BG_UNSUPPORTED_REQUIRED) return BEAGLE_ERROR_NO_IMPLEMENTATION;
  int single;
  if ((req & BEAGLE_FLAG_PRECISION_SINGLE) &&
      (req & BEAGLE_FLAG_PRECISION_DOUBLE))
    return BEAGLE_ERROR_NO_IMPLEMENTATION;
  if (req & (BEAGLE_FLAG_PRECISION_SINGLE | BEAGLE_FLAG_PRECISION_DOUBLE))
    single = (req & BEAGLE_FLAG_PRECISION_SINGLE) != 0;
  else
    single = (pref & BEAGLE_FLAG_PRECISION_SINGLE) &&
             !(pref & BEAGLE_FLAG_PRECISION_DOUBLE);
  /* scaling the instance does itself, asked for or preferred, wins as in
   * BEAGLE; its factors are logs. AUTO rescales every node, as ALWAYS:
   * BEAGLE leaves when to its implementation. */
  long scaling = (req | pref) & BEAGLE_FLAG_SCALING_AUTO
                     ? BEAGLE_FLAG_SCALING_AUTO
                 : (req | pref) & BEAGLE_FLAG_SCALING_ALWAYS
                     ? BEAGLE_FLAG_SCALING_ALWAYS
                     : BEAGLE_FLAG_SCALING_MANUAL;
  int auto_scale = scaling != BEAGLE_FLAG_SCALING_MANUAL;
  if (auto_scale && (req & BEAGLE_FLAG_SCALERS_RAW))
    return BEAGLE_ERROR_NO_IMPLEMENTATION;
  int log_scalers = auto_scale || (req & BEAGLE_FLAG_SCALERS_LOG) ||
                    ((pref & BEAGLE_FLAG_SCALERS_LOG) &&
                     !(req & BEAGLE_FLAG_SCALERS_RAW));
  int transposed = ((req | pref) & BEAGLE_FLAG_INVEVEC_TRANSPOSED) &&
                   !(req & BEAGLE_FLAG_INVEVEC_STANDARD);

  /* the resource: the first of the list (or of all) that meets the
   * requirements and runs plf */
  size_t n_res;
  const bg_resource *res = bg_resources(&n_res);
  long need = req & ~(BEAGLE_FLAG_PRECISION_SINGLE |
                      BEAGLE_FLAG_PRECISION_DOUBLE);
  int chosen = -1;
  size_t n_try = resourceList && resourceCount > 0 ? (size_t)resourceCount
                                                   : n_res;
  for (size_t k = 0; k < n_try && chosen < 0; k++) {
    int r = resourceList && resourceCount > 0 ? resourceList[k] : (int)k;
    if (r < 0 || (size_t)r >= n_res) continue;
    if (res[r].runs_plf && !(need & ~res[r].support)) chosen = r;
  }
  if (chosen < 0) return BEAGLE_ERROR_NO_RESOURCE;

  plf_shape s = {0};
  s.states = (uint32_t)stateCount;
  s.patterns = (uint32_t)patternCount;
  s.categories = (uint32_t)categoryCount;
  s.tips = (uint32_t)tipCount;
  s.partials = (uint32_t)(partialsBufferCount + compactBufferCount);
  s.compact = (uint32_t)tipCount;   /* any tip may hold states */
  s.eigens = (uint32_t)eigenBufferCount;
  s.matrices = (uint32_t)matrixBufferCount;
  s.scale_buffers = (uint32_t)scaleBufferCount;
  if (auto_scale)   /* one per internal node, and the edge's */
    s.scale_buffers =
        (uint32_t)(partialsBufferCount + compactBufferCount - tipCount + 1);
  s.rate_sets = (uint32_t)eigenBufferCount;
  /* the most partitions beagleSetPatternPartitions can ask for: the
   * layout is fixed when the block is made */
  s.partitions = patternCount < PLF_MAX_SETS ? (uint32_t)patternCount
                                             : PLF_MAX_SETS;
  s.single = single;

  const bg_resource *r = &res[chosen];
  /* what this instance does: threads over patterns on the cpu kind (the
   * CPUs it may use, until beagleSetCPUThreadCount says otherwise) */
  unsigned threads = strcmp(r->kind, "cpu") == 0 ? bg_default_threads() : 1;
  long threading = threads > 1 ? BEAGLE_FLAG_THREADING_CPP |
                                     (req & BEAGLE_FLAG_THREADING_OPENMP)
                               : BEAGLE_FLAG_THREADING_NONE;
  long asynch = (req | pref) & BEAGLE_FLAG_COMPUTATION_ASYNCH
                    ? BEAGLE_FLAG_COMPUTATION_ASYNCH
                    : BEAGLE_FLAG_COMPUTATION_SYNCH;
  long flags = r->required | asynch | BEAGLE_FLAG_EIGEN_REAL | scaling |
               bg_vector_flag(r->kind) | threading |
               (single ? BEAGLE_FLAG_PRECISION_SINGLE
                       : BEAGLE_FLAG_PRECISION_DOUBLE) |
               (log_scalers ? BEAGLE_FLAG_SCALERS_LOG
                            : BEAGLE_FLAG_SCALERS_RAW) |
               (transposed ? BEAGLE_FLAG_INVEVEC_TRANSPOSED
                           : BEAGLE_FLAG_INVEVEC_STANDARD);
  bg_instance *in;
  char err[256] = "";
  int rc = bg_instance_create(&s, tipCount,
                              partialsBufferCount + compactBufferCount,
                              chosen, r->kind, flags, log_scalers,
                              transposed, threads, &in, err, sizeof err);
  if (rc) {
    if (err[0]) bg_warn("beagleCreateInstance: %s", err);
    return rc;
  }
  if (returnInfo) {
    static char *const impl[2] = {"ember-plf-Double", "ember-plf-Single"};
    const BeagleResourceList *l = beagleGetResourceList();
    returnInfo->resourceNumber = chosen;
    returnInfo->resourceName = l->list[chosen].name;
    returnInfo->implName = impl[single];
    returnInfo->implDescription =
        "BEAGLE's operations on ember's plf accelerator, one state block "
        "per instance, queued calls sent as one task per result";
    returnInfo->flags = flags;
  }
  return in->id;
}

int beagleFinalizeInstance(int instance) {
  return bg_instance_finalize(instance);
}

int beagleSetCPUThreadCount(int instance, int threadCount) {
  GET_OR_RETURN(in, instance);
  if (threadCount < 1) return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  in->threads = threadCount > 1024 ? 1024u : (unsigned)threadCount;
  return done(in, BEAGLE_SUCCESS);
}

/* ---- data ------------------------------------------------------------------ */

int beagleSetTipStates(int instance, int tipIndex, const int *inStates) {
  GET_OR_RETURN(in, instance);
  if (!bg_in_range(tipIndex, in->tips)) return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  if (!inStates) return done(in, BEAGLE_ERROR_GENERAL);
  size_t bytes = (size_t)in->patterns * sizeof(int32_t);
  int32_t *st = malloc(bytes);
  if (!st) return done(in, BEAGLE_ERROR_OUT_OF_MEMORY);
  /* BEAGLE reads a state past the last as missing data */
  for (int p = 0; p < in->patterns; p++)
    st[p] = inStates[p] >= 0 && inStates[p] < in->states ? inStates[p]
                                                          : in->states;
  Ember__Plf__SetTipStates *m = bg_alloc(in, sizeof *m);
  int rc = m ? BEAGLE_SUCCESS : BEAGLE_ERROR_OUT_OF_MEMORY;
  if (m) {
    ember__plf__set_tip_states__init(m);
    m->tip = (uint32_t)tipIndex;
    if (bytes >= (1u << 20)) {
      rc = bg_input(in, st, bytes, &m->from);
    } else {
      m->has_states = 1;
      m->states.len = bytes;
      m->states.data = bg_copy(in, st, bytes);
      if (!m->states.data) rc = BEAGLE_ERROR_OUT_OF_MEMORY;
    }
  }
  free(st);
  Ember__Plf__Op *op = rc ? NULL : bg_push(in, m->from ? 16 : bytes);
  if (!rc && !op) rc = BEAGLE_ERROR_OUT_OF_MEMORY;
  if (op) {
    op->op_case = EMBER__PLF__OP__OP_TIP_STATES;
    op->tip_states = m;
    rc = bg_maybe_flush(in);
  }
  return done(in, rc);
}

/* A partials buffer from n doubles (tip: one category's worth). */
static int set_partials(bg_instance *in, int buffer, const double *values,
                        size_t n, int tip) {
  Ember__Plf__SetPartials *m = bg_alloc(in, sizeof *m);
  if (!m) return BEAGLE_ERROR_OUT_OF_MEMORY;
  ember__plf__set_partials__init(m);
  m->buffer = (uint32_t)buffer;
  m->tip = tip;
  m->has_tip = tip;
  size_t bytes = n * sizeof(double);
  int rc = BEAGLE_SUCCESS;
  if (bytes >= (1u << 20)) {
    rc = bg_input(in, values, bytes, &m->from);
  } else {
    m->n_values = n;
    m->values = bg_copy(in, values, bytes);
    if (!m->values) rc = BEAGLE_ERROR_OUT_OF_MEMORY;
  }
  if (rc) return rc;
  Ember__Plf__Op *op = bg_push(in, m->from ? 16 : bytes);
  if (!op) return BEAGLE_ERROR_OUT_OF_MEMORY;
  op->op_case = EMBER__PLF__OP__OP_PARTIALS;
  op->partials = m;
  return bg_maybe_flush(in);
}

int beagleSetTipPartials(int instance, int tipIndex,
                         const double *inPartials) {
  GET_OR_RETURN(in, instance);
  if (!bg_in_range(tipIndex, in->tips)) return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  if (!inPartials) return done(in, BEAGLE_ERROR_GENERAL);
  return done(in, set_partials(in, tipIndex, inPartials,
                               (size_t)in->patterns * in->states, 1));
}

int beagleSetPartials(int instance, int bufferIndex,
                      const double *inPartials) {
  GET_OR_RETURN(in, instance);
  if (!bg_in_range(bufferIndex, in->buffers))
    return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  if (!inPartials) return done(in, BEAGLE_ERROR_GENERAL);
  return done(in, set_partials(in, bufferIndex, inPartials,
                               (size_t)in->categories * in->patterns *
                                   in->states, 0));
}

/* Queue a Get and send the queue; *values gets the result's values (n of
 * them), owned by *result. */
static int get_values(bg_instance *in, Ember__Plf__Get__Kind kind,
                      int index, size_t n, Ember__Plf__Result **result) {
  Ember__Plf__Get *m = bg_alloc(in, sizeof *m);
  Ember__Plf__Op *op = m ? bg_push(in, 8) : NULL;
  if (!op) return BEAGLE_ERROR_OUT_OF_MEMORY;
  ember__plf__get__init(m);
  m->kind = kind;
  m->has_index = 1;
  m->index = (uint32_t)index;
  op->op_case = EMBER__PLF__OP__OP_GET;
  op->get = m;
  int rc = bg_flush(in, result);
  if (rc) return rc;
  if ((*result)->n_values < n) {
    bg_warn("instance %d: %zu values back, not %zu", in->id,
            (*result)->n_values, n);
    ember__plf__result__free_unpacked(*result, NULL);
    *result = NULL;
    return BEAGLE_ERROR_GENERAL;
  }
  return BEAGLE_SUCCESS;
}

int beagleGetPartials(int instance, int bufferIndex, int scaleIndex,
                      double *outPartials) {
  GET_OR_RETURN(in, instance);
  if (!bg_in_range(bufferIndex, in->buffers) ||
      !bg_opt_in_range(scaleIndex, in->scale_buffers))
    return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  size_t ps = (size_t)in->patterns * in->states;
  size_t n = ps * in->categories;
  Ember__Plf__Result *r;
  int rc = get_values(in, EMBER__PLF__GET__KIND__PARTIALS, bufferIndex, n, &r);
  if (rc) return done(in, rc);
  memcpy(outPartials, r->values, n * sizeof *outPartials);
  ember__plf__result__free_unpacked(r, NULL);
  if (scaleIndex != BEAGLE_OP_NONE) {
    /* back to unscaled values: times exp of the (log) cumulative factors */
    rc = get_values(in, EMBER__PLF__GET__KIND__SCALE, scaleIndex,
                    (size_t)in->patterns, &r);
    if (rc) return done(in, rc);
    for (int c = 0; c < in->categories; c++)
      for (int p = 0; p < in->patterns; p++) {
        double f = exp(r->values[p]);
        double *v = outPartials + (size_t)c * ps + (size_t)p * in->states;
        for (int s = 0; s < in->states; s++) v[s] *= f;
      }
    ember__plf__result__free_unpacked(r, NULL);
  }
  return done(in, BEAGLE_SUCCESS);
}

int beagleSetEigenDecomposition(int instance, int eigenIndex,
                                const double *inEigenVectors,
                                const double *inInverseEigenVectors,
                                const double *inEigenValues) {
  GET_OR_RETURN(in, instance);
  if (!bg_in_range(eigenIndex, in->eigens))
    return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  size_t S = (size_t)in->states, ss = S * S;
  Ember__Plf__SetEigen *m = bg_alloc(in, sizeof *m);
  Ember__Plf__Op *op = m ? bg_push(in, (2 * ss + S) * 8) : NULL;
  if (!op) return done(in, BEAGLE_ERROR_OUT_OF_MEMORY);
  ember__plf__set_eigen__init(m);
  m->eigen = (uint32_t)eigenIndex;
  m->n_vectors = m->n_inverse = ss;
  m->n_values = S;
  m->vectors = bg_copy(in, inEigenVectors, ss * sizeof(double));
  m->values = bg_copy(in, inEigenValues, S * sizeof(double));
  m->inverse = bg_alloc(in, ss * sizeof(double));
  if (!m->vectors || !m->values || !m->inverse)
    return done(in, BEAGLE_ERROR_OUT_OF_MEMORY);
  for (size_t i = 0; i < S; i++)
    for (size_t j = 0; j < S; j++)
      m->inverse[i * S + j] = in->inv_transposed
                                  ? inInverseEigenVectors[j * S + i]
                                  : inInverseEigenVectors[i * S + j];
  op->op_case = EMBER__PLF__OP__OP_EIGEN;
  op->eigen = m;
  return done(in, bg_maybe_flush(in));
}

static int set_vector(bg_instance *in, Ember__Plf__SetVector__Kind kind,
                      int index, const double *values, size_t n) {
  Ember__Plf__SetVector *m = bg_alloc(in, sizeof *m);
  Ember__Plf__Op *op = m ? bg_push(in, n * 8) : NULL;
  if (!op) return BEAGLE_ERROR_OUT_OF_MEMORY;
  ember__plf__set_vector__init(m);
  m->kind = kind;
  m->has_index = 1;
  m->index = (uint32_t)index;
  m->n_values = n;
  m->values = bg_copy(in, values, n * sizeof(double));
  if (!m->values) return BEAGLE_ERROR_OUT_OF_MEMORY;
  op->op_case = EMBER__PLF__OP__OP_VECTOR;
  op->vector = m;
  return bg_maybe_flush(in);
}

int beagleSetStateFrequencies(int instance, int stateFrequenciesIndex,
                              const double *inStateFrequencies) {
  GET_OR_RETURN(in, instance);
  if (!bg_in_range(stateFrequenciesIndex, in->eigens))
    return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  return done(in, set_vector(in, EMBER__PLF__SET_VECTOR__KIND__FREQUENCIES,
                             stateFrequenciesIndex, inStateFrequencies,
                             (size_t)in->states));
}

int beagleSetCategoryWeights(int instance, int categoryWeightsIndex,
                             const double *inCategoryWeights) {
  GET_OR_RETURN(in, instance);
  if (!bg_in_range(categoryWeightsIndex, in->eigens))
    return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  return done(in, set_vector(in,
                             EMBER__PLF__SET_VECTOR__KIND__CATEGORY_WEIGHTS,
                             categoryWeightsIndex, inCategoryWeights,
                             (size_t)in->categories));
}

int beagleSetCategoryRates(int instance, const double *inCategoryRates) {
  return beagleSetCategoryRatesWithIndex(instance, 0, inCategoryRates);
}

int beagleSetCategoryRatesWithIndex(int instance, int categoryRatesIndex,
                                    const double *inCategoryRates) {
  GET_OR_RETURN(in, instance);
  if (!bg_in_range(categoryRatesIndex, in->eigens))
    return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  return done(in, set_vector(in, EMBER__PLF__SET_VECTOR__KIND__CATEGORY_RATES,
                             categoryRatesIndex, inCategoryRates,
                             (size_t)in->categories));
}

int beagleSetPatternWeights(int instance, const double *inPatternWeights) {
  GET_OR_RETURN(in, instance);
  memcpy(in->pattern_weights, inPatternWeights,
         (size_t)in->patterns * sizeof(double));
  return done(in, set_vector(in, EMBER__PLF__SET_VECTOR__KIND__PATTERN_WEIGHTS,
                             0, inPatternWeights, (size_t)in->patterns));
}

int beagleSetPatternPartitions(int instance, int partitionCount,
                               const int *inPatternPartitions) {
  GET_OR_RETURN(in, instance);
  if (partitionCount < 1 || partitionCount > in->partitions_max)
    return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  uint32_t *of = bg_alloc(in, (size_t)in->patterns * sizeof *of);
  uint8_t *seen = calloc((size_t)partitionCount, 1);
  if (!of || !seen) {
    free(seen);
    return done(in, BEAGLE_ERROR_OUT_OF_MEMORY);
  }
  int rc = BEAGLE_SUCCESS;
  for (int p = 0; p < in->patterns && !rc; p++) {
    int v = inPatternPartitions[p];
    if (v < 0 || v >= partitionCount)
      rc = BEAGLE_ERROR_OUT_OF_RANGE;
    else if (p > 0 && v != inPatternPartitions[p - 1] && seen[v])
      rc = BEAGLE_ERROR_NO_IMPLEMENTATION;   /* plf: contiguous partitions */
    else
      seen[v] = 1;
    of[p] = (uint32_t)v;
  }
  free(seen);
  if (rc) return done(in, rc);
  Ember__Plf__SetPartitions *m = bg_alloc(in, sizeof *m);
  Ember__Plf__Op *op = m ? bg_push(in, (size_t)in->patterns * 2) : NULL;
  if (!op) return done(in, BEAGLE_ERROR_OUT_OF_MEMORY);
  ember__plf__set_partitions__init(m);
  m->n_of = (size_t)in->patterns;
  m->of = of;
  op->op_case = EMBER__PLF__OP__OP_PARTITIONS;
  op->partitions = m;
  in->partition_count = partitionCount;
  return done(in, bg_maybe_flush(in));
}

/* ---- transition matrices ---------------------------------------------------- */

int beagleConvolveTransitionMatrices(int instance, const int *firstIndices,
                                     const int *secondIndices,
                                     const int *resultIndices,
                                     int matrixCount) {
  GET_OR_RETURN(in, instance);
  /* plf.proto has no matrix product */
  return done(in, BEAGLE_ERROR_NO_IMPLEMENTATION);
}

/* n indices (checked) as the queue's uint32s, their count into *count;
 * NULL when out of memory. */
static uint32_t *indices_of(bg_instance *in, const int *src, size_t n,
                            size_t *count) {
  uint32_t *dst = bg_alloc(in, n * sizeof *dst);
  if (!dst) return NULL;
  for (size_t i = 0; i < n; i++) dst[i] = (uint32_t)src[i];
  *count = n;
  return dst;
}

/* P(t) for count matrices; eigens, rates: one index for all (n_sets 1)
 * or one per matrix; and dP/dt, d2P/dt2 where their indices are given. */
static int update_matrices(bg_instance *in, const int *eigens,
                           const int *rates, size_t n_sets,
                           const int *probabilityIndices,
                           const int *firstDerivativeIndices,
                           const int *secondDerivativeIndices,
                           const double *edgeLengths, int count) {
  if ((firstDerivativeIndices || secondDerivativeIndices) &&
      !bg_derivatives_here(in))
    return BEAGLE_ERROR_NO_IMPLEMENTATION;
  if (count < 0) return BEAGLE_ERROR_OUT_OF_RANGE;
  if (count == 0) return BEAGLE_SUCCESS;
  for (size_t i = 0; i < n_sets; i++)
    if (!bg_in_range(eigens[i], in->eigens) ||
        !bg_in_range(rates[i], in->eigens))
      return BEAGLE_ERROR_OUT_OF_RANGE;
  for (int i = 0; i < count; i++)
    if (!bg_in_range(probabilityIndices[i], in->matrices) ||
        (firstDerivativeIndices &&
         !bg_in_range(firstDerivativeIndices[i], in->matrices)) ||
        (secondDerivativeIndices &&
         !bg_in_range(secondDerivativeIndices[i], in->matrices)) ||
        !(edgeLengths[i] >= 0 && isfinite(edgeLengths[i])))
      return BEAGLE_ERROR_OUT_OF_RANGE;
  size_t n = (size_t)count;
  Ember__Plf__UpdateMatrices *m = bg_alloc(in, sizeof *m);
  Ember__Plf__Op *op = m ? bg_push(in, n * 20 + n_sets * 4) : NULL;
  if (!op) return BEAGLE_ERROR_OUT_OF_MEMORY;
  ember__plf__update_matrices__init(m);
  m->n_matrices = m->n_lengths = n;
  m->n_eigens = m->n_rate_sets = n_sets;
  m->matrices = bg_alloc(in, n * sizeof *m->matrices);
  m->lengths = bg_copy(in, edgeLengths, n * sizeof(double));
  m->eigens = bg_alloc(in, n_sets * sizeof *m->eigens);
  m->rate_sets = bg_alloc(in, n_sets * sizeof *m->rate_sets);
  if (!m->matrices || !m->lengths || !m->eigens || !m->rate_sets)
    return BEAGLE_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; i < n; i++) m->matrices[i] = (uint32_t)probabilityIndices[i];
  if ((firstDerivativeIndices &&
       !(m->first_derivatives = indices_of(in, firstDerivativeIndices, n,
                                           &m->n_first_derivatives))) ||
      (secondDerivativeIndices &&
       !(m->second_derivatives = indices_of(in, secondDerivativeIndices, n,
                                            &m->n_second_derivatives))))
    return BEAGLE_ERROR_OUT_OF_MEMORY;
  for (size_t i = 0; i < n_sets; i++) {
    m->eigens[i] = (uint32_t)eigens[i];
    m->rate_sets[i] = (uint32_t)rates[i];
  }
  op->op_case = EMBER__PLF__OP__OP_UPDATE_MATRICES;
  op->update_matrices = m;
  return bg_maybe_flush(in);
}

int beagleUpdateTransitionMatrices(int instance, int eigenIndex,
                                   const int *probabilityIndices,
                                   const int *firstDerivativeIndices,
                                   const int *secondDerivativeIndices,
                                   const double *edgeLengths, int count) {
  GET_OR_RETURN(in, instance);
  int rate = 0;
  return done(in, update_matrices(in, &eigenIndex, &rate, 1,
                                  probabilityIndices, firstDerivativeIndices,
                                  secondDerivativeIndices, edgeLengths,
                                  count));
}

int beagleUpdateTransitionMatricesWithMultipleModels(
    int instance, const int *eigenIndices, const int *categoryRateIndices,
    const int *probabilityIndices, const int *firstDerivativeIndices,
    const int *secondDerivativeIndices, const double *edgeLengths,
    int count) {
  GET_OR_RETURN(in, instance);
  if (count <= 0) return done(in, count < 0 ? BEAGLE_ERROR_OUT_OF_RANGE
                                            : BEAGLE_SUCCESS);
  return done(in, update_matrices(in, eigenIndices, categoryRateIndices,
                                  (size_t)count, probabilityIndices,
                                  firstDerivativeIndices,
                                  secondDerivativeIndices, edgeLengths,
                                  count));
}

static int set_matrix(bg_instance *in, int index, const double *values,
                      double padded) {
  if (!bg_in_range(index, in->matrices)) return BEAGLE_ERROR_OUT_OF_RANGE;
  size_t n = (size_t)in->categories * in->states * in->states;
  Ember__Plf__SetMatrix *m = bg_alloc(in, sizeof *m);
  Ember__Plf__Op *op = m ? bg_push(in, n * 8) : NULL;
  if (!op) return BEAGLE_ERROR_OUT_OF_MEMORY;
  ember__plf__set_matrix__init(m);
  m->matrix = (uint32_t)index;
  m->n_values = n;
  m->values = bg_copy(in, values, n * sizeof(double));
  m->has_padded_value = 1;
  m->padded_value = padded;
  if (!m->values) return BEAGLE_ERROR_OUT_OF_MEMORY;
  op->op_case = EMBER__PLF__OP__OP_MATRIX;
  op->matrix = m;
  return bg_maybe_flush(in);
}

int beagleSetTransitionMatrix(int instance, int matrixIndex,
                              const double *inMatrix, double paddedValue) {
  GET_OR_RETURN(in, instance);
  return done(in, set_matrix(in, matrixIndex, inMatrix, paddedValue));
}

int beagleSetTransitionMatrices(int instance, const int *matrixIndices,
                                const double *inMatrices,
                                const double *paddedValues, int count) {
  GET_OR_RETURN(in, instance);
  size_t n = (size_t)in->categories * in->states * in->states;
  for (int k = 0; k < count; k++)
    if (!bg_in_range(matrixIndices[k], in->matrices))
      return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  int rc = BEAGLE_SUCCESS;
  for (int k = 0; k < count && !rc; k++)
    rc = set_matrix(in, matrixIndices[k], inMatrices + (size_t)k * n,
                    paddedValues ? paddedValues[k] : 1.0);
  return done(in, rc);
}

int beagleGetTransitionMatrix(int instance, int matrixIndex,
                              double *outMatrix) {
  GET_OR_RETURN(in, instance);
  if (!bg_in_range(matrixIndex, in->matrices))
    return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  size_t n = (size_t)in->categories * in->states * in->states;
  Ember__Plf__Result *r;
  int rc = get_values(in, EMBER__PLF__GET__KIND__MATRIX, matrixIndex, n, &r);
  if (rc) return done(in, rc);
  memcpy(outMatrix, r->values, n * sizeof *outMatrix);
  ember__plf__result__free_unpacked(r, NULL);
  return done(in, BEAGLE_SUCCESS);
}

/* ---- partials ------------------------------------------------------------------ */

/* One BEAGLE operation as a plf PartialsOp, checked. */
static int partials_op(bg_instance *in, const int *o, int partition,
                       int cumulative, Ember__Plf__PartialsOp *p) {
  int dest = o[0], write = o[1], read = o[2], c1 = o[3], m1 = o[4],
      c2 = o[5], m2 = o[6];
  if (!bg_in_range(dest, in->buffers) || !bg_in_range(c1, in->buffers) ||
      !bg_in_range(c2, in->buffers) || !bg_in_range(m1, in->matrices) ||
      !bg_in_range(m2, in->matrices) ||
      !bg_opt_in_range(write, in->scale_buffers) ||
      !bg_opt_in_range(read, in->scale_buffers) ||
      !bg_opt_in_range(cumulative, in->scale_buffers) ||
      (partition != -1 &&
       !bg_in_range(partition, in->partition_count ? in->partition_count
                                                   : 1)))
    return BEAGLE_ERROR_OUT_OF_RANGE;
  /* plf computes out of place, and keeps a buffer's own factors apart
   * from the sums */
  if (dest == c1 || dest == c2) return BEAGLE_ERROR_OUT_OF_RANGE;
  ember__plf__partials_op__init(p);
  p->dest = (uint32_t)dest;
  p->child1 = (uint32_t)c1;
  p->matrix1 = (uint32_t)m1;
  p->child2 = (uint32_t)c2;
  p->matrix2 = (uint32_t)m2;
  if (write >= 0) {
    if (cumulative == write) return BEAGLE_ERROR_OUT_OF_RANGE;
    p->has_scale_write = 1;
    p->scale_write = write;
    if (cumulative >= 0) {
      p->has_cumulative_scale = 1;
      p->cumulative_scale = cumulative;
    }
  } else if (read >= 0) {
    p->has_scale_read = 1;
    p->scale_read = read;
  }
  if (partition >= 0) {
    p->has_partition = 1;
    p->partition = partition;
  }
  return BEAGLE_SUCCESS;
}

static int update_partials(bg_instance *in, const int *ops, int count,
                           int stride, int cumulative);
/* SCALING_ALWAYS/AUTO: each op rescales into its dest's scale buffer, then
 * adds its children's (their subtrees'), so that a node's buffer holds its
 * subtree's factors; the ops' own scale indices are not used. */
static int update_partials_auto(bg_instance *in, const int *ops, int count,
                                int stride) {
  for (int i = 0; i < count; i++) {
    const int *o = ops + (size_t)i * stride;
    int dest = o[0], partition = stride == 9 ? o[7] : -1;
    if (dest < in->tips || !bg_in_range(dest, in->buffers))
      return BEAGLE_ERROR_OUT_OF_RANGE;
    int op[9] = {dest, dest - in->tips, BEAGLE_OP_NONE, o[3], o[4], o[5],
                 o[6], partition, BEAGLE_OP_NONE};
    int rc = update_partials(in, op, 1, stride, BEAGLE_OP_NONE);
    if (rc) return rc;
    int below[2], n = 0;
    if (o[3] >= in->tips) below[n++] = o[3] - in->tips;
    if (o[5] >= in->tips) below[n++] = o[5] - in->tips;
    if (n && (rc = bg_scale_op(in, EMBER__PLF__SCALE_OP__KIND__ACCUMULATE,
                               below, n, dest - in->tips, partition)))
      return rc;
  }
  return BEAGLE_SUCCESS;
}

/* ops: count operations of stride ints each (7, or 9 by partition). */
static int update_partials(bg_instance *in, const int *ops, int count,
                           int stride, int cumulative) {
  if (count < 0) return BEAGLE_ERROR_OUT_OF_RANGE;
  if (count == 0) return BEAGLE_SUCCESS;
  Ember__Plf__UpdatePartials *m = bg_alloc(in, sizeof *m);
  Ember__Plf__PartialsOp *ps =
      m ? bg_alloc(in, (size_t)count * sizeof *ps) : NULL;
  Ember__Plf__PartialsOp **pp =
      ps ? bg_alloc(in, (size_t)count * sizeof *pp) : NULL;
  if (!pp) return BEAGLE_ERROR_OUT_OF_MEMORY;
  ember__plf__update_partials__init(m);
  for (int i = 0; i < count; i++) {
    const int *o = ops + (size_t)i * stride;
    int partition = stride == 9 ? o[7] : -1;
    int cum = stride == 9 ? o[8] : cumulative;
    int rc = partials_op(in, o, partition, cum, &ps[i]);
    if (rc) return rc;
    pp[i] = &ps[i];
  }
  /* a buffer written by a rescale holds a node's factors: RAW scalers
   * read them back as factors, not logs */
  for (int i = 0; i < count; i++) {
    if (ps[i].scale_write >= 0) in->scale_raw[ps[i].scale_write] = 1;
    if (ps[i].cumulative_scale >= 0) in->scale_raw[ps[i].cumulative_scale] = 0;
  }
  Ember__Plf__Op *op = bg_push(in, (size_t)count * 24);
  if (!op) return BEAGLE_ERROR_OUT_OF_MEMORY;
  m->n_ops = (size_t)count;
  m->ops = pp;
  op->op_case = EMBER__PLF__OP__OP_UPDATE_PARTIALS;
  op->update_partials = m;
  return bg_maybe_flush(in);
}

int beagleUpdatePartials(const int instance, const BeagleOperation *operations,
                         int operationCount, int cumulativeScaleIndex) {
  GET_OR_RETURN(in, instance);
  if (!bg_opt_in_range(cumulativeScaleIndex, in->scale_buffers))
    return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  _Static_assert(sizeof(BeagleOperation) == 7 * sizeof(int),
                 "BeagleOperation is seven ints");
  if (in->auto_scale)
    return done(in, update_partials_auto(in, (const int *)operations,
                                         operationCount, 7));
  return done(in, update_partials(in, (const int *)operations,
                                  operationCount, 7, cumulativeScaleIndex));
}

int beagleUpdatePartialsByPartition(
    const int instance, const BeagleOperationByPartition *operations,
    int operationCount) {
  GET_OR_RETURN(in, instance);
  _Static_assert(sizeof(BeagleOperationByPartition) == 9 * sizeof(int),
                 "BeagleOperationByPartition is nine ints");
  if (in->auto_scale)
    return done(in, update_partials_auto(in, (const int *)operations,
                                         operationCount, 9));
  return done(in, update_partials(in, (const int *)operations,
                                  operationCount, 9, -1));
}

int beagleWaitForPartials(const int instance, const int *destinationPartials,
                          int destinationPartialsCount) {
  GET_OR_RETURN(in, instance);
  /* every call that returns values waits for what it needs */
  return done(in, BEAGLE_SUCCESS);
}

/* ---- scale factors ----------------------------------------------------------- */

int bg_scale_op(bg_instance *in, Ember__Plf__ScaleOp__Kind kind,
                const int *scales, int count, int cumulative, int partition) {
  if (!bg_in_range(cumulative, in->scale_buffers) || count < 0 ||
      (partition != -1 &&
       !bg_in_range(partition, in->partition_count ? in->partition_count
                                                   : 1)))
    return BEAGLE_ERROR_OUT_OF_RANGE;
  for (int i = 0; i < count; i++)
    if (!bg_in_range(scales[i], in->scale_buffers) || scales[i] == cumulative)
      return BEAGLE_ERROR_OUT_OF_RANGE;
  if (kind != EMBER__PLF__SCALE_OP__KIND__RESET && count == 0)
    return BEAGLE_SUCCESS;
  Ember__Plf__ScaleOp *m = bg_alloc(in, sizeof *m);
  Ember__Plf__Op *op = m ? bg_push(in, (size_t)count * 4 + 8) : NULL;
  if (!op) return BEAGLE_ERROR_OUT_OF_MEMORY;
  ember__plf__scale_op__init(m);
  m->kind = kind;
  m->cumulative = (uint32_t)cumulative;
  m->n_scales = (size_t)count;
  m->scales = bg_alloc(in, ((size_t)count + 1) * sizeof *m->scales);
  if (!m->scales) return BEAGLE_ERROR_OUT_OF_MEMORY;
  for (int i = 0; i < count; i++) m->scales[i] = (uint32_t)scales[i];
  if (partition >= 0) {
    m->has_partition = 1;
    m->partition = partition;
  }
  op->op_case = EMBER__PLF__OP__OP_SCALE;
  op->scale = m;
  if (kind == EMBER__PLF__SCALE_OP__KIND__COPY)
    in->scale_raw[cumulative] = in->scale_raw[scales[0]];
  else
    in->scale_raw[cumulative] = 0;
  return bg_maybe_flush(in);
}

int beagleAccumulateScaleFactors(int instance, const int *scaleIndices,
                                 int count, int cumulativeScaleIndex) {
  GET_OR_RETURN(in, instance);
  return done(in, bg_scale_op(in, EMBER__PLF__SCALE_OP__KIND__ACCUMULATE,
                              scaleIndices, count, cumulativeScaleIndex, -1));
}

int beagleAccumulateScaleFactorsByPartition(int instance,
                                            const int *scaleIndices,
                                            int count,
                                            int cumulativeScaleIndex,
                                            int partitionIndex) {
  GET_OR_RETURN(in, instance);
  if (partitionIndex < 0) return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  return done(in, bg_scale_op(in, EMBER__PLF__SCALE_OP__KIND__ACCUMULATE,
                              scaleIndices, count, cumulativeScaleIndex,
                              partitionIndex));
}

int beagleRemoveScaleFactors(int instance, const int *scaleIndices,
                             int count, int cumulativeScaleIndex) {
  GET_OR_RETURN(in, instance);
  return done(in, bg_scale_op(in, EMBER__PLF__SCALE_OP__KIND__REMOVE,
                              scaleIndices, count, cumulativeScaleIndex, -1));
}

int beagleRemoveScaleFactorsByPartition(int instance, const int *scaleIndices,
                                        int count, int cumulativeScaleIndex,
                                        int partitionIndex) {
  GET_OR_RETURN(in, instance);
  if (partitionIndex < 0) return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  return done(in, bg_scale_op(in, EMBER__PLF__SCALE_OP__KIND__REMOVE,
                              scaleIndices, count, cumulativeScaleIndex,
                              partitionIndex));
}

int beagleResetScaleFactors(int instance, int cumulativeScaleIndex) {
  GET_OR_RETURN(in, instance);
  return done(in, bg_scale_op(in, EMBER__PLF__SCALE_OP__KIND__RESET, NULL, 0,
                              cumulativeScaleIndex, -1));
}

int beagleResetScaleFactorsByPartition(int instance, int cumulativeScaleIndex,
                                       int partitionIndex) {
  GET_OR_RETURN(in, instance);
  if (partitionIndex < 0) return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  return done(in, bg_scale_op(in, EMBER__PLF__SCALE_OP__KIND__RESET, NULL, 0,
                              cumulativeScaleIndex, partitionIndex));
}

int beagleCopyScaleFactors(int instance, int destScalingIndex,
                           int srcScalingIndex) {
  GET_OR_RETURN(in, instance);
  if (!bg_in_range(destScalingIndex, in->scale_buffers) ||
      !bg_in_range(srcScalingIndex, in->scale_buffers))
    return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  if (destScalingIndex == srcScalingIndex) return done(in, BEAGLE_SUCCESS);
  return done(in, bg_scale_op(in, EMBER__PLF__SCALE_OP__KIND__COPY,
                              &srcScalingIndex, 1, destScalingIndex, -1));
}

int beagleGetScaleFactors(int instance, int srcScalingIndex,
                          double *outScaleFactors) {
  GET_OR_RETURN(in, instance);
  if (!bg_in_range(srcScalingIndex, in->scale_buffers))
    return done(in, BEAGLE_ERROR_OUT_OF_RANGE);
  Ember__Plf__Result *r;
  int rc = get_values(in, EMBER__PLF__GET__KIND__SCALE, srcScalingIndex,
                      (size_t)in->patterns, &r);
  if (rc) return done(in, rc);
  /* plf keeps logs; RAW scalers give a node's factors themselves */
  int raw = !in->log_scalers && in->scale_raw[srcScalingIndex];
  for (int p = 0; p < in->patterns; p++)
    outScaleFactors[p] = raw ? exp(r->values[p]) : r->values[p];
  ember__plf__result__free_unpacked(r, NULL);
  return done(in, BEAGLE_SUCCESS);
}
