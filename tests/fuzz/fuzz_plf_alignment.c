/*
 * fuzz_plf_alignment.c - libFuzzer target for the plf alignment readers
 * (accelerators/plf: PHYLIP, FASTA, NEXUS, the builder, pattern
 * compression, tips, frequencies).
 *
 * The first byte picks the format and data type asked for (so that every
 * reader sees every input), the rest is the file. A failure must leave no
 * alignment and say "fuzz:..." why; a success must keep the header's
 * promises: taxa and sites within the limits, names non-empty, short,
 * unique and found again, patterns no more than sites, weights summing to
 * the sites, the site map inside the patterns, masks non-empty subsets of
 * the states, tip states and partials agreeing with the masks, empirical
 * frequencies positive and summing to 1.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "plf_alignment.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const plf_alignment *a) {
  size_t nt = plf_alignment_taxa(a), ns = plf_alignment_sites(a);
  size_t np = plf_alignment_patterns(a);
  int S = plf_alignment_states(a);
  if (nt < 1 || nt > PLF_ALN_MAX_TAXA || ns < 1 || ns > PLF_ALN_MAX_SITES ||
      np < 1 || np > ns || (S != 4 && S != 20))
    abort();
  for (size_t t = 0; t < nt; t++) {
    const char *name = plf_alignment_name(a, t);
    size_t found = nt;
    if (!name || !name[0] || strlen(name) > PLF_ALN_MAX_NAME ||
        plf_alignment_find(a, name, &found) != 0 || found != t)
      abort();
  }
  double total = 0;
  for (size_t p = 0; p < np; p++) total += plf_alignment_weights(a)[p];
  if (total != (double)ns) abort();
  for (size_t s = 0; s < ns; s++)
    if (plf_alignment_site_patterns(a)[s] >= np) abort();
  uint32_t all = (1u << S) - 1;
  int *states = malloc(np * sizeof *states);
  double *partials = malloc(np * (size_t)S * sizeof *partials);
  if (!states || !partials) abort();
  for (size_t t = 0; t < nt && t < 8; t++) {
    int amb = plf_alignment_tip_ambiguous(a, t);
    int rc = plf_alignment_tip_states(a, t, states);
    if ((amb == 1) != (rc != 0)) abort();
    if (plf_alignment_tip_partials(a, t, partials) != 0) abort();
    for (size_t p = 0; p < np; p++) {
      uint32_t m = plf_alignment_mask(a, t, p);
      if (m == 0 || (m & ~all)) abort();
      if (rc == 0 && !(m == all ? states[p] == S : m == 1u << states[p]))
        abort();
      for (int s = 0; s < S; s++)
        if (partials[p * (size_t)S + s] != (double)((m >> s) & 1)) abort();
    }
  }
  free(states);
  free(partials);
  double f[PLF_MAX_STATES], sum = 0;
  if (plf_alignment_empirical_freqs(a, f) != 0) abort();
  for (int s = 0; s < S; s++) {
    if (!(f[s] > 0)) abort();
    sum += f[s];
  }
  if (fabs(sum - 1) > 1e-9) abort();
  double c = plf_alignment_constant_fraction(a);
  if (!(c >= 0 && c <= 1)) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  plf_format format = (plf_format)(data[0] % 5);
  plf_datatype type = (plf_datatype)((data[0] / 5) % 3);
  plf_alignment *a = NULL;
  char err[512] = "";
  int rc = plf_alignment_parse(data + 1, size - 1, "fuzz", format, type, &a,
                               err, sizeof err);
  if (rc != 0) {
    if (a != NULL || strncmp(err, "fuzz", 4) != 0) abort();
    if (rc != EMBER_EFORMAT && rc != EMBER_ETOOBIG && rc != EMBER_ENOMEM)
      abort();
    return 0;
  }
  if (!a) abort();
  check(a);
  plf_alignment_destroy(a);
  return 0;
}
