/* plf_task.c - decoding and checking a plf task (plf_task.h). */
#include "plf_task.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "ember/ember_errors.h"

/* Context for the checks: the shape, the inputs, where the error goes. */
typedef struct checker {
  const plf_task *t;
  const acc_block *inputs;
  size_t n_inputs;
  size_t op;                    /* index of the op being checked */
  char *err;
  size_t err_len;
} checker;

static int fail(checker *c, const char *fmt, ...) {
  int n = snprintf(c->err, c->err_len, "op %zu: ", c->op);
  if (n < 0 || (size_t)n >= c->err_len) return EMBER_EPARAM;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->err + n, c->err_len - (size_t)n, fmt, ap);
  va_end(ap);
  return EMBER_EPARAM;
}

static int index_ok(checker *c, const char *what, uint64_t i, uint64_t n) {
  return i < n ? 0 : fail(c, "%s %llu out of range (%llu)", what,
                          (unsigned long long)i, (unsigned long long)n);
}

/* An optional index: -1 means none. */
static int opt_index_ok(checker *c, const char *what, int32_t i, uint64_t n) {
  if (i == -1) return 0;
  if (i < 0) return fail(c, "%s %d is negative", what, (int)i);
  return index_ok(c, what, (uint64_t)i, n);
}

/* A buffer whose partials the op writes or reads whatever the buffer
 * holds: not a states-only tip, which has none. */
static int has_partials(checker *c, const char *what, uint32_t b) {
  if (b >= c->t->shape.states_only) return 0;
  return fail(c, "%s %u is a states-only tip (below %u): it has no "
              "partials", what, b, c->t->shape.states_only);
}

static int count_ok(checker *c, const char *what, size_t got, uint64_t want) {
  return got == want ? 0 : fail(c, "%s: %zu values, not %llu", what, got,
                                (unsigned long long)want);
}

/* Values from the task, or a slice of an input block of bytes bytes. */
static int source_ok(checker *c, const char *what, size_t n_values,
                     int has_values, const Ember__Plf__InputSlice *from,
                     uint64_t count, uint64_t bytes) {
  if (has_values == (from != NULL))
    return fail(c, "%s: give the values or an input slice, one of them",
                what);
  if (!from) return count_ok(c, what, n_values, count);
  if (from->input >= c->n_inputs)
    return fail(c, "%s: input %u of %zu", what, from->input, c->n_inputs);
  uint64_t size = c->inputs[from->input].size;
  if (from->offset > size || size - from->offset < bytes)
    return fail(c, "%s: %llu bytes at offset %llu of input %u (%llu bytes)",
                what, (unsigned long long)bytes,
                (unsigned long long)from->offset, from->input,
                (unsigned long long)size);
  if (from->offset % 4)
    return fail(c, "%s: input offset %llu not 4-byte aligned", what,
                (unsigned long long)from->offset);
  return 0;
}

static int check_partitions(checker *c, const Ember__Plf__SetPartitions *m) {
  const plf_shape *s = &c->t->shape;
  int rc = count_ok(c, "partitions", m->n_of, s->patterns);
  if (rc) return rc;
  /* each partition one run of patterns: a value never comes back */
  uint8_t *seen = calloc(s->partitions, 1);
  if (!seen) return EMBER_ENOMEM;
  for (size_t i = 0; i < m->n_of && !rc; i++) {
    if (m->of[i] >= s->partitions)
      rc = fail(c, "pattern %zu in partition %u of %u", i, m->of[i],
                s->partitions);
    else if (i > 0 && m->of[i] != m->of[i - 1] && seen[m->of[i]])
      rc = fail(c, "partition %u's patterns are not contiguous", m->of[i]);
    else
      seen[m->of[i]] = 1;
  }
  free(seen);
  return rc;
}

