/*
 * accel.h - the descriptor every accelerator provides (ABI version 1).
 *
 * An accelerator is a named function a client can call ("sw", later "plf",
 * "cnn"). Its descriptor is a const table: the engine, the daemon and the
 * client's CPU fallback only ever reach an accelerator through it. Built-ins
 * are listed in registry.c; plugins will load the same struct from shared
 * objects, so fields are only ever appended and abi_version comes first.
 *
 * Contract: validate() decodes and checks everything (parameters and input
 * blocks) and fails with a reason; run_cpu() is only called on what validate
 * accepted, so it fails only on resource exhaustion or cancellation.
 */
#ifndef EMBER_ACCEL_H
#define EMBER_ACCEL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#define ACC_ABI_VERSION 1

/* An input block as the accelerator sees it: read-only bytes. */
typedef struct acc_block {
  const uint8_t *data;
  size_t size;
} acc_block;

/* What run_cpu produces: a malloc'd buffer holding the accelerator's packed
 * Result message. The caller frees data with free(). */
typedef struct acc_output {
  uint8_t *data;
  size_t size;
} acc_output;

/* Per-run context. cancel may be NULL; when it reads nonzero the run should
 * stop soon and return EMBER_ECANCELED. */
typedef struct acc_run_ctx {
  const atomic_int *cancel;
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
   * (sw: DP cell updates); used for reports and timing models. */
  uint64_t (*work)(const void *prepared);
  const char *work_unit;                /* "cells" */

  /* Device implementations; NULL where the accelerator has none. */
  const struct acc_opencl_ops *opencl;  /* the opencl platform runs it */
  const struct acc_fpga_model *fpga;    /* fpga-emu boards can model it */

  /* A synthetic calibration task (may be NULL): the engine runs it on each
   * platform it has no timing model for, to learn the platform's speed
   * before it gives it real work. size is ACC_PROBE_SMALL or
   * ACC_PROBE_LARGE. Fills *probe (params and each inputs[i].data are
   * malloc'd, freed by the caller with free()) with a task validate()
   * accepts. Returns 0, or a negative EMBER_E*. Thread-safe. */
  int (*make_probe)(unsigned size, acc_probe *probe);
} acc_descriptor;

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
 * platform: fixed_ns + work / (units_per_cycle * clock_mhz * 1e6) seconds,
 * work being descriptor->work(prepared). Boards may override the two rates
 * in their config. source says where the defaults come from.
 */
typedef struct acc_fpga_model {
  double units_per_cycle;   /* sw: processing elements, one cell each */
  double clock_mhz;
  uint64_t fixed_ns;        /* per-task launch and drain */
  const char *source;
} acc_fpga_model;

/* Built-in accelerators. */
size_t acc_registry_count(void);
const acc_descriptor *acc_registry_get(size_t index);
/* acc_registry_find: the descriptor named name, or NULL. */
const acc_descriptor *acc_registry_find(const char *name);

#endif
