/*
 * plf_budget_files.c - plf_budget's data set as the files `ember lnl`
 * reads, so that tests/bench/lnl_budget.sh can time the product itself:
 * the simulated alignment (PHYLIP), the tree and its NNI neighbours
 * (Newick, one per line) and the model it was simulated under (IQ-TREE
 * syntax).
 */
#include <stdio.h>
#include <stdlib.h>

#include "plf_budget_files.h"

static const char dna[4] = {'A', 'C', 'G', 'T'};

static int write_alignment(const char *path, int n, int patterns,
                           const int *states) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fprintf(f, "%d %d\n", n, patterns);
  for (int i = 0; i < n; i++) {
    fprintf(f, "t%d ", i);
    for (int p = 0; p < patterns; p++)
      fputc(dna[states[(size_t)i * (size_t)patterns + (size_t)p] & 3], f);
    fputc('\n', f);
  }
  return fclose(f);
}

/* The subtree below node in Newick (recursion as deep as the tree: a Yule
 * tree of a few thousand taxa is some tens of levels). */
static void write_subtree(FILE *f, const plf_tree *t, int node) {
  int a = plf_tree_child(t, node, 0), b = plf_tree_child(t, node, 1);
  if (a == PLF_NONE) {
    fprintf(f, "t%d", node);
  } else {
    fputc('(', f);
    write_subtree(f, t, a);
    fputc(',', f);
    write_subtree(f, t, b);
    fputc(')', f);
  }
  if (node != plf_tree_root(t)) fprintf(f, ":%.17g", plf_tree_length(t, node));
}

/* An unrooted tree as its trifurcation (A,B,C), the form it was read from;
 * a rooted one as it is. */
static void write_tree(FILE *f, const plf_tree *t) {
  int root = plf_tree_root(t);
  if (plf_tree_is_unrooted(t)) {
    int ab = plf_tree_child(t, root, 0), c = plf_tree_child(t, root, 1);
    fputc('(', f);
    write_subtree(f, t, plf_tree_child(t, ab, 0));
    fputc(',', f);
    write_subtree(f, t, plf_tree_child(t, ab, 1));
    fputc(',', f);
    write_subtree(f, t, c);
    fputs(");\n", f);
  } else {
    write_subtree(f, t, root);
    fputs(";\n", f);
  }
}

/* GTR's exchangeabilities from Q = E diag(eval) E^-1: x_ij = Q_ij / pi_j,
 * relative to G<->T as IQ-TREE writes them. */
static void write_model(FILE *f, const ph_model *m, double alpha) {
  double q[16];
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 4; j++) {
      double s = 0;
      for (int k = 0; k < 4; k++)
        s += m->evec[4 * i + k] * m->eval[k] * m->ivec[4 * k + j];
      q[4 * i + j] = s;
    }
  double gt = q[4 * 2 + 3] / m->freqs[3];
  static const int pairs[5][2] = {{0, 1}, {0, 2}, {0, 3}, {1, 2}, {1, 3}};
  fputs("GTR{", f);
  for (int k = 0; k < 5; k++)
    fprintf(f, "%s%.10g", k ? "," : "",
            q[4 * pairs[k][0] + pairs[k][1]] / m->freqs[pairs[k][1]] / gt);
  fprintf(f, "}+F{%.10g,%.10g,%.10g,%.10g}+G4{%g}\n", m->freqs[0],
          m->freqs[1], m->freqs[2], m->freqs[3], alpha);
}

int pb_budget_write_files(const char *dir, int n, int patterns,
                          const int *states, plf_tree *const *trees,
                          int count, const ph_model *m, double alpha) {
  char path[4096];
  snprintf(path, sizeof path, "%s/budget.phy", dir);
  if (write_alignment(path, n, patterns, states) != 0) return -1;
  snprintf(path, sizeof path, "%s/budget.trees", dir);
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  for (int i = 0; i < count; i++) write_tree(f, trees[i]);
  if (fclose(f) != 0) return -1;
  snprintf(path, sizeof path, "%s/budget.model", dir);
  if (!(f = fopen(path, "w"))) return -1;
  write_model(f, m, alpha);
  return fclose(f);
}
