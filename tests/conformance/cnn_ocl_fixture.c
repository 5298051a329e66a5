/* cnn_ocl_fixture.c - see cnn_ocl_fixture.h. */
#include "cnn_ocl_fixture.h"

#include <stdio.h>
#include <string.h>

int cnn_ocl_fixture_open(cnn_ocl_fixture *f) {
  memset(f, 0, sizeof *f);
  cl_platform_id plats[8];
  cl_uint np = 0, nd = 0;
  if (clGetPlatformIDs(8, plats, &np) == CL_SUCCESS)
    for (cl_uint p = 0; p < np && !f->dev; p++)
      if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 1, &f->dev, &nd) !=
          CL_SUCCESS)
        f->dev = NULL;
  if (!f->dev) {
    printf("no OpenCL device: skipped\n");
    return 77;
  }
  char dname[256] = "";
  clGetDeviceInfo(f->dev, CL_DEVICE_NAME, sizeof dname - 1, dname, NULL);
  printf("device: %s\n", dname);
  cl_int cr;
  f->ctx = clCreateContext(NULL, 1, &f->dev, NULL, NULL, &cr);
  if (cr != CL_SUCCESS) {
    printf("FAIL clCreateContext %d\n", cr);
    return 1;
  }
  f->q = clCreateCommandQueue(f->ctx, f->dev, 0, &cr);
  if (cr != CL_SUCCESS) {
    printf("FAIL clCreateCommandQueue %d\n", cr);
    return 1;
  }
  char err[4096] = "";
  int rc = cnn_ocl_create(f->ctx, f->dev, NULL, &f->o, err, sizeof err);
  if (rc) {
    printf("FAIL cnn_ocl_create %d %s\n", rc, err);
    return 1;
  }
  return 0;
}

void cnn_ocl_fixture_close(cnn_ocl_fixture *f) {
  cnn_ocl_destroy(f->o);
  clReleaseCommandQueue(f->q);
  clReleaseContext(f->ctx);
}
