/*
 * plf_kernel_simd_body.h - the SIMD kernels, written once over vector
 * primitives that each ISA file (plf_kernel_avx2.c, plf_kernel_avx512.c)
 * defines per precision before including this body (plf_kernel_template.h
 * names: PLF_REAL, PLF_SFX, PLF_LOG; PLF_ISA_TAG names the ISA):
 *
 *   PLF_V_T            the vector type, PLF_VL lanes
 *   V_ZERO() V_SET1(x) V_LOADU(p) V_STOREU(p, v)
 *   V_LOADN(p, n) V_STOREN(p, v, n)   first n lanes (1..PLF_VL), masked: no
 *                                     access past them
 *   V_ADD V_MUL V_MAX V_DIV (a, b)    V_FMA(a, b, c) = a * b + c
 *   V_HSUM(v) V_HMAX(v)               over all lanes, a PLF_REAL
 *   V_ONE_IF_ZERO(v)                  lanes equal to 0 become 1
 * and for S = 4, a vector holding PLF_G = PLF_VL / 4 patterns:
 *   V_SPLAT4(v, j)      lane j of each group of 4, in all 4 (j constant)
 *   V_DUP4(p)           the 4 values at p in every group
 *   V_GATHER4(rows)     group g from rows[g] (PLF_G pointers to 4 values)
 *   V_EXPAND4(p)        group g all p[g] (p: PLF_G values)
 *   V_GROUP_MAX(v) V_GROUP_SUM(v)   each lane: over its group
 * and PLF_T(log_batch)(v, n): v[i] = log(v[i]) for n values, vectorised
 * (logs of scale factors and likelihoods are taken in batches).
 *
 * Two paths: S = 4 with C <= PLF_C4_MAX keeps every category's matrix in a
 * few vectors and runs blocks of patterns one category after another,
 * rescaling each block while it is still in L1; other S up to
 * PLF_SIMD_MAX_STATES vectorise over states with each matrix transposed on
 * the stack (column j of M as a padded row, row S all ones for missing
 * data), one category at a time over chunks of patterns. Larger S runs the
 * scalar reference. A pattern's result depends only on its own data, never
 * on the range it was given in (tails are staged through full groups).
 */

#define PLF_V(name) PLF_CAT2(PLF_CAT2(name, PLF_ISA_TAG), PLF_SFX)
#define PLF_INLINE static inline __attribute__((always_inline))

#define PLF_LOGB 16   /* patterns whose logs are taken together */

/* patterns p..p+n: likelihoods L[0..n) (overwritten by their logs) into
 * site log-likelihoods; returns their weighted sum */
static double PLF_V(sites)(const PLF_T(plf_integrate) *in, int p,
                           PLF_REAL *L, int n) {
  PLF_T(log_batch)(L, n);
  double total = 0;
  for (int i = 0; i < n; i++) {
    PLF_REAL site = L[i];
    if (in->cumulative) site += in->cumulative[p + i];
    if (in->site_lnl) in->site_lnl[p + i] = site;
    total += in->pattern_weights
                 ? (double)in->pattern_weights[p + i] * site
                 : (double)site;
  }
  return total;
}

/* patterns p..p+n: their largest values max[0..n) (overwritten by their
 * logs) into log scale factors */
static void PLF_V(put_scales)(const PLF_T(plf_update) *op, int p,
                              PLF_REAL *max, int n) {
  PLF_T(log_batch)(max, n);
  for (int i = 0; i < n; i++) op->scale[p + i] = max[i];
  if (op->cumulative)
    for (int i = 0; i < n; i++) op->cumulative[p + i] += max[i];
}

/* ==== S = 4 ============================================================= */

#define PLF_C4_MAX 16

/* One category's matrix: tips[s] is column s of M (row 4: ones), the
 * vector of M x (tip state s); col[j] the same, repeated in every group. */
typedef struct PLF_V(mat4) {
  PLF_REAL tips[5][4];
  PLF_V_T col[4];
} PLF_V(mat4);

static void PLF_V(mat4_prepare)(PLF_V(mat4) *m, const PLF_REAL *M) {
  for (int s = 0; s < 4; s++)
    for (int i = 0; i < 4; i++) m->tips[s][i] = M[i * 4 + s];
  for (int i = 0; i < 4; i++) m->tips[4][i] = 1;
  for (int j = 0; j < 4; j++) m->col[j] = V_DUP4(m->tips[j]);
}

