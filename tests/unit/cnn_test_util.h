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

/* cnn_test_net of an identity max-pool (size 1, so that the stage [1, 2)
 * computes its input error), the sections in layer, and a softmax. */
cnn_net *cnn_test_layer_net(uint32_t h, uint32_t w, uint32_t c,
                            const char *layer);

/* Uniform in [-1, 1), from a 64-bit LCG state. */
double cnn_test_uniform(uint64_t *state);

/* n values shift + scale * cnn_test_uniform(rng), in a new array (the
 * caller frees it). */
double *cnn_test_fill(size_t n, uint64_t *rng, double scale, double shift);

/* cnn_test_check_fd - analytic[i], for each i < n, against the central
 * difference (f(v[i] + h) - f(v[i] - h)) / 2h of the objective f (given
 * arg; it reads v); the test fails where they differ by more than tol *
 * max(1, |analytic[i]|), naming case_i, what and i. v is left as it was. */
void cnn_test_check_fd(const char *what, size_t case_i,
                       double (*f)(const void *arg), const void *arg,
                       double *v, size_t n, const double *analytic, double h,
                       double tol);

/* ||a - b|| / max(||b||, 1e-30), over n values. */
double cnn_test_rel_err_f(const float *a, const double *b, size_t n);

/* The index of the largest |a - b|, for messages. */
size_t cnn_test_worst_f(const float *a, const double *b, size_t n);

#endif
