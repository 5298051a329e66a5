/*
 * calibrate.c - how fast each (accelerator, platform) pair is, so that
 * dispatch (dispatch.c) gives a task to a slow platform only when that
 * finishes it sooner than a faster one would.
 *
 * A pair's expected execute time is fixed_ns + work * ns_per_unit: a
 * device's launch cost dominates a small task (pocl's CPU device spends
 * ~300 us on one sw pair that the cpu platform aligns in ~20 us) and its
 * speed per unit a large one.
 *
 * Calibration: before a platform without a timing model (cpu, opencl)
 * takes user work, it runs NAM_CALIB_REPEATS small and large synthetic
 * tasks of each accelerator that can make them (make_probe); the medians
 * of the two sizes fit the line. They are ordinary tasks to the platform
 * (the pipeline stages them like any other) but no client's: counted
 * nowhere, freed here. One runs at a time in the whole engine, so that
 * they do not slow each other down; a pair still calibrating has no
 * figures, and dispatch gives such a pair no task another platform can
 * run (the cpu platform needs no figures to be trusted: it runs the
 * reference code). Platforms with a model (fpga-emu) are not calibrated:
 * a board would have to load a bitstream for it; nor is a platform that
 * alone runs an accelerator (an embedded engine's cpu): nothing to choose.
 *
 * Refinement: every real task's execute time moves the term that
 * dominates its estimate (fixed cost for a small task, per-unit cost for a
 * large one) a step towards what was seen, an exponentially weighted
 * moving average.
 */
#include "engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ember/ember_errors.h"
#include "log.h"

#define LEARN_WEIGHT 0.3 /* of the newest real task */

uint64_t nam_pair_estimate(const nam_pair *pair, uint64_t work) {
  if (!pair->calibrated && !pair->measured) return 0;
  double ns = pair->fixed_ns + pair->ns_per_unit * (double)work;
  if (ns >= 1.8e19) return UINT64_MAX;
  return ns < 1 ? 1 : (uint64_t)ns;
}

void nam_calibrate_learn(nam_pair *pair, uint64_t work, uint64_t ns) {
  if (!work) return;
  if (!pair->calibrated && !pair->measured) {
    pair->fixed_ns = 0; /* one sample cannot split the two terms */
    pair->ns_per_unit = (double)ns / (double)work;
  } else {
    double var = pair->ns_per_unit * (double)work;
    if (var >= pair->fixed_ns) {
      double rest = (double)ns > pair->fixed_ns ? ns - pair->fixed_ns : 0;
      pair->ns_per_unit += LEARN_WEIGHT * (rest / (double)work -
                                           pair->ns_per_unit);
    } else {
      double rest = (double)ns > var ? ns - var : 0;
      pair->fixed_ns += LEARN_WEIGHT * (rest - pair->fixed_ns);
    }
  }
  pair->measured++;
}

static void free_task(nam_task *t) {
  t->acc->release(t->prepared);
  for (size_t i = 0; i < t->n_inputs; i++) free((void *)t->inputs[i].data);
  free(t->inputs);
  free(t);
}

