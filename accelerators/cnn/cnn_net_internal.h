/*
 * cnn_net_internal.h - how the cnn readers build a network (cnn_net.c):
 * the input and training settings first, then one layer at a time, each
 * checked against the one before it, then finish. Failures leave a reason
 * without "source:line: " in why; the reader adds it.
 */
#ifndef CNN_NET_INTERNAL_H
#define CNN_NET_INTERNAL_H

#include "cnn_net.h"

/* A layer as a file describes it; the shapes and counts are computed. */
typedef struct cnn_layer_spec {
  cnn_layer_kind kind;
  uint32_t filters;    /* conv: filters; connected: output */
  uint32_t size, stride, padding;
  cnn_activation act;
  int batch_norm;      /* conv: batch_normalize */
  double probability;  /* dropout: 0 <= p < 1 */
} cnn_layer_spec;

/* An empty network; NULL when out of memory. */
cnn_net *cnn_net_new(void);

/* The input shape and training settings; before the first layer.
 * Returns 0, EMBER_EFORMAT or EMBER_ETOOBIG. */
int cnn_net_set_input(cnn_net *net, cnn_shape in, const cnn_train *train,
                      char *why, size_t why_len);

/* Append a layer (its [section] on line), its input the last layer's
 * output. Returns 0, EMBER_EFORMAT (after a softmax, kernel larger than
 * the padded input, a softmax over fewer than 2 values), EMBER_ETOOBIG or
 * EMBER_ENOMEM. */
int cnn_net_add_layer(cnn_net *net, const cnn_layer_spec *spec, int line,
                      char *why, size_t why_len);

/* The last checks: at least one layer, a softmax last. Returns 0 or
 * EMBER_EFORMAT; *line gets the line the error belongs to (0: none). */
int cnn_net_finish(cnn_net *net, int *line, char *why, size_t why_len);

#endif
