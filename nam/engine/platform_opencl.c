/*
 * platform_opencl.c - the opencl platform: one per device the OpenCL ICD
 * loader finds, driven by the engine's pipeline (pipeline.c).
 *
 *   start      a context and two in-order queues on the device: transfer
 *              (block uploads, from the stage-in thread) and compute (the
 *              accelerators' kernels, from the execute thread); then each
 *              served accelerator with an OpenCL implementation
 *              (acc->opencl) builds its program. A build that fails
 *              disables that accelerator on this device only.
 *   stage-in   the block cache's copies are device buffers: alloc creates
 *              one, upload writes it on the transfer queue without
 *              blocking and keeps the write's event in the handle. On a
 *              device that shares host memory (CL_DEVICE_HOST_UNIFIED_MEMORY,
 *              pocl's CPU device) a read-only block is wrapped instead
 *              (CL_MEM_USE_HOST_PTR): no copy, no transfer to wait for.
 *              read (out and state blocks back to the host) waits for
 *              what was queued on both queues before it.
 *   execute    the accelerator's run() on the compute queue, given the
 *              buffers and the write events: its first kernel waits for
 *              the uploads, so task k+1's transfers overlap task k's
 *              kernels with no thread blocked on them. run() reads the
 *              output back (no stage_out).
 *
 * Host bytes stay valid while a copy is being written: the task's pins
 * hold them, and a copy is freed (free waits for its write) before its
 * block's host bytes are (block_cache.c frees copies first).
 *
 * A kernel cannot be preempted: no abort. A run() reads the task's cancel
 * flag between its launches.
 */
#include "engine_internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CL/cl.h>

#include "ember/ember_errors.h"
#include "log.h"
#include "platform_kinds.h"

#define MAX_CL_PLATFORMS 16
#define MAX_CL_DEVICES 64

/* What nam_opencl_add_platforms hands to start() as p->arg; owned by the
 * platform once start() succeeds (freed by stop()). */
typedef struct ocl_arg {
  cl_platform_id platform;
  cl_device_id device;
  const nam_opencl_config *config;
} ocl_arg;

/* One accelerator's state on this device; state NULL: not built here. */
typedef struct ocl_accel {
  const acc_descriptor *acc;
  void *state;
} ocl_accel;

typedef struct ocl_impl {
  ocl_arg *arg;
  cl_context ctx;
  cl_command_queue transfer, compute;
  cl_ulong max_alloc;         /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
  int unified;                /* CL_DEVICE_HOST_UNIFIED_MEMORY */
  ocl_accel accels[NAM_MAX_ACCELS];
  size_t n_accels;
} ocl_impl;

/* A block's copy on the device (a block cache handle). */
typedef struct ocl_copy {
  ocl_impl *impl;
  cl_mem mem;
  cl_event written;           /* the upload; NULL before it, or when empty */
  size_t size;
} ocl_copy;

static void info_string(cl_device_id dev, cl_device_info what, char *buf,
                        size_t len) {
  if (clGetDeviceInfo(dev, what, len - 1, buf, NULL) != CL_SUCCESS)
    buf[0] = '\0';
  buf[len - 1] = '\0';
}

static cl_ulong info_ulong(cl_device_id dev, cl_device_info what) {
  cl_ulong v = 0;
  if (clGetDeviceInfo(dev, what, sizeof v, &v, NULL) != CL_SUCCESS) v = 0;
  return v;
}

/* ------------------------------------------------------------------------ */
/* Device memory for the block cache                                         */

static int ocl_upload(void *handle, const void *data, size_t size);
static void ocl_free(void *handle);

static int cl_error(cl_int rc) {
  return rc == CL_OUT_OF_HOST_MEMORY || rc == CL_MEM_OBJECT_ALLOCATION_FAILURE ||
                 rc == CL_OUT_OF_RESOURCES
             ? EMBER_ENOMEM
             : EMBER_EPLATFORM;
}

/* A buffer for a copy: flags say read-only (inputs) or not, and whether it
 * is the host bytes themselves. */
