/*
 * cnn.cl - the layers of a cnn training stage in single precision: FP, EB
 * and PG of convolution, max-pool, avg-pool, dropout and connected layers,
 * the activations (ReLU, leaky, logistic), batch normalisation, softmax
 * with cross-entropy, and the SGD update. The maths and layouts are
 * cnn_ref.h's (NCHW, OIHW weights, connected weights output x input in
 * CHW order, darknet's max-pool windows), the passes' cnn_pass.h's
 * (dropout's hash, batch normalisation's constants); the host side is
 * cnn_opencl.c.
 *
 * Every kernel is one-dimensional, one work-item per element it writes,
 * or in the convolution and connected layers per CNN_BLOCK elements (a
 * register tile: channels or samples that share the values read), the
 * global size rounded up (items past `total` return at once). Sums run in
 * float in cnn_ref.c's order where one item owns the whole sum; the
 * device may contract a*b+c into an FMA.
 *
 * Loops read global memory directly. For a GPU, tiling in local memory
 * belongs in cnn_conv_fwd (a work-group per output tile, the input patch
 * and the filter's slice in local memory), cnn_conv_bwd_data (the same
 * over the input) and the two weight-gradient kernels (a group per weight
 * tile, the batch reduced in local memory); connected layers are matrix
 * products and would take a tiled GEMM.
 */

/* cnn_net.h's cnn_activation: 0 linear, 1 ReLU, 2 leaky, 3 logistic. */
#define CNN_LEAKY_SLOPE 0.1f

/* The activation of a pre-activation z. */
inline float act_fwd(int act, float z) {
  switch (act) {
  case 1: return z < 0.0f ? 0.0f : z;
  case 2: return z > 0.0f ? z : CNN_LEAKY_SLOPE * z;
  case 3: return 1.0f / (1.0f + exp(-z));
  default: return z;
  }
}

/* The error through the activation, from its output y. */
inline float act_bwd(int act, float y, float e) {
  switch (act) {
  case 1: return y > 0.0f ? e : 0.0f;
  case 2: return y > 0.0f ? e : CNN_LEAKY_SLOPE * e;
  case 3: return e * y * (1.0f - y);
  default: return e;
  }
}

/* Each convolution or connected-layer item computes CNN_BLOCK channels
 * or samples of what it writes (cnn_opencl.c defines it), so that one
 * value read from global memory serves all of them; an item of a block
 * past the last channel or sample reads the last one's values and stores
 * nothing. */
#ifndef CNN_BLOCK
#define CNN_BLOCK 4
#endif

/* The number of CNN_BLOCK blocks covering n channels or samples. */
inline int blocks(int n) { return (n + CNN_BLOCK - 1) / CNN_BLOCK; }

/* cnn_conv_fwd: y (N x O x OH x OW) from x (N x C x H x W), weights w
 * (O x C x K x K), biases b (O), stride S, padding P on each side; one
 * item per sample, block of output channels and output position. */
__kernel void cnn_conv_fwd(__global const float *x, __global const float *w,
                           __global const float *b, __global float *y,
                           int N, int C, int H, int W, int O, int OH, int OW,
                           int K, int S, int P, int act) {
  size_t g = get_global_id(0);
  int OB = blocks(O);
  if (g >= (size_t)N * OB * OH * OW) return;
  int ow = (int)(g % OW);
  size_t t = g / OW;
  int oh = (int)(t % OH);
  t /= OH;
  int o0 = (int)(t % OB) * CNN_BLOCK;
  size_t n = t / OB;
  size_t wo[CNN_BLOCK];
  float z[CNN_BLOCK];
  for (int j = 0; j < CNN_BLOCK; j++) {
    int o = min(o0 + j, O - 1);
    wo[j] = (size_t)o * C * K * K;
    z[j] = b[o];
  }
  /* the window's rows and columns inside the input */
  int h0 = oh * S - P, w0 = ow * S - P;
  int kh0 = max(0, -h0), kh1 = min(K, H - h0);
  int kw0 = max(0, -w0), kw1 = min(K, W - w0);
  for (int i = 0; i < C; i++) {
    __global const float *xi = x + (n * C + i) * H * W;
    for (int kh = kh0; kh < kh1; kh++) {
      int ih = h0 + kh;
      for (int kw = kw0; kw < kw1; kw++) {
        int iw = w0 + kw;
        float xv = xi[(size_t)ih * W + iw];
        size_t at = ((size_t)i * K + kh) * K + kw;
        for (int j = 0; j < CNN_BLOCK; j++) z[j] += w[wo[j] + at] * xv;
      }
    }
  }
  for (int j = 0; j < CNN_BLOCK && o0 + j < O; j++)
    y[((n * O + o0 + j) * OH + oh) * OW + ow] = act_fwd(act, z[j]);
}

