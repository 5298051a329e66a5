/*
 * plf_tree.c - the tree: building by joins, copying, reading, a
 * bottom-up order without recursion.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "plf_tree_internal.h"

int plf_tree_create(int tip_count, plf_tree **out) {
  if (!out) return EMBER_EPARAM;
  *out = NULL;
  if (tip_count < 2 || tip_count > PLF_TREE_MAX_TIPS) return EMBER_EPARAM;
  size_t total = 2 * (size_t)tip_count - 1;
  plf_tree *t = calloc(1, sizeof *t);
  if (!t) return EMBER_ENOMEM;
  t->parent = malloc(total * sizeof *t->parent);
  t->child = malloc(2 * total * sizeof *t->child);
  t->length = calloc(total, sizeof *t->length);
  if (!t->parent || !t->child || !t->length) {
    plf_tree_destroy(t);
    return EMBER_ENOMEM;
  }
  for (size_t i = 0; i < total; i++) {
    t->parent[i] = PLF_NONE;
    t->child[2 * i] = t->child[2 * i + 1] = PLF_NONE;
  }
  t->tips = tip_count;
  t->nodes = tip_count;
  t->open = tip_count;
  t->root = PLF_NONE;
  *out = t;
  return 0;
}

void plf_tree_destroy(plf_tree *t) {
  if (!t) return;
  free(t->parent);
  free(t->child);
  free(t->length);
  free(t);
}

static int good_length(double len) { return isfinite(len) && len >= 0.0; }

/* joinable: an existing node without a parent, in a tree still open */
static int joinable(const plf_tree *t, int node) {
  return node >= 0 && node < t->nodes && t->parent[node] == PLF_NONE;
}

/* make: the next internal node over a and b; the caller checked them */
static int make(plf_tree *t, int a, double la, int b, double lb) {
  int v = t->nodes++;
  t->child[2 * v] = a;
  t->child[2 * v + 1] = b;
  t->parent[a] = t->parent[b] = v;
  t->length[a] = la;
  t->length[b] = lb;
  t->length[v] = 0.0;
  t->open--;
  return v;
}

int plf_tree_join(plf_tree *t, int child1, double length1, int child2,
                  double length2) {
  if (!t || t->root != PLF_NONE || child1 == child2 || !joinable(t, child1) ||
      !joinable(t, child2) || !good_length(length1) || !good_length(length2))
    return EMBER_EPARAM;
  int v = make(t, child1, length1, child2, length2);
  if (t->open == 1) t->root = v;
  return v;
}

int plf_tree_join3(plf_tree *t, int a, double length_a, int b,
                   double length_b, int c, double length_c) {
  if (!t || t->root != PLF_NONE || t->open != 3 || a == b || a == c ||
      b == c || !joinable(t, a) || !joinable(t, b) || !joinable(t, c) ||
      !good_length(length_a) || !good_length(length_b) ||
      !good_length(length_c))
    return EMBER_EPARAM;
  int x = make(t, a, length_a, b, length_b);
  t->root = make(t, x, 0.0, c, length_c);
  t->unrooted = 1;
  return t->root;
}

int plf_tree_set_length(plf_tree *t, int node, double length) {
  if (!t || node < 0 || node >= t->nodes || t->parent[node] == PLF_NONE ||
      !good_length(length))
    return EMBER_EPARAM;
  t->length[node] = length;
  return 0;
}

static void copy_into(plf_tree *dst, const plf_tree *src) {
  size_t total = 2 * (size_t)src->tips - 1;
  memcpy(dst->parent, src->parent, total * sizeof *src->parent);
  memcpy(dst->child, src->child, 2 * total * sizeof *src->child);
  memcpy(dst->length, src->length, total * sizeof *src->length);
  dst->nodes = src->nodes;
  dst->open = src->open;
  dst->root = src->root;
  dst->unrooted = src->unrooted;
}

int plf_tree_copy(const plf_tree *src, plf_tree **out) {
  if (!src || !out) return EMBER_EPARAM;
  int rc = plf_tree_create(src->tips, out);
  if (rc) return rc;
  copy_into(*out, src);
  return 0;
}

int plf_tree_assign(plf_tree *dst, const plf_tree *src) {
  if (!dst || !src || dst->tips != src->tips) return EMBER_EPARAM;
  if (dst != src) copy_into(dst, src);
  return 0;
}

int plf_tree_tip_count(const plf_tree *t) { return t ? t->tips : 0; }

int plf_tree_node_count(const plf_tree *t) { return t ? t->nodes : 0; }

int plf_tree_is_complete(const plf_tree *t) {
  return t && t->root != PLF_NONE;
}

int plf_tree_root(const plf_tree *t) { return t ? t->root : PLF_NONE; }

int plf_tree_is_unrooted(const plf_tree *t) { return t && t->unrooted; }

int plf_tree_parent(const plf_tree *t, int node) {
  if (!t || node < 0 || node >= t->nodes) return PLF_NONE;
  return t->parent[node];
}

int plf_tree_child(const plf_tree *t, int node, int which) {
  if (!t || node < 0 || node >= t->nodes || (which != 0 && which != 1))
    return PLF_NONE;
  return t->child[2 * node + which];
}

double plf_tree_length(const plf_tree *t, int node) {
  if (!t || node < 0 || node >= t->nodes) return 0.0;
  return t->length[node];
}

/* Breadth-first from the root, written from the end of order backwards:
 * order itself is the queue, so no stack and no recursion. */
int plf_tree_bottom_up(const plf_tree *t, int *order) {
  if (!t || !order || t->root == PLF_NONE) return EMBER_EPARAM;
  int total = 2 * t->tips - 1;
  int head = total - 1, tail = total - 1;
  order[tail--] = t->root;
  while (head > tail) {
    int v = order[head--];
    if (v >= t->tips) {
      order[tail--] = t->child[2 * v];
      order[tail--] = t->child[2 * v + 1];
    }
  }
  return 0;
}
