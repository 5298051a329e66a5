/* test_cnn_idx.c - MNIST idx files for the cnn accelerator
 * (accelerators/cnn/cnn_idx.c): the first 100 images and labels of
 * Fashion-MNIST's test set (tests/data/cnn, plain and gzip'd) read back;
 * Debian's whole data set where it is installed; every error (wrong
 * magic, type, truncated and trailing data, counts that differ, labels
 * out of range, limits, cut and corrupt gzip streams); floats; allocation
 * failures. */
#include <fcntl.h>
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
#include "cnn_idx.h"

#define DATA EMBER_SOURCE_DIR "/tests/data/cnn"
#define IMAGES DATA "/t10k-images-idx3-ubyte"
#define LABELS DATA "/t10k-labels-idx1-ubyte"
#define FASHION "/usr/share/datasets/fashion-mnist"

#define assert_contains(text, needle)                                        \
  do {                                                                       \
    if (!strstr((text), (needle)))                                           \
      fail_msg("\"%s\" does not contain \"%s\"", (text), (needle));          \
  } while (0)

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) fail_msg("cannot open %s", path);
  uint8_t *buf = malloc(1 << 20);
  assert_non_null(buf);
  *len = fread(buf, 1, 1 << 20, f);
  fclose(f);
  return buf;
}

static void put32(uint8_t *p, uint32_t v) {
  p[0] = (uint8_t)(v >> 24);
  p[1] = (uint8_t)(v >> 16);
  p[2] = (uint8_t)(v >> 8);
  p[3] = (uint8_t)v;
}

/* The first 100 test images, as tests/data/cnn/README.md describes them. */
static void check_slice(const cnn_data *d) {
  static const uint8_t first[10] = {9, 2, 1, 1, 6, 1, 4, 6, 5, 7};
  assert_int_equal(cnn_data_count(d), 100);
  assert_int_equal(cnn_data_rows(d), 28);
  assert_int_equal(cnn_data_cols(d), 28);
  assert_int_equal(cnn_data_classes(d), 10);
  assert_non_null(cnn_data_labels(d));
  assert_memory_equal(cnn_data_labels(d), first, sizeof first);
  const uint8_t *px = cnn_data_pixels(d);
  static const size_t which[3] = {0, 1, 99};
  static const unsigned long sums[3] = {33456, 100994, 93257};
  for (int k = 0; k < 3; k++) {
    unsigned long sum = 0;
    for (size_t i = 0; i < 784; i++) sum += px[which[k] * 784 + i];
    if (sum != sums[k])
      fail_msg("image %zu: pixel sum %lu, expected %lu", which[k], sum,
               sums[k]);
  }
  assert_int_equal(px[99 * 784 + 400], 121);
}

/* ---- the real slice ------------------------------------------------------ */
static void test_slice(void **state) {
  (void)state;
  cnn_data *d = NULL;
  char err[512];
  int rc = cnn_data_read(IMAGES, LABELS, 10, &d, err, sizeof err);
  if (rc) fail_msg("%s", err);
  check_slice(d);
  cnn_data_destroy(d);
  rc = cnn_data_read(DATA "/gz/t10k-images-idx3-ubyte.gz",
                     DATA "/gz/t10k-labels-idx1-ubyte.gz", 10, &d, err,
                     sizeof err);
  if (rc) fail_msg("%s", err);
  check_slice(d);
  cnn_data_destroy(d);
  /* a mix, and classes: 0 for any byte */
  rc = cnn_data_read(IMAGES, DATA "/gz/t10k-labels-idx1-ubyte.gz", 0, &d,
                     err, sizeof err);
  if (rc) fail_msg("%s", err);
  check_slice(d);
  cnn_data_destroy(d);
  /* images only */
  rc = cnn_data_read(IMAGES, NULL, 10, &d, err, sizeof err);
  if (rc) fail_msg("%s", err);
  assert_int_equal(cnn_data_count(d), 100);
  assert_null(cnn_data_labels(d));
  assert_int_equal(cnn_data_classes(d), 0);
  cnn_data_destroy(d);
  cnn_data_destroy(NULL);
  /* from memory */
  size_t il, ll;
  uint8_t *im = slurp(IMAGES, &il), *lb = slurp(LABELS, &ll);
  rc = cnn_data_parse(im, il, lb, ll, "mem", 10, &d, err, sizeof err);
  if (rc) fail_msg("%s", err);
  check_slice(d);
  cnn_data_destroy(d);
  free(im);
  free(lb);
}

