/*
 * plf.cl - the "plf" accelerator's kernels on OpenCL (OpenCL C 1.2): the
 * operations of plf_exec.c on the state block (plf_layout.h) kept in one
 * device buffer, with the CPU kernels' math (plf_kernel.h, the scalar
 * reference's order of operations).
 *
 * Built once per precision from this source (plf_opencl.c):
 *   PLF_DOUBLE  1: partials, matrices and scale buffers are double
 *               0: float
 *   PLF_FP64    1: the device has cl_khr_fp64; model values (eigen
 *               systems, rates, weights, frequencies, lengths) are read as
 *               doubles and transition matrices computed in double, as the
 *               CPU does in both precisions
 *               0: (single precision only) model values are converted from
 *               their double bits in software, site log-likelihoods
 *               written back as double bits; the host computes P(t) then
 *               (plf_matrices is not used)
 *
 * Every buffer is addressed as the state buffer st plus a byte offset (a
 * region of plf_layout, plus the index times its stride), computed on the
 * host. 1-D kernels cover items [base, base + global size) of n, in chunks
 * the host launches one after the other; items at or past n do nothing.
 */
#if PLF_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#if PLF_DOUBLE
typedef double real;
#else
typedef float real;
#endif

/* ---- model values: doubles in the state block ---------------------------- */

#if PLF_FP64
typedef double mreal;   /* model values and transition matrices */

static mreal from_bits(ulong b) { return as_double(b); }
static ulong site_bits(real v) { return as_ulong((double)v); }
#else
typedef float mreal;

/* The float nearest a double given by its bits (a double's subnormals are
 * below float's range: 0). */
static float from_bits(ulong b) {
  int e = (int)((b >> 52) & 0x7ff);
  ulong m = b & 0xFFFFFFFFFFFFFUL;
  float v;
  if (e == 0x7ff)
    v = m ? NAN : INFINITY;
  else if (e == 0)
    v = 0.0f;
  else
    v = ldexp(convert_float_rte(m | (1UL << 52)), e - 1075);
  return (b >> 63) ? -v : v;
}

/* The bits of the double equal to f (exact). */
static ulong site_bits(float f) {
  uint u = as_uint(f);
  ulong sign = (ulong)(u >> 31) << 63;
  uint e = (u >> 23) & 0xff, m = u & 0x7fffff;
  if (e == 0xff) return sign | (0x7ffUL << 52) | ((ulong)m << 29);
  if (e == 0) {
    if (m == 0) return sign;
    int lead = 31 - (int)clz(m);   /* f = m 2^-149, m's top bit at lead */
    ulong mant = ((ulong)m << (52 - lead)) & 0xFFFFFFFFFFFFFUL;
    return sign | ((ulong)(lead - 149 + 1023) << 52) | mant;
  }
  return sign | ((ulong)(e - 127 + 1023) << 52) | ((ulong)m << 29);
}
#endif

/* The i-th double of the region at byte offset off. */
static mreal model(__global const uchar *st, ulong off, ulong i) {
  return from_bits(((__global const ulong *)(st + off))[i]);
}

#define REALS(off) ((__global real *)(st + (off)))

/* ---- transition matrices ------------------------------------------------ */

/* One work-group per (matrix k, category c) of a batch, group g = k C + c:
 * idx[3k..3k+2] = matrix, eigen system, rate set; lens[k] the branch
 * length (double bits). P[i][j] = sum_k E[i][k] Einv[k][j] exp(eval[k] r t),
 * clamped at 0; exp(eval[k] r t) once per group in local memory ex
 * (states values). The group's items share the S x S entries. */
