/*
 * tasks.c - submitting tasks, waiting for them, and running them on the
 * in-process engine: embedded mode, or the CPU fallback when the NAM
 * cannot. A task completes exactly once, whoever completes it.
 */
#include "client_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void ember__task_unref(ember_task *t) {
  pthread_mutex_lock(&t->mu);
  int left = --t->refs;
  nam_task *local = t->local;
  pthread_mutex_unlock(&t->mu);
  if (left > 0) return;
  for (size_t i = 0; i < t->n_states; i++) ember__block_unref(t->states[i]);
  for (size_t i = 0; i < t->n_outputs; i++) ember__block_unref(t->outputs[i]);
  nam_task_free(local);
  free(t->output);
  free(t->params);
  pthread_cond_destroy(&t->cv);
  pthread_mutex_destroy(&t->mu);
  free(t);
}

void ember__task_complete(ember_task *t, int status, const char *message,
                   uint8_t *output, size_t output_len, const char *platform,
                   const ember_task_info *info) {
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
  t->info.round_trip_ns = ember__client_now_ns() - t->submit_ns;
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
  ember__task_unref(t);
}

static void on_local_done(nam_task *nt, void *user) {
  ember_task *t = user;
  acc_output out = {0};
  nam_task_take_output(nt, &out);
  const nam_task_times *tm = nam_task_get_times(nt);
  ember_task_info info = {0};
  if (tm->started) {
    info.queue_ns = tm->started - tm->queued;
    info.exec_ns = tm->finished - tm->started;
  }
  info.server_ns = tm->finished - tm->queued;
  info.platform_kind = nam_task_platform_kind(nt);
  info.attempts = tm->attempts;
  if (nam_task_status(nt) == 0)
    for (size_t i = 0; i < t->n_outputs; i++)
      t->outputs[i]->size = nam_task_output_size(nt, i);
  ember__task_complete(t, nam_task_status(nt), nam_task_message(nt), out.data,
                out.size, nam_task_platform(nt), &info);
}

/* Queue on the in-process engine (which validates it). */
static void run_local(ember_task *t) {
  ember_client *c = t->client;
  if (!t->acc) {
    ember__task_complete(t, EMBER_ENOACCEL, "this client has no CPU code for that "
                  "accelerator", NULL, 0, NULL, NULL);
    return;
  }
  nam_engine *engine;
  int rc = ember__client_engine(c, &engine);
  if (rc) {
    ember__task_complete(t, rc, "cannot start the in-process engine", NULL, 0, NULL, NULL);
    return;
  }
  acc_block inputs[16];
  uint64_t ids[16], state_ids[ACC_MAX_STATES], out_ids[ACC_MAX_OUTPUTS];
  int cached = c->mode == MODE_EMBEDDED; /* blocks live in the engine */
  for (size_t i = 0; i < t->n_inputs; i++) {
    ember_block *b = t->inputs[i];
    ids[i] = b->id;
    inputs[i].size = b->size;
    inputs[i].data = b->is_output ? NULL : ember__block_bytes(b);
    if (!inputs[i].data && !b->is_output) {
      ember__task_complete(t, EMBER_ENOMEM, "cannot map an input block", NULL, 0, NULL, NULL);
      return;
    }
  }
  for (size_t i = 0; i < t->n_states; i++) state_ids[i] = t->states[i]->id;
  for (size_t i = 0; i < t->n_outputs; i++) out_ids[i] = t->outputs[i]->id;
  char why[600] = "";
  nam_task_spec spec = {
    .acc = t->acc, .params = t->params, .params_len = t->params_len,
    .inputs = inputs,
    .n_inputs = t->n_inputs, .priority = t->priority,
    .platform_kind = t->platform_req[0] ? t->platform_req : NULL,
    .prefer_kind = t->platform_pref[0] ? t->platform_pref : NULL,
    .app = CLIENT_EMBEDDED_APP, .block_ids = cached ? ids : NULL,
    .state_ids = state_ids, .n_states = t->n_states,
    .output_ids = out_ids, .n_outputs = t->n_outputs,
    .done = on_local_done, .user = t, .err = why, .err_len = sizeof why,
  };
  nam_task *nt = NULL;
  rc = nam_engine_submit(engine, &spec, &nt);
  if (rc) {
    char msg[400];
    if (rc == EMBER_ENOPLATFORM && t->platform_req[0])
      snprintf(msg, sizeof msg, "no platform of kind '%s' here (available: cpu)",
               t->platform_req);
    else
      snprintf(msg, sizeof msg, "%s", why[0] ? why : ember_strerror(rc));
    ember__task_complete(t, rc, msg, NULL, 0, NULL, NULL);
    return;
  }
  pthread_mutex_lock(&t->mu);
  t->local = nt;
  pthread_mutex_unlock(&t->mu);
}

