/* engine.c - engine life cycle, submission, cancellation, completion. */
#include "engine_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "host_memory.h"
#include "ember/ember_errors.h"
#include "log.h"

static unsigned online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1;
}

void nam_engine_event(nam_engine *e, int level, const char *fmt, ...) {
  if (!e->cfg.event) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  e->cfg.event(e->cfg.event_user, level, msg);
}

static void init_monotonic_cond(pthread_cond_t *c) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(c, &a);
  pthread_condattr_destroy(&a);
}

int nam_engine_add_platform(nam_engine *e, const nam_platform_ops *ops,
                            const char *name, unsigned workers,
                            const void *arg) {
  if (e->n_platforms >= NAM_MAX_PLATFORMS) {
    nam_engine_event(e, LOG_LVL_WARN, "platform %s skipped: at most %d "
                     "platforms", name, NAM_MAX_PLATFORMS);
    return EMBER_EINVAL;
  }
  nam_platform *p = &e->platforms[e->n_platforms];
  memset(p, 0, sizeof *p);
  p->ops = ops;
  p->engine = e;
  p->index = (unsigned)e->n_platforms;
  p->arg = arg;
  p->workers = ops->run ? workers : e->cfg.pipeline_depth;
  p->cache_budget = NAM_BLOCK_CACHE_UNLIMITED;
  snprintf(p->name, sizeof p->name, "%s", name);
  init_monotonic_cond(&p->work);
  int rc = ops->start(p);
  if (rc && ops->run) {
    /* counted anyway so that destroy() joins the workers that started */
    e->n_platforms++;
    return rc;
  }
  if (rc) {
    pthread_cond_destroy(&p->work);
    nam_engine_event(e, LOG_LVL_WARN, "platform %s not started: %s", name,
                     ember_strerror(rc));
    return rc;
  }
  e->n_platforms++;
  return 0;
}

static int create_cache(nam_engine *e) {
  nam_block_cache_platform cp[NAM_MAX_PLATFORMS];
  for (size_t i = 0; i < e->n_platforms; i++) {
    nam_platform *p = &e->platforms[i];
    cp[i].ops = p->ops->cache_ops;
    cp[i].ctx = p->impl;
    cp[i].budget = p->cache_budget;
  }
  /* a cache needs at least one platform even when none started */
  nam_block_cache_platform none = {&nam_host_memory_ops, NULL,
                                   NAM_BLOCK_CACHE_UNLIMITED};
  return e->n_platforms
             ? nam_block_cache_create(cp, (unsigned)e->n_platforms, &e->cache)
             : nam_block_cache_create(&none, 1, &e->cache);
}

/* An app left (its blocks were dropped): every accelerator hears it. */
static void tell_app_gone(void *user, uint64_t app) {
  nam_engine *e = user;
  for (size_t i = 0; i < e->n_queues; i++) acc_app_gone(e->queues[i].acc, app);
}

static void fill_defaults(nam_engine_config *c) {
  if (!c->cpu_workers) c->cpu_workers = online_cores();
  if (!c->queue_capacity) c->queue_capacity = 4096;
  if (!c->pipeline_depth) c->pipeline_depth = 3;
  if (!c->fail_threshold) c->fail_threshold = 3;
  if (!c->probe_ms) c->probe_ms = 30000;
  if (!c->timeout_factor) c->timeout_factor = 10;
}

