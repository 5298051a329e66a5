/* clock.h - monotonic time in nanoseconds, for task timestamps. */
#ifndef EMBER_CLOCK_H
#define EMBER_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* clock_ts_at: a CLOCK_MONOTONIC time in ns as a timespec (deadlines for
 * condition variables set up with pthread_condattr_setclock). */
static inline struct timespec clock_ts_at(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  return ts;
}

#endif
