/*
 * plf_opencl.h - the "plf" accelerator on an OpenCL 1.2 device (plf.cl):
 * a checked task (plf_task.h) run on its state block in one device
 * buffer, operation by operation, with the results plf_exec.c gives on the
 * CPU (to rounding: the device's exp and log, and FMA contraction).
 *
 * One handle holds the programs built for one device: single precision
 * always, double precision when the device has cl_khr_fp64 (a double
 * instance on a device without it is refused with EMBER_ENOPLATFORM).
 * Programs are built from the embedded source at creation; with a cache
 * directory the built binary is kept there (BLAKE2b of the device and of
 * the source and options name the file; a damaged or rejected file is
 * rebuilt), as sw does.
 *
 * Built only when OpenCL is found (EMBER_HAVE_OPENCL).
 */
#ifndef EMBER_ACC_PLF_OPENCL_H
#define EMBER_ACC_PLF_OPENCL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <stdbool.h>
#include <stddef.h>

#include "accel.h"

typedef struct plf_ocl plf_ocl;

/* plf_ocl_create - build the plf programs and kernels for dev in ctx (the
 * caller keeps both; they must outlive the handle). cache_dir may be NULL.
 * use_fp64: 1 builds the double-precision program and reads model values
 * in double when the device has cl_khr_fp64; 0 never uses fp64 (single
 * precision only, model values converted in software: for tests, and
 * what a device without fp64 gets anyway). Returns 0, EMBER_EINVAL,
 * EMBER_ENOMEM or EMBER_EPLATFORM (a build failed, the log's start in
 * err). */
int plf_ocl_create(cl_context ctx, cl_device_id dev, const char *cache_dir,
                   int use_fp64, plf_ocl **out, char *err, size_t err_len);

/* plf_ocl_destroy - release what create made; NULL is a no-op. */
void plf_ocl_destroy(plf_ocl *o);

/* plf_ocl_has_double - true when o runs double-precision instances. */
bool plf_ocl_has_double(const plf_ocl *o);

/* plf_ocl_loaded_from_cache - true when every program came from the
 * cache directory (none was rebuilt). */
bool plf_ocl_loaded_from_cache(const plf_ocl *o);

/* acc_plf_opencl_ops - the plf descriptor's OpenCL implementation
 * (acc_plf_descriptor.opencl). create: plf_ocl_create with fp64 when the
 * device has it. run: a task prepared by acc_plf_descriptor.validate on
 * ctx->dev_states[0] (the instance), or, for a task without a state, on
 * ctx->dev_scratch zero-filled first; the task's input slices come from
 * dev_inputs (or the host bytes when a handle is NULL), after
 * wait_events. The operations are queued in order on the queue (in order
 * or out of order: then separated by barriers); the run blocks once at
 * the start to read the instance's flags, tip kinds and partition ranges
 * back, and at the end for the answers (log-likelihoods summed on the
 * host, in double, in the CPU's order). ctx->cancel is read between
 * operations. Returns 0, EMBER_EINVAL, EMBER_ENOMEM, EMBER_ECANCELED,
 * EMBER_ENOPLATFORM (double precision without fp64), EMBER_EFORMAT (an
 * input neither on the device nor in host memory), EMBER_EPLATFORM (an
 * OpenCL call failed) or EMBER_EINTERNAL, with the reason in err. One
 * handle runs one task at a time. */
extern const acc_opencl_ops acc_plf_opencl_ops;

#endif
