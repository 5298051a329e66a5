/*
 * cnn_net.h - a CNN for the cnn accelerator (CNN training after FPDeep):
 * the input shape, the training settings and a chain of layers, each with
 * its input and output shapes, parameter counts and multiply-adds, all
 * computed and checked when the network is read.
 *
 * Networks are read from darknet's .cfg format (cnn_cfg.c): a [net]
 * section first, then one section per layer, in order. Every key darknet's
 * parser (src/parser.c) reads for these sections is accepted, with
 * darknet's default (in parentheses) and meaning. A key that asks for
 * something ember does not run is refused by name, value and file:line,
 * unless it is written at its default; marked "only X" below.
 *
 *   [net], [network]
 *     height, width, channels   the input image (required)
 *     inputs (h*w*c)            must equal height x width x channels
 *     batch (1)                 samples per SGD update (the mini-batch)
 *     subdivisions (1)          darknet runs batch/subdivisions samples
 *                               per forward and backward pass and updates
 *                               after subdivisions of them: ember's
 *                               micro-batch (`ember train --micro-batch`,
 *                               ember_train_params.micro_batch) defaults
 *                               to batch/subdivisions, the mini-batch to
 *                               that times subdivisions (darknet's
 *                               rounding). Not written: ember picks the
 *                               micro-batch (the largest divisor of batch
 *                               up to 16). The micro-batch changes the
 *                               maths only through batch_normalize,
 *                               whose statistics are a micro-batch's, as
 *                               darknet's are a subdivision's
 *     learning_rate (0.001), momentum (0.9), decay (0.0001)
 *                               SGD (cnn_ref.h); decay on weights only
 *     policy (constant)         the learning rate of update k (k = 1, 2,
 *                               ... from the start of training, darknet's
 *                               batch_num): constant; step (rate x
 *                               scale^(k/step)); steps (rate times every
 *                               scales[i] whose steps[i] <= k); exp (rate
 *                               x gamma^k); poly (rate x (1 -
 *                               k/max_batches)^power, 0 from max_batches
 *                               on); sig (rate / (1 + exp(gamma (k -
 *                               step)))). random is darknet's but refused
 *     burn_in (0), power (4)    for k < burn_in: rate x (k/burn_in)^power
 *     step (1), scale (1), steps, scales (comma lists, at most
 *     CNN_MAX_STEPS; policy=steps needs as many scales as steps), gamma (1)
 *                               the policies' settings (checked whatever
 *                               the policy; the others' have no effect,
 *                               as in darknet)
 *     max_batches (0)           poly's length in updates (poly needs it
 *                               > 0); ember trains max_epochs epochs
 *     max_epochs (10)           ember's own: passes over the training set
 *     adam (0)                  only 0: ember trains by SGD with momentum;
 *                               B1 (0.9), B2 (0.999), eps (1e-7) read
 *     time_steps (1)            only 1 (darknet's recurrent networks)
 *     clip (0)                  only 0 (darknet's weight clipping)
 *     notruth (0)               read, unused (as in darknet)
 *     angle (0), aspect (1), saturation (1), exposure (1), hue (0),
 *     max_crop (2 width), min_crop (width), max_ratio, min_ratio,
 *     center (0), random (0)    darknet's image loader: augmentation,
 *                               crops and random resizing of its image
 *                               files. ember's input is MNIST idx images
 *                               of the network's exact shape, fed as they
 *                               are (scaled to [0, 1]): these keys are
 *                               checked for their type and have no effect
 *
 *   Every layer section also takes darknet's per-layer keys: truth (0),
 *   onlyforward (0), stopbackward (0), smooth (0), learning_rate (1, a
 *   scale of the rate), each only at its default; dontsave (0),
 *   dontload (0), numload (0), dontloadscales (0), about darknet's
 *   weights files, only at their defaults (ember's --save/--load files
 *   hold every layer's parameters).
 *
 *   [convolutional], [conv]
 *     filters (1), size (1), stride (1)
 *     pad (0)                   non-zero: a padding of size/2 each side
 *     padding (0)               pixels on each side (pad overrides it)
 *     activation (logistic)     linear, relu, leaky (x < 0: 0.1 x) or
 *                               logistic (1 / (1 + e^-x)); darknet's
 *                               others (tanh, elu, ...) refused by name
 *     batch_normalize (0)       non-zero: the convolution has no bias; its
 *                               output is normalised per channel (batch
 *                               statistics in training, rolling ones in
 *                               evaluation), scaled and shifted by learned
 *                               scales and biases, then activated
 *                               (cnn_ref.h has the maths, cnn_pass.h the
 *                               variance and the rolling statistics)
 *     groups (1), binary (0), xnor (0), flipped (0), dot (0): only these
 *   [connected], [conn]
 *     output (1), activation (logistic), batch_normalize (only 0)
 *   [maxpool], [max]
 *     stride (1), size (stride), padding (size-1: the total over both
 *     sides, as darknet counts it; the window starts padding/2 before the
 *     input)
 *   [avgpool], [avg]            no keys: the mean of each channel, H x W x
 *                               C -> 1 x 1 x C (darknet's global average)
 *   [dropout]
 *     probability (0.5)         0 <= p < 1: in training each value is
 *                               zeroed with probability p and the others
 *                               scaled by 1/(1-p); in evaluation it is
 *                               the identity
 *   [softmax], [soft]           the last layer, with cross-entropy loss;
 *     groups (1), temperature (1), spatial (0), noloss (0): only these;
 *     tree (none): refused when written
 *
 * Anything else (other sections, other keys, a layer after [softmax]) is
 * an error naming it. Integers are decimal ("1.5" is not one, where
 * darknet's atoi would read 1); flags are integers, any non-zero value
 * true as in darknet.
 *
 * Shapes are height x width x channels. A convolution's output side is
 * (in + 2*padding - size) / stride + 1, a max-pool's (in + padding - size)
 * / stride + 1 (darknet's arithmetic, rounded down); the kernel must fit
 * in the padded input. A connected layer flattens its input and outputs
 * 1 x 1 x output. Dropout keeps its input's shape. The softmax keeps its
 * input's shape; its input's size is the number of classes (at least 2).
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
#define CNN_MAX_STEPS 64                 /* [net] steps and scales */

