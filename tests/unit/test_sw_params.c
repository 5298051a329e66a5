/* test_sw_params.c - scoring from Params, residue encoding, and the
 * descriptor's validate/run_cpu/work on good and bad inputs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ember/ember_errors.h"
#include "sw/sw.h"

#define assert_contains(text, needle)                                        \
  do {                                                                       \
    if (!strstr((text), (needle)))                                           \
      fail_msg("\"%s\" does not contain \"%s\"", (text), (needle));          \
  } while (0)

static void expect_param_error(const Ember__Sw__Params *p,
                               const char *message) {
  acc_sw_scoring s;
  char err[300] = "";
  int rc = acc_sw_scoring_from_params(p, &s, err, sizeof err);
  if (rc != EMBER_EPARAM)
    fail_msg("expected EPARAM (\"%s\"), got %d (\"%s\")", message, rc, err);
  assert_contains(err, message);
}

static void test_dna_defaults(void **state) {
  (void)state;
  acc_sw_scoring s;
  char err[200];
  assert_int_equal(acc_sw_scoring_from_params(NULL, &s, err, sizeof err), 0);
  assert_int_equal(s.size, 5);
  assert_int_equal(s.gap_open, 6);
  assert_int_equal(s.gap_extend, 1);
  assert_int_equal(s.max_score, 3);
  assert_int_equal(s.min_score, -3);
  assert_int_equal(s.matrix[0 * 5 + 0], 3);
  assert_int_equal(s.matrix[0 * 5 + 1], -3);
  assert_int_equal(s.matrix[4 * 5 + 4], 0);
  assert_int_equal(s.matrix[2 * 5 + 4], 0);
  /* encoding: ACGT either case, other IUPAC letters unknown, rest invalid */
  assert_int_equal(s.encode['A'], 0);
  assert_int_equal(s.encode['c'], 1);
  assert_int_equal(s.encode['G'], 2);
  assert_int_equal(s.encode['t'], 3);
  const char *iupac = "UNRYKMSWBDHVunrykmswbdhv";
  for (const char *c = iupac; *c; c++)
    assert_int_equal(s.encode[(unsigned char)*c], 4);
  const char *bad = "EFIJLOPQXZefz*-.0 \n";
  for (const char *c = bad; *c; c++)
    assert_int_equal(s.encode[(unsigned char)*c], -1);
  assert_int_equal(s.encode[0], -1);
  assert_int_equal(s.encode[0xff], -1);
}

static void test_dna_errors(void **state) {
  (void)state;
  Ember__Sw__Params p = EMBER__SW__PARAMS__INIT;
  p.has_match = 1;
  p.match = 0;
  expect_param_error(&p, "match must be in [1, 127], got 0");
  p.match = 200;
  expect_param_error(&p, "match must be in [1, 127], got 200");
  p.match = 2;
  p.has_mismatch = 1;
  p.mismatch = 3;
  expect_param_error(&p, "mismatch must be in [-128, -1], got 3");
  p.mismatch = -2;
  p.has_gap_open = 1;
  p.gap_open = -6;
  expect_param_error(&p, "gap_open must be a non-negative penalty, got -6");
  expect_param_error(&p, "a penalty of the wrong sign");
  p.gap_open = 5;
  p.has_gap_extend = 1;
  p.gap_extend = -1;
  expect_param_error(&p, "gap_extend must be a non-negative penalty, got -1");
  p.gap_extend = ACC_SW_MAX_GAP + 1;
  expect_param_error(&p, "gap_extend must be at most 1048576");
  p.gap_extend = 0;
  p.matrix_name = "BLOSUM62";
  expect_param_error(&p, "DNA scores with match/mismatch");
  p.matrix_name = NULL;
  Ember__Sw__Matrix mx = EMBER__SW__MATRIX__INIT;
  p.matrix = &mx;
  expect_param_error(&p, "matrix_name and matrix are for the PROTEIN");
  p.matrix = NULL;
  p.alphabet = (Ember__Sw__Alphabet)7;
  expect_param_error(&p, "unknown alphabet 7");
  /* zero penalties are allowed */
  p.alphabet = EMBER__SW__ALPHABET__DNA;
  p.gap_open = 0;
  acc_sw_scoring s;
  assert_int_equal(acc_sw_scoring_from_params(&p, &s, NULL, 0), 0);
  assert_int_equal(s.gap_open, 0);
  assert_int_equal(s.gap_extend, 0);
}