int ember__task_has_remote_blocks(const ember_task *t) {
  if (t->n_states || t->n_outputs) return 1;
  for (size_t i = 0; i < t->n_inputs; i++)
    if (t->inputs[i]->is_output) return 1;
  return 0;
}

void ember__task_fallback(ember_task *t, int why, const char *message) {
  if (ember__task_has_remote_blocks(t)) {
    /* its out or state blocks live on the NAM: the CPU here has no copy */
    char msg[600];
    snprintf(msg, sizeof msg, "the task's out or state blocks live on the "
             "NAM, which cannot run it (%s)", message ? message : "");
    ember__task_complete(t, EMBER_ESTATE, msg, NULL, 0, NULL, NULL);
    return;
  }
  if (t->client->opts.no_fallback) {
    ember__task_complete(t, why, message, NULL, 0, NULL, NULL);
    return;
  }
  t->info.fell_back = 1;
  run_local(t);
}

/* Send the task's blocks that this connection lacks, then the Submit. */
static int send_task(ember_client *c, ember_task *t, uint64_t gen) {
  proto_wbuf w = {0};
  int fds[16];
  size_t nfds = 0;
  int rc = 0;
  pthread_mutex_lock(&c->send_lock);
  for (size_t i = 0; rc == 0 && i < t->n_inputs + t->n_states; i++) {
    ember_block *b = i < t->n_inputs ? t->inputs[i] : t->states[i - t->n_inputs];
    if (b->put_gen == gen) continue;
    if (b->is_output || (b->put_gen && (b->flags & EMBER_BLOCK_STATE))) {
      rc = EMBER_ESTATE; /* it lived on a connection that is gone */
      break;
    }
    int fd = -1;
    rc = ember__block_append_put(b, &w, &fd);
    if (fd >= 0) fds[nfds++] = fd;
  }
  uint64_t state_ids[ACC_MAX_STATES], out_ids[ACC_MAX_OUTPUTS];
  for (size_t i = 0; i < t->n_states; i++) state_ids[i] = t->states[i]->id;
  for (size_t i = 0; i < t->n_outputs; i++) out_ids[i] = t->outputs[i]->id;
  Ember__Submit s = EMBER__SUBMIT__INIT;
  uint64_t ids[16];
  for (size_t i = 0; i < t->n_inputs; i++) ids[i] = t->inputs[i]->id;
  s.task_id = t->id;
  s.accelerator = t->accelerator;
  if (t->params_len) {
    s.has_params = 1;
    s.params.data = t->params;
    s.params.len = t->params_len;
  }
  s.n_input_blocks = t->n_inputs;
  s.input_blocks = ids;
  if (t->priority) {
    s.has_priority = 1;
    s.priority = t->priority;
  }
  if (t->platform_req[0]) s.platform = t->platform_req;
  if (t->platform_pref[0]) s.prefer_platform = t->platform_pref;
  s.n_state_blocks = t->n_states;
  s.state_blocks = state_ids;
  s.n_output_blocks = t->n_outputs;
  s.output_blocks = out_ids;
  if (rc == 0) rc = proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_SUBMIT, &s.base,
                                      c->max_frame);
  /* the blocks are on this connection once sent; mark them first: the
   * result may come back (and release the inputs) before the send returns.
   * A failed send shuts the connection down, so the marks then go stale. */
  if (rc == 0) {
    for (size_t i = 0; i < t->n_inputs; i++) t->inputs[i]->put_gen = gen;
    for (size_t i = 0; i < t->n_states; i++) t->states[i]->put_gen = gen;
    for (size_t i = 0; i < t->n_outputs; i++) t->outputs[i]->put_gen = gen;
    rc = ember__remote_send_locked(c, &w, fds, nfds);
  }
  pthread_mutex_unlock(&c->send_lock);
  proto_wbuf_free(&w);
  return rc;
}

