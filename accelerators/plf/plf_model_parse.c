/*
 * plf_model_parse.c - IQ-TREE model strings (the grammar is in plf_model.h):
 * the base model with its parameters, then the +F, +G and +I modifiers.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "plf_model_internal.h"

#define MAX_PARAMS PLF_MAX_STATES
/* bounds that keep the eigen system well conditioned */
#define MIN_RATE 1e-6
#define MAX_RATE 1e6
#define MIN_FREQ 1e-6

int plf_model_fail(plf_model_err *e, int rc, const char *fmt, ...) {
  if (e->buf && e->len) {
    int n = snprintf(e->buf, e->len, "model '%s': ", e->what);
    if (n >= 0 && (size_t)n < e->len) {
      va_list ap;
      va_start(ap, fmt);
      vsnprintf(e->buf + n, e->len - (size_t)n, fmt, ap);
      va_end(ap);
    }
  }
  return rc;
}

/* "{v1,v2,...}" at *pp (',' or '/' between values) into vals; *n values. */
static int param_list(const char **pp, double *vals, int *n, const char *of,
                      plf_model_err *e) {
  const char *p = *pp + 1; /* past '{' */
  *n = 0;
  for (;;) {
    if (*n == MAX_PARAMS)
      return plf_model_fail(e, EMBER_EPARAM, "%s: more than %d values", of,
                            MAX_PARAMS);
    if (!(isdigit((unsigned char)*p) || *p == '.' || *p == '-' || *p == '+'))
      return plf_model_fail(e, EMBER_EPARAM,
                            "%s: expected a number at '%.20s'", of, p);
    char *stop;
    errno = 0;
    double v = strtod(p, &stop);
    if (stop == p || errno == ERANGE || !isfinite(v))
      return plf_model_fail(e, EMBER_EPARAM,
                            "%s: expected a number at '%.20s'", of, p);
    vals[(*n)++] = v;
    p = stop;
    if (*p == '}') break;
    if (*p != ',' && *p != '/')
      return plf_model_fail(e, EMBER_EPARAM,
                            "%s: expected ',' or '}' at '%.20s'", of,
                            *p ? p : "the end");
    p++;
  }
  *pp = p + 1;
  return 0;
}

static int in_range(const double *v, int n, double min, double max,
                    const char *of, plf_model_err *e) {
  for (int i = 0; i < n; i++)
    if (!(v[i] >= min && v[i] <= max))
      return plf_model_fail(e, EMBER_EPARAM,
                            "%s: value %d is %g, outside [%g, %g]", of, i + 1,
                            v[i], min, max);
  return 0;
}

/* "{...}" if present; *n = 0 when absent. */
static int maybe_params(const char **pp, double *vals, int *n, const char *of,
                        plf_model_err *e) {
  *n = 0;
  if (**pp != '{') return 0;
  return param_list(pp, vals, n, of, e);
}

static void dna_exch(double *exch, const double six[6]) {
  static const int pairs[6][2] = {{0, 1}, {0, 2}, {0, 3},
                                  {1, 2}, {1, 3}, {2, 3}};
  memset(exch, 0, 16 * sizeof *exch);
  for (int k = 0; k < 6; k++) {
    exch[pairs[k][0] * 4 + pairs[k][1]] = six[k];
    exch[pairs[k][1] * 4 + pairs[k][0]] = six[k];
  }
}

static int named(const char *name, size_t len, const char *a, const char *b) {
  return (strlen(a) == len && strncasecmp(name, a, len) == 0) ||
         (b && strlen(b) == len && strncasecmp(name, b, len) == 0);
}

