/* cnn_ref.c - the double-precision reference of the cnn layers: see
 * cnn_ref.h for the conventions. Clarity over speed. */
#include "cnn_ref.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

size_t cnn_ref_elems(cnn_shape s) {
  return (size_t)s.h * s.w * s.c;
}

static double activate(cnn_activation act, double z) {
  switch (act) {
  case CNN_ACT_RELU: return z < 0 ? 0 : z;
  case CNN_ACT_LEAKY: return z > 0 ? z : CNN_LEAKY_SLOPE * z;
  case CNN_ACT_LOGISTIC: return 1 / (1 + exp(-z));
  case CNN_ACT_LINEAR: break;
  }
  return z;
}

/* The error through the activation, from the output y. */
static double activation_grad(cnn_activation act, double y, double dy) {
  switch (act) {
  case CNN_ACT_RELU: return y > 0 ? dy : 0;
  case CNN_ACT_LEAKY: return y > 0 ? dy : CNN_LEAKY_SLOPE * dy;
  case CNN_ACT_LOGISTIC: return dy * y * (1 - y);
  case CNN_ACT_LINEAR: break;
  }
  return dy;
}

static size_t at(cnn_shape s, size_t n, size_t c, long h, long w) {
  return ((n * s.c + c) * s.h + (size_t)h) * s.w + (size_t)w;
}

/* Input row or column of output position o, kernel offset k. */
static long conv_pos(const cnn_layer *l, uint32_t o, uint32_t k) {
  return (long)o * l->stride - (long)l->padding + k;
}

/* The convolution into y, its activation applied unless raw (batch_norm:
 * z, without a bias, for the normalisation). */
static void conv_forward(const cnn_layer *l, uint32_t batch, const double *x,
                         const double *w, const double *b, int raw,
                         double *y) {
  cnn_shape is = l->in, os = l->out;
  uint32_t k = l->size;
  for (size_t n = 0; n < batch; n++)
    for (size_t o = 0; o < os.c; o++)
      for (uint32_t oh = 0; oh < os.h; oh++)
        for (uint32_t ow = 0; ow < os.w; ow++) {
          double z = raw ? 0 : b[o];
          for (size_t i = 0; i < is.c; i++)
            for (uint32_t kh = 0; kh < k; kh++) {
              long ih = conv_pos(l, oh, kh);
              if (ih < 0 || ih >= (long)is.h) continue;
              for (uint32_t kw = 0; kw < k; kw++) {
                long iw = conv_pos(l, ow, kw);
                if (iw < 0 || iw >= (long)is.w) continue;
                z += w[((o * is.c + i) * k + kh) * k + kw] *
                     x[at(is, n, i, ih, iw)];
              }
            }
          y[at(os, n, o, oh, ow)] = raw ? z : activate(l->act, z);
        }
}

/* EB and PG of the convolution from dz, the error at its (pre-activation)
 * output, or with dz NULL from y and dy through the activation. */
static void conv_backward(const cnn_layer *l, uint32_t batch, const double *x,
                          const double *y, const double *w, const double *dy,
                          const double *dz_given, double *dx, double *dw,
                          double *db) {
  cnn_shape is = l->in, os = l->out;
  uint32_t k = l->size;
  if (dx) memset(dx, 0, sizeof *dx * batch * cnn_ref_elems(is));
  for (size_t n = 0; n < batch; n++)
    for (size_t o = 0; o < os.c; o++)
      for (uint32_t oh = 0; oh < os.h; oh++)
        for (uint32_t ow = 0; ow < os.w; ow++) {
          size_t yi = at(os, n, o, oh, ow);
          double dz = dz_given ? dz_given[yi]
                               : activation_grad(l->act, y[yi], dy[yi]);
          if (db) db[o] += dz;
          for (size_t i = 0; i < is.c; i++)
            for (uint32_t kh = 0; kh < k; kh++) {
              long ih = conv_pos(l, oh, kh);
              if (ih < 0 || ih >= (long)is.h) continue;
              for (uint32_t kw = 0; kw < k; kw++) {
                long iw = conv_pos(l, ow, kw);
                if (iw < 0 || iw >= (long)is.w) continue;
                size_t wi = ((o * is.c + i) * k + kh) * k + kw;
                size_t xi = at(is, n, i, ih, iw);
                if (dx) dx[xi] += w[wi] * dz;
                if (dw) dw[wi] += x[xi] * dz;
              }
            }
        }
}