int ember__task_can_fall_back(const ember_task *t) {
  /* the in-process engine has cpu platforms only */
  return !t->client->opts.no_fallback && t->acc &&
         !ember__task_has_remote_blocks(t) &&
         (!t->platform_req[0] || strcmp(t->platform_req, "cpu") == 0);
}

static void submit_remote(ember_client *c, ember_task *t) {
  if (ember__remote_ensure(c) != 0) {
    ember__remote_lost_task(c, t, EMBER_ECONNECT, ember_last_error());
    return;
  }
  ember__task_send(c, t);
}

void ember__task_send(ember_client *c, ember_task *t) {
  pthread_mutex_lock(&c->lock);
  while (c->fd >= 0 && !c->closing && c->inflight >= c->max_inflight)
    pthread_cond_wait(&c->slot_cv, &c->lock); /* backpressure */
  if (c->fd < 0 || c->closing) {
    pthread_mutex_unlock(&c->lock);
    ember__remote_lost_task(c, t, EMBER_ECONNLOST, "connection to the NAM lost");
    return;
  }
  t->id = c->next_task_id++;
  uint64_t gen = c->gen;
  int rc = ember__inflight_add(c, t);
  pthread_mutex_unlock(&c->lock);
  if (rc) {
    ember__task_complete(t, rc, "out of memory", NULL, 0, NULL, NULL);
    return;
  }
  int rc2 = send_task(c, t, gen);
  if (rc2 == EMBER_ENOMEM || rc2 == EMBER_ESTATE) {
    pthread_mutex_lock(&c->lock);
    ember_task *mine = ember__inflight_take(c, t->id);
    pthread_mutex_unlock(&c->lock);
    if (mine)
      ember__task_complete(t, rc2, rc2 == EMBER_ESTATE
                                ? "an out or state block lived on an earlier "
                                  "connection to the NAM: it is lost"
                                : "out of memory",
                    NULL, 0, NULL, NULL);
  }
  /* a send that failed shut the socket down: the reader hands every
   * in-flight task, this one included, to ember__remote_lost_task */
}

int ember_submit(ember_client *c, const char *accelerator, const void *params,
                 size_t params_len, ember_block *const *inputs, size_t n_inputs,
                 const ember_submit_options *opts, ember_task **out) {
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
  pthread_mutex_init(&t->mu, NULL);
  pthread_cond_init(&t->cv, NULL);
  t->submit_ns = ember__client_now_ns();
  pthread_mutex_lock(&c->lock);
  c->stats.tasks_submitted++;
  pthread_mutex_unlock(&c->lock);
  *out = t;
  if (c->mode == MODE_EMBEDDED)
    run_local(t);
  else
    submit_remote(c, t);
  return 0;
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
  pthread_mutex_lock(&t->mu);
  int done = t->done;
  nam_task *local = t->local;
  pthread_mutex_unlock(&t->mu);
  if (done) return EMBER_ENOTFOUND;
  if (local) return nam_task_cancel(local) == 0 ? 0 : EMBER_ENOTFOUND;
  if (ember__remote_unpark(t->client, t)) { /* waiting for a reconnect */
    ember__task_complete(t, EMBER_ECANCELED, "canceled", NULL, 0, NULL, NULL);
    return 0;
  }
  Ember__Cancel m = EMBER__CANCEL__INIT;
  m.task_id = t->id;
  return ember__remote_send_msg(t->client, EMBER__MSG_TYPE__MSG_CANCEL, &m.base);
}

void ember_task_free(ember_task *t) {
  if (!t) return;
  /* done, not settled: a callback may free its own task */
  if (!ember_task_done(t)) {
    ember_task_cancel(t);
    ember_task_wait(t, -1); /* the library must not complete freed memory */
  }
  ember__task_unref(t);
}

int ember_run(ember_client *c, const char *accelerator, const void *params,
              size_t params_len, ember_block *const *inputs, size_t n_inputs,
              const ember_submit_options *opts, ember_task **out) {
  int rc = ember_submit(c, accelerator, params, params_len, inputs, n_inputs,
                        opts, out);
  if (rc) return rc;
  return ember_task_wait(*out, -1);
}