/* The base model name and parameters at *pp into spec. */
static int parse_base(const char **pp, plf_model_spec *spec,
                      plf_model_err *e) {
  const char *name = *pp, *p = *pp;
  while (isalnum((unsigned char)*p)) p++;
  size_t len = (size_t)(p - name);
  double v[MAX_PARAMS];
  int n;
  if (len == 0)
    return plf_model_fail(e, EMBER_EPARAM, "expected a model name");
  int dna = 1;
  double six[6] = {1, 1, 1, 1, 1, 1};
  const plf_model_matrix *mat = NULL;
  char nm[16];
  snprintf(nm, sizeof nm, "%.*s", (int)(len < 15 ? len : 15), name);
  if (maybe_params(&p, v, &n, nm, e)) return EMBER_EPARAM;
  if (named(name, len, "JC", "JC69") || named(name, len, "F81", NULL)) {
    if (n) return plf_model_fail(e, EMBER_EPARAM, "%s takes no values", nm);
    int f81 = named(name, len, "F81", NULL);
    spec->base_freq = f81 ? PLF_FREQ_EMPIRICAL : PLF_FREQ_EQUAL;
    snprintf(spec->base, sizeof spec->base, "%s", f81 ? "F81" : "JC");
  } else if (named(name, len, "K80", "K2P") ||
             named(name, len, "HKY", "HKY85")) {
    int hky = named(name, len, "HKY", "HKY85");
    if (n > 1)
      return plf_model_fail(e, EMBER_EPARAM,
                            "%s takes one value (kappa), found %d", nm, n);
    if (n && in_range(v, 1, MIN_RATE, MAX_RATE, nm, e)) return EMBER_EPARAM;
    if (!n) spec->unset |= PLF_MODEL_UNSET_RATES;
    six[1] = six[4] = n ? v[0] : 1.0; /* AG and CT: transitions */
    spec->base_freq = hky ? PLF_FREQ_EMPIRICAL : PLF_FREQ_EQUAL;
    snprintf(spec->base, sizeof spec->base, "%s{%.10g}", hky ? "HKY" : "K80",
             six[1]);
  } else if (named(name, len, "GTR", NULL)) {
    if (n != 0 && n != 5 && n != 6)
      return plf_model_fail(e, EMBER_EPARAM,
                            "GTR takes 5 rates (AC,AG,AT,CG,CT; GT=1) or 6, "
                            "found %d", n);
    if (n && in_range(v, n, MIN_RATE, MAX_RATE, "GTR", e)) return EMBER_EPARAM;
    if (!n) spec->unset |= PLF_MODEL_UNSET_RATES;
    for (int i = 0; i < n; i++) six[i] = v[i];
    spec->base_freq = PLF_FREQ_EMPIRICAL;
    snprintf(spec->base, sizeof spec->base,
             "GTR{%.10g,%.10g,%.10g,%.10g,%.10g%s", six[0], six[1], six[2],
             six[3], six[4], n == 6 ? "" : "}");
    if (n == 6) {
      size_t at = strlen(spec->base);
      snprintf(spec->base + at, sizeof spec->base - at, ",%.10g}", six[5]);
    }
  } else if ((mat = plf_model_builtin(nm)) != NULL && len < 15) {
    if (n) return plf_model_fail(e, EMBER_EPARAM, "%s takes no values", nm);
    dna = 0;
    spec->base_freq = PLF_FREQ_MATRIX;
    snprintf(spec->base, sizeof spec->base, "%s", mat->name);
  } else {
    return plf_model_fail(e, EMBER_EPARAM,
                          "unknown model '%.*s' (JC, F81, K80, HKY, GTR, LG, "
                          "WAG, JTT; PAML files: plf_model_load_paml)",
                          (int)(len > 40 ? 40 : len), name);
  }
  if (dna) {
    spec->states = 4;
    dna_exch(spec->exch, six);
  } else {
    spec->states = 20;
    plf_model_from_lower(20, mat->exch, spec->exch);
    memcpy(spec->matrix_freqs, mat->freqs, 20 * sizeof *mat->freqs);
  }
  *pp = p;
  return 0;
}

static int parse_freqs(const char **pp, plf_model_spec *spec,
                       plf_model_err *e) {
  const char *p = *pp;
  if (spec->freq != PLF_FREQ_DEFAULT)
    return plf_model_fail(e, EMBER_EPARAM, "+F given twice");
  if (*p == 'Q' || *p == 'q') {
    spec->freq = PLF_FREQ_EQUAL;
    p++;
  } else if (*p == 'U' || *p == 'u') {
    if (spec->base_freq != PLF_FREQ_MATRIX)
      return plf_model_fail(e, EMBER_EPARAM,
                            "+FU (the matrix's frequencies) needs a protein "
                            "matrix");
    spec->freq = PLF_FREQ_MATRIX;
    p++;
  } else if (*p == 'O' || *p == 'o') {
    return plf_model_fail(e, EMBER_EPARAM,
                          "+FO (estimated frequencies) is not supported: "
                          "give them, +F{...}");
  } else if (*p == '{') {
    double v[MAX_PARAMS];
    int n;
    if (param_list(&p, v, &n, "+F", e)) return EMBER_EPARAM;
    if (n != spec->states)
      return plf_model_fail(e, EMBER_EPARAM,
                            "+F needs %d frequencies, found %d",
                            spec->states, n);
    if (in_range(v, n, MIN_FREQ, 1.0, "+F", e)) return EMBER_EPARAM;
    double sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    if (fabs(sum - 1) > 0.01)
      return plf_model_fail(e, EMBER_EPARAM,
                            "+F: the frequencies sum to %g, not 1", sum);
    for (int i = 0; i < n; i++) spec->freqs[i] = v[i] / sum;
    spec->freq = PLF_FREQ_GIVEN;
  } else {
    spec->freq = PLF_FREQ_EMPIRICAL;
  }
  *pp = p;
  return 0;
}

