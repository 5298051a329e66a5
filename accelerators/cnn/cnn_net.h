/*
 * cnn_net.h - a CNN for the cnn accelerator (CNN training after FPDeep):
 * the input shape, the training settings and a chain of layers, each with
 * its input and output shapes, parameter counts and multiply-adds, all
 * computed and checked when the network is read.
 *
 * Networks are read from darknet's .cfg format (cnn_cfg.c): a [net]
 * section first, then one section per layer, in order:
 *
 *   [net]            height, width, channels (required); batch (1),
 *                    learning_rate (0.001), momentum (0.9), decay (0.0001),
 *                    max_epochs (10, ember's own: darknet counts
 *                    max_batches)
 *   [convolutional]  filters (1), size (1), stride (1), pad (0; 1 means a
 *                    padding of size/2 on each side), padding (0: pixels
 *                    on each side), activation (required: relu or linear)
 *   [maxpool]        stride (1), size (stride), padding (size-1: the total
 *                    over both sides, as darknet counts it; the window
 *                    starts padding/2 before the input)
 *   [connected]      output (1), activation (required: relu or linear)
 *   [softmax]        no keys; the last layer, with cross-entropy loss
 *
 * Defaults in parentheses are darknet's. darknet's default activation,
 * logistic, is not supported, so the activation must be written. [conv],
 * [max], [conn], [soft] and [network] are darknet's short names and read
 * the same. Anything else (other sections, other keys, leaky or logistic
 * activations, a layer after [softmax]) is an error naming it.
 *
 * Shapes are height x width x channels. A convolution's output side is
 * (in + 2*padding - size) / stride + 1, a max-pool's (in + padding - size)
 * / stride + 1 (darknet's arithmetic, rounded down); the kernel must fit
 * in the padded input. A connected layer flattens its input and outputs
 * 1 x 1 x output. The softmax keeps its input's shape; its input's size
 * is the number of classes (at least 2).
 *
 * Every parser error reads "source:line: reason" ("source: reason" where
 * no line applies) in the caller's buffer.
 *
 * A network is immutable once read: its functions may be called from any
 * number of threads at once. Destroy is not thread-safe on the same object.
 */
#ifndef CNN_NET_H
#define CNN_NET_H

#include <stddef.h>
#include <stdint.h>

#include "ember/ember_errors.h"

/* Hard limits, checked as the file is read, before anything of that size
 * is allocated; a network within them needs at most 1 GiB of float
 * parameters (4 GiB with their gradients and SGD's momentum and a copy
 * while training: CNN_MAX_PARAMS x 4 bytes x 4) and 8 GiB of float
 * activations for a whole mini-batch (CNN_MAX_BATCH_ACTIVATIONS x 4). */
#define CNN_MAX_LAYERS 1024              /* layer sections */
#define CNN_MAX_SIDE 65536               /* height or width of any shape */
#define CNN_MAX_CHANNELS 65536           /* channels, filters */
#define CNN_MAX_OUTPUTS 16777216         /* a connected layer's output */
#define CNN_MAX_KERNEL 1024              /* size, stride, padding */
#define CNN_MAX_BATCH 65536              /* [net] batch */
#define CNN_MAX_EPOCHS 1000000           /* [net] max_epochs */
#define CNN_MAX_PARAMS 268435456         /* weights + biases, all layers (2^28) */
#define CNN_MAX_ACTIVATIONS 67108864     /* input + every layer's output, per
                                            sample (2^26) */
#define CNN_MAX_BATCH_ACTIVATIONS 2147483648ULL /* batch x activations (2^31) */
#define CNN_CFG_MAX_BYTES 1048576        /* a .cfg file */

typedef enum cnn_layer_kind {
  CNN_LAYER_CONV = 1,   /* [convolutional] */
  CNN_LAYER_MAXPOOL,    /* [maxpool] */
  CNN_LAYER_CONNECTED,  /* [connected] */
  CNN_LAYER_SOFTMAX     /* [softmax], with cross-entropy loss */
} cnn_layer_kind;

typedef enum cnn_activation {
  CNN_ACT_LINEAR = 0,   /* none (also maxpool and softmax) */
  CNN_ACT_RELU
} cnn_activation;

typedef struct cnn_shape {
  uint32_t h, w, c;
} cnn_shape;

typedef struct cnn_layer {
  cnn_layer_kind kind;
  int line;              /* the line of the layer's [section] in the file */
  cnn_shape in, out;
  uint32_t size;         /* conv, maxpool: the kernel side (square) */
  uint32_t stride;       /* conv, maxpool */
  uint32_t padding;      /* conv: on each side; maxpool: over both sides */
  cnn_activation act;    /* conv, connected */
  uint64_t weights;      /* conv: filters x size x size x in.c;
                            connected: in elements x output; else 0 */
  uint64_t biases;       /* conv: filters; connected: output; else 0 */
  /* Work per sample, for a partitioner to balance stages. Multiply-adds:
   * forward (FP), error back-propagation (EB: 0 for the first layer, whose
   * input needs no error) and parameter gradients (PG); 0 for maxpool and
   * softmax. Element operations: comparisons (maxpool: out x size x size;
   * ReLU: out), softmax's exponentials, sums and divisions (3 x in). */
  uint64_t fp_macs, eb_macs, pg_macs;
  uint64_t elem_ops;
} cnn_layer;

