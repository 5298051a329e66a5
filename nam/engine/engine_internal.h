/*
 * engine_internal.h - what the engine's own files share: the task and
 * engine structs, the task queues, the platform back-end table and the
 * pipeline that drives device platforms.
 */
#ifndef EMBER_NAM_ENGINE_INTERNAL_H
#define EMBER_NAM_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "block_cache.h"
#include "engine.h"

#define NAM_MAX_PLATFORMS 16

#define NAM_MAX_ACCELS NAM_MAX_PAIRS

struct nam_task {
  nam_engine *engine;
  const acc_descriptor *acc;
  unsigned acc_index;         /* its task queue */
  void *prepared;
  uint64_t work;              /* plan.cost.ops */
  acc_task_plan plan;         /* out sizes, scratch, cost */
  acc_block *inputs;
  size_t n_inputs;
  uint64_t app;
  uint64_t *block_ids;        /* NULL: anonymous inputs (see anon_id) */
  nam_block_hold *in_refs[NAM_MAX_INPUTS]; /* held at submit (block_ids) */
  nam_block_hold *out_refs[ACC_MAX_OUTPUTS]; /* declared at submit */
  size_t n_outputs;
  nam_block_hold *state_refs[ACC_MAX_STATES]; /* held at submit */
  size_t n_states;
  int claimed;                /* its states are claimed (dispatched) */
  uint64_t anon_id;           /* ids of anonymous inputs: anon_id + i in
                                 the engine's own cache namespace */
  int priority;
  uint64_t round;             /* fair scheduling: the app's turn */
  char platform_kind[32];
  char prefer_kind[32];
  uint64_t seq;               /* arrival order, for FCFS */
  nam_task_done_fn done;
  void *user;

  atomic_int cancel;
  int state;                  /* enum nam_task_state, under engine->lock */
  int status;
  char message[256];
  acc_output output;
  const char *platform;       /* name of the platform that ran it */
  const char *ran_kind;       /* and its kind */
  nam_task_times times;

  /* attempts */
  uint32_t excluded;          /* platforms that failed it (bit per index) */
  char last_error[200];       /* why the last attempt failed */
  uint64_t expected_ns;       /* estimate on the platform it runs on */
  uint64_t deadline_ns;       /* execute must return by then (0: none) */
  atomic_int timed_out;       /* the watchdog gave up on this attempt */
  nam_block_pin pins[NAM_MAX_INPUTS]; /* device copies while on a device */
  unsigned n_pins;
  nam_block_pin out_pins[ACC_MAX_OUTPUTS]; /* while it runs */
  nam_block_pin state_pins[ACC_MAX_STATES];
  unsigned n_out_pins, n_state_pins;
  void *scratch;              /* the platform's scratch allocation */
  int state_touched;          /* a failed attempt had its states pinned */
  int ran;                    /* this attempt reached execute */
  uint64_t exec_started;      /* when execute began (device platforms) */
  uint64_t device_clock_ns;   /* the platform's own use (fpga-emu's
                                 virtual time of this task) */
  int calibration;            /* the engine's own timing task
                                 (calibrate.c), no client's */
  unsigned calib_size;        /* its ACC_PROBE_* size */

  nam_task *prev, *next;      /* links in its task queue or a stage queue */
};

/* A task queue: one per accelerator, ordered by priority, then (fair
 * scheduling) the app's round, then arrival. */
typedef struct nam_app_round {
  uint64_t app, round;
} nam_app_round;

typedef struct nam_task_queue {
  const acc_descriptor *acc;
  nam_task *head, *tail;
  unsigned length, capacity;
  /* fair scheduling: the round of the last task dispatched, and each app's
   * last assigned round (entries at or below served are dropped) */
  uint64_t served;
  nam_app_round *rounds;
  size_t n_rounds, cap_rounds;
} nam_task_queue;

void nam_queue_insert(nam_task_queue *q, nam_task *t);
void nam_queue_remove(nam_task_queue *q, nam_task *t);
/* Fair scheduling: the round a new task of app gets (0 under FCFS). */
uint64_t nam_queue_assign_round(nam_task_queue *q, int scheduler,
                                uint64_t app);
/* A task of round r was dispatched. */
void nam_queue_served(nam_task_queue *q, uint64_t round);

typedef struct nam_platform nam_platform;
typedef struct nam_task_io nam_task_io;

/*
 * A platform back end: a const table of functions.
 *
 * Whole-task platforms (cpu) set run: their own workers take tasks with
 * nam_dispatch_next() and run each start to end.
 *
 * Device platforms (opencl, fpga-emu) leave run NULL and set execute: the
 * engine's pipeline (pipeline.c) drives them with three threads - stage-in
 * (takes a task, copies its input blocks to the device through the block
 * cache and cache_ops), execute, stage-out - and up to p->workers (the
 * pipeline depth) tasks between dispatch and completion.
 */
