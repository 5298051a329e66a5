/* test_lnl_api.c - ember_lnl and its handles (ember.h, "The plf
 * accelerator") on an embedded client: every row of tests/data/plf's
 * reference tables (reference_lnl.tsv, protein/reference_lnl_protein.tsv:
 * beagle_double_lnl within 1e-10 relative, as test_lnl.sh checks `ember
 * lnl`), an alignment from sequences and trees from strings, site
 * log-likelihoods (each tree's sites sum to its lnl), the state block's
 * size (no partials for tips with compact states), the tree callback,
 * size-0 structs, and bad input: EMBER_EPARAM or EMBER_EINVAL with a
 * message naming what was wrong. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ember/ember.h"

#define DATA EMBER_SOURCE_DIR "/tests/data/plf/"
#define GTRG "GTR{1.2,3.9,0.8,1.1,4.5}+F{0.3,0.2,0.25,0.25}+G4{0.5}"
#define HKYG "HKY{2.0}+F{0.3,0.2,0.25,0.25}+G4{0.5}"

#define assert_contains(text, needle)                                        \
  do {                                                                       \
    if (!strstr((text), (needle)))                                           \
      fail_msg("\"%s\" does not contain \"%s\"", (text), (needle));          \
  } while (0)

#define assert_rel(a, b, tol)                                                \
  do {                                                                       \
    double a_ = (a), b_ = (b);                                               \
    if (!(fabs(a_ - b_) <= (tol) * fabs(b_)))                                \
      fail_msg("%s = %.10f, expected %.10f (relative tolerance %g)", #a, a_, \
               b_, (double)(tol));                                           \
  } while (0)

#define assert_rc(call, want)                                                \
  do {                                                                       \
    int rc_ = (call);                                                        \
    if (rc_ != (want))                                                       \
      fail_msg("%s = %s, expected %s (%s)", #call, ember_errname(rc_),       \
               ember_errname(want), ember_last_error());                     \
  } while (0)

static ember_client *client;

static int setup(void **state) {
  (void)state;
  ember_options o = {.size = sizeof o, .client_name = "test_lnl_api",
                     .embedded_threads = 2};
  return ember_connect("embedded", &o, &client);
}

static int teardown(void **state) {
  (void)state;
  ember_close(client);
  return 0;
}

/* A file's text, NUL-terminated (the test fails when it cannot be read). */
static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  assert_non_null(buf);
  size_t got;
  while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
    n += got;
    if (cap - n < 2) {
      buf = realloc(buf, cap *= 2);
      assert_non_null(buf);
    }
  }
  fclose(f);
  buf[n] = '\0';
  return buf;
}

static const char *model_spec(const char *name) {
  if (strcmp(name, "GTRG") == 0) return GTRG;
  if (strcmp(name, "HKYG") == 0) return HKYG;
  return name;
}

/* lnl of the file's trees (path) for aln under spec; report filled. */
static double score_files(const char *aln_path, const char *tree_path,
                          const char *spec, ember_lnl_report *rep) {
  ember_alignment *aln = NULL;
  ember_model *m = NULL;
  ember_trees *t = NULL;
  assert_rc(ember_alignment_read(aln_path, NULL, &aln), 0);
  assert_rc(ember_model_parse(spec, NULL, aln, &m), 0);
  assert_rc(ember_trees_read(tree_path, aln, &t), 0);
  assert_int_equal(ember_trees_count(t), 1);
  double lnl = 0;
  assert_rc(ember_lnl(client, NULL, m, t, &lnl, NULL, rep, NULL, NULL), 0);
  assert_int_equal(rep->patterns, ember_alignment_patterns(aln));
  ember_trees_free(t);
  ember_model_free(m);
  ember_alignment_free(aln);
  return lnl;
}

/* Every row of a reference table: dataset, taxa, sites, model, IQ-TREE,
 * PhyML, BEAGLE double (the reference), BEAGLE single. */
