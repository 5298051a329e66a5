/*
 * plf_traversal_data.h - the data sets of plf_vs_beagle's traversals, as
 * both BEAGLE and ember's executor take them: a tree, DNA tip states
 * (compact, taxon-major), pattern weights and a GTR+G4 model with its eigen
 * system (tests/unit's plf_tree_harness ph_model). Kept apart from
 * plf_traversal.c because ember's alignment reader and its state-block
 * layout each define PLF_MAX_STATES.
 */
#ifndef EMBER_PLF_TRAVERSAL_DATA_H
#define EMBER_PLF_TRAVERSAL_DATA_H

#include <stdint.h>

#include "plf_tree_harness.h"

typedef struct pb_tdata {
  char name[96];
  int taxa, patterns, sites;
  plf_tree *tree;            /* owned */
  int *states;               /* taxa x patterns; 4: missing */
  double *weights;           /* patterns */
  ph_model model;
  int ambiguous;             /* partial ambiguity codes read as missing */
  double reference_lnl;      /* tests/data/plf's, or 0: none */
} pb_tdata;

/* pb_tdata_simulate: a Yule-Harding tree of taxa taxa (branch lengths
 * exponential, mean 0.05) and patterns sites simulated along it under
 * GTR (random exchangeabilities and frequencies) + G4 (alpha 0.5, mean
 * rates), every weight 1. Returns 0, or -1 after a message. */
int pb_tdata_simulate(int taxa, int patterns, uint64_t seed, pb_tdata *d);

/* pb_tdata_read: an alignment and its tree read with ember's readers
 * (plf_alignment_read, plf_newick_read_file), the model parsed by
 * plf_model_parse from an IQ-TREE string; reference: the lnL to print
 * beside (0: none). Returns 0, or -1 after a message. */
int pb_tdata_read(const char *alignment, const char *tree, const char *model,
                  double reference, pb_tdata *d);

/* pb_tdata_free: frees what d holds. */
void pb_tdata_free(pb_tdata *d);

#endif
