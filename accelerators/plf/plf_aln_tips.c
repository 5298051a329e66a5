/*
 * plf_aln_tips.c - a taxon's data as BEAGLE takes it: compact states
 * (beagleSetTipStates: 0..S-1, S for missing) or partials
 * (beagleSetTipPartials: S values per pattern, 1 where the state fits).
 */
#include <string.h>

#include "plf_aln_internal.h"

static uint32_t all_states(const plf_alignment *aln) {
  return (1u << aln->states) - 1;
}

int plf_alignment_tip_ambiguous(const plf_alignment *aln, size_t taxon) {
  if (!aln || taxon >= aln->ntaxa) return EMBER_EINVAL;
  uint32_t all = all_states(aln);
  for (size_t p = 0; p < aln->npatterns; p++) {
    uint32_t m = aln->code_mask[aln->codes[p * aln->ntaxa + taxon]];
    if (m != all && (m & (m - 1))) return 1;
  }
  return 0;
}

int plf_alignment_tip_states(const plf_alignment *aln, size_t taxon,
                             int *states) {
  if (!aln || !states || taxon >= aln->ntaxa) return EMBER_EINVAL;
  uint32_t all = all_states(aln);
  for (size_t p = 0; p < aln->npatterns; p++) {
    uint32_t m = aln->code_mask[aln->codes[p * aln->ntaxa + taxon]];
    if (m == all) states[p] = aln->states;
    else if (m & (m - 1)) return EMBER_EINVAL;
    else states[p] = __builtin_ctz(m);
  }
  return 0;
}

int plf_alignment_tip_partials(const plf_alignment *aln, size_t taxon,
                               double *partials) {
  if (!aln || !partials || taxon >= aln->ntaxa) return EMBER_EINVAL;
  int S = aln->states;
  for (size_t p = 0; p < aln->npatterns; p++) {
    uint32_t m = aln->code_mask[aln->codes[p * aln->ntaxa + taxon]];
    double *row = partials + p * (size_t)S;
    for (int s = 0; s < S; s++) row[s] = (m >> s) & 1 ? 1.0 : 0.0;
  }
  return 0;
}
