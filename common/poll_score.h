/*
 * poll_score.h - whether polling for what comes next (a reply, a client's
 * next frame) instead of sleeping still pays. A wait that polling caught
 * earns a point, one it missed costs two: polling that misses is CPU
 * burnt, and where threads outnumber cores it slows everyone. At zero the
 * waiter sleeps at once but for one chance in probe_every, which polls
 * again to see whether it pays. Used by libember's ember_run and by the
 * NAM's loop; header only.
 */
#ifndef EMBER_POLL_SCORE_H
#define EMBER_POLL_SCORE_H

#include <stdint.h>

#define POLL_SCORE_MAX 8

typedef struct poll_score {
  unsigned points;  /* start at 1: poll until it misses */
  unsigned skipped; /* chances passed at zero */
} poll_score;

/* 1 if this wait should poll */
static inline int poll_score_try(poll_score *s, unsigned probe_every) {
  return s->points || ++s->skipped % probe_every == 0;
}

static inline void poll_score_caught(poll_score *s) {
  s->points += s->points < POLL_SCORE_MAX;
}

static inline void poll_score_missed(poll_score *s) {
  s->points = s->points > 2 ? s->points - 2 : 0;
}

/* *avg moves an eighth of the way to sample: about the last 8 samples */
static inline void poll_average_add(uint64_t *avg, uint64_t sample) {
  *avg += (uint64_t)(((int64_t)sample - (int64_t)*avg) / 8);
}

#endif
