/*
 * cnn_layout.h - where a cnn stage's state lives in its state block. The
 * layout follows from (network, first, end, batch) alone, so the client
 * sizes the block, plan() checks it and any platform can read it; nothing
 * in it depends on a back end's own layouts (oneDNN's blocked tensors stay
 * inside cnn_cpu).
 *
 *   header    64 bytes (cnn_state_header): a magic, the stage's key, the
 *             range and batch it was stamped for, flags, updates done
 *   params    the stage's parameters, layer by layer in network order,
 *             each layer's weights then its biases, in cnn_ref.h's
 *             canonical layouts (OIHW; output x input), and for a
 *             batch-normalized convolution (whose biases are the
 *             normalisation's shifts) its scales, rolling means and
 *             rolling variances after them (cnn_layer_params floats a
 *             layer): `params` floats
 *   momentum  SGD's velocity, the same shape (0 where the rolling
 *             statistics are: SGD does not touch them)
 *   grads     the accumulated parameter gradients, the same shape (0
 *             where the rolling statistics are)
 *   stash     per slot (1..CNN_MAX_SLOTS: the FORWARDs a stage keeps at
 *             once, so a pipeline has several samples in flight), the
 *             stage's input of that slot's FORWARD (batch x input floats,
 *             NCHW): the activations kept for back-propagation. The CPU
 *             recomputes the inner ones from it at BACKWARD (oneDNN's
 *             workspaces cannot live in a block); see README.md
 *   labels    per slot, that FORWARD's labels, batch bytes (last stage
 *             only)
 *   kept      per slot, the last ICP slice of a layer with an
 *             activation only: its FORWARD's output (batch x out floats,
 *             activated), from which BACKWARD takes the activation's
 *             derivative
 *   pass      per slot, a stage with a dropout layer only: its FORWARD's
 *             dropout key (cnn_slot_pass: seed, step, first sample), which
 *             the forward pass BACKWARD re-runs draws its masks from
 *
 * An ICP slice (cnn.proto: channel_begin/end, one convolutional or
 * connected layer, input channels [c0, c1)) has the same regions, sized
 * for the slice: params are its weights, out x (c1 - c0) x K x K (the
 * OIHW sub-tensor; connected: out x (c1 - c0), the rows' columns c0..c1-1)
 * then, in the last slice only (c1 == the layer's input channels), the
 * biases; momentum and grads alike; the stash holds the slice's input
 * channels (batch x (c1 - c0) x H x W), not the whole input; no labels.
 * An OCP slice (cnn.proto: split_outputs, output channels [c0, c1)) holds
 * its rows of the weights, (c1 - c0) x in x K x K (connected: (c1 - c0) x
 * in), then its c1 - c0 biases; the stash holds the whole input; no
 * labels, nothing kept (its activation is recomputed from the stash).
 * Every region starts on a 64-byte boundary; floats are in host order
 * (the platforms of one node share it).
 */
#ifndef EMBER_CNN_LAYOUT_H
#define EMBER_CNN_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#include "cnn_net.h"

#define CNN_STATE_MAGIC "EMBCNN1" /* 8 bytes with its NUL */

/* The most FORWARDs a stage keeps for their BACKWARD: header.flags has a
 * bit per slot, set while the slot's stash holds a FORWARD's input. */
#define CNN_MAX_SLOTS 16
/* At most this many pieces of a BACKWARD's output error (cnn.proto
 * error_channels: one input block each, and libember submits at most 16):
 * so at most this many ICP slices of one layer in a pipeline. */
#define CNN_MAX_ERROR_PIECES 16

typedef struct cnn_state_header {
  char magic[8];
  uint64_t key;           /* cnn_stage_key() of the stage */
  uint32_t first, end, batch, flags;
  uint64_t updates;       /* UPDATEs since INIT or SET_PARAMS */
  uint32_t slots;
  uint32_t channel_begin, channel_end; /* an ICP slice's; 0, 0 otherwise */
  uint8_t reserved[12];
} cnn_state_header;

/* A slot's dropout key, as FORWARD kept it (cnn_pass.h). */
typedef struct cnn_slot_pass {
  uint64_t seed, step;
  uint32_t sample0;
  uint32_t reserved;
} cnn_slot_pass;

