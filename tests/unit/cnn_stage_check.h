/* cnn_stage_check.h - one check of a cnn stage back end (the oneDNN stage,
 * cnn_cpu.h; the OpenCL stage, cnn_opencl.h) against the double-precision
 * reference (cnn_ref.h) through every kind of pass (cnn_pass.h), shared by
 * test_cnn_cpu_layers and test_cnn_opencl_layers. No test framework: it
 * prints each failure and counts them. */
#ifndef CNN_STAGE_CHECK_H
#define CNN_STAGE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "cnn_net.h"
#include "cnn_pass.h"

/* A back end's stage, built for the range and batch checked, through its
 * API (the cnn_cpu_stage_* or cnn_ocl_stage_* calls). */
typedef struct cnn_check_backend {
  void *stage;
  int (*forward)(void *s, const float *in, float *out, const uint8_t *labels,
                 double *loss, const cnn_pass *pass);
  int (*backward)(void *s, const float *dout, float *din);
  int (*update)(void *s, double lr, double momentum, double decay);
  int (*set_params)(void *s, size_t layer, const float *w, const float *b);
  int (*get_params)(void *s, size_t layer, float *w, float *b);
  int (*get_grads)(void *s, size_t layer, float *w, float *b);
  int (*set_norm)(void *s, size_t layer, const float *scales,
                  const float *rolling);
  int (*get_norm)(void *s, size_t layer, float *scales, float *rolling);
  int (*get_norm_grads)(void *s, size_t layer, float *scales);
} cnn_check_backend;

/*
 * cnn_check_stage - layers [first, end) of net at batch on be's stage
 * against the reference, from the same random parameters (weights,
 * biases, scales, rolling statistics; seed), inputs, labels and output
 * errors: two rounds of a training forward (outputs, loss, the rolling
 * statistics moved), the same forward recomputed (the same outputs, the
 * rolling statistics left alone), backward (the input error when first >
 * 0, the accumulated gradients of weights, biases and scales; twice in
 * the second round), an SGD update (every parameter), then an evaluation
 * forward (the rolling statistics, no dropout). Dropout's key differs
 * per round. Norm-relative errors within tol_fp (outputs, parameters,
 * the loss) and tol_grad (errors and gradients). Returns the number of
 * failures, each printed with the name.
 */
int cnn_check_stage(const char *name, const cnn_net *net, size_t first,
                    size_t end, uint32_t batch, uint64_t seed,
                    const cnn_check_backend *be, double tol_fp,
                    double tol_grad);

#endif
