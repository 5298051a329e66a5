/*
 * pipeline.c - how the engine drives a device platform: three threads,
 * stage-in -> execute -> stage-out, with up to pipeline_depth tasks between
 * dispatch and completion (Blaze 5.3, task pipelining). While the device
 * executes task k, task k+1's blocks are copied in and task k-1's output is
 * copied out; with depth 1 the stages run one task at a time (serial).
 *
 * Stage-in binds the task's blocks on the device through the block cache
 * (task_blocks.c): an input already there (an earlier task's, kept by
 * EMBER_BLOCK_CACHE or EMBER_BLOCK_BROADCAST, or an out block it wrote)
 * costs nothing; a missing one is uploaded - or wrapped in place, on a
 * device that shares host memory - by the platform's cache ops; out
 * blocks, state and scratch get their room.
 */
#include "engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "ember/ember_errors.h"

typedef struct stage_queue {
  nam_task *head, *tail;
} stage_queue;

struct nam_pipeline {
  nam_platform *p;
  pthread_t in, exec, out;
  int started;                /* threads created: 0..3 */
  pthread_mutex_t lock;
  pthread_cond_t changed;     /* a queue changed, room freed, or stopping */
  stage_queue to_exec, to_out;
  unsigned inflight;          /* dispatched, not completed */
  int stopping;               /* stage-in has quit: drain and stop */
  nam_task *executing;        /* the task in execute(), for the watchdog */
  uint64_t last_done;         /* when the last attempt before this one
                                 finished */
};

static void push(stage_queue *q, nam_task *t) {
  t->next = NULL;
  if (q->tail) q->tail->next = t; else q->head = t;
  q->tail = t;
}

static nam_task *pop(stage_queue *q) {
  nam_task *t = q->head;
  if (t) {
    q->head = t->next;
    if (!q->head) q->tail = NULL;
    t->next = NULL;
  }
  return t;
}

/* Wait for a task on q; NULL once stopping and q is empty. */
static nam_task *wait_pop(nam_pipeline *pl, stage_queue *q) {
  pthread_mutex_lock(&pl->lock);
  nam_task *t;
  while (!(t = pop(q)) && !pl->stopping)
    pthread_cond_wait(&pl->changed, &pl->lock);
  pthread_mutex_unlock(&pl->lock);
  return t;
}

static void hand_on(nam_pipeline *pl, stage_queue *q, nam_task *t) {
  pthread_mutex_lock(&pl->lock);
  push(q, t);
  pthread_cond_broadcast(&pl->changed);
  pthread_mutex_unlock(&pl->lock);
}

/* The attempt is over: free its pipeline slot and report. */
static void finish(nam_pipeline *pl, nam_task *t, int status,
                   const char *message, acc_output *out) {
  char msg[256];
  snprintf(msg, sizeof msg, "%s", message ? message : "");
  nam_task_unbind(pl->p, t, status == 0 ? NAM_RUN_OK
                           : t->ran ? NAM_RUN_FAILED : NAM_RUN_NOT_RUN);
  t->ran = 0;
  pthread_mutex_lock(&pl->lock);
  /* dispatched while the task ahead still ran (the stage-in overlaps it),
   * it had the device from when that one finished: queue_ns and exec_ns
   * then add up to the device's time without counting any of it twice */
  if (t->times.started < pl->last_done) t->times.started = pl->last_done;
  pl->last_done = clock_now_ns();
  pl->inflight--;
  pthread_cond_broadcast(&pl->changed);
  pthread_mutex_unlock(&pl->lock);
  nam_task_complete(pl->p, t, status, msg, out);
}

/* Bind the task's blocks on the device. EBUSY: the budget is held by
 * other tasks' pins; retried as they complete, unless nothing else is in
 * flight (then the task's blocks together do not fit: ETOOBIG). */
