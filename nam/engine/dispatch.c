/*
 * dispatch.c - scheduler 2: task queues -> platforms.
 *
 * Platforms pull: a worker (cpu) or a pipeline's stage-in thread (device)
 * with room for a task asks for one. Among the task queues it can serve it
 * takes the best head - highest priority, then oldest - subject to:
 *
 *  - constraints: a task that requires a platform kind goes only there; a
 *    task that prefers a kind goes elsewhere only while no platform of that
 *    kind has room; a platform that failed the task is not tried again;
 *  - health: a disabled (accelerator, platform) pair gets nothing, except
 *    one probe task once probe_ms has passed since it was disabled;
 *  - load: a task with no constraint is left for another platform when
 *    that one would finish it sooner, counting the work each already holds
 *    (expected times come from the platform's model, or from the pair's
 *    calibration refined by real tasks: calibrate.c). The cpu platform
 *    runs the reference code and is trusted before it has figures: until
 *    then it takes every task it can, and no other platform takes one it
 *    could run. Otherwise a pair with no figures yet (still calibrating)
 *    takes no task that a platform with figures could run: a user's
 *    batch is never how a platform is found slow;
 *  - state: a task that names state blocks runs where they live (any
 *    platform before their first task, chosen by load as above; after it,
 *    load plays no part), one task per state block at a time - its states
 *    are claimed when it is dispatched - except on a device pipeline,
 *    which runs tasks in dispatch order: there the next task on a state
 *    may be dispatched while the one before it runs, so that its stage-in
 *    overlaps that run; a task whose state was lost completes at once with
 *    EMBER_ESTATE (on a pipeline, at execute when a task ahead lost it);
 *  - stickiness (reprogrammable platforms): the accelerator loaded last
 *    keeps the platform while it has tasks, unless another accelerator's
 *    oldest task has waited reprogram_bound_ms - so an FPGA is reprogrammed
 *    when its queue runs dry or to bound another queue's wait (Blaze 5.1).
 */
#include "engine_internal.h"

#include <string.h>

#include "clock.h"
#include "ember/ember_errors.h"

/* Lock held: wait for nam_wake (or a periodic look at the queues). */
static void wait_for_work(nam_platform *p, uint64_t now) {
  /* a probe may come due, and load estimates change as others finish:
   * look again now and then even when nobody signals */
  struct timespec at = clock_ts_at(now + 50000000u);
  p->idle++;
  pthread_cond_timedwait(&p->work, &p->engine->lock, &at);
  p->idle--;
}

static nam_pair *pair_of(nam_platform *p, const nam_task *t) {
  return &p->pairs[t->acc_index];
}

/* A disabled pair may take one probe task once probe_ms has passed. */
static int pair_usable(const nam_engine *e, const nam_pair *pair,
                       uint64_t now) {
  if (!pair->disabled) return 1;
  return !pair->probing && now - pair->disabled_at >= e->cfg.probe_ms * 1000000;
}

int nam_platform_can_run(const nam_engine *e, const nam_platform *q,
                         const nam_task *t, uint64_t now) {
  if (q->disabled || (t->excluded & (1u << q->index))) return 0;
  if (!q->ops->supports(q, t->acc)) return 0;
  /* the requirement names a kind ("fpga-emu") or one platform ("fpga1") */
  if (t->platform_kind[0] && strcmp(t->platform_kind, q->ops->kind) != 0 &&
      strcmp(t->platform_kind, q->name) != 0)
    return 0;
  return pair_usable(e, &q->pairs[t->acc_index], now);
}

uint64_t nam_expected_ns(nam_platform *p, const nam_task *t) {
  if (p->ops->model_ns) {
    uint64_t m = p->ops->model_ns(p, t);
    if (m) return m;
  }
  return nam_pair_estimate(&p->pairs[t->acc_index], t->work);
}

/* When would q be done with t if it were given t now? 0: unknown. cpu
 * workers run tasks side by side; a device executes one at a time, so a
 * task given to it waits for all it holds. */
static uint64_t finish_estimate(nam_platform *q, const nam_task *t) {
  uint64_t run = nam_expected_ns(q, t);
  if (!run) return 0;
  unsigned lanes = q->ops->run ? q->workers : 1;
  uint64_t ahead = q->running < lanes ? 0 : q->inflight_ns / lanes;
  return ahead + run;
}

static int has_room(const nam_platform *q) { return q->running < q->workers; }

/* Where the task's state blocks live: 1 when they bind it to p (no other
 * platform can run it, whatever their load), 0 when none lives anywhere
 * yet, -1 when one lives on another platform. */