/* The input position of the first maximum of output (n, c, oh, ow)'s
 * window, or (size_t)-1 when the window holds no input position. */
static size_t pool_argmax(const cnn_layer *l, const double *x, size_t n,
                          size_t c, uint32_t oh, uint32_t ow) {
  cnn_shape is = l->in;
  long before = (long)(l->padding / 2);
  size_t best = (size_t)-1;
  for (uint32_t kh = 0; kh < l->size; kh++) {
    long ih = (long)oh * l->stride - before + kh;
    if (ih < 0 || ih >= (long)is.h) continue;
    for (uint32_t kw = 0; kw < l->size; kw++) {
      long iw = (long)ow * l->stride - before + kw;
      if (iw < 0 || iw >= (long)is.w) continue;
      size_t xi = at(is, n, c, ih, iw);
      if (best == (size_t)-1 || x[xi] > x[best]) best = xi;
    }
  }
  return best;
}

static void pool_forward(const cnn_layer *l, uint32_t batch, const double *x,
                         double *y) {
  cnn_shape os = l->out;
  for (size_t n = 0; n < batch; n++)
    for (size_t c = 0; c < os.c; c++)
      for (uint32_t oh = 0; oh < os.h; oh++)
        for (uint32_t ow = 0; ow < os.w; ow++) {
          size_t xi = pool_argmax(l, x, n, c, oh, ow);
          y[at(os, n, c, oh, ow)] = xi == (size_t)-1 ? 0 : x[xi];
        }
}

static void pool_backward(const cnn_layer *l, uint32_t batch, const double *x,
                          const double *dy, double *dx) {
  cnn_shape os = l->out;
  memset(dx, 0, sizeof *dx * batch * cnn_ref_elems(l->in));
  for (size_t n = 0; n < batch; n++)
    for (size_t c = 0; c < os.c; c++)
      for (uint32_t oh = 0; oh < os.h; oh++)
        for (uint32_t ow = 0; ow < os.w; ow++) {
          size_t xi = pool_argmax(l, x, n, c, oh, ow);
          if (xi != (size_t)-1) dx[xi] += dy[at(os, n, c, oh, ow)];
        }
}

static void connected_forward(const cnn_layer *l, uint32_t batch,
                              const double *x, const double *w,
                              const double *b, double *y) {
  size_t ni = cnn_ref_elems(l->in), no = cnn_ref_elems(l->out);
  for (size_t n = 0; n < batch; n++)
    for (size_t o = 0; o < no; o++) {
      double z = b[o];
      for (size_t j = 0; j < ni; j++) z += w[o * ni + j] * x[n * ni + j];
      y[n * no + o] = activate(l->act, z);
    }
}

static void connected_backward(const cnn_layer *l, uint32_t batch,
                               const double *x, const double *y,
                               const double *w, const double *dy, double *dx,
                               double *dw, double *db) {
  size_t ni = cnn_ref_elems(l->in), no = cnn_ref_elems(l->out);
  if (dx) memset(dx, 0, sizeof *dx * batch * ni);
  for (size_t n = 0; n < batch; n++)
    for (size_t o = 0; o < no; o++) {
      double dz = activation_grad(l->act, y[n * no + o], dy[n * no + o]);
      if (db) db[o] += dz;
      for (size_t j = 0; j < ni; j++) {
        if (dx) dx[n * ni + j] += w[o * ni + j] * dz;
        if (dw) dw[o * ni + j] += x[n * ni + j] * dz;
      }
    }
}