typedef struct nam_platform_ops {
  const char *kind;
  /* open the device (p->arg is the platform's config); set p->impl,
   * p->cache_budget, p->device. cpu: start its workers too. */
  int (*start)(nam_platform *p);
  /* stop: workers/pipeline are gone when this is called for device
   * platforms; cpu joins its workers here. Frees p->impl. */
  void (*stop)(nam_platform *p);
  int (*supports)(const nam_platform *p, const acc_descriptor *acc);
  int reprogrammable;   /* switching accelerators is costly (FPGA) */

  /* whole-task platforms: run one bound task on the calling worker thread */
  int (*run)(nam_platform *p, nam_task *t, const struct nam_task_io *io,
             acc_output *out, char *err, size_t err_len);

  /* the platform's memory for block copies and scratch (ctx: p->impl) */
  const nam_block_cache_ops *cache_ops;

  /* device platforms */
  /* all of t's inputs are on the device (called on the stage-in thread
   * after the fetches); may be NULL */
  void (*staged)(nam_platform *p, nam_task *t);
  /* run t on its bound blocks (io: their handles and host views) */
  int (*execute)(nam_platform *p, nam_task *t, const struct nam_task_io *io,
                 acc_output *out, char *err, size_t err_len);
  /* bring the output back to the host (fpga-emu models the DMA); NULL:
   * execute already did */
  int (*stage_out)(nam_platform *p, nam_task *t, const acc_output *out,
                   char *err, size_t err_len);
  /* t overran its deadline: make a hung execute return soon (with an
   * error) if the device allows it; NULL: it cannot be interrupted */
  void (*abort)(nam_platform *p, nam_task *t);
  /* expected execute time of t in ns (a model), 0: unknown (measured) */
  uint64_t (*model_ns)(const nam_platform *p, const nam_task *t);
  /* device-specific status (loaded bitstream, reprograms, virtual time);
   * called with the engine lock held: quick, no engine calls */
  void (*describe)(const nam_platform *p, nam_platform_status *s);
} nam_platform_ops;

#define NAM_CALIB_REPEATS 3 /* runs of each calibration size (median) */

/* One (accelerator, platform) pair's health and speed. */
typedef struct nam_pair {
  unsigned consecutive;       /* failures in a row */
  uint64_t completed, errors, timeouts, disabled_count;
  int disabled;
  int probing;                /* a probe task is running */
  uint64_t disabled_at;       /* CLOCK_MONOTONIC ns */
  /* expected execute time = fixed_ns + work * ns_per_unit, from
   * calibration tasks and refined by real ones (calibrate.c); known once
   * calibrated or measured */
  double fixed_ns, ns_per_unit;
  int calibrated;             /* the calibration tasks fitted the figures */
  uint64_t measured;          /* real tasks that refined them */
  unsigned calib_pending;     /* calibration tasks not yet done */
  unsigned calib_runs[ACC_PROBE_SIZES];
  uint64_t calib_ns[ACC_PROBE_SIZES][NAM_CALIB_REPEATS];
  uint64_t calib_work[ACC_PROBE_SIZES];
} nam_pair;

typedef struct nam_pipeline nam_pipeline;
typedef struct nam_block_io nam_block_io;

struct nam_platform {
  const nam_platform_ops *ops;
  nam_engine *engine;
  unsigned index;             /* in engine->platforms and the cache */
  char name[64];
  char device[96];            /* set by start() */
  const void *arg;            /* the platform's config (start() reads it) */
  unsigned workers;           /* cpu: threads; device: pipeline depth */
  unsigned running;           /* dispatched, not complete; engine->lock */
  uint64_t completed, failed, retried_away, timeouts; /* engine->lock */
  int disabled;
  uint64_t cache_budget;      /* set by start(): device memory for blocks */
  uint64_t inflight_ns;       /* expected work dispatched here, not done */
  const acc_descriptor *sticky; /* accelerator of the last task dispatched */
  uint64_t sticky_since;      /* when it became that one */
  nam_pair pairs[NAM_MAX_ACCELS];
  nam_task *calib_tasks;      /* calibration tasks to run first */
  int calib_planned;
  nam_pipeline *pipeline;
  /* its threads waiting in nam_dispatch_next (engine->lock): a task
   * wakes one of them, not every thread of every platform */
  pthread_cond_t work;
  unsigned idle;
  void *impl;
};