static int check_table(const char *table, int protein) {
  char *text = slurp(table);
  int rows = 0;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    char set[64], model[64], iq[32], phyml[32];
    int taxa, sites;
    double ref;
    if (strncmp(line, "dataset", 7) == 0) continue;
    if (sscanf(line, "%63s %d %d %63s %31s %31s %lf", set, &taxa, &sites,
               model, iq, phyml, &ref) != 7)
      fail_msg("%s: cannot read '%s'", table, line);
    char aln[512], tree[512];
    if (protein) {
      snprintf(aln, sizeof aln, DATA "protein/%s.phy", set);
      snprintf(tree, sizeof tree, DATA "protein/%s.tree", set);
    } else {
      snprintf(aln, sizeof aln, DATA "%s.%s", set,
               strcmp(set, "primates") == 0 ? "fasta" : "phy");
      snprintf(tree, sizeof tree, DATA "%s.tree", set);
    }
    ember_lnl_report rep = {.size = sizeof rep};
    double lnl = score_files(aln, tree, model_spec(model), &rep);
    print_message("%s %s: %.10f (reference %.10f)\n", set, model, lnl, ref);
    assert_rel(lnl, ref, 1e-10);
    assert_int_equal(rep.trees, 1);
    assert_int_equal(rep.trees_failed, 0);
    assert_int_equal(rep.setups, 1);
    assert_int_equal(rep.tasks, 2); /* the setup and one batch */
    assert_int_equal(rep.tasks_cpu, 2);
    assert_true(rep.vectors >= ember_lnl_min_vectors((size_t)taxa));
    assert_true(rep.state_bytes > 0);
    rows++;
  }
  free(text);
  return rows;
}

static void test_reference_tables(void **state) {
  (void)state;
  int rows = check_table(DATA "reference_lnl.tsv", 0);
  rows += check_table(DATA "protein/reference_lnl_protein.tsv", 1);
  assert_int_equal(rows, 15);
}

/* primates.fasta's names and sequences (n of them). */
static char *read_primates(const char **names, const char **seqs, size_t *n) {
  char *text = slurp(DATA "primates.fasta");
  *n = 0;
  char *save = NULL;
  for (char *line = strtok_r(text, "\n", &save); line;
       line = strtok_r(NULL, "\n", &save)) {
    if (line[0] == '>') {
      assert_true(*n < 16);
      names[*n] = line + 1;
      seqs[(*n)++] = NULL;
    } else {
      /* one line per sequence in this file */
      assert_null(seqs[*n - 1]);
      seqs[*n - 1] = line;
    }
  }
  return text;
}

/* The tree of a one-line Newick file, without its newline. */
static char *read_tree(const char *path) {
  char *t = slurp(path);
  t[strcspn(t, "\r\n")] = '\0';
  return t;
}

static void test_sequences_and_strings(void **state) {
  (void)state;
  const char *names[16], *seqs[16];
  size_t n;
  char *text = read_primates(names, seqs, &n);
  ember_alignment *aln = NULL;
  assert_rc(ember_alignment_from_sequences(names, seqs, n, NULL, &aln), 0);
  assert_int_equal(ember_alignment_taxa(aln), 12);
  assert_int_equal(ember_alignment_sites(aln), 898);
  assert_string_equal(ember_alignment_type(aln), "dna");
  assert_string_equal(ember_alignment_name(aln, 0), "Tarsius_syrichta");
  assert_null(ember_alignment_name(aln, 12));
  char *tree = read_tree(DATA "primates.tree");
  const char *newick[2] = {tree, tree};
  ember_trees *t = NULL;
  assert_rc(ember_trees_parse(newick, 2, aln, &t), 0);
  assert_int_equal(ember_trees_count(t), 2);
  ember_model *m = NULL;
  assert_rc(ember_model_parse("JC", NULL, aln, &m), 0);
  assert_string_equal(ember_model_name(m), "JC");
  double lnl[2] = {0, 0};
  ember_lnl_report rep = {.size = sizeof rep};
  assert_rc(ember_lnl(client, NULL, m, t, lnl, NULL, &rep, NULL, NULL), 0);
  assert_rel(lnl[0], -6424.2024471951, 1e-10);
  assert_true(lnl[1] == lnl[0]);
  assert_int_equal(rep.trees, 2);
  /* the same tree again: its vectors are resident, nothing recomputed */
  assert_true(rep.hits > 0);
  assert_int_equal(rep.recomputed, 0);
  /* single precision, and the file read by ember_alignment_read */
  ember_lnl_params p;
  ember_lnl_params_default(&p);
  p.precision = EMBER_LNL_SINGLE;
  p.threads = 2;
  assert_rc(ember_lnl(client, &p, m, t, lnl, NULL, NULL, NULL, NULL), 0);
  assert_rel(lnl[0], -6424.202749, 1e-5);
  ember_model_free(m);
  ember_trees_free(t);
  ember_alignment_free(aln);
  free(tree);
  free(text);
}

