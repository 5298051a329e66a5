/*
 * tasks.c - the task API: submitting tasks to the client's back end,
 * waiting for them, and completing them: a task completes exactly once,
 * whichever back end reports it (ember__task_complete).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend.h"
#include "blocks.h"
#include "clock.h"
#include "last_error.h"
#include "plugins.h"
#include "struct_abi.h"

static void task_unref(ember_task *t) {
  pthread_mutex_lock(&t->mu);
  int left = --t->refs;
  pthread_mutex_unlock(&t->mu);
  if (left > 0) return;
  for (size_t i = 0; i < t->n_states; i++) ember__block_unref(t->states[i]);
  for (size_t i = 0; i < t->n_outputs; i++) ember__block_unref(t->outputs[i]);
  t->client->backend->task_free(t);
  free(t->output);
  free(t->params);
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

void ember__task_complete(ember_task *t, int status, const char *message,
                          uint8_t *output, size_t output_len,
                          const char *platform, const ember_task_info *info) {
  pthread_mutex_lock(&t->mu);
  if (t->done) { /* exactly once: a late second answer is dropped */
    pthread_mutex_unlock(&t->mu);
    free(output);
    return;
  }
  int fell_back = t->info.fell_back;
  if (info) t->info = *info;
  t->info.fell_back = fell_back;
  t->info.size = sizeof t->info;
  t->status = status;
  snprintf(t->message, sizeof t->message, "%s",
           status == 0 ? "" : message && message[0] ? message : ember_strerror(status));
  t->output = output;
  t->output_len = output_len;
  snprintf(t->platform, sizeof t->platform, "%s",
           fell_back ? "fallback" : platform ? platform : "");
  t->info.platform = t->platform;
  /* an older NAM sends no kind: its only platform was cpu */
  snprintf(t->platform_kind, sizeof t->platform_kind, "%s",
           fell_back ? "fallback"
           : info && info->platform_kind && info->platform_kind[0]
               ? info->platform_kind
               : "cpu");
  t->info.platform_kind = t->platform_kind;
  t->info.round_trip_ns = clock_now_ns() - t->submit_ns;
  t->done = 1;
  pthread_mutex_unlock(&t->mu);

  ember_client *c = t->client;
  pthread_mutex_lock(&c->lock);
  c->stats.tasks_completed++;
  if (fell_back) c->stats.tasks_fallback++;
  pthread_mutex_unlock(&c->lock);
  /* the inputs are not needed any more (no retry after this) */
  for (size_t i = 0; i < t->n_inputs; i++) ember__block_unref(t->inputs[i]);
  t->n_inputs = 0;
  if (t->callback) t->callback(t, t->user);
  /* waiters return only now, so what the callback uses stays alive */
  pthread_mutex_lock(&t->mu);
  t->settled = 1;
  pthread_cond_broadcast(&t->cv);
  pthread_mutex_unlock(&t->mu);
  task_unref(t);
}

