/*
 * cnn_opencl.h - one stage of CNN training (a contiguous range of a
 * network's layers) on an OpenCL 1.2 device, in single precision, on
 * kernels of ember's own (cnn.cl). The maths and conventions are
 * cnn_ref.h's; the API mirrors cnn_cpu.h's, so that the accelerator can
 * run a stage on either.
 *
 * Two handles: cnn_ocl, the program built for one device (through the
 * program binary cache, accelerators/cl_cache.h, as plf and sw do), and
 * cnn_ocl_stage, a stage's state in device buffers: per layer its
 * weights, biases, their momentum and accumulated gradients (canonical
 * layouts), the activations of the last forward pass and the errors of
 * the last backward pass (NCHW), max-pool's argmax, and for a stage
 * ending in the softmax the labels, per-sample losses and the loss's
 * gradient, computed with the forward pass.
 *
 * Each stage call queues its kernels on the stage's queue and blocks
 * until the results it returns are on the host. A stage is used by one
 * thread at a time; distinct stages (on distinct queues) are independent.
 *
 * Built only when OpenCL is found (EMBER_HAVE_OPENCL).
 */
#ifndef CNN_OPENCL_H
#define CNN_OPENCL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cnn_net.h"

typedef struct cnn_ocl cnn_ocl;
typedef struct cnn_ocl_stage cnn_ocl_stage;

/*
 * cnn_ocl_create - build cnn.cl for dev in ctx (the caller keeps both;
 * they must outlive the handle and its stages). cache_dir may be NULL (no
 * binary cache). Returns 0, EMBER_EINVAL, EMBER_ENOMEM or EMBER_EPLATFORM
 * (a big-endian device, a failed build: the log's start in err).
 */
int cnn_ocl_create(cl_context ctx, cl_device_id dev, const char *cache_dir,
                   cnn_ocl **out, char *err, size_t err_len);

/* cnn_ocl_destroy - release the program; its stages must be gone first.
 * NULL is a no-op. */
void cnn_ocl_destroy(cnn_ocl *o);

/* cnn_ocl_loaded_from_cache - true when the program came from the cache
 * directory rather than a build from source. */
bool cnn_ocl_loaded_from_cache(const cnn_ocl *o);

/*
 * cnn_ocl_stage_create - the stage of layers first .. end-1 of net on o's
 * device, its commands on queue (in order; the caller keeps it, it must
 * outlive the stage). net is only read during the call; first, end, batch
 * and out as cnn_cpu_stage_create(). Parameters, momentum and gradients
 * start at 0. Returns 0, EMBER_EINVAL, EMBER_ENOMEM or EMBER_EPLATFORM
 * (device memory, in err).
 */
int cnn_ocl_stage_create(cnn_ocl *o, cl_command_queue queue,
                         const cnn_net *net, size_t first, size_t end,
                         uint32_t batch, cnn_ocl_stage **out, char *err,
                         size_t err_len);

/* cnn_ocl_stage_destroy - release the stage's buffers; NULL is a no-op. */
void cnn_ocl_stage_destroy(cnn_ocl_stage *stage);

/* The stage's batch, its input and output shapes (per sample). */
uint32_t cnn_ocl_stage_batch(const cnn_ocl_stage *stage);
cnn_shape cnn_ocl_stage_input(const cnn_ocl_stage *stage);
cnn_shape cnn_ocl_stage_output(const cnn_ocl_stage *stage);

/* cnn_ocl_stage_error - the reason of the last EMBER_EPLATFORM of a stage
 * call ("" when none); owned by the stage. */
const char *cnn_ocl_stage_error(const cnn_ocl_stage *stage);

/*
 * cnn_ocl_stage_forward, cnn_ocl_stage_backward, cnn_ocl_stage_update,
 * cnn_ocl_stage_get_params, cnn_ocl_stage_set_params,
 * cnn_ocl_stage_get_grads - as their cnn_cpu_stage_* counterparts
 * (cnn_cpu.h: arguments, buffers, return codes); the loss is summed on
 * the host in double from the per-sample losses computed in float. An
 * OpenCL failure returns EMBER_EPLATFORM, named by cnn_ocl_stage_error().
 */
int cnn_ocl_stage_forward(cnn_ocl_stage *stage, const float *in, float *out,
                          const uint8_t *labels, double *loss);
int cnn_ocl_stage_backward(cnn_ocl_stage *stage, const float *dout,
                           float *din);
int cnn_ocl_stage_update(cnn_ocl_stage *stage, double learning_rate,
                         double momentum, double decay);
int cnn_ocl_stage_get_params(cnn_ocl_stage *stage, size_t layer,
                             float *weights, float *biases);
int cnn_ocl_stage_set_params(cnn_ocl_stage *stage, size_t layer,
                             const float *weights, const float *biases);
int cnn_ocl_stage_get_grads(cnn_ocl_stage *stage, size_t layer,
                            float *weights, float *biases);

#endif
