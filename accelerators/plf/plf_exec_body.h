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
  const atomic_int *cancel;
  plf_answers *out;
  size_t n_lnl, n_site, n_values;
  size_t n_deriv, n_site_deriv;   /* derivatives answered so far */
  REAL *pattern_weights;        /* P values in REAL */
  double *pmat;                 /* 3 x C x S x S: P(t), dP/dt, d2P/dt2
                                   before conversion */
  size_t max_scales;            /* the largest ScaleOp's count */
  const REAL **scale_list;      /* max_scales: this thread's */
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
    double *d1 = m->n_first_derivatives ? e->pmat + n : NULL;
    double *d2 = m->n_second_derivatives ? e->pmat + 2 * n : NULL;
    plf_transition_matrices_d((int)s->states, (int)s->categories, eigen,
                              eigen + ss, eigen + 2 * ss,
                              plf_cat_rates(e->st, &e->t->layout, s, rs),
                              m->lengths[i], e->pmat, d1, d2);
    SFX(convert)(SFX(matrix)(e, m->matrices[i]), e->pmat, n);
    if (d1) SFX(convert)(SFX(matrix)(e, m->first_derivatives[i]), d1, n);
    if (d2) SFX(convert)(SFX(matrix)(e, m->second_derivatives[i]), d2, n);
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

/* The patterns of partition that are in the block [b0, b1): *p0, *p1;
 * 0 when there are none. */
static int SFX(in_block)(SFX(exec) *e, int32_t partition, int b0, int b1,
                         int *p0, int *p1) {
  plf_range(e->st, &e->t->layout, &e->t->shape, partition, p0, p1);
  if (*p0 < b0) *p0 = b0;
  if (*p1 > b1) *p1 = b1;
  return *p0 < *p1;
}

static int SFX(update_partials)(SFX(exec) *e,
                                const Ember__Plf__UpdatePartials *m, int b0,
                                int b1) {
  for (size_t i = 0; i < m->n_ops; i++) {
    const Ember__Plf__PartialsOp *o = m->ops[i];
    int p0, p1, rc;
    if (!SFX(in_block)(e, o->partition, b0, b1, &p0, &p1)) continue;
    SFX(plf_update) u = {0};
    u.dest = SFX(partials)(e, o->dest);
    if ((rc = SFX(child_of)(e, o->child1, o->matrix1, &u.child1)) ||
        (rc = SFX(child_of)(e, o->child2, o->matrix2, &u.child2)))
      return rc;
    u.scale = SFX(scale)(e, o->scale_write);
    u.cumulative = u.scale ? SFX(scale)(e, o->cumulative_scale) : NULL;
    rc = SFX(plf_update_partials)(e->k, &e->kd, &u, p0, p1);
    if (rc) return plf_kernel_failed(e->err, e->err_len, rc);
    if (!u.scale && o->scale_read >= 0)
      SFX(fixed_scale)(e, u.dest, SFX(scale)(e, o->scale_read), p0, p1);
  }
  return 0;
}

