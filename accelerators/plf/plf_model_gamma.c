/*
 * plf_model_gamma.c - discrete gamma rates (Yang 1994, "mean" method):
 * n categories of equal probability bounded by gamma quantiles, each at
 * the mean rate within it.
 *
 * The regularized lower incomplete gamma P(a, x) is computed by its power
 * series for x < a + 1 and by the continued fraction of Q = 1 - P
 * (evaluated with the modified Lentz method) beyond (Abramowitz & Stegun
 * 6.5.29 and 6.5.31). The quantile solves P(a, x) = p by Newton's method on
 * u = ln x, kept inside a bracket and falling back to bisection, so it
 * stays accurate for small shapes whose lower quantiles are tiny.
 */
#include <float.h>
#include <math.h>

#include "plf_model_internal.h"

#define EPS 1e-16
#define MAX_TERMS 100000

static double log_gamma(double a) {
  int sign;
  return lgamma_r(a, &sign);
}

/* x^a e^-x / Gamma(a), in logs */
static double log_prefactor(double a, double x) {
  return a * log(x) - x - log_gamma(a);
}

double plf_gamma_p(double a, double x) {
  if (!(a > 0) || isnan(x)) return NAN;
  if (x <= 0) return 0.0;
  if (isinf(x)) return 1.0;
  double pre = log_prefactor(a, x);
  if (x < a + 1) {
    /* P = pre/a * sum_n x^n / ((a+1)...(a+n)) */
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < MAX_TERMS; n++) {
      term *= x / (a + n);
      sum += term;
      if (fabs(term) < fabs(sum) * EPS) break;
    }
    return fmin(1.0, sum * exp(pre));
  }
  /* Q = pre * 1/(x+1-a- 1(1-a)/(x+3-a- 2(2-a)/(x+5-a- ...))) */
  const double tiny = DBL_MIN / EPS;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < MAX_TERMS; i++) {
    double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (fabs(c) < tiny) c = tiny;
    d = 1 / d;
    double del = d * c;
    h *= del;
    if (fabs(del - 1) < EPS) break;
  }
  return fmax(0.0, 1.0 - exp(pre) * h);
}

/* f(u) = P(a, e^u) - p and its derivative e^u * density(e^u). */
static double f_of(double a, double p, double u) {
  return plf_gamma_p(a, exp(u)) - p;
}

static double df_of(double a, double u) {
  return exp(a * u - exp(u) - log_gamma(a));
}

double plf_gamma_quantile(double a, double p) {
  if (!(a > 0) || !(p >= 0 && p <= 1)) return NAN;
  if (p == 0) return 0.0;
  if (p == 1) return INFINITY;
  /* start: P(a, x) ~ x^a / Gamma(a + 1) for small x, or the mean */
  double u = (log(p) + log_gamma(a + 1)) / a;
  if (!(u < log(a))) u = log(a);
  if (u < -700) u = -700;
  double lo = u, hi = u, fu = f_of(a, p, u);
  if (fu == 0) return exp(u);
  for (double step = 1;; step *= 2) {
    if (fu < 0) { /* the root is above: move hi up */
      lo = hi;
      hi = u + step;
      if (hi > 710) return INFINITY;
      if (f_of(a, p, hi) >= 0) break;
    } else {      /* the root is below: move lo down */
      hi = lo;
      lo = u - step;
      if (lo < -745) return 0.0; /* below the smallest double */
      if (f_of(a, p, lo) <= 0) break;
    }
  }
  u = 0.5 * (lo + hi);
  for (int i = 0; i < 300; i++) {
    fu = f_of(a, p, u);
    if (fu == 0) break;
    if (fu < 0) lo = u;
    else hi = u;
    double d = df_of(a, u), next;
    next = d > 0 ? u - fu / d : NAN;
    if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
    if (fabs(next - u) <= 1e-15 * fmax(1.0, fabs(u)) ||
        hi - lo <= 1e-15 * fmax(1.0, fabs(u))) {
      u = next;
      break;
    }
    u = next;
  }
  return exp(u);
}

int plf_model_gamma_rates(double alpha, int n, double *rates) {
  if (!rates || n < 1 || n > PLF_MODEL_MAX_GAMMA ||
      !(alpha >= PLF_MODEL_MIN_ALPHA && alpha <= PLF_MODEL_MAX_ALPHA))
    return EMBER_EINVAL;
  if (n == 1) {
    rates[0] = 1.0;
    return 0;
  }
  /* rate r = X / alpha, X ~ Gamma(alpha, 1); the mean of r over (x0, x1)
   * is P(alpha + 1, x1) - P(alpha + 1, x0), times n for probability 1/n */
  double prev = 0.0, sum = 0.0;
  for (int i = 0; i < n; i++) {
    double next = 1.0;
    if (i < n - 1)
      next = plf_gamma_p(alpha + 1, plf_gamma_quantile(alpha,
                                                       (i + 1.0) / n));
    rates[i] = n * (next - prev);
    sum += rates[i];
    prev = next;
  }
  for (int i = 0; i < n; i++) rates[i] *= n / sum;
  return 0;
}