struct nam_engine {
  pthread_mutex_t lock;
  pthread_cond_t work;        /* calibration went on, or the engine stops:
                                 nam_engine_wait_calibrated */
  int stopping;
  uint64_t next_seq;
  uint64_t next_anon;
  nam_engine_config cfg;      /* defaults filled in */
  nam_task_queue *queues;     /* one per accelerator */
  size_t n_queues;
  nam_platform platforms[NAM_MAX_PLATFORMS];
  size_t n_platforms;
  nam_block_cache *cache;
  nam_engine_counters counters;
  int calib_open;             /* every platform started: calibrate */
  nam_platform *calibrating;  /* runs a calibration task (one at a time,
                                 so that they do not slow each other) */
  pthread_t watchdog;
  int watchdog_started;
  pthread_cond_t watchdog_wake;
  nam_block_io *block_io;     /* block reads (block_io.c), NULL until used */
};

/* The engine's own cache namespace for anonymous inputs. */
#define NAM_ANON_APP UINT64_MAX

extern const nam_platform_ops nam_platform_cpu_ops;
extern const nam_platform_ops nam_platform_fpga_emu_ops;
#ifdef EMBER_HAVE_OPENCL
/* nam_opencl_add_platforms - one platform per OpenCL device found; adds
 * them with nam_engine_add_platform. Returns how many were added (0 when
 * the ICD loader finds none); reasons for devices skipped go to the
 * engine's event callback. */
unsigned nam_opencl_add_platforms(nam_engine *e, const nam_opencl_config *c);
extern const nam_platform_ops nam_platform_opencl_ops;
#endif

/* nam_engine_add_platform - add and start a platform (before the engine
 * serves tasks; called while creating it). arg is kept for start(). */
int nam_engine_add_platform(nam_engine *e, const nam_platform_ops *ops,
                            const char *name, unsigned workers,
                            const void *arg);

/* nam_engine_event - report through the config's event callback. */
void nam_engine_event(nam_engine *e, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Lock held. nam_wake: acc's tasks (NULL: any) may be dispatched now:
 * one waiting thread of each platform that can run them looks. nam_wake_all:
 * every thread looks, and nam_engine_wait_calibrated's waiters (platforms
 * start or stop, calibration goes on). */
void nam_wake(nam_engine *e, const acc_descriptor *acc);
void nam_wake_all(nam_engine *e);

/* nam_dispatch_inline - lock held: t, just admitted, runs on the
 * submitting thread instead of waiting for a worker, when nothing of its
 * accelerator is queued ahead of it, a cpu platform has a free worker and
 * would take it, and its expected time there is known and at most max_ns.
 * Returns that platform with t marked running on it (the caller then runs
 * it with nam_whole_task_run), or NULL. */
nam_platform *nam_dispatch_inline(nam_engine *e, nam_task *t,
                                  uint64_t max_ns);

/* nam_dispatch_next - block until a task this platform may run is queued,
 * mark it RUNNING and return it; NULL once the engine stops. Called by
 * platform workers (and the pipeline's stage-in thread). */
nam_task *nam_dispatch_next(nam_platform *p);

/* Lock held: the accelerator's queue; mark t done (callback after unlock);
 * could any platform still take t. */
nam_task_queue *nam_queue_of(nam_engine *e, const acc_descriptor *acc);
void nam_finish_locked(nam_engine *e, nam_task *t, int status,
                       const char *message);
int nam_platform_exists(nam_engine *e, const nam_task *t);

/* nam_platform_can_run - could q run t at all, load aside: not disabled,
 * not failed t before, supports its accelerator, of the required kind, and
 * the pair healthy (or due for a probe). Lock held. */
int nam_platform_can_run(const nam_engine *e, const nam_platform *q,
                         const nam_task *t, uint64_t now);

/* nam_expected_ns - how long t should take on p (model, calibrated or
 * measured), 0 when unknown. Engine lock held. */
uint64_t nam_expected_ns(nam_platform *p, const nam_task *t);

/* Calibration (calibrate.c): each platform without a timing model runs
 * small synthetic tasks of each accelerator (acc_descriptor.make_probe)
 * before user work, one at a time in the engine, and fits fixed_ns and
 * ns_per_unit of the pair from them; real tasks then refine the figures.
 *
 * nam_calibrate_start - the engine is up: calibration may begin (not
 * earlier: an OpenCL kernel build at start would slow the cpu's tasks).
 * nam_calibrate_next - lock held: p's next calibration task to run now
 * (planned at p's first call once the engine is up: the pairs some other
 * platform could run too), or NULL (none left, or another runs). */
void nam_calibrate_start(nam_engine *e);
nam_task *nam_calibrate_next(nam_platform *p);
/* nam_calibrate_done - a calibration task ended (lock not held): record
 * its time, fit the pair after its last one, free the task and out. */