static int check_update_matrices(checker *c,
                                 const Ember__Plf__UpdateMatrices *m) {
  const plf_shape *s = &c->t->shape;
  size_t n = m->n_matrices;
  if (m->n_lengths != n)
    return fail(c, "%zu matrices and %zu lengths", n, m->n_lengths);
  if (m->n_eigens > 1 && m->n_eigens != n)
    return fail(c, "%zu eigen indices for %zu matrices", m->n_eigens, n);
  if (m->n_rate_sets > 1 && m->n_rate_sets != n)
    return fail(c, "%zu rate sets for %zu matrices", m->n_rate_sets, n);
  int rc = 0;
  for (size_t i = 0; i < n && !rc; i++) {
    rc = index_ok(c, "matrix", m->matrices[i], s->matrices);
    if (!rc && !(m->lengths[i] >= 0 && isfinite(m->lengths[i])))
      rc = fail(c, "branch length %g", m->lengths[i]);
  }
  for (size_t i = 0; i < m->n_eigens && !rc; i++)
    rc = index_ok(c, "eigen", m->eigens[i], s->eigens);
  for (size_t i = 0; i < m->n_rate_sets && !rc; i++)
    rc = index_ok(c, "rate set", m->rate_sets[i], s->rate_sets);
  if (!rc && m->n_first_derivatives && m->n_first_derivatives != n)
    rc = fail(c, "%zu first derivatives for %zu matrices",
              m->n_first_derivatives, n);
  if (!rc && m->n_second_derivatives && m->n_second_derivatives != n)
    rc = fail(c, "%zu second derivatives for %zu matrices",
              m->n_second_derivatives, n);
  for (size_t i = 0; i < m->n_first_derivatives && !rc; i++)
    rc = index_ok(c, "first derivative matrix", m->first_derivatives[i],
                  s->matrices);
  for (size_t i = 0; i < m->n_second_derivatives && !rc; i++)
    rc = index_ok(c, "second derivative matrix", m->second_derivatives[i],
                  s->matrices);
  return rc;
}

static int check_partials_op(checker *c, const Ember__Plf__PartialsOp *o) {
  const plf_shape *s = &c->t->shape;
  int rc = index_ok(c, "destination", o->dest, s->partials);
  if (!rc) rc = has_partials(c, "destination", o->dest);
  if (!rc) rc = index_ok(c, "child", o->child1, s->partials);
  if (!rc) rc = index_ok(c, "child", o->child2, s->partials);
  if (!rc && (o->dest == o->child1 || o->dest == o->child2))
    rc = fail(c, "buffer %u is both destination and child", o->dest);
  if (!rc) rc = index_ok(c, "matrix", o->matrix1, s->matrices);
  if (!rc) rc = index_ok(c, "matrix", o->matrix2, s->matrices);
  if (!rc) rc = opt_index_ok(c, "scale buffer", o->scale_write,
                             s->scale_buffers);
  /* scale_read (BEAGLE's fixed scaling) applies only without scale_write */
  if (!rc) rc = opt_index_ok(c, "scale buffer to read", o->scale_read,
                             s->scale_buffers);
  if (!rc) rc = opt_index_ok(c, "cumulative scale buffer",
                             o->cumulative_scale, s->scale_buffers);
  if (!rc && o->cumulative_scale >= 0 &&
      (o->cumulative_scale == o->scale_write ||
       o->cumulative_scale == o->scale_read))
    rc = fail(c, "scale buffer %d is both cumulative and the op's own",
              (int)o->cumulative_scale);
  if (!rc) rc = opt_index_ok(c, "partition", o->partition, s->partitions);
  return rc;
}

static int check_scale(checker *c, const Ember__Plf__ScaleOp *m) {
  const plf_shape *s = &c->t->shape;
  int rc = index_ok(c, "cumulative scale buffer", m->cumulative,
                    s->scale_buffers);
  for (size_t i = 0; i < m->n_scales && !rc; i++) {
    rc = index_ok(c, "scale buffer", m->scales[i], s->scale_buffers);
    if (!rc && m->scales[i] == m->cumulative)
      rc = fail(c, "scale buffer %u is its own cumulative", m->cumulative);
  }
  if (!rc && m->kind == EMBER__PLF__SCALE_OP__KIND__COPY && m->n_scales != 1)
    rc = fail(c, "a copy names one scale buffer, not %zu", m->n_scales);
  if (!rc) rc = opt_index_ok(c, "partition", m->partition, s->partitions);
  return rc;
}

