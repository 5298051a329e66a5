/*
 * accel.h - the descriptor every accelerator provides (ABI version 3).
 *
 * An accelerator is a named function a client can call ("sw", later "plf",
 * "cnn"). Its descriptor is a const table: the engine, the daemon and the
 * client's CPU fallback only ever reach an accelerator through it. Built-ins
 * are listed in registry.c; plugins load the same struct from shared
 * objects, so abi_version comes first and a loader refuses any other value.
 *
 * A task's blocks, by role:
 *   in       read-only bytes the app handed over, or an earlier task's out
 *            block. validate() sees an input's host bytes when the host
 *            has them; an out block that still lives only on a device has
 *            data NULL there (its size is given), so an accelerator that
 *            must read its inputs at validate time refuses it.
 *   out      created by the task (sizes declared by plan()); it stays on the
 *            platform that ran the task, where the app's next task can read
 *            it as an input without the bytes crossing the socket.
 *   state    app-owned, mutable, updated in place across tasks on the one
 *            platform that holds it (BEAGLE partials, CNN weights). A task
 *            with state runs where the state lives; tasks naming the same
 *            state run one at a time, in the order dispatched.
 *   scratch  bytes the task needs only while it runs (plan() declares how
 *            many); allocated by the platform, freed after the task.
 * Device implementations find the out, state and scratch blocks in the run
 * context (acc_run_ctx); the result message (acc_output) still carries the
 * task's small answer back to the client.
 *
 * Contract: validate() decodes and checks everything (parameters and input
 * blocks) and fails with a reason; plan() checks the state blocks and the
 * number of outputs and declares sizes and cost; run_cpu() is only called
 * on what both accepted, so it fails only on resource exhaustion or
 * cancellation. A run that fails may have written part of its out and
 * state blocks: the engine never trusts them afterwards (EMBER_ESTATE).
 *
 * Plugins (the accelerator SDK: this header, ember/ember_errors.h and
 * `pkg-config ember-accelerator`). A plugin is one shared object per
 * accelerator, NAME.so in ember-nam's plugin_dir, that exports
 *     const acc_descriptor *ember_accelerator(void);
 * (ACC_PLUGIN_SYMBOL) returning its descriptor, which must stay valid while
 * the process runs. ember-nam loads it with dlopen(RTLD_NOW | RTLD_LOCAL) at
 * start-up and refuses it, logged and counted, when the file or directory
 * is writable by anyone but root or the daemon's user (or is a symbolic
 * link), when abi_version is not one of ACC_ABI_OLDEST .. ACC_ABI_VERSION
 * (each version only appends to the structs, as SQLite's io_methods do:
 * ember reads a descriptor's fields of its version and no further, and a
 * plugin built for an older version never reads what acc_run_ctx
 * gained), when the name is a
 * built-in's or another plugin's, when the symbol is missing, or when
 * name, validate, run_cpu, release or work is missing. It links to
 * libprotobuf-c itself if it uses protobuf; nothing of ember's is linked in.
 * Example: accelerators/example/.
 *
 * A plugin runs inside ember-nam's process, with its privileges, on its
 * worker threads: nothing isolates it. A plugin that crashes (in validate,
 * on any input) takes the daemon down with every task in flight; systemd
 * restarts it (Restart=on-failure in ember-nam.service) and clients
 * reconnect or fall back to their CPU. Only install plugins you trust as
 * much as ember-nam itself.
 */
#ifndef EMBER_ACCEL_H
#define EMBER_ACCEL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#define ACC_ABI_VERSION 3
#define ACC_ABI_OLDEST 2   /* the oldest version ember still loads */

#define ACC_MAX_OUTPUTS 8 /* out blocks per task */
#define ACC_MAX_STATES 8  /* state blocks per task */

/* An input block as the accelerator sees it: read-only bytes (data NULL at
 * validate when the block lives only on a device, see above). */
typedef struct acc_block {
  const uint8_t *data;
  size_t size;
} acc_block;

/* A writable block (out, state, scratch) in host memory: the cpu platform
 * and fpga-emu boards run run_cpu() on these. */
typedef struct acc_mut_block {
  uint8_t *data;
  size_t size;
} acc_mut_block;

/* What a prepared task costs on a device: the bytes its kernel reads and
 * writes in device memory, and its operations (flops, or the
 * accelerator's own unit: sw counts cell updates). The fpga-emu timing
 * model is a roofline over these; the dispatcher's expected times use the
 * same figures. */
typedef struct acc_cost {
  uint64_t bytes_read, bytes_written;
  uint64_t ops;
} acc_cost;

