/*
 * fuzz_newick.c - the Newick reader (accelerators/plf/plf_newick.c) on
 * arbitrary bytes, and the planner on what it accepts. The input's first
 * line is the taxon list (names separated by blanks), the rest the trees.
 * Checks what the reader promises: a refusal says "fuzz:LINE: ..." (or
 * "taxon list: ..."); every tree accepted is complete over the list with
 * finite lengths >= 0; each plans in n-1 ops with the fewest vectors and
 * with none to spare, and an unrooted one's NNI neighbours plan as a batch
 * within the minimum budget.
 *   build-fuzz/tests/fuzz/fuzz_newick -max_total_time=60 \
 *     tests/fuzz/corpus/newick
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "plf/plf_plan.h"
#include "plf/plf_tree.h"

#define MAX_TAXA 512

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_tree(const plf_tree *t, int n) {
  if (!plf_tree_is_complete(t) || plf_tree_tip_count(t) != n ||
      plf_tree_node_count(t) != 2 * n - 1)
    abort();
  for (int v = 0; v < 2 * n - 1; v++) {
    double len = plf_tree_length(t, v);
    if (!isfinite(len) || len < 0) abort();
    if ((plf_tree_parent(t, v) == PLF_NONE) != (v == plf_tree_root(t)))
      abort();
  }
  for (int budget = 0; budget <= 1; budget++) {
    plf_planner *p;
    plf_plan plan;
    plf_plan_init(&plan);
    if (plf_planner_create(n, budget ? plf_plan_min_vectors(n) : 0, 0, &p))
      abort();
    if (plf_planner_add_tree(p, t, &plan) != 0 ||
        plan.op_count != (size_t)n - 1)
      abort();
    plf_plan_free(&plan);
    plf_planner_destroy(p);
  }
  int count = plf_tree_is_unrooted(t) ? plf_nni_count(t) : 0;
  if (count < 0 || count > 16) count = count < 0 ? 0 : 16;
  if (count == 0) return;
  plf_tree *nb[17] = {0};
  nb[0] = (plf_tree *)t;
  for (int i = 1; i <= count; i++)
    if (plf_tree_create(n, &nb[i]) || plf_nni_neighbour(t, i - 1, nb[i]))
      abort();
  plf_planner *p;
  plf_plan plan;
  plf_plan_init(&plan);
  if (plf_planner_create(n, plf_plan_min_vectors(n), 0, &p) ||
      plf_planner_add_trees(p, (const plf_tree *const *)nb,
                            (size_t)count + 1, &plan) != 0 ||
      plan.tree_count != (size_t)count + 1 ||
      plan.op_count > ((size_t)count + 1) * ((size_t)n - 1))
    abort();
  plf_plan_free(&plan);
  plf_planner_destroy(p);
  for (int i = 1; i <= count; i++) plf_tree_destroy(nb[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *text = (const char *)data;
  const char *nl = memchr(text, '\n', size);
  size_t head = nl ? (size_t)(nl - text) : size;
  char *list = malloc(head + 1);
  char **names = malloc(MAX_TAXA * sizeof *names);
  if (!list || !names) abort();
  memcpy(list, text, head);
  list[head] = '\0';
  int n = 0;
  for (char *tok = strtok(list, " \t\r"); tok && n < MAX_TAXA;
       tok = strtok(NULL, " \t\r"))
    names[n++] = tok;
  size_t off = nl ? head + 1 : size;
  plf_tree **trees;
  int count;
  char err[512] = "";
  int rc = plf_newick_parse(text + off, size - off, "fuzz",
                            (const char *const *)names, n, &trees, &count,
                            err, sizeof err);
  if (rc == 0) {
    if (count < 1) abort();
    for (int i = 0; i < count; i++) check_tree(trees[i], n);
    plf_trees_destroy(trees, count);
  } else if (rc == EMBER_EFORMAT) {
    if (strncmp(err, "fuzz:", 5) != 0 || trees || count) abort();
  } else if (rc == EMBER_EPARAM) {
    if (strncmp(err, "taxon list:", 11) != 0) abort();
  } else if (rc != EMBER_ENOMEM) {
    abort();
  }
  free(names);
  free(list);
  return 0;
}