static void SFX(scale_op)(SFX(exec) *e, const Ember__Plf__ScaleOp *m,
                          int b0, int b1) {
  int p0, p1;
  if (!SFX(in_block)(e, m->partition, b0, b1, &p0, &p1)) return;
  REAL *cum = SFX(scale)(e, (int32_t)m->cumulative);
  for (size_t i = 0; i < m->n_scales; i++)
    e->scale_list[i] = SFX(scale)(e, (int32_t)m->scales[i]);
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

/* Where an Lnl op's per-pattern answers go (NULL: not asked for). */
typedef struct SFX(lnl_out) {
  double *site, *site_first, *site_second;
} SFX(lnl_out);

/* (M x child)[i] of pattern p, category c: M[i][s] for a tip state s, and
 * for a missing one 1 for P(t), 0 for its derivatives (a row of P sums to
 * 1 at every t) */
static double SFX(times_child)(const REAL *M, size_t S, const REAL *y,
                               int st, int derivative, size_t i) {
  if (!y)
    return (unsigned)st < S ? (double)M[i * S + (unsigned)st]
                            : derivative ? 0.0 : 1.0;
  double v = 0;
  for (size_t j = 0; j < S; j++) v += (double)M[i * S + j] * (double)y[j];
  return v;
}

/* An edge's log-likelihood and its first and second derivatives along the
 * edge's length, patterns [p0, p1): L, L' and L'' with P(t), dP/dt and
 * d2P/dt2 across it; per pattern d lnL/dt = L'/L and d2 lnL/dt2 = L''/L -
 * (L'/L)^2, weighted sums into sums[0..3). Scalar: Newton steps on one
 * branch are not where the time goes. */
static int SFX(edge_derivatives)(SFX(exec) *e, const Ember__Plf__LnlTerm *t,
                                 const REAL *w, const REAL *f, int p0, int p1,
                                 double *sums, const SFX(lnl_out) *o) {
  const plf_shape *s = &e->t->shape;
  const size_t S = s->states, C = s->categories, P = s->patterns;
  double *kept = (double *)(e->st + e->t->layout.site_lnl);
  const REAL *parent = SFX(partials)(e, t->buffer);
  SFX(plf_child) c;
  int rc = SFX(child_of)(e, (uint32_t)t->child, (uint32_t)t->matrix, &c);
  if (rc) return rc;
  const REAL *mats[3] = {
      c.matrices,
      t->first_derivative >= 0 ? SFX(matrix)(e, (uint32_t)t->first_derivative)
                               : NULL,
      t->second_derivative >= 0
          ? SFX(matrix)(e, (uint32_t)t->second_derivative)
          : NULL};
  const REAL *cum = SFX(scale)(e, t->cumulative_scale);
  for (int p = p0; p < p1; p++) {
    double v[3] = {0, 0, 0};
    for (size_t k = 0; k < C; k++) {
      const REAL *x = parent + (k * P + (size_t)p) * S;
      const REAL *y = c.partials ? c.partials + (k * P + (size_t)p) * S : NULL;
      int st = c.states ? c.states[p] : 0;
      for (int d = 0; d < 3; d++) {
        if (!mats[d]) continue;
        const REAL *M = mats[d] + k * S * S;
        double acc = 0;
        for (size_t i = 0; i < S; i++)
          acc += (double)f[i] * (double)x[i] *
                 SFX(times_child)(M, S, y, st, d > 0, i);
        v[d] += (double)w[k] * acc;
      }
    }
    double site = log(v[0]) + (cum ? (double)cum[p] : 0);
    double d1 = mats[1] ? v[1] / v[0] : 0;
    double d2 = mats[2] ? v[2] / v[0] - d1 * d1 : 0;
    double pw = (double)e->pattern_weights[p];
    kept[p] = site;
    sums[0] += pw * site;
    sums[1] += pw * d1;
    sums[2] += pw * d2;
    if (o->site_first) o->site_first[p] = d1;
    if (o->site_second) o->site_second[p] = d2;
  }
  return 0;
}

/* Lnl m over the block [b0, b1): each term's log-likelihood of the block
 * into sums[3 * term] (with derivatives: theirs after it); the block's
 * site log-likelihoods (the last term's where terms overlap) into the
 * state block's site array, and from there to o->site. */
static int SFX(lnl)(SFX(exec) *e, const Ember__Plf__Lnl *m, int b0, int b1,
                    double *sums, const SFX(lnl_out) *o) {
  const plf_shape *s = &e->t->shape;
  const plf_layout *l = &e->t->layout;
  double *kept = (double *)(e->st + l->site_lnl);
  for (size_t i = 0; i < m->n_terms; i++) {
    const Ember__Plf__LnlTerm *t = m->terms[i];
    double *sum = sums + 3 * i;
    int p0, p1, rc;
    sum[0] = sum[1] = sum[2] = 0;
    if (!SFX(in_block)(e, t->partition, b0, b1, &p0, &p1)) continue;
    REAL w[PLF_MAX_CATEGORIES], f[PLF_MAX_STATES];
    SFX(convert)(w, (const double *)(e->st + l->cat_weights) +
                        (size_t)t->weights * s->categories, s->categories);
    SFX(convert)(f, (const double *)(e->st + l->frequencies) +
                        (size_t)t->frequencies * s->states, s->states);
    if (plf_term_derivatives(t)) {
      if ((rc = SFX(edge_derivatives)(e, t, w, f, p0, p1, sum, o)))
        return rc;
      continue;
    }
    SFX(plf_integrate) in = {w, f, SFX(scale)(e, t->cumulative_scale),
                             e->pattern_weights, kept};
    const REAL *parent = SFX(partials)(e, t->buffer);
    if (t->child >= 0) {
      SFX(plf_child) c;
      if ((rc = SFX(child_of)(e, (uint32_t)t->child, (uint32_t)t->matrix,
                              &c)))
        return rc;
      rc = SFX(plf_edge_lnl)(e->k, &e->kd, parent, &c, &in, p0, p1, sum);
    } else {
      rc = SFX(plf_root_lnl)(e->k, &e->kd, parent, &in, p0, p1, sum);
    }
    if (rc) return plf_kernel_failed(e->err, e->err_len, rc);
  }
  if (o->site)
    memcpy(o->site + b0, kept + b0, (size_t)(b1 - b0) * sizeof *o->site);
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

/* An op that is not pattern-local (below): sets, matrices, gets. */
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
  case EMBER__PLF__OP__OP_GET:
    SFX(get)(e, op->get);
    return 0;
  default:
    return EMBER_EINTERNAL; /* plf_task_prepare refused it */
  }
}

