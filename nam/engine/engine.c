/* engine.c - engine life cycle, submission, cancellation, completion. */
#include "engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "ember/ember_errors.h"

static unsigned online_cores(void) {
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned)n : 1;
}

static int add_platform(nam_engine *e, const nam_platform_ops *ops,
                        const char *name, unsigned workers) {
  if (e->n_platforms >= NAM_MAX_PLATFORMS) return EMBER_EINVAL;
  nam_platform *p = &e->platforms[e->n_platforms];
  memset(p, 0, sizeof *p);
  p->ops = ops;
  p->engine = e;
  p->workers = workers;
  snprintf(p->name, sizeof p->name, "%s", name);
  int rc = ops->start(p);
  /* count it even on failure so destroy() stops what did start */
  e->n_platforms++;
  return rc;
}

int nam_engine_create(const nam_engine_config *config, nam_engine **out) {
  *out = NULL;
  nam_engine *e = calloc(1, sizeof *e);
  if (!e) return EMBER_ENOMEM;
  pthread_mutex_init(&e->lock, NULL);
  pthread_cond_init(&e->work, NULL);
  e->n_queues = acc_registry_count();
  e->queues = calloc(e->n_queues, sizeof *e->queues);
  if (!e->queues) {
    nam_engine_destroy(e);
    return EMBER_ENOMEM;
  }
  unsigned capacity = config && config->queue_capacity ? config->queue_capacity
                                                       : 4096;
  for (size_t i = 0; i < e->n_queues; i++) {
    e->queues[i].acc = acc_registry_get(i);
    e->queues[i].capacity = capacity;
  }
  unsigned workers = config && config->cpu_workers ? config->cpu_workers
                                                   : online_cores();
  int rc = add_platform(e, &nam_platform_cpu_ops, "cpu", workers);
  if (rc) {
    nam_engine_destroy(e);
    return rc;
  }
  *out = e;
  return 0;
}

static nam_task_queue *queue_of(nam_engine *e, const acc_descriptor *acc) {
  for (size_t i = 0; i < e->n_queues; i++)
    if (e->queues[i].acc == acc) return &e->queues[i];
  return NULL;
}

/* Called with the lock held: mark done and count; the callback runs after
 * the caller unlocks. */
static void finish_locked(nam_engine *e, nam_task *t, int status,
                          const char *message) {
  t->state = NAM_TASK_DONE;
  t->status = status;
  snprintf(t->message, sizeof t->message, "%s", message ? message : "");
  t->times.finished = clock_now_ns();
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
      finish_locked(e, t, EMBER_ECANCELED, "engine stopped");
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
  for (size_t i = 0; i < e->n_platforms; i++)
    e->platforms[i].ops->stop(&e->platforms[i]);
  free(e->queues);
  pthread_cond_destroy(&e->work);
  pthread_mutex_destroy(&e->lock);
  free(e);
}

static int platform_exists(nam_engine *e, const acc_descriptor *acc,
                           const char *kind) {
  for (size_t i = 0; i < e->n_platforms; i++) {
    nam_platform *p = &e->platforms[i];
    if (p->disabled || !p->ops->supports(p, acc)) continue;
    if (kind && kind[0] && strcmp(kind, p->ops->kind) != 0) continue;
    return 1;
  }
  return 0;
}

