/* test_sw_seqset.c - the sequence-set block layout: writing, viewing, and
 * every way a block from the wire can be malformed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ember/ember_errors.h"
#include "sw/seqset.h"

#define assert_contains(text, needle)                                        \
  do {                                                                       \
    if (!strstr((text), (needle)))                                           \
      fail_msg("\"%s\" does not contain \"%s\"", (text), (needle));          \
  } while (0)

static void put32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)v;
  p[1] = (uint8_t)(v >> 8);
  p[2] = (uint8_t)(v >> 16);
  p[3] = (uint8_t)(v >> 24);
}

/* a valid 3-sequence block: "ACGT", "", "GG" */
static size_t sample(uint8_t *buf, size_t cap) {
  const char *res[] = {"ACGT", "", "GG"};
  size_t lens[] = {4, 0, 2};
  size_t n = acc_seqset_bytes(lens, 3);
  assert_true(n <= cap);
  assert_int_equal(acc_seqset_write(buf, n, res, lens, 3), 0);
  return n;
}

static int view(const uint8_t *data, size_t size, acc_seqset *s, char *err,
                size_t err_len) {
  acc_block b = {data, size};
  return acc_seqset_view(&b, s, err, err_len);
}

static void test_bytes(void **state) {
  (void)state;
  size_t lens[] = {4, 0, 2};
  assert_int_equal(acc_seqset_bytes(lens, 3), 8 + 4 * 4 + 6);
  assert_int_equal(acc_seqset_bytes(NULL, 0), 12);
  size_t huge[] = {(size_t)UINT32_MAX, 1};
  assert_int_equal(acc_seqset_bytes(huge, 2), 0);  /* residues overflow */
  size_t big[] = {(size_t)UINT32_MAX + 1};
  assert_int_equal(acc_seqset_bytes(big, 1), 0);
  assert_int_equal(acc_seqset_bytes(lens, (size_t)UINT32_MAX), 0);
}

static void test_roundtrip_unaligned(void **state) {
  (void)state;
  uint8_t raw[64];
  uint8_t *buf = raw + 1;            /* deliberately unaligned */
  size_t n = sample(buf, sizeof raw - 1);
  assert_int_equal(n, 30);
  /* little-endian header */
  assert_int_equal(buf[0], 0x45);
  assert_int_equal(buf[3], 0x31);
  assert_int_equal(buf[4], 3);

  acc_seqset s;
  char err[128] = "";
  assert_int_equal(view(buf, n, &s, err, sizeof err), 0);
  assert_int_equal(s.count, 3);
  const uint8_t *p;
  size_t len;
  acc_seqset_get(&s, 0, &p, &len);
  assert_int_equal(len, 4);
  assert_memory_equal(p, "ACGT", 4);
  acc_seqset_get(&s, 1, &p, &len);
  assert_int_equal(len, 0);
  acc_seqset_get(&s, 2, &p, &len);
  assert_int_equal(len, 2);
  assert_memory_equal(p, "GG", 2);
}

static void test_write_rejects_wrong_size(void **state) {
  (void)state;
  uint8_t buf[64];
  const char *res[] = {"A"};
  size_t lens[] = {1};
  assert_int_equal(acc_seqset_write(buf, 16, res, lens, 1), EMBER_EINVAL);
  assert_int_equal(acc_seqset_write(buf, 18, res, lens, 1), EMBER_EINVAL);
  assert_int_equal(acc_seqset_write(buf, 17, res, lens, 1), 0);
}

static void test_empty_set(void **state) {
  (void)state;
  uint8_t buf[12];
  assert_int_equal(acc_seqset_write(buf, 12, NULL, NULL, 0), 0);
  acc_seqset s;
  assert_int_equal(view(buf, 12, &s, NULL, 0), 0);
  assert_int_equal(s.count, 0);
}

