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
 *   Activation   relu(z) = max(z, 0), linear(z) = z; the error through a
 *                ReLU is dy where y > 0, else 0 (taken from the output).
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

/* Elements of one sample of a shape. */
size_t cnn_ref_elems(cnn_shape s);

/*
 * cnn_ref_forward - one layer's FP over a batch: x (batch x in) -> y
 * (batch x out). w, b: the layer's weights and biases (conv, connected;
 * NULL otherwise). Softmax writes probabilities.
 */
void cnn_ref_forward(const cnn_layer *l, uint32_t batch, const double *x,
                     const double *w, const double *b, double *y);

/*
 * cnn_ref_backward - one layer's EB and PG over a batch, after its
 * cnn_ref_forward() from x to y: dy is the error at the output (after the
 * activation). dx (batch x in) is written when not NULL; dw and db (the
 * layer's parameter counts) are added to when not NULL. Softmax layers are
 * not handled here: see cnn_ref_xent_grad().
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