/* ---- pattern-blocked runs -------------------------------------------------
 * UpdatePartials, Scale and Lnl ops read and write each pattern on its own.
 * A run of them goes block by block: every op of the run over one block of
 * patterns, then the next block, so that the partials one op writes are
 * still in cache when the op of its parent reads them. (BEAGLE runs each
 * op over all patterns, and so went every partials buffer through L3 or
 * DRAM between a node and its parent.) Blocks are also what threads share
 * out. Each block's Lnl sums are kept and added in block order, so a
 * result does not depend on the number of threads. */

static int SFX(pattern_local)(const Ember__Plf__Op *op) {
  return op->op_case == EMBER__PLF__OP__OP_UPDATE_PARTIALS ||
         op->op_case == EMBER__PLF__OP__OP_SCALE ||
         op->op_case == EMBER__PLF__OP__OP_LNL;
}

/* about this many bytes of each partials buffer per block: a parent's
 * children and its own block stay in L1 and L2 */
#define SFX_BLOCK_BYTES 32768
/* a buffer this small runs as one block */
#define SFX_WHOLE_BYTES (8 * SFX_BLOCK_BYTES)
#define SFX_MAX_THREADS 256

typedef struct SFX(run) {
  size_t i0, i1;            /* ops [i0, i1) of the task */
  int block, n_blocks;      /* patterns per block; blocks */
  size_t n_terms;           /* Lnl terms in the run */
  double *sums;             /* [n_blocks][n_terms][3]: lnl, derivatives */
  SFX(lnl_out) *outs;       /* per op: where its per-pattern answers go */
  atomic_int next;          /* the next block to take */
  atomic_int stop;          /* a block failed */
} SFX(run);

static int SFX(run_block)(SFX(exec) *e, SFX(run) *r, int blk) {
  const int P = (int)e->t->shape.patterns;
  int b0 = blk * r->block, b1 = b0 + r->block < P ? b0 + r->block : P;
  double *sums = r->sums + (size_t)blk * r->n_terms * 3;
  for (size_t i = r->i0; i < r->i1; i++) {
    const Ember__Plf__Op *op = e->t->params->ops[i];
    int rc = 0;
    if (e->cancel && atomic_load(e->cancel)) return EMBER_ECANCELED;
    if (op->op_case == EMBER__PLF__OP__OP_UPDATE_PARTIALS) {
      rc = SFX(update_partials)(e, op->update_partials, b0, b1);
    } else if (op->op_case == EMBER__PLF__OP__OP_SCALE) {
      SFX(scale_op)(e, op->scale, b0, b1);
    } else {
      rc = SFX(lnl)(e, op->lnl, b0, b1, sums, &r->outs[i - r->i0]);
      sums += 3 * op->lnl->n_terms;
    }
    if (rc) return rc;
  }
  return 0;
}

/* A thread's share: blocks taken one at a time, on a copy of the exec with
 * its own scale list and error text. */
typedef struct SFX(worker) {
  SFX(exec) e;
  SFX(run) *r;
  int rc;
  char err[256];
} SFX(worker);

