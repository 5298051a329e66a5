/*
 * plf_budget_files.h - plf_budget's data set written for `ember lnl`.
 */
#ifndef EMBER_BENCH_PLF_BUDGET_FILES_H
#define EMBER_BENCH_PLF_BUDGET_FILES_H

#include "plf_tree_harness.h"

/* pb_budget_write_files - DIR/budget.phy (taxa t0..t{n-1}, states
 * taxon-major), DIR/budget.trees (the count trees, one Newick per line)
 * and DIR/budget.model (m as an IQ-TREE string, +G4{alpha}). Returns 0 or
 * -1 (errno says why). */
int pb_budget_write_files(const char *dir, int n, int patterns,
                          const int *states, plf_tree *const *trees,
                          int count, const ph_model *m, double alpha);

#endif
