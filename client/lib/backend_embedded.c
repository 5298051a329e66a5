/*
 * backend_embedded.c - the embedded back end: blocks in the in-process
 * engine's block cache, tasks on its CPU workers. The remote back end runs
 * its CPU fallback here too (its blocks then stay in the client's memory).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "block_cache.h"
#include "block_mem.h"
#include "engine.h"
#include "introspect.h"
#include "plugins.h"

/* The app's namespace in the engine's block cache. */
#define EMBEDDED_APP 1

/* The in-process engine, started on first use. */
static int engine_get(ember_client *c, nam_engine **out) {
  pthread_mutex_lock(&c->lock);
  int rc = 0;
  if (!c->engine) {
    nam_engine_config cfg = {.cpu_workers = c->opts.embedded_threads};
    cfg.accelerators = ember__accels_list(c->accels, &cfg.n_accelerators);
    rc = nam_engine_create(&cfg, &c->engine);
  }
  *out = c->engine;
  pthread_mutex_unlock(&c->lock);
  return rc;
}

static int embedded_open(ember_client *c, const ember__lease *lease) {
  (void)lease; /* leases are for NAMs */
  nam_engine *e;
  return engine_get(c, &e);
}

/* Local tasks end too (EMBER_ECANCELED). */
static void embedded_close(ember_client *c) { nam_engine_destroy(c->engine); }

static int embedded_connected(ember_client *c) {
  (void)c;
  return 0;
}

static void embedded_lease_ended(ember_client *c) { (void)c; }

/* ---- blocks ------------------------------------------------------------ */

/* Out blocks are made by the engine, in its cache. */
static int in_engine(const ember_block *b) {
  return b->in_engine || b->is_output;
}

static int embedded_alloc_block(ember_block *b, const void *init) {
  return ember__block_mem_malloc(b, init);
}

static void free_cached_bytes(void *user, const void *data, size_t size) {
  (void)user, (void)size;
  free((void *)(uintptr_t)data);
}

/* Into the engine's cache, which then owns the bytes. */
static int embedded_seal_block(ember_block *b) {
  nam_engine *engine;
  int rc = engine_get(b->client, &engine);
  if (rc) return rc;
  unsigned flags = b->flags & (EMBER_BLOCK_CACHE | EMBER_BLOCK_BROADCAST |
                               EMBER_BLOCK_STATE);
  rc = nam_block_cache_put(nam_engine_block_cache(engine), EMBEDDED_APP,
                           b->id, flags, b->data, b->size, free_cached_bytes,
                           NULL);
  if (rc == 0) b->in_engine = 1;
  return rc;
}

static void embedded_release_block(ember_block *b) {
  if (!in_engine(b)) return;
  /* the cache frees the bytes once no task uses them */
  nam_engine *engine = NULL;
  if (engine_get(b->client, &engine) == 0)
    nam_block_cache_drop(nam_engine_block_cache(engine), EMBEDDED_APP, b->id);
  b->data = NULL;
}

typedef struct engine_op {
  ember__block_op_done *done;
  void *user;
} engine_op;

static void on_engine_op(const nam_block_op_result *r, void *user) {
  engine_op o = *(engine_op *)user;
  free(user);
  o.done(o.user, r->status, r->bytes, r->size, r->version);
  free(r->bytes);
}

static const int engine_ops[] = {
  [EMBER__BLOCK_READ] = NAM_BLOCK_READ,
  [EMBER__BLOCK_SYNC] = NAM_BLOCK_SYNC,
  [EMBER__BLOCK_RESTORE] = NAM_BLOCK_RESTORE,
};

static int embedded_block_op(ember_block *b, enum ember__block_op op,
                             ember__block_op_done *done, void *user) {
  engine_op *o = malloc(sizeof *o);
  if (!o) return EMBER_ENOMEM;
  *o = (engine_op){.done = done, .user = user};
  nam_engine *engine;
  int rc = engine_get(b->client, &engine);
  if (!rc)
    rc = nam_engine_block_op(engine, engine_ops[op], EMBEDDED_APP, b->id,
                             on_engine_op, o);
  if (rc) free(o);
  return rc;
}