void nam_calibrate_done(nam_platform *p, nam_task *t, int status,
                        const char *message, acc_output *out);
/* nam_calibrate_drop - lock held, the engine stops: free p's calibration
 * tasks not yet run. */
void nam_calibrate_drop(nam_platform *p);
/* nam_calibrate_learn - lock held: a real task of work units executed in
 * ns on the pair; refine its figures. */
void nam_calibrate_learn(nam_pair *pair, uint64_t work, uint64_t ns);
/* nam_pair_estimate - the pair's expected execute time of work units,
 * 0 when it has no figures yet. Lock held. */
uint64_t nam_pair_estimate(const nam_pair *pair, uint64_t work);

/* nam_task_complete - record the attempt's outcome: success, or a final
 * failure, calls the done callback; a device failure sends the task back
 * to its queue for another platform when one can take it. */
void nam_task_complete(nam_platform *p, nam_task *t, int status,
                       const char *message, acc_output *out);

/* A task's blocks on a platform (task_blocks.c). */
struct nam_task_io {
  acc_block inputs[NAM_MAX_INPUTS];        /* host view (cpu, fpga-emu) */
  void *dev_inputs[NAM_MAX_INPUTS];        /* the platform's handles */
  acc_mut_block outputs[ACC_MAX_OUTPUTS];
  void *dev_outputs[ACC_MAX_OUTPUTS];
  acc_mut_block states[ACC_MAX_STATES];
  void *dev_states[ACC_MAX_STATES];
  acc_mut_block scratch;
  void *dev_scratch;
};

/* nam_task_bind - pin t's inputs, out blocks, states and scratch on p (the
 * block cache makes the copies). 0, or an error with err set; on error
 * nothing stays pinned. */
int nam_task_bind(nam_platform *p, nam_task *t, char *err, size_t err_len);
/* nam_task_io_view - t's bound blocks as handles and host views. */
void nam_task_io_view(const nam_platform *p, const nam_task *t,
                      nam_task_io *io);
/* nam_task_run_ctx - the run context of a bound task. */
void nam_task_run_ctx(nam_task *t, const nam_task_io *io, acc_run_ctx *ctx);
/* How an attempt ended, for unbind. */
enum nam_run_outcome {
  NAM_RUN_OK,        /* out blocks become ready, states get a new version */
  NAM_RUN_FAILED,    /* outputs thrown away, its states lost */
  NAM_RUN_NOT_RUN,   /* outputs thrown away, states as they were */
};
/* nam_task_unbind - unpin what bind pinned (enum nam_run_outcome). */
void nam_task_unbind(nam_platform *p, nam_task *t, int outcome);
/* Lock held: claim t's state blocks for platform p (all or none). 0,
 * EMBER_EBUSY / EMBER_ENOPLATFORM (not now, not here), EMBER_ESTATE. */
int nam_task_claim_states(nam_engine *e, nam_task *t, const nam_platform *p);
void nam_task_unclaim_states(nam_engine *e, nam_task *t);
/* Whether a state block of t is lost; nam_task_lose_states marks them all
 * lost now (t failed on a pipeline where later tasks may hold them). */
int nam_task_states_lost(nam_engine *e, const nam_task *t);
void nam_task_lose_states(nam_engine *e, const nam_task *t);
/* Give back everything t holds in the block cache (end of the task). */
void nam_task_drop_refs(nam_engine *e, nam_task *t);

/* nam_task_exec_ns - how long t's attempt ran on p (not counting the wait
 * for a pipeline's execute thread): what its speed is learned from. */
uint64_t nam_task_exec_ns(const nam_platform *p, const nam_task *t,
                          uint64_t now);

/* nam_whole_task_run - a whole-task platform's worker runs t: bind its
 * blocks, ops->run, unbind, complete (platform_cpu.c). */
void nam_whole_task_run(nam_platform *p, nam_task *t);

/* Pipeline for device platforms (pipeline.c). Stop joins its threads; free
 * comes after the watchdog stopped, since the watchdog reads the pipeline
 * (nam_pipeline_check) until then. */
int nam_pipeline_start(nam_platform *p);
void nam_pipeline_stop(nam_platform *p);
void nam_pipeline_free(nam_platform *p);
/* Watchdog's check: a task executing past its deadline is marked timed out
 * and the platform asked to abort it. Returns the running task's deadline
 * (0: none to watch). */
uint64_t nam_pipeline_check(nam_platform *p, uint64_t now);

/* Block reads (block_io.c): serve what is queued, then stop the thread. */
void nam_block_io_stop(nam_engine *e);

/* Watchdog (watchdog.c): catches device tasks past their deadline. */
int nam_watchdog_start(nam_engine *e);
void nam_watchdog_stop(nam_engine *e);

#endif
