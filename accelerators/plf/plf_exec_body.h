/*
 * plf_exec_body.h - plf_exec.c's executor for one precision, included once
 * per precision with REAL (double or float) and SFX(name) (name_d or
 * name_f) defined. Every index was checked by plf_task_prepare.
 */

typedef struct SFX(exec) {
  const plf_task *t;
  uint8_t *st;                  /* the state block */
  const acc_block *in;
  const plf_kernels *k;
  plf_dims kd;
  plf_answers *out;
  size_t n_lnl, n_site, n_values;
  REAL *weights, *freqs;        /* one set, in REAL: C and S values */
  REAL *pattern_weights;        /* P values in REAL */
  double *pmat;                 /* C x S x S: P(t) before conversion */
  const REAL **scale_list;      /* the largest ScaleOp's buffers */
  char *err;
  size_t err_len;
} SFX(exec);

/* Partials buffer b: plf_task_prepare refused every op that writes or
 * always reads the partials of a states-only tip; child_of checks reads. */
static REAL *SFX(partials)(SFX(exec) *e, uint32_t b) {
  return (REAL *)(e->st + plf_partials_at(&e->t->layout, b));
}

static REAL *SFX(matrix)(SFX(exec) *e, uint32_t m) {
  return (REAL *)(e->st + e->t->layout.matrices +
                  (uint64_t)m * e->t->layout.matrix_stride);
}

static REAL *SFX(scale)(SFX(exec) *e, int32_t i) {
  if (i < 0) return NULL;
  return (REAL *)(e->st + e->t->layout.scales +
                  (uint64_t)i * e->t->layout.scale_stride);
}

static void SFX(convert)(REAL *dst, const double *src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = (REAL)src[i];
}

/* A child buffer as the kernels take it (*c): a tip's compact states when
 * it holds them, else its partials; with the matrices of the edge above
 * it. Returns 0, or EMBER_EPARAM for a states-only tip without states. */
static int SFX(child_of)(SFX(exec) *e, uint32_t b, uint32_t m,
                         SFX(plf_child) *c) {
  memset(c, 0, sizeof *c);
  c->matrices = SFX(matrix)(e, m);
  if (b < e->t->shape.compact && plf_tip_kinds(e->st, &e->t->layout)[b])
    c->states = plf_tip_states(e->st, &e->t->layout, e->t->shape.patterns, b);
  else if (b < e->t->shape.states_only)
    return plf_no_tip_states(e->err, e->err_len, b);
  else
    c->partials = SFX(partials)(e, b);
  return 0;
}

static int SFX(set_partials)(SFX(exec) *e, const Ember__Plf__SetPartials *m) {
  const plf_shape *s = &e->t->shape;
  size_t ps = (size_t)s->patterns * s->states;
  size_t n = m->tip ? ps : ps * s->categories;
  REAL *dst = SFX(partials)(e, m->buffer);
  if (m->from) {
    const uint8_t *src = plf_slice(e->in, m->from);
    if (!src) return plf_no_host(e->err, e->err_len, m->from->input);
    for (size_t i = 0; i < n; i++) {
      double v;
      memcpy(&v, src + i * sizeof v, sizeof v);
      dst[i] = (REAL)v;
    }
  } else {
    SFX(convert)(dst, m->values, n);
  }
  if (m->tip) /* the same partials in every category */
    for (uint32_t c = 1; c < s->categories; c++)
      memcpy(dst + c * ps, dst, ps * sizeof *dst);
  if (m->buffer < s->compact)
    plf_tip_kinds(e->st, &e->t->layout)[m->buffer] = 0;
  return 0;
}