/* M x child for a group: partials x (PLF_G rows of 4) or tip states st */
PLF_INLINE PLF_V_T PLF_V(apply4)(const PLF_V(mat4) *m, const PLF_REAL *x,
                                 const int *st) {
  if (st) {
    const PLF_REAL *rows[PLF_G];
    /* unrolled, or the pointers go through the stack on every group */
    _Pragma("GCC unroll 16")
    for (int g = 0; g < PLF_G; g++)
      rows[g] = m->tips[(unsigned)st[g] < 4u ? st[g] : 4];
    return V_GATHER4(rows);
  }
  PLF_V_T v = V_LOADU(x);
  PLF_V_T a = V_MUL(m->col[0], V_SPLAT4(v, 0));
  PLF_V_T b = V_MUL(m->col[2], V_SPLAT4(v, 2));
  a = V_FMA(m->col[1], V_SPLAT4(v, 1), a);
  b = V_FMA(m->col[3], V_SPLAT4(v, 3), b);
  return V_ADD(a, b);
}

/* Where a group's data is: category c of child k at x[k] + c * xs, its tip
 * states at st[k] (the other NULL); output at out + c * os. */
typedef struct PLF_V(at4) {
  const PLF_REAL *x[2];
  const int *st[2];
  size_t xs;
  PLF_REAL *out;
  size_t os;
} PLF_V(at4);

/* Patterns run in blocks of PLF_B4, each category of a block before the
 * next (as BEAGLE runs categories): 3 streams at a time, not 3 x C. When
 * P x 4 values are a multiple of 512, every category of every buffer
 * starts at the same offset in a 4 KiB page; walking all C categories of a
 * group at once then maps 3 x C lines onto one L1 set at every step, and
 * thrashed it (1,152 patterns: MrBayes 0.8x BEAGLE; 1,119: 1.2x). */
#define PLF_B4 64
#define PLF_B4G (PLF_B4 / PLF_G)   /* groups in a block */

/* a category's values in stage: a block, and a line more, so that no two
 * categories share an offset in a 4 KiB page */
#define PLF_STAGE (PLF_B4 * 4 + 2 * PLF_VL)

/* ng <= PLF_B4G groups through all C categories, category by category.
 * With scaling, they go to stage first: each pattern's values are then
 * divided by its largest (1 if 0), which goes to max[0..ng * PLF_G), on
 * their way out. (Scaling in place read back lines just written at the
 * same page offset in every category, and so waited on stores.) */
PLF_INLINE void PLF_V(block4)(const PLF_V(mat4) *m1, const PLF_V(mat4) *m2,
                              int C, bool states1, bool states2,
                              bool scaling, const PLF_V(at4) *at, int ng,
                              PLF_REAL *stage, PLF_REAL *max) {
  for (int c = 0; c < C; c++) {
    const PLF_REAL *x1 = states1 ? NULL : at->x[0] + c * at->xs;
    const PLF_REAL *x2 = states2 ? NULL : at->x[1] + c * at->xs;
    PLF_REAL *out = scaling ? stage + c * PLF_STAGE : at->out + c * at->os;
    for (int g = 0; g < ng; g++) {
      PLF_V_T a = PLF_V(apply4)(&m1[c], states1 ? NULL : x1 + g * PLF_VL,
                                states1 ? at->st[0] + g * PLF_G : NULL);
      PLF_V_T b = PLF_V(apply4)(&m2[c], states2 ? NULL : x2 + g * PLF_VL,
                                states2 ? at->st[1] + g * PLF_G : NULL);
      V_STOREU(out + g * PLF_VL, V_MUL(a, b));
    }
  }
  if (!scaling) return;
  for (int g = 0; g < ng; g++) {
    PLF_V_T vmax = V_LOADU(stage + g * PLF_VL);
    for (int c = 1; c < C; c++)
      vmax = V_MAX(vmax, V_LOADU(stage + c * PLF_STAGE + g * PLF_VL));
    PLF_REAL lanes[PLF_VL];
    V_STOREU(lanes, V_ONE_IF_ZERO(V_GROUP_MAX(vmax)));
    for (int i = 0; i < PLF_G; i++) max[g * PLF_G + i] = lanes[4 * i];
  }
  /* reciprocals: one division per PLF_VL patterns, not one per group */
  const int n = ng * PLF_G;
  PLF_REAL inv[PLF_B4];
  for (int i = 0; i < n; i += PLF_VL) {
    if (n - i >= PLF_VL)
      V_STOREU(inv + i, V_DIV(V_SET1(1), V_LOADU(max + i)));
    else   /* lanes past n divide by 0 and are not stored */
      V_STOREN(inv + i, V_DIV(V_SET1(1), V_LOADN(max + i, n - i)), n - i);
  }
  for (int g = 0; g < ng; g++) {
    PLF_V_T f = V_EXPAND4(inv + g * PLF_G);
    for (int c = 0; c < C; c++)
      V_STOREU(at->out + c * at->os + g * PLF_VL,
               V_MUL(V_LOADU(stage + c * PLF_STAGE + g * PLF_VL), f));
  }
}