static void *SFX(worker_main)(void *arg) {
  SFX(worker) *w = arg;
  for (;;) {
    int b = atomic_fetch_add(&w->r->next, 1);
    if (b >= w->r->n_blocks || atomic_load(&w->r->stop)) break;
    if ((w->rc = SFX(run_block)(&w->e, w->r, b))) {
      atomic_store(&w->r->stop, 1);
      break;
    }
  }
  return NULL;
}

/* The blocks of r on up to e->t->threads threads (the caller's one). */
static int SFX(run_blocks)(SFX(exec) *e, SFX(run) *r) {
  const plf_shape *s = &e->t->shape;
  long values = (long)s->patterns * s->categories * s->states;
  long n = (long)e->t->threads;
  if (n > values / PLF_THREAD_MIN_VALUES) n = values / PLF_THREAD_MIN_VALUES;
  if (n > r->n_blocks) n = r->n_blocks;
  if (n > SFX_MAX_THREADS) n = SFX_MAX_THREADS;
  if (n <= 1) {
    for (int b = 0; b < r->n_blocks; b++) {
      int rc = SFX(run_block)(e, r, b);
      if (rc) return rc;
    }
    return 0;
  }
  SFX(worker) *w = calloc((size_t)n, sizeof *w);
  const REAL **lists = calloc((size_t)n * e->max_scales, sizeof *lists);
  pthread_t *tids = calloc((size_t)n, sizeof *tids);
  int *started = calloc((size_t)n, sizeof *started);
  int rc = 0;
  if (!w || !lists || !tids || !started) {
    rc = EMBER_ENOMEM;
    goto out;
  }
  for (long i = 0; i < n; i++) {
    w[i].e = *e;
    w[i].e.scale_list = lists + (size_t)i * e->max_scales;
    w[i].e.err = w[i].err;
    w[i].e.err_len = sizeof w[i].err;
    w[i].r = r;
  }
  for (long i = 1; i < n; i++)
    started[i] = pthread_create(&tids[i], NULL, SFX(worker_main), &w[i]) == 0;
  SFX(worker_main)(&w[0]);   /* threads that did not start leave their */
  for (long i = 1; i < n; i++)   /* blocks to the others */
    if (started[i]) pthread_join(tids[i], NULL);
  for (long i = 0; i < n && !rc; i++)
    if ((rc = w[i].rc)) snprintf(e->err, e->err_len, "%s", w[i].err);
out:
  free(w);
  free(lists);
  free(tids);
  free(started);
  return rc;
}

