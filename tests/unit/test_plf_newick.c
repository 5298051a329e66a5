/* test_plf_newick.c - the Newick reader: good trees (rooted, unrooted,
 * quoting, comments, labels, several per file), every error with its
 * source:line, the taxon list's checks, 100,000-taxon caterpillars read
 * on a 256 KiB stack, files, and allocation failures. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "alloc_fail.h"
#include "ember/ember_errors.h"
#include "plf/plf_plan.h"
#include "plf/plf_tree.h"

#define assert_contains(text, needle)                                        \
  do {                                                                       \
    if (!strstr((text), (needle)))                                           \
      fail_msg("\"%s\" does not contain \"%s\"", (text), (needle));          \
  } while (0)

static const char *const abcd[] = {"a", "b", "c", "d"};

static int parse(const char *text, const char *const *taxa, int n,
                 plf_tree ***trees, int *count, char *err, size_t err_len) {
  return plf_newick_parse(text, strlen(text), "t.nwk", taxa, n, trees, count,
                          err, err_len);
}

/* one: the single tree of text over abcd, which must parse */
static plf_tree *one(const char *text) {
  plf_tree **trees;
  int count;
  char err[256] = "";
  int rc = parse(text, abcd, 4, &trees, &count, err, sizeof err);
  if (rc != 0) fail_msg("%s: rc %d, %s", text, rc, err);
  assert_int_equal(count, 1);
  plf_tree *t = trees[0];
  free(trees);
  return t;
}

static void test_rooted(void **state) {
  (void)state;
  plf_tree *t = one("((a:1,b:2):0.5,(c:3,d:4e-1):0.25);\n");
  assert_true(plf_tree_is_complete(t));
  assert_false(plf_tree_is_unrooted(t));
  int ab = plf_tree_parent(t, 0), cd = plf_tree_parent(t, 2);
  assert_int_equal(plf_tree_parent(t, 1), ab);
  assert_int_equal(plf_tree_parent(t, 3), cd);
  assert_int_equal(plf_tree_parent(t, ab), plf_tree_root(t));
  assert_true(plf_tree_length(t, 1) == 2.0);
  assert_true(plf_tree_length(t, 3) == 0.4);
  assert_true(plf_tree_length(t, ab) == 0.5);
  assert_true(plf_tree_length(t, cd) == 0.25);
  plf_tree_destroy(t);
}

static void test_unrooted(void **state) {
  (void)state;
  plf_tree *t = one("(b:2,a:1,(d:4,c:3):0.5);");
  assert_true(plf_tree_is_unrooted(t));
  int root = plf_tree_root(t), x = plf_tree_child(t, root, 0);
  assert_int_equal(plf_tree_child(t, x, 0), 1); /* b */
  assert_int_equal(plf_tree_child(t, x, 1), 0); /* a */
  assert_true(plf_tree_length(t, x) == 0.0);
  int cd = plf_tree_child(t, root, 1);
  assert_int_equal(plf_tree_child(t, cd, 0), 3);
  assert_true(plf_tree_length(t, cd) == 0.5);
  assert_int_equal(plf_nni_count(t), 2);
  plf_tree_destroy(t);
}

static void test_syntax_variants(void **state) {
  (void)state;
  static const char *const names[] = {"Homo sapiens", "it's", "x_y", "d"};
  const char *text =
      "\n"
      "  [a comment] (( 'Homo sapiens' : 1.5 [c] , 'it''s':2 ) 97 : 0.1 ,\t"
      "(x_y:1e-3,'d':0)'label':2.0E+0)root:0.0;[trailing]\r\n"
      "   \r\n"
      "[only a comment]\n"
      "('it''s':1,(d:1,x_y:1)0.95:1,'Homo sapiens':1);";
  plf_tree **trees;
  int count;
  char err[256] = "";
  int rc = plf_newick_parse(text, strlen(text), "v.nwk", names, 4, &trees,
                            &count, err, sizeof err);
  if (rc) fail_msg("rc %d: %s", rc, err);
  assert_int_equal(count, 2);
  assert_false(plf_tree_is_unrooted(trees[0]));
  assert_true(plf_tree_is_unrooted(trees[1]));
  assert_true(plf_tree_length(trees[0], 0) == 1.5);
  assert_true(plf_tree_length(trees[0], 1) == 2.0);
  assert_true(plf_tree_length(trees[0], 2) == 1e-3);
  assert_true(plf_tree_length(trees[0], 3) == 0.0);
  plf_trees_destroy(trees, count);
}