PLF_INLINE void PLF_V(update4_loop)(const plf_dims *d,
                                    const PLF_T(plf_update) *op,
                                    const PLF_V(mat4) *m1,
                                    const PLF_V(mat4) *m2, int C,
                                    bool states1, bool states2, bool scaling,
                                    int p0, int p1) {
  const size_t P = (size_t)d->patterns, cs = P * 4;
  const PLF_T(plf_child) *a = &op->child1, *b = &op->child2;
  PLF_REAL max[PLF_B4];
  PLF_REAL stage[scaling ? C * PLF_STAGE : 1];
  int p = p0;
  while (p1 - p >= PLF_G) {
    int ng = (p1 - p) / PLF_G;
    if (ng > PLF_B4G) ng = PLF_B4G;
    PLF_V(at4) at = {
      {states1 ? NULL : a->partials + (size_t)p * 4,
       states2 ? NULL : b->partials + (size_t)p * 4},
      {states1 ? a->states + p : NULL, states2 ? b->states + p : NULL},
      cs, op->dest + (size_t)p * 4, cs};
    PLF_V(block4)(m1, m2, C, states1, states2, scaling, &at, ng, stage,
                  max);
    if (scaling) PLF_V(put_scales)(op, p, max, ng * PLF_G);
    p += ng * PLF_G;
  }
  if (p == p1) return;
  /* a tail of n < PLF_G patterns, staged through one full group */
  int n = p1 - p;
  PLF_REAL x1[PLF_C4_MAX * PLF_VL], x2[PLF_C4_MAX * PLF_VL];
  PLF_REAL out[PLF_C4_MAX * PLF_VL];
  int st1[PLF_G], st2[PLF_G];
  for (int g = 0; g < PLF_G; g++) {
    st1[g] = states1 && g < n ? a->states[p + g] : 4;
    st2[g] = states2 && g < n ? b->states[p + g] : 4;
  }
  for (int c = 0; c < C; c++)
    for (int i = 0; i < PLF_VL; i++) {
      size_t src = c * cs + (size_t)p * 4 + i;
      x1[c * PLF_VL + i] = !states1 && i < 4 * n ? a->partials[src] : 0;
      x2[c * PLF_VL + i] = !states2 && i < 4 * n ? b->partials[src] : 0;
    }
  PLF_V(at4) at = {{x1, x2}, {st1, st2}, PLF_VL, out, PLF_VL};
  PLF_V(block4)(m1, m2, C, states1, states2, scaling, &at, 1, stage, max);
  for (int c = 0; c < C; c++)
    for (int i = 0; i < 4 * n; i++)
      op->dest[c * cs + (size_t)p * 4 + i] = out[c * PLF_VL + i];
  if (scaling) PLF_V(put_scales)(op, p, max, n);
}

/* the loop specialised: tip states or not per child, C = 1 or not,
 * rescaling or not */
