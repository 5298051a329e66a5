/*
 * tally.h - a test-only accelerator that exercises every block role
 * (accel.h): it keeps app state on a platform, writes out blocks that a
 * later task reads, and uses scratch. Its arithmetic is order-sensitive,
 * so a test can tell whether tasks ran once each, in order, on the right
 * bytes.
 *
 * Blocks are arrays of n little-endian uint64 values (n = size / 8).
 * params: 8 bytes, k (little-endian uint64).
 *   no state:      out[0][i] = 3 * in[0][i] + k          (one input, one out)
 *   one state s:   s[i] = 3 * s[i] + k + sum of inputs[j][i]
 *                  and, with one out block, out[0] = s after the update.
 * The result message: 8 bytes, the sum of the values written (mod 2^64).
 * Scratch: one value per element, used as the staging area of the update
 * (so a platform that gives wrong scratch gives wrong sums).
 */
#ifndef EMBER_TEST_TALLY_H
#define EMBER_TEST_TALLY_H

#include <stdint.h>

#include "accel.h"

extern const acc_descriptor acc_tally_descriptor;

/* The reference: applying k to a value, as the accelerator does. */
static inline uint64_t tally_step(uint64_t s, uint64_t k, uint64_t add) {
  return 3 * s + k + add;
}

#endif
