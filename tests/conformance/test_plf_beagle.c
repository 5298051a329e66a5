/* test_plf_beagle.c - the plf input side end to end: each alignment of
 * tests/data/plf read by plf_alignment_read, each model built by
 * plf_model_parse, their output (patterns and weights, tip states or
 * partials, frequencies, category rates and weights, eigen system) handed
 * to BEAGLE (libhmsbeagle, a test-only dependency) with the fixed tree; the
 * log-likelihood must match the reference's beagle_double_lnl within 1e-10
 * relative, for every row of reference_lnl.tsv (argument "dna") or
 * reference_lnl_protein.tsv ("protein").
 *
 * The tree code of the plf accelerator is written elsewhere; this file
 * carries its own tiny Newick reader, enough for the fixed trees. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libhmsbeagle/beagle.h>

#include "plf_alignment.h"
#include "plf_model.h"

#define DATA EMBER_SOURCE_DIR "/tests/data/plf/"
#define REL_TOL 1e-10
#define MAX_NODES 4096
#define MAX_CHILDREN 64

/* ---- a tiny Newick reader ------------------------------------------------ */
typedef struct node {
  int parent;
  int nchild;
  int child[MAX_CHILDREN];
  double length;
  char name[128];
} node;

typedef struct tree {
  node nodes[MAX_NODES];
  int n, root;
} tree;

typedef struct cursor {
  const char *p;
} cursor;