static void PLF_V(update4)(const plf_dims *d, const PLF_T(plf_update) *op,
                           int p0, int p1) {
  const int C = d->categories;
  PLF_V(mat4) m1[PLF_C4_MAX], m2[PLF_C4_MAX];
  for (int c = 0; c < C; c++) {
    PLF_V(mat4_prepare)(&m1[c], op->child1.matrices + c * 16);
    PLF_V(mat4_prepare)(&m2[c], op->child2.matrices + c * 16);
  }
  bool s1 = op->child1.states != NULL, s2 = op->child2.states != NULL;
  bool sc = op->scale != NULL;
#define PLF_UPDATE4(CC, S1, S2, SC) \
  PLF_V(update4_loop)(d, op, m1, m2, CC, S1, S2, SC, p0, p1)
#define PLF_UPDATE4_C(S1, S2, SC)                       \
  do {                                                  \
    if (C == 1)                                         \
      PLF_UPDATE4(1, S1, S2, SC);                       \
    else                                                \
      PLF_UPDATE4(C, S1, S2, SC);                       \
  } while (0)
#define PLF_UPDATE4_SC(S1, S2)                          \
  do {                                                  \
    if (sc)                                             \
      PLF_UPDATE4_C(S1, S2, true);                      \
    else                                                \
      PLF_UPDATE4_C(S1, S2, false);                     \
  } while (0)
  if (s1 && s2)
    PLF_UPDATE4_SC(true, true);
  else if (s1)
    PLF_UPDATE4_SC(true, false);
  else
    PLF_UPDATE4_SC(false, false);
#undef PLF_UPDATE4_SC
#undef PLF_UPDATE4_C
#undef PLF_UPDATE4
}

/* L for ng <= PLF_B4G groups, category by category (as block4):
 * sum_c w[c] sum_i pi[i] parent[c][i] (M x child)[c][i] (edge: m != NULL),
 * or sum_c w[c] sum_i pi[i] root[c][i] (root); into L[0..ng * PLF_G) */
PLF_INLINE void PLF_V(integrate4)(const PLF_V(mat4) *m, int C,
                                  const PLF_REAL *w, PLF_V_T freqs,
                                  const PLF_REAL *x, size_t xs,
                                  const PLF_REAL *child, const int *st,
                                  int ng, PLF_REAL *L) {
  PLF_V_T acc[PLF_B4G];
  for (int g = 0; g < ng; g++) acc[g] = V_ZERO();
  for (int c = 0; c < C; c++) {
    PLF_V_T wc = V_SET1(w[c]);
    const PLF_REAL *xc = x + c * xs;
    const PLF_REAL *cc = child && !st ? child + c * xs : NULL;
    for (int g = 0; g < ng; g++) {
      PLF_V_T v = V_MUL(wc, V_LOADU(xc + g * PLF_VL));
      if (m)
        v = V_MUL(v, PLF_V(apply4)(&m[c], cc ? cc + g * PLF_VL : NULL,
                                   st ? st + g * PLF_G : NULL));
      acc[g] = V_ADD(acc[g], v);
    }
  }
  for (int g = 0; g < ng; g++) {
    PLF_REAL lanes[PLF_VL];
    V_STOREU(lanes, V_GROUP_SUM(V_MUL(acc[g], freqs)));
    for (int i = 0; i < PLF_G; i++) L[g * PLF_G + i] = lanes[4 * i];
  }
}

/* root (m == NULL, x the root) or edge (x the parent, child and m below) */
static double PLF_V(lnl4)(const plf_dims *d, const PLF_REAL *x,
                          const PLF_T(plf_child) *child,
                          const PLF_T(plf_integrate) *in, int p0, int p1) {
  const int C = d->categories;
  const size_t cs = (size_t)d->patterns * 4;
  PLF_V(mat4) mats[PLF_C4_MAX], *m = NULL;
  if (child) {
    for (int c = 0; c < C; c++)
      PLF_V(mat4_prepare)(&mats[c], child->matrices + c * 16);
    m = mats;
  }
  const PLF_REAL *cp = child ? child->partials : NULL;
  const int *cst = child ? child->states : NULL;
  PLF_V_T freqs = V_DUP4(in->frequencies);
  PLF_REAL L[PLF_B4];
  double total = 0;
  int p = p0;
  while (p1 - p >= PLF_G) {
    int ng = (p1 - p) / PLF_G;
    if (ng > PLF_B4G) ng = PLF_B4G;
    PLF_V(integrate4)(m, C, in->category_weights, freqs, x + (size_t)p * 4,
                      cs, cp ? cp + (size_t)p * 4 : NULL,
                      cst ? cst + p : NULL, ng, L);
    total += PLF_V(sites)(in, p, L, ng * PLF_G);
    p += ng * PLF_G;
  }
  if (p == p1) return total;
  int n = p1 - p;   /* the tail, staged through one full group */
  PLF_REAL sx[PLF_C4_MAX * PLF_VL], sc[PLF_C4_MAX * PLF_VL];
  int sst[PLF_G];
  for (int g = 0; g < PLF_G; g++) sst[g] = cst && g < n ? cst[p + g] : 4;
  for (int c = 0; c < C; c++)
    for (int i = 0; i < PLF_VL; i++) {
      size_t src = c * cs + (size_t)p * 4 + i;
      sx[c * PLF_VL + i] = i < 4 * n ? x[src] : 0;
      sc[c * PLF_VL + i] = cp && i < 4 * n ? cp[src] : 0;
    }
  PLF_V(integrate4)(m, C, in->category_weights, freqs, sx, PLF_VL,
                    cp ? sc : NULL, cst ? sst : NULL, 1, L);
  return total + PLF_V(sites)(in, p, L, n);
}

