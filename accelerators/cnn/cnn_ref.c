/* cnn_ref.c - the double-precision reference of the cnn layers: see
 * cnn_ref.h for the conventions. Clarity over speed. */
#include "cnn_ref.h"

#include <math.h>
#include <string.h>

size_t cnn_ref_elems(cnn_shape s) {
  return (size_t)s.h * s.w * s.c;
}

static double activate(cnn_activation act, double z) {
  return act == CNN_ACT_RELU && z < 0 ? 0 : z;
}

/* The error through the activation, from the output y. */
static double activation_grad(cnn_activation act, double y, double dy) {
  return act == CNN_ACT_RELU && !(y > 0) ? 0 : dy;
}

static size_t at(cnn_shape s, size_t n, size_t c, long h, long w) {
  return ((n * s.c + c) * s.h + (size_t)h) * s.w + (size_t)w;
}

/* Input row or column of output position o, kernel offset k. */
static long conv_pos(const cnn_layer *l, uint32_t o, uint32_t k) {
  return (long)o * l->stride - (long)l->padding + k;
}

static void conv_forward(const cnn_layer *l, uint32_t batch, const double *x,
                         const double *w, const double *b, double *y) {
  cnn_shape is = l->in, os = l->out;
  uint32_t k = l->size;
  for (size_t n = 0; n < batch; n++)
    for (size_t o = 0; o < os.c; o++)
      for (uint32_t oh = 0; oh < os.h; oh++)
        for (uint32_t ow = 0; ow < os.w; ow++) {
          double z = b[o];
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
          y[at(os, n, o, oh, ow)] = activate(l->act, z);
        }
}

static void conv_backward(const cnn_layer *l, uint32_t batch, const double *x,
                          const double *y, const double *w, const double *dy,
                          double *dx, double *dw, double *db) {
  cnn_shape is = l->in, os = l->out;
  uint32_t k = l->size;
  if (dx) memset(dx, 0, sizeof *dx * batch * cnn_ref_elems(is));
  for (size_t n = 0; n < batch; n++)
    for (size_t o = 0; o < os.c; o++)
      for (uint32_t oh = 0; oh < os.h; oh++)
        for (uint32_t ow = 0; ow < os.w; ow++) {
          size_t yi = at(os, n, o, oh, ow);
          double dz = activation_grad(l->act, y[yi], dy[yi]);
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

void cnn_ref_forward(const cnn_layer *l, uint32_t batch, const double *x,
                     const double *w, const double *b, double *y) {
  switch (l->kind) {
  case CNN_LAYER_CONV: conv_forward(l, batch, x, w, b, y); break;
  case CNN_LAYER_MAXPOOL: pool_forward(l, batch, x, y); break;
  case CNN_LAYER_CONNECTED: connected_forward(l, batch, x, w, b, y); break;
  case CNN_LAYER_SOFTMAX: softmax_forward(l, batch, x, y); break;
  }
}

void cnn_ref_backward(const cnn_layer *l, uint32_t batch, const double *x,
                      const double *y, const double *w, const double *dy,
                      double *dx, double *dw, double *db) {
  switch (l->kind) {
  case CNN_LAYER_CONV:
    conv_backward(l, batch, x, y, w, dy, dx, dw, db);
    break;
  case CNN_LAYER_MAXPOOL:
    if (dx) pool_backward(l, batch, x, dy, dx);
    break;
  case CNN_LAYER_CONNECTED:
    connected_backward(l, batch, x, y, w, dy, dx, dw, db);
    break;
  case CNN_LAYER_SOFTMAX:
    break;
  }
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
