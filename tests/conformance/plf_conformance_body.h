/*
 * plf_conformance_body.h - test_plf_conformance.c's run of the ember
 * kernels for one precision: PLF_REAL and PLF_SFX as in
 * accelerators/plf/plf_kernel_template.h. Results go to a results struct in
 * double.
 */
#define PLF_CAT2_(a, b) a##_##b
#define PLF_CAT2(a, b) PLF_CAT2_(a, b)
#define PLF_T(name) PLF_CAT2(name, PLF_SFX)

static PLF_REAL *PLF_T(conv)(const double *src, size_t n) {
  PLF_REAL *dst = xcalloc(n, sizeof *dst);
  for (size_t i = 0; i < n; i++) dst[i] = (PLF_REAL)src[i];
  return dst;
}

static void PLF_T(back)(double *dst, const PLF_REAL *src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

static void PLF_T(ok)(int rc, const char *what) {
  if (rc != 0) {
    fprintf(stderr, "ember %s: error %d\n", what, rc);
    exit(1);
  }
}

/* the three ranges of a RANGES split: odd sizes, none aligned */
static void PLF_T(ranges)(int P, int bounds[4]) {
  bounds[0] = 0;
  bounds[1] = (P / 3) | 1;
  bounds[2] = (2 * P / 3) | 1;
  bounds[3] = P;
}

static void PLF_T(update)(const plf_kernels *k, const plf_dims *d,
                          const PLF_T(plf_update) *op, split how) {
  if (how == THREADS) {
    PLF_T(ok)(PLF_T(plf_update_partials_mt)(k, d, op, 2), "update mt");
    return;
  }
  int b[4] = {0, d->patterns, d->patterns, d->patterns};
  if (how == RANGES) PLF_T(ranges)(d->patterns, b);
  for (int i = 0; i < 3; i++)
    PLF_T(ok)(PLF_T(plf_update_partials)(k, d, op, b[i], b[i + 1]), "update");
}

static double PLF_T(root)(const plf_kernels *k, const plf_dims *d,
                          const PLF_REAL *x, const PLF_T(plf_integrate) *in,
                          split how) {
  double lnl = 0, part;
  if (how == THREADS) {
    PLF_T(ok)(PLF_T(plf_root_lnl_mt)(k, d, x, in, 2, &lnl), "root mt");
    return lnl;
  }
  int b[4] = {0, d->patterns, d->patterns, d->patterns};
  if (how == RANGES) PLF_T(ranges)(d->patterns, b);
  for (int i = 0; i < 3; i++) {
    PLF_T(ok)(PLF_T(plf_root_lnl)(k, d, x, in, b[i], b[i + 1], &part),
              "root");
    lnl += part;
  }
  return lnl;
}

static double PLF_T(edge)(const plf_kernels *k, const plf_dims *d,
                          const PLF_REAL *parent,
                          const PLF_T(plf_child) *child,
                          const PLF_T(plf_integrate) *in, split how) {
  double lnl = 0, part;
  if (how == THREADS) {
    PLF_T(ok)(PLF_T(plf_edge_lnl_mt)(k, d, parent, child, in, 2, &lnl),
              "edge mt");
    return lnl;
  }
  int b[4] = {0, d->patterns, d->patterns, d->patterns};
  if (how == RANGES) PLF_T(ranges)(d->patterns, b);
  for (int i = 0; i < 3; i++) {
    PLF_T(ok)(PLF_T(plf_edge_lnl)(k, d, parent, child, in, b[i], b[i + 1],
                                  &part), "edge");
    lnl += part;
  }
  return lnl;
}

static void PLF_T(run_ember)(const config *g, const inputs *in,
                             const results *want, const plf_kernels *k,
                             split how, results *r) {
  const int S = g->S, P = g->P, C = g->C;
  const plf_dims d = {S, P, C};
  const size_t msize = (size_t)C * S * S, psize = (size_t)C * P * S;
  PLF_REAL *evec = PLF_T(conv)(in->evec, (size_t)S * S);
  PLF_REAL *ivec = PLF_T(conv)(in->ivec, (size_t)S * S);
  PLF_REAL *eval = PLF_T(conv)(in->eval, S);
  PLF_REAL *freqs = PLF_T(conv)(in->freqs, S);
  PLF_REAL *cw = PLF_T(conv)(in->cat_weights, C);
  PLF_REAL *rates = PLF_T(conv)(in->cat_rates, C);
  PLF_REAL *pw = PLF_T(conv)(in->pat_weights, P);

  /* transition matrices: ember's own, compared with BEAGLE's */
  PLF_REAL *mat[NMAT];
  for (int m = 0; m < NMAT; m++) mat[m] = xcalloc(msize, sizeof(PLF_REAL));
  for (int e = 0; e < NMAT - 2; e++)
    PLF_T(ok)(PLF_T(plf_transition_matrices)(
                  S, C, evec, ivec, eval, rates, in->lengths[e], mat[e],
                  e == 8 ? mat[9] : NULL, e == 8 ? mat[10] : NULL),
              "matrices");
  for (int m = 0; m < NMAT; m++) PLF_T(back)(r->mat[m], mat[m], msize);

  /* the rest runs on BEAGLE's matrices, so that each operation is compared
   * on the same inputs */
  PLF_REAL *bm[NMAT];
  for (int m = 0; m < NMAT; m++) bm[m] = PLF_T(conv)(want->mat[m], msize);
  PLF_REAL *node[NNODES];
  for (int n = 0; n < NNODES; n++) {
    node[n] = xcalloc(psize, sizeof(PLF_REAL));
    if (n < NTIPS && !in->states[n])
      for (int c = 0; c < C; c++)
        for (size_t i = 0; i < (size_t)P * S; i++)
          node[n][(size_t)c * P * S + i] = (PLF_REAL)in->tip_partials[n][i];
  }
  PLF_REAL *scale[NOPS];
  for (int i = 0; i < NOPS; i++) scale[i] = xcalloc(P, sizeof(PLF_REAL));
  PLF_REAL *cum = xcalloc(P, sizeof(PLF_REAL));
  PLF_REAL *cum2 = xcalloc(P, sizeof(PLF_REAL));

  PLF_T(plf_update) op[NOPS];
  for (int i = 0; i < NOPS; i++) {
    PLF_T(plf_child) ch[2];
    for (int j = 0; j < 2; j++) {
      int n = op_children[i][j];
      const int *st = n < NTIPS ? in->states[n] : NULL;
      ch[j] = (PLF_T(plf_child)){st ? NULL : node[n], st, bm[n]};
    }
    op[i] = (PLF_T(plf_update)){node[5 + i], ch[0], ch[1],
                                g->scaling ? scale[i] : NULL, NULL};
    PLF_T(update)(k, &d, &op[i], how);
  }
  if (g->scaling) {
    const PLF_REAL *const list[NOPS] = {scale[0], scale[1], scale[2],
                                        scale[3]};
    PLF_T(ok)(PLF_T(plf_scale_reset)(cum, 0, P), "reset");
    PLF_T(ok)(PLF_T(plf_scale_accumulate)(cum, list, NOPS, 0, P),
              "accumulate");
  }
  PLF_T(plf_integrate) integ = {cw, freqs, g->scaling ? cum : NULL, pw,
                                r->root_site};
  r->root = PLF_T(root)(k, &d, node[8], &integ, how);
  const int *st3 = in->states[3];
  PLF_T(plf_child) edge_child[2] = {
    {node[6], NULL, bm[8]},
    {st3 ? NULL : node[3], st3, bm[3]},
  };
  const PLF_REAL *edge_parent[2] = {node[7], node[6]};
  for (int e = 0; e < 2; e++) {
    integ.site_lnl = r->edge_site[e];
    r->edge[e] = PLF_T(edge)(k, &d, edge_parent[e], &edge_child[e], &integ,
                             how);
  }
  for (int i = 0; i < NOPS; i++) {
    PLF_T(back)(r->part[i], node[5 + i], psize);
    PLF_T(back)(r->scale[i], scale[i], P);
  }
  if (g->scaling) {
    PLF_T(back)(r->cum, cum, P);
    /* accumulation fused into the updates */
    PLF_T(ok)(PLF_T(plf_scale_reset)(cum2, 0, P), "reset");
    for (int i = 0; i < NOPS; i++) {
      op[i].cumulative = cum2;
      PLF_T(update)(k, &d, &op[i], how);
    }
    PLF_T(back)(r->cum_fused, cum2, P);
    const PLF_REAL *const last[1] = {scale[3]};
    PLF_T(ok)(PLF_T(plf_scale_remove)(cum, last, 1, 0, P), "remove");
    PLF_T(back)(r->cum_removed, cum, P);
  }

  for (int m = 0; m < NMAT; m++) {
    free(mat[m]);
    free(bm[m]);
  }
  for (int n = 0; n < NNODES; n++) free(node[n]);
  for (int i = 0; i < NOPS; i++) free(scale[i]);
  free(cum);
  free(cum2);
  free(evec);
  free(ivec);
  free(eval);
  free(freqs);
  free(cw);
  free(rates);
  free(pw);
}

#undef PLF_T
#undef PLF_CAT2
#undef PLF_CAT2_
