/*
 * cnn_cpu.h - one stage of CNN training (a contiguous range of a network's
 * layers) on the CPU, in single precision on oneDNN (libdnnl 2.x, C API).
 * The maths and its conventions are cnn_ref.h's: NCHW tensors, OIHW
 * convolution weights, connected weights as output x input (CHW order),
 * the mean cross-entropy loss, SGD with momentum and weight decay (none on
 * biases); this is the fast path, the reference is the oracle.
 *
 * Inside a stage, tensors stay in the blocked layouts oneDNN picks for its
 * primitives (created once, with the stage); the stage's input and output
 * are NCHW floats, and parameters and gradients are read and written in
 * the canonical layouts. A stage owns as state: weights, biases (a
 * batch-normalized layer's: its scales too, and its rolling statistics),
 * their momentum (velocity) and accumulated gradients, and the
 * activations of the last forward pass kept for back-propagation (a
 * dropout layer's mask, a normalisation's batch statistics). Leaky and
 * logistic run as oneDNN eltwise primitives, the avg-pool as pooling_avg,
 * batch normalisation as batch_normalization (forward_training,
 * forward_inference on the rolling statistics, backward), dropout as a
 * binary multiplication by a mask drawn per pass (cnn_pass.h).
 *
 * Threads: oneDNN as Debian builds it (libdnnl2 2.6) runs its primitives
 * on OpenMP (DNNL_CPU_RUNTIME_OMP, libgomp): a call uses the OpenMP team
 * of the calling thread, OMP_NUM_THREADS threads by default. A stage is
 * used by one thread at a time, any thread: it was built on one thread
 * need not run on it (its primitives' scratchpad is the stage's own, not
 * oneDNN's per-thread one); distinct stages are independent.
 */
#ifndef CNN_CPU_H
#define CNN_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "cnn_net.h"
#include "cnn_pass.h"

typedef struct cnn_cpu_stage cnn_cpu_stage;

/* The most scratch a stage's oneDNN primitives may ask for (the largest
 * one's: they share it). A gemm convolution (oneDNN's pick where its jit
 * kernels do not apply, e.g. padding at least the kernel's size) asks for
 * its input unrolled, C x K x K x OH x OW floats per thread: LeNet's conv2
 * about 1 MiB, a hostile layer terabytes. */
#define CNN_CPU_MAX_SCRATCH_BYTES (1ull << 30)

/*
 * cnn_cpu_stage_create - the stage of layers first .. end-1 of net.
 *   net          the network; only read during the call (the stage keeps
 *                copies of its layers)
 *   first, end   the range, 0 <= first < end <= layer count
 *   batch        samples per call (1..CNN_MAX_BATCH)
 *   out          receives the stage; the caller owns it
 *                (cnn_cpu_stage_destroy())
 *   err          receives the reason on failure (may be NULL when err_len
 *                is 0)
 * Weights and biases start at 0, momentum and gradients at 0. The error at
 * the stage's input is computed unless first is 0.
 * Every layer's shapes are checked against the arithmetic oneDNN applies
 * before anything reaches it.
 * Returns 0, EMBER_EINVAL (bad arguments), EMBER_EPARAM (a layer this back
 * end does not run: a convolution, max-pool or avg-pool after a connected
 * layer in the same stage, a max-pool window wholly in padding, shapes
 * that do not chain or follow from the layer's kernel, stride and
 * padding, or a shape oneDNN has no implementation for), EMBER_ETOOBIG
 * (a primitive asks for more than CNN_CPU_MAX_SCRATCH_BYTES of scratch),
 * EMBER_ENOMEM or EMBER_EPLATFORM (another oneDNN failure, named in err).
 */
int cnn_cpu_stage_create(const cnn_net *net, size_t first, size_t end,
                         uint32_t batch, cnn_cpu_stage **out, char *err,
                         size_t err_len);

