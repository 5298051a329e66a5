/* test_plf_model.c - plf substitution models: IQ-TREE model strings (good
 * and bad), PAML rate files, the built-in LG/WAG/JTT against PAML's files,
 * discrete gamma mean rates and the gamma numerics against closed forms and
 * known values, +I, eigen systems, and P(t) (rows, JC closed form,
 * Chapman-Kolmogorov, reversibility, mean rate 1). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plf_alignment.h"
#include "plf_model.h"
#include "plf_model_internal.h"

#define DATA EMBER_SOURCE_DIR "/tests/data/plf/"

#define assert_contains(text, needle)                                        \
  do {                                                                       \
    if (!strstr((text), (needle)))                                           \
      fail_msg("\"%s\" does not contain \"%s\"", (text), (needle));          \
  } while (0)

#define assert_near(a, b, tol)                                               \
  do {                                                                       \
    double a_ = (a), b_ = (b);                                               \
    if (!(fabs(a_ - b_) <= (tol)))                                           \
      fail_msg("%s = %.17g, expected %.17g (tolerance %g)", #a, a_, b_,     \
               (double)(tol));                                               \
  } while (0)

static plf_model *model_ok(const char *spec, const plf_alignment *aln) {
  plf_model *m = NULL;
  char err[512];
  int rc = plf_model_parse(spec, aln, &m, err, sizeof err);
  if (rc) fail_msg("'%s': rc %d %s", spec, rc, err);
  return m;
}

static void model_fails(const char *spec, const plf_alignment *aln,
                        const char *want) {
  plf_model *m = (plf_model *)1;
  char err[512];
  int rc = plf_model_parse(spec, aln, &m, err, sizeof err);
  if (rc != EMBER_EPARAM)
    fail_msg("'%s': rc %d (%s), expected EPARAM", spec, rc, err);
  assert_null(m);
  assert_contains(err, want);
}

static plf_alignment *dna_aln(void) {
  const char *t = ">a\nAACCGTTTAA\n>b\nAACCGTTTAG\n>c\nAACCGTTTCT\n";
  plf_alignment *a;
  char err[256];
  if (plf_alignment_parse(t, strlen(t), "t.fa", 0, 0, &a, err, sizeof err))
    fail_msg("%s", err);
  return a;
}

/* ---- model strings ------------------------------------------------------- */
static void test_strings(void **state) {
  (void)state;
  struct {
    const char *spec, *name;
    int states;
    size_t cats;
  } good[] = {
      {"JC", "JC", 4, 1},
      {"jc69", "JC", 4, 1},
      {"F81+F{0.1,0.2,0.3,0.4}", "F81+F{0.1,0.2,0.3,0.4}", 4, 1},
      {"K80{2}", "K80{2}", 4, 1},
      {"k2p{2.5}+G8{0.3}", "K80{2.5}+G8{0.3}", 4, 8},
      {"HKY{2.0}+F{0.3,0.2,0.25,0.25}+G4{0.5}",
       "HKY{2}+F{0.3,0.2,0.25,0.25}+G4{0.5}", 4, 4},
      {"GTR{1.2,3.9,0.8,1.1,4.5}+F{0.3,0.2,0.25,0.25}+G4{0.5}",
       "GTR{1.2,3.9,0.8,1.1,4.5}+F{0.3,0.2,0.25,0.25}+G4{0.5}", 4, 4},
      {"GTR{1/2/3/4/5/6}+FQ", "GTR{1,2,3,4,5,6}+FQ", 4, 1},
      {"HKY85{3}+FQ+G", "HKY{3}+FQ+G4{1}", 4, 4},
      {"JC+I{0.25}", "JC+I{0.25}", 4, 2},
      {"JC+G{0.5}+I{0.1}", "JC+I{0.1}+G4{0.5}", 4, 5},
      {"JC+I{0}+G1{2}", "JC+I{0}+G1{2}", 4, 1},
      {"LG", "LG", 20, 1},
      {"WAG+G4{0.5}", "WAG+G4{0.5}", 20, 4},
      {"lg+G4{0.8}", "LG+G4{0.8}", 20, 4},
      {"JTT+I{0.1}+G8{0.7}", "JTT+I{0.1}+G8{0.7}", 20, 9},
      {"LG+FQ", "LG+FQ", 20, 1},
      {"WAG+FU", "WAG", 20, 1},
  };
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
    plf_model *m = model_ok(good[i].spec, NULL);
    assert_string_equal(plf_model_name(m), good[i].name);
    assert_int_equal(plf_model_states(m), good[i].states);
    assert_int_equal(plf_model_datatype(m),
                     good[i].states == 4 ? PLF_DATA_DNA : PLF_DATA_PROTEIN);
    assert_int_equal(plf_model_categories(m), good[i].cats);
    /* frequencies and weights sum to 1, the mean rate is 1 */
    double fs = 0, ws = 0, mean = 0;
    for (int s = 0; s < plf_model_states(m); s++) fs += plf_model_freqs(m)[s];
    for (size_t c = 0; c < plf_model_categories(m); c++) {
      ws += plf_model_category_weights(m)[c];
      mean += plf_model_category_weights(m)[c] *
              plf_model_category_rates(m)[c];
    }
    assert_near(fs, 1, 1e-12);
    assert_near(ws, 1, 1e-12);
    assert_near(mean, 1, 1e-12);
    /* the name reads back as the same model */
    plf_model *again = model_ok(plf_model_name(m), NULL);
    assert_string_equal(plf_model_name(again), plf_model_name(m));
    plf_model_destroy(again);
    plf_model_destroy(m);
  }
  plf_model *m = model_ok("JC", NULL);
  assert_int_equal(plf_model_unset(m), 0);
  assert_near(plf_model_alpha(m), 0, 0);
  assert_near(plf_model_pinv(m), 0, 0);
  for (int s = 0; s < 4; s++) assert_near(plf_model_freqs(m)[s], 0.25, 0);
  plf_model_destroy(m);
  m = model_ok("HKY{2}+F{0.3,0.2,0.25,0.25}+G4{0.5}", NULL);
  assert_near(plf_model_freqs(m)[0], 0.3, 1e-15);
  assert_near(plf_model_alpha(m), 0.5, 0);
  plf_model_destroy(m);
  /* LG's own frequencies (lg.dat's, normalised) */
  m = model_ok("LG", NULL);
  assert_near(plf_model_freqs(m)[0], 0.079066, 1e-6);
  assert_near(plf_model_freqs(m)[19], 0.069147, 1e-6);
  plf_model_destroy(m);
  plf_model_destroy(NULL);
}

