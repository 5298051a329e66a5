/*
 * cnn_ops_harness.h - what test_cnn_opencl_ops and
 * test_cnn_opencl_ops_layers share to run the cnn descriptor's OpenCL ops
 * (acc_cnn_opencl_ops) beside its run_cpu: checks that print the values
 * they compared, the OpenCL device with the descriptor's state on it, a
 * task's params, validate + plan, run_cpu on host blocks, and the
 * comparisons of losses and parameters. No test framework: each failure
 * is printed and counted in failures.
 */
#ifndef CNN_OPS_HARNESS_H
#define CNN_OPS_HARNESS_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "accel.h"
#include "accelerators/cnn/cnn.pb-c.h"

#define SKIP 77

extern int failures;

#define CHECK(cond, ...)                                      \
  do {                                                        \
    if (!(cond)) {                                            \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);  \
      printf(__VA_ARGS__);                                    \
      printf("\n");                                           \
      failures++;                                             \
    }                                                         \
  } while (0)

#define MUST(cond, ...)                                       \
  do {                                                        \
    if (!(cond)) {                                            \
      printf("FATAL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      printf(__VA_ARGS__);                                    \
      printf("\n");                                           \
      exit(1);                                                \
    }                                                         \
  } while (0)

/* calloc that fails the test when out of memory (n or size 0: 1). */
void *xcalloc(size_t n, size_t size);

/* One test's descriptor, net and device. */
typedef struct ops_harness {
  const acc_descriptor *acc;  /* the cnn descriptor */
  const char *name;           /* the net's, in parse errors */
  char *cfg;                  /* the net's .cfg text */
  size_t cfg_len;
  uint32_t batch, slots;      /* of every task */
  cl_context ctx;
  cl_command_queue queue;     /* the ops run on it */
  cl_command_queue transfer;  /* for uploads, when asked for (else NULL) */
  void *state;                /* acc->opencl's state on the device */
} ops_harness;

/* ops_open - the cnn descriptor (the test fails without one or without
 * its OpenCL ops), the first OpenCL device of any platform (a context,
 * a queue, a transfer queue when transfer is set, the descriptor's state;
 * its name printed), then the net text at path, named name. Returns 1,
 * or 0 when there is no OpenCL device (the test is skipped). */
int ops_open(ops_harness *h, const char *path, const char *name,
             uint32_t batch, uint32_t slots, int transfer);
void ops_close(ops_harness *h);

/* The params of op on layers [first, end) that every task of these tests
 * has: the net, batch, seed 7, slots and slot, accumulated (0: 1). */
Ember__Cnn__Params ops_params(const ops_harness *h, Ember__Cnn__Op op,
                              uint32_t first, uint32_t end, uint32_t slot,
                              uint32_t accumulated);

/* The state block's size for layers [first, end). */
size_t ops_state_size(const ops_harness *h, uint32_t first, uint32_t end);

/* validate + plan of the task p on a state of state_bytes with n_out out
 * blocks (both must pass): the prepared task, *plan filled. */
void *ops_prepare(const ops_harness *h, const Ember__Cnn__Params *p,
                  const acc_block *in, size_t n_in, size_t state_bytes,
                  size_t n_out, acc_task_plan *plan);

/* n_out host out blocks of plan's sizes (zeroed, malloc'd). */
void ops_host_outputs(const acc_task_plan *plan, acc_mut_block *outs,
                      size_t n_out);

/* run_cpu of prep on the host state block with the out blocks outs; the
 * Result in *res. Returns run_cpu's code; prep is released. */
int ops_run_cpu(const ops_harness *h, void *prep, const acc_block *in,
                size_t n_in, acc_mut_block *state, acc_mut_block *outs,
                size_t n_out, Ember__Cnn__Result *res, char *err,
                size_t err_len);

/* The end of a run that returned rc with out: the Result unpacked into
 * *res when rc is 0, out's bytes freed, prep released. Returns rc. */
int ops_finish(const ops_harness *h, int rc, acc_output *out, void *prep,
               Ember__Cnn__Result *res);

/* |a - b| / |b| (|b| at least 1e-30). */
double ops_rel(double a, double b);

/* ||got - want|| / ||want|| over n floats (||want|| taken as 1 when
 * 0); *worst, when not NULL, the index of the largest |got - want|. */
double ops_rel_diff(const float *got, const float *want, size_t n,
                    size_t *worst);

/* A FORWARD's Result on the device (ocl) against the CPU's (cpu): the
 * loss within tol relative, the correct counts within 1; printed with
 * what. Returns the loss's relative difference. */
double ops_expect_forward(const char *what, const Ember__Cnn__Result *ocl,
                          const Ember__Cnn__Result *cpu, double tol);

/* Stage s's n parameters on the device (got) against the CPU's (want),
 * within tol relative to their norm; printed. */
void ops_expect_params(int s, const float *got, const float *want, size_t n,
                       double tol);

#endif