static int new_copy(ocl_impl *impl, cl_mem_flags flags, size_t size,
                    void *host, void **handle) {
  if (impl->max_alloc && size > impl->max_alloc) return EMBER_ETOOBIG;
  ocl_copy *c = calloc(1, sizeof *c);
  if (!c) return EMBER_ENOMEM;
  cl_int rc;
  /* a buffer cannot be empty: an empty block gets 4 bytes, never read */
  c->mem = clCreateBuffer(impl->ctx, flags, size ? size : 4, size ? host : NULL,
                          &rc);
  if (rc != CL_SUCCESS) {
    free(c);
    return cl_error(rc);
  }
  c->impl = impl;
  c->size = size;
  *handle = c;
  return 0;
}

/* Out, state and scratch blocks are written by kernels; inputs get their
 * bytes by upload. Both are plain device buffers. */
static int ocl_alloc(void *ctx, size_t size, void **handle) {
  return new_copy(ctx, CL_MEM_READ_WRITE, size, NULL, handle);
}

/* Unified memory: the buffer is the host bytes (the cache keeps them valid
 * and unchanged while the copy lives; kernels only read it). */
static int ocl_wrap(void *ctx, const void *data, size_t size, void **handle) {
  ocl_impl *impl = ctx;
  if (!impl->unified) {
    int rc = ocl_alloc(ctx, size, handle);
    if (rc == 0 && (rc = ocl_upload(*handle, data, size)) != 0) {
      ocl_free(*handle);
      *handle = NULL;
    }
    return rc;
  }
  return new_copy(impl, CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR, size,
                  (void *)(uintptr_t)data, handle);
}

static int ocl_upload(void *handle, const void *data, size_t size) {
  ocl_copy *c = handle;
  if (size > c->size || (size && !data)) return EMBER_EINVAL;
  if (size == 0) return 0;
  cl_int rc = clEnqueueWriteBuffer(c->impl->transfer, c->mem, CL_FALSE, 0,
                                   size, data, 0, NULL, &c->written);
  if (rc != CL_SUCCESS) {
    c->written = NULL;
    return rc == CL_OUT_OF_HOST_MEMORY || rc == CL_OUT_OF_RESOURCES
               ? EMBER_ENOMEM
               : EMBER_EPLATFORM;
  }
  /* start it now: the kernel that needs it waits on the event */
  clFlush(c->impl->transfer);
  return 0;
}

/* The write must be over before the buffer goes (and before the cache
 * frees the host bytes it reads). Normally it is long over: a kernel
 * waited for it. */
static void ocl_free(void *handle) {
  ocl_copy *c = handle;
  if (!c) return;
  if (c->written) {
    clWaitForEvents(1, &c->written);
    clReleaseEvent(c->written);
  }
  clReleaseMemObject(c->mem);
  free(c);
}

/* Read the copy back: after its upload, and after the kernels queued on
 * the compute queue (an out or state block is written there). */
static int ocl_read(void *handle, void *dst, size_t size) {
  ocl_copy *c = handle;
  if (size > c->size || (size && !dst)) return EMBER_EINVAL;
  if (size == 0) return 0;
  cl_int rc = clFinish(c->impl->compute);
  if (rc == CL_SUCCESS)
    rc = clEnqueueReadBuffer(c->impl->transfer, c->mem, CL_TRUE, 0, size, dst,
                             c->written ? 1 : 0, c->written ? &c->written : NULL,
                             NULL);
  return rc == CL_SUCCESS ? 0 : cl_error(rc);
}

/* Device to device on the compute queue, after the kernels that wrote src
 * (and src's upload); waits for the copy. */
static int ocl_device_copy(void *dst, void *src, size_t size) {
  ocl_copy *d = dst, *s = src;
  if (size > d->size || size > s->size) return EMBER_EINVAL;
  if (size == 0) return 0;
  cl_event done = NULL;
  cl_int rc = clEnqueueCopyBuffer(d->impl->compute, s->mem, d->mem, 0, 0, size,
                                  s->written ? 1 : 0,
                                  s->written ? &s->written : NULL, &done);
  if (rc == CL_SUCCESS) {
    rc = clWaitForEvents(1, &done);
    clReleaseEvent(done);
  }
  return rc == CL_SUCCESS ? 0 : cl_error(rc);
}

