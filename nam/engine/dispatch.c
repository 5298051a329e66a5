/*
 * dispatch.c - scheduler 2: moves tasks from the accelerators' task queues
 * to the platform that asks for work. Among the queues this platform can
 * serve it takes the highest-priority head, and among equals the oldest, so
 * across accelerators the order is FCFS.
 */
#include "engine_internal.h"

#include <string.h>

#include "clock.h"

static int platform_may_run(const nam_platform *p, const nam_task *t) {
  if (t->platform_kind[0] && strcmp(t->platform_kind, p->ops->kind) != 0)
    return 0;
  return 1;
}

static nam_task *pick(nam_platform *p) {
  nam_engine *e = p->engine;
  nam_task *best = NULL;
  nam_task_queue *best_q = NULL;
  for (size_t i = 0; i < e->n_queues; i++) {
    nam_task_queue *q = &e->queues[i];
    if (!q->head || !p->ops->supports(p, q->acc)) continue;
    /* the head is the best candidate unless it needs another platform */
    nam_task *t = q->head;
    while (t && !platform_may_run(p, t)) t = t->next;
    if (!t) continue;
    if (!best || t->priority > best->priority ||
        (t->priority == best->priority && t->seq < best->seq)) {
      best = t;
      best_q = q;
    }
  }
  if (best) nam_queue_remove(best_q, best);
  return best;
}

nam_task *nam_dispatch_next(nam_platform *p) {
  nam_engine *e = p->engine;
  pthread_mutex_lock(&e->lock);
  nam_task *t;
  while (!(t = pick(p)) && !e->stopping)
    pthread_cond_wait(&e->work, &e->lock);
  if (t) {
    t->state = NAM_TASK_RUNNING;
    t->platform = p->name;
    t->times.started = clock_now_ns();
    p->running++;
    e->counters.queued--;
    e->counters.running++;
  }
  pthread_mutex_unlock(&e->lock);
  return t;
}