static void test_protein(void **state) {
  (void)state;
  Ember__Sw__Params p = EMBER__SW__PARAMS__INIT;
  p.alphabet = EMBER__SW__ALPHABET__PROTEIN;
  acc_sw_scoring s;
  char err[300];
  /* defaults: BLOSUM62, 11/1 */
  assert_int_equal(acc_sw_scoring_from_params(&p, &s, err, sizeof err), 0);
  assert_int_equal(s.size, 24);
  assert_int_equal(s.gap_open, 11);
  assert_int_equal(s.gap_extend, 1);
  assert_int_equal(s.max_score, 11);
  assert_int_equal(s.min_score, -4);
  assert_int_equal(s.encode['W'], 17);
  assert_int_equal(s.encode['w'], 17);
  assert_int_equal(s.encode['*'], 23);
  /* letters outside the alphabet map to the last index, as parasail */
  assert_int_equal(s.encode['J'], 23);
  assert_int_equal(s.encode['o'], 23);
  assert_int_equal(s.encode['U'], 23);
  assert_int_equal(s.encode['-'], -1);
  assert_int_equal(s.encode['1'], -1);

  p.matrix_name = "pam250";
  assert_int_equal(acc_sw_scoring_from_params(&p, &s, err, sizeof err), 0);
  assert_int_equal(s.max_score, 17);

  p.matrix_name = "BLOSUM99";
  expect_param_error(&p, "unknown matrix 'BLOSUM99' (built-in: BLOSUM45, "
                         "BLOSUM50, BLOSUM62, BLOSUM80, PAM250)");
  p.matrix_name = "BLOSUM62";
  Ember__Sw__Matrix mx = EMBER__SW__MATRIX__INIT;
  p.matrix = &mx;
  expect_param_error(&p, "give matrix_name or matrix, not both");
  p.matrix_name = NULL;
  p.has_match = 1;
  expect_param_error(&p, "match/mismatch are for the DNA alphabet");
  p.has_match = 0;

  /* explicit matrices */
  int32_t scores[9] = {2, -1, -1, -1, 2, -1, -1, -1, 2};
  mx.alphabet = "HPx";
  mx.scores = scores;
  mx.n_scores = 9;
  assert_int_equal(acc_sw_scoring_from_params(&p, &s, err, sizeof err), 0);
  assert_int_equal(s.size, 3);
  assert_int_equal(s.encode['h'], 0);
  assert_int_equal(s.encode['X'], 2);
  assert_int_equal(s.encode['Q'], 2);   /* not in the alphabet: last */
  mx.n_scores = 8;
  expect_param_error(&p, "matrix.scores has 8 values, expected 9");
  mx.n_scores = 9;
  mx.alphabet = "HPh";
  expect_param_error(&p, "matrix.alphabet: letter 'h' appears twice");
  mx.alphabet = "";
  expect_param_error(&p, "matrix.alphabet must have 1 to 32 letters, got 0");
  mx.alphabet = "H P";
  expect_param_error(&p, "letter 1 is not a printable character (0x20)");
  mx.alphabet = "HPx";
  scores[4] = 128;
  expect_param_error(&p, "matrix score 128 ('P' vs 'P') is out of range");
}

/* ---- the descriptor ------------------------------------------------------ */

typedef struct blocks {
  uint8_t *q, *r;
  acc_block in[2];
} blocks;

static void make_blocks(blocks *b, const char *const *qs, size_t nq,
                        const char *const *rs, size_t nr) {
  size_t ql[16], rl[16];
  for (size_t i = 0; i < nq; i++) ql[i] = strlen(qs[i]);
  for (size_t i = 0; i < nr; i++) rl[i] = strlen(rs[i]);
  size_t qn = acc_seqset_bytes(ql, nq), rn = acc_seqset_bytes(rl, nr);
  b->q = malloc(qn);
  b->r = malloc(rn);
  assert_int_equal(acc_seqset_write(b->q, qn, qs, ql, nq), 0);
  assert_int_equal(acc_seqset_write(b->r, rn, rs, rl, nr), 0);
  b->in[0] = (acc_block){b->q, qn};
  b->in[1] = (acc_block){b->r, rn};
}