static void test_truncated(void **state) {
  (void)state;
  uint8_t buf[64];
  size_t n = sample(buf, sizeof buf);
  acc_seqset s;
  char err[128];
  for (size_t cut = 0; cut < n; cut++) {
    err[0] = '\0';
    assert_int_equal(view(buf, cut, &s, err, sizeof err), EMBER_EFORMAT);
    assert_true(err[0] != '\0');
  }
  assert_int_equal(view(buf, 4, &s, err, sizeof err), EMBER_EFORMAT);
  assert_contains(err, "truncated: 4 bytes");
  assert_int_equal(view(buf, 20, &s, err, sizeof err), EMBER_EFORMAT);
  assert_contains(err, "count 3 needs a 16-byte offset table");
  /* a complete table but a short residue area */
  assert_int_equal(view(buf, n - 1, &s, err, sizeof err), EMBER_EFORMAT);
  assert_contains(err, "beyond the 5-byte residue area");
}

static void test_trailing_bytes(void **state) {
  (void)state;
  uint8_t buf[64];
  size_t n = sample(buf, sizeof buf);
  acc_seqset s;
  char err[128];
  assert_int_equal(view(buf, n + 3, &s, err, sizeof err), EMBER_EFORMAT);
  assert_contains(err, "size mismatch: residues end at 6 but the block "
                       "holds 9 residue bytes");
}

static void test_wrong_magic(void **state) {
  (void)state;
  uint8_t buf[64];
  size_t n = sample(buf, sizeof buf);
  buf[3] = 0x32;
  acc_seqset s;
  char err[128];
  assert_int_equal(view(buf, n, &s, err, sizeof err), EMBER_EFORMAT);
  assert_contains(err, "magic 0x32515345, expected 0x31515345");
}

static void test_count_overflow(void **state) {
  (void)state;
  uint8_t buf[64];
  size_t n = sample(buf, sizeof buf);
  acc_seqset s;
  char err[160];
  put32(buf + 4, UINT32_MAX);       /* count + 1 wraps in 32 bits */
  assert_int_equal(view(buf, n, &s, err, sizeof err), EMBER_EFORMAT);
  assert_contains(err, "count 4294967295 needs a 17179869184-byte offset");
  put32(buf + 4, 0x40000000u);      /* 4 * (count + 1) wraps in 32 bits */
  assert_int_equal(view(buf, n, &s, err, sizeof err), EMBER_EFORMAT);
  assert_contains(err, "truncated");
}

static void test_offsets(void **state) {
  (void)state;
  uint8_t buf[64];
  size_t n = sample(buf, sizeof buf);
  acc_seqset s;
  char err[128];

  put32(buf + 8, 1);                /* offsets[0] != 0 */
  assert_int_equal(view(buf, n, &s, err, sizeof err), EMBER_EFORMAT);
  assert_contains(err, "offsets[0] is 1, must be 0");

  n = sample(buf, sizeof buf);
  put32(buf + 8 + 4 * 2, 3);        /* offsets: 0 4 3 6 */
  assert_int_equal(view(buf, n, &s, err, sizeof err), EMBER_EFORMAT);
  assert_contains(err, "offsets decrease at sequence 2: 3 after 4");

  n = sample(buf, sizeof buf);
  put32(buf + 8 + 4 * 1, 100);      /* offsets: 0 100 4 6 */
  assert_int_equal(view(buf, n, &s, err, sizeof err), EMBER_EFORMAT);
  assert_contains(err, "offset of sequence 0 ends at 100, beyond the 6-byte");

  n = sample(buf, sizeof buf);
  put32(buf + 8 + 4 * 3, 0xfffffff0u);  /* last offset beyond the end */
  assert_int_equal(view(buf, n, &s, err, sizeof err), EMBER_EFORMAT);
  assert_contains(err, "beyond");
}

static void test_null_block(void **state) {
  (void)state;
  acc_seqset s;
  char err[64];
  acc_block b = {NULL, 12};
  assert_int_equal(acc_seqset_view(&b, &s, err, sizeof err), EMBER_EFORMAT);
  assert_int_equal(acc_seqset_view(NULL, &s, NULL, 0), EMBER_EFORMAT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_bytes),
    cmocka_unit_test(test_roundtrip_unaligned),
    cmocka_unit_test(test_write_rejects_wrong_size),
    cmocka_unit_test(test_empty_set),
    cmocka_unit_test(test_truncated),
    cmocka_unit_test(test_trailing_bytes),
    cmocka_unit_test(test_wrong_magic),
    cmocka_unit_test(test_count_overflow),
    cmocka_unit_test(test_offsets),
    cmocka_unit_test(test_null_block),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
