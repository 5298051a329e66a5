/*
 * train_data.c - ember_train's samples: an idx directory (cnn_idx.h) or
 * the caller's arrays, checked against the network's input shape and
 * classes; the shuffle of each epoch and the gathering of a micro-batch.
 */
#include <stdlib.h>
#include <string.h>

#include "last_error.h"
#include "train_internal.h"

static int from_dir(const char *dir, cnn_data_split split, const cnn_net *net,
                    size_t limit, train_samples *s) {
  char err[512];
  int rc = cnn_data_read_dir(dir, split, cnn_net_classes(net), &s->idx, err,
                             sizeof err);
  if (rc) {
    ember__client_set_error("%s", err);
    return rc;
  }
  cnn_shape in = cnn_net_input(net);
  uint32_t rows = cnn_data_rows(s->idx), cols = cnn_data_cols(s->idx);
  if (in.c != 1 || in.h != rows || in.w != cols) {
    ember__client_set_error("%s: %ux%u grey images; the network takes "
                            "%ux%ux%u", dir, rows, cols, in.h, in.w, in.c);
    return EMBER_EPARAM;
  }
  if (!cnn_data_labels(s->idx)) {
    ember__client_set_error("%s: no labels", dir);
    return EMBER_EFORMAT;
  }
  s->labels = cnn_data_labels(s->idx);
  s->n = cnn_data_count(s->idx);
  if (limit && limit < s->n) s->n = limit;
  s->elems = (size_t)rows * cols;
  return 0;
}

static int from_arrays(const float *x, const uint8_t *y, size_t n,
                       const char *what, const cnn_net *net, size_t limit,
                       train_samples *s) {
  if (n && (!x || !y)) {
    ember__client_set_error("ember_train: %s images or labels missing", what);
    return EMBER_EINVAL;
  }
  uint32_t classes = cnn_net_classes(net);
  if (limit && limit < n) n = limit;
  for (size_t i = 0; i < n; i++)
    if (y[i] >= classes) {
      ember__client_set_error("ember_train: %s label %u of sample %zu is not "
                              "below the network's %u classes", what, y[i], i,
                              classes);
      return EMBER_EPARAM;
    }
  cnn_shape in = cnn_net_input(net);
  s->floats = x;
  s->labels = y;
  s->n = n;
  s->elems = (size_t)in.h * in.w * in.c;
  return 0;
}

int ember__train_samples_load(const ember_train_params *p, const cnn_net *net,
                       train_samples *train, train_samples *test) {
  memset(train, 0, sizeof *train);
  memset(test, 0, sizeof *test);
  int rc;
  if (p->data_dir) {
    rc = p->epochs ? from_dir(p->data_dir, CNN_SPLIT_TRAIN, net,
                              p->train_limit, train)
                   : 0;
    if (!rc)
      rc = from_dir(p->data_dir, CNN_SPLIT_TEST, net, p->test_limit, test);
  } else {
    rc = from_arrays(p->train_images, p->train_labels, p->n_train, "training",
                     net, p->train_limit, train);
    if (!rc)
      rc = from_arrays(p->test_images, p->test_labels, p->n_test, "test", net,
                       p->test_limit, test);
  }
  if (rc) {
    ember__train_samples_free(train);
    ember__train_samples_free(test);
  }
  return rc;
}

void ember__train_samples_free(train_samples *s) {
  cnn_data_destroy(s->idx);
  memset(s, 0, sizeof *s);
}

void ember__train_samples_gather(const train_samples *s, const size_t *order,
                          size_t n, float *x, uint8_t *y) {
  for (size_t i = 0; i < n; i++) {
    size_t k = order[i];
    if (s->idx)
      cnn_data_to_float(s->idx, k, 1, x + i * s->elems);
    else
      memcpy(x + i * s->elems, s->floats + k * s->elems,
             s->elems * sizeof *x);
    y[i] = s->labels[k];
  }
}

/* splitmix64 */
static uint64_t next_u64(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

void ember__train_shuffle(size_t *order, size_t n, uint64_t seed,
                          unsigned epoch) {
  uint64_t s = seed ^ (0x2545f4914f6cdd1dull * (epoch + 1u));
  for (size_t i = 0; i < n; i++) order[i] = i;
  for (size_t i = n; i > 1; i--) {
    size_t j = (size_t)(next_u64(&s) % i);
    size_t t = order[i - 1];
    order[i - 1] = order[j];
    order[j] = t;
  }
}