static void free_blocks(blocks *b) {
  free(b->q);
  free(b->r);
}

static int validate(const uint8_t *params, size_t len, const blocks *b,
                    size_t n_inputs, void **prep, char *err, size_t err_len) {
  return acc_sw_descriptor.validate(params, len, b->in, n_inputs, prep, err,
                                    err_len);
}

static void expect_validate(const blocks *b, size_t n_inputs, int code,
                            const char *message) {
  void *prep = (void *)1;
  char err[300] = "";
  int rc = validate(NULL, 0, b, n_inputs, &prep, err, sizeof err);
  if (rc != code)
    fail_msg("validate returned %d (\"%s\"), expected %d (\"%s\")", rc, err,
             code, message);
  assert_null(prep);
  assert_string_equal(err, message);
}

static void test_descriptor_fields(void **state) {
  (void)state;
  const acc_descriptor *d = &acc_sw_descriptor;
  assert_int_equal(d->abi_version, ACC_ABI_VERSION);
  assert_string_equal(d->name, "sw");
  assert_string_equal(d->work_unit, "cells");
  assert_ptr_equal(d->params_descriptor, &ember__sw__params__descriptor);
  assert_ptr_equal(d->result_descriptor, &ember__sw__result__descriptor);
  d->release(NULL);
  assert_int_equal(d->work(NULL), 0);
}

static void test_validate_errors(void **state) {
  (void)state;
  const char *q[] = {"ACGT", "ACGTACGT", "", "GATTACA"};
  const char *r[] = {"ACGT", "ACGT", "ACGT"};
  blocks b;

  make_blocks(&b, q, 2, r, 3);
  expect_validate(&b, 2, EMBER_EFORMAT,
                  "mismatched batch sizes: 2 queries, 3 references");
  expect_validate(&b, 1, EMBER_EFORMAT,
                  "expected 2 input blocks (queries, references), got 1");
  expect_validate(&b, 3, EMBER_EFORMAT,
                  "expected 2 input blocks (queries, references), got 3");
  free_blocks(&b);

  make_blocks(&b, q, 3, r, 3);
  expect_validate(&b, 2, EMBER_EFORMAT, "query 2 is empty");
  free_blocks(&b);

  make_blocks(&b, q, 0, r, 0);
  expect_validate(&b, 2, EMBER_EFORMAT, "empty batch: no sequence pairs");
  free_blocks(&b);

  const char *rz[] = {"ACGT", "ACGZT"};
  make_blocks(&b, q, 2, rz, 2);
  expect_validate(&b, 2, EMBER_EFORMAT,
                  "unknown residue 'Z' (0x5a) in reference 1 at position 3");
  free_blocks(&b);

  const char *qctl[] = {"AC\x01T", "ACGT"};
  make_blocks(&b, qctl, 2, r, 2);
  expect_validate(&b, 2, EMBER_EFORMAT,
                  "unknown residue 0x01 in query 0 at position 2");
  free_blocks(&b);

  /* a broken block names itself */
  make_blocks(&b, q, 2, r, 2);
  b.in[1].size -= 1;
  expect_validate(&b, 2, EMBER_EFORMAT,
                  "block 1 (references): offset of sequence 1 ends at 8, "
                  "beyond the 7-byte residue area");
  b.in[1].size += 1;
  b.q[0] = 'X';
  expect_validate(&b, 2, EMBER_EFORMAT,
                  "block 0 (queries): not a sequence set: magic 0x31515358, "
                  "expected 0x31515345 (ESQ1)");
  free_blocks(&b);
}