/* The [net] section's training settings. */
typedef struct cnn_train {
  uint32_t batch;        /* samples per mini-batch, 1..CNN_MAX_BATCH */
  double learning_rate;  /* > 0 and <= 10 */
  double momentum;       /* 0 <= momentum < 1 */
  double decay;          /* L2 weight decay, 0 <= decay < 1 */
  uint32_t max_epochs;   /* passes over the training set, 1..CNN_MAX_EPOCHS */
} cnn_train;

typedef struct cnn_net cnn_net;

/*
 * cnn_cfg_parse - read a network from a darknet .cfg in memory.
 *   text, len   the file's bytes (not NUL-terminated; NUL bytes refused)
 *   source      name for messages ("input" when NULL)
 *   out         receives the network (NULL on failure); the caller owns it
 *               and frees it with cnn_net_destroy()
 *   err         receives "source:line: reason" on failure (may be NULL
 *               when err_len is 0)
 * Returns 0, EMBER_EFORMAT (syntax, unknown section or key, bad value,
 * missing [net] or layers, shapes that do not chain, softmax not last),
 * EMBER_ETOOBIG (over a CNN_MAX_* limit), EMBER_EINVAL (bad arguments) or
 * EMBER_ENOMEM.
 */
int cnn_cfg_parse(const char *text, size_t len, const char *source,
                  cnn_net **out, char *err, size_t err_len);

/*
 * cnn_cfg_read - cnn_cfg_parse() on a file (at most CNN_CFG_MAX_BYTES);
 * the path is the source in messages. Also returns EMBER_EIO when the file
 * cannot be opened or read.
 */
int cnn_cfg_read(const char *path, cnn_net **out, char *err, size_t err_len);

/* cnn_net_destroy - free a network; NULL is a no-op. */
void cnn_net_destroy(cnn_net *net);

/* The input shape of one sample ([net] height, width, channels). */
cnn_shape cnn_net_input(const cnn_net *net);

/* The training settings; owned by the network. */
const cnn_train *cnn_net_train(const cnn_net *net);

/* The layers, in order, *count of them (at least 1, the last a softmax);
 * owned by the network. */
const cnn_layer *cnn_net_layers(const cnn_net *net, size_t *count);

/* The number of classes: the size of the softmax's input. */
uint32_t cnn_net_classes(const cnn_net *net);

/* Totals over the layers: parameters (weights + biases), activations per
 * sample (the input and every layer's output), and multiply-adds per sample
 * for FP, EB and PG together. */
uint64_t cnn_net_params(const cnn_net *net);
uint64_t cnn_net_activations(const cnn_net *net);
uint64_t cnn_net_macs(const cnn_net *net);

/* The layer kind's section name ("convolutional", ...); "?" if unknown. */
const char *cnn_layer_kind_name(cnn_layer_kind kind);

/* cnn_layer_channels - what ICP splits in a layer: a convolution's input
 * channels, a connected layer's input elements; 0 for other layers. And
 * the floats per such channel per sample (H x W; 1). */
uint32_t cnn_layer_channels(const cnn_layer *l);
uint64_t cnn_layer_channel_unit(const cnn_layer *l);

/* cnn_layer_outputs - what OCP splits in a layer: a convolution's output
 * channels, a connected layer's outputs; 0 for other layers. And the
 * floats per such channel per sample (its output H x W; 1). */
uint32_t cnn_layer_outputs(const cnn_layer *l);
uint64_t cnn_layer_output_unit(const cnn_layer *l);

/*
 * cnn_layer_slice - *out: l as the one-layer stage of a slice of it, for
 * the back ends that run slices. Without outputs, an ICP slice of
 * `channels` input channels: a convolution's in.c, or a connected layer's
 * input as 1 x 1 x channels; its weights in proportion, its biases kept
 * and a linear activation (the caller adds the partial sums and activates
 * them). With outputs, an OCP slice of `channels` output channels: out.c,
 * or 1 x 1 x channels outputs; its weights in proportion, channels biases
 * and the layer's activation. Operation counts stay the layer's. Returns
 * 0, or EMBER_EINVAL (*out untouched) for another layer kind or channels
 * out of 1 .. cnn_layer_channels() (cnn_layer_outputs()).
 */
int cnn_layer_slice(const cnn_layer *l, uint32_t channels, int outputs,
                    cnn_layer *out);

/*
 * cnn_net_format - the network as text: a line for the input and the
 * training settings, one line per layer (index, kind, input -> output
 * shape, kernel/stride/padding, activation, parameters, FP multiply-adds),
 * and a line of totals; every line ends in '\n'. Writes at most len bytes
 * including the NUL into buf (which may be NULL when len is 0) and, as
 * snprintf, returns the length the whole text needs, without the NUL.
 */
size_t cnn_net_format(const cnn_net *net, char *buf, size_t len);

#endif