/*
 * cnn_cpu_slice_create - a one-layer stage for an input-channel slice
 * (ICP, FPDeep): layer `layer` of net, a convolutional or connected layer,
 * with only `channels` input channels (1 .. its input channels; for a
 * connected layer 1 .. its input elements, the layer then taking a 1 x 1 x
 * channels input) and a linear activation, keeping its biases (load zeros
 * where a slice has none). Its input is the slice's channels, packed
 * (batch x channels x H x W); the error at its input is always computed.
 * The stage's layer index is `layer`, for the parameter functions below,
 * whose weights are then the slice's (out x channels x K x K). The
 * caller adds partial sums and applies the activation. Returns as
 * cnn_cpu_stage_create(); EMBER_EINVAL for another layer kind or a
 * channel count out of range.
 */
int cnn_cpu_slice_create(const cnn_net *net, size_t layer,
                         uint32_t channels, uint32_t batch,
                         cnn_cpu_stage **out, char *err, size_t err_len);

/*
 * cnn_cpu_ocp_slice_create - a one-layer stage for an output-channel slice
 * (OCP, FPDeep): layer `layer` of net, a convolutional or connected
 * layer, with only `channels` output channels (1 .. its output channels;
 * a connected layer's outputs) and its own activation. Its input is the
 * layer's whole input; the error at its input (the slice's part of the
 * layer's) is computed for a layer after the first. Its weights are the
 * layer's rows for those channels, (channels x in x K x K). Returns as
 * cnn_cpu_slice_create().
 */
int cnn_cpu_ocp_slice_create(const cnn_net *net, size_t layer,
                             uint32_t channels, uint32_t batch,
                             cnn_cpu_stage **out, char *err, size_t err_len);

/* cnn_cpu_stage_destroy - free a stage; NULL is a no-op. */
void cnn_cpu_stage_destroy(cnn_cpu_stage *stage);

/* cnn_cpu_stage_bytes - the bytes the stage holds in buffers of its own:
 * its oneDNN memories (tensors, errors, parameters, momentum, gradients,
 * workspaces, reorder copies) and its scratchpad; what keeping it costs
 * (oneDNN's primitives themselves, jit code and descriptors, not
 * counted). */
size_t cnn_cpu_stage_bytes(const cnn_cpu_stage *stage);

/* The stage's batch, and its first layer's input and last layer's output
 * shapes (per sample). */
uint32_t cnn_cpu_stage_batch(const cnn_cpu_stage *stage);
cnn_shape cnn_cpu_stage_input(const cnn_cpu_stage *stage);
cnn_shape cnn_cpu_stage_output(const cnn_cpu_stage *stage);

/*
 * cnn_cpu_stage_forward - FP of a batch.
 *   in      batch x input floats, NCHW
 *   out     batch x output floats, NCHW (may be NULL); for a stage that
 *           ends in the softmax, the probabilities
 *   labels  batch labels (< classes) for a stage that ends in the softmax:
 *           kept for cnn_cpu_stage_backward(); NULL otherwise
 *   loss    receives the mean cross-entropy when labels are given (may be
 *           NULL)
 * The caller's buffers are used only during the call.
 * Returns 0, EMBER_EINVAL (labels without a softmax, a label out of range)
 * or EMBER_EPLATFORM.
 */
int cnn_cpu_stage_forward(cnn_cpu_stage *stage, const float *in, float *out,
                          const uint8_t *labels, double *loss);

/*
 * cnn_cpu_stage_forward_pass - cnn_cpu_stage_forward in pass's mode with
 * its dropout key (cnn_pass.h): CNN_MODE_TRAIN normalises with the batch's
 * statistics and moves the stage's rolling ones, CNN_MODE_RECOMPUTE the
 * same without moving them, CNN_MODE_INFER normalises with the rolling
 * ones and drops nothing. cnn_cpu_stage_forward is CNN_MODE_TRAIN with a
 * zero key. A backward follows a training-mode pass. Also EMBER_EINVAL
 * for pass NULL or an unknown mode.
 */
int cnn_cpu_stage_forward_pass(cnn_cpu_stage *stage, const float *in,
                               float *out, const uint8_t *labels,
                               double *loss, const cnn_pass *pass);

