/* test_sw_matrix.c - the NCBI matrix reader and the built-in tables, which
 * must equal parasail's entry for entry. */
#include <parasail.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ember/ember_errors.h"
#include "sw/sw.h"

#define EBLOSUM62 EMBER_SOURCE_DIR "/tests/data/sw/EBLOSUM62"

#define assert_contains(text, needle)                                        \
  do {                                                                       \
    if (!strstr((text), (needle)))                                           \
      fail_msg("\"%s\" does not contain \"%s\"", (text), (needle));          \
  } while (0)

static void assert_equals_parasail(const acc_sw_matrix *m,
                                   const parasail_matrix_t *p,
                                   const char *name) {
  if (m->size != p->size)
    fail_msg("%s: size %d, parasail %d", name, m->size, p->size);
  assert_string_equal(m->alphabet, p->alphabet);
  for (int i = 0; i < m->size; i++)
    for (int j = 0; j < m->size; j++)
      if (m->scores[i * m->size + j] != p->matrix[i * p->size + j])
        fail_msg("%s['%c']['%c'] = %d, parasail %d", name, m->alphabet[i],
                 m->alphabet[j], m->scores[i * m->size + j],
                 p->matrix[i * p->size + j]);
}

static void test_builtins_equal_parasail(void **state) {
  (void)state;
  static const char *const names[][2] = {
    {"BLOSUM45", "blosum45"}, {"BLOSUM50", "blosum50"},
    {"BLOSUM62", "blosum62"}, {"BLOSUM80", "blosum80"},
    {"PAM250", "pam250"},
  };
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    acc_sw_matrix m;
    assert_int_equal(acc_sw_matrix_builtin(names[k][0], &m), 0);
    assert_equals_parasail(&m, parasail_matrix_lookup(names[k][1]),
                           names[k][0]);
    /* names are case-insensitive */
    acc_sw_matrix lower;
    assert_int_equal(acc_sw_matrix_builtin(names[k][1], &lower), 0);
    assert_memory_equal(&m, &lower, sizeof m);
  }
  acc_sw_matrix m;
  assert_int_equal(acc_sw_matrix_builtin("BLOSUM99", &m), EMBER_ENOTFOUND);
  assert_string_equal(acc_sw_matrix_builtin_names(),
                      "BLOSUM45, BLOSUM50, BLOSUM62, BLOSUM80, PAM250");
}

static void test_file_ebl62(void **state) {
  (void)state;
  acc_sw_matrix m, b62;
  char err[256] = "";
  int rc = acc_sw_matrix_read_file(EBLOSUM62, &m, err, sizeof err);
  if (rc) fail_msg("read %s: %d %s", EBLOSUM62, rc, err);
  assert_equals_parasail(&m, parasail_matrix_lookup("blosum62"), "EBLOSUM62");
  assert_int_equal(acc_sw_matrix_builtin("BLOSUM62", &b62), 0);
  assert_memory_equal(&m, &b62, sizeof m);
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  assert_non_null(f);
  char *buf = malloc(1 << 16);
  *len = fread(buf, 1, 1 << 16, f);
  fclose(f);
  return buf;
}

/* the row of letter row (0-based line of the file) loses its last score */
static void test_file_short_row(void **state) {
  (void)state;
  size_t len;
  char *text = slurp(EBLOSUM62, &len);
  char *q = strstr(text, "\nQ ");
  assert_non_null(q);
  char *eol = strchr(q + 1, '\n');
  char *last = eol;
  while (last[-1] == ' ') last--;             /* trailing blanks */
  while (last[-1] != ' ') last--;             /* the last score */
  memset(last, ' ', (size_t)(eol - last));
  acc_sw_matrix m;
  char err[256];
  assert_int_equal(acc_sw_matrix_parse(text, len, "EBLOSUM62", &m, err,
                                       sizeof err), EMBER_EFORMAT);
  assert_string_equal(err, "EBLOSUM62:13: row 'Q' has 23 scores, "
                           "expected 24");
  free(text);
}

static void expect_error(const char *text, const char *message) {
  acc_sw_matrix m;
  char err[256] = "";
  int rc = acc_sw_matrix_parse(text, strlen(text), "t", &m, err, sizeof err);
  if (rc != EMBER_EFORMAT)
    fail_msg("parse of \"%s\" returned %d (err \"%s\"), expected EFORMAT",
             text, rc, err);
  assert_string_equal(err, message);
}