static void SFX(update_matrices)(SFX(exec) *e,
                                 const Ember__Plf__UpdateMatrices *m) {
  const plf_shape *s = &e->t->shape;
  size_t n = (size_t)s->categories * s->states * s->states;
  for (size_t i = 0; i < m->n_matrices; i++) {
    uint32_t eig = m->n_eigens == 0 ? 0
                   : m->n_eigens == 1 ? m->eigens[0] : m->eigens[i];
    uint32_t rs = m->n_rate_sets == 0 ? 0
                  : m->n_rate_sets == 1 ? m->rate_sets[0] : m->rate_sets[i];
    const double *eigen = plf_eigen(e->st, &e->t->layout, eig);
    size_t ss = (size_t)s->states * s->states;
    plf_transition_matrices_d((int)s->states, (int)s->categories, eigen,
                              eigen + ss, eigen + 2 * ss,
                              plf_cat_rates(e->st, &e->t->layout, s, rs),
                              m->lengths[i], e->pmat, NULL, NULL);
    SFX(convert)(SFX(matrix)(e, m->matrices[i]), e->pmat, n);
  }
}

/* BEAGLE's fixed scaling (destinationScaleRead without a scale to write):
 * each pattern of [p0, p1), every category, divided by the factor the
 * scale buffer holds (as a log: exp of it). */
static void SFX(fixed_scale)(SFX(exec) *e, REAL *dest, const REAL *scale,
                             int p0, int p1) {
  const plf_shape *s = &e->t->shape;
  for (uint32_t c = 0; c < s->categories; c++)
    for (int p = p0; p < p1; p++) {
      REAL f = (REAL)exp((double)scale[p]);
      REAL *v = dest + ((size_t)c * s->patterns + (size_t)p) * s->states;
      for (uint32_t i = 0; i < s->states; i++) v[i] /= f;
    }
}

static int SFX(update_partials)(SFX(exec) *e,
                                const Ember__Plf__UpdatePartials *m) {
  for (size_t i = 0; i < m->n_ops; i++) {
    const Ember__Plf__PartialsOp *o = m->ops[i];
    SFX(plf_update) u = {0};
    u.dest = SFX(partials)(e, o->dest);
    int p0, p1, rc;
    if ((rc = SFX(child_of)(e, o->child1, o->matrix1, &u.child1)) ||
        (rc = SFX(child_of)(e, o->child2, o->matrix2, &u.child2)))
      return rc;
    u.scale = SFX(scale)(e, o->scale_write);
    u.cumulative = u.scale ? SFX(scale)(e, o->cumulative_scale) : NULL;
    if (plf_range(e->st, &e->t->layout, &e->t->shape, o->partition, &p0,
                  &p1))
      rc = SFX(plf_update_partials_mt)(e->k, &e->kd, &u, (int)e->t->threads);
    else
      rc = SFX(plf_update_partials)(e->k, &e->kd, &u, p0, p1);
    if (rc) return plf_kernel_failed(e->err, e->err_len, rc);
    if (!u.scale && o->scale_read >= 0)
      SFX(fixed_scale)(e, u.dest, SFX(scale)(e, o->scale_read), p0, p1);
  }
  return 0;
}

static void SFX(scale_op)(SFX(exec) *e, const Ember__Plf__ScaleOp *m) {
  REAL *cum = SFX(scale)(e, (int32_t)m->cumulative);
  for (size_t i = 0; i < m->n_scales; i++)
    e->scale_list[i] = SFX(scale)(e, (int32_t)m->scales[i]);
  int p0, p1;
  plf_range(e->st, &e->t->layout, &e->t->shape, m->partition, &p0, &p1);
  switch (m->kind) {
  case EMBER__PLF__SCALE_OP__KIND__ACCUMULATE:
    SFX(plf_scale_accumulate)(cum, e->scale_list, (int)m->n_scales, p0, p1);
    break;
  case EMBER__PLF__SCALE_OP__KIND__REMOVE:
    SFX(plf_scale_remove)(cum, e->scale_list, (int)m->n_scales, p0, p1);
    break;
  case EMBER__PLF__SCALE_OP__KIND__RESET:
    SFX(plf_scale_reset)(cum, p0, p1);
    break;
  default: /* COPY */
    memcpy(cum + p0, e->scale_list[0] + p0, (size_t)(p1 - p0) * sizeof *cum);
    break;
  }
}