static const nam_block_cache_ops ocl_cache_ops = {
  .alloc = ocl_alloc,
  .upload = ocl_upload,
  .free = ocl_free,
  .read = ocl_read,
  .wrap = ocl_wrap,
  .host_ptr = NULL,
  .copy = ocl_device_copy,
};

/* ------------------------------------------------------------------------ */
/* Life cycle                                                                */

static void impl_free(ocl_impl *impl) {
  for (size_t i = 0; i < impl->n_accels; i++)
    if (impl->accels[i].state)
      impl->accels[i].acc->opencl->destroy(impl->accels[i].state);
  if (impl->transfer) clReleaseCommandQueue(impl->transfer);
  if (impl->compute) clReleaseCommandQueue(impl->compute);
  if (impl->ctx) clReleaseContext(impl->ctx);
  free(impl);
}

/* build_accels: every served accelerator with an OpenCL implementation;
 * returns how many were built. */
static size_t build_accels(nam_platform *p, ocl_impl *impl) {
  nam_engine *e = p->engine;
  size_t built = 0;
  for (size_t i = 0; i < e->n_queues && impl->n_accels < NAM_MAX_ACCELS;
       i++) {
    const acc_descriptor *acc = e->queues[i].acc;
    if (!acc || !acc->opencl) continue;
    ocl_accel *a = &impl->accels[impl->n_accels++];
    a->acc = acc;
    char err[400] = "";
    int rc = acc->opencl->create(impl->ctx, impl->arg->device,
                                 impl->arg->config->cache_dir, &a->state, err,
                                 sizeof err);
    if (rc) {
      a->state = NULL;
      nam_engine_event(e, LOG_LVL_WARN, "%s: accelerator %s disabled on %s: "
                       "%s (%s)", p->name, acc->name, p->device,
                       ember_strerror(rc), err);
      continue;
    }
    built++;
  }
  return built;
}

/*
 * The block budget: half the device's global memory, because the other
 * half is what the kernels allocate per run next to the cached blocks
 * (sw: results and plan per pair, 8 bytes per reference residue for long
 * queries) and what the driver keeps for itself; on CPU devices (pocl)
 * "global memory" is host RAM shared with the daemon. A device that does
 * not report its global memory gets one maximal allocation's worth. The
 * config's max_memory caps it. A single block larger than the device's
 * maximal allocation is refused by alloc (EMBER_ETOOBIG).
 */
static uint64_t budget_of(cl_device_id dev, cl_ulong max_alloc,
                          const nam_opencl_config *c) {
  uint64_t global = info_ulong(dev, CL_DEVICE_GLOBAL_MEM_SIZE);
  uint64_t budget = global ? global / 2 : max_alloc;
  if (c->max_memory && c->max_memory < budget) budget = c->max_memory;
  return budget;
}