static void softmax_forward(const cnn_layer *l, uint32_t batch,
                            const double *x, double *p) {
  size_t k = cnn_ref_elems(l->in);
  for (size_t n = 0; n < batch; n++) {
    const double *xr = x + n * k;
    double *pr = p + n * k;
    double m = xr[0], sum = 0;
    for (size_t j = 1; j < k; j++)
      if (xr[j] > m) m = xr[j];
    for (size_t j = 0; j < k; j++) sum += pr[j] = exp(xr[j] - m);
    for (size_t j = 0; j < k; j++) pr[j] /= sum;
  }
}

/* ---- batch normalisation ---------------------------------------------- */

/* Per channel: the mean and variance (biased) of z over the batch and the
 * plane, or in evaluation the rolling ones. */
static void bn_stats(const cnn_layer *l, uint32_t batch, const cnn_pass *pass,
                     const double *z, const cnn_ref_params *p, double *mean,
                     double *var) {
  cnn_shape os = l->out;
  size_t plane = (size_t)os.h * os.w, n_all = plane * batch;
  for (size_t c = 0; c < os.c; c++) {
    if (pass->mode == CNN_MODE_INFER) {
      mean[c] = p->rolling[c];
      var[c] = p->rolling[os.c + c];
      continue;
    }
    double s = 0, q = 0;
    for (size_t n = 0; n < batch; n++)
      for (size_t k = 0; k < plane; k++) s += z[(n * os.c + c) * plane + k];
    mean[c] = s / (double)n_all;
    for (size_t n = 0; n < batch; n++)
      for (size_t k = 0; k < plane; k++) {
        double d = z[(n * os.c + c) * plane + k] - mean[c];
        q += d * d;
      }
    var[c] = q / (double)n_all;
  }
}

/* The normalised, scaled, shifted and activated output y of z; a training
 * forward moves the rolling statistics. */
static void bn_forward(const cnn_layer *l, uint32_t batch,
                       const cnn_pass *pass, const double *z,
                       const cnn_ref_params *p, double *y) {
  cnn_shape os = l->out;
  size_t plane = (size_t)os.h * os.w;
  double *mean = calloc(2 * (size_t)os.c, sizeof *mean), *var;
  if (!mean) abort(); /* a test oracle: no recovery */
  var = mean + os.c;
  bn_stats(l, batch, pass, z, p, mean, var);
  for (size_t n = 0; n < batch; n++)
    for (size_t c = 0; c < os.c; c++) {
      double inv = 1 / sqrt(var[c] + CNN_BN_EPS);
      for (size_t k = 0; k < plane; k++) {
        size_t i = (n * os.c + c) * plane + k;
        double xh = (z[i] - mean[c]) * inv;
        y[i] = activate(l->act, p->scales[c] * xh + p->b[c]);
      }
    }
  if (pass->mode == CNN_MODE_TRAIN)
    for (size_t c = 0; c < os.c; c++) {
      p->rolling[c] = (1 - CNN_BN_MOMENTUM) * p->rolling[c] +
                      CNN_BN_MOMENTUM * mean[c];
      p->rolling[os.c + c] = (1 - CNN_BN_MOMENTUM) * p->rolling[os.c + c] +
                             CNN_BN_MOMENTUM * var[c];
    }
  free(mean);
}

/* From the error dy at the activated output y: dz at the convolution's
 * output z (through the activation and the normalisation, with the batch
 * statistics), the shifts' and scales' gradients added to db, ds. */