/* ---- tasks ------------------------------------------------------------- */

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
  t->client->task_done(t, nam_task_status(nt), nam_task_message(nt),
                       out.data, out.size, nam_task_platform(nt), &info);
}

/* A task its caller waits for (ember_run) runs on the caller's thread when
 * a cpu worker is free and nothing of its accelerator is queued ahead,
 * however long it takes: the caller would only sleep meanwhile, and handing
 * it to a worker costs two thread wake-ups (an MCMC program's likelihoods
 * through the BEAGLE door). */
#define SYNC_INLINE_MAX_NS UINT64_MAX

/* Queue on the in-process engine (which validates it): an embedded
 * client's task, or a remote one falling back. */
static void embedded_submit(ember_task *t) {
  ember_client *c = t->client;
  if (!t->acc) {
    c->task_done(t, EMBER_ENOACCEL, "this client has no CPU code for that "
                 "accelerator", NULL, 0, NULL, NULL);
    return;
  }
  nam_engine *engine;
  int rc = engine_get(c, &engine);
  if (rc) {
    c->task_done(t, rc, "cannot start the in-process engine", NULL, 0, NULL,
                 NULL);
    return;
  }
  acc_block inputs[16];
  uint64_t ids[16], state_ids[ACC_MAX_STATES], out_ids[ACC_MAX_OUTPUTS];
  /* an embedded client's blocks live in the engine; a fallback's do not */
  int cached = t->n_inputs && in_engine(t->inputs[0]);
  for (size_t i = 0; i < t->n_inputs; i++) {
    ember_block *b = t->inputs[i];
    ids[i] = b->id;
    inputs[i].size = b->size;
    inputs[i].data = b->is_output ? NULL : ember__block_bytes(b);
    if (!inputs[i].data && !b->is_output) {
      c->task_done(t, EMBER_ENOMEM, "cannot map an input block", NULL, 0,
                   NULL, NULL);
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
    .app = EMBEDDED_APP, .block_ids = cached ? ids : NULL,
    .state_ids = state_ids, .n_states = t->n_states,
    .output_ids = out_ids, .n_outputs = t->n_outputs,
    .done = on_local_done, .user = t, .err = why, .err_len = sizeof why,
    .inline_max_ns = t->sync ? SYNC_INLINE_MAX_NS : 0,
  };
  nam_task *nt = NULL;
  rc = nam_engine_submit(engine, &spec, &nt);
  if (rc) {
    char msg[700];
    if (rc == EMBER_ENOPLATFORM && t->platform_req[0])
      snprintf(msg, sizeof msg, "no platform of kind '%s' here (available: cpu)",
               t->platform_req);
    else
      snprintf(msg, sizeof msg, "%s", why[0] ? why : ember_strerror(rc));
    c->task_done(t, rc, msg, NULL, 0, NULL, NULL);
    return;
  }
  pthread_mutex_lock(&t->mu);
  t->local = nt;
  pthread_mutex_unlock(&t->mu);
}


static int embedded_cancel(ember_task *t) {
  pthread_mutex_lock(&t->mu);
  nam_task *local = t->local;
  pthread_mutex_unlock(&t->mu);
  return local && nam_task_cancel(local) == 0 ? 0 : EMBER_ENOTFOUND;
}

static void embedded_task_free(ember_task *t) {
  nam_task_free(t->local);
  t->local = NULL;
}

static int embedded_list(ember_client *c, ember_listing **out) {
  nam_engine *e;
  int rc = engine_get(c, &e);
  return rc ? rc : ember__listing_from_engine(c, e, out);
}

const ember__backend_ops ember__backend_embedded = {
  .name = "embedded",
  .open = embedded_open,
  .close = embedded_close,
  .connected = embedded_connected,
  .lease_ended = embedded_lease_ended,
  .alloc_block = embedded_alloc_block,
  .seal_block = embedded_seal_block,
  .block_op = embedded_block_op,
  .release_block = embedded_release_block,
  .submit = embedded_submit,
  .cancel = embedded_cancel,
  .task_free = embedded_task_free,
  .list_accelerators = embedded_list,
};