typedef struct seen {
  size_t calls, sites, progress_done, progress_total;
  double lnl[16];
  double sum[16];
  int stop_at;
} seen;

static int on_tree(size_t tree, double lnl, const double *site, size_t sites,
                   void *user) {
  seen *s = user;
  assert_int_equal(tree, s->calls);
  s->lnl[tree] = lnl;
  s->sites = sites;
  s->sum[tree] = 0;
  for (size_t i = 0; i < sites; i++) s->sum[tree] += site[i];
  s->calls++;
  return s->stop_at >= 0 && (size_t)s->stop_at == tree;
}

static void on_progress(size_t done, size_t total, void *user) {
  seen *s = user;
  assert_true(done >= s->progress_done && done <= total);
  s->progress_done = done;
  s->progress_total = total;
}

static void test_site_lnl(void **state) {
  (void)state;
  ember_alignment *aln = NULL;
  ember_model *m = NULL;
  ember_trees *t = NULL;
  assert_rc(ember_alignment_read(DATA "example.phy", "dna", &aln), 0);
  assert_rc(ember_model_parse(HKYG, NULL, aln, &m), 0);
  char *tree = read_tree(DATA "example.tree");
  /* the tree, and the tree with one branch longer */
  char *longer = strdup(tree);
  char *frog = strstr(longer, "Frog:0.1543000391");
  assert_non_null(frog);
  memcpy(frog, "Frog:0.3543000391", 17);
  const char *newick[3] = {tree, longer, tree};
  assert_rc(ember_trees_parse(newick, 3, aln, &t), 0);
  size_t sites = ember_alignment_sites(aln);
  assert_int_equal(sites, 1998);
  double lnl[3];
  double *site = malloc(3 * sites * sizeof *site);
  assert_non_null(site);
  seen s = {.stop_at = -1};
  ember_lnl_params p;
  ember_lnl_params_default(&p);
  p.tree_cb = on_tree;
  p.tree_user = &s;
  assert_rc(ember_lnl(client, &p, m, t, lnl, site, NULL, on_progress, &s), 0);
  assert_rel(lnl[0], -21901.7163698849, 1e-10);
  assert_true(lnl[1] != lnl[0]);
  assert_int_equal(s.calls, 3);
  assert_int_equal(s.sites, sites);
  assert_int_equal(s.progress_done, 3);
  assert_int_equal(s.progress_total, 3);
  for (size_t k = 0; k < 3; k++) {
    double sum = 0;
    for (size_t i = 0; i < sites; i++) sum += site[k * sites + i];
    assert_rel(sum, lnl[k], 1e-9);
    assert_rel(s.sum[k], lnl[k], 1e-9);
    assert_true(s.lnl[k] == lnl[k]);
  }
  /* the callback stops it: the trees after are NaN */
  seen stop = {.stop_at = 0};
  p.tree_user = &stop;
  p.site_lnl = 1;
  assert_rc(ember_lnl(client, &p, m, t, lnl, NULL, NULL, NULL, NULL),
            EMBER_ECANCELED);
  assert_contains(ember_last_error(), "tree callback");
  assert_int_equal(stop.calls, 1);
  assert_int_equal(stop.sites, sites);
  assert_true(isnan(lnl[1]) && isnan(lnl[2]));
  free(site);
  free(longer);
  free(tree);
  ember_trees_free(t);
  ember_model_free(m);
  ember_alignment_free(aln);
}

/* The state block holds partials for the vectors only: example.phy's 17
 * taxa all have compact states, so its tips take no partials buffers (the
 * block once held 17 + vectors of them). */
