/*
 * sim_rng.h - the simulator's seeded random numbers: splitmix64, the
 * generator the emulated FPGA board draws its faults from, so a seed means
 * the same sequence everywhere.
 */
#ifndef EMBER_GAM_SIM_RNG_H
#define EMBER_GAM_SIM_RNG_H

#include <stdint.h>

static inline uint64_t sim_rng_next(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi] (hi >= lo). */
static inline uint64_t sim_rng_between(uint64_t *state, uint64_t lo,
                                       uint64_t hi) {
  if (hi <= lo) return lo;
  return lo + sim_rng_next(state) % (hi - lo + 1);
}

#endif
