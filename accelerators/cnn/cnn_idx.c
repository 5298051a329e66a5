/*
 * cnn_idx.c - MNIST's idx files (cnn_idx.h): one reader for memory and
 * for files, plain or gzip'd (zlib's gzread passes plain files through),
 * that checks the header against the limits, grows its buffer with the
 * data actually read, and finds truncated and trailing data.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "cnn_idx.h"
#include "errbuf.h"

struct cnn_data {
  size_t count;
  uint32_t rows, cols;
  uint8_t *pixels;
  uint8_t *labels;
  unsigned classes;
};

/* ---- a source of bytes: memory or a gzFile ---------------------------------- */

typedef struct src {
  const char *name;       /* for messages */
  gzFile gz;              /* a file, or NULL: memory */
  const uint8_t *mem;
  size_t len, pos;
  bool cut;               /* the gzip stream ended early */
} src;

/* Up to n bytes into buf, *got of them (fewer only at the end). Returns 0
 * or EMBER_EIO with the reason in err. */
static int src_read(src *s, void *buf, size_t n, size_t *got, char *err,
                    size_t err_len) {
  *got = 0;
  if (!s->gz) {
    size_t k = s->len - s->pos < n ? s->len - s->pos : n;
    if (k) memcpy(buf, s->mem + s->pos, k);
    s->pos += k;
    *got = k;
    return 0;
  }
  while (*got < n) {
    size_t want = n - *got;
    int errnum = Z_OK, r;
    if (want > (1u << 30)) want = 1u << 30;
    r = gzread(s->gz, (uint8_t *)buf + *got, (unsigned)want);
    if (r < 0) {
      const char *why = gzerror(s->gz, &errnum);
      size_t nl = strlen(s->name);
      if (strncmp(why, s->name, nl) == 0 && strncmp(why + nl, ": ", 2) == 0)
        why += nl + 2; /* zlib's message names the file too */
      return errbuf_printf(err, err_len, EMBER_EIO, "%s: cannot read: %s",
                           s->name, errnum == Z_ERRNO ? strerror(errno) : why);
    }
    *got += (size_t)r;
    if ((size_t)r < want) {
      gzerror(s->gz, &errnum);
      if (errnum == Z_BUF_ERROR) s->cut = true;
      break;
    }
  }
  return 0;
}

/* ---- one idx file ------------------------------------------------------------ */

typedef struct idx_file {
  uint32_t dims[3];
  uint8_t *data;          /* dims' product bytes, the caller frees it */
  size_t size;
} idx_file;

static uint32_t be32(const uint8_t *p) {
  return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
         p[3];
}

static int check_magic(const src *s, uint32_t magic, uint32_t want,
                       char *err, size_t err_len) {
  const char *what = want == CNN_IDX_MAGIC_IMAGES ? "images" : "labels";
  if (magic == want) return 0;
  if ((magic >> 16) == 0x1f8b)
    return errbuf_printf(err, err_len, EMBER_EFORMAT,
                         "%s: wrong magic 0x%08x, expected 0x%08x: gzip data "
                         "where a plain idx file was expected",
                         s->name, magic, want);
  if ((magic & 0xFFFF0000u) == 0 && (magic & 0xFFu) == (want & 0xFFu) &&
      ((magic >> 8) & 0xFFu) != 0x08)
    return errbuf_printf(err, err_len, EMBER_EFORMAT,
                         "%s: wrong magic 0x%08x, expected 0x%08x: idx data "
                         "type 0x%02x not supported (only 0x08, unsigned "
                         "bytes)",
                         s->name, magic, want, (magic >> 8) & 0xFFu);
  if (magic == CNN_IDX_MAGIC_IMAGES || magic == CNN_IDX_MAGIC_LABELS)
    return errbuf_printf(err, err_len, EMBER_EFORMAT,
                         "%s: wrong magic 0x%08x, expected 0x%08x: an idx %s "
                         "file where %s were expected",
                         s->name, magic, want,
                         magic == CNN_IDX_MAGIC_IMAGES ? "image" : "label",
                         what);
  return errbuf_printf(err, err_len, EMBER_EFORMAT,
                       "%s: wrong magic 0x%08x, expected 0x%08x: not an idx "
                       "%s file",
                       s->name, magic, want, what);
}