typedef enum cnn_layer_kind {
  CNN_LAYER_CONV = 1,   /* [convolutional] */
  CNN_LAYER_MAXPOOL,    /* [maxpool] */
  CNN_LAYER_CONNECTED,  /* [connected] */
  CNN_LAYER_SOFTMAX,    /* [softmax], with cross-entropy loss */
  CNN_LAYER_DROPOUT,    /* [dropout] */
  CNN_LAYER_AVGPOOL     /* [avgpool]: a global average per channel */
} cnn_layer_kind;

typedef enum cnn_activation {
  CNN_ACT_LINEAR = 0,   /* none (also the layers without an activation) */
  CNN_ACT_RELU,         /* max(z, 0) */
  CNN_ACT_LEAKY,        /* z > 0 ? z : 0.1 z (darknet's leaky) */
  CNN_ACT_LOGISTIC      /* 1 / (1 + exp(-z)) */
} cnn_activation;

/* The slope of leaky below 0, darknet's. */
#define CNN_LEAKY_SLOPE 0.1

typedef struct cnn_shape {
  uint32_t h, w, c;
} cnn_shape;

typedef struct cnn_layer {
  cnn_layer_kind kind;
  int line;              /* the line of the layer's [section] in the file */
  cnn_shape in, out;
  uint32_t size;         /* conv, maxpool: the kernel side (square);
                            avgpool: 0 (the window is the whole plane) */
  uint32_t stride;       /* conv, maxpool */
  uint32_t padding;      /* conv: on each side; maxpool: over both sides */
  cnn_activation act;    /* conv, connected */
  int batch_norm;        /* conv: batch_normalize (then no bias of its own:
                            biases are the normalisation's shifts) */
  double probability;    /* dropout: of zeroing a value in training */
  uint64_t weights;      /* conv: filters x size x size x in.c;
                            connected: in elements x output; else 0 */
  uint64_t biases;       /* conv: filters; connected: output; else 0 */
  uint64_t scales;       /* conv with batch_norm: filters (the learned
                            scales); else 0 */
  uint64_t rolling;      /* conv with batch_norm: 2 x filters (the rolling
                            means, then the rolling variances); else 0 */
  /* Work per sample, for a partitioner to balance stages. Multiply-adds:
   * forward (FP), error back-propagation (EB: 0 for the first layer, whose
   * input needs no error) and parameter gradients (PG); 0 for the layers
   * without weights. Element operations of the forward pass: maxpool's
   * comparisons (out x size x size), avgpool's sums (in), an activation's
   * per output (ReLU and leaky 1, logistic 4), batch normalisation's 8
   * per output (statistics, normalising, scale and shift), dropout's 2
   * per value (mask and scale), softmax's exponentials, sums and
   * divisions (3 x in). */
  uint64_t fp_macs, eb_macs, pg_macs;
  uint64_t elem_ops;
} cnn_layer;