/* The blocks a task names besides its inputs, as plan() sees them. */
typedef struct acc_task_shape {
  size_t n_outputs;                  /* out blocks the task asks for */
  const size_t *state_sizes;         /* n_states sizes, in task order */
  size_t n_states;
} acc_task_shape;

/* What plan() declares for a prepared task. */
typedef struct acc_task_plan {
  size_t output_sizes[ACC_MAX_OUTPUTS]; /* bytes of each out block */
  size_t scratch_size;               /* bytes of scratch; 0: none */
  acc_cost cost;
} acc_task_plan;

/* What run_cpu produces: a malloc'd buffer holding the accelerator's packed
 * Result message. The caller frees data with free(). */
typedef struct acc_output {
  uint8_t *data;
  size_t size;
} acc_output;

/* Per-run context. cancel may be NULL; when it reads nonzero the run should
 * stop soon and return EMBER_ECANCELED. The task's writable blocks, in the
 * order the task named them (and the sizes plan() declared):
 *   run_cpu:      outputs, states and scratch (host memory);
 *   opencl->run:  dev_outputs, dev_states, dev_scratch (cl_mem handles;
 *                 the states' uploads are among the run's wait events).
 * A context with none of these (zeroed) is a task that has none. */
typedef struct acc_run_ctx {
  const atomic_int *cancel;
  acc_mut_block *outputs;
  size_t n_outputs;
  acc_mut_block *states;
  size_t n_states;
  acc_mut_block scratch;
  void *const *dev_outputs;
  void *const *dev_states;
  void *dev_scratch;
  /* ABI 3. The app the task runs for: ember-nam's id of the client
   * connection, never reused while the process runs (0: none, e.g. a
   * calibration task or a direct call). What an accelerator keeps between
   * tasks on an app's behalf is that app's, to drop at app_gone. */
  uint64_t app;
} acc_run_ctx;

/* Calibration task sizes: the time of a small one is mostly a launch's
 * fixed cost; a large one (a few ms on one CPU core) is mostly per work
 * unit. Two sizes fit time = fixed + work * per_unit. */
enum { ACC_PROBE_SMALL, ACC_PROBE_LARGE, ACC_PROBE_SIZES };

#define ACC_PROBE_MAX_INPUTS 4

typedef struct acc_probe {
  uint8_t *params;                      /* packed parameters */
  size_t params_len;
  acc_block inputs[ACC_PROBE_MAX_INPUTS]; /* data malloc'd */
  size_t n_inputs;
} acc_probe;

typedef struct acc_descriptor {
  unsigned abi_version;                 /* ACC_ABI_VERSION */
  const char *name;                     /* "sw" */
  unsigned version;                     /* the accelerator's own version */
  const char *summary;                  /* one line for listings */
  const ProtobufCMessageDescriptor *params_descriptor;
  const ProtobufCMessageDescriptor *result_descriptor;

  /* Decode params and check them and the inputs. On success stores the
   * accelerator's prepared state in *prepared (freed by release()) and
   * returns 0; otherwise writes a reason into err and returns a negative
   * EMBER_E* (EPARAM for parameters, EFORMAT for malformed blocks).
   * Thread-safe; inputs must stay valid until release(). */
  int (*validate)(const uint8_t *params, size_t params_len,
                  const acc_block *inputs, size_t n_inputs, void **prepared,
                  char *err, size_t err_len);

  /* The CPU implementation (vectorised; one call runs on one thread). */
  int (*run_cpu)(void *prepared, const acc_block *inputs, size_t n_inputs,
                 const acc_run_ctx *ctx, acc_output *out, char *err,
                 size_t err_len);

  /* Free what validate() prepared. release(NULL) is a no-op. */
  void (*release)(void *prepared);

  /* Amount of work in a prepared task, in the accelerator's own unit
   * (sw: DP cell updates); used for reports. Equals plan's cost.ops. */
  uint64_t (*work)(const void *prepared);
  const char *work_unit;                /* "cells" */

  /* Device implementations; NULL where the accelerator has none. */
  const struct acc_opencl_ops *opencl;  /* the opencl platform runs it */
  const struct acc_fpga_model *fpga;    /* fpga-emu boards can model it */

  /* ABI 2. Check the task's out and state blocks against a prepared task
   * and declare out sizes, scratch and cost into *plan (zeroed by the
   * caller). Returns 0, or EMBER_EPARAM with a reason (a state of the
   * wrong size, outputs the accelerator does not make). NULL: the
   * accelerator takes no out or state blocks and no scratch, and its cost
   * is work() operations over its input bytes. Thread-safe. */
  int (*plan)(const void *prepared, const acc_task_shape *shape,
              acc_task_plan *plan, char *err, size_t err_len);

  /* A synthetic calibration task (may be NULL): the engine runs it on each
   * platform it has no timing model for, to learn the platform's speed
   * before it gives it real work. size is ACC_PROBE_SMALL or
   * ACC_PROBE_LARGE. Fills *probe (params and each inputs[i].data are
   * malloc'd, freed by the caller with free()) with a task validate()
   * accepts. Returns 0, or a negative EMBER_E*. Thread-safe. */
  int (*make_probe)(unsigned size, acc_probe *probe);

  /* ABI 3 (ember reads these only from a descriptor of version 3 on).
   * Both may be NULL; both are thread-safe and quick. */
  /* app (acc_run_ctx.app) has left (its connection closed): drop what the
   * accelerator keeps for it between tasks now, and what its tasks still
   * running would keep when they end. */
  void (*app_gone)(uint64_t app);
  /* The bytes the accelerator may keep between tasks for reuse (built
   * stages, caches), from ember-nam's accelerator_cache; called before
   * the engine runs tasks, again when it changes. */
  void (*cache_budget)(uint64_t bytes);
} acc_descriptor;