/* Header and dimensions: the item count, and rows and columns for images;
 * *total gets the data's size in bytes. */
static int read_header(src *s, uint32_t want, idx_file *f, uint64_t *total,
                       char *err, size_t err_len) {
  uint8_t h[16];
  size_t ndims = want == CNN_IDX_MAGIC_IMAGES ? 3 : 1, got;
  int rc = src_read(s, h, 4 + 4 * ndims, &got, err, err_len);
  if (rc) return rc;
  if (got < 4) {
    return errbuf_printf(err, err_len, EMBER_EFORMAT,
                         "%s: truncated: %zu bytes, not even an idx magic",
                         s->name, got);
  }
  rc = check_magic(s, be32(h), want, err, err_len);
  if (rc) return rc;
  if (got < 4 + 4 * ndims) {
    return errbuf_printf(
        err, err_len, EMBER_EFORMAT,
        "%s: truncated: the header ends after %zu of %zu bytes", s->name, got,
        4 + 4 * ndims);
  }
  for (size_t i = 0; i < ndims; i++) f->dims[i] = be32(h + 4 + 4 * i);
  if (f->dims[0] == 0) {
    return errbuf_printf(err, err_len, EMBER_EFORMAT,
                         "%s: no %s (the header's count is 0)", s->name,
                         ndims == 3 ? "images" : "labels");
  }
  if (f->dims[0] > CNN_IDX_MAX_ITEMS) {
    return errbuf_printf(err, err_len, EMBER_ETOOBIG,
                         "%s: %u %s, over the limit of %d", s->name, f->dims[0],
                         ndims == 3 ? "images" : "labels", CNN_IDX_MAX_ITEMS);
  }
  *total = f->dims[0];
  if (ndims == 3) {
    uint64_t pixels = (uint64_t)f->dims[1] * f->dims[2]; /* < 2^64 */
    if (f->dims[1] == 0 || f->dims[2] == 0) {
      return errbuf_printf(err, err_len, EMBER_EFORMAT,
                           "%s: images of %u x %u pixels", s->name, f->dims[1],
                           f->dims[2]);
    }
    if (f->dims[1] > CNN_IDX_MAX_SIDE || f->dims[2] > CNN_IDX_MAX_SIDE ||
        pixels > CNN_IDX_MAX_PIXELS) {
      return errbuf_printf(
          err, err_len, EMBER_ETOOBIG,
          "%s: images of %u x %u pixels, over the limit (sides %d, %d pixels)",
          s->name, f->dims[1], f->dims[2], CNN_IDX_MAX_SIDE,
          CNN_IDX_MAX_PIXELS);
    }
    *total *= pixels; /* <= 2^24 x 2^24 */
    if (*total > CNN_IDX_MAX_BYTES || (uint64_t)(size_t)*total != *total) {
      return errbuf_printf(
          err, err_len, EMBER_ETOOBIG,
          "%s: %u images of %u x %u pixels: %llu bytes, over the limit of %llu",
          s->name, f->dims[0], f->dims[1], f->dims[2],
          (unsigned long long)*total, (unsigned long long)CNN_IDX_MAX_BYTES);
    }
  }
  return 0;
}

