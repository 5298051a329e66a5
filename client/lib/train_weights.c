/*
 * train_weights.c - ember_train's weights file: what --save writes and
 * --load reads, so training resumes (momentum starts at zero again, as
 * darknet's weights files do).
 *
 *   magic     8 bytes "EMBCNNW1"
 *   layers    uint32, the network's layer count
 *   epochs    uint32, epochs trained
 *   params    uint64, the network's parameters
 *   per layer uint64 weights, uint64 the rest (biases, and a batch-
 *             normalized layer's scales and rolling statistics: the
 *             network's shape, checked)
 *   data      params floats, layer by layer, each layer's weights then the
 *             rest in cnn_layout.h's order and cnn_ref.h's layouts
 * All little-endian (this host's order on every platform ember runs on;
 * a file from another order fails the shape check).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "last_error.h"
#include "train_internal.h"

#define WEIGHTS_MAGIC "EMBCNNW1"

int ember__train_weights_save(const char *path, const cnn_net *net,
                       const float *params, unsigned epochs) {
  size_t n;
  const cnn_layer *layers = cnn_net_layers(net, &n);
  char tmp[4096];
  if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
    ember__client_set_error("%s: path too long", path);
    return EMBER_EPARAM;
  }
  FILE *f = fopen(tmp, "wb");
  if (!f) {
    ember__client_set_error("%s: %s", tmp, strerror(errno));
    return EMBER_EIO;
  }
  uint32_t head[2] = {(uint32_t)n, epochs};
  uint64_t total = cnn_net_params(net);
  int ok = fwrite(WEIGHTS_MAGIC, 8, 1, f) == 1 &&
           fwrite(head, sizeof head, 1, f) == 1 &&
           fwrite(&total, sizeof total, 1, f) == 1;
  for (size_t i = 0; ok && i < n; i++) {
    uint64_t shape[2] = {layers[i].weights,
                         cnn_layer_params(&layers[i]) - layers[i].weights};
    ok = fwrite(shape, sizeof shape, 1, f) == 1;
  }
  if (ok && total)
    ok = fwrite(params, sizeof *params, (size_t)total, f) == (size_t)total;
  if (fclose(f) != 0) ok = 0;
  if (!ok || rename(tmp, path) != 0) {
    ember__client_set_error("%s: cannot write: %s", path, strerror(errno));
    remove(tmp);
    return EMBER_EIO;
  }
  return 0;
}

static int broken(const char *path, const char *why) {
  ember__client_set_error("%s: not an ember weights file: %s", path, why);
  return EMBER_EFORMAT;
}

int ember__train_weights_load(const char *path, const cnn_net *net,
                              float *params,
                       unsigned *epochs) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    ember__client_set_error("%s: %s", path, strerror(errno));
    return EMBER_EIO;
  }
  size_t n;
  const cnn_layer *layers = cnn_net_layers(net, &n);
  char magic[8];
  uint32_t head[2];
  uint64_t total;
  int rc = 0;
  if (fread(magic, 8, 1, f) != 1 || memcmp(magic, WEIGHTS_MAGIC, 8) != 0)
    rc = broken(path, "wrong magic");
  else if (fread(head, sizeof head, 1, f) != 1 ||
           fread(&total, sizeof total, 1, f) != 1)
    rc = broken(path, "truncated header");
  else if (head[0] != n || total != cnn_net_params(net)) {
    ember__client_set_error("%s: weights of another network (%u layers, "
                            "%llu parameters; this one has %zu and %llu)",
                            path, head[0], (unsigned long long)total, n,
                            (unsigned long long)cnn_net_params(net));
    rc = EMBER_EPARAM;
  }
  for (size_t i = 0; !rc && i < n; i++) {
    uint64_t shape[2];
    if (fread(shape, sizeof shape, 1, f) != 1) {
      rc = broken(path, "truncated layer shapes");
    } else if (shape[0] != layers[i].weights ||
               shape[1] != cnn_layer_params(&layers[i]) -
                               layers[i].weights) {
      ember__client_set_error("%s: weights of another network (layer %zu "
                              "has %llu weights and %llu other parameters, "
                              "not %llu and %llu)", path, i + 1,
                              (unsigned long long)shape[0],
                              (unsigned long long)shape[1],
                              (unsigned long long)layers[i].weights,
                              (unsigned long long)(cnn_layer_params(
                                  &layers[i]) - layers[i].weights));
      rc = EMBER_EPARAM;
    }
  }
  if (!rc && total &&
      fread(params, sizeof *params, (size_t)total, f) != (size_t)total)
    rc = broken(path, "truncated parameters");
  if (!rc && fgetc(f) != EOF) rc = broken(path, "trailing bytes");
  for (uint64_t i = 0; !rc && i < total; i++)
    if (!(params[i] == params[i] && params[i] - params[i] == 0))
      rc = broken(path, "a parameter that is not a finite number");
  fclose(f);
  if (!rc) *epochs = head[1];
  return rc;
}