static int check_lnl(checker *c, const Ember__Plf__Lnl *m) {
  const plf_shape *s = &c->t->shape;
  if (m->n_terms == 0) return fail(c, "a log-likelihood of no terms");
  int rc = 0;
  for (size_t i = 0; i < m->n_terms && !rc; i++) {
    const Ember__Plf__LnlTerm *t = m->terms[i];
    rc = index_ok(c, "buffer", t->buffer, s->partials);
    if (!rc) rc = has_partials(c, "buffer", t->buffer);
    if (!rc) rc = opt_index_ok(c, "child", t->child, s->partials);
    if (!rc) rc = opt_index_ok(c, "matrix", t->matrix, s->matrices);
    if (!rc && (t->child >= 0) != (t->matrix >= 0))
      rc = fail(c, "an edge names both its child and its matrix");
    if (!rc && t->child >= 0 && (uint32_t)t->child == t->buffer)
      rc = fail(c, "an edge from buffer %u to itself", t->buffer);
    if (!rc) rc = index_ok(c, "category weights", t->weights, s->eigens);
    if (!rc) rc = index_ok(c, "frequencies", t->frequencies, s->eigens);
    if (!rc) rc = opt_index_ok(c, "cumulative scale buffer",
                               t->cumulative_scale, s->scale_buffers);
    if (!rc) rc = opt_index_ok(c, "partition", t->partition, s->partitions);
    if (!rc) rc = opt_index_ok(c, "first derivative matrix",
                               t->first_derivative, s->matrices);
    if (!rc) rc = opt_index_ok(c, "second derivative matrix",
                               t->second_derivative, s->matrices);
    if (!rc && plf_term_derivatives(t) &&
        (t->child < 0 || m->n_terms != 1 || m->by_partition))
      rc = fail(c, "derivatives: one edge term, summed");
  }
  return rc;
}

static int check_vector(checker *c, const Ember__Plf__SetVector *m) {
  const plf_shape *s = &c->t->shape;
  switch (m->kind) {
  case EMBER__PLF__SET_VECTOR__KIND__FREQUENCIES:
    if (index_ok(c, "frequency set", m->index, s->eigens)) return EMBER_EPARAM;
    return count_ok(c, "frequencies", m->n_values, s->states);
  case EMBER__PLF__SET_VECTOR__KIND__CATEGORY_WEIGHTS:
    if (index_ok(c, "weight set", m->index, s->eigens)) return EMBER_EPARAM;
    return count_ok(c, "category weights", m->n_values, s->categories);
  case EMBER__PLF__SET_VECTOR__KIND__CATEGORY_RATES:
    if (index_ok(c, "rate set", m->index, s->rate_sets)) return EMBER_EPARAM;
    return count_ok(c, "category rates", m->n_values, s->categories);
  case EMBER__PLF__SET_VECTOR__KIND__PATTERN_WEIGHTS:
    return count_ok(c, "pattern weights", m->n_values, s->patterns);
  default:
    return fail(c, "unknown vector kind %d", (int)m->kind);
  }
}

static int check_get(checker *c, const Ember__Plf__Get *m, size_t *values) {
  const plf_shape *s = &c->t->shape;
  uint64_t n = 0, bound = 1;
  switch (m->kind) {
  case EMBER__PLF__GET__KIND__PARTIALS:
    n = (uint64_t)s->categories * s->patterns * s->states;
    bound = s->partials;
    break;
  case EMBER__PLF__GET__KIND__SCALE:
    n = s->patterns;
    bound = s->scale_buffers;
    break;
  case EMBER__PLF__GET__KIND__SITE_LNL:
    n = s->patterns;
    break;
  case EMBER__PLF__GET__KIND__MATRIX:
    n = (uint64_t)s->categories * s->states * s->states;
    bound = s->matrices;
    break;
  default:
    return fail(c, "unknown get kind %d", (int)m->kind);
  }
  if (index_ok(c, "buffer", m->index, bound)) return EMBER_EPARAM;
  if (m->kind == EMBER__PLF__GET__KIND__PARTIALS &&
      has_partials(c, "buffer", m->index))
    return EMBER_EPARAM;
  *values += (size_t)n;
  return 0;
}