/* ops [i0, i1), all pattern-local: blocked, then their answers */
static int SFX(run_local)(SFX(exec) *e, size_t i0, size_t i1) {
  const plf_shape *s = &e->t->shape;
  const int P = (int)s->patterns;
  SFX(run) r = {.i0 = i0, .i1 = i1};
  size_t per_pattern = (size_t)s->categories * s->states * sizeof(REAL);
  int block = (int)(SFX_BLOCK_BYTES / per_pattern);
  r.block = block < 64 ? 64 : block / 64 * 64;
  /* buffers that L2 holds a few of whole gain nothing from blocks, and
   * each block costs every op its set-up again (MrBayes's primates, 413
   * patterns: two blocks), unless they are large enough for threads to
   * share; the blocks never depend on the thread count (nor do the sums) */
  long values = (long)P * s->categories * s->states;
  if ((size_t)P * per_pattern <= SFX_WHOLE_BYTES &&
      values < 2 * PLF_THREAD_MIN_VALUES)
    r.block = P;
  r.n_blocks = (P + r.block - 1) / r.block;
  atomic_init(&r.next, 0);
  atomic_init(&r.stop, 0);
  for (size_t i = i0; i < i1; i++) {
    const Ember__Plf__Op *op = e->t->params->ops[i];
    if (op->op_case == EMBER__PLF__OP__OP_LNL) r.n_terms += op->lnl->n_terms;
  }
  r.sums = calloc((size_t)r.n_blocks * 3 * (r.n_terms ? r.n_terms : 1),
                  sizeof *r.sums);
  r.outs = calloc(i1 - i0, sizeof *r.outs);
  if (!r.sums || !r.outs) {
    free(r.sums);
    free(r.outs);
    return EMBER_ENOMEM;
  }
  for (size_t i = i0; i < i1; i++) {
    const Ember__Plf__Op *op = e->t->params->ops[i];
    if (op->op_case != EMBER__PLF__OP__OP_LNL || !op->lnl->site_lnl)
      continue;
    SFX(lnl_out) *o = &r.outs[i - i0];
    o->site = e->out->site_lnl + e->n_site;
    e->n_site += (size_t)P;
    if (plf_term_derivatives(op->lnl->terms[0])) {
      o->site_first = e->out->site_first + e->n_site_deriv;
      o->site_second = e->out->site_second + e->n_site_deriv;
      e->n_site_deriv += (size_t)P;
    }
  }
  if (r.n_terms) SFX(load_pattern_weights)(e);
  int rc = SFX(run_blocks)(e, &r);
  size_t term = 0;
  for (size_t i = i0; !rc && i < i1; i++) {
    const Ember__Plf__Op *op = e->t->params->ops[i];
    if (op->op_case != EMBER__PLF__OP__OP_LNL) continue;
    const Ember__Plf__Lnl *m = op->lnl;
    int derivatives = plf_term_derivatives(m->terms[0]);
    double total = 0;
    for (size_t k = 0; k < m->n_terms; k++, term++) {
      double v[3] = {0, 0, 0};
      for (int b = 0; b < r.n_blocks; b++)
        for (int d = 0; d < 3; d++)
          v[d] += r.sums[((size_t)b * r.n_terms + term) * 3 + (size_t)d];
      if (!isfinite(v[0])) e->out->non_finite++;
      if (m->by_partition) e->out->lnl[e->n_lnl++] = v[0];
      total += v[0];
      if (derivatives) {
        e->out->first[e->n_deriv] = v[1];
        e->out->second[e->n_deriv++] = v[2];
      }
    }
    if (!m->by_partition) e->out->lnl[e->n_lnl++] = total;
  }
  free(r.sums);
  free(r.outs);
  return rc;
}

static int SFX(exec_run)(const plf_task *t, uint8_t *state,
                         const acc_block *inputs, const plf_kernels *k,
                         const atomic_int *cancel, plf_answers *out,
                         char *err, size_t err_len) {
  const plf_shape *s = &t->shape;
  SFX(exec) e = {.t = t, .st = state, .in = inputs, .k = k, .out = out,
                 .cancel = cancel, .err = err, .err_len = err_len};
  e.kd.states = (int)s->states;
  e.kd.patterns = (int)s->patterns;
  e.kd.categories = (int)s->categories;
  e.max_scales = 1;
  for (size_t i = 0; i < t->params->n_ops; i++) {
    const Ember__Plf__Op *op = t->params->ops[i];
    if (op->op_case == EMBER__PLF__OP__OP_SCALE &&
        op->scale->n_scales > e.max_scales)
      e.max_scales = op->scale->n_scales;
  }
  e.pattern_weights = malloc(s->patterns * sizeof *e.pattern_weights);
  e.pmat = malloc(3 * (size_t)s->categories * s->states * s->states *
                  sizeof *e.pmat);   /* P(t), and its two derivatives */
  e.scale_list = malloc(e.max_scales * sizeof *e.scale_list);
  int rc = 0;
  if (!e.pattern_weights || !e.pmat || !e.scale_list) rc = EMBER_ENOMEM;
  size_t n = t->params->n_ops;
  for (size_t i = 0; !rc && i < n;) {
    const Ember__Plf__Op *op = t->params->ops[i];
    if (!SFX(pattern_local)(op)) {
      if (cancel && atomic_load(cancel)) rc = EMBER_ECANCELED;
      else rc = SFX(op)(&e, op);
      i++;
      continue;
    }
    size_t j = i + 1;
    while (j < n && SFX(pattern_local)(t->params->ops[j])) j++;
    rc = SFX(run_local)(&e, i, j);
    i = j;
  }
  free(e.pattern_weights);
  free(e.pmat);
  free(e.scale_list);
  return rc;
}

#undef SFX_BLOCK_BYTES
#undef SFX_WHOLE_BYTES
#undef SFX_MAX_THREADS