static void test_parse_errors(void **state) {
  (void)state;
  expect_error("   A R A\n", "t:1: letter 'A' appears twice in the header");
  expect_error("# c\n   A r a\n",
               "t:2: letter 'a' appears twice in the header");
  expect_error("   A R\nA 1\n", "t:2: row 'A' has 1 scores, expected 2");
  expect_error("   A R\nA 1 2 3\n", "t:2: row 'A' has 3 scores, expected 2");
  expect_error("   A R\nA 1 2\n",
               "t:2: not square: 1 rows for 2 letters, no row for 'R'");
  expect_error("   A\nA 200\n", "t:2: row 'A', column 'A': score 200 is out "
                               "of range [-128, 127]");
  expect_error("   A\nA -129\n", "t:2: row 'A', column 'A': score -129 is "
                                "out of range [-128, 127]");
  expect_error("   A\nA 99999999999999\n",
               "t:2: row 'A', column 'A': score 99999999999999 is out of "
               "range "
               "[-128, 127]");
  expect_error("   A\nA x1\n",
               "t:2: row 'A', column 'A': 'x1' is not an integer");
  expect_error("   A\nA -\n", "t:2: row 'A', column 'A': '-' is not an "
                             "integer");
  expect_error("   A \x01\n", "t:1: non-printable letter 0x01 in the header");
  expect_error("   A\n\x02 1\n", "t:2: non-printable row letter 0x02");
  expect_error("   A\xc3\xa9 B\n",
               "t:1: header entry 'A\\xc3\\xa9' is not a single letter");
  expect_error("   A\nB 1\n", "t:2: row 'B' is not a letter of the header");
  expect_error("   A R\nA 1 2\nR 1 2\nA 1 2\n", "t:4: row 'A' appears twice");
  expect_error("   A\nAA 1\n", "t:2: row label 'AA' is not a single letter");
  expect_error("", "t:1: no header line (the matrix letters)");
  expect_error("# only\n# comments\n\n",
               "t:3: no header line (the matrix letters)");

  char many[200] = "";
  for (int i = 0; i < 33; i++) {
    char l[4] = {' ', (char)('!' + i), '\0'};
    strcat(many, l);
  }
  strcat(many, "\n");
  expect_error(many, "t:1: more than 32 letters in the header");
}

static void test_parse_ok(void **state) {
  (void)state;
  /* CRLF, tabs, rows out of order, no final newline, a NUL-free buffer
   * that is not NUL-terminated */
  const char text[] = "# x\r\n\tA  b  *\r\nb -1 5 -4\r\n* -4 -4 1\r\n"
                      "A 4 -1 -4";
  acc_sw_matrix m;
  char err[128] = "";
  int rc = acc_sw_matrix_parse(text, sizeof text - 1, NULL, &m, err,
                               sizeof err);
  if (rc) fail_msg("%s", err);
  assert_int_equal(m.size, 3);
  assert_string_equal(m.alphabet, "Ab*");
  static const int32_t want[9] = {4, -1, -4, -1, 5, -4, -4, -4, 1};
  assert_memory_equal(m.scores, want, sizeof want);

  /* the source name defaults to "matrix" */
  char err2[128];
  assert_int_equal(acc_sw_matrix_parse("", 0, NULL, &m, err2, sizeof err2),
                   EMBER_EFORMAT);
  assert_contains(err2, "matrix:1: ");
}

static void test_read_file_errors(void **state) {
  (void)state;
  acc_sw_matrix m;
  char err[256];
  assert_int_equal(acc_sw_matrix_read_file("/nonexistent/EBLOSUM62", &m, err,
                                           sizeof err), EMBER_EIO);
  assert_contains(err, "/nonexistent/EBLOSUM62: cannot open: ");
  assert_int_equal(acc_sw_matrix_read_file(EMBER_SOURCE_DIR
                   "/tests/data/sw/emboss_test_hum1.fa", &m, err, sizeof err),
                   EMBER_ETOOBIG);
  assert_contains(err, "larger than 1048576 bytes");
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_builtins_equal_parasail),
    cmocka_unit_test(test_file_ebl62),
    cmocka_unit_test(test_file_short_row),
    cmocka_unit_test(test_parse_errors),
    cmocka_unit_test(test_parse_ok),
    cmocka_unit_test(test_read_file_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