typedef struct bad {
  const char *text;
  const char *where;  /* "t.nwk:N:" */
  const char *reason;
} bad;

static void test_errors(void **state) {
  (void)state;
  static const bad cases[] = {
      {"((a,b:1):1,c:1,d:1);", "t.nwk:1:", "taxon 'a' has no branch length"},
      {"((a:1,b:1),c:1,d:1);", "t.nwk:1:",
       "the subtree closed at column 10 has no branch length"},
      {"((a:1,b:1):1,c:1,e:1);", "t.nwk:1:",
       "taxon 'e' is not in the taxon list"},
      {"((a:1,b:1):1,c:1,a:1);", "t.nwk:1:", "taxon 'a' appears twice"},
      {"((a:1,b:1):1,c:1);", "t.nwk:1:",
       "taxon 'd' of the taxon list is not in the tree"},
      {"((a:1,b:1):1,(c:1,d:1):1,e:1);", "t.nwk:1:", "'e' is not in"},
      {"((a:x,b:1):1,c:1,d:1);", "t.nwk:1:", "bad branch length 'x'"},
      {"((a:1,b:-1):1,c:1,d:1);", "t.nwk:1:", "negative branch length '-1'"},
      {"((a:1,b:inf):1,c:1,d:1);", "t.nwk:1:", "bad branch length 'inf'"},
      {"((a:1,b:nan):1,c:1,d:1);", "t.nwk:1:", "bad branch length 'nan'"},
      {"((a:1,b:1e999):1,c:1,d:1);", "t.nwk:1:", "bad branch length"},
      {"((a:,b:1):1,c:1,d:1);", "t.nwk:1:", "':' without a branch length"},
      {"((a:1,b:1):1,c:1,d:1)", "t.nwk:1:", "missing ';'"},
      {"((a:1,b:1):1,c:1,d:1); x", "t.nwk:1:", "text after ';'"},
      {"((a:1,b:1):1,c:1,d:1);((a:1,b:1):1,c:1,d:1);", "t.nwk:1:",
       "text after ';'"},
      {"((a:1,b:1):1,c:1,d:1", "t.nwk:1:", "missing ';'"},
      {"((a:1,b:1):1,c:1,d:1;", "t.nwk:1:", "1 '(' not closed before ';'"},
      {"(a:1,b:1):1,c:1,d:1);", "t.nwk:1:", "',' outside parentheses"},
      {"((a:1,b:1):1,(c:1,d:1):1));", "t.nwk:1:", "')' outside parentheses"},
      {"(((a:1,b:1):1,(c:1,d:1):1):1);", "t.nwk:1:",
       "the root has 1 child, expected 2 (rooted) or 3 (unrooted)"},
      {"((a:1,b:1,c:1):1,d:1);", "t.nwk:1:",
       "an internal node with 3 children, expected 2"},
      {"(((a:1):1,b:1):1,c:1,d:1);", "t.nwk:1:",
       "an internal node with 1 child, expected 2"},
      {"(a:1,b:1,c:1,d:1);", "t.nwk:1:", "a node with more than 3 children"},
      {"a;", "t.nwk:1:", "a tree of one taxon ('a')"},
      {"(('':1,b:1):1,c:1,d:1);", "t.nwk:1:", "a tip without a name"},
      {"((:1,b:1):1,c:1,d:1);", "t.nwk:1:", "':' where a node should start"},
      {"(('a:1,b:1):1,c:1,d:1);", "t.nwk:1:", "unterminated quoted name"},
      {"((a:1,b:1)[x:1,c:1,d:1);", "t.nwk:1:", "unterminated comment '['"},
      {"((a:1,b:1):1,\nc:1,d:1);", "t.nwk:1:",
       "the line ends inside the tree"},
      {"((a:1,b:1):1 c:1,d:1);", "t.nwk:1:",
       "'c' where ',', ')' or ';' should come (column 14)"},
      {"((a:1,b:1):1,c:1,\x01:1);", "t.nwk:1:", "\\x01 where a node"},
      {"\n\n   \n((a:1,b:1):1,c:1,d:1);\n\n((a:1 b:1):1,c:1,d:1);",
       "t.nwk:6:", "'b' where ','"},
      {"", "t.nwk: no tree", ""},
      {"\n \n[c]\n", "t.nwk: no tree", ""},
      {"(((((((a:1,b:1):1,c:1):1,d:1):1);", "t.nwk:1:",
       "parentheses nested deeper than 4 taxa allow"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    plf_tree **trees = (plf_tree **)&trees;
    int count = -1;
    char err[256] = "";
    int rc = parse(cases[i].text, abcd, 4, &trees, &count, err, sizeof err);
    if (rc != EMBER_EFORMAT)
      fail_msg("case %zu \"%s\": rc %d, expected EFORMAT (%s)", i,
               cases[i].text, rc, err);
    assert_null(trees);
    assert_int_equal(count, 0);
    if (strncmp(err, cases[i].where, strlen(cases[i].where)) != 0)
      fail_msg("case %zu: \"%s\" does not start with \"%s\"", i, err,
               cases[i].where);
    assert_contains(err, cases[i].reason);
  }
  /* a NUL byte, which strlen() would hide */
  static const char nul[] = "((a:1,b\0:1):1,c:1,d:1);";
  plf_tree **trees;
  int count;
  char err[256] = "";
  assert_int_equal(plf_newick_parse(nul, sizeof nul - 1, "n.nwk", abcd, 4,
                                    &trees, &count, err, sizeof err),
                   EMBER_EFORMAT);
  assert_contains(err, "n.nwk:1: NUL byte");
}

static void test_long_name(void **state) {
  (void)state;
  size_t n = PLF_NEWICK_MAX_NAME + 10;
  char *text = malloc(n + 64);
  assert_non_null(text);
  strcpy(text, "((");
  memset(text + 2, 'q', n);
  strcpy(text + 2 + n, ":1,b:1):1,c:1,d:1);");
  plf_tree **trees;
  int count;
  char err[256];
  assert_int_equal(parse(text, abcd, 4, &trees, &count, err, sizeof err),
                   EMBER_EFORMAT);
  assert_contains(err, "t.nwk:1: name longer than 1024 bytes (column 3)");
  text[1] = '\'';
  text[2 + n] = '\'';
  assert_int_equal(parse(text, abcd, 4, &trees, &count, err, sizeof err),
                   EMBER_EFORMAT);
  assert_contains(err, "name longer than 1024 bytes");
  free(text);
}

static void test_taxon_list(void **state) {
  (void)state;
  plf_tree **trees;
  int count;
  char err[256];
  static const char *const dup[] = {"a", "b", "a"};
  assert_int_equal(parse("(a:1,b:1);", dup, 3, &trees, &count, err,
                         sizeof err),
                   EMBER_EPARAM);
  assert_contains(err, "taxon list: 'a' is there twice");
  static const char *const empty[] = {"a", ""};
  assert_int_equal(parse("(a:1,b:1);", empty, 2, &trees, &count, err,
                         sizeof err),
                   EMBER_EPARAM);
  assert_contains(err, "taxon 1: empty");
  assert_int_equal(parse("(a:1,b:1);", abcd, 1, &trees, &count, err,
                         sizeof err),
                   EMBER_EPARAM);
  assert_int_equal(parse("(a:1,b:1);", NULL, 2, &trees, &count, err,
                         sizeof err),
                   EMBER_EPARAM);
  assert_int_equal(parse("(b:1,a:1);", abcd, 2, &trees, &count, err,
                         sizeof err),
                   0);
  assert_int_equal(count, 1);
  assert_int_equal(plf_tree_parent(trees[0], 0), 2);
  plf_trees_destroy(trees, count);
}

static void test_many_trees(void **state) {
  (void)state;
  const char *line = "(a:1,b:1);\n";
  size_t ll = strlen(line), n = PLF_NEWICK_MAX_TREES + 1;
  char *text = malloc(n * ll);
  assert_non_null(text);
  for (size_t i = 0; i < n; i++) memcpy(text + i * ll, line, ll);
  plf_tree **trees;
  int count;
  char err[256];
  assert_int_equal(plf_newick_parse(text, (n - 1) * ll, "m", abcd, 2, &trees,
                                    &count, err, sizeof err),
                   0);
  assert_int_equal(count, PLF_NEWICK_MAX_TREES);
  plf_trees_destroy(trees, count);
  assert_int_equal(plf_newick_parse(text, n * ll, "m", abcd, 2, &trees,
                                    &count, err, sizeof err),
                   EMBER_EFORMAT);
  assert_contains(err, "m:100001: more than 100000 trees");
  free(text);
}

/* ---- deep trees on a small stack ---------------------------------------- */

#define DEEP 100000

typedef struct deep_job {
  char **names;
  char *text;
  size_t len;
  int unrooted;
  int rc;
  int tips, depth, min_ops;
  char err[256];
} deep_job;

/* caterpillar: ((((t0:1,t1:1):1,t2:1):1,...) or, nested the other way,
 * (t0:1,(t1:1,(t2:1,...))) */
static void caterpillar(deep_job *j, int left_deep, int unrooted) {
  size_t cap = (size_t)DEEP * 24 + 64, o = 0;
  char *s = malloc(cap);
  assert_non_null(s);
  int last = unrooted ? DEEP - 2 : DEEP - 1; /* joined at the root */
  if (left_deep) {
    for (int i = 0; i < last; i++) s[o++] = '(';
    o += (size_t)sprintf(s + o, "t0:0.5");
    for (int i = 1; i <= last; i++)
      o += (size_t)sprintf(s + o, ",t%d:0.5)%s", i, i == last ? "" : ":0.1");
    if (unrooted) {
      /* a third subtree in the root's parentheses */
      o--;
      o += (size_t)sprintf(s + o, ",t%d:0.5)", DEEP - 1);
    }
  } else {
    for (int i = 0; i < DEEP - 1; i++)
      o += (size_t)sprintf(s + o, "(t%d:0.5,", i);
    o += (size_t)sprintf(s + o, "t%d:0.5", DEEP - 1);
    for (int i = 0; i < DEEP - 1; i++)
      o += (size_t)sprintf(s + o, i == DEEP - 2 ? ")" : "):0.1");
  }
  s[o++] = ';';
  s[o++] = '\n';
  j->text = s;
  j->len = o;
  j->unrooted = unrooted;
}

static void *deep_parse(void *arg) {
  deep_job *j = arg;
  plf_tree **trees;
  int count;
  j->rc = plf_newick_parse(j->text, j->len, "deep", (const char *const *)j->names,
                           DEEP, &trees, &count, j->err, sizeof j->err);
  if (j->rc) return NULL;
  plf_tree *t = trees[0];
  j->tips = plf_tree_tip_count(t);
  j->unrooted = plf_tree_is_unrooted(t);
  for (int tip = 0; tip < DEEP; tip += DEEP - 1) {
    int depth = 0;
    for (int v = tip; v != PLF_NONE; v = plf_tree_parent(t, v)) depth++;
    if (depth > j->depth) j->depth = depth;
  }
  /* the planner walks it without recursion too, in its fewest slots */
  plf_planner *p;
  plf_plan plan;
  plf_plan_init(&plan);
  j->rc = plf_planner_create(DEEP, plf_plan_min_vectors(DEEP), 0, &p);
  if (j->rc == 0) j->rc = plf_planner_add_tree(p, t, &plan);
  j->min_ops = (int)plan.op_count;
  plf_plan_free(&plan);
  plf_planner_destroy(p);
  plf_trees_destroy(trees, count);
  return NULL;
}

static void test_deep(void **state) {
  (void)state;
  char **names = malloc(DEEP * sizeof *names);
  assert_non_null(names);
  for (int i = 0; i < DEEP; i++) {
    names[i] = malloc(12);
    assert_non_null(names[i]);
    sprintf(names[i], "t%d", i);
  }
  for (int k = 0; k < 3; k++) {
    deep_job j = {.names = names};
    caterpillar(&j, k != 1, k == 2);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t th;
    assert_int_equal(pthread_create(&th, &attr, deep_parse, &j), 0);
    pthread_join(th, NULL);
    pthread_attr_destroy(&attr);
    if (j.rc) fail_msg("caterpillar %d: rc %d %s", k, j.rc, j.err);
    assert_int_equal(j.tips, DEEP);
    assert_int_equal(j.unrooted, k == 2);
    assert_true(j.depth >= DEEP - 2);
    assert_int_equal(j.min_ops, DEEP - 1);
    free(j.text);
  }
  for (int i = 0; i < DEEP; i++) free(names[i]);
  free(names);
}

/* ---- files ---------------------------------------------------------------- */

static void test_file(void **state) {
  (void)state;
  char path[] = "/tmp/test_plf_newick_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char *text = "((a:1,b:1):1,c:1,d:1);\n\n(a:1,b:1,(c:1,d:1):1);\n"
                     "(a:1,b:1,(c:1,d):1);\n";
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  plf_tree **trees;
  int count;
  char err[512], want[300];
  assert_int_equal(plf_newick_read_file(path, abcd, 4, &trees, &count, err,
                                        sizeof err),
                   EMBER_EFORMAT);
  snprintf(want, sizeof want, "%s:4: taxon 'd' has no branch length", path);
  assert_contains(err, want);
  assert_int_equal(truncate(path, (off_t)strlen(text) - 21), 0);
  assert_int_equal(plf_newick_read_file(path, abcd, 4, &trees, &count, err,
                                        sizeof err),
                   0);
  assert_int_equal(count, 2);
  plf_trees_destroy(trees, count);
  unlink(path);
  assert_int_equal(plf_newick_read_file(path, abcd, 4, &trees, &count, err,
                                        sizeof err),
                   EMBER_EIO);
  assert_contains(err, "cannot open");
  assert_int_equal(plf_newick_read_file("/tmp", abcd, 4, &trees, &count, err,
                                        sizeof err),
                   EMBER_EIO);
}

/* ---- allocation failures ------------------------------------------------- */

static void test_alloc_failures(void **state) {
  (void)state;
  const char *text = "((a:1,b:1):1,c:1,d:1);\n(a:1,b:1,(c:1,d:1):1);\n"
                     "(((a:1,b:1):1,c:1):1,d:1);\n";
  int failures = 0;
  for (int n = 1;; n++) {
    long live = alloc_live;
    plf_tree **trees;
    int count;
    char err[256] = "";
    alloc_count = 0;
    alloc_fail_at = n;
    int rc = parse(text, abcd, 4, &trees, &count, err, sizeof err);
    alloc_fail_at = 0;
    if (rc == 0) {
      assert_int_equal(count, 3);
      plf_trees_destroy(trees, count);
      assert_int_equal(alloc_live, live);
      break;
    }
    assert_int_equal(rc, EMBER_ENOMEM);
    assert_contains(err, "out of memory");
    assert_int_equal(alloc_live, live);
    failures++;
  }
  assert_true(failures >= 8);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_rooted),
      cmocka_unit_test(test_unrooted),
      cmocka_unit_test(test_syntax_variants),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_long_name),
      cmocka_unit_test(test_taxon_list),
      cmocka_unit_test(test_many_trees),
      cmocka_unit_test(test_deep),
      cmocka_unit_test(test_file),
      cmocka_unit_test(test_alloc_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