static void test_state_size(void **state) {
  (void)state;
  ember_lnl_report def = {.size = sizeof def};
  double want = score_files(DATA "example.phy", DATA "example.tree", GTRG,
                            &def);
  ember_alignment *aln = NULL;
  ember_model *m = NULL;
  ember_trees *t = NULL;
  assert_rc(ember_alignment_read(DATA "example.phy", NULL, &aln), 0);
  assert_rc(ember_model_parse(GTRG, NULL, aln, &m), 0);
  assert_rc(ember_trees_read(DATA "example.tree", aln, &t), 0);
  ember_lnl_params p;
  ember_lnl_params_default(&p);
  p.max_vectors = 8;
  ember_lnl_report rep = {.size = sizeof rep};
  double lnl = 0;
  assert_rc(ember_lnl(client, &p, m, t, &lnl, NULL, &rep, NULL, NULL), 0);
  assert_rel(lnl, want, 1e-12);
  /* GTR+G4: 4 categories x patterns x 4 states doubles per buffer */
  uint64_t buffer = 4 * (uint64_t)rep.patterns * 4 * sizeof(double);
  uint64_t tips_too = (17 + 8) * buffer;
  print_message("example.phy, GTR+G4, 8 vectors: state block %llu bytes "
                "(17 + 8 partials buffers: %llu)\n",
                (unsigned long long)rep.state_bytes,
                (unsigned long long)tips_too);
  if (!(rep.state_bytes >= 8 * buffer && rep.state_bytes < 10 * buffer))
    fail_msg("state block %llu bytes, not between 8 and 10 buffers of %llu",
             (unsigned long long)rep.state_bytes,
             (unsigned long long)buffer);
  assert_true(rep.state_bytes < tips_too);
  ember_trees_free(t);
  ember_model_free(m);
  ember_alignment_free(aln);
}

/* Several instances (threads over trees): the same values and site values
 * as one, the callback in tree order on this thread, the report counting
 * instances; a callback that stops leaves the trees after it NaN. */
static void test_instances(void **state) {
  (void)state;
  enum { TREES = 7 };
  ember_alignment *aln = NULL;
  ember_model *m = NULL;
  ember_trees *t = NULL;
  assert_rc(ember_alignment_read(DATA "example.phy", "dna", &aln), 0);
  assert_rc(ember_model_parse(HKYG, NULL, aln, &m), 0);
  char *tree = read_tree(DATA "example.tree");
  char *variant[TREES];
  const char *newick[TREES];
  for (int k = 0; k < TREES; k++) {   /* Frog's branch 0.1543 -> 0.k543 */
    variant[k] = strdup(tree);
    char *frog = strstr(variant[k], "Frog:0.1543000391");
    assert_non_null(frog);
    frog[7] = (char)('1' + k);
    newick[k] = variant[k];
  }
  assert_rc(ember_trees_parse(newick, TREES, aln, &t), 0);
  size_t sites = ember_alignment_sites(aln);
  double one[TREES], many[TREES];
  double *site_one = malloc(TREES * sites * sizeof(double));
  double *site_many = malloc(TREES * sites * sizeof(double));
  assert_true(site_one && site_many);
  ember_lnl_params p;
  ember_lnl_params_default(&p);
  ember_lnl_report r = {.size = sizeof r};
  assert_rc(ember_lnl(client, &p, m, t, one, site_one, &r, NULL, NULL), 0);
  assert_int_equal(r.instances, 1);
  for (unsigned k = 2; k <= 9; k += 7) {   /* 2, and more than the trees */
    seen s = {.stop_at = -1};
    p.instances = k;
    p.tree_cb = on_tree;
    p.tree_user = &s;
    assert_rc(ember_lnl(client, &p, m, t, many, site_many, &r, on_progress,
                        &s), 0);
    assert_int_equal(r.instances, k < TREES ? k : TREES);
    assert_int_equal(r.trees, TREES);
    assert_int_equal(r.setups, r.instances);
    assert_int_equal(s.calls, TREES);
    assert_int_equal(s.progress_done, TREES);
    assert_memory_equal(one, many, sizeof one);
    assert_memory_equal(site_one, site_many, TREES * sites * sizeof(double));
  }
  seen stop = {.stop_at = 2};
  p.tree_user = &stop;
  p.instances = 3;
  assert_rc(ember_lnl(client, &p, m, t, many, NULL, &r, NULL, NULL),
            EMBER_ECANCELED);
  assert_int_equal(stop.calls, 3);
  assert_int_equal(r.trees_failed, TREES - 3);
  for (int k = 3; k < TREES; k++) assert_true(isnan(many[k]));
  p.instances = 257;
  assert_rc(ember_lnl(client, &p, m, t, many, NULL, NULL, NULL, NULL),
            EMBER_EPARAM);
  assert_contains(ember_last_error(), "instances");
  for (int k = 0; k < TREES; k++) free(variant[k]);
  free(site_one);
  free(site_many);
  free(tree);
  ember_trees_free(t);
  ember_model_free(m);
  ember_alignment_free(aln);
}

