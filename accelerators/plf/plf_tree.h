/*
 * plf_tree.h - phylogenetic trees for the plf accelerator: a binary tree
 * over n taxa, its builder, the Newick reader and NNI neighbours.
 *
 * Nodes. A tree over n taxa (2 <= n <= PLF_TREE_MAX_TIPS) has 2n-1 nodes:
 * ids 0..n-1 are the tips, tip i being taxon i of the taxon list the tree
 * was read against (the same index as BEAGLE's tip buffer i); ids
 * n..2n-2 are the n-1 internal nodes, numbered in the order they were made.
 * Every node but the root has a branch to its parent, whose length is
 * plf_tree_length(node); the root has none.
 *
 * Unrooted trees. A trifurcating root ("(A,B,C);" in Newick) is held as
 * BEAGLE users hold it: the tree is rooted at that node, which is made
 * binary by an extra internal node joining the first two subtrees with a
 * zero-length branch, ((A,B):0,C). plf_tree_is_unrooted() says so; the
 * extra node is the root's first child. Both forms give the same
 * likelihood.
 *
 * No function here recurses: trees as deep as they are wide (caterpillars
 * of PLF_TREE_MAX_TIPS taxa) are handled with heap memory only.
 *
 * Thread safety: functions that take a const tree may run concurrently on
 * the same tree; anything that changes a tree needs exclusive access.
 * Functions return 0 (or a value >= 0 where said) or a negative EMBER_E*
 * (ember/ember_errors.h).
 */
#ifndef EMBER_PLF_TREE_H
#define EMBER_PLF_TREE_H

#include <stddef.h>

#define PLF_NONE (-1)                  /* no node, no buffer */
#define PLF_TREE_MAX_TIPS (1 << 20)    /* taxa in a tree, hence depth too */

typedef struct plf_tree plf_tree;

/* ---- building ----------------------------------------------------------- */

/* plf_tree_create: an empty tree over tip_count taxa: the tips exist, no
 * internal node yet. *out is owned by the caller (plf_tree_destroy).
 * Returns 0, EMBER_EPARAM (tip_count outside [2, PLF_TREE_MAX_TIPS]) or
 * EMBER_ENOMEM. */
int plf_tree_create(int tip_count, plf_tree **out);

/* plf_tree_destroy: frees t; NULL is a no-op. */
void plf_tree_destroy(plf_tree *t);

/* plf_tree_join: a new internal node whose children are child1 and child2,
 * two distinct existing nodes without a parent, with the lengths of their
 * branches (finite, >= 0). When this leaves a single node without a
 * parent, the tree is complete and rooted there.
 * Returns the new node's id (>= tip_count) or EMBER_EPARAM. */
int plf_tree_join(plf_tree *t, int child1, double length1, int child2,
                  double length2);

/* plf_tree_join3: completes t as an unrooted tree whose trifurcating root
 * has the subtrees a, b and c, the last three nodes without a parent: makes
 * ((a,b):0,c) (see above). Returns the root's id or EMBER_EPARAM (other
 * nodes still without a parent, a bad id or length). */
int plf_tree_join3(plf_tree *t, int a, double length_a, int b,
                   double length_b, int c, double length_c);

/* plf_tree_set_length: sets the length of node's branch (not the root's;
 * finite, >= 0). Returns 0 or EMBER_EPARAM. */
int plf_tree_set_length(plf_tree *t, int node, double length);

/* plf_tree_copy: a new tree equal to src (complete or not); *out is owned
 * by the caller. Returns 0 or EMBER_ENOMEM. */
int plf_tree_copy(const plf_tree *src, plf_tree **out);

/* plf_tree_assign: makes dst equal to src, both over the same number of
 * taxa, without allocating. Returns 0 or EMBER_EPARAM. */
int plf_tree_assign(plf_tree *dst, const plf_tree *src);

/* ---- reading ------------------------------------------------------------ */

int plf_tree_tip_count(const plf_tree *t);

/* plf_tree_node_count: nodes made so far; 2 * tip_count - 1 once complete. */
int plf_tree_node_count(const plf_tree *t);

/* plf_tree_is_complete: 1 when every node but the root has a parent. */
int plf_tree_is_complete(const plf_tree *t);

/* plf_tree_root: the root's id, PLF_NONE while the tree is incomplete. */
int plf_tree_root(const plf_tree *t);

