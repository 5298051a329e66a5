/*
 * sim_events.c - the event queue's binary heap (sim_events.h).
 */
#include "sim_events.h"

#include <stdlib.h>

static int earlier(const sim_event *a, const sim_event *b) {
  return a->at != b->at ? a->at < b->at : a->seq < b->seq;
}

static void swap(sim_event *a, sim_event *b) {
  sim_event t = *a;
  *a = *b;
  *b = t;
}

int sim_events_push(sim_events *q, uint64_t at, int kind, size_t who) {
  if (q->n == q->cap) {
    size_t cap = q->cap ? q->cap * 2 : 64;
    sim_event *h = realloc(q->heap, cap * sizeof *h);
    if (!h) return -1;
    q->heap = h;
    q->cap = cap;
  }
  size_t i = q->n++;
  q->heap[i] = (sim_event){.at = at, .seq = q->next_seq++, .kind = kind,
                           .who = who};
  while (i > 0 && earlier(&q->heap[i], &q->heap[(i - 1) / 2])) {
    swap(&q->heap[i], &q->heap[(i - 1) / 2]);
    i = (i - 1) / 2;
  }
  return 0;
}

int sim_events_pop(sim_events *q, sim_event *out) {
  if (q->n == 0) return -1;
  *out = q->heap[0];
  q->heap[0] = q->heap[--q->n];
  size_t i = 0;
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < q->n && earlier(&q->heap[l], &q->heap[m])) m = l;
    if (r < q->n && earlier(&q->heap[r], &q->heap[m])) m = r;
    if (m == i) break;
    swap(&q->heap[i], &q->heap[m]);
    i = m;
  }
  return 0;
}

void sim_events_free(sim_events *q) {
  free(q->heap);
  *q = (sim_events){0};
}