/* The first release's layouts: size 0 means "up to its last field". */
static void test_size_zero(void **state) {
  (void)state;
  ember_alignment *aln = NULL;
  ember_model *m = NULL;
  ember_trees *t = NULL;
  assert_rc(ember_alignment_read(DATA "primates.fasta", NULL, &aln), 0);
  assert_rc(ember_model_parse("JC", NULL, aln, &m), 0);
  assert_rc(ember_trees_read(DATA "primates.tree", aln, &t), 0);
  ember_lnl_params p;
  memset(&p, 0, sizeof p);       /* size 0: the first layout */
  p.max_vectors = ember_lnl_min_vectors(12);
  ember_lnl_report rep;
  memset(&rep, 0, sizeof rep);   /* size 0: filled up to instances */
  double lnl = 0;
  assert_rc(ember_lnl(client, &p, m, t, &lnl, NULL, &rep, NULL, NULL), 0);
  assert_rel(lnl, -6424.2024471951, 1e-10);
  assert_int_equal(rep.size, sizeof rep);
  assert_int_equal(rep.trees, 1);
  assert_int_equal(rep.vectors, ember_lnl_min_vectors(12));
  assert_true(rep.wall_ns > 0);
  /* a size smaller than the size field itself is refused */
  p.size = 1;
  assert_rc(ember_lnl(client, &p, m, t, &lnl, NULL, NULL, NULL, NULL),
            EMBER_EINVAL);
  ember_trees_free(t);
  ember_model_free(m);
  ember_alignment_free(aln);
}