/* ==== other S: vectorised over states ==================================== */

#define PLF_NB 4          /* output vectors computed together */
#define PLF_CHUNK 128     /* patterns per chunk where a chunk is revisited */
#define PLF_MT_SIZE ((PLF_SIMD_MAX_STATES + 1) * PLF_SIMD_MAX_STATES)

/* mt[j][i] = M[i][j] for j < S, mt[S][i] = 1, i < S; 0 for S <= i < W */
static void PLF_V(transpose)(const PLF_REAL *M, int S, int W,
                             PLF_REAL *mt) {
  for (int j = 0; j <= S; j++) {
    PLF_REAL *row = mt + (size_t)j * W;
    for (int i = 0; i < S; i++) row[i] = j < S ? M[(size_t)i * S + j] : 1;
    for (int i = S; i < W; i++) row[i] = 0;
  }
}

/* vectors ib..ib+NBC of M x child: a dot product over the child's
 * partials x, or the row of its tip state */
PLF_INLINE void PLF_V(apply_block)(int NBC, const PLF_REAL *mt, int S, int W,
                                   int ib, const PLF_REAL *x, int st,
                                   PLF_V_T *acc) {
  if (!x) {
    const PLF_REAL *row =
        mt + (size_t)((unsigned)st < (unsigned)S ? st : S) * W + ib * PLF_VL;
    for (int b = 0; b < NBC; b++) acc[b] = V_LOADU(row + b * PLF_VL);
    return;
  }
  for (int b = 0; b < NBC; b++) acc[b] = V_ZERO();
  const PLF_REAL *row = mt + ib * PLF_VL;
  for (int j = 0; j < S; j++, row += W) {
    PLF_V_T xj = V_SET1(x[j]);
    for (int b = 0; b < NBC; b++)
      acc[b] = V_FMA(V_LOADU(row + b * PLF_VL), xj, acc[b]);
  }
}

/* one pattern and category of an update: out = (M1 x1) .* (M2 x2); returns
 * the largest value */
PLF_INLINE PLF_REAL PLF_V(update_row)(const PLF_REAL *mt1,
                                      const PLF_REAL *mt2, int S, int W,
                                      int NV, const PLF_REAL *x1, int s1,
                                      const PLF_REAL *x2, int s2,
                                      PLF_REAL *out) {
  PLF_V_T vmax = V_ZERO();
  for (int ib = 0; ib < NV; ib += PLF_NB) {
    PLF_V_T a[PLF_NB], b[PLF_NB];
    int nb = NV - ib < PLF_NB ? NV - ib : PLF_NB;
    switch (nb) {
#define PLF_BLOCK_CASE(NBC)                                      \
  case NBC:                                                      \
    PLF_V(apply_block)(NBC, mt1, S, W, ib, x1, s1, a);           \
    PLF_V(apply_block)(NBC, mt2, S, W, ib, x2, s2, b);           \
    break;
      PLF_BLOCK_CASE(1)
      PLF_BLOCK_CASE(2)
      PLF_BLOCK_CASE(3)
      default:
      PLF_BLOCK_CASE(4)
#undef PLF_BLOCK_CASE
    }
    for (int k = 0; k < nb; k++) {
      PLF_V_T v = V_MUL(a[k], b[k]);
      int first = (ib + k) * PLF_VL, lanes = S - first;
      if (lanes >= PLF_VL)
        V_STOREU(out + first, v);
      else
        V_STOREN(out + first, v, lanes);
      vmax = V_MAX(vmax, v);
    }
  }
  return V_HMAX(vmax);
}

