/* engine.c - engine life cycle, submission, cancellation, completion. */
#include "engine_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
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
  int rc = ops->start(p);
  if (rc && ops->run) {
    /* counted anyway so that destroy() joins the workers that started */
    e->n_platforms++;
    return rc;
  }
  if (rc) {
    nam_engine_event(e, LOG_LVL_WARN, "platform %s not started: %s", name,
                     ember_strerror(rc));
    return rc;
  }
  e->n_platforms++;
  return 0;
}

/* Device copies for the cpu platform are the host bytes: never fetched,
 * but the cache wants a table for every platform. */
static int host_alloc(void *ctx, size_t size, void **handle) {
  (void)ctx, (void)size;
  *handle = NULL;
  return 0;
}
static int host_upload(void *handle, const void *data, size_t size) {
  (void)handle, (void)data, (void)size;
  return 0;
}
static void host_free(void *handle) { (void)handle; }
static const nam_block_cache_ops host_cache_ops = {host_alloc, host_upload,
                                                   host_free};

static int create_cache(nam_engine *e) {
  nam_block_cache_platform cp[NAM_MAX_PLATFORMS];
  for (size_t i = 0; i < e->n_platforms; i++) {
    nam_platform *p = &e->platforms[i];
    cp[i].ops = p->ops->cache_ops ? p->ops->cache_ops : &host_cache_ops;
    cp[i].ctx = p->impl;
    cp[i].budget = p->cache_budget;
  }
  /* a cache needs at least one platform even when none started */
  nam_block_cache_platform none = {&host_cache_ops, NULL,
                                   NAM_BLOCK_CACHE_UNLIMITED};
  return e->n_platforms
             ? nam_block_cache_create(cp, (unsigned)e->n_platforms, &e->cache)
             : nam_block_cache_create(&none, 1, &e->cache);
}

static void fill_defaults(nam_engine_config *c) {
  if (!c->cpu_workers) c->cpu_workers = online_cores();
  if (!c->queue_capacity) c->queue_capacity = 4096;
  if (!c->pipeline_depth) c->pipeline_depth = 3;
  if (!c->fail_threshold) c->fail_threshold = 3;
  if (!c->probe_ms) c->probe_ms = 30000;
  if (!c->timeout_factor) c->timeout_factor = 10;
}

static void init_monotonic_cond(pthread_cond_t *c) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(c, &a);
  pthread_condattr_destroy(&a);
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
  pthread_cond_broadcast(&e->work);
  pthread_mutex_unlock(&e->lock);
  while (canceled) {
    nam_task *t = canceled;
    canceled = t->next;
    t->next = NULL;
    t->done(t, t->user);
  }
  /* pipelines first (the watchdog may still have to free a hung task),
   * then the watchdog, then the devices */
  for (size_t i = 0; i < e->n_platforms; i++)
    if (!e->platforms[i].ops->run) nam_pipeline_stop(&e->platforms[i]);
  nam_watchdog_stop(e);
  /* device copies go before the devices that hold them */
  nam_block_cache_destroy(e->cache);
  for (size_t i = 0; i < e->n_platforms; i++)
    e->platforms[i].ops->stop(&e->platforms[i]);
  for (size_t i = 0; e->queues && i < e->n_queues; i++)
    free(e->queues[i].rounds);
  free(e->queues);
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

int nam_engine_submit(nam_engine *e, const nam_task_spec *spec,
                      nam_task **out) {
  *out = NULL;
  const acc_descriptor *acc = spec->acc;
  if (spec->n_inputs > NAM_MAX_INPUTS) {
    acc->release(spec->prepared);
    return EMBER_EINVAL;
  }
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
    acc->release(spec->prepared);
    return EMBER_ENOMEM;
  }
  if (spec->n_inputs) memcpy(inputs, spec->inputs, spec->n_inputs * sizeof *inputs);
  if (ids) memcpy(ids, spec->block_ids, spec->n_inputs * sizeof *ids);
  t->engine = e;
  t->acc = acc;
  t->prepared = spec->prepared;
  t->work = acc->work ? acc->work(spec->prepared) : 0;
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

  pthread_mutex_lock(&e->lock);
  int rc = 0;
  nam_task_queue *q = nam_queue_of(e, acc);
  if (q) t->acc_index = (unsigned)(q - e->queues);
  if (e->stopping)
    rc = EMBER_ESHUTDOWN;
  else if (!q || !nam_platform_exists(e, t))
    rc = EMBER_ENOPLATFORM;
  else if (q->length >= q->capacity)
    rc = EMBER_EBUSY;
  if (rc == 0) {
    t->seq = e->next_seq++;
    t->round = nam_queue_assign_round(q, e->cfg.scheduler, t->app);
    t->state = NAM_TASK_QUEUED;
    t->times.queued = clock_now_ns();
    nam_queue_insert(q, t);
    e->counters.submitted++;
    e->counters.queued++;
    /* platforms decline tasks another would finish sooner: wake them all */
    pthread_cond_broadcast(&e->work);
  }
  pthread_mutex_unlock(&e->lock);
  if (rc) {
    acc->release(spec->prepared);
    task_discard(t);
    return rc;
  }
  *out = t;
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

void nam_task_free(nam_task *t) {
  if (!t) return;
  t->acc->release(t->prepared);
  free(t->output.data);
  task_discard(t);
}
