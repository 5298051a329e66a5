/*
 * cnn_partition.h - a CNN's training work split into a chain of stages,
 * one per platform, balanced by each platform's speed (FPDeep's operator
 * graph partitioning: coarse by layers, then fine at channel granularity).
 *
 * Work. A layer's training operations per sample: 2 per multiply-add (a
 * multiply and an add) of its forward, error back-propagation and
 * parameter gradients (cnn_layer's fp_macs + eb_macs + pg_macs), and 2 per
 * element operation (cnn_layer's elem_ops count the forward pass: the
 * activations', max-pool's comparisons, avg-pool's sums, batch
 * normalisation's, dropout's masks, softmax's exponentials, sums and
 * divisions; each has a backward counterpart of about the same cost: the
 * activation's derivative, max-pool's routing of the error to the
 * maximum, softmax's gradient, ...).
 * Each mini-batch's update adds 5 per parameter (momentum, decay, step:
 * cnn_task's UPDATE), shared by the batch's samples; a slice's parameters
 * are its channels' share. A platform's speed is in the same operations
 * per second; only the ratios between speeds matter for the split.
 *
 * Pieces. Max-pool, avg-pool, dropout and softmax layers, and
 * batch-normalized convolutions (whose normalisation needs every
 * output's whole sum), are never split: each goes whole to one stage
 * (softmax, the last layer, always to the last stage). Any other
 * convolutional or connected layer may be cut between stages at channel
 * granularity, in one of two ways, chosen per layer:
 *   ICP  input-channel partition, FPDeep's preferred split: a stage holds
 *        input channels [c0, c1) with their slice of the weights and
 *        computes partial sums of every output, which are added along the
 *        chain of stages; the stage holding the last input channel
 *        completes the sums and applies the activation. A connected
 *        layer's input channels are its flattened input values.
 *   OCP  output-channel partition, for a layer with few input channels
 *        (a first layer over 1 or 3 image channels): a stage holds output
 *        channels [c0, c1) and the whole input.
 * A layer's default split is OCP when it has fewer input channels than
 * the plan has stages and more output channels than input channels, else
 * ICP. Then each layer in turn is tried the other way, and kept so when
 * the plan's bottleneck gets strictly smaller: a layer's finer split can
 * balance stages its default cannot (LeNet's conv2, 20 input and 50
 * output channels, over 4 stages).
 * A layer's multiply-adds spread evenly over its channels (ICP or OCP);
 * its element operations too under OCP, while under ICP they belong to
 * the last channel. The pieces, in the network's order, layer by layer
 * and channel by channel, are the units the stages are cut from: a stage
 * is a contiguous, non-empty run of them.
 *
 * Algorithm. Stage i runs on platform i (the platforms' order is the
 * chain's). Its target is the network's work times speed_i / sum of
 * speeds. Coarse phase: each cut between stages goes to the layer
 * boundary whose cumulative work is closest to the cumulative target.
 * Fine phase: each cut moves to the channel, within the splittable layers
 * on either side of that boundary, whose cumulative work is closest to
 * the target. The cuts are then pushed apart so that no stage is empty,
 * and neighbouring stages are balanced pairwise (each cut placed where the
 * larger of its two stages' times, work / speed, is smallest) until no
 * cut moves. Last, a search for the smallest bottleneck (bisection over
 * the time, each stage taking the most pieces it can within it and
 * leaving one for each stage after it, then balanced pairwise) replaces
 * that plan if it finds a strictly smaller bottleneck. The result is the
 * best split wherever every platform can hold any single piece within
 * the best bottleneck (always with equal speeds); with very unequal
 * speeds and heavy unsplittable pieces it may be short of it. The plan's
 * bottleneck is the stage with the largest time; a pipeline runs at its
 * pace, so every other stage idles for the difference.
 *
 * A plan is immutable once made: its functions may be called from any
 * number of threads at once. Destroy is not thread-safe on the same plan.
 */
#ifndef CNN_PARTITION_H
#define CNN_PARTITION_H

#include <stddef.h>
#include <stdint.h>

#include "cnn_net.h"

#define CNN_PLAN_MAX_STAGES 4096

/* Forbid channel splits: every layer goes whole to one stage (a pure
 * layer split, FPDeep's coarse phase alone). */
#define CNN_PLAN_LAYERS_ONLY 0x1u
/* Cut each splittable layer by its default split only (no search for the
 * other split; see above). */
#define CNN_PLAN_FIXED_SPLITS 0x2u

/* A platform a stage may run on. */
typedef struct cnn_platform {
  const char *name;  /* label for printing, copied into the plan; NULL or ""
                        prints "p<index>" */
  double speed;      /* training operations per second: finite, > 0 */
} cnn_platform;

/* How a stage's piece of a layer is cut from it. */
typedef enum cnn_split {
  CNN_SPLIT_WHOLE = 0,  /* the whole layer */
  CNN_SPLIT_ICP,        /* input channels [c0, c1) */
  CNN_SPLIT_OCP         /* output channels [c0, c1) */
} cnn_split;

