/*
 * engine_internal.h - what the engine's own files share: the task and
 * engine structs, the task queues, and the platform back-end table.
 */
#ifndef EMBER_NAM_ENGINE_INTERNAL_H
#define EMBER_NAM_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "engine.h"

#define NAM_MAX_PLATFORMS 16

struct nam_task {
  nam_engine *engine;
  const acc_descriptor *acc;
  void *prepared;
  acc_block *inputs;
  size_t n_inputs;
  int priority;
  char platform_kind[32];
  uint64_t seq;               /* arrival order, for FCFS */
  nam_task_done_fn done;
  void *user;

  atomic_int cancel;
  int state;                  /* enum nam_task_state, under engine->lock */
  int status;
  char message[256];
  acc_output output;
  const char *platform;       /* name of the platform that ran it */
  nam_task_times times;

  nam_task *prev, *next;      /* links in its task queue */
};

/* A task queue: one per accelerator, ordered by priority then arrival. */
typedef struct nam_task_queue {
  const acc_descriptor *acc;
  nam_task *head, *tail;
  unsigned length, capacity;
} nam_task_queue;

void nam_queue_insert(nam_task_queue *q, nam_task *t);
void nam_queue_remove(nam_task_queue *q, nam_task *t);

typedef struct nam_platform nam_platform;

/* A platform back end: a const table of functions (cpu now; opencl and
 * fpga-emu later). */
typedef struct nam_platform_ops {
  const char *kind;
  /* start workers; they take tasks with nam_dispatch_next() */
  int (*start)(nam_platform *p);
  /* workers return from nam_dispatch_next() once the engine stops: join */
  void (*stop)(nam_platform *p);
  int (*supports)(const nam_platform *p, const acc_descriptor *acc);
  /* run one task to completion on the calling worker thread */
  int (*run)(nam_platform *p, nam_task *t, acc_output *out, char *err,
             size_t err_len);
} nam_platform_ops;

struct nam_platform {
  const nam_platform_ops *ops;
  nam_engine *engine;
  char name[64];
  unsigned workers;
  unsigned running;           /* under engine->lock */
  uint64_t completed, failed; /* under engine->lock */
  int disabled;
  void *impl;
};

struct nam_engine {
  pthread_mutex_t lock;
  pthread_cond_t work;        /* a task was queued, or the engine stops */
  int stopping;
  uint64_t next_seq;
  nam_task_queue *queues;     /* one per registered accelerator */
  size_t n_queues;
  nam_platform platforms[NAM_MAX_PLATFORMS];
  size_t n_platforms;
  nam_engine_counters counters;
};

extern const nam_platform_ops nam_platform_cpu_ops;

/* nam_dispatch_next - block until a task this platform may run is queued,
 * mark it RUNNING and return it; NULL once the engine stops. Called by
 * platform workers. */
nam_task *nam_dispatch_next(nam_platform *p);

/* nam_task_complete - record the outcome and call the done callback. */
void nam_task_complete(nam_platform *p, nam_task *t, int status,
                       const char *message, acc_output *out);

#endif
