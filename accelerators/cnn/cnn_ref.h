/*
 * cnn_ref.h - the maths of a CNN training stage, in plain double-precision
 * loops written for clarity: the test oracle of every implementation of the
 * cnn accelerator and the one place its conventions are written down. It is
 * not the fast path (cnn_cpu.h is, on oneDNN).
 *
 * Conventions (all implementations follow them):
 *
 *   Tensors      NCHW per mini-batch: element (n, c, h, w) of a tensor of
 *                shape H x W x C is at ((n*C + c)*H + h)*W + w. A sample's
 *                elements are thus in CHW order.
 *   Convolution  weights OIHW: (filter o, input channel i, kernel row kh,
 *                kernel column kw) at ((o*I + i)*K + kh)*K + kw; one bias
 *                per filter. y = act(b[o] + sum w * x), input positions
 *                h*stride - padding + kh (rows), likewise columns; outside
 *                the input reads 0.
 *   Max-pool     darknet's: the window of output (oh, ow) starts at input
 *                row oh*stride - padding/2 (columns alike) and covers size
 *                x size positions; positions outside the input are skipped
 *                (a window with none yields 0 and passes no error back).
 *                The error goes to the first maximum in row-major window
 *                order.
 *   Connected    weights (output o, input element j) at o*J + j, j the
 *                input sample's CHW index (darknet's flatten); one bias per
 *                output. y = act(b[o] + sum_j w[o,j] x[j]).
 *   Activation   relu(z) = max(z, 0), leaky(z) = z > 0 ? z : 0.1 z,
 *                logistic(z) = 1 / (1 + exp(-z)), linear(z) = z. The
 *                error through it is taken from the output y: relu dy
 *                where y > 0, else 0; leaky dy where y > 0, else 0.1 dy;
 *                logistic dy y (1 - y).
 *   Batch norm   a convolution with batch_norm has no bias of its own: of
 *                its output z, per channel c, x^ = (z - mean_c) /
 *                sqrt(var_c + CNN_BN_EPS), y = act(scales[c] x^ +
 *                biases[c]). In training (and the forward pass a backward
 *                re-runs) mean_c and var_c are the batch's, over samples
 *                and positions, the variance biased (1/n); a training
 *                forward then moves the rolling statistics by
 *                CNN_BN_MOMENTUM towards them (cnn_pass.h). In evaluation
 *                they are the rolling ones. The backward pass is that of
 *                the batch statistics (mean and variance depend on z).
 *   Avg-pool     y[n, c] = the mean of x[n, c, :, :] (darknet's global
 *                average); dx[n, c, h, w] = dy[n, c] / (H x W).
 *   Dropout      in training y = x * mask, mask 0 for a dropped value and
 *                1 / (1 - p) else, drawn by cnn_pass.h's hash of the
 *                layer's network index, the pass's seed, step and the
 *                sample's index in the mini-batch (sample0 + n); dx = dy
 *                * mask. In evaluation y = x.
 *   Softmax      p[n,k] = exp(x[n,k] - m) / sum_j exp(x[n,j] - m), m the
 *                row's maximum; classes are the input sample's elements.
 *   Loss         mean over the batch of -log p[n, label[n]]; its gradient
 *                with respect to the softmax's input is
 *                (p[n,k] - [k == label[n]]) / batch.
 *   Gradients    of that mean loss; parameter gradients (PG) are
 *                accumulated (+=) until the update.
 *   SGD          per parameter, with g its accumulated gradient:
 *                  v = momentum * v + g + decay * w    (weights)
 *                  v = momentum * v + g                (biases: no decay)
 *                  w = w - learning_rate * v
 *                then g = 0. (PyTorch's SGD with momentum and weight decay,
 *                decay left off the biases as darknet and Caffe's usual
 *                nets do.)
 *
 * Error back-propagation (EB) takes dy, the loss's gradient with respect to
 * the layer's output (after its activation), and writes dx with respect to
 * its input; PG adds the gradients of the weights and biases.
 *
 * Functions are pure: no state, thread-safe on distinct outputs.
 */
#ifndef CNN_REF_H
#define CNN_REF_H

#include <stddef.h>
#include <stdint.h>

#include "cnn_net.h"
#include "cnn_pass.h"

/* A layer's parameters in the canonical layouts (cnn_layout.h's order);
 * NULL where the layer has none. */
typedef struct cnn_ref_params {
  const double *w, *b;     /* weights, biases (batch_norm: the shifts) */
  const double *scales;    /* batch_norm: the scales */
  double *rolling;         /* batch_norm: the rolling means, then variances;
                              a training forward updates them */
} cnn_ref_params;

/* Elements of one sample of a shape. */
size_t cnn_ref_elems(cnn_shape s);

/*
 * cnn_ref_forward_pass - one layer's FP over a batch: x (batch x in) -> y
 * (batch x out), in pass's mode (its dropout key for the layer of network
 * index `index`). p: the layer's parameters. Softmax writes
 * probabilities.
 */
void cnn_ref_forward_pass(const cnn_layer *l, size_t index, uint32_t batch,
                          const cnn_pass *pass, const double *x,
                          const cnn_ref_params *p, double *y);

/*
 * cnn_ref_backward_pass - one layer's EB and PG over a batch, after its
 * cnn_ref_forward_pass() from x to y in a training mode: dy is the error
 * at the output (after the activation). dx (batch x in) is written when
 * not NULL; dw, db and dscales (the layer's weights, biases and scales
 * counts) are added to when not NULL. Softmax layers are not handled
 * here: see cnn_ref_xent_grad().
 */
void cnn_ref_backward_pass(const cnn_layer *l, size_t index, uint32_t batch,
                           const cnn_pass *pass, const double *x,
                           const double *y, const cnn_ref_params *p,
                           const double *dy, double *dx, double *dw,
                           double *db, double *dscales);

/*
 * cnn_ref_forward - cnn_ref_forward_pass of a layer without batch_norm in
 * CNN_MODE_TRAIN with a zero dropout key (seed, step, sample0 and index
 * 0): x (batch x in) -> y (batch x out). w, b: the layer's weights and
 * biases (conv, connected; NULL otherwise).
 */
void cnn_ref_forward(const cnn_layer *l, uint32_t batch, const double *x,
                     const double *w, const double *b, double *y);

/*
 * cnn_ref_backward - cnn_ref_backward_pass after cnn_ref_forward(): dy is
 * the error at the output (after the activation). dx (batch x in) is
 * written when not NULL; dw and db (the layer's parameter counts) are
 * added to when not NULL. Softmax layers are not handled here: see
 * cnn_ref_xent_grad().
 */
void cnn_ref_backward(const cnn_layer *l, uint32_t batch, const double *x,
                      const double *y, const double *w, const double *dy,
                      double *dx, double *dw, double *db);

/* cnn_ref_xent_loss - the mean cross-entropy of probabilities p
 * (batch x classes) against labels (each < classes). */
double cnn_ref_xent_loss(uint32_t batch, uint32_t classes, const double *p,
                         const uint8_t *labels);

/* cnn_ref_xent_grad - dx = (p - onehot(labels)) / batch, the loss's
 * gradient with respect to the softmax's input. */
void cnn_ref_xent_grad(uint32_t batch, uint32_t classes, const double *p,
                       const uint8_t *labels, double *dx);

/*
 * cnn_ref_sgd - the update above on n parameters w with velocity v and
 * accumulated gradient g (zeroed); decay is applied as given (pass 0 for
 * biases).
 */
void cnn_ref_sgd(size_t n, double *w, double *v, double *g,
                 double learning_rate, double momentum, double decay);

#endif