static void test_validate_params(void **state) {
  (void)state;
  const char *q[] = {"ACGT"};
  blocks b;
  make_blocks(&b, q, 1, q, 1);
  void *prep = NULL;
  char err[300];

  /* bytes that are not a Params message */
  const uint8_t junk[] = {0xff, 0xff, 0xff};
  assert_int_equal(validate(junk, sizeof junk, &b, 2, &prep, err, sizeof err),
                   EMBER_EPARAM);
  assert_contains(err, "params: not a valid ember.sw.Params message");
  assert_null(prep);

  Ember__Sw__Params p = EMBER__SW__PARAMS__INIT;
  p.has_gap_open = 1;
  p.gap_open = -6;
  uint8_t buf[64];
  size_t n = ember__sw__params__pack(&p, buf);
  assert_int_equal(validate(buf, n, &b, 2, &prep, err, sizeof err),
                   EMBER_EPARAM);
  assert_contains(err, "params: gap_open must be a non-negative penalty, "
                       "got -6");

  /* protein scoring accepts letters the DNA one refuses */
  const char *pq[] = {"MKWVTFISLL"}, *pr[] = {"MKWVTFZSLL*"};
  blocks pb;
  make_blocks(&pb, pq, 1, pr, 1);
  assert_int_equal(validate(NULL, 0, &pb, 2, &prep, err, sizeof err),
                   EMBER_EFORMAT);
  /* M, K, W, V are IUPAC nucleotide codes; F is not */
  assert_contains(err, "unknown residue 'F' (0x46) in query 0 at position 5");
  Ember__Sw__Params pp = EMBER__SW__PARAMS__INIT;
  pp.has_alphabet = 1;
  pp.alphabet = EMBER__SW__ALPHABET__PROTEIN;
  n = ember__sw__params__pack(&pp, buf);
  assert_int_equal(validate(buf, n, &pb, 2, &prep, err, sizeof err), 0);
  assert_int_equal(acc_sw_descriptor.work(prep), 110);
  acc_sw_descriptor.release(prep);
  free_blocks(&pb);
  free_blocks(&b);
}

static void test_run_cpu(void **state) {
  (void)state;
  const char *q[] = {"ACGTACGTTT", "AAAA", "GGGGCCCC"};
  const char *r[] = {"GGACGTACGTTTGG", "CCCC", "TTGGGGCCCCTT"};
  blocks b;
  make_blocks(&b, q, 3, r, 3);
  void *prep = NULL;
  char err[300] = "";
  int rc = validate(NULL, 0, &b, 2, &prep, err, sizeof err);
  if (rc) fail_msg("validate: %s", err);
  assert_int_equal(acc_sw_descriptor.work(prep), 10 * 14 + 4 * 4 + 8 * 12);

  acc_output out = {NULL, 0};
  atomic_int cancel = 0;
  acc_run_ctx ctx = {.cancel = &cancel};
  rc = acc_sw_descriptor.run_cpu(prep, b.in, 2, &ctx, &out, err, sizeof err);
  if (rc) fail_msg("run_cpu: %s", err);
  Ember__Sw__Result *res = ember__sw__result__unpack(NULL, out.size, out.data);
  assert_non_null(res);
  assert_int_equal(res->n_score, 3);
  assert_int_equal(res->n_ref_end, 3);
  /* pair 0: the whole query matches r[2..11] */
  assert_int_equal(res->score[0], 30);
  assert_int_equal(res->query_start[0], 0);
  assert_int_equal(res->query_end[0], 9);
  assert_int_equal(res->ref_start[0], 2);
  assert_int_equal(res->ref_end[0], 11);
  /* pair 1: nothing scores: all -1 */
  assert_int_equal(res->score[1], 0);
  assert_int_equal(res->query_start[1], -1);
  assert_int_equal(res->query_end[1], -1);
  assert_int_equal(res->ref_start[1], -1);
  assert_int_equal(res->ref_end[1], -1);
  assert_int_equal(res->score[2], 24);
  assert_int_equal(res->ref_start[2], 2);
  assert_int_equal(res->ref_end[2], 9);
  ember__sw__result__free_unpacked(res, NULL);
  free(out.data);

  /* a canceled run stops with ECANCELED */
  cancel = 1;
  out.data = NULL;
  rc = acc_sw_descriptor.run_cpu(prep, b.in, 2, &ctx, &out, err, sizeof err);
  assert_int_equal(rc, EMBER_ECANCELED);
  assert_null(out.data);

  /* run_cpu on blocks that differ from the validated ones */
  rc = acc_sw_descriptor.run_cpu(prep, b.in, 1, NULL, &out, err, sizeof err);
  assert_int_equal(rc, EMBER_EFORMAT);
  acc_sw_descriptor.release(prep);
  free_blocks(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_dna_defaults),
    cmocka_unit_test(test_dna_errors),
    cmocka_unit_test(test_protein),
    cmocka_unit_test(test_descriptor_fields),
    cmocka_unit_test(test_validate_errors),
    cmocka_unit_test(test_validate_params),
    cmocka_unit_test(test_run_cpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
