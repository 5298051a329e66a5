/*
 * cnn_exec_opencl.h - what the cnn descriptor's OpenCL ops share between
 * cnn_exec_opencl.c (the ops, whole stages) and cnn_exec_opencl_slice.c
 * (ICP and OCP slices, error pieces): one task's run on a device and the
 * helpers that fail it with a reason.
 *
 * Built only when OpenCL is found (EMBER_HAVE_OPENCL).
 */
#ifndef CNN_EXEC_OPENCL_H
#define CNN_EXEC_OPENCL_H

#include "accel.h"
#include "cnn_opencl.h"
#include "cnn_task.h"

/* One task on one device: its program, in-order queue and state block. */
typedef struct cnn_ocl_run {
  cnn_ocl *o;
  cl_command_queue q;
  cl_mem st;                    /* the state block */
  const cnn_task *t;
  cnn_state_header h;           /* the header, mirrored */
  char *err;
  size_t err_len;
} cnn_ocl_run;

/* Failures, named in r->err: an OpenCL call's (EMBER_EPLATFORM), out of
 * memory (EMBER_ENOMEM), a cnn_opencl stage call's rc. */
int cnn_ocl_run_fail(cnn_ocl_run *r, const char *what, cl_int rc);
int cnn_ocl_run_no_memory(cnn_ocl_run *r);
int cnn_ocl_run_stage_fail(cnn_ocl_run *r, const cnn_ocl_stage *s,
                           const char *what, int rc);

/* The mirrored header written back to the block (blocking). */
int cnn_ocl_run_write_header(cnn_ocl_run *r);

/* bytes from src at src_off to dst at dst_off, queued. */
int cnn_ocl_run_copy(cnn_ocl_run *r, cl_mem src, size_t src_off, cl_mem dst,
                     size_t dst_off, size_t bytes);

/* FORWARD and BACKWARD of an ICP or OCP slice (cnn.proto), after the
 * stamp is checked: cnn_exec_slice.c's contract on device buffers. dy is
 * BACKWARD's output error (input 0, or its pieces joined). */
int cnn_ocl_slice_forward(cnn_ocl_run *r, cl_mem const *dev_in,
                          const acc_run_ctx *ctx);
int cnn_ocl_slice_backward(cnn_ocl_run *r, cl_mem dy,
                           const acc_run_ctx *ctx);

/* BACKWARD's output error joined from its pieces (cnn.proto
 * error_channels) or summed from its addends (error_addends) into a new
 * buffer *joined (the caller releases it). */
int cnn_ocl_join_error(cnn_ocl_run *r, cl_mem const *dev_in,
                        cl_mem *joined);

#endif