static void test_bad_input(void **state) {
  (void)state;
  ember_alignment *aln = NULL, *other = NULL;
  ember_model *m = NULL;
  ember_trees *t = NULL;
  /* alignments */
  assert_rc(ember_alignment_read(DATA "example.phy", "rna", &aln),
            EMBER_EPARAM);
  assert_contains(ember_last_error(), "'rna' is not dna or protein");
  assert_rc(ember_alignment_read(DATA "missing.phy", NULL, &aln), EMBER_EIO);
  assert_contains(ember_last_error(), "missing.phy: cannot open");
  assert_rc(ember_alignment_read(NULL, NULL, &aln), EMBER_EINVAL);
  assert_contains(ember_last_error(), "missing argument");
  const char *names[3] = {"a", "b", "c"};
  const char *unequal[3] = {"ACGTA", "ACGTT", "ACG"};
  assert_rc(ember_alignment_from_sequences(names, unequal, 3, NULL, &aln),
            EMBER_EPARAM);
  assert_contains(ember_last_error(), "sequences:3: unequal lengths");
  const char *bad[3] = {"ACGTA", "AC!TA", "ACGTA"};
  assert_rc(ember_alignment_from_sequences(names, bad, 3, NULL, &aln),
            EMBER_EPARAM);
  assert_contains(ember_last_error(), "sequences:2: unknown character '!'");
  assert_rc(ember_alignment_from_sequences(names, NULL, 3, NULL, &aln),
            EMBER_EINVAL);
  assert_null(aln);
  const char *seqs[3] = {"ACGTA", "ACGTT", "ACGTC"};
  assert_rc(ember_alignment_from_sequences(names, seqs, 3, NULL, &aln), 0);
  assert_rc(ember_alignment_read(DATA "primates.fasta", NULL, &other), 0);
  /* models */
  assert_rc(ember_model_parse("GTR{1,2}", NULL, aln, &m), EMBER_EPARAM);
  assert_contains(ember_last_error(), "model 'GTR{1,2}': GTR takes 5 rates");
  assert_rc(ember_model_parse("HKY+X", NULL, aln, &m), EMBER_EPARAM);
  assert_contains(ember_last_error(), "model 'HKY+X'");
  assert_rc(ember_model_parse("LG", NULL, aln, &m), EMBER_EPARAM);
  assert_contains(ember_last_error(), "a protein model, but the alignment is DNA");
  assert_rc(ember_model_parse(NULL, NULL, aln, &m), EMBER_EPARAM);
  assert_contains(ember_last_error(), "no model");
  assert_rc(ember_model_parse("JC", NULL, NULL, &m), EMBER_EINVAL);
  assert_null(m);
  /* trees */
  const char *toad[2] = {"(a:0.1,b:0.2,c:0.3);", "(a:0.1,b:0.2,Toad:0.3);"};
  assert_rc(ember_trees_parse(toad, 2, aln, &t), EMBER_EPARAM);
  assert_contains(ember_last_error(),
                  "newick[1]: taxon 'Toad' is not in the alignment");
  const char *nolen[1] = {"(a:0.1,b,c:0.3);"};
  assert_rc(ember_trees_parse(nolen, 1, aln, &t), EMBER_EPARAM);
  assert_contains(ember_last_error(), "newick[0]: taxon 'b' has no branch length");
  const char *missing[1] = {"(a:0.1,b:0.2);"};
  assert_rc(ember_trees_parse(missing, 1, aln, &t), EMBER_EPARAM);
  assert_contains(ember_last_error(), "taxon 'c' of the alignment is not in the tree");
  const char *two[1] = {"(a:0.1,b:0.2,c:0.3);\n(a:0.1,b:0.2,c:0.3);"};
  assert_rc(ember_trees_parse(two, 1, aln, &t), EMBER_EPARAM);
  assert_contains(ember_last_error(), "newick[0]: one tree per string");
  const char *null_tree[1] = {NULL};
  assert_rc(ember_trees_parse(null_tree, 1, aln, &t), EMBER_EINVAL);
  assert_rc(ember_trees_parse(NULL, 1, aln, &t), EMBER_EINVAL);
  assert_rc(ember_trees_read(DATA "example.tree", NULL, &t), EMBER_EINVAL);
  assert_rc(ember_trees_read(DATA "example.tree", aln, &t), EMBER_EFORMAT);
  assert_contains(ember_last_error(), "example.tree:1: taxon");
  assert_null(t);
  /* scoring */
  const char *good[1] = {"(a:0.1,b:0.2,c:0.3);"};
  assert_rc(ember_trees_parse(good, 1, aln, &t), 0);
  assert_rc(ember_model_parse("JC", NULL, other, &m), 0);
  double lnl = 0;
  assert_rc(ember_lnl(client, NULL, m, t, &lnl, NULL, NULL, NULL, NULL),
            EMBER_EPARAM);
  assert_contains(ember_last_error(), "different alignments");
  ember_model_free(m);
  assert_rc(ember_model_parse("JC", NULL, aln, &m), 0);
  assert_rc(ember_lnl(NULL, NULL, m, t, &lnl, NULL, NULL, NULL, NULL),
            EMBER_EINVAL);
  assert_contains(ember_last_error(), "missing argument");
  assert_rc(ember_lnl(client, NULL, NULL, t, &lnl, NULL, NULL, NULL, NULL),
            EMBER_EINVAL);
  ember_lnl_params p;
  ember_lnl_params_default(&p);
  p.max_vectors = 1;
  assert_rc(ember_lnl(client, &p, m, t, &lnl, NULL, NULL, NULL, NULL),
            EMBER_EPARAM);
  assert_contains(ember_last_error(), "max_vectors: 1 is below the minimum");
  ember_lnl_params_default(&p);
  p.precision = (ember_lnl_precision)7;
  assert_rc(ember_lnl(client, &p, m, t, &lnl, NULL, NULL, NULL, NULL),
            EMBER_EPARAM);
  ember_lnl_params_default(&p);
  p.platform = "fpga-emu"; /* the embedded engine has none */
  ember_lnl_report rep = {.size = sizeof rep};
  assert_rc(ember_lnl(client, &p, m, t, &lnl, NULL, &rep, NULL, NULL),
            EMBER_ENOPLATFORM);
  assert_contains(ember_last_error(), "fpga-emu");
  assert_int_equal(rep.trees_failed, 1);
  assert_true(isnan(lnl));
  /* and the good call */
  assert_rc(ember_lnl(client, NULL, m, t, &lnl, NULL, NULL, NULL, NULL), 0);
  assert_true(lnl < 0 && isfinite(lnl));
  ember_trees_free(t);
  ember_model_free(m);
  ember_alignment_free(other);
  ember_alignment_free(aln);
  /* NULL is a no-op for every free */
  ember_alignment_free(NULL);
  ember_model_free(NULL);
  ember_trees_free(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_reference_tables),
      cmocka_unit_test(test_sequences_and_strings),
      cmocka_unit_test(test_site_lnl),
      cmocka_unit_test(test_state_size),
      cmocka_unit_test(test_instances),
      cmocka_unit_test(test_size_zero),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