/* ember_submit, or ember_run's submit (sync: the caller waits for it). */
static int submit(ember_client *c, const char *accelerator, const void *params,
                  size_t params_len, ember_block *const *inputs,
                  size_t n_inputs, const ember_submit_options *opts, int sync,
                  ember_task **out) {
  *out = NULL;
  if (!c || !accelerator || (n_inputs && !inputs) || (params_len && !params)) {
    ember__client_set_error("ember_submit: missing argument");
    return EMBER_EINVAL;
  }
  if (n_inputs > 16 || strlen(accelerator) >= 64) {
    ember__client_set_error("ember_submit: %s", n_inputs > 16 ? "more than 16 inputs"
                                                       : "accelerator name too long");
    return EMBER_EINVAL;
  }
  for (size_t i = 0; i < n_inputs; i++)
    if (!inputs[i] || !inputs[i]->sealed || inputs[i]->client != c) {
      ember__client_set_error("ember_submit: input %zu is %s", i,
                       !inputs[i] ? "NULL" : !inputs[i]->sealed ? "not sealed"
                                                             : "another client's");
      return EMBER_EINVAL;
    }
  ember_submit_options full;
  int rc = ember__struct_in(&full, sizeof full, opts, EMBER__SUBMIT_OPTIONS_V0,
                            "ember_submit_options");
  if (rc) return rc;
  opts = &full; /* the caller's fields, zeros for those it does not know */
  size_t n_states = opts->n_states;
  size_t n_outputs = opts->n_outputs;
  if (n_states > ACC_MAX_STATES || n_outputs > ACC_MAX_OUTPUTS ||
      (n_states && !opts->states) || (n_outputs && !opts->outputs)) {
    ember__client_set_error("ember_submit: at most %d state and %d out blocks",
                     ACC_MAX_STATES, ACC_MAX_OUTPUTS);
    return EMBER_EINVAL;
  }
  for (size_t i = 0; i < n_states; i++) {
    const ember_block *b = opts->states[i];
    if (!b || b->client != c || !b->sealed || !(b->flags & EMBER_BLOCK_STATE)) {
      ember__client_set_error("ember_submit: state %zu is %s", i,
                       !b ? "NULL" : b->client != c ? "another client's"
                       : !b->sealed ? "not sealed"
                                    : "not made with EMBER_BLOCK_STATE");
      return EMBER_EINVAL;
    }
  }
  ember_task *t = calloc(1, sizeof *t);
  if (!t || (params_len && !(t->params = malloc(params_len)))) {
    free(t);
    return EMBER_ENOMEM;
  }
  for (size_t i = 0; i < n_outputs; i++) {
    if (!(t->outputs[i] = ember__block_new_output(c))) {
      while (i--) ember__block_unref(t->outputs[i]);
      free(t->params);
      free(t);
      return EMBER_ENOMEM;
    }
  }
  t->n_outputs = n_outputs;
  for (size_t i = 0; i < n_states; i++) {
    ember__block_ref(opts->states[i]);
    t->states[i] = opts->states[i];
  }
  t->n_states = n_states;
  /* the app's handles: one reference each, the task keeps its own */
  for (size_t i = 0; i < n_outputs; i++) {
    ember__block_ref(t->outputs[i]);
    opts->outputs[i] = t->outputs[i];
  }
  t->client = c;
  t->acc = ember__accel_find(c->accels, accelerator);
  snprintf(t->accelerator, sizeof t->accelerator, "%s", accelerator);
  if (params_len) memcpy(t->params, params, params_len);
  t->params_len = params_len;
  for (size_t i = 0; i < n_inputs; i++) {
    ember__block_ref(inputs[i]);
    t->inputs[i] = inputs[i];
  }
  t->n_inputs = n_inputs;
  if (opts) {
    t->priority = opts->priority;
    if (opts->platform)
      snprintf(t->platform_req, sizeof t->platform_req, "%s", opts->platform);
    if (opts->prefer)
      snprintf(t->platform_pref, sizeof t->platform_pref, "%s", opts->prefer);
    t->callback = opts->callback;
    t->user = opts->user;
  }
  t->refs = 2; /* the application's, and one until it completes */
  t->sync = sync;
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  t->submit_ns = clock_now_ns();
  pthread_mutex_lock(&c->lock);
  c->stats.tasks_submitted++;
  pthread_mutex_unlock(&c->lock);
  *out = t;
  c->backend->submit(t);
  return 0;
}

int ember_submit(ember_client *c, const char *accelerator, const void *params,
                 size_t params_len, ember_block *const *inputs, size_t n_inputs,
                 const ember_submit_options *opts, ember_task **out) {
  return submit(c, accelerator, params, params_len, inputs, n_inputs, opts, 0,
                out);
}

int ember_task_wait(ember_task *t, int timeout_ms) {
  pthread_mutex_lock(&t->mu);
  struct timespec deadline;
  if (timeout_ms >= 0) {
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
      deadline.tv_sec++;
      deadline.tv_nsec -= 1000000000L;
    }
  }
  int rc = 0;
  while (!t->settled && rc == 0) {
    if (timeout_ms < 0)
      pthread_cond_wait(&t->cv, &t->mu);
    else if (pthread_cond_timedwait(&t->cv, &t->mu, &deadline) == ETIMEDOUT)
      rc = t->settled ? 0 : EMBER_ETIMEDOUT;
  }
  pthread_mutex_unlock(&t->mu);
  return rc;
}

int ember_task_done(const ember_task *t) {
  ember_task *m = (ember_task *)t;
  pthread_mutex_lock(&m->mu);
  int done = m->done;
  pthread_mutex_unlock(&m->mu);
  return done;
}

int ember_task_status(const ember_task *t) { return t->status; }
const char *ember_task_message(const ember_task *t) { return t->message; }

const void *ember_task_output(const ember_task *t, size_t *size) {
  if (size) *size = t->done ? t->output_len : 0;
  return t->done ? t->output : NULL;
}

const ember_task_info *ember_task_get_info(const ember_task *t) {
  return &t->info;
}

int ember_task_cancel(ember_task *t) {
  if (ember_task_done(t)) return EMBER_ENOTFOUND;
  return t->client->backend->cancel(t);
}

void ember_task_free(ember_task *t) {
  if (!t) return;
  /* done, not settled: a callback may free its own task */
  if (!ember_task_done(t)) {
    ember_task_cancel(t);
    ember_task_wait(t, -1); /* the library must not complete freed memory */
  }
  task_unref(t);
}

int ember_run(ember_client *c, const char *accelerator, const void *params,
              size_t params_len, ember_block *const *inputs, size_t n_inputs,
              const ember_submit_options *opts, ember_task **out) {
  int rc = submit(c, accelerator, params, params_len, inputs, n_inputs, opts,
                  1, out);
  if (rc) return rc;
  if (c->backend->wait_sync) c->backend->wait_sync(*out);
  return ember_task_wait(*out, -1);
}