/* first_tap: the smallest k >= 0 with t - k a multiple of S and
 * (t - k) / S < OUT, the outputs along one axis, for t >= 0. */
inline int first_tap(int t, int OUT, int S) {
  int k = max(0, t - (OUT - 1) * S);
  return k + (t - k) % S;
}

/* cnn_conv_bwd_data: dx (N x C x H x W) from the error dz at the
 * convolution's pre-activation (N x O x OH x OW), gathered per input
 * element over the outputs whose window covers it; one item per sample,
 * block of input channels and input position. */
__kernel void cnn_conv_bwd_data(__global const float *dz,
                                __global const float *w, __global float *dx,
                                int N, int C, int H, int W, int O, int OH,
                                int OW, int K, int S, int P) {
  size_t g = get_global_id(0);
  int CB = blocks(C);
  if (g >= (size_t)N * CB * H * W) return;
  int iw = (int)(g % W);
  size_t t = g / W;
  int ih = (int)(t % H);
  t /= H;
  int i0 = (int)(t % CB) * CNN_BLOCK;
  size_t n = t / CB;
  size_t wi[CNN_BLOCK];
  float s[CNN_BLOCK];
  for (int j = 0; j < CNN_BLOCK; j++) {
    wi[j] = (size_t)min(i0 + j, C - 1) * K * K;
    s[j] = 0.0f;
  }
  /* the kernel rows (columns) whose output row (column) (ih + P - kh) / S
   * exists: from the first in range with the right remainder, every S */
  int th = ih + P, tw = iw + P;
  int kh0 = first_tap(th, OH, S), kh1 = min(K - 1, th);
  int kw0 = first_tap(tw, OW, S), kw1 = min(K - 1, tw);
  for (int o = 0; o < O; o++) {
    __global const float *dzo = dz + (n * O + o) * OH * OW;
    size_t wo = (size_t)o * C * K * K;
    for (int kh = kh0; kh <= kh1; kh += S) {
      int oh = (th - kh) / S;
      for (int kw = kw0; kw <= kw1; kw += S) {
        int ow = (tw - kw) / S;
        float dv = dzo[(size_t)oh * OW + ow];
        size_t at = wo + (size_t)kh * K + kw;
        for (int j = 0; j < CNN_BLOCK; j++) s[j] += w[at + wi[j]] * dv;
      }
    }
  }
  for (int j = 0; j < CNN_BLOCK && i0 + j < C; j++)
    dx[((n * C + i0 + j) * H + ih) * W + iw] = s[j];
}

/* first_out: the smallest o >= 0 with o * S + d >= 0. */
inline int first_out(int d, int S) { return d >= 0 ? 0 : (S - 1 - d) / S; }

/* cnn_conv_bwd_weights: dw (O x C x K x K) += the sum over the batch and
 * the output positions of x * dz; one item per block of output channels,
 * input channel and kernel position. */
__kernel void cnn_conv_bwd_weights(__global const float *x,
                                   __global const float *dz,
                                   __global float *dw, int N, int C, int H,
                                   int W, int O, int OH, int OW, int K,
                                   int S, int P) {
  size_t g = get_global_id(0);
  int OB = blocks(O);
  if (g >= (size_t)OB * C * K * K) return;
  int kw = (int)(g % K);
  size_t t = g / K;
  int kh = (int)(t % K);
  t /= K;
  int i = (int)(t % C);
  int o0 = (int)(t / C) * CNN_BLOCK;
  size_t dzo[CNN_BLOCK];
  float s[CNN_BLOCK];
  for (int j = 0; j < CNN_BLOCK; j++) {
    dzo[j] = (size_t)min(o0 + j, O - 1) * OH * OW;
    s[j] = 0.0f;
  }
  /* the output rows (columns) whose input row (column) o * S - P + k
   * lies inside the input */
  int oh0 = first_out(kh - P, S), oh1 = min(OH, first_out(kh - P - H, S));
  int ow0 = first_out(kw - P, S), ow1 = min(OW, first_out(kw - P - W, S));
  for (int n = 0; n < N; n++) {
    __global const float *xi = x + ((size_t)n * C + i) * H * W;
    __global const float *dzn = dz + (size_t)n * O * OH * OW;
    for (int oh = oh0; oh < oh1; oh++) {
      int ih = oh * S - P + kh;
      for (int ow = ow0; ow < ow1; ow++) {
        int iw = ow * S - P + kw;
        float xv = xi[(size_t)ih * W + iw];
        size_t at = (size_t)oh * OW + ow;
        for (int j = 0; j < CNN_BLOCK; j++) s[j] += xv * dzn[dzo[j] + at];
      }
    }
  }
  for (int j = 0; j < CNN_BLOCK && o0 + j < O; j++)
    dw[(((size_t)(o0 + j) * C + i) * K + kh) * K + kw] += s[j];
}