int nam_engine_create(const nam_engine_config *config, nam_engine **out) {
  *out = NULL;
  nam_engine *e = calloc(1, sizeof *e);
  if (!e) return EMBER_ENOMEM;
  pthread_mutex_init(&e->lock, NULL);
  init_monotonic_cond(&e->work);
  init_monotonic_cond(&e->watchdog_wake);
  if (config) e->cfg = *config;
  fill_defaults(&e->cfg);
  e->n_queues = e->cfg.accelerators ? e->cfg.n_accelerators
                                    : acc_registry_count();
  if (e->n_queues > NAM_MAX_ACCELS) e->n_queues = NAM_MAX_ACCELS;
  e->queues = calloc(e->n_queues ? e->n_queues : 1, sizeof *e->queues);
  if (!e->queues) {
    nam_engine_destroy(e);
    return EMBER_ENOMEM;
  }
  for (size_t i = 0; i < e->n_queues; i++) {
    e->queues[i].acc = e->cfg.accelerators ? e->cfg.accelerators[i]
                                           : acc_registry_get(i);
    e->queues[i].capacity = e->cfg.queue_capacity;
  }
  int rc = 0;
  if (!e->cfg.no_cpu)
    rc = nam_engine_add_platform(e, &nam_platform_cpu_ops, "cpu",
                                 e->cfg.cpu_workers, NULL);
#ifdef EMBER_HAVE_OPENCL_PLATFORM
  if (!rc && e->cfg.opencl.enabled) nam_opencl_add_platforms(e, &e->cfg.opencl);
#endif
  for (unsigned i = 0; !rc && i < e->cfg.n_fpga; i++)
    nam_engine_add_platform(e, &nam_platform_fpga_emu_ops, e->cfg.fpga[i].name,
                            0, &e->cfg.fpga[i]);
  if (!rc) rc = create_cache(e);
  if (!rc) nam_block_cache_on_app_gone(e->cache, tell_app_gone, e);
  for (size_t i = 0; !rc && e->cfg.accel_cache_set && i < e->n_queues; i++)
    acc_cache_budget(e->queues[i].acc, e->cfg.accel_cache_bytes);
  for (size_t i = 0; !rc && i < e->n_platforms; i++)
    if (!e->platforms[i].ops->run) rc = nam_pipeline_start(&e->platforms[i]);
  if (!rc) rc = nam_watchdog_start(e);
  if (!rc) nam_calibrate_start(e);
  if (rc) {
    nam_engine_destroy(e);
    return rc;
  }
  *out = e;
  return 0;
}

nam_block_cache *nam_engine_block_cache(nam_engine *e) { return e->cache; }

nam_task_queue *nam_queue_of(nam_engine *e, const acc_descriptor *acc) {
  for (size_t i = 0; i < e->n_queues; i++)
    if (e->queues[i].acc == acc) return &e->queues[i];
  return NULL;
}

void nam_finish_locked(nam_engine *e, nam_task *t, int status,
                       const char *message) {
  t->state = NAM_TASK_DONE;
  t->status = status;
  snprintf(t->message, sizeof t->message, "%s", message ? message : "");
  t->times.finished = clock_now_ns();
  /* copies made for this task only go with it (nobody holds a pin now) */
  if (t->anon_id)
    for (size_t i = 0; i < t->n_inputs; i++)
      nam_block_cache_drop(e->cache, NAM_ANON_APP, t->anon_id + i);
  t->anon_id = 0;
  nam_task_drop_refs(e, t);
  e->counters.completed++;
  if (status == EMBER_ECANCELED)
    e->counters.canceled++;
  else if (status != 0)
    e->counters.failed++;
}

void nam_engine_destroy(nam_engine *e) {
  if (!e) return;
  pthread_mutex_lock(&e->lock);
  e->stopping = 1;
  /* cancel everything still queued; callbacks run outside the lock */
  nam_task *canceled = NULL;
  for (size_t i = 0; i < e->n_queues; i++) {
    nam_task_queue *q = &e->queues[i];
    while (q->head) {
      nam_task *t = q->head;
      nam_queue_remove(q, t);
      e->counters.queued--;
      nam_finish_locked(e, t, EMBER_ECANCELED, "engine stopped");
      t->next = canceled;
      canceled = t;
    }
  }
  nam_wake_all(e);
  pthread_mutex_unlock(&e->lock);
  while (canceled) {
    nam_task *t = canceled;
    canceled = t->next;
    t->next = NULL;
    t->done(t, t->user);
  }
  /* pipelines and whole-task workers first (the watchdog may still have
   * to free a hung task; a done callback still running on a worker may
   * release blocks into the cache), then the watchdog, then the devices */
  for (size_t i = 0; i < e->n_platforms; i++)
    if (!e->platforms[i].ops->run) nam_pipeline_stop(&e->platforms[i]);
  for (size_t i = 0; i < e->n_platforms; i++)
    if (e->platforms[i].ops->run) e->platforms[i].ops->stop(&e->platforms[i]);
  nam_watchdog_stop(e);
  /* the watchdog looked into the pipelines until it stopped */
  for (size_t i = 0; i < e->n_platforms; i++)
    if (!e->platforms[i].ops->run) nam_pipeline_free(&e->platforms[i]);
  nam_block_io_stop(e);
  /* device copies go before the devices that hold them */
  nam_block_cache_destroy(e->cache);
  for (size_t i = 0; i < e->n_platforms; i++)
    if (!e->platforms[i].ops->run) e->platforms[i].ops->stop(&e->platforms[i]);
  for (size_t i = 0; e->queues && i < e->n_queues; i++)
    free(e->queues[i].rounds);
  free(e->queues);
  for (size_t i = 0; i < e->n_platforms; i++)
    pthread_cond_destroy(&e->platforms[i].work);
  pthread_cond_destroy(&e->work);
  pthread_cond_destroy(&e->watchdog_wake);
  pthread_mutex_destroy(&e->lock);
  free(e);
}

