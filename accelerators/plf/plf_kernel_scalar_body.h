/*
 * plf_kernel_scalar_body.h - the scalar reference kernels, for one
 * precision (plf_kernel_template.h); included by plf_kernel_scalar.c only.
 * Plain loops in BEAGLE's order of operations: any S, any C.
 */

/* (M x child)[i] for the row mrow of M: a dot product with the child's
 * partials x, or the column of its tip state (1 when missing). */
static inline PLF_REAL PLF_T(term)(const PLF_REAL *mrow, const PLF_REAL *x,
                                   int state, int S) {
  if (!x) return (unsigned)state < (unsigned)S ? mrow[state] : (PLF_REAL)1;
  PLF_REAL sum = 0;
  for (int j = 0; j < S; j++) sum += mrow[j] * x[j];
  return sum;
}

/* BEAGLE's rescalePartials: divide each pattern by its largest value over
 * all categories and states (1 if that is 0); the log goes to scale[p] and
 * is added to cumulative[p]. */
static void PLF_T(rescale)(const plf_dims *d, PLF_REAL *dest,
                           PLF_REAL *scale, PLF_REAL *cumulative, int p0,
                           int p1) {
  const int S = d->states, P = d->patterns, C = d->categories;
  for (int p = p0; p < p1; p++) {
    PLF_REAL max = 0;
    for (int c = 0; c < C; c++) {
      const PLF_REAL *v = dest + ((size_t)c * P + p) * S;
      for (int i = 0; i < S; i++)
        if (v[i] > max) max = v[i];
    }
    if (max == 0) max = 1;
    PLF_REAL inv = (PLF_REAL)1 / max;
    for (int c = 0; c < C; c++) {
      PLF_REAL *v = dest + ((size_t)c * P + p) * S;
      for (int i = 0; i < S; i++) v[i] *= inv;
    }
    PLF_REAL lg = PLF_LOG(max);
    scale[p] = lg;
    if (cumulative) cumulative[p] += lg;
  }
}

void PLF_T(plf_update_scalar)(const plf_dims *d, const PLF_T(plf_update) *op,
                              int p0, int p1) {
  const int S = d->states, P = d->patterns, C = d->categories;
  const PLF_T(plf_child) *a = &op->child1, *b = &op->child2;
  for (int c = 0; c < C; c++) {
    const PLF_REAL *m1 = a->matrices + (size_t)c * S * S;
    const PLF_REAL *m2 = b->matrices + (size_t)c * S * S;
    for (int p = p0; p < p1; p++) {
      size_t row = ((size_t)c * P + p) * S;
      const PLF_REAL *x1 = a->partials ? a->partials + row : NULL;
      const PLF_REAL *x2 = b->partials ? b->partials + row : NULL;
      int s1 = a->states ? a->states[p] : 0;
      int s2 = b->states ? b->states[p] : 0;
      PLF_REAL *out = op->dest + row;
      for (int i = 0; i < S; i++)
        out[i] = PLF_T(term)(m1 + (size_t)i * S, x1, s1, S) *
                 PLF_T(term)(m2 + (size_t)i * S, x2, s2, S);
    }
  }
  if (op->scale) PLF_T(rescale)(d, op->dest, op->scale, op->cumulative, p0, p1);
}

/* site[p] = log(L) + cumulative[p]; returns weight * site */
static inline double PLF_T(site)(const PLF_T(plf_integrate) *in, int p,
                                 PLF_REAL L) {
  PLF_REAL site = PLF_LOG(L);
  if (in->cumulative) site += in->cumulative[p];
  if (in->site_lnl) in->site_lnl[p] = site;
  return in->pattern_weights ? (double)in->pattern_weights[p] * site
                             : (double)site;
}

double PLF_T(plf_root_scalar)(const plf_dims *d, const PLF_REAL *root,
                              const PLF_T(plf_integrate) *in, int p0, int p1) {
  const int S = d->states, P = d->patterns, C = d->categories;
  double total = 0;
  for (int p = p0; p < p1; p++) {
    PLF_REAL L = 0;
    for (int c = 0; c < C; c++) {
      const PLF_REAL *x = root + ((size_t)c * P + p) * S;
      PLF_REAL sum = 0;
      for (int s = 0; s < S; s++) sum += in->frequencies[s] * x[s];
      L += in->category_weights[c] * sum;
    }
    total += PLF_T(site)(in, p, L);
  }
  return total;
}

double PLF_T(plf_edge_scalar)(const plf_dims *d, const PLF_REAL *parent,
                              const PLF_T(plf_child) *child,
                              const PLF_T(plf_integrate) *in, int p0, int p1) {
  const int S = d->states, P = d->patterns, C = d->categories;
  double total = 0;
  for (int p = p0; p < p1; p++) {
    int st = child->states ? child->states[p] : 0;
    PLF_REAL L = 0;
    for (int c = 0; c < C; c++) {
      size_t row = ((size_t)c * P + p) * S;
      const PLF_REAL *m = child->matrices + (size_t)c * S * S;
      const PLF_REAL *x = child->partials ? child->partials + row : NULL;
      PLF_REAL sum = 0;
      for (int i = 0; i < S; i++)
        sum += in->frequencies[i] * parent[row + i] *
               PLF_T(term)(m + (size_t)i * S, x, st, S);
      L += in->category_weights[c] * sum;
    }
    total += PLF_T(site)(in, p, L);
  }
  return total;
}