static void test_defaults_and_alignment(void **state) {
  (void)state;
  plf_alignment *aln = dna_aln();
  /* +F, and F81/HKY/GTR without +F: the alignment's frequencies */
  double emp[4];
  assert_int_equal(plf_alignment_empirical_freqs(aln, emp), 0);
  const char *specs[] = {"F81", "HKY{2}", "GTR", "JC+F", "GTR+F+G"};
  for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
    plf_model *m = model_ok(specs[i], aln);
    for (int s = 0; s < 4; s++) assert_near(plf_model_freqs(m)[s], emp[s], 0);
    assert_contains(plf_model_name(m), "+F{");
    plf_model_destroy(m);
  }
  plf_model *m = model_ok("GTR+F+G", aln);
  assert_int_equal(plf_model_unset(m),
                   PLF_MODEL_UNSET_RATES | PLF_MODEL_UNSET_ALPHA);
  assert_near(plf_model_alpha(m), 1.0, 0); /* IQ-TREE's starting shape */
  plf_model_destroy(m);
  /* +I alone: half the constant fraction (8 of 10 sites constant) */
  assert_near(plf_alignment_constant_fraction(aln), 0.8, 1e-15);
  m = model_ok("JC+I", aln);
  assert_int_equal(plf_model_unset(m), PLF_MODEL_UNSET_PINV);
  assert_near(plf_model_pinv(m), 0.4, 1e-15);
  assert_int_equal(plf_model_categories(m), 2);
  assert_near(plf_model_category_rates(m)[0], 0, 0);
  assert_near(plf_model_category_weights(m)[0], 0.4, 1e-15);
  assert_near(plf_model_category_rates(m)[1], 1 / 0.6, 1e-15);
  assert_near(plf_model_category_weights(m)[1], 0.6, 1e-15);
  plf_model_destroy(m);
  model_fails("LG", aln, "model 'LG': a protein model, but the alignment is DNA");
  plf_alignment_destroy(aln);
}