static void PLF_V(update_n)(const plf_dims *d, const PLF_T(plf_update) *op,
                            int p0, int p1) {
  const int S = d->states, C = d->categories;
  const size_t P = (size_t)d->patterns;
  const int NV = (S + PLF_VL - 1) / PLF_VL, W = NV * PLF_VL;
  const PLF_T(plf_child) *a = &op->child1, *b = &op->child2;
  PLF_REAL mt1[PLF_MT_SIZE], mt2[PLF_MT_SIZE], max[PLF_CHUNK];
  /* without rescaling nothing is revisited: one chunk */
  const int chunk = op->scale ? PLF_CHUNK : p1 - p0;
  for (int q0 = p0; q0 < p1; q0 += chunk) {
    int q1 = p1 - q0 < chunk ? p1 : q0 + chunk;
    if (op->scale)
      for (int p = q0; p < q1; p++) max[p - q0] = 0;
    for (int c = 0; c < C; c++) {
      PLF_V(transpose)(a->matrices + (size_t)c * S * S, S, W, mt1);
      PLF_V(transpose)(b->matrices + (size_t)c * S * S, S, W, mt2);
      for (int p = q0; p < q1; p++) {
        size_t row = (c * P + p) * S;
        PLF_REAL m = PLF_V(update_row)(
            mt1, mt2, S, W, NV, a->partials ? a->partials + row : NULL,
            a->states ? a->states[p] : 0,
            b->partials ? b->partials + row : NULL,
            b->states ? b->states[p] : 0, op->dest + row);
        if (op->scale && m > max[p - q0]) max[p - q0] = m;
      }
    }
    if (!op->scale) continue;
    for (int p = q0; p < q1; p++) {
      PLF_REAL m = max[p - q0] == 0 ? 1 : max[p - q0];
      max[p - q0] = m;
      PLF_V_T inv = V_SET1((PLF_REAL)1 / m);
      for (int c = 0; c < C; c++) {
        PLF_REAL *v = op->dest + (c * P + p) * S;
        for (int first = 0; first < S; first += PLF_VL) {
          int lanes = S - first;
          if (lanes >= PLF_VL)
            V_STOREU(v + first, V_MUL(V_LOADU(v + first), inv));
          else
            V_STOREN(v + first, V_MUL(V_LOADN(v + first, lanes), inv),
                     lanes);
        }
      }
    }
    PLF_V(put_scales)(op, q0, max, q1 - q0);
  }
}

/* sum_i f[i] x[i] over S values */
PLF_INLINE PLF_REAL PLF_V(dot_n)(const PLF_REAL *f, const PLF_REAL *x,
                                 int S) {
  PLF_V_T acc = V_ZERO();
  for (int first = 0; first < S; first += PLF_VL) {
    int lanes = S - first;
    if (lanes >= PLF_VL)
      acc = V_FMA(V_LOADU(f + first), V_LOADU(x + first), acc);
    else
      acc = V_FMA(V_LOADN(f + first, lanes), V_LOADN(x + first, lanes), acc);
  }
  return V_HSUM(acc);
}

static double PLF_V(root_n)(const plf_dims *d, const PLF_REAL *root,
                            const PLF_T(plf_integrate) *in, int p0, int p1) {
  const int S = d->states, C = d->categories;
  const size_t P = (size_t)d->patterns;
  double total = 0;
  PLF_REAL L[PLF_LOGB];
  for (int q0 = p0; q0 < p1; q0 += PLF_LOGB) {
    int q1 = p1 - q0 < PLF_LOGB ? p1 : q0 + PLF_LOGB;
    for (int p = q0; p < q1; p++) {
      PLF_REAL sum = 0;
      for (int c = 0; c < C; c++)
        sum += in->category_weights[c] *
               PLF_V(dot_n)(in->frequencies, root + (c * P + p) * S, S);
      L[p - q0] = sum;
    }
    total += PLF_V(sites)(in, q0, L, q1 - q0);
  }
  return total;
}

