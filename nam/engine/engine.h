/*
 * engine.h - the NAM engine: per-accelerator task queues, a dispatcher that
 * hands tasks to platforms, the platforms themselves (cpu, opencl,
 * fpga-emu), the block cache, the device pipeline and the task life cycle.
 * A library: ember-nam runs it behind its sockets and libember runs it
 * in-process (embedded mode, CPU fallback). It never logs; it reports
 * through the config's event callback.
 *
 * Life cycle: submit -> QUEUED (in its accelerator's task queue) -> RUNNING
 * (taken by a platform) -> DONE (done callback called exactly once). A task
 * that fails on a device platform goes back to QUEUED for another platform
 * (completion.c). A queued task that is canceled goes straight to DONE with
 * ECANCELED.
 *
 * Threads: every function may be called from any thread. Done callbacks run
 * on a platform worker thread, or on the thread that canceled a queued task,
 * or on the thread calling nam_engine_destroy(), or inside
 * nam_engine_submit() for a task it runs there (inline_max_ns); they must
 * not block.
 */
#ifndef EMBER_NAM_ENGINE_H
#define EMBER_NAM_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "accel.h"

#define NAM_MAX_INPUTS 16 /* input blocks per task */

typedef struct nam_engine nam_engine;
typedef struct nam_task nam_task;

/* Scheduler 1 (apps -> task queues): the order within one priority. */
enum nam_scheduler {
  NAM_SCHED_FCFS,  /* first come, first served */
  NAM_SCHED_FAIR,  /* round robin between apps */
};

/* The opencl platform: every device the ICD loader finds. */
typedef struct nam_opencl_config {
  int enabled;
  uint64_t max_memory;   /* cap on each device's block budget; 0: none */
  const char *cache_dir; /* built kernel binaries; NULL: no cache */
} nam_opencl_config;

#define NAM_FPGA_MAX_BITSTREAMS 8

/* One accelerator's timing on a board, overriding its acc_fpga_model. */
typedef struct nam_fpga_timing {
  char accelerator[32];
  double units_per_cycle;
  double clock_mhz;
} nam_fpga_timing;

/* One emulated FPGA board (fpga_emu_board.h has the model). */
typedef struct nam_fpga_emu_config {
  char name[32];           /* platform name, e.g. "fpga0" */
  uint64_t memory;         /* device memory in bytes (the block budget) */
  double pcie_gbps;        /* host <-> board bandwidth, GB/s (1e9 B/s) */
  double memory_gbps;      /* the board's own memory, GB/s: the
                              roofline's memory bound */
  uint64_t reprogram_ms;   /* time to load another bitstream */
  char bitstreams[NAM_FPGA_MAX_BITSTREAMS][32]; /* accelerators it can load */
  unsigned n_bitstreams;
  nam_fpga_timing timing[NAM_FPGA_MAX_BITSTREAMS];
  unsigned n_timing;
  double fail_rate;        /* 0..1: a task fails (EPLATFORM) */
  double hang_rate;        /* 0..1: a task hangs until aborted */
  uint64_t seed;           /* fault injection's random sequence */
  int virtual_clock;       /* 0: real time; 1: simulated time */
} nam_fpga_emu_config;

/* Fills what a board gets by default (the Blaze paper's board, section
 * 6.1; see fpga_emu_board.h): name and bitstreams are left empty. */
void nam_fpga_emu_config_defaults(nam_fpga_emu_config *c);

/* Something the engine reports (a pair disabled, re-enabled, a platform
 * that did not start). The engine itself never logs; level is a LOG_*
 * value of log.h. Called from any engine thread, without engine locks. */
typedef void (*nam_engine_event_fn)(void *user, int level, const char *msg);