static void test_plus_i_gamma(void **state) {
  (void)state;
  /* +I{p}+G: category 0 invariable (rate 0, weight p), the gamma rates
   * divided by 1 - p, weights (1 - p) / n (IQ-TREE's convention) */
  plf_model *m = model_ok("JTT+I{0.1}+G8{0.7}", NULL);
  double g[8];
  assert_int_equal(plf_model_gamma_rates(0.7, 8, g), 0);
  assert_near(plf_model_category_rates(m)[0], 0, 0);
  assert_near(plf_model_category_weights(m)[0], 0.1, 0);
  for (int c = 0; c < 8; c++) {
    assert_near(plf_model_category_rates(m)[c + 1], g[c] / 0.9, 1e-14);
    assert_near(plf_model_category_weights(m)[c + 1], 0.9 / 8, 1e-15);
  }
  plf_model_destroy(m);
}

static void test_bad_strings(void **state) {
  (void)state;
  struct {
    const char *spec, *want;
  } bad[] = {
      {"", "model '': expected a model name"},
      {"+G", "expected a model name"},
      {"FOO", "model 'FOO': unknown model 'FOO' (JC, F81, K80, HKY, GTR"},
      {"GTR{1,2}", "GTR takes 5 rates (AC,AG,AT,CG,CT; GT=1) or 6, found 2"},
      {"JC{1}", "JC takes no values"},
      {"LG{1}", "LG takes no values"},
      {"HKY{1,2}+FQ", "HKY takes one value (kappa), found 2"},
      {"HKY{-1}+FQ", "HKY: value 1 is -1, outside [1e-06, 1e+06]"},
      {"HKY{2e6}+FQ", "HKY: value 1 is 2e+06, outside [1e-06, 1e+06]"},
      {"GTR{1,2,3,4,0}+FQ", "GTR: value 5 is 0, outside [1e-06, 1e+06]"},
      {"HKY{abc}+FQ", "HKY: expected a number at 'abc}+FQ'"},
      {"HKY{nan}+FQ", "HKY: expected a number at 'nan}+FQ'"},
      {"HKY{1e999}+FQ", "HKY: expected a number at '1e999}+FQ'"},
      {"HKY{2", "HKY: expected ',' or '}' at 'the end'"},
      {"HKY{2;3}", "HKY: expected ',' or '}' at ';3}'"},
      {"JC+F{0.5,0.5}", "+F needs 4 frequencies, found 2"},
      {"JC+F{0.5,0.5,0.5,0.5}", "+F: the frequencies sum to 2, not 1"},
      {"JC+F{0,0.5,0.25,0.25}", "+F: value 1 is 0, outside [1e-06, 1]"},
      {"JC+G0", "+G: 0 categories (1 to 64)"},
      {"JC+G65", "+G: too many categories (1 to 64)"},
      {"JC+G99999999999", "+G: too many categories"},
      {"JC+G{0.001}", "+G: alpha 0.001 is outside [0.02, 1000]"},
      {"JC+G4{1,2}", "+G takes one value (the shape alpha), found 2"},
      {"JC+I{1}", "+I: proportion 1 is outside [0, 1)"},
      {"JC+I{-0.1}", "+I: proportion -0.1 is outside [0, 1)"},
      {"JC+R4", "'+R4' is not supported"},
      {"JC+ASC", "'+ASC' is not supported"},
      {"JC+G+G", "+G given twice"},
      {"JC+I{0.1}+I{0.2}", "+I given twice"},
      {"JC+FQ+F", "+F given twice"},
      {"JC+FO", "+FO (estimated frequencies) is not supported"},
      {"JC+FU", "+FU (the matrix's frequencies) needs a protein matrix"},
      {"JC G", "expected '+' at ' G'"},
      {"JC+", "'+' is not supported"},
      {"JC+G4x", "unexpected 'x' after +G"},
      {"HKY{2}", "model 'HKY{2}': empirical frequencies (+F) need an alignment"},
      {"JC+I", "+I without a proportion needs an alignment"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    model_fails(bad[i].spec, NULL, bad[i].want);
  char *big = malloc(PLF_MODEL_MAX_SPEC + 2);
  memset(big, 'J', PLF_MODEL_MAX_SPEC + 1);
  big[PLF_MODEL_MAX_SPEC + 1] = '\0';
  model_fails(big, NULL, "longer than 4096 bytes");
  free(big);
  plf_model *m;
  assert_int_equal(plf_model_parse(NULL, NULL, &m, NULL, 0), EMBER_EINVAL);
  assert_int_equal(plf_model_parse("JC", NULL, NULL, NULL, 0), EMBER_EINVAL);
}

/* ---- PAML files ---------------------------------------------------------- */
static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  char *buf = malloc(1 << 20);
  *len = fread(buf, 1, 1 << 20, f);
  fclose(f);
  return buf;
}

/* The built-in matrices hold PAML's numbers, digit for digit. */
static void test_builtin_matrices(void **state) {
  (void)state;
  const char *names[] = {"LG", "WAG", "JTT"};
  const char *files[] = {DATA "protein/lg.dat", DATA "protein/wag.dat",
                         DATA "protein/jones.dat"};
  for (int i = 0; i < 3; i++) {
    size_t len;
    char *text = slurp(files[i], &len);
    double lower[190], freqs[20];
    char err[256];
    if (plf_model_paml_numbers(text, len, files[i], lower, freqs, err,
                               sizeof err))
      fail_msg("%s", err);
    const plf_model_matrix *mat = plf_model_builtin(names[i]);
    assert_non_null(mat);
    for (int k = 0; k < 190; k++)
      if (mat->exch[k] != lower[k])
        fail_msg("%s exchangeability %d: %.17g, the file has %.17g",
                 names[i], k, mat->exch[k], lower[k]);
    for (int k = 0; k < 20; k++)
      if (mat->freqs[k] != freqs[k])
        fail_msg("%s frequency %d: %.17g, the file has %.17g", names[i], k,
                 mat->freqs[k], freqs[k]);
    /* and the file through plf_model_load_paml is the same model */
    plf_model *a = model_ok(names[i], NULL), *b;
    if (plf_model_load_paml(files[i], "+G4{0.5}", NULL, &b, err, sizeof err))
      fail_msg("%s", err);
    char want[512];
    snprintf(want, sizeof want, "%s+G4{0.5}", files[i]);
    assert_string_equal(plf_model_name(b), want);
    assert_int_equal(plf_model_categories(b), 4);
    for (int k = 0; k < 400; k++)
      assert_near(plf_model_exchangeabilities(a)[k],
                  plf_model_exchangeabilities(b)[k], 1e-15);
    for (int k = 0; k < 20; k++)
      assert_near(plf_model_eigenvalues(a)[k], plf_model_eigenvalues(b)[k],
                  1e-13);
    plf_model_destroy(a);
    plf_model_destroy(b);
    free(text);
  }
  assert_null(plf_model_builtin("Dayhoff"));
}

static void paml_fails(const char *text, int rc, const char *want) {
  plf_model *m = (plf_model *)1;
  char err[512];
  int got = plf_model_parse_paml(text, strlen(text), "t.dat", NULL, NULL, &m,
                                 err, sizeof err);
  if (got != rc) fail_msg("rc %d (%s), expected %d", got, err, rc);
  assert_null(m);
  assert_contains(err, want);
}

static void test_paml_errors(void **state) {
  (void)state;
  paml_fails("", EMBER_EFORMAT,
             "t.dat:1: the file ends before exchangeability 1 of 190");
  paml_fails("1 2\n3\n", EMBER_EFORMAT,
             "t.dat:3: the file ends before exchangeability 4 of 190");
  paml_fails("\n0.5 abc", EMBER_EFORMAT,
             "t.dat:2: expected a number (exchangeability 2 of 190), found "
             "'abc'");
  paml_fails("-1", EMBER_EFORMAT,
             "t.dat:1: exchangeability 1 of 190 is -1 (outside [0, 1e6])");
  char text[8192] = "";
  for (int i = 0; i < 190; i++) strcat(text, "1 ");
  strcat(text, "\n");
  /* text holds 381 bytes: full has room for it and what follows */
  char full[sizeof text + 64];
  snprintf(full, sizeof full, "%s", text);
  for (int i = 0; i < 20; i++) strcat(full, "0.1 ");
  paml_fails(full, EMBER_EFORMAT, "t.dat:2: the 20 frequencies sum to 2, not 1");
  strcpy(full, text);
  strcat(full, "0.05 0.05 0 ");
  paml_fails(full, EMBER_EFORMAT,
             "t.dat:2: frequency 3 of 20 is 0 (below 1e-6)");
  snprintf(full, sizeof full, "%s", text);
  for (int i = 0; i < 20; i++) strcat(full, "0.05 ");
  strcat(full, "notes that PAML ignores");
  plf_model *m;
  char err[256];
  assert_int_equal(plf_model_parse_paml(full, strlen(full), "t.dat", "+G2",
                                        NULL, &m, err, sizeof err), 0);
  assert_string_equal(plf_model_name(m), "t.dat+G2{1}");
  plf_model_destroy(m);
  assert_int_equal(plf_model_parse_paml(full, strlen(full), "t.dat", "+X",
                                        NULL, &m, err, sizeof err),
                   EMBER_EPARAM);
  assert_contains(err, "model 't.dat': '+X' is not supported");
  assert_int_equal(plf_model_parse_paml(full, PLF_MODEL_MAX_PAML_BYTES + 1,
                                        "t.dat", NULL, NULL, &m, err,
                                        sizeof err),
                   EMBER_ETOOBIG);
  assert_int_equal(plf_model_load_paml("/nonexistent.dat", NULL, NULL, &m,
                                       err, sizeof err),
                   EMBER_EIO);
  assert_contains(err, "/nonexistent.dat: cannot open: ");
  assert_int_equal(plf_model_load_paml(DATA, NULL, NULL, &m, err,
                                       sizeof err),
                   EMBER_EIO);
}

/* ---- gamma --------------------------------------------------------------- */
static void test_gamma_rates(void **state) {
  (void)state;
  /* alpha 0.5, 4 categories: PAML's and IQ-TREE's values */
  double r[PLF_MODEL_MAX_GAMMA];
  assert_int_equal(plf_model_gamma_rates(0.5, 4, r), 0);
  const double want[4] = {0.0334, 0.2519, 0.8203, 2.8944};
  for (int i = 0; i < 4; i++) assert_near(r[i], want[i], 5e-5);
  /* alpha 1 is the exponential: boundaries -ln(1 - i/n), and the mean on
   * (a, b) is n((a + 1)e^-a - (b + 1)e^-b) */
  for (int n = 2; n <= 16; n *= 2) {
    assert_int_equal(plf_model_gamma_rates(1.0, n, r), 0);
    for (int i = 0; i < n; i++) {
      double a = -log1p(-(double)i / n);
      double ea = (a + 1) * exp(-a), eb = 0;
      if (i < n - 1) {
        double b = -log1p(-(i + 1.0) / n);
        eb = (b + 1) * exp(-b);
      }
      assert_near(r[i], n * (ea - eb), 1e-12);
    }
  }
  /* any shape: ascending, positive, mean 1 */
  const double alphas[] = {0.02, 0.05, 0.1, 0.3, 2, 10, 100, 1000};
  for (size_t k = 0; k < sizeof alphas / sizeof alphas[0]; k++) {
    for (int n = 1; n <= PLF_MODEL_MAX_GAMMA; n = n * 2 + 1) {
      assert_int_equal(plf_model_gamma_rates(alphas[k], n, r), 0);
      double sum = 0;
      for (int i = 0; i < n; i++) {
        if (!(r[i] >= 0) || (i && !(r[i] > r[i - 1])))
          fail_msg("alpha %g, n %d: rate %d is %g after %g", alphas[k], n, i,
                   r[i], i ? r[i - 1] : 0.0);
        sum += r[i];
      }
      assert_near(sum / n, 1, 1e-12);
    }
  }
  assert_int_equal(plf_model_gamma_rates(0.01, 4, r), EMBER_EINVAL);
  assert_int_equal(plf_model_gamma_rates(1001, 4, r), EMBER_EINVAL);
  assert_int_equal(plf_model_gamma_rates(1, 0, r), EMBER_EINVAL);
  assert_int_equal(plf_model_gamma_rates(1, 65, r), EMBER_EINVAL);
  assert_int_equal(plf_model_gamma_rates(NAN, 4, r), EMBER_EINVAL);
}

static void test_gamma_numerics(void **state) {
  (void)state;
  /* P(1, x) = 1 - e^-x; P(0.5, x) = erf(sqrt(x)) */
  for (double x = 0.01; x < 50; x *= 1.7) {
    assert_near(plf_gamma_p(1, x), -expm1(-x), 1e-14);
    assert_near(plf_gamma_p(0.5, x), erf(sqrt(x)), 1e-14);
  }
  assert_near(plf_gamma_p(3, 0), 0, 0);
  assert_near(plf_gamma_p(3, INFINITY), 1, 0);
  assert_true(isnan(plf_gamma_p(0, 1)));
  /* chi-square with 1 df: the 95% point is 3.841458820694124 */
  assert_near(plf_gamma_quantile(0.5, 0.95), 3.841458820694124 / 2, 1e-13);
  /* quantiles invert P over shapes and probabilities */
  const double shapes[] = {0.02, 0.1, 0.5, 1, 1.5, 7, 80, 1001};
  for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
    for (double p = 0.001; p < 1; p += 0.0615) {
      double x = plf_gamma_quantile(shapes[k], p);
      assert_true(x >= 0 && isfinite(x));
      if (x > 1e-300) assert_near(plf_gamma_p(shapes[k], x), p, 1e-12);
    }
  assert_near(plf_gamma_quantile(1, 0.5), log(2), 1e-14);
  assert_near(plf_gamma_quantile(2, 0), 0, 0);
  assert_true(isinf(plf_gamma_quantile(2, 1)));
  assert_true(isnan(plf_gamma_quantile(2, 1.5)));
}

/* ---- eigen systems and P(t) ---------------------------------------------- */
static const char *const models[] = {
    "JC", "K80{3}", "HKY{2.0}+F{0.3,0.2,0.25,0.25}+G4{0.5}",
    "GTR{1.2,3.9,0.8,1.1,4.5}+F{0.3,0.2,0.25,0.25}+G4{0.5}",
    "GTR{0.01,50,0.2,1,30}+F{0.05,0.45,0.4,0.1}", "LG", "WAG+G4{0.5}",
    ("JTT+F{0.05,0.05,0.05,0.05,0.05,0.05,0.05,0.05,0.05,0.05,0.05,0.05,"
     "0.05,0.05,0.05,0.05,0.05,0.05,0.05,0.05}")};

static void test_eigen(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    plf_model *m = model_ok(models[i], NULL);
    int S = plf_model_states(m);
    const double *E = plf_model_eigenvectors(m);
    const double *Ei = plf_model_inverse_eigenvectors(m);
    const double *l = plf_model_eigenvalues(m);
    const double *R = plf_model_exchangeabilities(m);
    const double *pi = plf_model_freqs(m);
    /* E Einv = I */
    for (int a = 0; a < S; a++)
      for (int b = 0; b < S; b++) {
        double s = 0;
        for (int k = 0; k < S; k++) s += E[a * S + k] * Ei[k * S + b];
        assert_near(s, a == b, 1e-12);
      }
    /* ascending, the last 0, the others negative */
    for (int k = 1; k < S; k++) assert_true(l[k] >= l[k - 1]);
    assert_near(l[S - 1], 0, 1e-12);
    assert_true(l[S - 2] < -1e-6);
    /* E diag(lambda) Einv = Q (Q_ab = R_ab pi_b), with mean rate 1 */
    double mean = 0;
    for (int a = 0; a < S; a++) {
      double diag = 0;
      for (int b = 0; b < S; b++) {
        double q = 0;
        for (int k = 0; k < S; k++) q += E[a * S + k] * l[k] * Ei[k * S + b];
        if (a != b) {
          assert_near(q, R[a * S + b] * pi[b], 1e-12);
          diag += R[a * S + b] * pi[b]; /* Q_aa = -sum of these */
        } else {
          diag += q;
        }
      }
      assert_near(diag, 0, 1e-12);
      for (int b = 0; b < S; b++)
        if (a != b) mean += pi[a] * R[a * S + b] * pi[b];
    }
    assert_near(mean, 1, 1e-12);
    plf_model_destroy(m);
  }
}

