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
 * layouts; a batch-normalized layer's scales too, and its rolling
 * statistics, its convolution's output and the batch's statistics), the
 * activations of the last forward pass and the errors of the last
 * backward pass (NCHW), max-pool's argmax, and for a stage ending in the
 * softmax the labels, per-sample losses and the loss's gradient, computed
 * with the forward pass. Forward passes run in the mode and with the
 * dropout key of cnn_ocl_stage_set_pass (cnn_pass.h; CNN_MODE_TRAIN with
 * a zero key until set).
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
#include "cnn_pass.h"

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

/*
 * cnn_ocl_slice_create - a one-layer stage for a slice of layer `layer`
 * of net (a convolutional or connected layer), as cnn_cpu.h's slice
 * stages: with outputs false an ICP slice of `channels` input channels
 * (its input those channels packed, a linear activation, the input error
 * always made; with_biases false: its biases stay 0, neither loaded nor
 * stored, for a slice that holds none), with outputs true an OCP slice of
 * `channels` output channels (the whole input, the layer's activation,
 * its own biases, the input error made after layer 0). The stage's layer
 * index is `layer`. Returns as cnn_ocl_stage_create().
 */
int cnn_ocl_slice_create(cnn_ocl *o, cl_command_queue queue,
                         const cnn_net *net, size_t layer, uint32_t channels,
                         bool outputs, bool with_biases, uint32_t batch,
                         cnn_ocl_stage **out, char *err, size_t err_len);

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

/* cnn_ocl_stage_set_pass - the mode and dropout key of the stage's next
 * forward passes (cnn_pass.h); cnn_ocl_stage_forward_pass sets it and
 * runs cnn_ocl_stage_forward (EMBER_EINVAL for an unknown mode). The
 * rest as cnn_cpu.h's cnn_cpu_stage_forward_pass and
 * cnn_cpu_stage_set_norm, cnn_cpu_stage_get_norm and
 * cnn_cpu_stage_get_norm_grads. */
void cnn_ocl_stage_set_pass(cnn_ocl_stage *stage, const cnn_pass *pass);
int cnn_ocl_stage_forward_pass(cnn_ocl_stage *stage, const float *in,
                               float *out, const uint8_t *labels,
                               double *loss, const cnn_pass *pass);
int cnn_ocl_stage_set_norm(cnn_ocl_stage *stage, size_t layer,
                           const float *scales, const float *rolling);
int cnn_ocl_stage_get_norm(cnn_ocl_stage *stage, size_t layer,
                           float *scales, float *rolling);
int cnn_ocl_stage_get_norm_grads(cnn_ocl_stage *stage, size_t layer,
                                 float *scales);

/*
 * Device-buffer variants, for a stage whose truth lives in other device
 * buffers (the cnn accelerator's state block, cnn_exec_opencl.c). The
 * caller keeps every cl_mem (of o's context) and checks what the host
 * variants check on the host (labels below the classes). Each blocks
 * until done, like the host variants, except load and store, which only
 * queue their copies on the stage's queue (in order: the stage's next
 * call, or clFinish, completes them).
 *
 * cnn_ocl_stage_forward_mem - cnn_ocl_stage_forward with the input taken
 * from in at byte offset in_off and the labels (NULL: none) from labels at
 * labels_off; the output copied to out (NULL: not) at offset 0 and read
 * into host_out (NULL: not).
 *
 * cnn_ocl_stage_backward_mem - cnn_ocl_stage_backward with dout and din
 * device buffers (at offset 0; NULL where the host variant takes NULL).
 *
 * cnn_ocl_stage_load, cnn_ocl_stage_store - copy the parameters, the
 * accumulated gradients or the rolling statistics (part) of the stage's
 * layer of network index layer from, or to, a buffer whose layer's
 * floats start at byte offset off: the weights, then the biases right
 * after them, then a batch-normalized layer's scales and rolling
 * statistics (cnn_layout.h's order; gradients have none for the rolling
 * statistics, which are left alone there; CNN_OCL_ROLLING copies those
 * alone, at their place). The backward pass adds to the gradients, so
 * gradients loaded before it accumulate.
 *
 * All return 0, EMBER_EINVAL (a bad argument, a layer without parameters)
 * or EMBER_EPLATFORM (cnn_ocl_stage_error()).
 */
typedef enum { CNN_OCL_PARAMS, CNN_OCL_GRADS, CNN_OCL_ROLLING } cnn_ocl_part;

int cnn_ocl_stage_forward_mem(cnn_ocl_stage *stage, cl_mem in, size_t in_off,
                              cl_mem labels, size_t labels_off, cl_mem out,
                              float *host_out, double *loss);
int cnn_ocl_stage_backward_mem(cnn_ocl_stage *stage, cl_mem dout,
                               cl_mem din);
int cnn_ocl_stage_load(cnn_ocl_stage *stage, size_t layer, cnn_ocl_part part,
                       cl_mem src, size_t off);
int cnn_ocl_stage_store(cnn_ocl_stage *stage, size_t layer,
                        cnn_ocl_part part, cl_mem dst, size_t off);

/*
 * cnn_ocl_sgd - queue SGD on q (of o's device) over n floats of buf:
 * parameters at float index w_off, their momentum at v_off, gradients at
 * g_off: v = momentum v + g scale + decay w; w -= learning_rate v; g = 0
 * (cnn_ref.h's update on the mean of 1/scale backward passes). Does not
 * wait. Returns 0, EMBER_EINVAL or EMBER_EPLATFORM (the reason in err).
 * It sets arguments of o's kernels: not concurrently with other calls on
 * o or its stages.
 */
int cnn_ocl_sgd(cnn_ocl *o, cl_command_queue q, cl_mem buf, uint64_t w_off,
                uint64_t v_off, uint64_t g_off, uint64_t n, float scale,
                float learning_rate, float momentum, float decay, char *err,
                size_t err_len);

/*
 * What a slice adds around its stage (cnn.cl), queued on q without
 * waiting, offsets and counts in floats: cnn_ocl_add y[y_off..] +=
 * x[x_off..] over n; cnn_ocl_act_keep y = act(y) over n, copied to kept
 * at k_off when keep; cnn_ocl_act_mask e = the error through act, from
 * the output kept at k_off. Return 0, EMBER_EINVAL or EMBER_EPLATFORM
 * (the reason in err); not concurrently with other calls on o, as
 * cnn_ocl_sgd.
 */
int cnn_ocl_add(cnn_ocl *o, cl_command_queue q, cl_mem x, uint64_t x_off,
                cl_mem y, uint64_t y_off, uint64_t n, char *err,
                size_t err_len);
int cnn_ocl_act_keep(cnn_ocl *o, cl_command_queue q, cl_mem y, cl_mem kept,
                     uint64_t k_off, uint64_t n, cnn_activation act,
                     bool keep, char *err, size_t err_len);
int cnn_ocl_act_mask(cnn_ocl *o, cl_command_queue q, cl_mem kept,
                     uint64_t k_off, cl_mem e, uint64_t n, cnn_activation act,
                     char *err, size_t err_len);

#endif