__kernel void plf_matrices(__global uchar *st, ulong eig_off,
                           ulong eig_stride, ulong rates_off, ulong mat_off,
                           ulong mat_stride, int S, int C,
                           __global const uint *idx,
                           __global const ulong *lens, __local mreal *ex,
                           ulong base, ulong n) {
  /* launched with exactly the groups wanted (g < n): no item returns
   * early, as every item must reach the barrier */
  ulong g = base + get_group_id(0);
  ulong k = g / (ulong)C;
  int c = (int)(g % (ulong)C);
  uint mat = idx[3 * k], eig = idx[3 * k + 1], rs = idx[3 * k + 2];
  ulong e = eig_off + eig * eig_stride;
  ulong ss = (ulong)S * S;
  mreal rt = from_bits(lens[k]) * model(st, rates_off, (ulong)rs * C + c);
  int lid = (int)get_local_id(0), ls = (int)get_local_size(0);
  for (int q = lid; q < S; q += ls) ex[q] = exp(model(st, e, 2 * ss + q) * rt);
  barrier(CLK_LOCAL_MEM_FENCE);
  __global real *out = REALS(mat_off + mat * mat_stride) + (ulong)c * ss;
  for (int q = lid; q < S * S; q += ls) {
    int i = q / S, j = q % S;
    mreal s0 = 0;
    for (int kk = 0; kk < S; kk++) {
      mreal cijk = model(st, e, (ulong)i * S + kk) *
                   model(st, e, ss + (ulong)kk * S + j);
      s0 += cijk * ex[kk];
    }
    out[q] = (real)(s0 > 0 ? s0 : 0);
  }
}

/* ---- partials ----------------------------------------------------------- */

/* (M x child)[i] of category c, pattern p: the child's partials (x at byte
 * offset x) or its tip state (states != 0: int32 states at x; one outside
 * [0, S) is missing data, 1); m the edge's matrices. */
static real term(__global const uchar *st, ulong m, ulong x, int states,
                 int S, int P, int c, int p, int i) {
  __global const real *mrow =
      (__global const real *)(st + m) + ((ulong)c * S + i) * S;
  if (states) {
    int s = ((__global const int *)(st + x))[p];
    return (uint)s < (uint)S ? mrow[s] : (real)1;
  }
  __global const real *xv =
      (__global const real *)(st + x) + ((ulong)c * P + p) * S;
  real sum = 0;
  for (int j = 0; j < S; j++) sum += mrow[j] * xv[j];
  return sum;
}

/* dest = (M1 x child1) .* (M2 x child2) for patterns [p0, p0 + np): one
 * item per (category, pattern, state), item = (c np + p - p0) S + i. */
__kernel void plf_partials(__global uchar *st, int S, int P, int p0, int np,
                           ulong dest, ulong x1, int s1, ulong m1, ulong x2,
                           int s2, ulong m2, ulong base, ulong n) {
  ulong g = base + get_global_id(0);
  if (g >= n) return;
  int i = (int)(g % (ulong)S);
  ulong r = g / (ulong)S;
  int p = p0 + (int)(r % (ulong)np);
  int c = (int)(r / (ulong)np);
  real a = term(st, m1, x1, s1, S, P, c, p, i);
  real b = term(st, m2, x2, s2, S, P, c, p, i);
  REALS(dest)[((ulong)c * P + p) * S + i] = a * b;
}

/* BEAGLE's rescaling, one item per pattern p0 + item: divide the pattern's
 * values (all categories and states) by their largest (1 when that is 0),
 * its log into scale[p], added to cumulative[p] when has_cum. */
__kernel void plf_rescale(__global uchar *st, int S, int P, int C, int p0,
                          ulong dest, ulong scale, ulong cum, int has_cum,
                          ulong base, ulong n) {
  ulong g = base + get_global_id(0);
  if (g >= n) return;
  int p = p0 + (int)g;
  __global real *d = REALS(dest);
  real max = 0;
  for (int c = 0; c < C; c++) {
    __global const real *v = d + ((ulong)c * P + p) * S;
    for (int i = 0; i < S; i++)
      if (v[i] > max) max = v[i];
  }
  if (max == 0) max = 1;
  real inv = (real)1 / max;
  for (int c = 0; c < C; c++) {
    __global real *v = d + ((ulong)c * P + p) * S;
    for (int i = 0; i < S; i++) v[i] *= inv;
  }
  real lg = log(max);
  REALS(scale)[p] = lg;
  if (has_cum) REALS(cum)[p] += lg;
}