static int ocl_start(nam_platform *p) {
  ocl_arg *arg = (ocl_arg *)p->arg;
  if (!arg || !arg->config) return EMBER_EINVAL;
  ocl_impl *impl = calloc(1, sizeof *impl);
  if (!impl) return EMBER_ENOMEM;
  impl->arg = arg;

  char name[64], vendor[64];
  info_string(arg->device, CL_DEVICE_NAME, name, sizeof name);
  info_string(arg->device, CL_DEVICE_VENDOR, vendor, sizeof vendor);
  impl->max_alloc = info_ulong(arg->device, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
  cl_bool unified = CL_FALSE;
  if (clGetDeviceInfo(arg->device, CL_DEVICE_HOST_UNIFIED_MEMORY,
                      sizeof unified, &unified, NULL) != CL_SUCCESS)
    unified = CL_FALSE;
  impl->unified = unified == CL_TRUE;
  uint64_t global = info_ulong(arg->device, CL_DEVICE_GLOBAL_MEM_SIZE);
  /* the type first: libember-beagle tells a CPU device (pocl's) from a
   * GPU by it */
  cl_device_type type = 0;
  if (clGetDeviceInfo(arg->device, CL_DEVICE_TYPE, sizeof type, &type,
                      NULL) != CL_SUCCESS)
    type = 0;
  const char *type_name = type & CL_DEVICE_TYPE_CPU           ? "CPU"
                          : type & CL_DEVICE_TYPE_GPU         ? "GPU"
                          : type & CL_DEVICE_TYPE_ACCELERATOR ? "accelerator"
                                                              : "device";
  snprintf(p->device, sizeof p->device, "%.11s %.34s (%.30s), %.3g GiB",
           type_name, name, vendor, (double)global / (double)(1ull << 30));

  cl_int rc;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM,
                                   (cl_context_properties)arg->platform, 0};
  const char *what = "clCreateContext";
  impl->ctx = clCreateContext(props, 1, &arg->device, NULL, NULL, &rc);
  if (rc == CL_SUCCESS) {
    what = "clCreateCommandQueue";
    impl->transfer = clCreateCommandQueue(impl->ctx, arg->device, 0, &rc);
  }
  if (rc == CL_SUCCESS)
    impl->compute = clCreateCommandQueue(impl->ctx, arg->device, 0, &rc);
  if (rc != CL_SUCCESS) {
    nam_engine_event(p->engine, LOG_LVL_ERR, "%s (%s): %s failed (%d)",
                     p->name, p->device, what, (int)rc);
    impl_free(impl);
    return EMBER_EPLATFORM;
  }
  if (build_accels(p, impl) == 0) {
    nam_engine_event(p->engine, LOG_LVL_WARN, "%s (%s): no accelerator "
                     "runs here", p->name, p->device);
    impl_free(impl);
    return EMBER_ENOPLATFORM;
  }
  p->cache_budget = budget_of(arg->device, impl->max_alloc, arg->config);
  p->impl = impl;
  return 0;
}

/* The pipeline has stopped and the block cache has freed its copies. */
static void ocl_stop(nam_platform *p) {
  ocl_impl *impl = p->impl;
  if (!impl) return;
  ocl_arg *arg = impl->arg;
  if (impl->compute) clFinish(impl->compute);
  if (impl->transfer) clFinish(impl->transfer);
  impl_free(impl);
  free(arg);
  p->impl = NULL;
  p->arg = NULL;
}

static const ocl_accel *accel_of(const ocl_impl *impl,
                                 const acc_descriptor *acc) {
  for (size_t i = 0; impl && i < impl->n_accels; i++)
    if (impl->accels[i].acc == acc)
      return impl->accels[i].state ? &impl->accels[i] : NULL;
  return NULL;
}

static int ocl_supports(const nam_platform *p, const acc_descriptor *acc) {
  return acc && acc->opencl && accel_of(p->impl, acc) != NULL;
}

/* ------------------------------------------------------------------------ */
/* Execute                                                                   */

/* cl_mem of each copy in handles; their pending writes join events. */
static int mems_of(void *const *handles, size_t n, void **mems, void **events,
                   unsigned *n_events) {
  for (size_t i = 0; i < n; i++) {
    const ocl_copy *c = handles[i];
    if (!c) return EMBER_EINTERNAL;
    mems[i] = c->mem;
    /* a cache hit's write is long complete: waiting on it costs nothing */
    if (c->written) events[(*n_events)++] = c->written;
  }
  return 0;
}