/* Adds one partials update over every pattern to the cost: two
 * matrix-vector products and a product per state, read two children and
 * two matrices, write one buffer. */
static void cost_partials(plf_task *t, const Ember__Plf__PartialsOp *o) {
  const plf_shape *s = &t->shape;
  uint64_t cps = (uint64_t)s->categories * s->patterns * s->states;
  uint64_t child = cps * t->layout.real;
  uint64_t tip = (uint64_t)s->patterns * sizeof(int32_t);
  t->cost.ops += cps * (4 * (uint64_t)s->states + 1);
  t->cost.bytes_read += (o->child1 < s->compact ? tip : child) +
                        (o->child2 < s->compact ? tip : child) +
                        2 * (uint64_t)t->layout.matrix_stride;
  t->cost.bytes_written += child;
  if (o->scale_write >= 0) t->cost.ops += cps;
}

static int check_op(checker *c, plf_task *t, const Ember__Plf__Op *op,
                    size_t *n_ops) {
  const plf_shape *s = &t->shape;
  const plf_layout *l = &t->layout;
  uint64_t cps = (uint64_t)s->categories * s->patterns * s->states;
  int rc;
  (*n_ops)++;
  switch (op->op_case) {
  case EMBER__PLF__OP__OP_TIP_STATES: {
    const Ember__Plf__SetTipStates *m = op->tip_states;
    if ((rc = index_ok(c, "compact tip", m->tip, s->compact))) return rc;
    uint64_t bytes = (uint64_t)s->patterns * sizeof(int32_t);
    if (m->has_states && m->states.len != bytes)
      return fail(c, "tip states: %zu bytes, not %llu", m->states.len,
                  (unsigned long long)bytes);
    return source_ok(c, "tip states", s->patterns, m->has_states, m->from,
                     s->patterns, bytes);
  }
  case EMBER__PLF__OP__OP_PARTIALS: {
    const Ember__Plf__SetPartials *m = op->partials;
    if ((rc = index_ok(c, "partials buffer", m->buffer, s->partials)) ||
        (rc = has_partials(c, "partials buffer", m->buffer)))
      return rc;
    uint64_t n = m->tip ? (uint64_t)s->patterns * s->states : cps;
    return source_ok(c, "partials", m->n_values, m->n_values > 0, m->from, n,
                     n * sizeof(double));
  }
  case EMBER__PLF__OP__OP_EIGEN: {
    const Ember__Plf__SetEigen *m = op->eigen;
    uint64_t ss = (uint64_t)s->states * s->states;
    if ((rc = index_ok(c, "eigen", m->eigen, s->eigens)) ||
        (rc = count_ok(c, "eigenvectors", m->n_vectors, ss)) ||
        (rc = count_ok(c, "inverse eigenvectors", m->n_inverse, ss)))
      return rc;
    return count_ok(c, "eigenvalues", m->n_values, s->states);
  }
  case EMBER__PLF__OP__OP_VECTOR:
    return check_vector(c, op->vector);
  case EMBER__PLF__OP__OP_PARTITIONS:
    return check_partitions(c, op->partitions);
  case EMBER__PLF__OP__OP_MATRIX:
    if ((rc = index_ok(c, "matrix", op->matrix->matrix, s->matrices)))
      return rc;
    return count_ok(c, "matrix", op->matrix->n_values,
                    (uint64_t)s->categories * s->states * s->states);
  case EMBER__PLF__OP__OP_UPDATE_MATRICES: {
    const Ember__Plf__UpdateMatrices *m = op->update_matrices;
    if ((rc = check_update_matrices(c, m))) return rc;
    *n_ops += m->n_matrices;
    uint64_t s3 = (uint64_t)s->states * s->states * s->states;
    t->cost.ops += m->n_matrices * s->categories * 2 * s3;
    t->cost.bytes_written += m->n_matrices * (uint64_t)l->matrix_stride;
    return 0;
  }
  case EMBER__PLF__OP__OP_UPDATE_PARTIALS: {
    const Ember__Plf__UpdatePartials *m = op->update_partials;
    for (size_t i = 0; i < m->n_ops; i++) {
      if ((rc = check_partials_op(c, m->ops[i]))) return rc;
      cost_partials(t, m->ops[i]);
    }
    *n_ops += m->n_ops;
    return 0;
  }
  case EMBER__PLF__OP__OP_SCALE: {
    const Ember__Plf__ScaleOp *m = op->scale;
    if ((rc = check_scale(c, m))) return rc;
    t->cost.ops += (m->n_scales + 1) * (uint64_t)s->patterns;
    t->cost.bytes_read += (m->n_scales + 1) * (uint64_t)l->scale_stride;
    t->cost.bytes_written += l->scale_stride;
    return 0;
  }
  case EMBER__PLF__OP__OP_LNL: {
    const Ember__Plf__Lnl *m = op->lnl;
    if ((rc = check_lnl(c, m))) return rc;
    *n_ops += m->n_terms;
    t->n_lnl += m->by_partition ? m->n_terms : 1;
    if (m->site_lnl) t->n_site_lnl += s->patterns;
    if (plf_term_derivatives(m->terms[0])) {
      t->n_derivatives++;
      if (m->site_lnl) t->n_site_derivatives += s->patterns;
    }
    for (size_t i = 0; i < m->n_terms; i++) {
      int32_t child = m->terms[i]->child;
      t->cost.ops += cps * (child >= 0 ? 2 * (uint64_t)s->states + 2 : 2);
      t->cost.bytes_read += l->partials_stride;
      if (child >= 0)
        t->cost.bytes_read += (uint32_t)child < s->compact
                                  ? (uint64_t)s->patterns * sizeof(int32_t)
                                  : (uint64_t)l->partials_stride;
    }
    return 0;
  }
  case EMBER__PLF__OP__OP_GET:
    return check_get(c, op->get, &t->n_values);
  default:
    return fail(c, "an operation of unknown kind");
  }
}