int nam_engine_submit(nam_engine *e, const nam_task_spec *spec,
                      nam_task **out) {
  *out = NULL;
  const acc_descriptor *acc = spec->acc;
  nam_task *t = calloc(1, sizeof *t);
  acc_block *inputs = spec->n_inputs ? calloc(spec->n_inputs, sizeof *inputs)
                                     : NULL;
  if (!t || (spec->n_inputs && !inputs)) {
    free(t);
    free(inputs);
    acc->release(spec->prepared);
    return EMBER_ENOMEM;
  }
  if (spec->n_inputs) memcpy(inputs, spec->inputs, spec->n_inputs * sizeof *inputs);
  t->engine = e;
  t->acc = acc;
  t->prepared = spec->prepared;
  t->inputs = inputs;
  t->n_inputs = spec->n_inputs;
  t->priority = spec->priority;
  snprintf(t->platform_kind, sizeof t->platform_kind, "%s",
           spec->platform_kind ? spec->platform_kind : "");
  t->done = spec->done;
  t->user = spec->user;
  atomic_init(&t->cancel, 0);

  pthread_mutex_lock(&e->lock);
  int rc = 0;
  nam_task_queue *q = queue_of(e, acc);
  if (e->stopping)
    rc = EMBER_ESHUTDOWN;
  else if (!q || !platform_exists(e, acc, t->platform_kind))
    rc = EMBER_ENOPLATFORM;
  else if (q->length >= q->capacity)
    rc = EMBER_EBUSY;
  if (rc == 0) {
    t->seq = e->next_seq++;
    t->state = NAM_TASK_QUEUED;
    t->times.queued = clock_now_ns();
    nam_queue_insert(q, t);
    e->counters.submitted++;
    e->counters.queued++;
    /* only the cpu kind exists so far: any worker can take it */
    pthread_cond_signal(&e->work);
  }
  pthread_mutex_unlock(&e->lock);
  if (rc) {
    t->prepared = NULL;
    acc->release(spec->prepared);
    free(t->inputs);
    free(t);
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
  nam_queue_remove(queue_of(e, t->acc), t);
  e->counters.queued--;
  finish_locked(e, t, EMBER_ECANCELED, "canceled while queued");
  pthread_mutex_unlock(&e->lock);
  t->done(t, t->user);
  return 0;
}

void nam_task_complete(nam_platform *p, nam_task *t, int status,
                       const char *message, acc_output *out) {
  nam_engine *e = p->engine;
  if (status == 0 && atomic_load(&t->cancel)) {
    /* finished anyway, but the owner asked for cancellation */
    free(out->data);
    out->data = NULL;
    out->size = 0;
    status = EMBER_ECANCELED;
    message = "canceled while running";
  }
  t->output = *out;
  pthread_mutex_lock(&e->lock);
  p->running--;
  e->counters.running--;
  if (status == 0)
    p->completed++;
  else if (status != EMBER_ECANCELED)
    p->failed++;
  finish_locked(e, t, status,
                status && (!message || !message[0]) ? ember_strerror(status)
                                                    : message);
  pthread_mutex_unlock(&e->lock);
  t->done(t, t->user);
}

int nam_task_status(const nam_task *t) { return t->status; }
const char *nam_task_message(const nam_task *t) { return t->message; }
const char *nam_task_platform(const nam_task *t) {
  return t->platform ? t->platform : "";
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
  free(t->inputs);
  free(t);
}

size_t nam_engine_platforms(nam_engine *e, nam_platform_status *out,
                            size_t max) {
  pthread_mutex_lock(&e->lock);
  size_t n = e->n_platforms < max ? e->n_platforms : max;
  for (size_t i = 0; i < n; i++) {
    nam_platform *p = &e->platforms[i];
    nam_platform_status *s = &out[i];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", p->name);
    snprintf(s->kind, sizeof s->kind, "%s", p->ops->kind);
    s->state = p->disabled ? "disabled" : "ready";
    s->workers = p->workers;
    s->running = p->running;
    s->completed = p->completed;
    s->failed = p->failed;
    for (size_t k = 0; k < e->n_queues; k++)
      if (p->ops->supports(p, e->queues[k].acc)) s->queued += e->queues[k].length;
  }
  pthread_mutex_unlock(&e->lock);
  return n;
}

unsigned nam_engine_queue_length(nam_engine *e, const acc_descriptor *acc) {
  pthread_mutex_lock(&e->lock);
  nam_task_queue *q = queue_of(e, acc);
  unsigned n = q ? q->length : 0;
  pthread_mutex_unlock(&e->lock);
  return n;
}

void nam_engine_platforms_for(nam_engine *e, const acc_descriptor *acc,
                              char *buf, size_t len) {
  size_t used = 0;
  if (len) buf[0] = '\0';
  pthread_mutex_lock(&e->lock);
  for (size_t i = 0; i < e->n_platforms; i++) {
    nam_platform *p = &e->platforms[i];
    if (!p->ops->supports(p, acc) || used >= len) continue;
    int n = snprintf(buf + used, len - used, "%s%s", used ? "," : "", p->name);
    if (n > 0) used += (size_t)n;
  }
  pthread_mutex_unlock(&e->lock);
}

void nam_engine_get_counters(nam_engine *e, nam_engine_counters *out) {
  pthread_mutex_lock(&e->lock);
  *out = e->counters;
  pthread_mutex_unlock(&e->lock);
}