/* plf_tree_is_unrooted: 1 for a tree completed by plf_tree_join3. */
int plf_tree_is_unrooted(const plf_tree *t);

/* plf_tree_parent, plf_tree_child (which: 0 or 1), plf_tree_length: the
 * node's parent (PLF_NONE for the root or a node not yet joined), children
 * (PLF_NONE for a tip), branch length (0 for the root). A bad id gives
 * PLF_NONE (length: 0). */
int plf_tree_parent(const plf_tree *t, int node);
int plf_tree_child(const plf_tree *t, int node, int which);
double plf_tree_length(const plf_tree *t, int node);

/* plf_tree_bottom_up: writes the 2n-1 node ids of a complete tree to order
 * (2n-1 ints) so that every node comes after its children; the root is
 * last. Returns 0 or EMBER_EPARAM (incomplete tree). */
int plf_tree_bottom_up(const plf_tree *t, int *order);

/* ---- NNI neighbours ----------------------------------------------------- */

/* plf_nni_count: the number of NNI neighbours of an unrooted tree, 2(n-3):
 * two for each of its n-3 internal branches. Returns it, or EMBER_EPARAM
 * when t is incomplete or not unrooted (a rooted tree has none here). */
int plf_nni_count(const plf_tree *t);

/* plf_nni_neighbour: writes neighbour index (0 <= index < plf_nni_count)
 * of t into out, a tree over as many taxa (its previous content is
 * replaced; no allocation). Across the branch between internal node v and
 * its neighbour p, with subtrees A, B on v's side and C, D on p's side
 * (AB|CD), neighbour 2k is AC|BD and 2k+1 is AD|BC for the k-th internal
 * branch, branches taken in postorder from the root: consecutive
 * neighbours change nearby branches, which is what a planner's cache with
 * a small budget likes best. O(n) per call. Subtrees keep their branch lengths, the middle branch keeps its
 * own, and the root stays where it was, so that all subtrees away from the
 * branch are the same as in t (what plf_planner's cache reuses).
 * Returns 0 or EMBER_EPARAM. */
int plf_nni_neighbour(const plf_tree *t, int index, plf_tree *out);

/* ---- Newick ------------------------------------------------------------- */

#define PLF_NEWICK_MAX_BYTES ((size_t)256 << 20) /* a file */
#define PLF_NEWICK_MAX_NAME 1024                 /* bytes of a name */
#define PLF_NEWICK_MAX_TREES 100000              /* trees in a file */

/* plf_newick_parse: reads the trees in text (len bytes, no terminator
 * needed), one tree per line ending with ';'; blank lines are skipped.
 * Names are unquoted (no blanks or ()[]':;,) or single-quoted ('' is a
 * quote); underscores are kept as they are. Comments [..] may come between
 * tokens. Every branch needs a length (":0.1"; finite, >= 0), except the
 * root's, which is ignored when present; internal node labels (support
 * values) are read and ignored. A root with two children gives a rooted
 * tree, one with three an unrooted tree; every other internal node has two.
 *
 * Tips are matched by name, exactly, to taxa (taxon_count distinct names,
 * at most PLF_TREE_MAX_TIPS): each tree has each taxon exactly once.
 *
 * source names the text in messages: err gets "source:line: reason" for
 * every malformed tree (the first one stops the reading). On success
 * *trees is an array of *tree_count >= 1 trees, owned by the caller
 * (plf_trees_destroy). Returns 0, EMBER_EPARAM (taxa: duplicates, empty
 * names, too many), EMBER_EFORMAT or EMBER_ENOMEM. Thread-safe. */
int plf_newick_parse(const char *text, size_t len, const char *source,
                     const char *const *taxa, int taxon_count,
                     plf_tree ***trees, int *tree_count, char *err,
                     size_t err_len);

/* plf_newick_read_file: plf_newick_parse on the file at path (at most
 * PLF_NEWICK_MAX_BYTES), with path as the source. Also returns EMBER_EIO
 * (cannot read) or EMBER_ETOOBIG. */
int plf_newick_read_file(const char *path, const char *const *taxa,
                         int taxon_count, plf_tree ***trees, int *tree_count,
                         char *err, size_t err_len);

/* plf_trees_destroy: frees the count trees of an array from plf_newick_*
 * and the array; NULL is a no-op. */
void plf_trees_destroy(plf_tree **trees, int count);

#endif
