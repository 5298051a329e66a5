/*
 * task_blocks.c - a task's blocks on the platform that runs it: inputs,
 * out blocks, state blocks and scratch pinned through the block cache
 * before the run (bind) and given back after it (unbind), and the state
 * claims that keep two tasks off one state block.
 *
 * The cpu platform reads inputs that have host bytes where they are (no
 * cache traffic on the common path); device platforms pin every input, so
 * cached copies are reused across tasks. Inputs given without block ids
 * are put into the cache under the engine's own namespace for the life of
 * the task (as are inputs whose id the cache did not know at submit).
 */
#include "engine_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ember/ember_errors.h"

static int is_host_platform(const nam_platform *p) { return p->ops->run != NULL; }

static const nam_block_cache_ops *memory_of(const nam_platform *p) {
  return p->ops->cache_ops;
}

/* Give anonymous inputs ids in the engine's namespace, once per task. */
static int put_anonymous(nam_engine *e, nam_task *t) {
  if (t->anon_id) return 0;
  pthread_mutex_lock(&e->lock);
  uint64_t base = e->next_anon + 1;
  e->next_anon += t->n_inputs;
  pthread_mutex_unlock(&e->lock);
  for (size_t i = 0; i < t->n_inputs; i++) {
    int rc = nam_block_cache_put(e->cache, NAM_ANON_APP, base + i, 0,
                                 t->inputs[i].data, t->inputs[i].size, NULL,
                                 NULL);
    if (rc) {
      while (i--) nam_block_cache_drop(e->cache, NAM_ANON_APP, base + i);
      return rc;
    }
  }
  pthread_mutex_lock(&e->lock);
  t->anon_id = base; /* the engine drops them when the task finishes */
  pthread_mutex_unlock(&e->lock);
  return 0;
}

static int bind_inputs(nam_platform *p, nam_task *t) {
  nam_engine *e = p->engine;
  int host = is_host_platform(p);
  for (size_t i = 0; !host && i < t->n_inputs; i++)
    if (!t->in_refs[i]) { /* bytes without a block in the cache */
      int rc = put_anonymous(e, t);
      if (rc) return rc;
      break;
    }
  /* unbind releases the pins that got an entry */
  memset(t->pins, 0, t->n_inputs * sizeof t->pins[0]);
  t->n_pins = (unsigned)t->n_inputs;
  for (size_t i = 0; i < t->n_inputs; i++) {
    if (host && t->inputs[i].data) continue; /* read in place */
    int rc = t->in_refs[i]
                 ? nam_block_cache_fetch_ref(e->cache, t->in_refs[i], p->index,
                                             &t->pins[i])
                 : nam_block_cache_fetch(e->cache, NAM_ANON_APP,
                                         t->anon_id + i, p->index, &t->pins[i]);
    if (rc) return rc;
  }
  return 0;
}

static int bind_outputs(nam_platform *p, nam_task *t) {
  for (size_t i = 0; i < t->n_outputs; i++) {
    int rc = nam_block_cache_fetch_output(p->engine->cache, t->out_refs[i],
                                          p->index, &t->out_pins[i]);
    if (rc) return rc;
    t->n_out_pins = (unsigned)i + 1;
  }
  return 0;
}

static int bind_states(nam_platform *p, nam_task *t) {
  for (size_t i = 0; i < t->n_states; i++) {
    int rc = nam_block_cache_fetch_state(p->engine->cache, t->state_refs[i],
                                         p->index, &t->state_pins[i]);
    if (rc) return rc;
    t->n_state_pins = (unsigned)i + 1;
  }
  return 0;
}

static int bind_scratch(nam_platform *p, nam_task *t) {
  if (!t->plan.scratch_size) return 0;
  return memory_of(p)->alloc(p->impl, t->plan.scratch_size, &t->scratch);
}

int nam_task_bind(nam_platform *p, nam_task *t, char *err, size_t err_len) {
  const char *what = "inputs";
  int rc = bind_inputs(p, t);
  if (!rc) {
    what = "out blocks";
    rc = bind_outputs(p, t);
  }
  if (!rc) {
    what = "state blocks";
    rc = bind_states(p, t);
  }
  if (!rc) {
    what = "scratch";
    rc = bind_scratch(p, t);
  }
  if (rc) {
    nam_task_unbind(p, t, NAM_RUN_NOT_RUN);
    snprintf(err, err_len, "%s: %s not on the device: %s", p->name, what,
             rc == EMBER_ETOOBIG ? "bigger than its memory budget"
             : rc == EMBER_ESTATE ? "a state block was lost"
                                  : ember_strerror(rc));
  }
  return rc;
}