/* One calibration task of acc's size on p; NULL when acc cannot make it. */
static nam_task *make_task(nam_platform *p, unsigned acc_index,
                           unsigned size) {
  const acc_descriptor *acc = p->engine->queues[acc_index].acc;
  acc_probe probe;
  if (acc->make_probe(size, &probe) != 0) return NULL;
  nam_task *t = calloc(1, sizeof *t);
  acc_block *inputs = calloc(ACC_PROBE_MAX_INPUTS, sizeof *inputs);
  void *prepared = NULL;
  char err[256];
  if (!t || !inputs || probe.n_inputs > ACC_PROBE_MAX_INPUTS ||
      acc->validate(probe.params, probe.params_len, probe.inputs,
                    probe.n_inputs, &prepared, err, sizeof err) != 0) {
    for (size_t i = 0; i < probe.n_inputs && i < ACC_PROBE_MAX_INPUTS; i++)
      free((void *)probe.inputs[i].data);
    free(probe.params);
    free(inputs);
    free(t);
    return NULL;
  }
  free(probe.params);
  memcpy(inputs, probe.inputs, probe.n_inputs * sizeof *inputs);
  t->engine = p->engine;
  t->acc = acc;
  t->acc_index = acc_index;
  t->prepared = prepared;
  uint64_t input_bytes = 0;
  for (size_t i = 0; i < probe.n_inputs; i++) input_bytes += inputs[i].size;
  acc_task_shape none = {0};
  if (acc_plan_task(acc, prepared, &none, input_bytes, &t->plan, err,
                    sizeof err) != 0) {
    t->inputs = inputs;
    t->n_inputs = probe.n_inputs;
    free_task(t);
    return NULL;
  }
  t->work = t->plan.cost.ops;
  t->inputs = inputs;
  t->n_inputs = probe.n_inputs;
  t->app = NAM_ANON_APP;
  t->calibration = 1;
  t->calib_size = size;
  atomic_init(&t->cancel, 0);
  atomic_init(&t->timed_out, 0);
  return t;
}

/* Could a platform other than p run acc: is there a choice to make? */
static int has_rival(const nam_engine *e, const nam_platform *p,
                     const acc_descriptor *acc) {
  for (size_t i = 0; i < e->n_platforms; i++)
    if (&e->platforms[i] != p && e->platforms[i].ops->supports(
                                     &e->platforms[i], acc))
      return 1;
  return 0;
}

/* Queue p's calibration tasks: for each pair, small and large in turn. */
static void plan(nam_platform *p) {
  nam_engine *e = p->engine;
  p->calib_planned = 1;
  if (p->ops->model_ns) return;
  nam_task **tail = &p->calib_tasks;
  for (unsigned k = 0; k < e->n_queues; k++) {
    const acc_descriptor *acc = e->queues[k].acc;
    if (!acc->make_probe || !p->ops->supports(p, acc) ||
        !has_rival(e, p, acc))
      continue;
    for (unsigned r = 0; r < NAM_CALIB_REPEATS; r++)
      for (unsigned size = 0; size < ACC_PROBE_SIZES; size++) {
        nam_task *t = make_task(p, k, size);
        if (!t) continue;
        *tail = t;
        tail = &t->next;
        p->pairs[k].calib_pending++;
      }
  }
}

void nam_calibrate_start(nam_engine *e) {
  pthread_mutex_lock(&e->lock);
  e->calib_open = 1;
  nam_wake_all(e);
  pthread_mutex_unlock(&e->lock);
}

nam_task *nam_calibrate_next(nam_platform *p) {
  nam_engine *e = p->engine;
  if (!e->calib_open) return NULL;
  if (!p->calib_planned) {
    plan(p);
    nam_wake_all(e); /* nam_engine_wait_calibrated */
  }
  if (!p->calib_tasks || e->calibrating) return NULL;
  nam_task *t = p->calib_tasks;
  p->calib_tasks = t->next;
  t->next = NULL;
  e->calibrating = p;
  return t;
}

static void drop_pair(nam_platform *p, unsigned acc_index) {
  for (nam_task **at = &p->calib_tasks; *at;) {
    nam_task *t = *at;
    if (t->acc_index != acc_index) {
      at = &t->next;
      continue;
    }
    *at = t->next;
    free_task(t);
  }
  p->pairs[acc_index].calib_pending = 0;
}