static void test_dirs(void **state) {
  (void)state;
  cnn_data *d = (cnn_data *)1;
  char err[512];
  int rc = cnn_data_read_dir(DATA, CNN_SPLIT_TEST, CNN_FASHION_CLASSES, &d,
                             err, sizeof err);
  if (rc) fail_msg("%s", err);
  check_slice(d);
  cnn_data_destroy(d);
  rc = cnn_data_read_dir(DATA "/gz", CNN_SPLIT_TEST, CNN_FASHION_CLASSES, &d,
                         err, sizeof err);
  if (rc) fail_msg("%s", err);
  check_slice(d);
  cnn_data_destroy(d);
  assert_int_equal(cnn_data_read_dir(DATA, CNN_SPLIT_TRAIN, 10, &d, err,
                                     sizeof err),
                   EMBER_ENOTFOUND);
  assert_null(d);
  assert_string_equal(err, DATA ": no train-images-idx3-ubyte or "
                                "train-images-idx3-ubyte.gz");
  assert_int_equal(cnn_data_read_dir(DATA, (cnn_data_split)7, 10, &d, err,
                                     sizeof err),
                   EMBER_EINVAL);
  /* Debian's dataset-fashion-mnist, where it is installed */
  if (access(FASHION "/train-labels-idx1-ubyte.gz", R_OK) != 0) {
    print_message("dataset-fashion-mnist not installed: %s skipped\n",
                  FASHION);
    return;
  }
  static const size_t counts[2] = {60000, 10000};
  for (int s = 0; s < 2; s++) {
    rc = cnn_data_read_dir(FASHION, (cnn_data_split)s, CNN_FASHION_CLASSES, &d,
                           err, sizeof err);
    if (rc) fail_msg("%s", err);
    assert_int_equal(cnn_data_count(d), counts[s]);
    assert_int_equal(cnn_data_rows(d), 28);
    assert_int_equal(cnn_data_classes(d), 10);
    /* Fashion-MNIST is balanced: each class is a tenth */
    size_t per[10] = {0};
    for (size_t i = 0; i < counts[s]; i++) per[cnn_data_labels(d)[i]]++;
    for (int c = 0; c < 10; c++) assert_int_equal(per[c], counts[s] / 10);
    if (s == CNN_SPLIT_TEST) {
      assert_memory_equal(cnn_data_labels(d), "\x09\x02\x01\x01\x06", 5);
      assert_int_equal(cnn_data_pixels(d)[99 * 784 + 400], 121);
    }
    cnn_data_destroy(d);
  }
}

static void test_float(void **state) {
  (void)state;
  cnn_data *d = NULL;
  char err[512];
  if (cnn_data_read(IMAGES, LABELS, 10, &d, err, sizeof err))
    fail_msg("%s", err);
  float *f = malloc(2 * 784 * sizeof *f);
  assert_non_null(f);
  assert_int_equal(cnn_data_to_float(d, 98, 2, f), 0);
  const uint8_t *px = cnn_data_pixels(d) + 98 * 784;
  int saw_one = 0;
  for (size_t i = 0; i < 2 * 784; i++) {
    if (!(f[i] >= 0.0f && f[i] <= 1.0f) || f[i] != (float)px[i] / 255.0f)
      fail_msg("value %zu: %g for pixel %u", i, (double)f[i], px[i]);
    saw_one |= px[i] == 255 && f[i] == 1.0f;
  }
  assert_true(f[1 * 784 + 400] == 121.0f / 255.0f);
  assert_int_equal(cnn_data_to_float(d, 99, 2, f), EMBER_EINVAL);
  assert_int_equal(cnn_data_to_float(d, 101, 0, f), EMBER_EINVAL);
  assert_int_equal(cnn_data_to_float(d, 100, 0, f), 0);
  assert_int_equal(cnn_data_to_float(d, 0, 1, NULL), EMBER_EINVAL);
  (void)saw_one;
  free(f);
  cnn_data_destroy(d);
}

/* ---- errors ---------------------------------------------------------------------- */

/* images and labels must fail with rc and a message containing want. */
static void parse_fails(const uint8_t *im, size_t il, const uint8_t *lb,
                        size_t ll, unsigned classes, int rc,
                        const char *want) {
  cnn_data *d = (cnn_data *)1;
  char err[512];
  int got = cnn_data_parse(im, il, lb, ll, "t", classes, &d, err, sizeof err);
  if (got != rc) fail_msg("rc %d (%s), expected %d", got, err, rc);
  assert_null(d);
  if (strncmp(err, "t", 1) != 0) fail_msg("\"%s\" names no source", err);
  assert_contains(err, want);
}