static int bind_blocks(nam_pipeline *pl, nam_task *t, char *err,
                       size_t err_len) {
  for (;;) {
    int rc = nam_task_bind(pl->p, t, err, err_len);
    if (rc != EMBER_EBUSY) return rc;
    pthread_mutex_lock(&pl->lock);
    int alone = pl->inflight <= 1;
    if (!alone) pthread_cond_wait(&pl->changed, &pl->lock);
    pthread_mutex_unlock(&pl->lock);
    if (alone) {
      snprintf(err, err_len, "%s: the task's blocks are bigger than its "
               "memory budget", pl->p->name);
      return EMBER_ETOOBIG;
    }
    if (atomic_load(&t->cancel)) return rc;
  }
}

static void *stage_in_thread(void *arg) {
  nam_pipeline *pl = arg;
  nam_platform *p = pl->p;
  for (;;) {
    pthread_mutex_lock(&pl->lock);
    while (pl->inflight >= p->workers) /* in-flight tasks always finish */
      pthread_cond_wait(&pl->changed, &pl->lock);
    pthread_mutex_unlock(&pl->lock);
    nam_task *t = nam_dispatch_next(p);
    if (!t) break;
    pthread_mutex_lock(&pl->lock);
    pl->inflight++;
    pthread_mutex_unlock(&pl->lock);
    char err[256] = "";
    int rc = bind_blocks(pl, t, err, sizeof err);
    if (rc) {
      acc_output none = {0};
      finish(pl, t, rc, err, &none);
      continue;
    }
    if (p->ops->staged) p->ops->staged(p, t);
    t->times.staged = clock_now_ns();
    hand_on(pl, &pl->to_exec, t);
  }
  pthread_mutex_lock(&pl->lock);
  pl->stopping = 1;
  pthread_cond_broadcast(&pl->changed);
  pthread_mutex_unlock(&pl->lock);
  return NULL;
}

#define NAM_TIMEOUT_FLOOR_NS 10000000000u /* 10 s */

/* How long execute may take before the task counts as hung. */
static uint64_t timeout_ns(nam_platform *p, nam_task *t) {
  nam_engine *e = p->engine;
  if (e->cfg.task_timeout_ms) return e->cfg.task_timeout_ms * 1000000;
  pthread_mutex_lock(&e->lock);
  uint64_t expected = t->expected_ns;
  double per = p->pairs[t->acc_index].ns_per_unit;
  pthread_mutex_unlock(&e->lock);
  uint64_t measured = (uint64_t)(per * (double)t->work);
  if (measured > expected) expected = measured;
  uint64_t ns = expected * e->cfg.timeout_factor;
  /* no model and no measurement yet, a tiny task, or speed that varies
   * with the sequences (an average per cell): a generous floor */
  return ns > NAM_TIMEOUT_FLOOR_NS ? ns : NAM_TIMEOUT_FLOOR_NS;
}

static void *execute_thread(void *arg) {
  nam_pipeline *pl = arg;
  nam_platform *p = pl->p;
  nam_task *t;
  while ((t = wait_pop(pl, &pl->to_exec))) {
    acc_output out = {0};
    char err[256] = "";
    int rc;
    if (atomic_load(&t->cancel)) {
      rc = EMBER_ECANCELED;
    } else if (t->n_states && nam_task_states_lost(p->engine, t)) {
      /* a task before it on its state failed (they may share a pipeline):
       * the state is not what this task was sent to update */
      rc = EMBER_ESTATE;
      snprintf(err, sizeof err, "a state block of the task was lost by an "
               "earlier task on it");
    } else {
      nam_task_io io;
      nam_task_io_view(p, t, &io);
      uint64_t limit = timeout_ns(p, t);
      pthread_mutex_lock(&pl->lock);
      t->deadline_ns = clock_now_ns() + limit;
      pl->executing = t;
      pthread_mutex_unlock(&pl->lock);
      t->ran = 1;
      t->exec_started = clock_now_ns();
      rc = p->ops->execute(p, t, &io, &out, err, sizeof err);
      pthread_mutex_lock(&pl->lock);
      pl->executing = NULL;
      pthread_mutex_unlock(&pl->lock);
      if (atomic_load(&t->timed_out)) {
        free(out.data);
        out = (acc_output){0};
        rc = EMBER_ETIMEDOUT;
        snprintf(err, sizeof err, "hung: no result within %llu ms",
                 (unsigned long long)(limit / 1000000));
      }
      /* maybe half written: lost now, before the next task on the same
       * state (dispatched behind this one) executes */
      if (rc && t->n_states) nam_task_lose_states(p->engine, t);
    }
    t->times.executed = clock_now_ns();
    t->output = out;
    t->status = rc;
    snprintf(t->message, sizeof t->message, "%s", err);
    hand_on(pl, &pl->to_out, t);
  }
  /* stage-out drains what is left, then stops too */
  pthread_mutex_lock(&pl->lock);
  pl->stopping = 2;
  pthread_cond_broadcast(&pl->changed);
  pthread_mutex_unlock(&pl->lock);
  return NULL;
}