void nam_calibrate_drop(nam_platform *p) {
  while (p->calib_tasks) {
    nam_task *t = p->calib_tasks;
    p->calib_tasks = t->next;
    p->pairs[t->acc_index].calib_pending = 0;
    free_task(t);
  }
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

static double median(uint64_t *v, unsigned n) {
  qsort(v, n, sizeof *v, cmp_u64);
  return (double)v[n / 2];
}

/* The line through the medians of the two sizes. */
static void fit(nam_pair *pair) {
  double ts = median(pair->calib_ns[ACC_PROBE_SMALL],
                     pair->calib_runs[ACC_PROBE_SMALL]);
  double tl = median(pair->calib_ns[ACC_PROBE_LARGE],
                     pair->calib_runs[ACC_PROBE_LARGE]);
  double ws = (double)pair->calib_work[ACC_PROBE_SMALL];
  double wl = (double)pair->calib_work[ACC_PROBE_LARGE];
  double per = tl > ts && wl > ws ? (tl - ts) / (wl - ws) : tl / wl;
  double fixed = ts - per * ws;
  pair->ns_per_unit = per;
  pair->fixed_ns = fixed > 0 ? fixed : 0;
  pair->calibrated = 1;
}

void nam_calibrate_done(nam_platform *p, nam_task *t, int status,
                        const char *message, acc_output *out) {
  nam_engine *e = p->engine;
  uint64_t now = clock_now_ns();
  uint64_t ns = nam_task_exec_ns(p, t, now);
  free(out->data);
  out->data = NULL;
  char event[300] = "";
  int level = LOG_LVL_NOTICE;
  pthread_mutex_lock(&e->lock);
  p->running--;
  p->inflight_ns -= t->expected_ns < p->inflight_ns ? t->expected_ns
                                                    : p->inflight_ns;
  e->calibrating = NULL;
  nam_pair *pair = &p->pairs[t->acc_index];
  unsigned size = t->calib_size;
  if (pair->calib_pending == 0) {
    /* its pair's calibration was given up: ignore */
  } else if (status != 0) {
    drop_pair(p, t->acc_index);
    level = LOG_LVL_WARN;
    snprintf(event, sizeof event, "calibration of %s on %s failed (%s): it "
             "takes tasks only where no platform with known speed can",
             t->acc->name, p->name, message && message[0] ? message : "?");
  } else {
    if (pair->calib_runs[size] < NAM_CALIB_REPEATS)
      pair->calib_ns[size][pair->calib_runs[size]++] = ns;
    pair->calib_work[size] = t->work;
    if (--pair->calib_pending == 0 && pair->calib_runs[ACC_PROBE_SMALL] &&
        pair->calib_runs[ACC_PROBE_LARGE]) {
      fit(pair);
      snprintf(event, sizeof event, "%s on %s calibrated: %.1f us + %.3f "
               "ns x %s", t->acc->name, p->name, pair->fixed_ns / 1e3,
               pair->ns_per_unit,
               t->acc->work_unit ? t->acc->work_unit : "work");
    }
  }
  /* copies made for this task only go with it */
  if (t->anon_id)
    for (size_t i = 0; i < t->n_inputs; i++)
      nam_block_cache_drop(e->cache, NAM_ANON_APP, t->anon_id + i);
  /* the next calibration task, and dispatch with new figures */
  nam_wake_all(e);
  pthread_mutex_unlock(&e->lock);
  free_task(t);
  if (event[0]) nam_engine_event(e, level, "%s", event);
}

/* Lock held: no platform has calibration left to run. */
static int all_calibrated(const nam_engine *e) {
  if (!e->calib_open || e->calibrating) return 0;
  for (size_t i = 0; i < e->n_platforms; i++)
    if (!e->platforms[i].calib_planned || e->platforms[i].calib_tasks)
      return 0;
  return 1;
}

int nam_engine_wait_calibrated(nam_engine *e, uint64_t timeout_ms) {
  uint64_t until = clock_now_ns() + timeout_ms * 1000000;
  int rc = 0;
  pthread_mutex_lock(&e->lock);
  while (!e->stopping && !all_calibrated(e)) {
    if (clock_now_ns() >= until) {
      rc = EMBER_ETIMEDOUT;
      break;
    }
    struct timespec at = clock_ts_at(until);
    pthread_cond_timedwait(&e->work, &e->lock, &at);
  }
  if (e->stopping) rc = EMBER_ESHUTDOWN;
  pthread_mutex_unlock(&e->lock);
  return rc;
}