static int state_binds(nam_engine *e, const nam_task *t,
                       const nam_platform *p) {
  int bound = 0;
  for (size_t i = 0; i < t->n_states; i++) {
    int home = nam_block_cache_state_home(e->cache, t->state_refs[i]);
    if (home >= 0 && home != (int)p->index) return -1;
    if (home >= 0) bound = 1;
  }
  return bound;
}

static int may_take(nam_platform *p, const nam_task *t, uint64_t now) {
  nam_engine *e = p->engine;
  if (!nam_platform_can_run(e, p, t, now)) return 0;
  if (t->platform_kind[0]) return 1;
  /* a task on state that lives here runs here: leaving it to a platform
   * that would finish it sooner leaves it to none */
  int bound = state_binds(e, t, p);
  if (bound) return bound > 0;
  /* a preferred platform takes the task whatever the others' load */
  if (t->prefer_kind[0] && strcmp(t->prefer_kind, p->ops->kind) == 0) return 1;
  if (t->prefer_kind[0]) {
    for (size_t i = 0; i < e->n_platforms; i++) {
      nam_platform *q = &e->platforms[i];
      if (q != p && strcmp(q->ops->kind, t->prefer_kind) == 0 &&
          nam_platform_can_run(e, q, t, now) && has_room(q))
        return 0;
    }
    return 1;
  }
  uint64_t mine = finish_estimate(p, t);
  /* the cpu platform runs the reference code: trusted before its figures */
  if (!mine && p->ops == &nam_platform_cpu_ops) return 1;
  for (size_t i = 0; i < e->n_platforms; i++) {
    nam_platform *q = &e->platforms[i];
    if (q == p || !nam_platform_can_run(e, q, t, now)) continue;
    uint64_t theirs = finish_estimate(q, t);
    if (!theirs && q->ops == &nam_platform_cpu_ops) return 0; /* trusted */
    if (!mine && theirs) return 0; /* figures beat none (calibrating) */
    if (mine && theirs && theirs < mine) return 0;
  }
  return 1;
}

/* A task that cannot run because its state was lost: it completes now,
 * its callback after the engine lock is released (nam_dispatch_next). */
static void doom(nam_engine *e, nam_task_queue *q, nam_task *t,
                 nam_task **doomed) {
  nam_queue_remove(q, t);
  e->counters.queued--;
  nam_finish_locked(e, t, EMBER_ESTATE, "a state block of the task was lost "
                    "(its platform failed or a task on it did): restore it "
                    "from its synced copy");
  t->next = *doomed;
  *doomed = t;
}

/* The first task of q this platform may take (q is in dispatch order);
 * a task with state comes back with its states claimed. */
static nam_task *first_for(nam_platform *p, nam_task_queue *q, uint64_t now,
                           nam_task **doomed) {
  if (!q->head || !p->ops->supports(p, q->acc)) return NULL;
  nam_task *next;
  for (nam_task *t = q->head; t; t = next) {
    next = t->next;
    if (!may_take(p, t, now)) continue;
    int rc = nam_task_claim_states(p->engine, t, p);
    if (rc == 0) return t;
    if (rc == EMBER_ESTATE) doom(p->engine, q, t, doomed);
    /* EBUSY: another task holds a state; ENOPLATFORM: it lives elsewhere */
  }
  return NULL;
}

static int better(const nam_task *a, const nam_task *b) {
  if (!b) return 1;
  if (a->priority != b->priority) return a->priority > b->priority;
  return a->seq < b->seq;
}

static nam_task *pick(nam_platform *p, uint64_t now, nam_task **doomed) {
  nam_engine *e = p->engine;
  nam_task *best = NULL, *sticky = NULL, *oldest_other = NULL;
  nam_task *heads[NAM_MAX_ACCELS];
  size_t n_heads = 0;
  for (size_t i = 0; i < e->n_queues; i++) {
    nam_task *t = first_for(p, &e->queues[i], now, doomed);
    if (!t) continue;
    heads[n_heads++] = t;
    if (better(t, best)) best = t;
    if (t->acc == p->sticky)
      sticky = t;
    else if (!oldest_other || t->times.queued < oldest_other->times.queued)
      oldest_other = t;
  }
  if (best && sticky && best != sticky && p->ops->reprogrammable &&
      !e->cfg.sticky_off) {
    /* keep the loaded bitstream unless another accelerator waited too long;
     * a wait counts from the last switch, so that two long backlogs take
     * turns of at least the bound instead of a reprogram per task */
    uint64_t since = oldest_other->times.queued > p->sticky_since
                         ? oldest_other->times.queued : p->sticky_since;
    uint64_t waited = now > since ? now - since : 0;
    if (waited < e->cfg.reprogram_bound_ms * 1000000)
      best = sticky;
    else if (best->acc == p->sticky)
      best = oldest_other;
  }
  for (size_t i = 0; i < n_heads; i++) /* the others' claims go back */
    if (heads[i] != best) nam_task_unclaim_states(e, heads[i]);
  if (!best) return NULL;
  nam_task_queue *q = &e->queues[best->acc_index];
  nam_queue_remove(q, best);
  nam_queue_served(q, best->round);
  nam_pair *pair = pair_of(p, best);
  if (pair->disabled) pair->probing = 1;
  if (p->sticky != best->acc) p->sticky_since = now;
  p->sticky = best->acc;
  return best;
}