/* cnn_bias_grad: db (C) += the sum over the batch and the P positions of
 * dz (N x C x P): convolutions (P = OH x OW) and connected layers (P = 1). */
__kernel void cnn_bias_grad(__global const float *dz, __global float *db,
                            int N, int C, int P) {
  size_t c = get_global_id(0);
  if (c >= (size_t)C) return;
  float s = 0.0f;
  for (int n = 0; n < N; n++) {
    __global const float *d = dz + ((size_t)n * C + c) * P;
    for (int p = 0; p < P; p++) s += d[p];
  }
  db[c] += s;
}

/* cnn_act_bwd: dz, the error e through the activation act, from its
 * output y. */
__kernel void cnn_act_bwd(__global const float *y, __global const float *e,
                          __global float *dz, ulong total, int act) {
  size_t g = get_global_id(0);
  if (g >= total) return;
  dz[g] = act_bwd(act, y[g], e[g]);
}

/* cnn_pool_fwd: darknet's max-pool, y (N x C x OH x OW) from x
 * (N x C x H x W), windows of K x K from row oh * S - B (B = padding / 2);
 * arg receives the first maximum's position in its H x W plane, -1 for a
 * window wholly outside the input (whose output is 0). */
__kernel void cnn_pool_fwd(__global const float *x, __global float *y,
                           __global int *arg, int N, int C, int H, int W,
                           int OH, int OW, int K, int S, int B) {
  size_t g = get_global_id(0);
  if (g >= (size_t)N * C * OH * OW) return;
  int ow = (int)(g % OW);
  size_t t = g / OW;
  int oh = (int)(t % OH);
  size_t plane = t / OH;   /* n * C + c */
  __global const float *xp = x + plane * H * W;
  int best = -1;
  float bv = 0.0f;
  for (int kh = 0; kh < K; kh++) {
    int ih = oh * S - B + kh;
    if (ih < 0 || ih >= H) continue;
    for (int kw = 0; kw < K; kw++) {
      int iw = ow * S - B + kw;
      if (iw < 0 || iw >= W) continue;
      int at = ih * W + iw;
      if (best < 0 || xp[at] > bv) {
        best = at;
        bv = xp[at];
      }
    }
  }
  y[g] = bv;
  arg[g] = best;
}

/* cnn_pool_bwd: dx (N x C x H x W), each input element the sum of the
 * errors dy of the windows whose maximum it was (gathered, so overlapping
 * windows need no atomics). */
__kernel void cnn_pool_bwd(__global const float *dy, __global const int *arg,
                           __global float *dx, int N, int C, int H, int W,
                           int OH, int OW, int K, int S, int B) {
  size_t g = get_global_id(0);
  if (g >= (size_t)N * C * H * W) return;
  int iw = (int)(g % W);
  size_t t = g / W;
  int ih = (int)(t % H);
  size_t plane = t / H;
  int at = ih * W + iw;
  /* windows oh with oh * S - B <= ih < oh * S - B + K */
  int hh = (ih + B) / S, lh = ih + B - K + 1;
  int hw = (iw + B) / S, lw = iw + B - K + 1;
  lh = lh <= 0 ? 0 : (lh + S - 1) / S;
  lw = lw <= 0 ? 0 : (lw + S - 1) / S;
  if (hh > OH - 1) hh = OH - 1;
  if (hw > OW - 1) hw = OW - 1;
  float s = 0.0f;
  for (int oh = lh; oh <= hh; oh++)
    for (int ow = lw; ow <= hw; ow++) {
      size_t o = (plane * OH + oh) * OW + ow;
      if (arg[o] == at) s += dy[o];
    }
  dx[g] = s;
}

