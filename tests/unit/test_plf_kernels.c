/*
 * test_plf_kernels.c - the plf kernels' API (accelerators/plf/plf_kernel.h)
 * without BEAGLE (test_plf_conformance compares with BEAGLE):
 *   - EMBER_PLF_ISA picks the default variant, once per process (each case
 *     in a child process); unknown or unsupported names fall back to the
 *     widest;
 *   - argument checks: EMBER_EINVAL and nothing written;
 *   - transition matrices: P(0) = I, rows sum to 1, derivatives against
 *     finite differences;
 *   - shapes the conformance test does not reach (S = 2, 3, 5, 64, 65;
 *     S = 4 with 17 categories; 1 pattern): every variant against the
 *     scalar reference, relative 1e-13 (double) and 1e-5 (single);
 *   - the _mt functions with 1, 3 and 300 threads equal the single range;
 *   - the SIMD variants' vectorised log within 1 ulp of libm.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ember/ember_errors.h"
#include "plf_kernel.h"

static plf_isa widest(void) {
  plf_isa best = PLF_ISA_SCALAR;
  for (int i = 0; i < PLF_ISA_COUNT; i++)
    if (plf_kernels_get((plf_isa)i)) best = (plf_isa)i;
  return best;
}

static int default_with(const char *value) {
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    if (value)
      setenv("EMBER_PLF_ISA", value, 1);
    else
      unsetenv("EMBER_PLF_ISA");
    _exit((int)plf_kernels_isa(NULL));
  }
  int status;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  return WEXITSTATUS(status);
}

static void test_override(void **state) {
  (void)state;
  assert_non_null(plf_kernels_get(PLF_ISA_SCALAR));
  assert_int_equal(default_with(NULL), widest());
  for (int i = 0; i < PLF_ISA_COUNT; i++) {
    int got = default_with(plf_isa_name((plf_isa)i));
    assert_int_equal(got, plf_kernels_get((plf_isa)i) ? i : (int)widest());
  }
  assert_int_equal(default_with("avx1024"), widest());
  assert_int_equal(default_with(""), widest());
  plf_isa isa;
  assert_int_equal(plf_isa_parse("avx512", &isa), 0);
  assert_int_equal(isa, PLF_ISA_AVX512);
  assert_int_equal(plf_isa_parse("sse2", &isa), EMBER_EINVAL);
  assert_null(plf_isa_name(PLF_ISA_COUNT));
  assert_null(plf_kernels_get(PLF_ISA_COUNT));
}

/* ---- data ---------------------------------------------------------------- */

static uint64_t rng = 42;
static double unit(void) {
  rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return ((rng >> 11) + 1) * (1.0 / 9007199254740992.0);
}

typedef struct problem {
  plf_dims d;
  double *m1, *m2, *x1, *x2, *root, *cw, *pi, *pw;
  int *st1;
} problem;

static double *rnd(size_t n, double lo) {
  double *v = malloc(n * sizeof *v);
  assert_non_null(v);
  for (size_t i = 0; i < n; i++) v[i] = lo + unit();
  return v;
}

static void problem_make(problem *pb, int S, int P, int C) {
  pb->d = (plf_dims){S, P, C};
  size_t m = (size_t)C * S * S, n = (size_t)C * P * S;
  pb->m1 = rnd(m, 0);
  pb->m2 = rnd(m, 0);
  pb->x1 = rnd(n, 0);
  pb->x2 = rnd(n, 0);
  pb->root = rnd(n, 0);
  pb->cw = rnd(C, 0.1);
  pb->pi = rnd(S, 0.1);
  pb->pw = rnd(P, 1);
  pb->st1 = malloc(P * sizeof(int));
  assert_non_null(pb->st1);
  for (int p = 0; p < P; p++)
    pb->st1[p] = p % 7 == 3 ? S + (p % 3) : p % 11 == 5 ? -1 : (int)(unit() * S);
}

static void problem_free(problem *pb) {
  free(pb->m1);
  free(pb->m2);
  free(pb->x1);
  free(pb->x2);
  free(pb->root);
  free(pb->cw);
  free(pb->pi);
  free(pb->pw);
  free(pb->st1);
}

static float *tof(const double *v, size_t n) {
  float *f = malloc(n * sizeof *f);
  assert_non_null(f);
  for (size_t i = 0; i < n; i++) f[i] = (float)v[i];
  return f;
}

static void near(double want, double got, double tol, const char *what,
                 int S, int C, const char *isa) {
  double big = fabs(want) > 1 ? fabs(want) : 1;
  if (!(fabs(got - want) <= tol * big)) {
    print_error("%s S=%d C=%d %s: want %.17g got %.17g\n", what, S, C, isa,
                want, got);
    fail();
  }
}

