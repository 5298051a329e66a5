/*
 * plf_aln_patterns.c - compress identical columns into weighted patterns,
 * in the order of their first occurrence. Columns are hashed row by row (so
 * the rows are read in order), then looked up in an open-addressing table;
 * equal hashes are confirmed column against column.
 */
#include <stdlib.h>
#include <string.h>

#include "plf_aln_internal.h"

static int same_column(uint8_t *const *rows, size_t ntaxa, size_t a,
                       size_t b) {
  for (size_t t = 0; t < ntaxa; t++)
    if (rows[t][a] != rows[t][b]) return 0;
  return 1;
}

int plf_aln_compress(plf_alignment *aln, uint8_t *const *rows) {
  size_t n = aln->nsites, ntaxa = aln->ntaxa;
  /* n <= PLF_ALN_MAX_SITES (2^24): every size below fits easily */
  size_t slots = 16;
  while (slots < 2 * n) slots *= 2;
  uint64_t *hash = malloc(n * sizeof *hash);
  uint32_t *table = calloc(slots, sizeof *table);
  uint32_t *first = malloc(n * sizeof *first);
  uint32_t *count = malloc(n * sizeof *count);
  aln->site_pattern = malloc(n * sizeof *aln->site_pattern);
  int rc = EMBER_ENOMEM;
  if (!hash || !table || !first || !count || !aln->site_pattern) goto out;

  for (size_t s = 0; s < n; s++) hash[s] = 0xcbf29ce484222325ull;
  for (size_t t = 0; t < ntaxa; t++) {
    const uint8_t *row = rows[t];
    for (size_t s = 0; s < n; s++)
      hash[s] = (hash[s] ^ row[s]) * 0x100000001b3ull;
  }
  size_t np = 0;
  for (size_t s = 0; s < n; s++) {
    uint64_t h = hash[s] ^ (hash[s] >> 29);
    size_t i = (size_t)h & (slots - 1);
    for (;;) {
      uint32_t slot = table[i];
      if (slot == 0) {
        table[i] = (uint32_t)np + 1;
        first[np] = (uint32_t)s;
        count[np] = 1;
        aln->site_pattern[s] = (uint32_t)np++;
        break;
      }
      uint32_t p = slot - 1;
      if (hash[first[p]] == hash[s] && same_column(rows, ntaxa, first[p], s)) {
        count[p]++;
        aln->site_pattern[s] = p;
        break;
      }
      i = (i + 1) & (slots - 1);
    }
  }

  aln->npatterns = np;
  aln->weights = malloc(np * sizeof *aln->weights);
  aln->codes = malloc(np * ntaxa);
  if (!aln->weights || !aln->codes) goto out;
  for (size_t p = 0; p < np; p++) {
    aln->weights[p] = count[p];
    uint8_t *col = aln->codes + p * ntaxa;
    for (size_t t = 0; t < ntaxa; t++) col[t] = rows[t][first[p]];
  }
  rc = 0;
out:
  free(hash);
  free(table);
  free(first);
  free(count);
  return rc;
}