static int ocl_execute(nam_platform *p, nam_task *t, const nam_task_io *io,
                       acc_output *out, char *err, size_t err_len) {
  ocl_impl *impl = p->impl;
  const ocl_accel *a = accel_of(impl, t->acc);
  if (!a) {
    snprintf(err, err_len, "%s: %s is not built on this device", p->name,
             t->acc->name);
    return EMBER_EPLATFORM;
  }
  void *mems[NAM_MAX_INPUTS], *outs[ACC_MAX_OUTPUTS], *states[ACC_MAX_STATES];
  void *events[NAM_MAX_INPUTS + ACC_MAX_STATES];
  unsigned n_events = 0;
  if (mems_of(io->dev_inputs, t->n_inputs, mems, events, &n_events) ||
      mems_of(io->dev_outputs, t->n_outputs, outs, events, &n_events) ||
      mems_of(io->dev_states, t->n_states, states, events, &n_events)) {
    snprintf(err, err_len, "%s: a block is not on the device", p->name);
    return EMBER_EINTERNAL;
  }
  acc_run_ctx ctx;
  nam_task_run_ctx(t, io, &ctx);
  ctx.dev_outputs = outs;
  ctx.dev_states = states;
  ctx.dev_scratch = io->dev_scratch ? ((ocl_copy *)io->dev_scratch)->mem : NULL;
  int rc = t->acc->opencl->run(a->state, impl->compute, t->prepared,
                               io->inputs, mems, t->n_inputs, events,
                               n_events, &ctx, out, err, err_len);
  if (rc) {
    free(out->data);
    out->data = NULL;
    out->size = 0;
  }
  return rc;
}

const nam_platform_ops nam_platform_opencl_ops = {
  .kind = platform_kinds[PLATFORM_KIND_OPENCL].name,
  .start = ocl_start,
  .stop = ocl_stop,
  .supports = ocl_supports,
  .reprogrammable = 0,
  .run = NULL,
  .cache_ops = &ocl_cache_ops,
  .staged = NULL,      /* the first kernel waits for the uploads */
  .execute = ocl_execute,
  .stage_out = NULL,   /* run() reads the output back */
  .abort = NULL,       /* a kernel cannot be preempted */
  .model_ns = NULL,    /* the engine measures */
  .describe = NULL,    /* p->device says it all */
};

/* ------------------------------------------------------------------------ */
/* Discovery                                                                 */

unsigned nam_opencl_add_platforms(nam_engine *e, const nam_opencl_config *c) {
  cl_platform_id plats[MAX_CL_PLATFORMS];
  cl_uint np = 0;
  cl_int rc = clGetPlatformIDs(MAX_CL_PLATFORMS, plats, &np);
  if (rc != CL_SUCCESS || np == 0) {
    /* -1001 (CL_PLATFORM_NOT_FOUND_KHR): no ICD installed */
    nam_engine_event(e, LOG_LVL_WARN, "opencl: no OpenCL platform found "
                     "(%d)", (int)rc);
    return 0;
  }
  if (np > MAX_CL_PLATFORMS) np = MAX_CL_PLATFORMS;
  unsigned added = 0, index = 0;
  for (cl_uint i = 0; i < np; i++) {
    cl_device_id devs[MAX_CL_DEVICES];
    cl_uint nd = 0;
    rc = clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, MAX_CL_DEVICES, devs,
                        &nd);
    if (rc != CL_SUCCESS || nd == 0) {
      nam_engine_event(e, LOG_LVL_INFO, "opencl: platform %u has no device "
                       "(%d)", i, (int)rc);
      continue;
    }
    if (nd > MAX_CL_DEVICES) nd = MAX_CL_DEVICES;
    for (cl_uint k = 0; k < nd; k++) {
      ocl_arg *arg = malloc(sizeof *arg);
      if (!arg) {
        nam_engine_event(e, LOG_LVL_ERR, "opencl: out of memory");
        return added;
      }
      *arg = (ocl_arg){plats[i], devs[k], c};
      char name[32];
      snprintf(name, sizeof name, "opencl%u", index++);
      /* workers 0: the engine gives device platforms its pipeline depth */
      if (nam_engine_add_platform(e, &nam_platform_opencl_ops, name, 0,
                                  arg) == 0)
        added++;
      else
        free(arg);   /* start failed: it kept nothing */
    }
  }
  return added;
}