int nam_platform_exists(nam_engine *e, const nam_task *t) {
  uint64_t now = clock_now_ns();
  for (size_t i = 0; i < e->n_platforms; i++)
    if (nam_platform_can_run(e, &e->platforms[i], t, now)) return 1;
  return 0;
}

static void task_discard(nam_task *t) {
  free(t->inputs);
  free(t->block_ids);
  free(t);
}

static int refuse(const nam_task_spec *spec, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Say why submit failed (into spec->err) and return rc. */
static int refuse(const nam_task_spec *spec, int rc, const char *fmt, ...) {
  if (spec->err && spec->err_len) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(spec->err, spec->err_len, fmt, ap);
    va_end(ap);
  }
  return rc;
}

/* Resolve the task's block ids in the cache (holds, declared outputs)
 * and let the accelerator plan them. Not under the engine lock. */
static int resolve_blocks(nam_engine *e, nam_task *t,
                          const nam_task_spec *spec) {
  nam_block_info info;
  uint64_t input_bytes = 0;
  for (size_t i = 0; i < t->n_inputs; i++) input_bytes += t->inputs[i].size;
  for (size_t i = 0; t->block_ids && i < t->n_inputs; i++) {
    uint64_t id = t->block_ids[i];
    if (nam_block_cache_hold(e->cache, t->app, id, &t->in_refs[i], &info)) {
      if (t->inputs[i].data) continue; /* runs on the bytes it was given */
      return refuse(spec, EMBER_ENOTFOUND, "input %zu: block %llu not found",
                    i, (unsigned long long)id);
    }
    if (info.kind == NAM_BLOCK_STATE)
      return refuse(spec, EMBER_EINVAL, "input %zu: block %llu is a state "
                    "block: name it as state", i, (unsigned long long)id);
    if (info.lost)
      return refuse(spec, EMBER_ESTATE, "input %zu: block %llu was lost with "
                    "its platform", i, (unsigned long long)id);
    if (info.pending)
      return refuse(spec, EMBER_EBUSY, "input %zu: block %llu is the output "
                    "of a task still running", i, (unsigned long long)id);
  }
  size_t state_sizes[ACC_MAX_STATES];
  for (size_t i = 0; i < spec->n_states; i++) {
    uint64_t id = spec->state_ids[i];
    if (nam_block_cache_hold_state(e->cache, t->app, id, &t->state_refs[i],
                                   &info))
      return refuse(spec, EMBER_ENOTFOUND, "state %zu: block %llu not found",
                    i, (unsigned long long)id);
    t->n_states = i + 1;
    if (info.kind != NAM_BLOCK_STATE)
      return refuse(spec, EMBER_EINVAL, "state %zu: block %llu was not made "
                    "with EMBER_BLOCK_STATE", i, (unsigned long long)id);
    if (info.lost)
      return refuse(spec, EMBER_ESTATE, "state %zu: block %llu was lost "
                    "(its platform failed or a task on it did): restore it",
                    i, (unsigned long long)id);
    for (size_t k = 0; k < i; k++)
      if (spec->state_ids[k] == id)
        return refuse(spec, EMBER_EINVAL, "state block %llu named twice",
                      (unsigned long long)id);
    state_sizes[i] = info.size;
  }
  char why[400] = "";
  acc_task_shape shape = {spec->n_outputs, state_sizes, spec->n_states};
  int rc = acc_plan_task(t->acc, t->prepared, &shape, input_bytes, &t->plan,
                         why, sizeof why);
  if (rc) return refuse(spec, rc, "%s: %s", t->acc->name, why);
  if (spec->admit) {
    /* saturating: a plugin's sizes are not trusted to add up */
    uint64_t outs = 0;
    for (size_t i = 0; i < spec->n_outputs; i++)
      outs = outs + t->plan.output_sizes[i] < outs
                 ? UINT64_MAX : outs + t->plan.output_sizes[i];
    why[0] = 0;
    rc = spec->admit(spec->user, outs, t->plan.scratch_size, why, sizeof why);
    if (rc) return refuse(spec, rc, "%s", why[0] ? why : ember_strerror(rc));
  }
  for (size_t i = 0; i < spec->n_outputs; i++) {
    uint64_t id = spec->output_ids[i];
    rc = nam_block_cache_declare_output(e->cache, t->app, id,
                                        t->plan.output_sizes[i],
                                        &t->out_refs[i]);
    if (rc == EMBER_EINVAL)
      return refuse(spec, rc, "output %zu: block id %llu is in use", i,
                    (unsigned long long)id);
    if (rc) return refuse(spec, rc, "%s", ember_strerror(rc));
    t->n_outputs = i + 1;
  }
  return 0;
}

