/*
 * plf_model_paml.c - protein models from PAML rate files (lg.dat, wag.dat,
 * jones.dat, ...): 190 exchangeabilities, the lower triangle by rows, then
 * 20 frequencies, separated by white space; PAML stops reading there, and
 * so does this reader (the files carry notes after the numbers).
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "plf_model_internal.h"

#define NUMBERS 210
#define TOKEN_MAX 63

static int file_fail(char *err, size_t err_len, int rc, const char *source,
                     unsigned long line, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static int file_fail(char *err, size_t err_len, int rc, const char *source,
                     unsigned long line, const char *fmt, ...) {
  if (err && err_len) {
    int n = line ? snprintf(err, err_len, "%s:%lu: ", source, line)
                 : snprintf(err, err_len, "%s: ", source);
    if (n >= 0 && (size_t)n < err_len) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(err + n, err_len - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return rc;
}

static const char *what(int k, char *buf, size_t len) {
  if (k < 190) snprintf(buf, len, "exchangeability %d of 190", k + 1);
  else snprintf(buf, len, "frequency %d of 20", k - 189);
  return buf;
}

int plf_model_paml_numbers(const char *text, size_t len, const char *source,
                           double *lower, double *freqs, char *err,
                           size_t err_len) {
  const char *p = text, *end = text + len;
  unsigned long line = 1;
  int k = 0;
  char w[40];
  while (k < NUMBERS) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' ||
                       *p == '\v' || *p == '\f')) {
      if (*p == '\n') line++;
      p++;
    }
    if (p >= end)
      return file_fail(err, err_len, EMBER_EFORMAT, source, line,
                       "the file ends before %s",
                       what(k, w, sizeof w));
    const char *s = p;
    while (p < end && !(*p == ' ' || *p == '\t' || *p == '\n' ||
                        *p == '\r' || *p == '\v' || *p == '\f'))
      p++;
    size_t n = (size_t)(p - s);
    char tok[TOKEN_MAX + 1];
    int ok = n <= TOKEN_MAX;
    double v = 0;
    if (ok) {
      memcpy(tok, s, n);
      tok[n] = '\0';
      char *stop;
      errno = 0;
      v = strtod(tok, &stop);
      ok = stop == tok + n && errno == 0 && isfinite(v);
    }
    if (!ok)
      return file_fail(err, err_len, EMBER_EFORMAT, source, line,
                       "expected a number (%s), found '%.*s'",
                       what(k, w, sizeof w), (int)(n > 20 ? 20 : n), s);
    if (k < 190 ? !(v >= 0 && v <= 1e6) : !(v >= 1e-6))
      return file_fail(err, err_len, EMBER_EFORMAT, source, line,
                       "%s is %s (%s)", what(k, w, sizeof w), tok,
                       k < 190 ? "outside [0, 1e6]" : "below 1e-6");
    if (k < 190) lower[k] = v;
    else freqs[k - 190] = v;
    k++;
  }
  double sum = 0;
  for (int i = 0; i < 20; i++) sum += freqs[i];
  if (fabs(sum - 1) > 0.01)
    return file_fail(err, err_len, EMBER_EFORMAT, source, line,
                     "the 20 frequencies sum to %g, not 1", sum);
  sum = 0;
  for (int i = 0; i < 190; i++) sum += lower[i];
  if (!(sum > 0))
    return file_fail(err, err_len, EMBER_EFORMAT, source, 0,
                     "every exchangeability is 0");
  return 0;
}

int plf_model_parse_paml(const void *text, size_t len, const char *source,
                         const char *modifiers, const plf_alignment *aln,
                         plf_model **out, char *err, size_t err_len) {
  if (out) *out = NULL;
  if (err && err_len) err[0] = '\0';
  if (!out || (!text && len)) return EMBER_EINVAL;
  if (!source) source = "input";
  if (len > PLF_MODEL_MAX_PAML_BYTES)
    return file_fail(err, err_len, EMBER_ETOOBIG, source, 0,
                     "more than %d bytes", PLF_MODEL_MAX_PAML_BYTES);
  plf_model_spec *spec = calloc(1, sizeof *spec);
  if (!spec) return EMBER_ENOMEM;
  double lower[190];
  int rc = plf_model_paml_numbers(text ? text : "", len, source, lower,
                                  spec->matrix_freqs, err, err_len);
  if (!rc) {
    spec->states = 20;
    snprintf(spec->base, sizeof spec->base, "%s", source);
    plf_model_from_lower(20, lower, spec->exch);
    spec->base_freq = PLF_FREQ_MATRIX;
    plf_model_err e = {err, err_len, source};
    rc = plf_model_parse_modifiers(modifiers ? modifiers : "", spec, &e);
    if (!rc) rc = plf_model_build(spec, aln, out, &e);
  }
  free(spec);
  return rc;
}

int plf_model_load_paml(const char *path, const char *modifiers,
                        const plf_alignment *aln, plf_model **out, char *err,
                        size_t err_len) {
  if (out) *out = NULL;
  if (err && err_len) err[0] = '\0';
  if (!path || !out) return EMBER_EINVAL;
  FILE *f = fopen(path, "rb");
  if (!f)
    return file_fail(err, err_len, EMBER_EIO, path, 0, "cannot open: %s",
                     strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
    fclose(f);
    return file_fail(err, err_len, EMBER_EIO, path, 0,
                     "cannot open: it is a directory");
  }
  char *buf = malloc(PLF_MODEL_MAX_PAML_BYTES + 1);
  if (!buf) {
    fclose(f);
    return EMBER_ENOMEM;
  }
  size_t n = fread(buf, 1, PLF_MODEL_MAX_PAML_BYTES + 1, f);
  int bad = ferror(f);
  fclose(f);
  int rc;
  if (bad)
    rc = file_fail(err, err_len, EMBER_EIO, path, 0, "read error");
  else
    rc = plf_model_parse_paml(buf, n, path, modifiers, aln, out, err,
                              err_len);
  free(buf);
  return rc;
}
