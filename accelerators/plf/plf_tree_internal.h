/*
 * plf_tree_internal.h - the layout of plf_tree, for the files of the tree
 * side (plf_tree.c, plf_nni.c, plf_plan.c); everything else goes through
 * plf_tree.h.
 */
#ifndef EMBER_PLF_TREE_INTERNAL_H
#define EMBER_PLF_TREE_INTERNAL_H

#include "plf_tree.h"

struct plf_tree {
  int tips;      /* n */
  int nodes;     /* made so far: n .. 2n-1 */
  int open;      /* nodes without a parent */
  int root;      /* PLF_NONE until complete */
  int unrooted;  /* completed by plf_tree_join3 */
  int *parent;   /* [2n-1] */
  int *child;    /* [2 * (2n-1)]: child[2v], child[2v+1]; PLF_NONE for tips */
  double *length; /* [2n-1]: the branch above the node */
};

#endif