/* An idx file of the kind want: header, data, nothing after it. */
static int read_idx(src *s, uint32_t want, idx_file *f, char *err,
                    size_t err_len) {
  uint64_t total = 0;
  size_t cap = 0, have = 0, got;
  uint8_t extra;
  int rc;
  memset(f, 0, sizeof *f);
  rc = read_header(s, want, f, &total, err, err_len);
  if (rc) return rc;
  while (have < total) {
    if (have == cap) {
      size_t next = cap ? 2 * cap : 1u << 20;
      uint8_t *grown;
      if (next > total) next = (size_t)total;
      grown = realloc(f->data, next);
      if (!grown) {
        rc = errbuf_printf(err, err_len, EMBER_ENOMEM, "%s: out of memory",
                           s->name);
        goto fail;
      }
      f->data = grown;
      cap = next;
    }
    rc = src_read(s, f->data + have, cap - have, &got, err, err_len);
    if (rc) goto fail;
    have += got;
    if (have < cap) break;
  }
  if (have < total) {
    size_t item = want == CNN_IDX_MAGIC_IMAGES
                      ? (size_t)f->dims[1] * f->dims[2] : 1;
    rc = errbuf_printf(err, err_len, EMBER_EFORMAT,
                       "%s: truncated: %zu of the %llu data bytes the header "
                       "announces (%zu of %u %s)%s",
                       s->name, have, (unsigned long long)total, have / item,
                       f->dims[0],
                       want == CNN_IDX_MAGIC_IMAGES ? "images" : "labels",
                       s->cut ? "; the gzip stream is cut short" : "");
    goto fail;
  }
  rc = src_read(s, &extra, 1, &got, err, err_len);
  if (rc) goto fail;
  if (got) {
    rc = errbuf_printf(err, err_len, EMBER_EFORMAT,
                       "%s: trailing data after the %u %s the header announces",
                       s->name, f->dims[0],
                       want == CNN_IDX_MAGIC_IMAGES ? "images" : "labels");
    goto fail;
  }
  if (s->cut) {
    rc = errbuf_printf(err, err_len, EMBER_EFORMAT,
                       "%s: truncated: the gzip stream is cut short", s->name);
    goto fail;
  }
  f->size = (size_t)total;
  return 0;
fail:
  free(f->data);
  f->data = NULL;
  return rc;
}

/* ---- a data set ---------------------------------------------------------------- */

/* Images (and labels, when lsrc is not NULL) into a data set. */
static int load(src *isrc, src *lsrc, unsigned classes, cnn_data **out,
                char *err, size_t err_len) {
  idx_file im, lb = {{0}, NULL, 0};
  cnn_data *d;
  int rc = read_idx(isrc, CNN_IDX_MAGIC_IMAGES, &im, err, err_len);
  if (rc) return rc;
  if (lsrc) {
    rc = read_idx(lsrc, CNN_IDX_MAGIC_LABELS, &lb, err, err_len);
    if (rc) goto fail;
    if (lb.dims[0] != im.dims[0]) {
      rc = errbuf_printf(err, err_len, EMBER_EFORMAT,
                         "%s: %u labels, but %s has %u images", lsrc->name,
                         lb.dims[0], isrc->name, im.dims[0]);
      goto fail;
    }
  }
  d = calloc(1, sizeof *d);
  if (!d) {
    rc = errbuf_printf(err, err_len, EMBER_ENOMEM, "%s: out of memory",
                       isrc->name);
    goto fail;
  }
  d->count = im.dims[0];
  d->rows = im.dims[1];
  d->cols = im.dims[2];
  d->pixels = im.data;
  d->labels = lb.data;
  for (size_t i = 0; lb.data && i < lb.size; i++) {
    if (lb.data[i] >= classes) {
      errbuf_printf(err, err_len, EMBER_EFORMAT,
                    "%s: label %u of item %zu out of range (%u classes)",
                    lsrc->name, lb.data[i], i, classes);
      cnn_data_destroy(d);
      return EMBER_EFORMAT;
    }
    if (lb.data[i] >= d->classes) d->classes = lb.data[i] + 1u;
  }
  *out = d;
  return 0;
fail:
  free(im.data);
  free(lb.data);
  return rc;
}

static bool bad_args(cnn_data **out, unsigned *classes, char *err,
                     size_t err_len) {
  if (err && err_len) err[0] = '\0';
  if (out) *out = NULL;
  if (*classes == 0) *classes = 256;
  if (!out || *classes > 256) {
    errbuf_printf(err, err_len, EMBER_EINVAL, "invalid arguments");
    return true;
  }
  return false;
}

int cnn_data_parse(const void *images, size_t images_len, const void *labels,
                   size_t labels_len, const char *source, unsigned classes,
                   cnn_data **out, char *err, size_t err_len) {
  char lname[512];
  src is, ls;
  if (bad_args(out, &classes, err, err_len)) return EMBER_EINVAL;
  if ((!images && images_len) || (!labels && labels_len)) {
    return errbuf_printf(err, err_len, EMBER_EINVAL, "invalid arguments");
  }
  if (!source) source = "input";
  snprintf(lname, sizeof lname, "%s (labels)", source);
  memset(&is, 0, sizeof is);
  memset(&ls, 0, sizeof ls);
  is.name = source;
  is.mem = images;
  is.len = images_len;
  ls.name = lname;
  ls.mem = labels;
  ls.len = labels_len;
  return load(&is, labels ? &ls : NULL, classes, out, err, err_len);
}

