/*
 * cnn_idx.h - labelled images for the cnn accelerator, from MNIST's idx
 * files (MNIST, Fashion-MNIST; http://yann.lecun.com/exdb/mnist/).
 *
 * An idx file is a big-endian header, then the data: two zero bytes, a
 * type byte (0x08: unsigned bytes, the only type read here), the number of
 * dimensions, one 32-bit size per dimension. Images: magic 0x00000803
 * (count, rows, columns), pixels row-major, one image after the other;
 * labels: magic 0x00000801 (count), one byte each. Files may be gzip'd
 * (zlib reads both). A file must hold exactly what its header announces.
 *
 * Every error reads "file: reason" in the caller's buffer (for memory, the
 * source name given).
 *
 * A data set is immutable once read: its functions may be called from any
 * number of threads at once. Destroy is not thread-safe on the same object.
 */
#ifndef CNN_IDX_H
#define CNN_IDX_H

#include <stddef.h>
#include <stdint.h>

#include "ember/ember_errors.h"

/* Hard limits, checked against the header before anything is allocated;
 * memory grows with the data actually read, never ahead of it by more
 * than a factor of two. */
#define CNN_IDX_MAX_ITEMS 16777216       /* images or labels (2^24) */
#define CNN_IDX_MAX_SIDE 65536           /* rows, columns */
#define CNN_IDX_MAX_PIXELS 16777216      /* rows x columns (2^24) */
#define CNN_IDX_MAX_BYTES 4294967296ULL  /* all the pixels (4 GiB) */

#define CNN_IDX_MAGIC_IMAGES 0x00000803u
#define CNN_IDX_MAGIC_LABELS 0x00000801u

/* Fashion-MNIST's classes (T-shirt/top, Trouser, Pullover, Dress, Coat,
 * Sandal, Shirt, Sneaker, Bag, Ankle boot). */
#define CNN_FASHION_CLASSES 10

/* The data set of a directory laid out as MNIST's files are. */
typedef enum cnn_data_split {
  CNN_SPLIT_TRAIN = 0,  /* train-images-idx3-ubyte, train-labels-idx1-ubyte */
  CNN_SPLIT_TEST        /* t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte */
} cnn_data_split;

typedef struct cnn_data cnn_data;

/*
 * cnn_data_parse - a data set from idx files in memory (plain, not gzip).
 *   images, images_len   the image file
 *   labels, labels_len   the label file, or NULL (no labels)
 *   source               name for messages ("input" when NULL); the label
 *                        file's errors name "source (labels)"
 *   classes              labels must be below it (1..256); 0: any byte
 *   out                  receives the data set (NULL on failure); the
 *                        caller owns it and frees it with cnn_data_destroy()
 *   err                  receives "source: reason" on failure
 * Returns 0, EMBER_EFORMAT (wrong magic, type or dimensions; truncated or
 * trailing data; image and label counts that differ; a label out of
 * range), EMBER_ETOOBIG (over a CNN_IDX_MAX_* limit), EMBER_EINVAL (bad
 * arguments) or EMBER_ENOMEM.
 */
int cnn_data_parse(const void *images, size_t images_len, const void *labels,
                   size_t labels_len, const char *source, unsigned classes,
                   cnn_data **out, char *err, size_t err_len);

/*
 * cnn_data_read - cnn_data_parse() on files, plain or gzip'd; each file's
 * path is the source in its messages; labels_path may be NULL. Also
 * returns EMBER_EIO when a file cannot be opened or read (a corrupt gzip
 * stream included; a gzip stream cut short is truncated data,
 * EMBER_EFORMAT).
 */
int cnn_data_read(const char *images_path, const char *labels_path,
                  unsigned classes, cnn_data **out, char *err,
                  size_t err_len);

/*
 * cnn_data_read_dir - one split of a directory laid out as MNIST's files
 * are (Debian's dataset-fashion-mnist: /usr/share/datasets/fashion-mnist):
 * the names of cnn_data_split, each plain or with ".gz" (the plain file wins
 * when both are there). Also returns EMBER_ENOTFOUND when a file is
 * missing in both forms.
 */
int cnn_data_read_dir(const char *dir, cnn_data_split split, unsigned classes,
                      cnn_data **out, char *err, size_t err_len);

/* cnn_data_destroy - free a data set; NULL is a no-op. */
void cnn_data_destroy(cnn_data *data);

/* Images, and each one's rows and columns. */
size_t cnn_data_count(const cnn_data *data);
uint32_t cnn_data_rows(const cnn_data *data);
uint32_t cnn_data_cols(const cnn_data *data);

/* The pixels: count x rows x cols bytes, image after image, each row-major
 * (0 background .. 255); owned by the data set. */
const uint8_t *cnn_data_pixels(const cnn_data *data);

/* The labels, count bytes, or NULL when none were read; owned by the data
 * set. */
const uint8_t *cnn_data_labels(const cnn_data *data);

/* One more than the largest label (0 without labels). */
unsigned cnn_data_classes(const cnn_data *data);

/*
 * cnn_data_to_float - images first .. first+n-1 as floats scaled to [0, 1]
 * (pixel / 255), n x rows x cols values into out, in the order of
 * cnn_data_pixels(). Returns 0, or EMBER_EINVAL when the range is not
 * inside the data set.
 */
int cnn_data_to_float(const cnn_data *data, size_t first, size_t n,
                      float *out);

#endif
