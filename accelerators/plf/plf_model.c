/*
 * plf_model.c - a model from its parsed string: frequencies, rate
 * categories (+G, +I), the eigen system; the model's accessors and P(t).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plf_model_internal.h"

#define MIN_PINV 1e-6 /* IQ-TREE's MIN_PINVAR */

static void append(char *buf, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void append(char *buf, size_t len, const char *fmt, ...) {
  size_t at = strlen(buf);
  if (at + 1 >= len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf + at, len - at, fmt, ap);
  va_end(ap);
}

static int frequencies(const plf_model_spec *spec, const plf_alignment *aln,
                       plf_model *m, plf_model_err *e) {
  int S = spec->states;
  plf_freq_kind kind = spec->freq ? spec->freq : spec->base_freq;
  double sum = 0;
  switch (kind) {
  case PLF_FREQ_EMPIRICAL:
    if (!aln)
      return plf_model_fail(e, EMBER_EPARAM,
                            "empirical frequencies (+F) need an alignment");
    plf_alignment_empirical_freqs(aln, m->freqs);
    break;
  case PLF_FREQ_GIVEN:
    memcpy(m->freqs, spec->freqs, (size_t)S * sizeof *m->freqs);
    break;
  case PLF_FREQ_MATRIX:
    for (int i = 0; i < S; i++) sum += spec->matrix_freqs[i];
    for (int i = 0; i < S; i++) m->freqs[i] = spec->matrix_freqs[i] / sum;
    break;
  default:
    for (int i = 0; i < S; i++) m->freqs[i] = 1.0 / S;
    break;
  }
  /* written back: +F{...} unless the base implies them */
  if (kind == PLF_FREQ_EMPIRICAL || kind == PLF_FREQ_GIVEN) {
    append(m->name, sizeof m->name, "+F{");
    for (int i = 0; i < S; i++)
      append(m->name, sizeof m->name, "%s%.10g", i ? "," : "", m->freqs[i]);
    append(m->name, sizeof m->name, "}");
  } else if (kind != spec->base_freq) {
    append(m->name, sizeof m->name, kind == PLF_FREQ_EQUAL ? "+FQ" : "+FU");
  }
  return 0;
}

static int categories(const plf_model_spec *spec, const plf_alignment *aln,
                      plf_model *m, plf_model_err *e) {
  double p = 0;
  if (spec->pinv_given) {
    if (spec->pinv_set) {
      p = spec->pinv;
    } else {
      if (!aln)
        return plf_model_fail(e, EMBER_EPARAM,
                              "+I without a proportion needs an alignment "
                              "(its starting value is half the constant "
                              "fraction)");
      p = 0.5 * plf_alignment_constant_fraction(aln);
      if (p > 0 && p < MIN_PINV) p = MIN_PINV;
    }
    append(m->name, sizeof m->name, "+I{%.10g}", p);
  }
  m->pinv = p;
  double gamma[PLF_MODEL_MAX_GAMMA];
  int n = 1;
  gamma[0] = 1.0;
  if (spec->gamma) {
    n = spec->gamma;
    m->alpha = spec->alpha;
    if (plf_model_gamma_rates(spec->alpha, n, gamma))
      return plf_model_fail(e, EMBER_EPARAM, "bad gamma parameters");
    append(m->name, sizeof m->name, "+G%d{%.10g}", n, spec->alpha);
  }
  size_t c = 0;
  if (p > 0) {
    m->rates[c] = 0;
    m->weights[c++] = p;
  }
  for (int i = 0; i < n; i++) {
    m->rates[c] = gamma[i] / (1 - p);
    m->weights[c++] = (1 - p) / n;
  }
  m->ncat = c;
  return 0;
}

int plf_model_build(const plf_model_spec *spec, const plf_alignment *aln,
                    plf_model **out, plf_model_err *e) {
  int S = spec->states;
  if (aln && plf_alignment_states(aln) != S)
    return plf_model_fail(e, EMBER_EPARAM,
                          "a %s model, but the alignment is %s",
                          S == 4 ? "DNA" : "protein",
                          plf_alignment_states(aln) == 4 ? "DNA" : "protein");
  plf_model *m = calloc(1, sizeof *m);
  if (!m) return plf_model_fail(e, EMBER_ENOMEM, "out of memory");
  m->states = S;
  m->type = S == 4 ? PLF_DATA_DNA : PLF_DATA_PROTEIN;
  m->unset = spec->unset;
  snprintf(m->name, sizeof m->name, "%s", spec->base);
  int rc = frequencies(spec, aln, m, e);
  if (!rc) rc = categories(spec, aln, m, e);
  if (!rc) {
    memcpy(m->exch, spec->exch, (size_t)S * S * sizeof *m->exch);
    rc = plf_model_eigen(S, m->exch, m->freqs, m->evec, m->ievec, m->eval);
    if (rc == EMBER_ENOMEM)
      plf_model_fail(e, rc, "out of memory");
    else if (rc)
      plf_model_fail(e, rc, "the eigen decomposition failed");
  }
  if (rc) {
    free(m);
    return rc;
  }
  *out = m;
  return 0;
}

void plf_model_destroy(plf_model *m) { free(m); }

const char *plf_model_name(const plf_model *m) { return m->name; }
int plf_model_states(const plf_model *m) { return m->states; }
plf_datatype plf_model_datatype(const plf_model *m) { return m->type; }
unsigned plf_model_unset(const plf_model *m) { return m->unset; }
const double *plf_model_freqs(const plf_model *m) { return m->freqs; }
const double *plf_model_exchangeabilities(const plf_model *m) {
  return m->exch;
}
size_t plf_model_categories(const plf_model *m) { return m->ncat; }
const double *plf_model_category_rates(const plf_model *m) {
  return m->rates;
}
const double *plf_model_category_weights(const plf_model *m) {
  return m->weights;
}
double plf_model_alpha(const plf_model *m) { return m->alpha; }
double plf_model_pinv(const plf_model *m) { return m->pinv; }
const double *plf_model_eigenvectors(const plf_model *m) { return m->evec; }
const double *plf_model_inverse_eigenvectors(const plf_model *m) {
  return m->ievec;
}
const double *plf_model_eigenvalues(const plf_model *m) { return m->eval; }

int plf_model_transition(const plf_model *m, double t, double *p) {
  if (!m || !p || !(t >= 0) || !isfinite(t)) return EMBER_EINVAL;
  int S = m->states;
  double ex[PLF_MAX_STATES];
  for (int k = 0; k < S; k++) ex[k] = exp(m->eval[k] * t);
  for (int i = 0; i < S; i++)
    for (int j = 0; j < S; j++) {
      double sum = 0;
      for (int k = 0; k < S; k++)
        sum += m->evec[i * S + k] * ex[k] * m->ievec[k * S + j];
      p[i * S + j] = sum;
    }
  return 0;
}
