/*
 * fuzz_cnn_idx.c - libFuzzer target for the cnn accelerator's MNIST idx
 * reader (accelerators/cnn/cnn_idx.c, zlib uninstrumented).
 *
 * Byte 0 picks the way in: images alone from memory, images and labels
 * from memory, or images and labels as files through zlib (a memfd each,
 * so that gzip'd inputs are inflated); byte 1 is the number of classes (0:
 * any byte); bytes 2-3 (big-endian) are the image file's length, the rest
 * after it the label file. A failure must leave no data set and say why,
 * naming the source; a success must keep cnn_idx.h's promises: counts,
 * sides and sizes within the limits, labels below the classes asked for
 * and the classes one more than the largest, the image bytes exactly the
 * input's (memory), floats in [0, 1] that give the pixels back.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cnn_idx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const cnn_data *d, unsigned classes, const uint8_t *images,
                  size_t images_len, int has_labels) {
  size_t n = cnn_data_count(d);
  uint32_t rows = cnn_data_rows(d), cols = cnn_data_cols(d);
  const uint8_t *labels = cnn_data_labels(d);
  unsigned top = 0;
  if (n < 1 || n > CNN_IDX_MAX_ITEMS || rows < 1 || cols < 1 ||
      rows > CNN_IDX_MAX_SIDE || cols > CNN_IDX_MAX_SIDE ||
      (uint64_t)rows * cols > CNN_IDX_MAX_PIXELS)
    abort();
  size_t per = (size_t)rows * cols;
  if (images && (images_len != 16 + n * per ||
                 memcmp(images + 16, cnn_data_pixels(d), n * per) != 0))
    abort();
  if (has_labels != (labels != NULL)) abort();
  for (size_t i = 0; labels && i < n; i++) {
    if (labels[i] >= (classes ? classes : 256)) abort();
    if (labels[i] + 1u > top) top = labels[i] + 1u;
  }
  if (cnn_data_classes(d) != top) abort();
  size_t k = n < 3 ? n : 3;
  float *f = malloc(k * per * sizeof *f);
  if (!f) abort();
  if (cnn_data_to_float(d, n - k, k, f) != 0) abort();
  for (size_t i = 0; i < k * per; i++)
    if (!(f[i] >= 0 && f[i] <= 1) ||
        (uint8_t)(f[i] * 255.0f + 0.5f) != cnn_data_pixels(d)[(n - k) * per + i])
      abort();
  free(f);
  if (cnn_data_to_float(d, n, 1, f) != EMBER_EINVAL) abort();
}

/* A memfd holding buf; its /proc path in path. */
static int memfd_with(const uint8_t *buf, size_t len, char *path, size_t n) {
  int fd = memfd_create("fuzz_cnn_idx", 0);
  if (fd < 0) abort();
  if (len && write(fd, buf, len) != (ssize_t)len) abort();
  snprintf(path, n, "/proc/self/fd/%d", fd);
  return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  int mode = data[0] % 3;
  unsigned classes = data[1];
  size_t il = (size_t)data[2] << 8 | data[3];
  const uint8_t *im = data + 4, *lb;
  size_t rest = size - 4, ll;
  if (mode == 0) il = rest;
  if (il > rest) il = rest;
  lb = im + il;
  ll = rest - il;
  cnn_data *d = NULL;
  char err[512] = "";
  int rc;
  const char *want = "fuzz";
  if (mode < 2) {
    rc = cnn_data_parse(im, il, mode ? lb : NULL, ll, "fuzz", classes, &d,
                        err, sizeof err);
  } else {
    char ipath[64], lpath[64];
    int ifd = memfd_with(im, il, ipath, sizeof ipath);
    int lfd = memfd_with(lb, ll, lpath, sizeof lpath);
    rc = cnn_data_read(ipath, lpath, classes, &d, err, sizeof err);
    close(ifd);
    close(lfd);
    want = "/proc/self/fd/";
  }
  if (rc != 0) {
    if (d != NULL || strncmp(err, want, strlen(want)) != 0) abort();
    if (rc != EMBER_EFORMAT && rc != EMBER_ETOOBIG && rc != EMBER_ENOMEM &&
        rc != EMBER_EIO)
      abort();
    if (rc == EMBER_EIO && mode < 2) abort();
    return 0;
  }
  if (!d) abort();
  check(d, classes, mode < 2 ? im : NULL, il, mode > 0);
  cnn_data_destroy(d);
  return 0;
}