/* A task whose state lives on a platform that cannot run it would wait
 * forever. Lock held. */
static int state_home_can_run(nam_engine *e, nam_task *t) {
  uint64_t now = clock_now_ns();
  for (size_t i = 0; i < t->n_states; i++) {
    nam_block_info info;
    nam_block_cache_ref_info(e->cache, t->state_refs[i], &info);
    if (info.home >= 0 && (size_t)info.home < e->n_platforms &&
        !nam_platform_can_run(e, &e->platforms[info.home], t, now))
      return 0;
  }
  return 1;
}

int nam_engine_submit(nam_engine *e, const nam_task_spec *spec,
                      nam_task **out) {
  *out = NULL;
  const acc_descriptor *acc = spec->acc;
  if (spec->n_inputs > NAM_MAX_INPUTS || spec->n_outputs > ACC_MAX_OUTPUTS ||
      spec->n_states > ACC_MAX_STATES ||
      ((spec->n_outputs || spec->n_states) && !spec->block_ids &&
       spec->n_inputs)) {
    return refuse(spec, EMBER_EINVAL, "too many blocks, or out/state blocks "
                  "without block ids");
  }
  void *prepared = NULL;
  char bad[512] = "";
  int rc = acc->validate(spec->params, spec->params_len, spec->inputs,
                         spec->n_inputs, &prepared, bad, sizeof bad);
  if (rc)
    return refuse(spec, rc, "%s: %s", acc->name,
                  bad[0] ? bad : ember_strerror(rc));
  nam_task *t = calloc(1, sizeof *t);
  acc_block *inputs = spec->n_inputs ? calloc(spec->n_inputs, sizeof *inputs)
                                     : NULL;
  uint64_t *ids = spec->block_ids && spec->n_inputs
                      ? calloc(spec->n_inputs, sizeof *ids)
                      : NULL;
  if (!t || (spec->n_inputs && !inputs) ||
      (spec->block_ids && spec->n_inputs && !ids)) {
    free(t);
    free(inputs);
    free(ids);
    acc->release(prepared);
    return refuse(spec, EMBER_ENOMEM, "out of memory");
  }
  if (spec->n_inputs) memcpy(inputs, spec->inputs, spec->n_inputs * sizeof *inputs);
  if (ids) memcpy(ids, spec->block_ids, spec->n_inputs * sizeof *ids);
  t->engine = e;
  t->acc = acc;
  t->prepared = prepared;
  t->inputs = inputs;
  t->n_inputs = spec->n_inputs;
  t->app = spec->app;
  t->block_ids = ids;
  t->priority = spec->priority;
  snprintf(t->platform_kind, sizeof t->platform_kind, "%s",
           spec->platform_kind ? spec->platform_kind : "");
  snprintf(t->prefer_kind, sizeof t->prefer_kind, "%s",
           spec->prefer_kind ? spec->prefer_kind : "");
  t->done = spec->done;
  t->user = spec->user;
  atomic_init(&t->cancel, 0);
  atomic_init(&t->timed_out, 0);
  rc = resolve_blocks(e, t, spec);
  t->work = t->plan.cost.ops;
  nam_platform *runner = NULL;

  pthread_mutex_lock(&e->lock);
  nam_task_queue *q = nam_queue_of(e, acc);
  if (q) t->acc_index = (unsigned)(q - e->queues);
  if (rc == 0) {
    if (e->stopping)
      rc = refuse(spec, EMBER_ESHUTDOWN, "the engine is stopping");
    else if (!q || !nam_platform_exists(e, t))
      rc = refuse(spec, EMBER_ENOPLATFORM, "no platform can run it");
    else if (!state_home_can_run(e, t))
      rc = refuse(spec, EMBER_ENOPLATFORM, "a state block lives on a "
                  "platform that cannot run this task");
    else if (q->length >= q->capacity)
      rc = refuse(spec, EMBER_EBUSY, "the task queue is full");
  }
  if (rc == 0) {
    t->seq = e->next_seq++;
    t->round = nam_queue_assign_round(q, e->cfg.scheduler, t->app);
    t->state = NAM_TASK_QUEUED;
    t->times.queued = clock_now_ns();
    e->counters.submitted++;
    e->counters.queued++;
    runner = nam_dispatch_inline(e, t, spec->inline_max_ns);
    if (!runner) {
      nam_queue_insert(q, t);
      /* platforms decline tasks another would finish sooner: each looks */
      nam_wake(e, acc);
    }
  } else {
    t->status = rc;
    for (size_t i = 0; i < t->n_outputs; i++) /* never made: free the ids */
      nam_block_cache_drop(e->cache, t->app, spec->output_ids[i]);
    nam_task_drop_refs(e, t);
  }
  pthread_mutex_unlock(&e->lock);
  if (rc) {
    acc->release(prepared);
    task_discard(t);
    return rc;
  }
  *out = t;
  /* a worker's wake-up would cost more than the task: run it here */
  if (spec->ran_inline) *spec->ran_inline = runner != NULL;
  if (runner) nam_whole_task_run(runner, t);
  return 0;
}

