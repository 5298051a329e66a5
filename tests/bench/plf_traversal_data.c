/* plf_traversal_data.c - the traversals' data sets (plf_traversal_data.h):
 * simulated with tests/unit's plf_tree_harness, or read with the plf
 * accelerator's readers. */
#include "plf_traversal_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plf_alignment.h"
#include "plf_model.h"

int pb_tdata_simulate(int taxa, int patterns, uint64_t seed, pb_tdata *d) {
  memset(d, 0, sizeof *d);
  snprintf(d->name, sizeof d->name, "simulated %d x %d", taxa, patterns);
  d->taxa = taxa;
  d->patterns = d->sites = patterns;
  ph_rng r = {seed};
  double rates[4];
  d->states = malloc((size_t)taxa * (size_t)patterns * sizeof *d->states);
  d->weights = malloc((size_t)patterns * sizeof *d->weights);
  if (!d->states || !d->weights ||
      plf_model_gamma_rates(0.5, 4, rates) != 0 ||
      ph_random_tree(taxa, 1, 0.05, &r, &d->tree) != 0 ||
      ph_model_gtr(&d->model, 4, rates, &r) != 0 ||
      ph_simulate(d->tree, &d->model, patterns, &r, d->states) != 0) {
    fprintf(stderr, "plf_vs_beagle: cannot simulate %s\n", d->name);
    pb_tdata_free(d);
    return -1;
  }
  for (int p = 0; p < patterns; p++) d->weights[p] = 1.0;
  return 0;
}

/* taxon i's states: partials with one state are that state, any other set
 * (all states: missing; 2 or 3: a partial ambiguity) is missing (4) */
static int tip_states(const plf_alignment *aln, size_t i, int P, int *out,
                      double *partials, int *ambiguous) {
  if (plf_alignment_tip_partials(aln, i, partials) != 0) return -1;
  for (int p = 0; p < P; p++) {
    int n = 0, s = 4;
    for (int k = 0; k < 4; k++)
      if (partials[4 * p + k] != 0) n++, s = k;
    out[p] = n == 1 ? s : 4;
    if (n > 1 && n < 4) (*ambiguous)++;
  }
  return 0;
}

int pb_tdata_read(const char *alignment, const char *tree, const char *model,
                  double reference, pb_tdata *d) {
  memset(d, 0, sizeof *d);
  char err[512] = "";
  plf_alignment *aln = NULL;
  plf_model *m = NULL;
  plf_tree **trees = NULL;
  const char **names = NULL;
  double *partials = NULL;
  int ntrees = 0, rc = -1;
  if (plf_alignment_read(alignment, PLF_FORMAT_AUTO, PLF_DATA_DNA, &aln, err,
                         sizeof err) != 0 ||
      plf_model_parse(model, aln, &m, err, sizeof err) != 0)
    goto out;
  const char *base = strrchr(alignment, '/');
  snprintf(d->name, sizeof d->name, "%s", base ? base + 1 : alignment);
  d->taxa = (int)plf_alignment_taxa(aln);
  d->patterns = (int)plf_alignment_patterns(aln);
  d->sites = (int)plf_alignment_sites(aln);
  d->reference_lnl = reference;
  int P = d->patterns, C = (int)plf_model_categories(m);
  if (C > PH_MAX_CATS || plf_model_states(m) != 4) {
    snprintf(err, sizeof err, "model '%s': %d categories, %d states", model,
             C, plf_model_states(m));
    goto out;
  }
  names = malloc((size_t)d->taxa * sizeof *names);
  partials = malloc((size_t)P * 4 * sizeof *partials);
  d->states = malloc((size_t)d->taxa * (size_t)P * sizeof *d->states);
  d->weights = malloc((size_t)P * sizeof *d->weights);
  if (!names || !partials || !d->states || !d->weights) {
    snprintf(err, sizeof err, "out of memory");
    goto out;
  }
  for (int i = 0; i < d->taxa; i++) {
    names[i] = plf_alignment_name(aln, (size_t)i);
    if (tip_states(aln, (size_t)i, P, d->states + (size_t)i * (size_t)P,
                   partials, &d->ambiguous) != 0) {
      snprintf(err, sizeof err, "%s: taxon %d's partials", alignment, i);
      goto out;
    }
  }
  memcpy(d->weights, plf_alignment_weights(aln), (size_t)P * sizeof(double));
  if (plf_newick_read_file(tree, names, d->taxa, &trees, &ntrees, err,
                           sizeof err) != 0)
    goto out;
  d->tree = trees[0];
  trees[0] = NULL;
  ph_model *pm = &d->model;
  memset(pm, 0, sizeof *pm);
  pm->cats = C;
  memcpy(pm->rates, plf_model_category_rates(m), (size_t)C * sizeof(double));
  memcpy(pm->weights, plf_model_category_weights(m),
         (size_t)C * sizeof(double));
  memcpy(pm->freqs, plf_model_freqs(m), sizeof pm->freqs);
  memcpy(pm->evec, plf_model_eigenvectors(m), sizeof pm->evec);
  memcpy(pm->ivec, plf_model_inverse_eigenvectors(m), sizeof pm->ivec);
  memcpy(pm->eval, plf_model_eigenvalues(m), sizeof pm->eval);
  rc = 0;
out:
  if (rc) {
    fprintf(stderr, "plf_vs_beagle: %s\n", err[0] ? err : "cannot read");
    pb_tdata_free(d);
  }
  plf_trees_destroy(trees, ntrees);
  free(names);
  free(partials);
  plf_model_destroy(m);
  plf_alignment_destroy(aln);
  return rc;
}

void pb_tdata_free(pb_tdata *d) {
  plf_tree_destroy(d->tree);
  free(d->states);
  free(d->weights);
  memset(d, 0, sizeof *d);
}