/* A layer's floats in a state block and in GET/SET_PARAMS: its weights,
 * biases, scales and rolling statistics, in that order (cnn_layout.h). */
static inline uint64_t cnn_layer_params(const cnn_layer *l) {
  return l->weights + l->biases + l->scales + l->rolling;
}

/* How the learning rate changes over the updates ([net] policy). */
typedef enum cnn_policy {
  CNN_POLICY_CONSTANT = 0,
  CNN_POLICY_STEP,
  CNN_POLICY_STEPS,
  CNN_POLICY_EXP,
  CNN_POLICY_POLY,
  CNN_POLICY_SIG
} cnn_policy;

/* The [net] section's training settings. */
typedef struct cnn_train {
  uint32_t batch;        /* samples per mini-batch, 1..CNN_MAX_BATCH */
  uint32_t subdivisions; /* micro-batches per mini-batch as written,
                            1..batch; 0: not written */
  double learning_rate;  /* > 0 and <= 10 */
  double momentum;       /* 0 <= momentum < 1 */
  double decay;          /* L2 weight decay, 0 <= decay < 1 */
  uint32_t max_epochs;   /* passes over the training set, 1..CNN_MAX_EPOCHS */
  cnn_policy policy;     /* the rate's schedule (cnn_train_rate) */
  uint32_t burn_in;      /* updates of warm-up */
  double power;          /* burn_in's and poly's exponent */
  uint32_t step;         /* step's period, sig's midpoint (>= 1) */
  double scale;          /* step's factor */
  double gamma;          /* exp's and sig's */
  uint32_t max_batches;  /* poly's length in updates */
  uint32_t n_steps;      /* steps: the updates where the rate changes, */
  uint32_t steps[CNN_MAX_STEPS];
  double scales[CNN_MAX_STEPS]; /* and the factor at each */
} cnn_train;

/*
 * cnn_train_rate - the learning rate of update k (1 for the first update
 * of training, as darknet counts it) under t's policy and burn_in, from
 * the base rate base (t's learning_rate, or a caller's in its place).
 * Never negative; poly gives 0 from max_batches on.
 */
double cnn_train_rate(const cnn_train *t, double base, uint64_t k);

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
 * cnn_layer_check - l's shapes as a back end builds on them, checked
 * before oneDNN or cnn.cl sees any: every side and count within the
 * limits above; its input prev (NULL: not checked), the previous layer's
 * output; its output what follows from its input by darknet's arithmetic,
 * which oneDNN's descriptors and cnn.cl's kernels apply too: a
 * convolution's (in + 2 padding - size) / stride + 1 per side, a
 * max-pool's (in + padding - size) / stride + 1, the window inside the
 * padded input (a window may lie wholly in padding, e.g. padding at least
 * the kernel's size); a connected layer's and the avg-pool's 1 x 1; the
 * others keep their input's. Layers of cnn_cfg_parse and
 * cnn_layer_slice pass. Returns 0, or EMBER_EPARAM with the numbers in
 * why.
 */
int cnn_layer_check(const cnn_layer *l, const cnn_shape *prev, char *why,
                    size_t why_len);

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