int nam_task_cancel(nam_task *t) {
  nam_engine *e = t->engine;
  pthread_mutex_lock(&e->lock);
  if (t->state == NAM_TASK_DONE) {
    pthread_mutex_unlock(&e->lock);
    return EMBER_ENOTFOUND;
  }
  if (t->state == NAM_TASK_RUNNING) {
    atomic_store(&t->cancel, 1);
    pthread_mutex_unlock(&e->lock);
    return 0;
  }
  nam_queue_remove(&e->queues[t->acc_index], t);
  e->counters.queued--;
  nam_finish_locked(e, t, EMBER_ECANCELED, "canceled while queued");
  pthread_mutex_unlock(&e->lock);
  t->done(t, t->user);
  return 0;
}

int nam_task_status(const nam_task *t) { return t->status; }
const char *nam_task_message(const nam_task *t) { return t->message; }
const char *nam_task_platform(const nam_task *t) {
  return t->platform ? t->platform : "";
}
const char *nam_task_platform_kind(const nam_task *t) {
  return t->ran_kind ? t->ran_kind : "";
}
const nam_task_times *nam_task_get_times(const nam_task *t) {
  return &t->times;
}

void nam_task_take_output(nam_task *t, acc_output *out) {
  *out = t->output;
  t->output.data = NULL;
  t->output.size = 0;
}

size_t nam_task_output_size(const nam_task *t, size_t i) {
  return i < ACC_MAX_OUTPUTS ? t->plan.output_sizes[i] : 0;
}

const acc_cost *nam_task_cost(const nam_task *t) { return &t->plan.cost; }

void nam_task_free(nam_task *t) {
  if (!t) return;
  t->acc->release(t->prepared);
  free(t->output.data);
  task_discard(t);
}