/* one variant against the scalar reference, double and single, every
 * update case with rescaling, root and edge */
static void check_shape(int S, int P, int C) {
  problem pb;
  problem_make(&pb, S, P, C);
  const plf_kernels *ref = plf_kernels_get(PLF_ISA_SCALAR);
  size_t n = (size_t)C * P * S;
  double *want = malloc(n * sizeof *want), *got = malloc(n * sizeof *got);
  double *sw = calloc(P, sizeof *sw), *sg = calloc(P, sizeof *sg);
  float *wantf = malloc(n * sizeof *wantf), *gotf = malloc(n * sizeof *gotf);
  float *swf = calloc(P, sizeof *swf), *sgf = calloc(P, sizeof *sgf);
  float *m1f = tof(pb.m1, (size_t)C * S * S), *m2f = tof(pb.m2, (size_t)C * S * S);
  float *x1f = tof(pb.x1, n), *x2f = tof(pb.x2, n), *rootf = tof(pb.root, n);
  float *cwf = tof(pb.cw, C), *pif = tof(pb.pi, S), *pwf = tof(pb.pw, P);
  assert_true(want && got && sw && sg && wantf && gotf && swf && sgf);
  for (int isa = 1; isa < PLF_ISA_COUNT; isa++) {
    const plf_kernels *k = plf_kernels_get((plf_isa)isa);
    if (!k) continue;
    const char *name = plf_isa_name((plf_isa)isa);
    for (int kind = 0; kind < 3; kind++) {   /* SS, SP (given as PS), PP */
      plf_child_d a = {kind == 2 ? pb.x1 : NULL, kind == 2 ? NULL : pb.st1,
                       pb.m1};
      plf_child_d b = {kind == 0 ? NULL : pb.x2, kind == 0 ? pb.st1 : NULL,
                       pb.m2};
      plf_update_d opw = {want, b, a, sw, NULL}, opg = {got, b, a, sg, NULL};
      assert_int_equal(plf_update_partials_d(ref, &pb.d, &opw, 0, P), 0);
      assert_int_equal(plf_update_partials_d(k, &pb.d, &opg, 0, P), 0);
      for (size_t i = 0; i < n; i++)
        near(want[i], got[i], 1e-13, "partials", S, C, name);
      for (int p = 0; p < P; p++) near(sw[p], sg[p], 1e-13, "scale", S, C, name);
      plf_child_f af = {kind == 2 ? x1f : NULL, kind == 2 ? NULL : pb.st1,
                        m1f};
      plf_child_f bf = {kind == 0 ? NULL : x2f, kind == 0 ? pb.st1 : NULL,
                        m2f};
      plf_update_f owf = {wantf, af, bf, swf, NULL};
      plf_update_f ogf = {gotf, af, bf, sgf, NULL};
      assert_int_equal(plf_update_partials_f(ref, &pb.d, &owf, 0, P), 0);
      assert_int_equal(plf_update_partials_f(k, &pb.d, &ogf, 0, P), 0);
      for (size_t i = 0; i < n; i++)
        near(wantf[i], gotf[i], 1e-5, "partials f", S, C, name);
      for (int p = 0; p < P; p++)
        near(swf[p], sgf[p], 1e-5, "scale f", S, C, name);
    }
    plf_integrate_d in = {pb.cw, pb.pi, pb.pw, pb.pw, NULL};
    plf_integrate_f inf = {cwf, pif, pwf, pwf, NULL};
    double lw, lg;
    assert_int_equal(plf_root_lnl_d(ref, &pb.d, pb.root, &in, 0, P, &lw), 0);
    assert_int_equal(plf_root_lnl_d(k, &pb.d, pb.root, &in, 0, P, &lg), 0);
    near(lw, lg, 1e-13, "root", S, C, name);
    assert_int_equal(plf_root_lnl_f(ref, &pb.d, rootf, &inf, 0, P, &lw), 0);
    assert_int_equal(plf_root_lnl_f(k, &pb.d, rootf, &inf, 0, P, &lg), 0);
    near(lw, lg, 1e-5, "root f", S, C, name);
    for (int tip = 0; tip < 2; tip++) {
      plf_child_d ch = {tip ? NULL : pb.x1, tip ? pb.st1 : NULL, pb.m1};
      plf_child_f chf = {tip ? NULL : x1f, tip ? pb.st1 : NULL, m1f};
      assert_int_equal(plf_edge_lnl_d(ref, &pb.d, pb.root, &ch, &in, 0, P, &lw), 0);
      assert_int_equal(plf_edge_lnl_d(k, &pb.d, pb.root, &ch, &in, 0, P, &lg), 0);
      near(lw, lg, 1e-13, "edge", S, C, name);
      assert_int_equal(plf_edge_lnl_f(ref, &pb.d, rootf, &chf, &inf, 0, P, &lw), 0);
      assert_int_equal(plf_edge_lnl_f(k, &pb.d, rootf, &chf, &inf, 0, P, &lg), 0);
      near(lw, lg, 1e-5, "edge f", S, C, name);
    }
  }
  free(want); free(got); free(sw); free(sg);
  free(wantf); free(gotf); free(swf); free(sgf);
  free(m1f); free(m2f); free(x1f); free(x2f); free(rootf);
  free(cwf); free(pif); free(pwf);
  problem_free(&pb);
}