static void SFX(load_pattern_weights)(SFX(exec) *e) {
  const plf_layout *l = &e->t->layout;
  uint32_t n = e->t->shape.patterns;
  if (plf_flags(e->st, l)[0] & PLF_SET_PATTERN_WEIGHTS)
    SFX(convert)(e->pattern_weights,
                 (const double *)(e->st + l->pattern_weights), n);
  else
    for (uint32_t p = 0; p < n; p++) e->pattern_weights[p] = 1;
}

static int SFX(lnl)(SFX(exec) *e, const Ember__Plf__Lnl *m) {
  const plf_shape *s = &e->t->shape;
  const plf_layout *l = &e->t->layout;
  double *site = (double *)(e->st + l->site_lnl);
  SFX(load_pattern_weights)(e);
  double sum = 0;
  for (size_t i = 0; i < m->n_terms; i++) {
    const Ember__Plf__LnlTerm *t = m->terms[i];
    SFX(convert)(e->weights,
                 (const double *)(e->st + l->cat_weights) +
                     (size_t)t->weights * s->categories, s->categories);
    SFX(convert)(e->freqs,
                 (const double *)(e->st + l->frequencies) +
                     (size_t)t->frequencies * s->states, s->states);
    SFX(plf_integrate) in = {e->weights, e->freqs,
                             SFX(scale)(e, t->cumulative_scale),
                             e->pattern_weights, site};
    const REAL *parent = SFX(partials)(e, t->buffer);
    int p0, p1, rc;
    int all = plf_range(e->st, l, s, t->partition, &p0, &p1) &&
              e->t->threads > 1;
    double v = 0;
    if (t->child >= 0) {
      SFX(plf_child) c;
      if ((rc = SFX(child_of)(e, (uint32_t)t->child, (uint32_t)t->matrix,
                              &c)))
        return rc;
      rc = all ? SFX(plf_edge_lnl_mt)(e->k, &e->kd, parent, &c, &in,
                                      (int)e->t->threads, &v)
               : SFX(plf_edge_lnl)(e->k, &e->kd, parent, &c, &in, p0, p1,
                                   &v);
    } else {
      rc = all ? SFX(plf_root_lnl_mt)(e->k, &e->kd, parent, &in,
                                      (int)e->t->threads, &v)
               : SFX(plf_root_lnl)(e->k, &e->kd, parent, &in, p0, p1, &v);
    }
    if (rc) return plf_kernel_failed(e->err, e->err_len, rc);
    if (!isfinite(v)) e->out->non_finite++;
    if (m->by_partition) e->out->lnl[e->n_lnl++] = v;
    sum += v;
  }
  if (!m->by_partition) e->out->lnl[e->n_lnl++] = sum;
  if (m->site_lnl) {
    memcpy(e->out->site_lnl + e->n_site, site, s->patterns * sizeof *site);
    e->n_site += s->patterns;
  }
  return 0;
}

static void SFX(get)(SFX(exec) *e, const Ember__Plf__Get *m) {
  const plf_shape *s = &e->t->shape;
  const REAL *src = NULL;
  size_t n = 0;
  double *dst = e->out->values + e->n_values;
  switch (m->kind) {
  case EMBER__PLF__GET__KIND__PARTIALS:
    src = SFX(partials)(e, m->index);
    n = (size_t)s->categories * s->patterns * s->states;
    break;
  case EMBER__PLF__GET__KIND__SCALE:
    src = SFX(scale)(e, (int32_t)m->index);
    n = s->patterns;
    break;
  case EMBER__PLF__GET__KIND__MATRIX:
    src = SFX(matrix)(e, m->index);
    n = (size_t)s->categories * s->states * s->states;
    break;
  default: /* SITE_LNL, kept in double */
    memcpy(dst, e->st + e->t->layout.site_lnl, s->patterns * sizeof *dst);
    e->n_values += s->patterns;
    return;
  }
  for (size_t i = 0; i < n; i++) dst[i] = (double)src[i];
  e->n_values += n;
}