/*
 * cnn_cpu_stage_backward - EB and PG of the batch of the last forward.
 *   dout    the error at the stage's output, batch x output floats, NCHW
 *           (the loss's gradient with respect to the last layer's output);
 *           ignored for a stage that ends in the softmax, whose error is
 *           the loss's gradient for the labels given to the last forward
 *   din     receives the error at the stage's input (batch x input floats,
 *           NCHW), or NULL; not computed for a stage starting at layer 0
 * Parameter gradients are added to the stage's accumulated ones.
 * Returns 0, EMBER_EINVAL (no forward with labels before a softmax stage's
 * backward, din for a stage starting at layer 0) or EMBER_EPLATFORM.
 */
int cnn_cpu_stage_backward(cnn_cpu_stage *stage, const float *dout,
                           float *din);

/*
 * cnn_cpu_stage_update - SGD with momentum and weight decay (cnn_ref.h)
 * over all the stage's parameters (weights with decay; biases and a
 * batch normalisation's scales without) with the accumulated gradients,
 * which are then zeroed. Returns 0 or EMBER_EPLATFORM.
 */
int cnn_cpu_stage_update(cnn_cpu_stage *stage, double learning_rate,
                         double momentum, double decay);

/* cnn_cpu_stage_zero_grads - drop the accumulated gradients (the next
 * backward starts them anew), as an update does, without updating. */
void cnn_cpu_stage_zero_grads(cnn_cpu_stage *stage);

/*
 * cnn_cpu_stage_get_params, cnn_cpu_stage_set_params - the weights and
 * biases of the network's layer `layer` (an index in the network, inside
 * the stage) in the canonical layouts: layer->weights and layer->biases
 * floats. cnn_cpu_stage_get_grads reads the accumulated gradients alike.
 * Returns 0, EMBER_EINVAL (a layer outside the stage or without
 * parameters, NULL buffers) or EMBER_EPLATFORM.
 */
int cnn_cpu_stage_get_params(cnn_cpu_stage *stage, size_t layer,
                             float *weights, float *biases);
int cnn_cpu_stage_set_params(cnn_cpu_stage *stage, size_t layer,
                             const float *weights, const float *biases);
int cnn_cpu_stage_get_grads(cnn_cpu_stage *stage, size_t layer,
                            float *weights, float *biases);

/*
 * cnn_cpu_stage_set_norm, cnn_cpu_stage_get_norm - a batch-normalized
 * layer's scales (layer->scales floats) and rolling statistics (means,
 * then variances: layer->rolling floats); cnn_cpu_stage_get_norm_grads
 * the scales' accumulated gradients. The shifts are the layer's biases
 * (cnn_cpu_stage_set_params). Return 0 or EMBER_EINVAL (a layer outside
 * the stage or without batch_norm, NULL buffers).
 *
 * cnn_cpu_stage_set_layer, cnn_cpu_stage_get_layer - all of a layer's
 * parameters as one block of cnn_layer_params floats (weights, biases,
 * scales, rolling statistics: cnn_layout.h's order);
 * cnn_cpu_stage_get_layer_grads the accumulated gradients in the same
 * shape (zeros where the rolling statistics are). Return as
 * cnn_cpu_stage_get_params.
 */
int cnn_cpu_stage_set_norm(cnn_cpu_stage *stage, size_t layer,
                           const float *scales, const float *rolling);
int cnn_cpu_stage_get_norm(cnn_cpu_stage *stage, size_t layer,
                           float *scales, float *rolling);
int cnn_cpu_stage_get_norm_grads(cnn_cpu_stage *stage, size_t layer,
                                 float *scales);
int cnn_cpu_stage_set_layer(cnn_cpu_stage *stage, size_t layer,
                            const float *params);
int cnn_cpu_stage_get_layer(cnn_cpu_stage *stage, size_t layer,
                            float *params);
int cnn_cpu_stage_get_layer_grads(cnn_cpu_stage *stage, size_t layer,
                                  float *grads);

/*
 * cnn_cpu_stage_impl - the names of the oneDNN implementations the stage
 * runs for layer `layer`, as oneDNN reports them, space-separated in the
 * order: forward, ReLU forward (where there is one), backward weights,
 * backward data (where EB runs), e.g. "jit:avx2 jit:avx2 jit:avx2"; the
 * reorders are not named. For benchmarks and logs; "" outside the stage.
 * Owned by the stage.
 */
const char *cnn_cpu_stage_impl(const cnn_cpu_stage *stage, size_t layer);

#endif
