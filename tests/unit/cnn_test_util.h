/* cnn_test_util.h - helpers of the cnn math tests: networks from .cfg
 * text, a seeded generator, and norm-relative errors. */
#ifndef CNN_TEST_UTIL_H
#define CNN_TEST_UTIL_H

#include <stddef.h>
#include <stdint.h>

#include "cnn_net.h"

/* A network of the [net] line "height=H width=W channels=C" followed by
 * the sections in layers (darknet .cfg text); fails the test on error. */
cnn_net *cnn_test_net(uint32_t h, uint32_t w, uint32_t c, const char *layers);

/* The network of the .cfg text (NUL-terminated); fails the test on error. */
cnn_net *cnn_test_parse(const char *text);

/* Uniform in [-1, 1), from a 64-bit LCG state. */
double cnn_test_uniform(uint64_t *state);

/* ||a - b|| / max(||b||, 1e-30), over n values. */
double cnn_test_rel_err_f(const float *a, const double *b, size_t n);

/* The index of the largest |a - b|, for messages. */
size_t cnn_test_worst_f(const float *a, const double *b, size_t n);

#endif