static void shape_of(const Ember__Plf__Instance *in, plf_shape *s) {
  s->states = in->states;
  s->patterns = in->patterns;
  s->categories = in->has_categories ? in->categories : 1;
  s->tips = in->tips;
  s->partials = in->partials;
  s->compact = in->has_compact ? in->compact : 0;
  s->eigens = in->has_eigens ? in->eigens : 1;
  s->matrices = in->matrices;
  s->scale_buffers = in->scale_buffers;
  s->rate_sets = in->has_category_rate_sets ? in->category_rate_sets : 1;
  s->partitions = in->has_partitions ? in->partitions : 1;
  s->single = in->precision == EMBER__PLF__PRECISION__SINGLE;
  s->states_only = in->has_states_only_tips ? in->states_only_tips : 0;
}

int plf_task_prepare(const uint8_t *params, size_t params_len,
                     const acc_block *inputs, size_t n_inputs,
                     plf_task **out, char *err, size_t err_len) {
  plf_task *t = calloc(1, sizeof *t);
  if (!t) return EMBER_ENOMEM;
  t->params = ember__plf__params__unpack(NULL, params_len, params);
  if (!t->params) {
    free(t);
    snprintf(err, err_len, "parameters: not a plf Params message");
    return EMBER_EPARAM;
  }
  shape_of(t->params->instance, &t->shape);
  int rc = plf_layout_compute(&t->shape, &t->layout, err, err_len);
  if (rc) goto fail;
  t->threads = t->params->threads ? t->params->threads : 1;
  if (t->threads > 1024) {
    snprintf(err, err_len, "threads %u: at most 1024", t->threads);
    rc = EMBER_EPARAM;
    goto fail;
  }
  checker c = {t, inputs, n_inputs, 0, err, err_len};
  size_t n_ops = 0;
  for (c.op = 0; c.op < t->params->n_ops; c.op++) {
    if ((rc = check_op(&c, t, t->params->ops[c.op], &n_ops))) goto fail;
    if (n_ops > PLF_MAX_OPS) {
      rc = fail(&c, "more than %u operations in one task", PLF_MAX_OPS);
      goto fail;
    }
  }
  *out = t;
  return 0;
fail:
  plf_task_free(t);
  return rc;
}

void plf_task_free(plf_task *t) {
  if (!t) return;
  ember__plf__params__free_unpacked(t->params, NULL);
  free(t);
}