static void skip_ws(cursor *c) {
  while (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')
    c->p++;
}

static int new_node(tree *t, int parent) {
  if (t->n >= MAX_NODES) fail_msg("newick: more than %d nodes", MAX_NODES);
  node *nd = &t->nodes[t->n];
  memset(nd, 0, sizeof *nd);
  nd->parent = parent;
  if (parent >= 0) {
    node *p = &t->nodes[parent];
    if (p->nchild >= MAX_CHILDREN) fail_msg("newick: too many children");
    p->child[p->nchild++] = t->n;
  }
  return t->n++;
}

static void read_label(cursor *c, char *out, size_t len) {
  size_t n = 0;
  skip_ws(c);
  if (*c->p == '\'') {
    for (c->p++; *c->p && !(*c->p == '\'' && c->p[1] != '\''); c->p++) {
      if (*c->p == '\'') c->p++;
      if (n + 1 < len) out[n++] = *c->p;
    }
    if (*c->p != '\'') fail_msg("newick: unterminated quoted label");
    c->p++;
  } else {
    while (*c->p && !strchr("(),:;[] \t\r\n", *c->p)) {
      if (n + 1 < len) out[n++] = *c->p;
      c->p++;
    }
  }
  out[n] = '\0';
}

static void read_subtree(tree *t, cursor *c, int parent, int depth) {
  if (depth > 1000) fail_msg("newick: nested too deep");
  int me = new_node(t, parent);
  skip_ws(c);
  if (*c->p == '(') {
    c->p++;
    for (;;) {
      read_subtree(t, c, me, depth + 1);
      skip_ws(c);
      if (*c->p == ',') {
        c->p++;
        continue;
      }
      if (*c->p != ')') fail_msg("newick: expected ',' or ')' at '%.10s'", c->p);
      c->p++;
      break;
    }
  }
  read_label(c, t->nodes[me].name, sizeof t->nodes[me].name);
  skip_ws(c);
  if (*c->p == ':') {
    c->p++;
    char *end;
    t->nodes[me].length = strtod(c->p, &end);
    if (end == c->p || !(t->nodes[me].length >= 0))
      fail_msg("newick: bad branch length at '%.10s'", c->p);
    c->p = end;
  }
}

static void read_tree(const char *path, tree *t) {
  FILE *f = fopen(path, "r");
  if (!f) fail_msg("cannot open %s", path);
  static char text[1 << 20];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  cursor c = {text};
  t->n = 0;
  read_subtree(t, &c, -1, 0);
  t->root = 0;
  skip_ws(&c);
  if (*c.p != ';') fail_msg("newick: expected ';' at '%.10s'", c.p);
}

/* Children beyond two become a chain of nodes joined by zero-length
 * branches (P(0) = I), so that every BEAGLE operation has two children. */
static void binarize(tree *t) {
  for (int i = 0; i < t->n; i++) {
    while (t->nodes[i].nchild > 2) {
      node *nd = &t->nodes[i];
      int a = nd->child[0], b = nd->child[1];
      int x = new_node(t, -1);
      nd = &t->nodes[i]; /* unchanged array, but be explicit */
      t->nodes[x].parent = i;
      t->nodes[x].child[0] = a;
      t->nodes[x].child[1] = b;
      t->nodes[x].nchild = 2;
      t->nodes[a].parent = t->nodes[b].parent = x;
      nd->child[0] = x;
      memmove(&nd->child[1], &nd->child[2],
              (size_t)(nd->nchild - 2) * sizeof nd->child[0]);
      nd->nchild--;
    }
  }
}

/* ---- BEAGLE -------------------------------------------------------------- */
static int beagle_ok(int rc, const char *what) {
  if (rc < 0) fail_msg("%s: BEAGLE error %d", what, rc);
  return rc;
}

/* Post-order: internal nodes after their children. */
static void post_order(const tree *t, int v, int *order, int *n) {
  for (int k = 0; k < t->nodes[v].nchild; k++)
    post_order(t, t->nodes[v].child[k], order, n);
  if (t->nodes[v].nchild) order[(*n)++] = v;
}

/* The log-likelihood of aln under m on tree t; all_partials: every tip as
 * partials, else states where they suffice. */
static double beagle_lnl(const plf_alignment *aln, const plf_model *m,
                         const tree *t, int all_partials) {
  int ntaxa = (int)plf_alignment_taxa(aln);
  int S = plf_model_states(m);
  int np = (int)plf_alignment_patterns(aln);
  int ncat = (int)plf_model_categories(m);
  /* BEAGLE buffer of each tree node: tips by alignment index, internal
   * nodes after them */
  int *buf = malloc((size_t)t->n * sizeof *buf);
  int next = ntaxa, tips = 0;
  for (int i = 0; i < t->n; i++) {
    if (t->nodes[i].nchild == 0) {
      size_t taxon;
      if (plf_alignment_find(aln, t->nodes[i].name, &taxon))
        fail_msg("tree tip '%s' is not in the alignment", t->nodes[i].name);
      buf[i] = (int)taxon;
      tips++;
    } else {
      buf[i] = next++;
    }
  }
  assert_int_equal(tips, ntaxa);
  int nodes = next, internal = nodes - ntaxa;
  BeagleInstanceDetails info;
  int inst = beagleCreateInstance(
      ntaxa, nodes, ntaxa, S, np, 1, nodes, ncat, internal + 1, NULL, 0,
      BEAGLE_FLAG_PROCESSOR_CPU | BEAGLE_FLAG_PRECISION_DOUBLE |
          BEAGLE_FLAG_SCALING_MANUAL,
      BEAGLE_FLAG_PRECISION_DOUBLE, &info);
  beagle_ok(inst, "beagleCreateInstance");

  int *states = malloc((size_t)np * sizeof *states);
  double *partials = malloc((size_t)np * S * sizeof *partials);
  for (int i = 0; i < ntaxa; i++) {
    if (all_partials || plf_alignment_tip_ambiguous(aln, (size_t)i)) {
      assert_int_equal(plf_alignment_tip_partials(aln, (size_t)i, partials), 0);
      beagle_ok(beagleSetTipPartials(inst, i, partials), "tip partials");
    } else {
      assert_int_equal(plf_alignment_tip_states(aln, (size_t)i, states), 0);
      beagle_ok(beagleSetTipStates(inst, i, states), "tip states");
    }
  }
  beagle_ok(beagleSetPatternWeights(inst, plf_alignment_weights(aln)),
            "pattern weights");
  beagle_ok(beagleSetStateFrequencies(inst, 0, plf_model_freqs(m)), "freqs");
  beagle_ok(beagleSetCategoryWeights(inst, 0, plf_model_category_weights(m)),
            "category weights");
  beagle_ok(beagleSetCategoryRates(inst, plf_model_category_rates(m)),
            "category rates");
  beagle_ok(beagleSetEigenDecomposition(inst, 0, plf_model_eigenvectors(m),
                                        plf_model_inverse_eigenvectors(m),
                                        plf_model_eigenvalues(m)),
            "eigen decomposition");

  /* one transition matrix per non-root node, indexed by its buffer */
  int *mat = malloc((size_t)t->n * sizeof *mat);
  double *len = malloc((size_t)t->n * sizeof *len);
  int nm = 0;
  for (int i = 0; i < t->n; i++) {
    if (i == t->root) continue;
    mat[nm] = buf[i];
    len[nm++] = t->nodes[i].length;
  }
  beagle_ok(beagleUpdateTransitionMatrices(inst, 0, mat, NULL, NULL, len, nm),
            "transition matrices");

  int *order = malloc((size_t)t->n * sizeof *order);
  int no = 0;
  post_order(t, t->root, order, &no);
  assert_int_equal(no, internal);
  BeagleOperation *ops = malloc((size_t)no * sizeof *ops);
  int *scales = malloc((size_t)no * sizeof *scales);
  for (int k = 0; k < no; k++) {
    const node *nd = &t->nodes[order[k]];
    assert_int_equal(nd->nchild, 2);
    int dest = buf[order[k]];
    ops[k] = (BeagleOperation){dest, dest - ntaxa, BEAGLE_OP_NONE,
                               buf[nd->child[0]], buf[nd->child[0]],
                               buf[nd->child[1]], buf[nd->child[1]]};
    scales[k] = dest - ntaxa;
  }
  beagle_ok(beagleUpdatePartials(inst, ops, no, BEAGLE_OP_NONE), "partials");
  int cum = internal;
  beagle_ok(beagleResetScaleFactors(inst, cum), "reset scale");
  beagle_ok(beagleAccumulateScaleFactors(inst, scales, no, cum), "scale");
  int root = buf[t->root], zero = 0;
  double lnl = 0;
  beagle_ok(beagleCalculateRootLogLikelihoods(inst, &root, &zero, &zero, &cum,
                                              1, &lnl),
            "root log-likelihood");
  beagleFinalizeInstance(inst);
  free(buf);
  free(states);
  free(partials);
  free(mat);
  free(len);
  free(order);
  free(ops);
  free(scales);
  return lnl;
}

/* ---- the reference tables ------------------------------------------------ */
static const char *model_spec(const char *column) {
  if (strcmp(column, "GTRG") == 0)
    return "GTR{1.2,3.9,0.8,1.1,4.5}+F{0.3,0.2,0.25,0.25}+G4{0.5}";
  if (strcmp(column, "HKYG") == 0)
    return "HKY{2.0}+F{0.3,0.2,0.25,0.25}+G4{0.5}";
  return column; /* JC, and the protein table's IQ-TREE strings */
}

static void alignment_path(const char *dataset, int protein, char *aln,
                           char *tre, size_t len) {
  const char *ext = strcmp(dataset, "primates") == 0 ? "fasta" : "phy";
  snprintf(aln, len, "%s%s%s.%s", DATA, protein ? "protein/" : "", dataset,
           ext);
  snprintf(tre, len, "%s%s%s.tree", DATA, protein ? "protein/" : "", dataset);
}

static int protein_set;
static tree the_tree;

static void test_reference(void **state) {
  (void)state;
  const char *table = protein_set ? DATA "protein/reference_lnl_protein.tsv"
                                  : DATA "reference_lnl.tsv";
  FILE *f = fopen(table, "r");
  if (!f) fail_msg("cannot open %s", table);
  char line[1024];
  int rows = 0, worst_row = 0;
  double worst = 0;
  assert_non_null(fgets(line, sizeof line, f)); /* header */
  while (fgets(line, sizeof line, f)) {
    char dataset[64], model[128];
    size_t taxa, sites;
    double iqtree, beagle;
    char phyml[64];
    if (sscanf(line, "%63s %zu %zu %127s %lf %63s %lf", dataset, &taxa,
               &sites, model, &iqtree, phyml, &beagle) != 7)
      fail_msg("%s: cannot read row '%s'", table, line);
    char aln_path[512], tree_path[512], err[512];
    alignment_path(dataset, protein_set, aln_path, tree_path,
                   sizeof aln_path);
    plf_alignment *aln;
    if (plf_alignment_read(aln_path, PLF_FORMAT_AUTO, PLF_DATA_AUTO, &aln, err,
                           sizeof err))
      fail_msg("%s", err);
    assert_int_equal(plf_alignment_taxa(aln), taxa);
    assert_int_equal(plf_alignment_sites(aln), sites);
    assert_int_equal(plf_alignment_datatype(aln),
                     protein_set ? PLF_DATA_PROTEIN : PLF_DATA_DNA);
    plf_model *m;
    if (plf_model_parse(model_spec(model), aln, &m, err, sizeof err))
      fail_msg("%s", err);
    read_tree(tree_path, &the_tree);
    binarize(&the_tree);
    double lnl = beagle_lnl(aln, m, &the_tree, 0);
    double lnl_partials = beagle_lnl(aln, m, &the_tree, 1);
    double rel = fabs(lnl - beagle) / fabs(beagle);
    printf("%-10s %-12s patterns %4zu  lnL %.10f  reference %.10f  rel %.1e\n",
           dataset, model, plf_alignment_patterns(aln), lnl, beagle, rel);
    if (!(rel <= REL_TOL))
      fail_msg("%s %s: lnL %.10f, reference %.10f (relative error %.2e, "
               "tolerance %g)", dataset, model, lnl, beagle, rel, REL_TOL);
    if (!(fabs(lnl_partials - lnl) <= 1e-9 * fabs(lnl)))
      fail_msg("%s %s: lnL %.9f with states, %.9f with partials", dataset,
               model, lnl, lnl_partials);
    if (rel > worst) {
      worst = rel;
      worst_row = rows + 1;
    }
    plf_model_destroy(m);
    plf_alignment_destroy(aln);
    rows++;
  }
  fclose(f);
  assert_int_equal(rows, protein_set ? 6 : 9);
  printf("%d rows, worst relative error %.2e (row %d)\n", rows, worst,
         worst_row);
}

int main(int argc, char **argv) {
  if (argc != 2 || (strcmp(argv[1], "dna") && strcmp(argv[1], "protein"))) {
    fprintf(stderr, "usage: %s dna|protein\n", argv[0]);
    return 2;
  }
  protein_set = strcmp(argv[1], "protein") == 0;
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_reference)};
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  beagleFinalize();
  return failed;
}