typedef struct cnn_layout {
  uint64_t params;        /* parameter floats of the stage */
  uint64_t in_elems;      /* floats of one batch at the stage's input (a
                             slice: the layer's whole input) */
  uint64_t out_elems;     /* ... and at its output */
  int last;               /* the stage ends in the softmax */
  uint32_t slots;
  uint64_t params_off, momentum_off, grads_off;
  uint64_t stash_off, stash_stride;   /* slot s at stash_off + s * stride */
  uint64_t labels_off, labels_stride; /* likewise */
  uint64_t kept_off, kept_stride;     /* likewise; 0 stride: none */
  uint64_t pass_off, pass_stride;     /* likewise (cnn_slot_pass) */
  uint64_t stash_elems;   /* floats stashed per slot: in_elems, or a
                             slice's batch x (c1 - c0) x unit */
  /* ICP slices; icp 0 (and the rest 0) for a stage of whole layers */
  int icp;
  int icp_last;           /* the slice holding the last input channel */
  uint32_t c0, c1;        /* its input channels [c0, c1) */
  int ocp;                /* an OCP slice: c0, c1 are output channels,
                             unit per output channel; icp is 0 */
  uint64_t unit;          /* floats per input channel and sample: H x W
                             (convolution), 1 (connected) */
  uint64_t weights, biases; /* its parameter floats (params = the sum) */
  uint64_t total;         /* bytes of the state block */
} cnn_layout;

/*
 * cnn_layout_compute - the layout of layers first .. end-1 of net at batch
 * batch with slots stashes (the range, batch and slots already checked:
 * first < end <= layers, 1 <= batch <= CNN_MAX_BATCH, 1 <= slots <=
 * CNN_MAX_SLOTS). Returns 0, or EMBER_ETOOBIG when the block would not fit
 * this host's size_t.
 */
int cnn_layout_compute(const cnn_net *net, uint32_t first, uint32_t end,
                       uint32_t batch, uint32_t slots, cnn_layout *out);

/*
 * cnn_layout_compute_slice - the layout of the ICP slice of layer `layer`
 * of net over input channels [c0, c1) (already checked: a convolutional or
 * connected layer, c0 < c1 <= its input channels; for a connected layer
 * its input elements) at batch batch with slots stashes. Returns 0, or
 * EMBER_ETOOBIG as cnn_layout_compute().
 */
int cnn_layout_compute_slice(const cnn_net *net, uint32_t layer, uint32_t c0,
                             uint32_t c1, uint32_t batch, uint32_t slots,
                             cnn_layout *out);

/*
 * cnn_layout_compute_ocp - the layout of the OCP slice of layer `layer`
 * over output channels [c0, c1) (already checked: a convolutional or
 * connected layer, c0 < c1 <= cnn_layer_outputs()). Returns as
 * cnn_layout_compute().
 */
int cnn_layout_compute_ocp(const cnn_net *net, uint32_t layer, uint32_t c0,
                           uint32_t c1, uint32_t batch, uint32_t slots,
                           cnn_layout *out);

/* cnn_stage_key - a 64-bit FNV-1a hash of the network text, the range, the
 * batch and the slots: what INIT stamps into the header and other ops
 * compare. */
uint64_t cnn_stage_key(const uint8_t *text, size_t len, uint32_t first,
                       uint32_t end, uint32_t batch, uint32_t slots);

/* cnn_slice_key - the key of an ICP slice: cnn_stage_key() of its layer
 * with the channel range [c0, c1) hashed on (stages of whole layers keep
 * the keys they had). */
uint64_t cnn_slice_key(const uint8_t *text, size_t len, uint32_t layer,
                       uint32_t c0, uint32_t c1, uint32_t batch,
                       uint32_t slots);

/* cnn_ocp_key - the key of an OCP slice: as cnn_slice_key() with another
 * tag, so that no block of an ICP slice passes for it. */
uint64_t cnn_ocp_key(const uint8_t *text, size_t len, uint32_t layer,
                     uint32_t c0, uint32_t c1, uint32_t batch,
                     uint32_t slots);

#endif
