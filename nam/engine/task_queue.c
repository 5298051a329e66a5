/* task_queue.c - an accelerator's task queue: priority first, then FCFS. */
#include "engine_internal.h"

void nam_queue_insert(nam_task_queue *q, nam_task *t) {
  /* walk back from the tail: equal priorities keep arrival order, and the
   * common case (all priorities equal) is O(1) */
  nam_task *after = q->tail;
  while (after && after->priority < t->priority) after = after->prev;
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