/* cnn_fc_fwd: y (N x O) = act(b + w x), w (O x J), x (N x J); one item
 * per output and block of samples, which share each weight read. */
__kernel void cnn_fc_fwd(__global const float *x, __global const float *w,
                         __global const float *b, __global float *y, int N,
                         int J, int O, int act) {
  size_t g = get_global_id(0);
  if (g >= (size_t)blocks(N) * O) return;
  size_t o = g % O;
  int n0 = (int)(g / O) * CNN_BLOCK;
  __global const float *wo = w + o * J;
  size_t xn[CNN_BLOCK];
  float z[CNN_BLOCK];
  for (int k = 0; k < CNN_BLOCK; k++) {
    xn[k] = (size_t)min(n0 + k, N - 1) * J;
    z[k] = b[o];
  }
  for (int j = 0; j < J; j++) {
    float wv = wo[j];
    for (int k = 0; k < CNN_BLOCK; k++) z[k] += wv * x[xn[k] + j];
  }
  for (int k = 0; k < CNN_BLOCK && n0 + k < N; k++)
    y[(size_t)(n0 + k) * O + o] = act_fwd(act, z[k]);
}

/* cnn_fc_bwd_data: dx (N x J) = w^T dz; one item per input and block of
 * samples. */
__kernel void cnn_fc_bwd_data(__global const float *dz,
                              __global const float *w, __global float *dx,
                              int N, int J, int O) {
  size_t g = get_global_id(0);
  if (g >= (size_t)blocks(N) * J) return;
  size_t j = g % J;
  int n0 = (int)(g / J) * CNN_BLOCK;
  size_t dzn[CNN_BLOCK];
  float s[CNN_BLOCK];
  for (int k = 0; k < CNN_BLOCK; k++) {
    dzn[k] = (size_t)min(n0 + k, N - 1) * O;
    s[k] = 0.0f;
  }
  for (int o = 0; o < O; o++) {
    float wv = w[(size_t)o * J + j];
    for (int k = 0; k < CNN_BLOCK; k++) s[k] += wv * dz[dzn[k] + o];
  }
  for (int k = 0; k < CNN_BLOCK && n0 + k < N; k++)
    dx[(size_t)(n0 + k) * J + j] = s[k];
}

/* cnn_fc_bwd_weights: dw (O x J) += the sum over the batch of dz x^T; one
 * item per input and block of outputs, which share each input read. */
__kernel void cnn_fc_bwd_weights(__global const float *x,
                                 __global const float *dz,
                                 __global float *dw, int N, int J, int O) {
  size_t g = get_global_id(0);
  if (g >= (size_t)blocks(O) * J) return;
  size_t j = g % J;
  int o0 = (int)(g / J) * CNN_BLOCK;
  int ok[CNN_BLOCK];
  float s[CNN_BLOCK];
  for (int k = 0; k < CNN_BLOCK; k++) {
    ok[k] = min(o0 + k, O - 1);
    s[k] = 0.0f;
  }
  for (int n = 0; n < N; n++) {
    float xv = x[(size_t)n * J + j];
    __global const float *dzn = dz + (size_t)n * O;
    for (int k = 0; k < CNN_BLOCK; k++) s[k] += xv * dzn[ok[k]];
  }
  for (int k = 0; k < CNN_BLOCK && o0 + k < O; k++)
    dw[(size_t)(o0 + k) * J + j] += s[k];
}

/* cnn_softmax: one item per sample, p (N x K) from x; with labels, the
 * sample's loss -log p[label] into loss[n] and the gradient of the mean
 * loss with respect to x, (p - onehot(label)) / N, into dx. */
__kernel void cnn_softmax(__global const float *x, __global float *p,
                          __global const uchar *labels, __global float *loss,
                          __global float *dx, int N, int K, int with_labels) {
  size_t n = get_global_id(0);
  if (n >= (size_t)N) return;
  __global const float *xr = x + n * K;
  __global float *pr = p + n * K;
  float m = xr[0], sum = 0.0f;
  for (int k = 1; k < K; k++) m = fmax(m, xr[k]);
  for (int k = 0; k < K; k++) sum += pr[k] = exp(xr[k] - m);
  for (int k = 0; k < K; k++) pr[k] /= sum;
  if (!with_labels) return;
  int l = labels[n];
  loss[n] = log(sum) - (xr[l] - m);
  for (int k = 0; k < K; k++)
    dx[n * K + k] = (pr[k] - (k == l ? 1.0f : 0.0f)) / (float)N;
}