typedef struct nam_engine_config {
  unsigned cpu_workers;    /* 0: one per online core */
  int no_cpu;              /* 1: no cpu platform (tests, device-only nodes) */
  unsigned queue_capacity; /* tasks per accelerator queue; 0: 4096 */
  int scheduler;           /* enum nam_scheduler */
  unsigned pipeline_depth; /* tasks in flight per device platform; 0: 3 */
  unsigned fail_threshold; /* consecutive failures that disable an
                              (accelerator, platform) pair; 0: 3 */
  uint64_t probe_ms;       /* a disabled pair is probed after this; 0: 30 s */
  uint64_t task_timeout_ms;/* a device task running longer has hung; 0:
                              timeout_factor x its expected time */
  unsigned timeout_factor; /* 0: 10 */
  uint64_t reprogram_bound_ms; /* an FPGA keeps its bitstream while another
                              accelerator's oldest task has waited less
                              than this; 0 with sticky off = FCFS */
  int sticky_off;          /* 1: naive dispatch (for comparison) */
  nam_opencl_config opencl;
  const nam_fpga_emu_config *fpga; /* boards */
  unsigned n_fpga;
  /* the accelerators served; NULL: the built-in registry */
  const acc_descriptor *const *accelerators;
  size_t n_accelerators;
  /* with accel_cache_set: the bytes each accelerator may keep between
   * tasks (acc_descriptor.cache_budget, e.g. cnn's built CPU stages);
   * 0 keeps none. Without: each accelerator's default. An app's things
   * go when nam_block_cache_drop_app drops its blocks (app_gone). */
  int accel_cache_set;
  uint64_t accel_cache_bytes;
  nam_engine_event_fn event;
  void *event_user;
} nam_engine_config;

typedef void (*nam_task_done_fn)(nam_task *task, void *user);

/* What to run. The engine validates params and inputs with the
 * accelerator's validate() (the one place a task is checked, embedded or
 * through ember-nam) and copies the arrays (not the input bytes: they must
 * stay valid until the done callback; params need not).
 * With block_ids, input i is block block_ids[i] of app in the engine's
 * block cache (nam_engine_block_cache) and its device copies are reused
 * across tasks; without (or for an id the cache does not know at submit),
 * device platforms copy the given bytes for this task only. An input that is an earlier task's out block may have data NULL
 * (its bytes live on a device). output_ids name the out blocks the task
 * creates in app's namespace (ids not in use), state_ids the app's state
 * blocks it updates (put with EMBER_BLOCK_STATE); both need block_ids'
 * namespace, app. */
typedef struct nam_task_spec {
  const acc_descriptor *acc;
  const void *params;          /* the accelerator's Params message */
  size_t params_len;
  const acc_block *inputs;
  size_t n_inputs;
  uint64_t app;                /* who submits: cache namespace, fairness */
  const uint64_t *block_ids;   /* NULL, or n_inputs ids in app's namespace */
  int priority;                /* higher first; FIFO within a priority */
  const char *platform_kind;   /* required kind or platform name; NULL: any */
  const char *prefer_kind;     /* preferred kind; NULL: load decides */
  const uint64_t *output_ids;  /* n_outputs ids (ACC_MAX_OUTPUTS at most) */
  size_t n_outputs;
  const uint64_t *state_ids;   /* n_states ids (ACC_MAX_STATES at most) */
  size_t n_states;
  nam_task_done_fn done;
  void *user;
  char *err;                   /* NULL, or where submit says why it failed */
  size_t err_len;
  /* NULL, or called (with user, on the submitting thread, inside submit)
   * once plan() declared the task's blocks and before any of them is
   * made: out_bytes, the sum of its out blocks, and scratch_bytes are
   * what the task will make the engine hold. A nonzero return refuses the
   * task with that code, its reason in why (ember-nam counts these bytes
   * against its limits here). */
  int (*admit)(void *user, uint64_t out_bytes, uint64_t scratch_bytes,
               char *why, size_t why_len);
  /* 0, or: the submitting thread may run the task itself, inside submit
   * (done callback included), when nothing of its accelerator waits ahead
   * of it, a cpu worker is free and would take it, and its calibrated
   * time there is at most this many ns: for callers that wait for one
   * small task at a time, whose hand-off to a worker and back would cost
   * more than the task. */
  uint64_t inline_max_ns;
  int *ran_inline;  /* NULL, or set to whether it ran inside submit */
} nam_task_spec;

