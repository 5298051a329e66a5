/*
 * plf_aln_freqs.c - empirical state frequencies of an alignment (the "+F"
 * of a model string). Unambiguous characters count one; an ambiguity code
 * is shared among its states in proportion to the current estimate,
 * repeated until the estimate settles (an EM for the frequencies); missing
 * data counts nothing. Frequencies under 1e-4 are raised to 1e-4, the
 * largest paying for them, as IQ-TREE does, so that every state keeps a
 * positive frequency (the eigen decomposition divides by their roots).
 */
#include <math.h>
#include <string.h>

#include "plf_aln_internal.h"

#define MIN_FREQ 1e-4
#define MAX_ROUNDS 200

int plf_alignment_empirical_freqs(const plf_alignment *aln, double *freqs) {
  if (!aln || !freqs) return EMBER_EINVAL;
  int S = aln->states;
  uint32_t all = (1u << S) - 1;
  double cur[PLF_MAX_STATES], next[PLF_MAX_STATES];
  for (int s = 0; s < S; s++) cur[s] = 1.0 / S;
  for (int round = 0; round < MAX_ROUNDS; round++) {
    memset(next, 0, sizeof next);
    double total = 0;
    for (size_t p = 0; p < aln->npatterns; p++) {
      const uint8_t *col = aln->codes + p * aln->ntaxa;
      double w = aln->weights[p];
      for (size_t t = 0; t < aln->ntaxa; t++) {
        uint32_t m = aln->code_mask[col[t]];
        if (m == all) continue;
        double sum = 0;
        for (int s = 0; s < S; s++)
          if (m >> s & 1) sum += cur[s];
        int k = __builtin_popcount(m);
        for (int s = 0; s < S; s++)
          if (m >> s & 1) next[s] += w * (sum > 0 ? cur[s] / sum : 1.0 / k);
        total += w;
      }
    }
    if (total == 0) break; /* nothing but missing data: stay uniform */
    double change = 0;
    for (int s = 0; s < S; s++) {
      next[s] /= total;
      change = fmax(change, fabs(next[s] - cur[s]));
      cur[s] = next[s];
    }
    if (change < 1e-12) break;
  }
  int max = 0;
  double sum = 0;
  for (int s = 0; s < S; s++) {
    if (cur[s] < MIN_FREQ) cur[s] = MIN_FREQ;
    if (cur[s] > cur[max]) max = s;
    sum += cur[s];
  }
  cur[max] += 1.0 - sum;
  memcpy(freqs, cur, (size_t)S * sizeof *freqs);
  return 0;
}
