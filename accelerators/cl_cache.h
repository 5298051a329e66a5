/*
 * cl_cache.h - the OpenCL program binary cache the built-in accelerators
 * share (their OpenCL host code: sw_opencl.c, plf_opencl.c, cnn_opencl.c),
 * and the report of a failed build.
 *
 * A file is named by two BLAKE2b hashes (libsodium's crypto_generichash):
 * of the device (name, driver, version) and of the program (source, build
 * options): DIR/ember-TAG-DEVICE-PROGRAM.clbin. It holds "EMBCLBN1", the
 * payload size (uint64), BLAKE2b-256 of the payload, and the payload: the
 * program binary for that device. A missing, damaged or rejected file only
 * means a build from source.
 */
#ifndef EMBER_ACC_CL_CACHE_H
#define EMBER_ACC_CL_CACHE_H

#include <stddef.h>

#include <CL/cl.h>

/* acc_cl_cache_name - the cache file's path for this program on dev, into
 * path (len bytes); "" when it cannot be named (no hashing, too long). */
void acc_cl_cache_name(char *path, size_t len, const char *dir,
                       const char *tag, cl_device_id dev, const char *source,
                       const char *options);

/* acc_cl_cache_load - the program from the file at path, built for dev
 * with options; NULL when missing, damaged or rejected (nothing is left
 * behind). */
cl_program acc_cl_cache_load(cl_context ctx, cl_device_id dev,
                             const char *path, const char *options);

/* acc_cl_cache_store - write prog's binary to path: best effort, through
 * a temporary file renamed into place. */
void acc_cl_cache_store(cl_program prog, const char *path);

/* acc_cl_build_failed - "WHAT: clBuildProgram failed (RC): BUILD LOG" into
 * err for a program whose build on dev failed with rc; returns
 * EMBER_EPLATFORM. */
int acc_cl_build_failed(cl_program prog, cl_device_id dev, cl_int rc,
                        const char *what, char *err, size_t err_len);

#endif
