/*
 * engine.h - the NAM engine: per-accelerator task queues, a dispatcher that
 * hands tasks to platforms, the platforms themselves (cpu for now) and the
 * task life cycle. A library: ember-nam runs it behind its sockets and
 * libember runs it in-process (embedded mode, CPU fallback). It never logs.
 *
 * Life cycle: submit -> QUEUED (in its accelerator's task queue) -> RUNNING
 * (taken by a platform worker) -> DONE (done callback called exactly once).
 * A queued task that is canceled goes straight to DONE with ECANCELED.
 *
 * Threads: every function may be called from any thread. Done callbacks run
 * on a platform worker thread, or on the thread that canceled a queued task,
 * or on the thread calling nam_engine_destroy(); they must not block.
 */
#ifndef EMBER_NAM_ENGINE_H
#define EMBER_NAM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "accel.h"

typedef struct nam_engine nam_engine;
typedef struct nam_task nam_task;

typedef struct nam_engine_config {
  unsigned cpu_workers;    /* 0: one per online core */
  unsigned queue_capacity; /* tasks per accelerator queue; 0: 4096 */
} nam_engine_config;

typedef void (*nam_task_done_fn)(nam_task *task, void *user);

/* What to run. The engine copies the input array (not the bytes: they must
 * stay valid until the done callback) and takes ownership of prepared. */
typedef struct nam_task_spec {
  const acc_descriptor *acc;
  void *prepared;              /* from acc->validate() */
  const acc_block *inputs;
  size_t n_inputs;
  int priority;                /* higher first; FIFO within a priority */
  const char *platform_kind;   /* required platform kind; NULL: any */
  nam_task_done_fn done;
  void *user;
} nam_task_spec;

enum nam_task_state { NAM_TASK_QUEUED, NAM_TASK_RUNNING, NAM_TASK_DONE };

/* Timestamps in CLOCK_MONOTONIC nanoseconds. */
typedef struct nam_task_times {
  uint64_t queued, started, finished;
} nam_task_times;

int nam_engine_create(const nam_engine_config *config, nam_engine **out);

/* Cancel queued tasks, wait for running ones, stop the platforms, free.
 * Tasks not yet freed by their owners stay valid. NULL is a no-op. */
void nam_engine_destroy(nam_engine *engine);

/* nam_engine_submit - queue a task. Returns 0 and the task in *out (freed
 * by the caller with nam_task_free() after its done callback), or
 * EMBER_ENOPLATFORM when no platform can run it, EMBER_EBUSY when its queue
 * is full, EMBER_ESHUTDOWN while the engine stops. On error the engine has
 * released spec->prepared. */
int nam_engine_submit(nam_engine *engine, const nam_task_spec *spec,
                      nam_task **out);

/* nam_task_cancel - a queued task completes now with EMBER_ECANCELED; a
 * running one is asked to stop (its run sees the cancel flag). Returns 0,
 * or EMBER_ENOTFOUND when the task is already done. Not after the engine
 * was destroyed. */
int nam_task_cancel(nam_task *task);

/* Accessors, valid once the done callback has been called. */
int nam_task_status(const nam_task *task);
const char *nam_task_message(const nam_task *task);
const char *nam_task_platform(const nam_task *task);
const nam_task_times *nam_task_get_times(const nam_task *task);
/* nam_task_take_output - move the output out of the task (caller frees
 * out->data with free()). */
void nam_task_take_output(nam_task *task, acc_output *out);

/* nam_task_free - free a task whose done callback has run. NULL: no-op. */
void nam_task_free(nam_task *task);

/* Introspection (snapshots). */
typedef struct nam_platform_status {
  char name[64];
  char kind[32];
  const char *state;      /* "ready", "disabled" */
  unsigned workers, queued, running;
  uint64_t completed, failed;
} nam_platform_status;

typedef struct nam_engine_counters {
  uint64_t submitted, completed, failed, canceled;
  unsigned queued, running;
} nam_engine_counters;

size_t nam_engine_platforms(nam_engine *engine, nam_platform_status *out,
                            size_t max);
/* Tasks waiting in the accelerator's task queue. */
unsigned nam_engine_queue_length(nam_engine *engine, const acc_descriptor *acc);
/* Comma-separated names of the platforms that can run acc. */
void nam_engine_platforms_for(nam_engine *engine, const acc_descriptor *acc,
                              char *buf, size_t len);
void nam_engine_get_counters(nam_engine *engine, nam_engine_counters *out);

#endif