/* cnn_sgd: on n floats at w + w_off, v + v_off, g + g_off (the stage's
 * own buffers at offset 0, or regions of one state block):
 * v = momentum v + g scale + decay w; w -= learning_rate v; g = 0. scale
 * is 1 / the number of backward passes the gradients hold. */
__kernel void cnn_sgd(__global float *w, __global float *v, __global float *g,
                      ulong w_off, ulong v_off, ulong g_off, ulong total,
                      float scale, float learning_rate, float momentum,
                      float decay) {
  size_t i = get_global_id(0);
  if (i >= total) return;
  w += w_off;
  v += v_off;
  g += g_off;
  float vi = momentum * v[i] + g[i] * scale + decay * w[i];
  v[i] = vi;
  w[i] -= learning_rate * vi;
  g[i] = 0.0f;
}

/* ---- slices (cnn.proto: ICP and OCP; cnn_exec_opencl_slice.c) ---------- */

/* cnn_add: y[y_off + i] += x[x_off + i]: a slice's part added to the
 * previous slice's partial sums. */
__kernel void cnn_add(__global const float *x, ulong x_off,
                      __global float *y, ulong y_off, ulong total) {
  size_t i = get_global_id(0);
  if (i >= total) return;
  y[y_off + i] += x[x_off + i];
}

/* cnn_act_keep: the last ICP slice's activation on the layer's summed
 * output, in place, kept at kept + k_off for BACKWARD (keep 0: not
 * kept, an inference). */
__kernel void cnn_act_keep(__global float *y, __global float *kept,
                           ulong k_off, ulong total, int act, int keep) {
  size_t i = get_global_id(0);
  if (i >= total) return;
  float v = act_fwd(act, y[i]);
  y[i] = v;
  if (keep) kept[k_off + i] = v;
}

/* cnn_act_mask: e through the activation, from the kept output at k_off
 * (the last ICP slice's dz). */
__kernel void cnn_act_mask(__global const float *kept, ulong k_off,
                           __global float *e, ulong total, int act) {
  size_t i = get_global_id(0);
  if (i >= total) return;
  e[i] = act_bwd(act, kept[k_off + i], e[i]);
}

/* ---- batch normalisation, avg-pool, dropout (cnn_pass.h) ---------------- */

#define CNN_BN_EPS 1e-5f

/* cnn_bn_stats: per channel c, the mean and the biased variance of z
 * (N x C x P) over the batch and the P positions; one item per channel,
 * two passes. */
__kernel void cnn_bn_stats(__global const float *z, __global float *mean,
                           __global float *var, int N, int C, int P) {
  size_t c = get_global_id(0);
  if (c >= (size_t)C) return;
  float s = 0.0f, q = 0.0f, m = (float)N * (float)P;
  for (int n = 0; n < N; n++) {
    __global const float *zc = z + ((size_t)n * C + c) * P;
    for (int p = 0; p < P; p++) s += zc[p];
  }
  float mu = s / m;
  for (int n = 0; n < N; n++) {
    __global const float *zc = z + ((size_t)n * C + c) * P;
    for (int p = 0; p < P; p++) {
      float d = zc[p] - mu;
      q += d * d;
    }
  }
  mean[c] = mu;
  var[c] = q / m;
}

/* cnn_bn_rolling: roll[c] and roll[C + c] (the rolling means and
 * variances) moved by momentum towards mean and var. */
__kernel void cnn_bn_rolling(__global float *roll, __global const float *mean,
                             __global const float *var, int C,
                             float momentum) {
  size_t c = get_global_id(0);
  if (c >= (size_t)C) return;
  roll[c] = (1.0f - momentum) * roll[c] + momentum * mean[c];
  roll[C + c] = (1.0f - momentum) * roll[C + c] + momentum * var[c];
}

/* cnn_bn_fwd: y = act(scale (z - mean) / sqrt(var + eps) + shift), per
 * element of z (N x C x P). */