static void test_shapes(void **state) {
  (void)state;
  static const int shapes[][3] = {
    {2, 37, 3}, {3, 29, 2}, {5, 33, 1}, {4, 41, 17}, {4, 1, 1}, {4, 3, 2},
    {20, 1, 4}, {61, 7, 3}, {64, 9, 2}, {65, 5, 2}, {17, 13, 5},
  };
  for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
    check_shape(shapes[i][0], shapes[i][1], shapes[i][2]);
}

static void test_threads(void **state) {
  (void)state;
  for (int S = 4; S <= 20; S += 16) {
    problem pb;
    /* enough patterns for several ranges (plf_kernel.h: 32,768 values) */
    int P = 20000, C = 2;
    problem_make(&pb, S, P, C);
    size_t n = (size_t)C * P * S;
    double *one = malloc(n * sizeof *one), *many = malloc(n * sizeof *many);
    double *s1 = calloc(P, sizeof *s1), *s2 = calloc(P, sizeof *s2);
    assert_true(one && many && s1 && s2);
    plf_child_d a = {pb.x1, NULL, pb.m1}, b = {NULL, pb.st1, pb.m2};
    plf_update_d op1 = {one, a, b, s1, NULL};
    assert_int_equal(plf_update_partials_d(NULL, &pb.d, &op1, 0, P), 0);
    plf_integrate_d in = {pb.cw, pb.pi, NULL, pb.pw, NULL};
    double want, edge_want;
    assert_int_equal(plf_root_lnl_d(NULL, &pb.d, one, &in, 0, P, &want), 0);
    assert_int_equal(plf_edge_lnl_d(NULL, &pb.d, one, &a, &in, 0, P,
                                    &edge_want), 0);
    static const int counts[] = {1, 3, 300};
    for (int t = 0; t < 3; t++) {
      memset(many, 0, n * sizeof *many);
      plf_update_d op2 = {many, a, b, s2, NULL};
      assert_int_equal(plf_update_partials_mt_d(NULL, &pb.d, &op2, counts[t]),
                       0);
      assert_memory_equal(one, many, n * sizeof *one);
      assert_memory_equal(s1, s2, P * sizeof *s1);
      double got;
      assert_int_equal(plf_root_lnl_mt_d(NULL, &pb.d, many, &in, counts[t],
                                         &got), 0);
      near(want, got, 1e-13, "root mt", S, C, "default");
      assert_int_equal(plf_edge_lnl_mt_d(NULL, &pb.d, many, &a, &in,
                                         counts[t], &got), 0);
      near(edge_want, got, 1e-13, "edge mt", S, C, "default");
    }
    free(one); free(many); free(s1); free(s2);
    problem_free(&pb);
  }
}