static void bn_backward(const cnn_layer *l, uint32_t batch, const double *z,
                        const double *y, const cnn_ref_params *p,
                        const double *dy, double *dz, double *db,
                        double *ds) {
  cnn_shape os = l->out;
  size_t plane = (size_t)os.h * os.w;
  double m = (double)plane * batch;
  double *mean = calloc(2 * (size_t)os.c, sizeof *mean), *var;
  if (!mean) abort();
  var = mean + os.c;
  const cnn_pass train = {CNN_MODE_TRAIN, 0, 0, 0};
  bn_stats(l, batch, &train, z, p, mean, var);
  for (size_t c = 0; c < os.c; c++) {
    double inv = 1 / sqrt(var[c] + CNN_BN_EPS), sum_g = 0, sum_gx = 0;
    /* g: the error at y's pre-activation, the scaled x^'s error */
    for (size_t n = 0; n < batch; n++)
      for (size_t k = 0; k < plane; k++) {
        size_t i = (n * os.c + c) * plane + k;
        double g = activation_grad(l->act, y[i], dy[i]);
        double xh = (z[i] - mean[c]) * inv;
        if (db) db[c] += g;
        if (ds) ds[c] += g * xh;
        sum_g += g;
        sum_gx += g * xh;
      }
    for (size_t n = 0; n < batch; n++)
      for (size_t k = 0; k < plane; k++) {
        size_t i = (n * os.c + c) * plane + k;
        double g = activation_grad(l->act, y[i], dy[i]);
        double xh = (z[i] - mean[c]) * inv;
        dz[i] = p->scales[c] * inv * (g - sum_g / m - xh * sum_gx / m);
      }
  }
  free(mean);
}

/* ---- average pool and dropout ---------------------------------------- */

static void avgpool_forward(const cnn_layer *l, uint32_t batch,
                            const double *x, double *y) {
  size_t plane = (size_t)l->in.h * l->in.w;
  for (size_t n = 0; n < batch; n++)
    for (size_t c = 0; c < l->in.c; c++) {
      double s = 0;
      for (size_t k = 0; k < plane; k++)
        s += x[(n * l->in.c + c) * plane + k];
      y[n * l->in.c + c] = s / (double)plane;
    }
}

static void avgpool_backward(const cnn_layer *l, uint32_t batch,
                             const double *dy, double *dx) {
  size_t plane = (size_t)l->in.h * l->in.w;
  for (size_t n = 0; n < batch; n++)
    for (size_t c = 0; c < l->in.c; c++)
      for (size_t k = 0; k < plane; k++)
        dx[(n * l->in.c + c) * plane + k] =
            dy[n * l->in.c + c] / (double)plane;
}

/* y = x * dropout's mask (or x in evaluation); also its backward, dy for
 * x and dx for y. */
static void dropout_apply(const cnn_layer *l, size_t index, uint32_t batch,
                          const cnn_pass *pass, const double *x, double *y) {
  size_t k = cnn_ref_elems(l->in);
  uint32_t below = cnn_dropout_threshold(l->probability);
  double scale = 1 / (1 - l->probability);
  for (size_t n = 0; n < batch; n++)
    for (size_t e = 0; e < k; e++) {
      size_t i = n * k + e;
      if (pass->mode == CNN_MODE_INFER) {
        y[i] = x[i];
        continue;
      }
      uint32_t bits = cnn_dropout_bits(pass->seed, pass->step,
                                       (uint32_t)index,
                                       pass->sample0 + (uint32_t)n,
                                       (uint32_t)e);
      y[i] = bits < below ? 0 : x[i] * scale;
    }
}

/* ---- per layer ---------------------------------------------------------- */

void cnn_ref_forward_pass(const cnn_layer *l, size_t index, uint32_t batch,
                          const cnn_pass *pass, const double *x,
                          const cnn_ref_params *p, double *y) {
  switch (l->kind) {
  case CNN_LAYER_CONV:
    if (l->batch_norm) {
      double *z = calloc(batch * cnn_ref_elems(l->out) + 1, sizeof *z);
      if (!z) abort();
      conv_forward(l, batch, x, p->w, NULL, 1, z);
      bn_forward(l, batch, pass, z, p, y);
      free(z);
    } else {
      conv_forward(l, batch, x, p->w, p->b, 0, y);
    }
    break;
  case CNN_LAYER_MAXPOOL: pool_forward(l, batch, x, y); break;
  case CNN_LAYER_CONNECTED: connected_forward(l, batch, x, p->w, p->b, y); break;
  case CNN_LAYER_SOFTMAX: softmax_forward(l, batch, x, y); break;
  case CNN_LAYER_AVGPOOL: avgpool_forward(l, batch, x, y); break;
  case CNN_LAYER_DROPOUT: dropout_apply(l, index, batch, pass, x, y); break;
  }
}