__kernel void cnn_bn_fwd(__global const float *z, __global const float *mean,
                         __global const float *var,
                         __global const float *scale,
                         __global const float *shift, __global float *y,
                         ulong total, int C, int P, int act) {
  size_t g = get_global_id(0);
  if (g >= total) return;
  int c = (int)((g / P) % C);
  float inv = 1.0f / sqrt(var[c] + CNN_BN_EPS);
  y[g] = act_fwd(act, scale[c] * ((z[g] - mean[c]) * inv) + shift[c]);
}

/* cnn_bn_bwd_reduce: per channel, from e (the error at the normalisation's
 * output, after the activation's backward) and z: red[c] = the sum of e,
 * red[C + c] = the sum of e x^; the shift's and scale's gradients gb, gs
 * += them. */
__kernel void cnn_bn_bwd_reduce(__global const float *z,
                                __global const float *e,
                                __global const float *mean,
                                __global const float *var,
                                __global float *red, __global float *gb,
                                __global float *gs, int N, int C, int P) {
  size_t c = get_global_id(0);
  if (c >= (size_t)C) return;
  float inv = 1.0f / sqrt(var[c] + CNN_BN_EPS), se = 0.0f, sx = 0.0f;
  for (int n = 0; n < N; n++) {
    size_t at = ((size_t)n * C + c) * P;
    for (int p = 0; p < P; p++) {
      float ev = e[at + p];
      se += ev;
      sx += ev * ((z[at + p] - mean[c]) * inv);
    }
  }
  red[c] = se;
  red[C + c] = sx;
  gb[c] += se;
  gs[c] += sx;
}

/* cnn_bn_bwd_data: dz, the error at the normalisation's input, per
 * element: scale inv (e - sum e / m - x^ sum(e x^) / m), m = N x P. */
__kernel void cnn_bn_bwd_data(__global const float *z,
                              __global const float *e,
                              __global const float *mean,
                              __global const float *var,
                              __global const float *scale,
                              __global const float *red, __global float *dz,
                              ulong total, int C, int P, float m) {
  size_t g = get_global_id(0);
  if (g >= total) return;
  int c = (int)((g / P) % C);
  float inv = 1.0f / sqrt(var[c] + CNN_BN_EPS);
  float xh = (z[g] - mean[c]) * inv;
  dz[g] = scale[c] * inv * (e[g] - red[c] / m - xh * red[C + c] / m);
}

/* cnn_avgpool_fwd: y[k] = the mean of x's plane k (P values), k over N x
 * C. */
__kernel void cnn_avgpool_fwd(__global const float *x, __global float *y,
                              ulong planes, int P) {
  size_t k = get_global_id(0);
  if (k >= planes) return;
  __global const float *xp = x + k * P;
  float s = 0.0f;
  for (int p = 0; p < P; p++) s += xp[p];
  y[k] = s / (float)P;
}

/* cnn_avgpool_bwd: dx[k, p] = dy[k] / P. */
__kernel void cnn_avgpool_bwd(__global const float *dy, __global float *dx,
                              ulong total, int P) {
  size_t g = get_global_id(0);
  if (g >= total) return;
  dx[g] = dy[g / P] / (float)P;
}

/* cnn_pass.h's hash, in the same 64-bit arithmetic. */
inline ulong cnn_mix64(ulong z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;
  return z ^ (z >> 31);
}

inline uint cnn_dropout_bits(ulong seed, ulong step, uint layer, uint sample,
                             uint element) {
  ulong h = cnn_mix64(seed ^ cnn_mix64(step + 0x9e3779b97f4a7c15UL));
  h = cnn_mix64(h ^ (((ulong)layer << 32) | sample));
  h = cnn_mix64(h ^ (0x632be59bd9b4e019UL + element));
  return (uint)(h >> 40);
}

/* cnn_dropout: y = x x the mask of dropout layer `layer` (N samples of K
 * values, the first sample0 of its mini-batch): 0 where the value's bits
 * are below `below`, else scale. Forward on activations, backward on
 * errors. */
__kernel void cnn_dropout(__global const float *x, __global float *y,
                          int N, int K, ulong seed, ulong step, uint layer,
                          uint sample0, uint below, float scale) {
  size_t g = get_global_id(0);
  if (g >= (size_t)N * K) return;
  uint n = (uint)(g / K), e = (uint)(g % K);
  uint bits = cnn_dropout_bits(seed, step, layer, sample0 + n, e);
  y[g] = bits < below ? 0.0f : x[g] * scale;
}