static void test_transition(void **state) {
  (void)state;
  double P[400], Q[400], PQ[400];
  const double ts[] = {0, 1e-8, 0.01, 0.1, 0.5, 1, 3, 20};
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    plf_model *m = model_ok(models[i], NULL);
    int S = plf_model_states(m);
    const double *pi = plf_model_freqs(m);
    for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
      double t = ts[k];
      assert_int_equal(plf_model_transition(m, t, P), 0);
      for (int a = 0; a < S; a++) {
        double row = 0;
        for (int b = 0; b < S; b++) {
          row += P[a * S + b];
          assert_true(P[a * S + b] > -1e-13);
          /* reversible: pi_a P_ab = pi_b P_ba */
          assert_near(pi[a] * P[a * S + b], pi[b] * P[b * S + a], 1e-13);
          if (t == 0) assert_near(P[a * S + b], a == b, 1e-13);
        }
        assert_near(row, 1, 1e-12);
      }
    }
    /* Chapman-Kolmogorov: P(0.3) P(0.4) = P(0.7) */
    plf_model_transition(m, 0.3, P);
    plf_model_transition(m, 0.4, Q);
    for (int a = 0; a < S; a++)
      for (int b = 0; b < S; b++) {
        double s = 0;
        for (int k = 0; k < S; k++) s += P[a * S + k] * Q[k * S + b];
        PQ[a * S + b] = s;
      }
    plf_model_transition(m, 0.7, P);
    for (int k = 0; k < S * S; k++) assert_near(PQ[k], P[k], 1e-12);
    /* mean rate 1: sum_a pi_a (1 - P_aa(h)) / h -> 1 */
    double h = 1e-7, rate = 0;
    plf_model_transition(m, h, P);
    for (int a = 0; a < S; a++) rate += pi[a] * (1 - P[a * S + a]) / h;
    assert_near(rate, 1, 1e-5);
    /* at t -> infinity every row is pi */
    plf_model_transition(m, 1e4, P);
    for (int a = 0; a < S; a++)
      for (int b = 0; b < S; b++) assert_near(P[a * S + b], pi[b], 1e-10);
    assert_int_equal(plf_model_transition(m, -1, P), EMBER_EINVAL);
    assert_int_equal(plf_model_transition(m, NAN, P), EMBER_EINVAL);
    assert_int_equal(plf_model_transition(m, INFINITY, P), EMBER_EINVAL);
    assert_int_equal(plf_model_transition(m, 1, NULL), EMBER_EINVAL);
    plf_model_destroy(m);
  }
  /* JC: P_aa = 1/4 + 3/4 e^(-4t/3), P_ab = 1/4 - 1/4 e^(-4t/3) */
  plf_model *m = model_ok("JC", NULL);
  for (double t = 0; t < 5; t += 0.137) {
    plf_model_transition(m, t, P);
    double e = exp(-4 * t / 3);
    for (int a = 0; a < 4; a++)
      for (int b = 0; b < 4; b++)
        assert_near(P[a * 4 + b], a == b ? 0.25 + 0.75 * e : 0.25 - 0.25 * e,
                    1e-14);
  }
  plf_model_destroy(m);
  /* K80{k}: transitions (A<->G, C<->T) at k times the transversion rate;
   * with mean rate 1, P_AG(t) = 1/4 + 1/4 e^(-4bt) - 1/2 e^(-2(k+1)bt),
   * b = 1 / (k + 2) */
  m = model_ok("K80{3}", NULL);
  for (double t = 0; t < 5; t += 0.231) {
    plf_model_transition(m, t, P);
    double k = 3, b = 1 / (k + 2);
    double ts_ = 0.25 + 0.25 * exp(-4 * b * t) - 0.5 * exp(-2 * (k + 1) * b * t);
    double tv = 0.25 - 0.25 * exp(-4 * b * t);
    assert_near(P[0 * 4 + 2], ts_, 1e-14);
    assert_near(P[1 * 4 + 3], ts_, 1e-14);
    assert_near(P[0 * 4 + 1], tv, 1e-14);
    assert_near(P[0 * 4 + 0], 1 - ts_ - 2 * tv, 1e-14);
  }
  plf_model_destroy(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strings),
      cmocka_unit_test(test_defaults_and_alignment),
      cmocka_unit_test(test_plus_i_gamma),
      cmocka_unit_test(test_bad_strings),
      cmocka_unit_test(test_builtin_matrices),
      cmocka_unit_test(test_paml_errors),
      cmocka_unit_test(test_gamma_rates),
      cmocka_unit_test(test_gamma_numerics),
      cmocka_unit_test(test_eigen),
      cmocka_unit_test(test_transition),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
