/* cnn_ocl_fixture.h - the OpenCL device the cnn stage tests
 * (test_cnn_opencl, test_cnn_opencl_layers) run on: the first device of
 * the first platform that has one, a context, a command queue and the
 * stage's program on it (cnn_ocl_create). */
#ifndef CNN_OCL_FIXTURE_H
#define CNN_OCL_FIXTURE_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>

#include "cnn_opencl.h"

typedef struct cnn_ocl_fixture {
  cl_device_id dev;
  cl_context ctx;
  cl_command_queue q;
  cnn_ocl *o;
} cnn_ocl_fixture;

/* cnn_ocl_fixture_open - f opened on the device, its name printed
 * ("device: NAME"): returns 0. Without an OpenCL device it prints "no
 * OpenCL device: skipped" and returns 77 (the test's skip code); a step
 * that fails is printed ("FAIL ...") and returns 1. Either way the test
 * returns what this returns when it is not 0. */
int cnn_ocl_fixture_open(cnn_ocl_fixture *f);

/* Releases what cnn_ocl_fixture_open made. */
void cnn_ocl_fixture_close(cnn_ocl_fixture *f);

#endif