static void test_einval(void **state) {
  (void)state;
  problem pb;
  problem_make(&pb, 4, 10, 1);
  double dest[40], scale[10], lnl = 7;
  for (int i = 0; i < 40; i++) dest[i] = -1;
  plf_child_d a = {pb.x1, NULL, pb.m1}, b = {pb.x2, NULL, pb.m2};
  plf_child_d both = {pb.x1, pb.st1, pb.m1}, none = {NULL, NULL, pb.m1};
  plf_child_d nomat = {pb.x1, NULL, NULL};
  plf_update_d ok = {dest, a, b, scale, NULL};
  plf_update_d bad[] = {
    {NULL, a, b, NULL, NULL}, {dest, both, b, NULL, NULL},
    {dest, a, none, NULL, NULL}, {dest, nomat, b, NULL, NULL},
    {dest, a, b, NULL, scale},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    assert_int_equal(plf_update_partials_d(NULL, &pb.d, &bad[i], 0, 10),
                     EMBER_EINVAL);
  plf_dims zero = {4, 10, 0}, neg = {0, 10, 1};
  assert_int_equal(plf_update_partials_d(NULL, &zero, &ok, 0, 10), EMBER_EINVAL);
  assert_int_equal(plf_update_partials_d(NULL, &neg, &ok, 0, 10), EMBER_EINVAL);
  assert_int_equal(plf_update_partials_d(NULL, NULL, &ok, 0, 10), EMBER_EINVAL);
  assert_int_equal(plf_update_partials_d(NULL, &pb.d, &ok, 0, 11), EMBER_EINVAL);
  assert_int_equal(plf_update_partials_d(NULL, &pb.d, &ok, 5, 4), EMBER_EINVAL);
  assert_int_equal(plf_update_partials_d(NULL, &pb.d, &ok, -1, 4), EMBER_EINVAL);
  assert_int_equal(plf_update_partials_mt_d(NULL, &pb.d, &bad[0], 2),
                   EMBER_EINVAL);
  for (int i = 0; i < 40; i++) assert_true(dest[i] == -1);
  assert_int_equal(plf_update_partials_d(NULL, &pb.d, &ok, 3, 3), 0);
  for (int i = 0; i < 40; i++) assert_true(dest[i] == -1);

  plf_integrate_d in = {pb.cw, pb.pi, NULL, NULL, NULL};
  plf_integrate_d noweights = {NULL, pb.pi, NULL, NULL, NULL};
  assert_int_equal(plf_root_lnl_d(NULL, &pb.d, NULL, &in, 0, 10, &lnl),
                   EMBER_EINVAL);
  assert_int_equal(plf_root_lnl_d(NULL, &pb.d, pb.x1, &noweights, 0, 10, &lnl),
                   EMBER_EINVAL);
  assert_int_equal(plf_root_lnl_d(NULL, &pb.d, pb.x1, &in, 0, 10, NULL),
                   EMBER_EINVAL);
  assert_int_equal(plf_edge_lnl_d(NULL, &pb.d, pb.x1, &both, &in, 0, 10, &lnl),
                   EMBER_EINVAL);
  assert_true(lnl == 7);
  assert_int_equal(plf_root_lnl_d(NULL, &pb.d, pb.x1, &in, 4, 4, &lnl), 0);
  assert_true(lnl == 0);

  const double *list[2] = {scale, NULL};
  assert_int_equal(plf_scale_accumulate_d(dest, list, 2, 0, 10), EMBER_EINVAL);
  assert_int_equal(plf_scale_accumulate_d(NULL, list, 1, 0, 10), EMBER_EINVAL);
  assert_int_equal(plf_scale_reset_d(dest, 4, 3), EMBER_EINVAL);
  assert_int_equal(plf_transition_matrices_d(4, 1, pb.m1, pb.m1, pb.pi, pb.cw,
                                             -1, dest, NULL, NULL),
                   EMBER_EINVAL);
  assert_int_equal(plf_transition_matrices_d(0, 1, pb.m1, pb.m1, pb.pi, pb.cw,
                                             1, dest, NULL, NULL),
                   EMBER_EINVAL);
  problem_free(&pb);
}

/* Jukes-Cantor: eigenvalues 0, -4/3 (x3); P(t) known in closed form */
static void test_transition(void **state) {
  (void)state;
  double e[16], inv[16], ev[4] = {0, -4.0 / 3, -4.0 / 3, -4.0 / 3};
  /* E = [1 | contrasts], Einv its inverse */
  static const double E[16] = {1, 1, 1, 1, 1, -1, 1, -1,
                               1, 1, -1, -1, 1, -1, -1, 1};
  memcpy(e, E, sizeof e);
  for (int i = 0; i < 16; i++) inv[i] = E[(i % 4) * 4 + i / 4] / 4;
  double rates[2] = {1, 2.5}, p[32], d1[32], d2[32], ph[32], pl[32];
  assert_int_equal(plf_transition_matrices_d(4, 2, e, inv, ev, rates, 0, p,
                                             NULL, NULL), 0);
  for (int i = 0; i < 32; i++) assert_true(fabs(p[i] - ((i % 4) == (i / 4) % 4)) < 1e-15);
  double t = 0.3, h = 1e-5;
  assert_int_equal(plf_transition_matrices_d(4, 2, e, inv, ev, rates, t, p,
                                             d1, d2), 0);
  assert_int_equal(plf_transition_matrices_d(4, 2, e, inv, ev, rates, t + h,
                                             ph, NULL, NULL), 0);
  assert_int_equal(plf_transition_matrices_d(4, 2, e, inv, ev, rates, t - h,
                                             pl, NULL, NULL), 0);
  for (int c = 0; c < 2; c++)
    for (int i = 0; i < 4; i++) {
      double row = 0;
      for (int j = 0; j < 4; j++) {
        int at = c * 16 + i * 4 + j;
        double x = exp(-4.0 / 3 * rates[c] * t);
        double want = i == j ? 0.25 + 0.75 * x : 0.25 - 0.25 * x;
        near(want, p[at], 1e-15, "jc", 4, c, "-");
        near((ph[at] - pl[at]) / (2 * h), d1[at], 1e-8, "d1", 4, c, "-");
        near((ph[at] - 2 * p[at] + pl[at]) / (h * h), d2[at], 1e-4, "d2", 4, c,
             "-");
        row += p[at];
      }
      near(1, row, 1e-15, "row", 4, c, "-");
    }
  float ef[16], invf[16], evf[4], rf[2] = {1, 2.5f}, pf[32];
  for (int i = 0; i < 16; i++) {
    ef[i] = (float)e[i];
    invf[i] = (float)inv[i];
  }
  for (int i = 0; i < 4; i++) evf[i] = (float)ev[i];
  assert_int_equal(plf_transition_matrices_f(4, 2, ef, invf, evf, rf, t, pf,
                                             NULL, NULL), 0);
  for (int i = 0; i < 32; i++) near(p[i], pf[i], 1e-6, "jc f", 4, 0, "-");
}

/* the SIMD variants' vectorised log: site lnL = log(L) for L spanning the
 * double range, within 1 ulp of libm; 0, subnormals, inf and NaN as libm */
static void test_log(void **state) {
  (void)state;
  const int P = 4099;
  double *x = calloc((size_t)P * 4, sizeof *x), *site = malloc(P * sizeof *site);
  float *xf = calloc((size_t)P * 4, sizeof *xf);
  double *sitef = malloc(P * sizeof *sitef);
  assert_true(x && site && xf && sitef);
  for (int p = 0; p < P; p++) {
    x[p * 4] = exp((unit() - 0.5) * 1400) * (1 + unit());
    xf[p * 4] = (float)exp((unit() - 0.5) * 160) * (float)(1 + unit());
  }
  static const double special[] = {0, 4.9e-324, 1e-310, INFINITY, NAN, 1, -1};
  for (int i = 0; i < 7; i++) {
    x[(100 + i) * 4] = special[i];
    xf[(100 + i) * 4] = (float)special[i];
  }
  xf[107 * 4] = 1e-40f;   /* subnormal float */
  double f[4] = {1, 0, 0, 0}, w = 1;
  float ff[4] = {1, 0, 0, 0}, wf = 1;
  plf_dims d = {4, P, 1};
  plf_integrate_d in = {&w, f, NULL, NULL, site};
  plf_integrate_f inf = {&wf, ff, NULL, NULL, sitef};
  for (int isa = 0; isa < PLF_ISA_COUNT; isa++) {
    const plf_kernels *k = plf_kernels_get((plf_isa)isa);
    if (!k) continue;
    double lnl;
    assert_int_equal(plf_root_lnl_d(k, &d, x, &in, 0, P, &lnl), 0);
    assert_int_equal(plf_root_lnl_f(k, &d, xf, &inf, 0, P, &lnl), 0);
    for (int p = 0; p < P; p++) {
      double want = log(x[p * 4]);
      if (isnan(want) || isinf(want)) {
        assert_true(isnan(want) ? isnan(site[p]) : site[p] == want);
      } else {
        double ulp = nextafter(fabs(want), INFINITY) - fabs(want);
        if (!(fabs(site[p] - want) <= ulp)) {
          print_error("%s: log(%.17g) = %.17g, libm %.17g\n",
                      plf_isa_name((plf_isa)isa), x[p * 4], site[p], want);
          fail();
        }
      }
      float wantf = logf(xf[p * 4]);
      if (isnan(wantf) || isinf(wantf)) {
        assert_true(isnan(wantf) ? isnan(sitef[p]) : sitef[p] == wantf);
      } else {
        float ulpf = nextafterf(fabsf(wantf), INFINITY) - fabsf(wantf);
        if (!(fabsf((float)sitef[p] - wantf) <= ulpf)) {
          print_error("%s: logf(%.9g) = %.9g, libm %.9g\n",
                      plf_isa_name((plf_isa)isa), xf[p * 4], sitef[p], wantf);
          fail();
        }
      }
    }
  }
  free(x);
  free(site);
  free(xf);
  free(sitef);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_override),
    cmocka_unit_test(test_einval),
    cmocka_unit_test(test_transition),
    cmocka_unit_test(test_shapes),
    cmocka_unit_test(test_threads),
    cmocka_unit_test(test_log),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
