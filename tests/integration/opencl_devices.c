/*
 * opencl_devices - whether this machine has an OpenCL device, asked of the
 * ICD loader directly rather than of ember, so that a test can tell "no
 * device here" (skip) from "ember's opencl platform stopped serving" (fail).
 * Prints one line, "N device(s): NAME (PLATFORM), ..." and exits 0 when there
 * is at least one device of any type, or prints why not and exits 1.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <stdio.h>

#include <CL/cl.h>

enum { MAX_PLATFORMS = 16, MAX_DEVICES = 64 };

int main(void) {
  cl_platform_id platforms[MAX_PLATFORMS];
  cl_uint nplatforms = 0;
  cl_int err = clGetPlatformIDs(MAX_PLATFORMS, platforms, &nplatforms);
  if (err != CL_SUCCESS || nplatforms == 0) {
    printf("no OpenCL platform (clGetPlatformIDs: %d)\n", (int)err);
    return 1;
  }
  if (nplatforms > MAX_PLATFORMS) nplatforms = MAX_PLATFORMS;

  char names[4096];
  size_t used = 0;
  names[0] = '\0';
  unsigned ndevices = 0;
  for (cl_uint p = 0; p < nplatforms; p++) {
    char pname[128] = "?";
    clGetPlatformInfo(platforms[p], CL_PLATFORM_NAME, sizeof pname - 1, pname,
                      NULL);
    pname[sizeof pname - 1] = '\0';
    cl_device_id devices[MAX_DEVICES];
    cl_uint n = 0;
    if (clGetDeviceIDs(platforms[p], CL_DEVICE_TYPE_ALL, MAX_DEVICES, devices,
                       &n) != CL_SUCCESS)
      continue;
    if (n > MAX_DEVICES) n = MAX_DEVICES;
    for (cl_uint d = 0; d < n; d++) {
      char dname[256] = "?";
      clGetDeviceInfo(devices[d], CL_DEVICE_NAME, sizeof dname - 1, dname,
                      NULL);
      dname[sizeof dname - 1] = '\0';
      int w = snprintf(names + used, sizeof names - used, "%s%s (%s)",
                       ndevices ? ", " : "", dname, pname);
      if (w > 0 && (size_t)w < sizeof names - used) used += (size_t)w;
      ndevices++;
    }
  }
  if (ndevices == 0) {
    printf("no OpenCL device on %u platform(s)\n", (unsigned)nplatforms);
    return 1;
  }
  printf("%u device(s): %s\n", ndevices, names);
  return 0;
}
