/*
 * cnn_pass.h - how a forward pass runs, the same on every implementation
 * of the cnn layers (cnn_ref.c, cnn_cpu, cnn.cl): training or evaluation,
 * dropout's masks and batch normalisation's constants.
 *
 * Modes. A training FORWARD (CNN_MODE_TRAIN) normalises with the micro-
 * batch's statistics and moves the rolling ones towards them; the forward
 * pass a BACKWARD re-runs from its stash (CNN_MODE_RECOMPUTE) computes the
 * same values and leaves the rolling statistics alone; an evaluation
 * (CNN_MODE_INFER: ember train's test pass) normalises with the rolling
 * statistics and drops nothing.
 *
 * Dropout's mask. Whether value e (its index in the sample, CHW order) of
 * sample s of a mini-batch is dropped by the dropout layer of network
 * index L in the mini-batch numbered step, in a training run seeded seed,
 * is a hash of (seed, step, L, s, e) alone (cnn_dropout_bits): no
 * generator state, so FORWARD and the forward pass its BACKWARD re-runs
 * draw the same mask, the CPU and OpenCL (cnn.cl's cnn_dropout_bits, the
 * same arithmetic) draw the same masks, and a sample's mask does not
 * depend on how the mini-batch is cut into micro-batches or the network
 * into stages. The value is dropped when its 24 bits are below
 * cnn_dropout_threshold(p) (probability threshold / 2^24, p within
 * 2^-24), else multiplied by cnn_dropout_scale(p) = 1 / (1 - p) (float),
 * darknet's scaling.
 *
 * Batch normalisation: x^ = (x - mean) / sqrt(var + CNN_BN_EPS), with
 * mean and var the biased (1/n) statistics of the channel over the
 * micro-batch's samples and positions (oneDNN's; darknet's forward pass
 * divides its variance by n - 1, its backward pass by n); y = scale x^ +
 * bias. A training FORWARD then sets rolling = (1 - CNN_BN_MOMENTUM)
 * rolling + CNN_BN_MOMENTUM batch for the mean and the variance alike
 * (darknet's 0.99 and 0.01, with the same biased variance). INIT starts
 * the scales at 1, the rolling means at 0 and the rolling variances at 1
 * (darknet starts them at 0, which an evaluation before any training
 * would divide by).
 */
#ifndef CNN_PASS_H
#define CNN_PASS_H

#include <stdint.h>

typedef enum cnn_mode {
  CNN_MODE_TRAIN = 0,   /* batch statistics, rolling ones updated, dropout */
  CNN_MODE_RECOMPUTE,   /* as TRAIN, the rolling statistics left alone */
  CNN_MODE_INFER        /* rolling statistics, no dropout */
} cnn_mode;

/* One forward pass's mode and dropout key. */
typedef struct cnn_pass {
  cnn_mode mode;
  uint64_t seed;       /* the training run's seed */
  uint64_t step;       /* the mini-batch's number */
  uint32_t sample0;    /* the micro-batch's first sample in its mini-batch */
} cnn_pass;

#define CNN_BN_EPS 1e-5
#define CNN_BN_MOMENTUM 0.01

/* splitmix64's finaliser: every output bit depends on every input bit. */
static inline uint64_t cnn_mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* 24 bits of the hash of (seed, step, layer, sample, element). */
static inline uint32_t cnn_dropout_bits(uint64_t seed, uint64_t step,
                                        uint32_t layer, uint32_t sample,
                                        uint32_t element) {
  uint64_t h = cnn_mix64(seed ^ cnn_mix64(step + 0x9e3779b97f4a7c15ull));
  h = cnn_mix64(h ^ (((uint64_t)layer << 32) | sample));
  h = cnn_mix64(h ^ (0x632be59bd9b4e019ull + element));
  return (uint32_t)(h >> 40);
}

/* The bits below which a value is dropped: p x 2^24, rounded down. */
static inline uint32_t cnn_dropout_threshold(double p) {
  return (uint32_t)(p * 16777216.0);
}

/* What a kept value is multiplied by. */
static inline float cnn_dropout_scale(double p) {
  return (float)(1.0 / (1.0 - p));
}

#endif