enum nam_task_state { NAM_TASK_QUEUED, NAM_TASK_RUNNING, NAM_TASK_DONE };

/* Timestamps in CLOCK_MONOTONIC nanoseconds. */
typedef struct nam_task_times {
  /* started: dispatched, or on a device pipeline when the task ahead
   * finished if that was later (the device was its from then) */
  uint64_t queued, started, finished;
  /* of the last attempt: when a platform took it (started as it was, never
   * moved), and on device platforms stage-in done and execute done */
  uint64_t dispatched, staged, executed;
  unsigned attempts;       /* platforms tried (1 unless retried) */
} nam_task_times;

int nam_engine_create(const nam_engine_config *config, nam_engine **out);

/* Cancel queued tasks, wait for running ones, stop the platforms, free.
 * Tasks not yet freed by their owners stay valid. NULL is a no-op. */
void nam_engine_destroy(nam_engine *engine);

/* nam_engine_submit - queue a task. Returns 0 and the task in *out (freed
 * by the caller with nam_task_free() after its done callback), or
 * EMBER_ENOPLATFORM when no platform can run it, EMBER_EBUSY when its queue
 * is full, EMBER_ESHUTDOWN while the engine stops, EMBER_ENOTFOUND for an
 * unknown input or state id, EMBER_EINVAL for an output id in use or a
 * block of the wrong kind, EMBER_EPARAM when the accelerator's plan()
 * refuses the out and state blocks, EMBER_ESTATE for a lost state or
 * input, what the accelerator's validate() returned (its reason as
 * "NAME: why"), or what spec->admit returned; spec->err says which.
 *
 * State: a task that names a state block runs on the platform that holds
 * it, after the tasks dispatched before it that name it too. If its
 * attempt fails, hangs or is abandoned, or the platform is lost or
 * disabled meanwhile, the task completes with EMBER_ESTATE (never retried
 * elsewhere: the state may be half written) and the block is lost until
 * nam_engine_block_op(RESTORE) takes it back to its last synced version.
 * A task without state is retried on another platform as before; its out
 * blocks are written wherever it finally runs. */
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
const char *nam_task_platform_kind(const nam_task *task);
const nam_task_times *nam_task_get_times(const nam_task *task);
/* nam_task_take_output - move the output out of the task (caller frees
 * out->data with free()). */
void nam_task_take_output(nam_task *task, acc_output *out);
/* nam_task_output_size - the size of the task's out block i (its plan). */
size_t nam_task_output_size(const nam_task *task, size_t i);
/* nam_task_cost - the task's declared cost (acc_cost, from plan()). */
const acc_cost *nam_task_cost(const nam_task *task);

/* ---- reading, syncing and restoring blocks --------------------------------
 * Blocks of an app's namespace in the engine's cache, read on the engine's
 * block thread (a device read may block), never on the caller's. */
enum nam_block_op_kind {
  NAM_BLOCK_READ,     /* the block's current bytes */
  NAM_BLOCK_SYNC,     /* keep a host copy of a state's current version */
  NAM_BLOCK_RESTORE,  /* a state goes back to its last synced version */
};

typedef struct nam_block_op_result {
  int status;          /* 0 or EMBER_E* (ESTATE: lost) */
  uint8_t *bytes;      /* READ: malloc'd, the callback's to free */
  size_t size;
  uint64_t version;    /* state: its version now */
} nam_block_op_result;

typedef void (*nam_block_op_fn)(const nam_block_op_result *r, void *user);

