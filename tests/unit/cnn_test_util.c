/* cnn_test_util.c - see cnn_test_util.h. */
#include "cnn_test_util.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

cnn_net *cnn_test_net(uint32_t h, uint32_t w, uint32_t c, const char *layers) {
  char text[4096];
  int n = snprintf(text, sizeof text,
                   "[net]\nheight=%u\nwidth=%u\nchannels=%u\n%s", h, w, c,
                   layers);
  assert_true(n > 0 && (size_t)n < sizeof text);
  return cnn_test_parse(text);
}

cnn_net *cnn_test_parse(const char *text) {
  char err[256];
  cnn_net *net = NULL;
  int rc = cnn_cfg_parse(text, strlen(text), "test", &net, err, sizeof err);
  if (rc) fail_msg("cnn_cfg_parse: %d %s\n%s", rc, err, text);
  return net;
}

cnn_net *cnn_test_layer_net(uint32_t h, uint32_t w, uint32_t c,
                            const char *layer) {
  char cfg[512];
  int n = snprintf(cfg, sizeof cfg,
                   "[maxpool]\nsize=1\nstride=1\npadding=0\n%s[softmax]\n",
                   layer);
  assert_true(n > 0 && (size_t)n < sizeof cfg);
  return cnn_test_net(h, w, c, cfg);
}

double cnn_test_uniform(uint64_t *state) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*state >> 11) / 4503599627370496.0 - 1.0;
}

double *cnn_test_fill(size_t n, uint64_t *rng, double scale, double shift) {
  double *v = calloc(n ? n : 1, sizeof *v);
  assert_non_null(v);
  for (size_t i = 0; i < n; i++) v[i] = shift + scale * cnn_test_uniform(rng);
  return v;
}

void cnn_test_check_fd(const char *what, size_t case_i,
                       double (*f)(const void *arg), const void *arg,
                       double *v, size_t n, const double *analytic, double h,
                       double tol) {
  for (size_t i = 0; i < n; i++) {
    double keep = v[i];
    v[i] = keep + h;
    double fp = f(arg);
    v[i] = keep - h;
    double fm = f(arg);
    v[i] = keep;
    double num = (fp - fm) / (2 * h);
    if (fabs(num - analytic[i]) > tol * fmax(1, fabs(analytic[i])))
      fail_msg("case %zu %s[%zu]: finite difference %.12g, analytic %.12g",
               case_i, what, i, num, analytic[i]);
  }
}

double cnn_test_rel_err_f(const float *a, const double *b, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = a[i] - b[i];
    num += d * d;
    den += b[i] * b[i];
  }
  return sqrt(num) / fmax(sqrt(den), 1e-30);
}

size_t cnn_test_worst_f(const float *a, const double *b, size_t n) {
  size_t worst = 0;
  for (size_t i = 1; i < n; i++)
    if (fabs(a[i] - b[i]) > fabs(a[worst] - b[worst])) worst = i;
  return worst;
}