/* A place in the network's flattened order: a layer and a channel of it,
 * counted in the layer's split (cnn_plan_layer_split; 0 for a layer that
 * is never split). */
typedef struct cnn_point {
  uint32_t layer;
  uint32_t channel;
} cnn_point;

typedef struct cnn_stage {
  size_t platform;        /* index into the platforms given: the stage's */
  const char *name;       /* the platform's label; owned by the plan */
  /* The stage's layers are begin.layer .. end.layer, both included: of the
   * first it holds channels [begin.channel, ...), of the last channels
   * [..., end.channel); end.channel is the last layer's channel count
   * when the stage holds it to its end. */
  cnn_point begin, end;
  cnn_split begin_split;  /* how the first layer's piece is cut: WHOLE when
                             the stage holds all of it */
  cnn_split end_split;    /* the same for the last layer */
  uint64_t macs;          /* multiply-adds per sample (FP + EB + PG) */
  uint64_t elem_ops;      /* element operations per sample (forward) */
  uint64_t params;        /* parameters (cnn_layer_params) it holds */
  double ops;             /* training operations per sample (see above) */
  double share;           /* ops / the network's ops */
  double time;            /* ops / the platform's speed: seconds per sample */
  double idle;            /* 1 - time / the bottleneck's time */
} cnn_stage;

typedef struct cnn_plan_totals {
  size_t stages;
  uint64_t macs, elem_ops;  /* the network's, per sample */
  uint64_t params;          /* the network's parameters */
  uint32_t batch;           /* samples per update (0: updates not counted) */
  double ops;               /* the network's training operations per sample */
  size_t bottleneck;        /* the stage with the largest time */
  double time;              /* its time: the pipeline's seconds per sample */
  double ideal_time;        /* ops / the sum of speeds: a perfect split's */
  double utilisation;       /* ideal_time / time: the share of the
                               platforms' capacity the plan uses, 0..1 */
} cnn_plan_totals;

typedef struct cnn_plan cnn_plan;

/*
 * cnn_plan_create - split a network's training into n stages, stage i on
 * platforms[i].
 *   net        the network; only read, and not referred to by the plan
 *   platforms  n platforms, each with a speed; names are copied
 *   batch      the mini-batch: samples per update (0 leaves the updates'
 *              work out)
 *   flags      0, CNN_PLAN_LAYERS_ONLY or CNN_PLAN_FIXED_SPLITS
 *   out        receives the plan (NULL on failure); the caller owns it and
 *              frees it with cnn_plan_destroy()
 *   err        receives the reason on failure (may be NULL when err_len is
 *              0)
 * Returns 0; EMBER_EPARAM for n < 1, a speed that is not a finite number
 * > 0, or more stages than the network has pieces to give each one (its
 * layers, or with channel splits its unsplittable layers plus the
 * channels of the others); EMBER_ETOOBIG for n > CNN_PLAN_MAX_STAGES;
 * EMBER_EINVAL for a NULL net, platforms or out, or unknown flags;
 * EMBER_ENOMEM.
 */
int cnn_plan_create(const cnn_net *net, const cnn_platform *platforms,
                    size_t n, uint32_t batch, unsigned flags, cnn_plan **out,
                    char *err, size_t err_len);

/* cnn_plan_destroy - free a plan; NULL is a no-op. */
void cnn_plan_destroy(cnn_plan *plan);

/* The stages, in the chain's order, *count of them (the n given); owned by
 * the plan. */
const cnn_stage *cnn_plan_stages(const cnn_plan *plan, size_t *count);

/* The plan's totals; owned by the plan. */
const cnn_plan_totals *cnn_plan_totals_get(const cnn_plan *plan);

/*
 * cnn_plan_layer_split - how the plan may cut a layer: ICP or OCP for a
 * convolutional or connected layer without batch_norm (unless
 * CNN_PLAN_LAYERS_ONLY), WHOLE for the others; *channels (may be NULL) receives the channels it is cut
 * at (input or output channels; 1 for WHOLE). A layer out of range is
 * WHOLE with 0 channels.
 */
cnn_split cnn_plan_layer_split(const cnn_plan *plan, size_t layer,
                               uint32_t *channels);

/* "whole", "ICP" or "OCP"; "?" if unknown. */
const char *cnn_split_name(cnn_split split);

/*
 * cnn_plan_format - the plan as text: a header, one line per stage
 * (stage, platform, layers and channels such as "conv1 .. conv2 in-ch
 * [0:12)", multiply-adds, share of the work, time per sample, expected
 * idle) and a line of totals (bottleneck and expected utilisation); every
 * line ends in '\n'. Layers are named by kind and number: conv1, pool1,
 * fc1, softmax. Writes at most len bytes including the NUL into buf
 * (which may be NULL when len is 0) and, as snprintf, returns the length
 * the whole text needs, without the NUL.
 */
size_t cnn_plan_format(const cnn_plan *plan, char *buf, size_t len);

#endif