/* nam_engine_block_op - queue op on app's block id; done is called once,
 * on the engine's block thread (or, for EMBER_ENOMEM/ESHUTDOWN, not at
 * all: the return code says so). Returns 0, EMBER_ENOMEM, EMBER_ESHUTDOWN. */
int nam_engine_block_op(nam_engine *engine, int op, uint64_t app,
                        uint64_t id, nam_block_op_fn done, void *user);

/* nam_task_free - free a task whose done callback has run. NULL: no-op. */
void nam_task_free(nam_task *task);

/* nam_engine_set_fault_rates - the fault injection of every fpga-emu
 * board, changed while they run (ember-nam's SIGHUP). Returns 0, or
 * EMBER_EINVAL for rates outside [0, 1] or summing over 1. */
int nam_engine_set_fault_rates(nam_engine *engine, double fail_rate,
                               double hang_rate);

/* nam_engine_wait_calibrated - wait until every platform has run its
 * calibration tasks (see nam_pair_status.speed), at most timeout_ms.
 * Returns 0, EMBER_ETIMEDOUT, or EMBER_ESHUTDOWN while the engine stops.
 * Tasks need not wait for it: calibration goes on beside them. */
int nam_engine_wait_calibrated(nam_engine *engine, uint64_t timeout_ms);

/* Introspection (snapshots). */
typedef struct nam_pair_status {  /* one accelerator on one platform */
  const char *accelerator;
  const char *state;      /* "ready", "disabled", "probing" */
  uint64_t completed, errors, timeouts;
  unsigned consecutive_failures;
  uint64_t disabled_count;  /* times it was disabled */
  /* what dispatch expects an execute to take: fixed_ns + work *
   * ns_per_unit ("model": the platform's timing model instead) */
  const char *speed;      /* "model", "calibrating", "calibrated",
                             "measured" (real tasks only), "unknown" */
  double fixed_ns, ns_per_unit;
  uint64_t measured;      /* real tasks that refined the figures */
} nam_pair_status;

#define NAM_MAX_PAIRS 8

typedef struct nam_platform_status {
  char name[64];
  char kind[32];
  char device[96];        /* the device's own name ("" for cpu) */
  const char *state;      /* "ready", "disabled" */
  unsigned workers, queued, running;
  uint64_t completed, failed, retried_away, timeouts;
  char loaded[32];        /* bitstream loaded (fpga-emu), "" otherwise */
  uint64_t reprograms;
  uint64_t virtual_ns;    /* fpga-emu with a virtual clock: its time now */
  /* block cache on this platform (zero for cpu) */
  uint64_t cache_budget, cache_resident, cache_pinned, cache_blocks;
  uint64_t cache_hits, cache_misses, cache_evictions;
  uint64_t bytes_to, bytes_from;
  nam_pair_status pairs[NAM_MAX_PAIRS];
  unsigned n_pairs;
} nam_platform_status;

typedef struct nam_engine_counters {
  uint64_t submitted, completed, failed, canceled;
  uint64_t retries;        /* attempts moved to another platform */
  uint64_t pairs_disabled; /* times a pair was disabled */
  unsigned queued, running;
} nam_engine_counters;

/* The engine's block cache: ember-nam puts its clients' blocks here (app =
 * the connection) and drops them on release and disconnect. */
struct nam_block_cache *nam_engine_block_cache(nam_engine *engine);

size_t nam_engine_platforms(nam_engine *engine, nam_platform_status *out,
                            size_t max);
/* Tasks waiting in the accelerator's task queue. */
unsigned nam_engine_queue_length(nam_engine *engine, const acc_descriptor *acc);
/* Comma-separated names of the platforms that can run acc. */
void nam_engine_platforms_for(nam_engine *engine, const acc_descriptor *acc,
                              char *buf, size_t len);
void nam_engine_get_counters(nam_engine *engine, nam_engine_counters *out);
/* The accelerators this engine serves (its task queues), in order. */
size_t nam_engine_accelerators(nam_engine *engine, const acc_descriptor **out,
                               size_t max);

#endif