/* one pattern and category of an edge: sum_i f[i] parent[i] (M x)[i] */
PLF_INLINE PLF_REAL PLF_V(edge_row)(const PLF_REAL *mt, int S, int W, int NV,
                                    const PLF_REAL *f, const PLF_REAL *parent,
                                    const PLF_REAL *x, int st) {
  PLF_V_T acc = V_ZERO();
  for (int ib = 0; ib < NV; ib += PLF_NB) {
    PLF_V_T cv[PLF_NB];
    int nb = NV - ib < PLF_NB ? NV - ib : PLF_NB;
    switch (nb) {
#define PLF_BLOCK_CASE(NBC)                                      \
  case NBC:                                                      \
    PLF_V(apply_block)(NBC, mt, S, W, ib, x, st, cv);            \
    break;
      PLF_BLOCK_CASE(1)
      PLF_BLOCK_CASE(2)
      PLF_BLOCK_CASE(3)
      default:
      PLF_BLOCK_CASE(4)
#undef PLF_BLOCK_CASE
    }
    for (int k = 0; k < nb; k++) {
      int first = (ib + k) * PLF_VL, lanes = S - first;
      PLF_V_T pv = lanes >= PLF_VL ? V_LOADU(parent + first)
                                   : V_LOADN(parent + first, lanes);
      /* f is padded to W with zeros */
      acc = V_FMA(V_MUL(V_LOADU(f + first), pv), cv[k], acc);
    }
  }
  return V_HSUM(acc);
}

static double PLF_V(edge_n)(const plf_dims *d, const PLF_REAL *parent,
                            const PLF_T(plf_child) *child,
                            const PLF_T(plf_integrate) *in, int p0, int p1) {
  const int S = d->states, C = d->categories;
  const size_t P = (size_t)d->patterns;
  const int NV = (S + PLF_VL - 1) / PLF_VL, W = NV * PLF_VL;
  PLF_REAL mt[PLF_MT_SIZE], L[PLF_CHUNK], f[PLF_SIMD_MAX_STATES];
  for (int i = 0; i < W; i++) f[i] = i < S ? in->frequencies[i] : 0;
  double total = 0;
  for (int q0 = p0; q0 < p1; q0 += PLF_CHUNK) {
    int q1 = p1 - q0 < PLF_CHUNK ? p1 : q0 + PLF_CHUNK;
    for (int p = q0; p < q1; p++) L[p - q0] = 0;
    for (int c = 0; c < C; c++) {
      PLF_V(transpose)(child->matrices + (size_t)c * S * S, S, W, mt);
      PLF_REAL w = in->category_weights[c];
      for (int p = q0; p < q1; p++) {
        size_t row = (c * P + p) * S;
        L[p - q0] += w * PLF_V(edge_row)(
                             mt, S, W, NV, f, parent + row,
                             child->partials ? child->partials + row : NULL,
                             child->states ? child->states[p] : 0);
      }
    }
    total += PLF_V(sites)(in, q0, L, q1 - q0);
  }
  return total;
}

/* ==== the variant's entry points ========================================== */

static void PLF_V(update)(const plf_dims *d, const PLF_T(plf_update) *op,
                          int p0, int p1) {
  if (d->states == 4 && d->categories <= PLF_C4_MAX)
    PLF_V(update4)(d, op, p0, p1);
  else if (d->states <= PLF_SIMD_MAX_STATES)
    PLF_V(update_n)(d, op, p0, p1);
  else
    PLF_T(plf_update_scalar)(d, op, p0, p1);
}

static double PLF_V(root)(const plf_dims *d, const PLF_REAL *root,
                          const PLF_T(plf_integrate) *in, int p0, int p1) {
  if (d->states == 4 && d->categories <= PLF_C4_MAX)
    return PLF_V(lnl4)(d, root, NULL, in, p0, p1);
  if (d->states <= PLF_SIMD_MAX_STATES)
    return PLF_V(root_n)(d, root, in, p0, p1);
  return PLF_T(plf_root_scalar)(d, root, in, p0, p1);
}

static double PLF_V(edge)(const plf_dims *d, const PLF_REAL *parent,
                          const PLF_T(plf_child) *child,
                          const PLF_T(plf_integrate) *in, int p0, int p1) {
  if (d->states == 4 && d->categories <= PLF_C4_MAX)
    return PLF_V(lnl4)(d, parent, child, in, p0, p1);
  if (d->states <= PLF_SIMD_MAX_STATES)
    return PLF_V(edge_n)(d, parent, child, in, p0, p1);
  return PLF_T(plf_edge_scalar)(d, parent, child, in, p0, p1);
}

#undef PLF_LOGB
#undef PLF_B4
#undef PLF_B4G
#undef PLF_STAGE
#undef PLF_NB
#undef PLF_CHUNK
#undef PLF_MT_SIZE
#undef PLF_C4_MAX
#undef PLF_INLINE
#undef PLF_V
