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

double cnn_test_uniform(uint64_t *state) {
  *state = *state * 6364136223846793005ULL + 1442695040888963407ULL;
  return (double)(*state >> 11) / 4503599627370496.0 - 1.0;
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