static void test_errors(void **state) {
  (void)state;
  const int F = EMBER_EFORMAT, B = EMBER_ETOOBIG;
  size_t il, ll, gl;
  uint8_t *im = slurp(IMAGES, &il), *lb = slurp(LABELS, &ll);
  uint8_t *gz = slurp(DATA "/gz/t10k-images-idx3-ubyte.gz", &gl);
  uint8_t *x = malloc(il + 16);
  assert_non_null(x);

  /* magic */
  parse_fails(lb, ll, NULL, 0, 10, F,
              "t: wrong magic 0x00000801, expected 0x00000803: an idx label "
              "file where images were expected");
  parse_fails(im, il, im, il, 10, F,
              "t (labels): wrong magic 0x00000803, expected 0x00000801: an "
              "idx image file where labels were expected");
  parse_fails(gz, gl, NULL, 0, 10, F,
              "wrong magic 0x1f8b0800, expected 0x00000803: gzip data");
  memcpy(x, im, il);
  x[2] = 0x0D;
  parse_fails(x, il, NULL, 0, 10, F,
              "t: wrong magic 0x00000d03, expected 0x00000803: idx data type "
              "0x0d not supported (only 0x08, unsigned bytes)");
  parse_fails((const uint8_t *)"P5\n28 28\n255\n", 13, NULL, 0, 10, F,
              "t: wrong magic 0x50350a32, expected 0x00000803: not an idx "
              "images file");
  x[2] = 0x08;
  x[3] = 2; /* two dimensions */
  parse_fails(x, il, NULL, 0, 10, F, "wrong magic 0x00000802");
  /* truncated */
  parse_fails(im, 0, NULL, 0, 10, F,
              "t: truncated: 0 bytes, not even an idx magic");
  parse_fails(im, 10, NULL, 0, 10, F,
              "t: truncated: the header ends after 10 of 16 bytes");
  parse_fails(im, 16 + 784 * 10 + 5, NULL, 0, 10, F,
              "t: truncated: 7845 of the 78400 data bytes the header "
              "announces (10 of 100 images)");
  parse_fails(im, il, lb, ll - 1, 10, F,
              "t (labels): truncated: 99 of the 100 data bytes the header "
              "announces (99 of 100 labels)");
  /* trailing data */
  memcpy(x, im, il);
  x[il] = 0;
  parse_fails(x, il + 1, NULL, 0, 10, F,
              "t: trailing data after the 100 images the header announces");
  /* counts */
  uint8_t l99[108];
  memcpy(l99, lb, ll);
  put32(l99 + 4, 99);
  parse_fails(im, il, l99, ll - 1, 10, F,
              "t (labels): 99 labels, but t has 100 images");
  /* labels out of range */
  parse_fails(im, il, lb, ll, 5, F,
              "t (labels): label 9 of item 0 out of range (5 classes)");
  memcpy(l99, lb, ll);
  l99[8 + 42] = 200;
  parse_fails(im, il, l99, ll, 10, F,
              "label 200 of item 42 out of range (10 classes)");
  /* dimensions */
  uint8_t h[16];
  memcpy(h, im, 16);
  put32(h + 4, 0);
  parse_fails(h, 16, NULL, 0, 10, F, "t: no images (the header's count is 0)");
  memcpy(h, im, 16);
  put32(h + 8, 0);
  parse_fails(h, 16, NULL, 0, 10, F, "t: images of 0 x 28 pixels");
  put32(h + 4, CNN_IDX_MAX_ITEMS + 1);
  put32(h + 8, 28);
  parse_fails(h, 16, NULL, 0, 10, B, "t: 16777217 images, over the limit");
  put32(h + 4, 1);
  put32(h + 8, 65537);
  put32(h + 12, 1);
  parse_fails(h, 16, NULL, 0, 10, B,
              "t: images of 65537 x 1 pixels, over the limit");
  put32(h + 8, 4097);
  put32(h + 12, 4097);
  parse_fails(h, 16, NULL, 0, 10, B, "images of 4097 x 4097 pixels");
  put32(h + 8, 0xFFFFFFFFu); /* no overflow in rows x cols */
  put32(h + 12, 0xFFFFFFFFu);
  parse_fails(h, 16, NULL, 0, 10, B, "over the limit");
  put32(h + 4, CNN_IDX_MAX_ITEMS);
  put32(h + 8, 17);
  put32(h + 12, 16);
  parse_fails(h, 16, NULL, 0, 10, B,
              "t: 16777216 images of 17 x 16 pixels: 4563402752 bytes, over "
              "the limit of 4294967296");
  /* 4 GiB announced, 16 bytes there: truncated, without 4 GiB allocated */
  put32(h + 8, 16);
  memcpy(x, h, 16);
  memset(x + 16, 7, 16);
  parse_fails(x, 32, NULL, 0, 10, F,
              "t: truncated: 16 of the 4294967296 data bytes the header "
              "announces (0 of 16777216 images)");
  /* arguments */
  cnn_data *d = NULL;
  char err[256];
  assert_int_equal(cnn_data_parse(im, il, lb, ll, "t", 257, &d, err,
                                  sizeof err),
                   EMBER_EINVAL);
  assert_int_equal(cnn_data_parse(NULL, 5, NULL, 0, "t", 10, &d, err,
                                  sizeof err),
                   EMBER_EINVAL);
  assert_int_equal(cnn_data_parse(im, il, NULL, 0, "t", 10, NULL, err,
                                  sizeof err),
                   EMBER_EINVAL);
  assert_int_equal(cnn_data_read(NULL, NULL, 10, &d, err, sizeof err),
                   EMBER_EINVAL);
  assert_int_equal(cnn_data_parse(lb, ll, NULL, 0, NULL, 10, &d, NULL, 0),
                   EMBER_EFORMAT);
  assert_int_equal(cnn_data_parse(lb, ll, NULL, 0, NULL, 10, &d, err,
                                  sizeof err),
                   EMBER_EFORMAT);
  assert_contains(err, "input: wrong magic");
  free(im);
  free(lb);
  free(gz);
  free(x);
}