/* Would p take one of the first tasks queued for acc (NULL: any) now?
 * What a woken thread of p would find; a task further back is found at
 * p's next periodic look. */
#define WAKE_LOOKAHEAD 8

static int platform_wants(nam_platform *p, const acc_descriptor *acc,
                          uint64_t now) {
  nam_engine *e = p->engine;
  for (size_t i = 0; i < e->n_queues; i++) {
    nam_task_queue *q = &e->queues[i];
    if ((acc && q->acc != acc) || !q->head || !p->ops->supports(p, q->acc))
      continue;
    unsigned looked = 0;
    for (nam_task *t = q->head; t && looked < WAKE_LOOKAHEAD;
         t = t->next, looked++)
      if (may_take(p, t, now)) return 1;
  }
  return 0;
}

/* Only a platform that would take the work is woken: a thread woken to
 * decline costs the machine a wake-up per task (an idle OpenCL device's
 * stage-in thread, while the cpu platform is faster). */
void nam_wake(nam_engine *e, const acc_descriptor *acc) {
  uint64_t now = clock_now_ns();
  for (size_t i = 0; i < e->n_platforms; i++) {
    nam_platform *p = &e->platforms[i];
    if (p->idle && platform_wants(p, acc, now)) pthread_cond_signal(&p->work);
  }
}

void nam_wake_all(nam_engine *e) {
  for (size_t i = 0; i < e->n_platforms; i++)
    pthread_cond_broadcast(&e->platforms[i].work);
  pthread_cond_broadcast(&e->work);
}

/* Call the done callbacks of doomed tasks (engine lock not held). */
static void complete_doomed(nam_task *doomed) {
  while (doomed) {
    nam_task *t = doomed;
    doomed = t->next;
    t->next = NULL;
    t->done(t, t->user);
  }
}

/* Lock held: t runs on p from now. */
static void start_on(nam_platform *p, nam_task *t) {
  nam_engine *e = p->engine;
  t->state = NAM_TASK_RUNNING;
  t->platform = p->name;
  t->ran_kind = p->ops->kind;
  t->times.started = clock_now_ns();
  t->times.dispatched = t->times.started;
  t->times.attempts++;
  t->expected_ns = nam_expected_ns(p, t);
  p->inflight_ns += t->expected_ns;
  p->running++;
  if (!t->calibration) {
    e->counters.queued--;
    e->counters.running++;
  }
}

nam_platform *nam_dispatch_inline(nam_engine *e, nam_task *t,
                                  uint64_t max_ns) {
  /* tasks already waiting go first; a calibration measures alone */
  if (!max_ns || e->calibrating || e->queues[t->acc_index].length)
    return NULL;
  uint64_t now = clock_now_ns();
  for (size_t i = 0; i < e->n_platforms; i++) {
    nam_platform *p = &e->platforms[i];
    if (p->ops != &nam_platform_cpu_ops || p->running >= p->workers ||
        p->pairs[t->acc_index].disabled || !may_take(p, t, now))
      continue;
    uint64_t expect = nam_expected_ns(p, t); /* 0: no figures yet */
    if (!expect || expect > max_ns || nam_task_claim_states(e, t, p) != 0)
      continue;
    nam_queue_served(&e->queues[t->acc_index], t->round);
    start_on(p, t);
    return p;
  }
  return NULL;
}

nam_task *nam_dispatch_next(nam_platform *p) {
  nam_engine *e = p->engine;
  pthread_mutex_lock(&e->lock);
  nam_task *t;
  nam_task *doomed = NULL;
  for (;;) {
    uint64_t now = clock_now_ns();
    /* calibration before user work */
    if (!e->stopping && (t = nam_calibrate_next(p))) break;
    t = pick(p, now, &doomed);
    if (t || e->stopping) break;
    if (doomed) {
      pthread_mutex_unlock(&e->lock);
      complete_doomed(doomed);
      doomed = NULL;
      pthread_mutex_lock(&e->lock);
      continue;
    }
    wait_for_work(p, now);
  }
  if (t) {
    start_on(p, t);
  } else {
    nam_calibrate_drop(p); /* stopping */
  }
  pthread_mutex_unlock(&e->lock);
  complete_doomed(doomed);
  return t;
}
