/*
 * task_queue.c - an accelerator's task queue (scheduler 1's output): by
 * priority, then round, then arrival.
 *
 * Under FCFS every task has round 0, so the order is priority then
 * arrival. Under fair scheduling an app's n-th waiting task gets a round
 * one past its previous one (and never below the round being served), so
 * one app's burst of a thousand tasks interleaves with another app's single
 * task instead of going first: round robin between apps, task by task.
 */
#include "engine_internal.h"

#include <stdlib.h>

static int before(const nam_task *a, const nam_task *b) {
  if (a->priority != b->priority) return a->priority > b->priority;
  if (a->round != b->round) return a->round < b->round;
  return a->seq < b->seq;
}

void nam_queue_insert(nam_task_queue *q, nam_task *t) {
  /* walk back from the tail: the common case (a new task goes last) is
   * O(1); a retried task goes back near the head */
  nam_task *after = q->tail;
  while (after && before(t, after)) after = after->prev;
  t->prev = after;
  t->next = after ? after->next : q->head;
  if (t->next) t->next->prev = t; else q->tail = t;
  if (after) after->next = t; else q->head = t;
  q->length++;
}

void nam_queue_remove(nam_task_queue *q, nam_task *t) {
  if (t->prev) t->prev->next = t->next; else q->head = t->next;
  if (t->next) t->next->prev = t->prev; else q->tail = t->prev;
  t->prev = t->next = NULL;
  q->length--;
}

uint64_t nam_queue_assign_round(nam_task_queue *q, int scheduler,
                                uint64_t app) {
  if (scheduler != NAM_SCHED_FAIR) return 0;
  for (size_t i = 0; i < q->n_rounds; i++) {
    nam_app_round *r = &q->rounds[i];
    if (r->app != app) continue;
    r->round = (r->round > q->served ? r->round : q->served) + 1;
    return r->round;
  }
  if (q->n_rounds == q->cap_rounds) {
    size_t cap = q->cap_rounds ? 2 * q->cap_rounds : 8;
    nam_app_round *grown = realloc(q->rounds, cap * sizeof *grown);
    if (!grown) return q->served + 1; /* still fair enough: a fresh app */
    q->rounds = grown;
    q->cap_rounds = cap;
  }
  q->rounds[q->n_rounds++] = (nam_app_round){app, q->served + 1};
  return q->served + 1;
}

void nam_queue_served(nam_task_queue *q, uint64_t round) {
  if (round <= q->served) return;
  q->served = round;
  /* apps whose last round is served are as good as new: forget them */
  size_t kept = 0;
  for (size_t i = 0; i < q->n_rounds; i++)
    if (q->rounds[i].round > q->served) q->rounds[kept++] = q->rounds[i];
  q->n_rounds = kept;
}