/* ---- scale buffers ------------------------------------------------------- */

/* cumulative[p] += (sign > 0) or -= each listed scale buffer (indices idx,
 * count of them, in order; buffer b at scales + b stride), one item per
 * pattern p0 + item. */
__kernel void plf_scale_sum(__global uchar *st, ulong cum, ulong scales,
                            ulong stride, __global const uint *idx,
                            int count, int sign, int p0, ulong base,
                            ulong n) {
  ulong g = base + get_global_id(0);
  if (g >= n) return;
  int p = p0 + (int)g;
  real v = REALS(cum)[p];
  for (int k = 0; k < count; k++) {
    real s = REALS(scales + idx[k] * stride)[p];
    if (sign > 0)
      v += s;
    else
      v -= s;
  }
  REALS(cum)[p] = v;
}

/* ---- log-likelihoods ------------------------------------------------------ */

/* site[p] = log(L) + cumulative[p] into the site lnl region (doubles). */
static void put_site(__global uchar *st, ulong site, ulong cum, int has_cum,
                     int p, real L) {
  real v = log(L);
  if (has_cum) v += REALS(cum)[p];
  ((__global ulong *)(st + site))[p] = site_bits(v);
}

/* Root: L[p] = sum_c w[c] sum_s pi[s] root[c][p][s], one item per pattern
 * p0 + item; weights (C) and frequencies (S) at w and f (doubles,
 * converted to real as the CPU executor does). */
__kernel void plf_root(__global uchar *st, int S, int P, int C, int p0,
                       ulong root, ulong w, ulong f, ulong cum, int has_cum,
                       ulong site, ulong base, ulong n) {
  ulong g = base + get_global_id(0);
  if (g >= n) return;
  int p = p0 + (int)g;
  real L = 0;
  for (int c = 0; c < C; c++) {
    __global const real *x = REALS(root) + ((ulong)c * P + p) * S;
    real sum = 0;
    for (int s = 0; s < S; s++) sum += (real)model(st, f, s) * x[s];
    L += (real)model(st, w, c) * sum;
  }
  put_site(st, site, cum, has_cum, p, L);
}

/* Edge: L[p] = sum_c w[c] sum_i pi[i] parent[c][p][i] (M x child)[c][p][i],
 * the child's partials or tip states at x (states != 0), its matrices at
 * m. */
__kernel void plf_edge(__global uchar *st, int S, int P, int C, int p0,
                       ulong parent, ulong x, int states, ulong m, ulong w,
                       ulong f, ulong cum, int has_cum, ulong site,
                       ulong base, ulong n) {
  ulong g = base + get_global_id(0);
  if (g >= n) return;
  int p = p0 + (int)g;
  real L = 0;
  for (int c = 0; c < C; c++) {
    __global const real *par = REALS(parent) + ((ulong)c * P + p) * S;
    real sum = 0;
    for (int i = 0; i < S; i++)
      sum += (real)model(st, f, i) * par[i] *
             term(st, m, x, states, S, P, c, p, i);
    L += (real)model(st, w, c) * sum;
  }
  put_site(st, site, cum, has_cum, p, L);
}

/* ---- partials from an input block ---------------------------------------- */

/* dest[item] = the double at word w + 2 (item % per) of in (a 4-byte
 * aligned input slice: two little-endian words), as real; per < n repeats
 * a tip's patterns x states values for every category. */
__kernel void plf_convert(__global uchar *st, ulong dest,
                          __global const uint *in, ulong w, ulong per,
                          ulong base, ulong n) {
  ulong g = base + get_global_id(0);
  if (g >= n) return;
  ulong k = w + 2 * (g % per);
  ulong bits = ((ulong)in[k + 1] << 32) | in[k];
  REALS(dest)[g] = (real)from_bits(bits);
}
