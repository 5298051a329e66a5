/*
 * fuzz_plf_model.c - libFuzzer target for the plf model parser
 * (accelerators/plf: IQ-TREE model strings, PAML rate files, gamma rates,
 * the eigen system).
 *
 * The first byte picks what the rest is: a model string, with no
 * alignment, a DNA one or a protein one; or a PAML rate file, its text up
 * to a NUL and modifiers after it. A failure must leave no model and say
 * why; a success must give frequencies (positive, summing to 1), category
 * weights summing to 1 with a mean rate of 1, and transition matrices
 * whose rows sum to 1.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plf_alignment.h"
#include "plf_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static plf_alignment *alignment(const char *text) {
  plf_alignment *a = NULL;
  char err[256];
  if (plf_alignment_parse(text, strlen(text), "fixed", PLF_FORMAT_AUTO,
                          PLF_DATA_AUTO, &a, err, sizeof err))
    abort();
  return a;
}

static void check(const plf_model *m) {
  int S = plf_model_states(m);
  if (S != 4 && S != 20) abort();
  double fs = 0, ws = 0, mean = 0;
  for (int s = 0; s < S; s++) {
    if (!(plf_model_freqs(m)[s] > 0)) abort();
    fs += plf_model_freqs(m)[s];
  }
  size_t nc = plf_model_categories(m);
  if (nc < 1 || nc > PLF_MODEL_MAX_CATEGORIES) abort();
  for (size_t c = 0; c < nc; c++) {
    double r = plf_model_category_rates(m)[c];
    double w = plf_model_category_weights(m)[c];
    if (!(r >= 0 && w > 0 && isfinite(r))) abort();
    ws += w;
    mean += w * r;
  }
  if (fabs(fs - 1) > 1e-9 || fabs(ws - 1) > 1e-9 || fabs(mean - 1) > 1e-9)
    abort();
  double P[PLF_MAX_STATES * PLF_MAX_STATES];
  const double ts[] = {0, 0.1, 2};
  for (int k = 0; k < 3; k++) {
    if (plf_model_transition(m, ts[k], P) != 0) abort();
    for (int a = 0; a < S; a++) {
      double row = 0;
      for (int b = 0; b < S; b++) row += P[a * S + b];
      if (!(fabs(row - 1) < 1e-6)) abort();
    }
  }
  if (!plf_model_name(m)[0]) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static plf_alignment *dna, *protein;
  if (!dna) {
    dna = alignment(">a\nACGTRACGTN\n>b\nACGTAACG-T\n>c\nACCTAACGTT\n");
    protein = alignment(">a\nARNDCQEGHILKMFPSTWYVBZX\n"
                        ">b\nARNDCQEGHILKMFPSTWYVBZJ\n");
  }
  if (size < 1 || size > 2 * PLF_MODEL_MAX_SPEC) return 0;
  int mode = data[0] % 4;
  char *text = malloc(size);
  if (!text) return 0;
  memcpy(text, data + 1, size - 1);
  text[size - 1] = '\0';
  plf_model *m = NULL;
  char err[512] = "";
  int rc;
  if (mode < 3) {
    const plf_alignment *aln = mode == 0 ? NULL : mode == 1 ? dna : protein;
    rc = plf_model_parse(text, aln, &m, err, sizeof err);
    if (rc && strlen(text) <= PLF_MODEL_MAX_SPEC &&
        strncmp(err, "model '", 7) != 0)
      abort();
  } else {
    size_t len = strlen(text);
    const char *mods = len + 1 < size - 1 ? text + len + 1 : "";
    rc = plf_model_parse_paml(text, len, "fuzz", mods, NULL, &m, err,
                              sizeof err);
    if (rc && strncmp(err, "fuzz", 4) != 0 && strncmp(err, "model '", 7) != 0)
      abort();
  }
  if (rc) {
    if (m || !err[0]) abort();
  } else {
    if (!m) abort();
    check(m);
    plf_model_destroy(m);
  }
  free(text);
  return 0;
}
