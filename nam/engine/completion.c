/*
 * completion.c - the end of an attempt: success, a final failure, or a
 * device failure that sends the task to another platform.
 *
 * Fault tolerance (Blaze 5.4): each (accelerator, platform) pair counts its
 * errors. A task that fails on a device platform goes back to its queue,
 * barred from that platform, as long as another platform could take it;
 * the app sees one result either way. fail_threshold failures in a row
 * disable the pair; once probe_ms has passed, dispatch lets one real task
 * through as a probe, and its success re-enables the pair. Failures on the
 * cpu platform are the task's own (it is the reference implementation)
 * and are final.
 *
 * State (accel.h): a task with state blocks is never retried elsewhere -
 * its state lives on this platform and may be half written. A failed
 * attempt that had its states pinned completes with EMBER_ESTATE (the
 * states are lost until restored); one that failed before touching them
 * completes with its own error. A pair disabled here takes down the out
 * and state blocks that live only on this platform (they are lost). A
 * stateful run that finished is reported as done even if a cancel came
 * late: its state was updated, and the app must know.
 */
#include "engine_internal.h"

#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "ember/ember_errors.h"
#include "log.h"

/* The execute time refines the pair's figures, so dispatch can compare
 * platforms (calibrate.c). */
static void learn_speed(nam_platform *p, nam_pair *pair, const nam_task *t,
                        uint64_t now) {
  uint64_t ns = nam_task_exec_ns(p, t, now);
  nam_calibrate_learn(pair, t->work, ns);
}

static void requeue_locked(nam_engine *e, nam_platform *p, nam_task *t) {
  t->state = NAM_TASK_QUEUED;
  t->platform = NULL;
  t->ran_kind = NULL;
  atomic_store(&t->timed_out, 0);
  nam_queue_insert(&e->queues[t->acc_index], t);
  e->counters.queued++;
  e->counters.retries++;
  p->retried_away++;
  nam_wake(e, t->acc);
}

/* A device attempt failed: count it against the pair. Lock held. */
static void pair_failed(nam_engine *e, nam_platform *p, nam_pair *pair,
                        const nam_task *t, int status, uint64_t now) {
  pair->errors++;
  pair->consecutive++;
  if (status == EMBER_ETIMEDOUT) {
    pair->timeouts++;
    p->timeouts++;
  }
  if (pair->disabled) {
    pair->probing = 0;
    pair->disabled_at = now;
    nam_engine_event(e, LOG_LVL_WARN, "probe of %s on %s failed: stays "
                     "disabled", t->acc->name, p->name);
  } else if (pair->consecutive >= e->cfg.fail_threshold) {
    size_t lost = nam_block_cache_platform_lost(e->cache, p->index);
    if (lost)
      nam_engine_event(e, LOG_LVL_WARN, "%s: %zu out and state blocks that "
                       "lived only there are lost", p->name, lost);
    pair->disabled = 1;
    pair->disabled_count++;
    pair->disabled_at = now;
    e->counters.pairs_disabled++;
    nam_engine_event(e, LOG_LVL_WARN, "%s on %s disabled after %u failures "
                     "in a row (last: %s); probing again in %llu ms",
                     t->acc->name, p->name, pair->consecutive, t->last_error,
                     (unsigned long long)e->cfg.probe_ms);
  }
}

uint64_t nam_task_exec_ns(const nam_platform *p, const nam_task *t,
                          uint64_t now) {
  if (p->ops->run) return now - t->times.started;
  /* from when execute began: a pipelined task waits for the execute
   * thread after its stage-in, and that wait is not the device's speed */
  return t->times.executed - t->exec_started;
}

void nam_task_complete(nam_platform *p, nam_task *t, int status,
                       const char *message, acc_output *out) {
  nam_engine *e = p->engine;
  if (t->calibration) {
    nam_calibrate_done(p, t, status, message, out);
    return;
  }
  if (atomic_load(&t->cancel) && status != EMBER_ECANCELED &&
      !(status == 0 && t->n_states)) {
    status = EMBER_ECANCELED; /* it may have finished, but the owner asked */
    message = "canceled while running";
  }
  if (status != 0) {
    free(out->data);
    out->data = NULL;
    out->size = 0;
  }
  if (status && (!message || !message[0])) message = ember_strerror(status);
  uint64_t now = clock_now_ns();
  char final[256];
  pthread_mutex_lock(&e->lock);
  p->running--;
  e->counters.running--;
  p->inflight_ns -= t->expected_ns < p->inflight_ns ? t->expected_ns
                                                    : p->inflight_ns;
  nam_pair *pair = &p->pairs[t->acc_index];
  if (status == 0) {
    p->completed++;
    pair->completed++;
    pair->consecutive = 0;
    learn_speed(p, pair, t, now);
    if (pair->disabled) {
      pair->disabled = 0;
      pair->probing = 0;
      nam_engine_event(e, LOG_LVL_NOTICE, "%s on %s re-enabled: the probe "
                       "task succeeded", t->acc->name, p->name);
    }
  } else if (status == EMBER_ECANCELED ||
             (status == EMBER_ESTATE && !t->state_touched)) {
    /* the probe told nothing (canceled, or its state lost before it ran:
     * counted when that happened): probe again */
    pair->probing = 0;
  } else {
    p->failed++;
    if (!p->ops->run) {
      snprintf(t->last_error, sizeof t->last_error, "%s: %s", p->name,
               message);
      pair_failed(e, p, pair, t, status, now);
      t->excluded |= 1u << p->index;
      if (!t->n_states && !e->stopping && nam_platform_exists(e, t)) {
        requeue_locked(e, p, t);
        pthread_mutex_unlock(&e->lock);
        return;
      }
      if (!t->n_states) {
        snprintf(final, sizeof final, "no platform left to run it (last "
                 "failure: %s)", t->last_error);
        status = EMBER_EPLATFORM;
        message = final;
      }
    }
  }
  if (status != 0 && t->state_touched) {
    /* a long reason is cut: the start says what happened */
    if (snprintf(final, sizeof final, "state lost: %s: %s", p->name,
                 message) >= (int)sizeof final)
      final[sizeof final - 2] = '~';
    status = EMBER_ESTATE;
    message = final;
  }
  t->output = *out;
  nam_finish_locked(e, t, status, message);
  /* p's backlog shrank: platforms that left queued tasks to it look again
   * now rather than at their next periodic check */
  if (e->counters.queued) nam_wake(e, NULL);
  pthread_mutex_unlock(&e->lock);
  t->done(t, t->user);
}