static int parse_gamma(const char **pp, plf_model_spec *spec,
                       plf_model_err *e) {
  const char *p = *pp;
  if (spec->gamma)
    return plf_model_fail(e, EMBER_EPARAM, "+G given twice");
  int cats = 4;
  if (isdigit((unsigned char)*p)) {
    cats = 0;
    while (isdigit((unsigned char)*p)) {
      if (cats <= PLF_MODEL_MAX_GAMMA) cats = cats * 10 + (*p - '0');
      p++;
    }
    if (cats < 1 || cats > PLF_MODEL_MAX_GAMMA)
      return plf_model_fail(e, EMBER_EPARAM,
                            "+G: %s categories (1 to %d)",
                            cats < 1 ? "0" : "too many", PLF_MODEL_MAX_GAMMA);
  }
  double v[MAX_PARAMS];
  int n;
  if (maybe_params(&p, v, &n, "+G", e)) return EMBER_EPARAM;
  if (n > 1)
    return plf_model_fail(e, EMBER_EPARAM,
                          "+G takes one value (the shape alpha), found %d", n);
  if (n && !(v[0] >= PLF_MODEL_MIN_ALPHA && v[0] <= PLF_MODEL_MAX_ALPHA))
    return plf_model_fail(e, EMBER_EPARAM,
                          "+G: alpha %g is outside [%g, %g]", v[0],
                          PLF_MODEL_MIN_ALPHA, PLF_MODEL_MAX_ALPHA);
  if (!n) spec->unset |= PLF_MODEL_UNSET_ALPHA;
  spec->gamma = cats;
  spec->alpha = n ? v[0] : 1.0;
  *pp = p;
  return 0;
}

static int parse_invar(const char **pp, plf_model_spec *spec,
                       plf_model_err *e) {
  const char *p = *pp;
  if (spec->pinv_given)
    return plf_model_fail(e, EMBER_EPARAM, "+I given twice");
  double v[MAX_PARAMS];
  int n;
  if (maybe_params(&p, v, &n, "+I", e)) return EMBER_EPARAM;
  if (n > 1)
    return plf_model_fail(e, EMBER_EPARAM,
                          "+I takes one value (the proportion), found %d", n);
  if (n && !(v[0] >= 0 && v[0] < 1))
    return plf_model_fail(e, EMBER_EPARAM,
                          "+I: proportion %g is outside [0, 1)", v[0]);
  spec->pinv_given = 1;
  spec->pinv_set = n;
  spec->pinv = n ? v[0] : 0;
  if (!n) spec->unset |= PLF_MODEL_UNSET_PINV;
  *pp = p;
  return 0;
}

int plf_model_parse_modifiers(const char *s, plf_model_spec *spec,
                              plf_model_err *e) {
  const char *p = s;
  while (*p) {
    if (*p != '+')
      return plf_model_fail(e, EMBER_EPARAM, "expected '+' at '%.20s'", p);
    p++;
    char c = (char)toupper((unsigned char)*p);
    int rc;
    const char *at = p;
    if (c == 'F') {
      p++;
      rc = parse_freqs(&p, spec, e);
    } else if (c == 'G') {
      p++;
      rc = parse_gamma(&p, spec, e);
    } else if (c == 'I') {
      p++;
      rc = parse_invar(&p, spec, e);
    } else {
      size_t n = strcspn(at, "+");
      return plf_model_fail(e, EMBER_EPARAM,
                            "'+%.*s' is not supported (+F, +FQ, +FU, +F{..}, "
                            "+G, +Gn{a}, +I{p})", (int)(n > 20 ? 20 : n), at);
    }
    if (rc) return rc;
    if (*p && *p != '+')
      return plf_model_fail(e, EMBER_EPARAM, "unexpected '%.20s' after +%c",
                            p, c);
  }
  return 0;
}

int plf_model_parse(const char *spec, const plf_alignment *aln,
                    plf_model **out, char *err, size_t err_len) {
  if (out) *out = NULL;
  if (err && err_len) err[0] = '\0';
  if (!spec || !out) return EMBER_EINVAL;
  plf_model_err e = {err, err_len, ""};
  size_t len = strnlen(spec, PLF_MODEL_MAX_SPEC + 1);
  if (len > PLF_MODEL_MAX_SPEC)
    return plf_model_fail(&e, EMBER_EPARAM, "longer than %d bytes",
                          PLF_MODEL_MAX_SPEC);
  e.what = spec;
  plf_model_spec *s = calloc(1, sizeof *s);
  if (!s) return EMBER_ENOMEM;
  const char *p = spec;
  int rc = parse_base(&p, s, &e);
  if (!rc) rc = plf_model_parse_modifiers(p, s, &e);
  if (!rc) rc = plf_model_build(s, aln, out, &e);
  free(s);
  return rc;
}