static int SFX(op)(SFX(exec) *e, const Ember__Plf__Op *op) {
  const plf_shape *s = &e->t->shape;
  const plf_layout *l = &e->t->layout;
  switch (op->op_case) {
  case EMBER__PLF__OP__OP_TIP_STATES:
    return plf_set_tip_states(e->st, l, s, e->in, op->tip_states, e->err,
                              e->err_len);
  case EMBER__PLF__OP__OP_PARTIALS:
    return SFX(set_partials)(e, op->partials);
  case EMBER__PLF__OP__OP_EIGEN:
    plf_set_eigen(e->st, l, s, op->eigen);
    return 0;
  case EMBER__PLF__OP__OP_VECTOR:
    plf_set_vector(e->st, l, s, op->vector);
    return 0;
  case EMBER__PLF__OP__OP_PARTITIONS:
    plf_set_partitions(e->st, l, s, op->partitions);
    return 0;
  case EMBER__PLF__OP__OP_MATRIX:
    SFX(convert)(SFX(matrix)(e, op->matrix->matrix), op->matrix->values,
                 op->matrix->n_values);
    return 0;
  case EMBER__PLF__OP__OP_UPDATE_MATRICES:
    SFX(update_matrices)(e, op->update_matrices);
    return 0;
  case EMBER__PLF__OP__OP_UPDATE_PARTIALS:
    return SFX(update_partials)(e, op->update_partials);
  case EMBER__PLF__OP__OP_SCALE:
    SFX(scale_op)(e, op->scale);
    return 0;
  case EMBER__PLF__OP__OP_LNL:
    return SFX(lnl)(e, op->lnl);
  case EMBER__PLF__OP__OP_GET:
    SFX(get)(e, op->get);
    return 0;
  default:
    return EMBER_EINTERNAL; /* plf_task_prepare refused it */
  }
}

static int SFX(exec_run)(const plf_task *t, uint8_t *state,
                         const acc_block *inputs, const plf_kernels *k,
                         const atomic_int *cancel, plf_answers *out,
                         char *err, size_t err_len) {
  const plf_shape *s = &t->shape;
  SFX(exec) e = {.t = t, .st = state, .in = inputs, .k = k, .out = out,
                 .err = err, .err_len = err_len};
  e.kd.states = (int)s->states;
  e.kd.patterns = (int)s->patterns;
  e.kd.categories = (int)s->categories;
  size_t max_scales = 1;
  for (size_t i = 0; i < t->params->n_ops; i++) {
    const Ember__Plf__Op *op = t->params->ops[i];
    if (op->op_case == EMBER__PLF__OP__OP_SCALE &&
        op->scale->n_scales > max_scales)
      max_scales = op->scale->n_scales;
  }
  e.weights = malloc(s->categories * sizeof *e.weights);
  e.freqs = malloc(s->states * sizeof *e.freqs);
  e.pattern_weights = malloc(s->patterns * sizeof *e.pattern_weights);
  e.pmat = malloc((size_t)s->categories * s->states * s->states *
                  sizeof *e.pmat);
  e.scale_list = malloc(max_scales * sizeof *e.scale_list);
  int rc = 0;
  if (!e.weights || !e.freqs || !e.pattern_weights || !e.pmat ||
      !e.scale_list)
    rc = EMBER_ENOMEM;
  for (size_t i = 0; !rc && i < t->params->n_ops; i++) {
    if (cancel && atomic_load(cancel)) rc = EMBER_ECANCELED;
    else rc = SFX(op)(&e, t->params->ops[i]);
  }
  free(e.weights);
  free(e.freqs);
  free(e.pattern_weights);
  free(e.pmat);
  free(e.scale_list);
  return rc;
}