static void *stage_out_thread(void *arg) {
  nam_pipeline *pl = arg;
  nam_platform *p = pl->p;
  for (;;) {
    pthread_mutex_lock(&pl->lock);
    nam_task *t;
    while (!(t = pop(&pl->to_out)) && pl->stopping < 2)
      pthread_cond_wait(&pl->changed, &pl->lock);
    pthread_mutex_unlock(&pl->lock);
    if (!t) break;
    acc_output out = t->output;
    t->output = (acc_output){0};
    int rc = t->status;
    char err[256];
    snprintf(err, sizeof err, "%s", t->message);
    if (rc == 0 && p->ops->stage_out)
      rc = p->ops->stage_out(p, t, &out, err, sizeof err);
    if (rc == 0)
      nam_block_cache_count_from(p->engine->cache, p->index, out.size);
    finish(pl, t, rc, err, &out);
  }
  return NULL;
}

int nam_pipeline_start(nam_platform *p) {
  nam_pipeline *pl = calloc(1, sizeof *pl);
  if (!pl) return EMBER_ENOMEM;
  pl->p = p;
  pthread_mutex_init(&pl->lock, NULL);
  pthread_cond_init(&pl->changed, NULL);
  p->pipeline = pl;
  void *(*fns[3])(void *) = {stage_in_thread, execute_thread,
                             stage_out_thread};
  pthread_t *ths[3] = {&pl->in, &pl->exec, &pl->out};
  for (int i = 0; i < 3; i++) {
    if (pthread_create(ths[i], NULL, fns[i], pl) != 0) {
      /* stop() joins those that started once the engine stops */
      return EMBER_ENOMEM;
    }
    pl->started++;
  }
  return 0;
}

void nam_pipeline_stop(nam_platform *p) {
  nam_pipeline *pl = p->pipeline;
  if (!pl) return;
  /* the engine is stopping: stage-in returns from dispatch and sets
   * stopping; execute and stage-out drain what is in flight */
  pthread_t *ths[3] = {&pl->in, &pl->exec, &pl->out};
  if (pl->started < 3) {
    pthread_mutex_lock(&pl->lock);
    pl->stopping = 2;
    pthread_cond_broadcast(&pl->changed);
    pthread_mutex_unlock(&pl->lock);
  }
  for (int i = 0; i < pl->started; i++) pthread_join(*ths[i], NULL);
  pl->started = 0;
}

void nam_pipeline_free(nam_platform *p) {
  nam_pipeline *pl = p->pipeline;
  if (!pl) return;
  pthread_cond_destroy(&pl->changed);
  pthread_mutex_destroy(&pl->lock);
  free(pl);
  p->pipeline = NULL;
}

uint64_t nam_pipeline_check(nam_platform *p, uint64_t now) {
  nam_pipeline *pl = p->pipeline;
  if (!pl) return 0;
  uint64_t next = 0;
  pthread_mutex_lock(&pl->lock);
  nam_task *t = pl->executing;
  if (t && !atomic_load(&t->timed_out)) {
    if (now >= t->deadline_ns) {
      atomic_store(&t->timed_out, 1);
      /* under the pipeline lock: t cannot complete (and be freed) meanwhile */
      if (p->ops->abort) p->ops->abort(p, t);
    } else {
      next = t->deadline_ns;
    }
  }
  pthread_mutex_unlock(&pl->lock);
  return next;
}