static int open_src(src *s, const char *path, char *err, size_t err_len) {
  memset(s, 0, sizeof *s);
  s->name = path;
  errno = 0;
  s->gz = gzopen(path, "rb");
  if (!s->gz) {
    int rc = errno ? EMBER_EIO : EMBER_ENOMEM;
    return errbuf_printf(err, err_len, rc, "%s: cannot open: %s", path,
                         errno ? strerror(errno) : "out of memory");
  }
  return 0;
}

int cnn_data_read(const char *images_path, const char *labels_path,
                  unsigned classes, cnn_data **out, char *err,
                  size_t err_len) {
  src is, ls;
  int rc;
  if (bad_args(out, &classes, err, err_len)) return EMBER_EINVAL;
  if (!images_path) {
    return errbuf_printf(err, err_len, EMBER_EINVAL, "invalid arguments");
  }
  rc = open_src(&is, images_path, err, err_len);
  if (rc) return rc;
  if (labels_path) {
    rc = open_src(&ls, labels_path, err, err_len);
    if (rc) {
      gzclose(is.gz);
      return rc;
    }
  }
  rc = load(&is, labels_path ? &ls : NULL, classes, out, err, err_len);
  gzclose(is.gz);
  if (labels_path) gzclose(ls.gz);
  return rc;
}

/* dir/name, or dir/name.gz, whichever is a file (the plain one first). */
static int find_file(const char *dir, const char *name, char *path,
                     size_t len, char *err, size_t err_len) {
  static const char *const ext[] = {"", ".gz"};
  struct stat st;
  for (int i = 0; i < 2; i++) {
    int n = snprintf(path, len, "%s/%s%s", dir, name, ext[i]);
    if (n < 0 || (size_t)n >= len) {
      return errbuf_printf(err, err_len, EMBER_EINVAL, "%s: path too long",
                           dir);
    }
    if (stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) return 0;
  }
  return errbuf_printf(err, err_len, EMBER_ENOTFOUND, "%s: no %s or %s.gz", dir,
                       name, name);
}

int cnn_data_read_dir(const char *dir, cnn_data_split split, unsigned classes,
                      cnn_data **out, char *err, size_t err_len) {
  static const char *const names[2][2] = {
      {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"},
      {"t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"}};
  char images[PATH_MAX], labels[PATH_MAX];
  int rc;
  if (bad_args(out, &classes, err, err_len)) return EMBER_EINVAL;
  if (!dir || (split != CNN_SPLIT_TRAIN && split != CNN_SPLIT_TEST)) {
    return errbuf_printf(err, err_len, EMBER_EINVAL, "invalid arguments");
  }
  rc = find_file(dir, names[split][0], images, sizeof images, err, err_len);
  if (!rc)
    rc = find_file(dir, names[split][1], labels, sizeof labels, err, err_len);
  if (rc) return rc;
  return cnn_data_read(images, labels, classes, out, err, err_len);
}

void cnn_data_destroy(cnn_data *data) {
  if (!data) return;
  free(data->pixels);
  free(data->labels);
  free(data);
}

size_t cnn_data_count(const cnn_data *data) { return data->count; }
uint32_t cnn_data_rows(const cnn_data *data) { return data->rows; }
uint32_t cnn_data_cols(const cnn_data *data) { return data->cols; }
const uint8_t *cnn_data_pixels(const cnn_data *data) { return data->pixels; }
const uint8_t *cnn_data_labels(const cnn_data *data) { return data->labels; }
unsigned cnn_data_classes(const cnn_data *data) { return data->classes; }

int cnn_data_to_float(const cnn_data *data, size_t first, size_t n,
                      float *out) {
  size_t per, total;
  const uint8_t *p;
  if (!data || (!out && n) || first > data->count ||
      n > data->count - first)
    return EMBER_EINVAL;
  per = (size_t)data->rows * data->cols;
  total = n * per;
  p = data->pixels + first * per;
  for (size_t i = 0; i < total; i++) out[i] = (float)p[i] / 255.0f;
  return 0;
}
