/*
 * plf_nni.c - NNI neighbours of an unrooted tree.
 *
 * The internal branches of the unrooted tree are the branches above the
 * internal nodes other than the root and the zero-length node that makes
 * the trifurcating root binary (plf_tree.h). Across the branch above v,
 * v's children are A and B, and on the other side hang its sibling C and
 * the rest of the tree D. Both neighbours swap a child of v with C, so the
 * root and every subtree away from the branch stay as they were. When v is
 * the root's second child its sibling is the zero-length node, which is not
 * a subtree of the unrooted tree: C is then that node's first child.
 */
#include "ember/ember_errors.h"
#include "plf_tree_internal.h"

static int extra_node(const plf_tree *t) {
  return t->child[2 * t->root]; /* the zero-length node (unrooted only) */
}

int plf_nni_count(const plf_tree *t) {
  if (!t || t->root == PLF_NONE || !t->unrooted) return EMBER_EPARAM;
  return 2 * (t->tips - 3);
}

/* branch_node: the internal node below the k-th internal branch, the
 * branches taken in postorder (children before parents, first child
 * first), walked with parent links: no stack, no recursion */
static int branch_node(const plf_tree *t, int k) {
  int x = extra_node(t), prev = PLF_NONE, v = t->root;
  while (v != PLF_NONE) {
    int next;
    if (prev == t->parent[v] && v >= t->tips) {
      next = t->child[2 * v]; /* down into the first child */
    } else if (v >= t->tips && prev == t->child[2 * v]) {
      next = t->child[2 * v + 1];
    } else { /* a tip, or back from the second child: visit */
      if (v >= t->tips && v != t->root && v != x && k-- == 0) return v;
      next = t->parent[v];
    }
    prev = v;
    v = next;
  }
  return PLF_NONE;
}

static void swap_subtrees(plf_tree *t, int v, int vpos, int s) {
  int sp = t->parent[s];
  int spos = t->child[2 * sp] == s ? 0 : 1;
  int b = t->child[2 * v + vpos];
  t->child[2 * v + vpos] = s;
  t->parent[s] = v;
  t->child[2 * sp + spos] = b;
  t->parent[b] = sp;
}

int plf_nni_neighbour(const plf_tree *t, int index, plf_tree *out) {
  int count = plf_nni_count(t);
  if (count < 0 || index < 0 || index >= count || !out ||
      plf_tree_assign(out, t) != 0)
    return EMBER_EPARAM;
  int v = branch_node(out, index / 2);
  if (v == PLF_NONE) return EMBER_EINTERNAL;
  int p = out->parent[v];
  int s = out->child[2 * p] == v ? out->child[2 * p + 1] : out->child[2 * p];
  if (s == extra_node(out)) s = out->child[2 * s];
  /* neighbour 2k swaps B (v's second child) with C: AC|BD; 2k+1 swaps A */
  swap_subtrees(out, v, index % 2 == 0 ? 1 : 0, s);
  return 0;
}
