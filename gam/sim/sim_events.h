/*
 * sim_events.h - the simulator's event queue: a binary min-heap on (time,
 * sequence), so events at the same virtual time come out in the order they
 * were scheduled and a run is deterministic.
 */
#ifndef EMBER_GAM_SIM_EVENTS_H
#define EMBER_GAM_SIM_EVENTS_H

#include <stddef.h>
#include <stdint.h>

typedef struct sim_event {
  uint64_t at;     /* virtual ns */
  uint64_t seq;    /* scheduling order, the tie-break */
  int kind;        /* the caller's */
  size_t who;      /* the caller's: a node or an app */
} sim_event;

typedef struct sim_events {
  sim_event *heap;
  size_t n, cap;
  uint64_t next_seq;
} sim_events;

/* Adds an event; 0, or -1 when out of memory. */
int sim_events_push(sim_events *q, uint64_t at, int kind, size_t who);
/* Takes the earliest event; 0, or -1 when there is none. */
int sim_events_pop(sim_events *q, sim_event *out);
void sim_events_free(sim_events *q);

#endif