/* acc_app_gone, acc_cache_budget (ember's own code, not part of the SDK) -
 * call acc's app_gone or cache_budget when its version has them and it
 * sets them; nothing otherwise. */
static inline void acc_app_gone(const acc_descriptor *acc, uint64_t app) {
  if (acc->abi_version >= 3 && acc->app_gone) acc->app_gone(app);
}

static inline void acc_cache_budget(const acc_descriptor *acc,
                                    uint64_t bytes) {
  if (acc->abi_version >= 3 && acc->cache_budget) acc->cache_budget(bytes);
}

/*
 * The OpenCL implementation of an accelerator. OpenCL handles travel as
 * void * so that this header needs no CL headers (cl_context, cl_device_id,
 * cl_command_queue, cl_mem, cl_event are all pointers).
 */
typedef struct acc_opencl_ops {
  /* Build the accelerator's program and kernels for one device of ctx; the
   * built binary may be cached under cache_dir (NULL: no cache). */
  int (*create)(void *cl_context, void *cl_device, const char *cache_dir,
                void **state, char *err, size_t err_len);
  void (*destroy)(void *state);
  /* Run a validated task on queue (of state's device). dev_inputs[i] is a
   * cl_mem holding exactly inputs[i]'s bytes; its upload may still be under
   * way on another queue: wait_events[0 .. n_wait) complete when all are
   * there. The host bytes (inputs) stay readable too. Blocks until the
   * result is packed into out (as run_cpu would pack it). Not thread-safe
   * for one state. */
  int (*run)(void *state, void *cl_queue, void *prepared,
             const acc_block *inputs, void *const *dev_inputs,
             size_t n_inputs, void *const *wait_events, unsigned n_wait,
             const acc_run_ctx *ctx, acc_output *out, char *err,
             size_t err_len);
} acc_opencl_ops;

/*
 * How long the accelerator's kernel takes on an FPGA, for the fpga-emu
 * platform. A roofline: fixed_ns + max(bytes / (the board's memory
 * bandwidth * memory_efficiency), ops / (units_per_cycle * clock_mhz *
 * 1e6)) seconds, bytes and
 * ops being the task's declared cost (acc_cost), so a memory-bound kernel
 * (the PLF at 2.03 flop/byte) and compute-bound ones (sw, CNN) share one
 * model. Boards may override the two rates in their config and set their
 * memory bandwidth. source says where the defaults come from.
 */
typedef struct acc_fpga_model {
  double units_per_cycle;   /* sw: processing elements, one cell each */
  double clock_mhz;
  uint64_t fixed_ns;        /* per-task launch and drain */
  const char *source;
  double memory_efficiency; /* fraction of the board's bandwidth the kernel
                               streams at (0: all of it) */
} acc_fpga_model;

/* acc_plan_task (ember's own code, not part of the SDK) - run acc->plan
 * (or its default, see there) for a prepared task: zeroes *plan, then
 * fills it. Returns 0 or EMBER_EPARAM
 * with the reason in err. input_bytes: the sum of the input sizes (the
 * default cost reads them once). */
int acc_plan_task(const acc_descriptor *acc, const void *prepared,
                  const acc_task_shape *shape, uint64_t input_bytes,
                  acc_task_plan *plan, char *err, size_t err_len);

/* The one symbol a plugin exports (see the top of this file). */
#define ACC_PLUGIN_SYMBOL "ember_accelerator"
const acc_descriptor *ember_accelerator(void);

/* Built-in accelerators (ember's own code, not part of the SDK). */
size_t acc_registry_count(void);
const acc_descriptor *acc_registry_get(size_t index);
/* acc_registry_find: the descriptor named name, or NULL. */
const acc_descriptor *acc_registry_find(const char *name);

#endif