void nam_task_io_view(const nam_platform *p, const nam_task *t,
                      nam_task_io *io) {
  memset(io, 0, sizeof *io);
  for (size_t i = 0; i < t->n_inputs; i++) {
    const nam_block_pin *pin = &t->pins[i];
    io->dev_inputs[i] = pin->dev_handle;
    io->inputs[i].size = t->inputs[i].size;
    io->inputs[i].data = t->inputs[i].data ? t->inputs[i].data
                         : pin->host ? pin->host : pin->data;
  }
  for (size_t i = 0; i < t->n_outputs; i++) {
    io->dev_outputs[i] = t->out_pins[i].dev_handle;
    io->outputs[i].data = t->out_pins[i].host;
    io->outputs[i].size = t->plan.output_sizes[i];
  }
  for (size_t i = 0; i < t->n_states; i++) {
    io->dev_states[i] = t->state_pins[i].dev_handle;
    io->states[i].data = t->state_pins[i].host;
    io->states[i].size = t->state_pins[i].size;
  }
  io->dev_scratch = t->scratch;
  io->scratch.size = t->plan.scratch_size;
  if (t->scratch && memory_of(p)->host_ptr)
    io->scratch.data = memory_of(p)->host_ptr(t->scratch);
}

void nam_task_run_ctx(nam_task *t, const nam_task_io *io, acc_run_ctx *ctx) {
  /* the views are read-only to the platform, the blocks they point at are
   * the run's to write: the context hands them on as such */
  nam_task_io *w = (nam_task_io *)(uintptr_t)io;
  memset(ctx, 0, sizeof *ctx);
  ctx->cancel = &t->cancel;
  ctx->outputs = w->outputs;
  ctx->n_outputs = t->n_outputs;
  ctx->states = w->states;
  ctx->n_states = t->n_states;
  ctx->scratch = io->scratch;
  ctx->dev_outputs = w->dev_outputs;
  ctx->dev_states = w->dev_states;
  ctx->dev_scratch = io->dev_scratch;
  ctx->app = t->app;
}

void nam_task_unbind(nam_platform *p, nam_task *t, int outcome) {
  nam_engine *e = p->engine;
  static const int state_outcome[] = {
    [NAM_RUN_OK] = NAM_STATE_UPDATED,
    [NAM_RUN_FAILED] = NAM_STATE_FAILED,
    [NAM_RUN_NOT_RUN] = NAM_STATE_UNCHANGED,
  };
  if (outcome == NAM_RUN_FAILED && t->n_state_pins) t->state_touched = 1;
  for (unsigned i = 0; i < t->n_pins; i++)
    if (t->pins[i].entry_) nam_block_cache_release(e->cache, &t->pins[i]);
  t->n_pins = 0;
  for (unsigned i = 0; i < t->n_out_pins; i++)
    nam_block_cache_release_output(e->cache, &t->out_pins[i],
                                   outcome == NAM_RUN_OK);
  t->n_out_pins = 0;
  for (unsigned i = 0; i < t->n_state_pins; i++)
    nam_block_cache_release_state(e->cache, &t->state_pins[i],
                                  state_outcome[outcome]);
  t->n_state_pins = 0;
  if (t->scratch) memory_of(p)->free(t->scratch);
  t->scratch = NULL;
}

int nam_task_claim_states(nam_engine *e, nam_task *t, const nam_platform *p) {
  if (t->claimed || !t->n_states) return 0;
  for (size_t i = 0; i < t->n_states; i++) {
    int rc = nam_block_cache_claim_state(e->cache, t->state_refs[i], p->index,
                                         p->pipeline != NULL);
    if (rc) {
      while (i--) nam_block_cache_unclaim_state(e->cache, t->state_refs[i]);
      return rc;
    }
  }
  t->claimed = 1;
  return 0;
}

void nam_task_unclaim_states(nam_engine *e, nam_task *t) {
  if (!t->claimed) return;
  for (size_t i = 0; i < t->n_states; i++)
    nam_block_cache_unclaim_state(e->cache, t->state_refs[i]);
  t->claimed = 0;
}

int nam_task_states_lost(nam_engine *e, const nam_task *t) {
  for (size_t i = 0; i < t->n_states; i++)
    if (nam_block_cache_state_lost(e->cache, t->state_refs[i])) return 1;
  return 0;
}

void nam_task_lose_states(nam_engine *e, const nam_task *t) {
  for (size_t i = 0; i < t->n_states; i++)
    nam_block_cache_lose_state(e->cache, t->state_refs[i]);
}

void nam_task_drop_refs(nam_engine *e, nam_task *t) {
  nam_task_unclaim_states(e, t);
  for (size_t i = 0; i < NAM_MAX_INPUTS; i++) {
    nam_block_cache_unhold(e->cache, t->in_refs[i]);
    t->in_refs[i] = NULL;
  }
  for (size_t i = 0; i < t->n_outputs; i++) {
    if (t->status != 0) nam_block_cache_fail_output(e->cache, t->out_refs[i]);
    nam_block_cache_unhold(e->cache, t->out_refs[i]);
    t->out_refs[i] = NULL;
  }
  t->n_outputs = 0;
  for (size_t i = 0; i < t->n_states; i++) {
    nam_block_cache_unhold_state(e->cache, t->state_refs[i]);
    t->state_refs[i] = NULL;
  }
  t->n_states = 0;
}