void cnn_ref_backward_pass(const cnn_layer *l, size_t index, uint32_t batch,
                           const cnn_pass *pass, const double *x,
                           const double *y, const cnn_ref_params *p,
                           const double *dy, double *dx, double *dw,
                           double *db, double *dscales) {
  switch (l->kind) {
  case CNN_LAYER_CONV:
    if (l->batch_norm) {
      size_t n = batch * cnn_ref_elems(l->out) + 1;
      double *z = calloc(n, sizeof *z), *dz = calloc(n, sizeof *dz);
      if (!z || !dz) abort();
      conv_forward(l, batch, x, p->w, NULL, 1, z);
      bn_backward(l, batch, z, y, p, dy, dz, db, dscales);
      conv_backward(l, batch, x, NULL, p->w, NULL, dz, dx, dw, NULL);
      free(z);
      free(dz);
    } else {
      conv_backward(l, batch, x, y, p->w, dy, NULL, dx, dw, db);
    }
    break;
  case CNN_LAYER_MAXPOOL:
    if (dx) pool_backward(l, batch, x, dy, dx);
    break;
  case CNN_LAYER_CONNECTED:
    connected_backward(l, batch, x, y, p->w, dy, dx, dw, db);
    break;
  case CNN_LAYER_AVGPOOL:
    if (dx) avgpool_backward(l, batch, dy, dx);
    break;
  case CNN_LAYER_DROPOUT:
    if (dx) dropout_apply(l, index, batch, pass, dy, dx);
    break;
  case CNN_LAYER_SOFTMAX:
    break;
  }
}

void cnn_ref_forward(const cnn_layer *l, uint32_t batch, const double *x,
                     const double *w, const double *b, double *y) {
  const cnn_pass pass = {CNN_MODE_TRAIN, 0, 0, 0};
  const cnn_ref_params p = {w, b, NULL, NULL};
  cnn_ref_forward_pass(l, 0, batch, &pass, x, &p, y);
}

void cnn_ref_backward(const cnn_layer *l, uint32_t batch, const double *x,
                      const double *y, const double *w, const double *dy,
                      double *dx, double *dw, double *db) {
  const cnn_pass pass = {CNN_MODE_TRAIN, 0, 0, 0};
  const cnn_ref_params p = {w, NULL, NULL, NULL};
  cnn_ref_backward_pass(l, 0, batch, &pass, x, y, &p, dy, dx, dw, db, NULL);
}

double cnn_ref_xent_loss(uint32_t batch, uint32_t classes, const double *p,
                         const uint8_t *labels) {
  double sum = 0;
  for (size_t n = 0; n < batch; n++)
    sum -= log(p[n * classes + labels[n]]);
  return sum / batch;
}

void cnn_ref_xent_grad(uint32_t batch, uint32_t classes, const double *p,
                       const uint8_t *labels, double *dx) {
  for (size_t n = 0; n < batch; n++)
    for (size_t k = 0; k < classes; k++)
      dx[n * classes + k] =
          (p[n * classes + k] - (k == labels[n] ? 1.0 : 0.0)) / batch;
}

void cnn_ref_sgd(size_t n, double *w, double *v, double *g,
                 double learning_rate, double momentum, double decay) {
  for (size_t i = 0; i < n; i++) {
    v[i] = momentum * v[i] + g[i] + decay * w[i];
    w[i] -= learning_rate * v[i];
    g[i] = 0;
  }
}