/* Files: missing, a gzip stream cut short, a corrupt one. */
static void test_file_errors(void **state) {
  (void)state;
  cnn_data *d = (cnn_data *)1;
  char err[512], path[] = "/tmp/test_cnn_idx_XXXXXX";
  assert_int_equal(cnn_data_read("/nonexistent/images", LABELS, 10, &d, err,
                                 sizeof err),
                   EMBER_EIO);
  assert_null(d);
  assert_contains(err, "/nonexistent/images: cannot open: ");
  assert_int_equal(cnn_data_read(IMAGES, "/nonexistent/labels", 10, &d, err,
                                 sizeof err),
                   EMBER_EIO);
  assert_contains(err, "/nonexistent/labels: cannot open: ");

  size_t gl;
  uint8_t *gz = slurp(DATA "/gz/t10k-images-idx3-ubyte.gz", &gl);
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, gz, gl / 2), (ssize_t)(gl / 2));
  close(fd);
  assert_int_equal(cnn_data_read(path, NULL, 10, &d, err, sizeof err),
                   EMBER_EFORMAT);
  assert_contains(err, path);
  assert_contains(err, ": truncated: ");
  assert_contains(err, "the gzip stream is cut short");
  /* a corrupt deflate stream: bytes in the middle overwritten */
  memset(gz + gl / 3, 0xA5, 64);
  fd = open(path, O_WRONLY | O_TRUNC);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, gz, gl), (ssize_t)gl);
  close(fd);
  int rc = cnn_data_read(path, NULL, 10, &d, err, sizeof err);
  if (rc != EMBER_EIO) fail_msg("corrupt gzip: rc %d (%s)", rc, err);
  assert_null(d);
  char want[128];
  snprintf(want, sizeof want, "%s: cannot read: ", path);
  assert_contains(err, want);
  assert_null(strstr(err + 1, path)); /* the path once */
  /* the gzip trailer cut: all the data there, the stream unfinished */
  size_t full;
  uint8_t *whole = slurp(DATA "/gz/t10k-labels-idx1-ubyte.gz", &full);
  fd = open(path, O_WRONLY | O_TRUNC);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, whole, full - 4), (ssize_t)(full - 4));
  close(fd);
  rc = cnn_data_read(IMAGES, path, 10, &d, err, sizeof err);
  if (rc != EMBER_EFORMAT) fail_msg("cut trailer: rc %d (%s)", rc, err);
  snprintf(want, sizeof want, "%s: truncated: the gzip stream is cut short",
           path);
  assert_string_equal(err, want);
  unlink(path);
  free(gz);
  free(whole);
}

/* ---- allocation failures ------------------------------------------------------ */
static void test_alloc_failures(void **state) {
  (void)state;
  size_t il, ll;
  uint8_t *im = slurp(IMAGES, &il), *lb = slurp(LABELS, &ll);
  int done = 0;
  for (int k = 1; !done && k < 1000; k++) {
    long live = alloc_live;
    alloc_count = 0;
    alloc_fail_at = k;
    cnn_data *d = NULL;
    char err[256];
    int rc = cnn_data_parse(im, il, lb, ll, "t", 10, &d, err, sizeof err);
    int calls = alloc_count;
    alloc_fail_at = 0;
    if (rc == 0) {
      check_slice(d);
      cnn_data_destroy(d);
      done = calls < k;
    } else {
      if (rc != EMBER_ENOMEM)
        fail_msg("allocation %d failed: rc %d (%s)", k, rc, err);
      assert_null(d);
      assert_contains(err, "out of memory");
    }
    if (alloc_live != live)
      fail_msg("allocation %d failed: %ld blocks leaked", k,
               alloc_live - live);
  }
  assert_true(done);
  free(im);
  free(lb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slice),
      cmocka_unit_test(test_dirs),
      cmocka_unit_test(test_float),
      cmocka_unit_test(test_errors),
      cmocka_unit_test(test_file_errors),
      cmocka_unit_test(test_alloc_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
