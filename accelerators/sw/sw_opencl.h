/*
 * sw_opencl.h - the "sw" kernels on an OpenCL 1.2 device (sw.cl): the same
 * results as the CPU kernels (sw.h), coordinates and tie rules included.
 *
 * One handle holds the program and kernels built for one device. The
 * program is built from the embedded source at creation; with a cache
 * directory the built binary is kept there, keyed by device name, driver
 * version and a hash of the source (FNV-1a 64), and loaded from it next
 * time. A cache file that is damaged (its own checksum) or that the driver
 * rejects is ignored and replaced by a rebuild.
 *
 * Built only when OpenCL is found (EMBER_HAVE_OPENCL).
 */
#ifndef EMBER_ACC_SW_OPENCL_H
#define EMBER_ACC_SW_OPENCL_H

#ifndef CL_TARGET_OPENCL_VERSION
#define CL_TARGET_OPENCL_VERSION 120
#endif
#include <CL/cl.h>
#include <stdbool.h>
#include <stddef.h>

#include "sw.h"

typedef struct acc_sw_ocl acc_sw_ocl;

/* acc_sw_ocl_create: build the sw program and kernels for dev in ctx (the
 * caller keeps ownership of both; they must outlive the handle).
 * cache_dir may be NULL (no cache); it must exist. A cache that cannot be
 * written is not an error. On success *out owns the program and kernels.
 * Returns 0, EMBER_EINVAL, EMBER_ENOMEM or EMBER_EPLATFORM (build failed:
 * the first lines of the build log in err). Thread-safe for distinct
 * handles; writes to one cache file go through a temporary file and a
 * rename. */
int acc_sw_ocl_create(cl_context ctx, cl_device_id dev, const char *cache_dir,
                      acc_sw_ocl **out, char *err, size_t err_len);

/* acc_sw_ocl_destroy: release what create made. NULL is a no-op. */
void acc_sw_ocl_destroy(acc_sw_ocl *o);

/* acc_sw_ocl_loaded_from_cache: true when create took the program from a
 * cache file (not rebuilt from source). */
bool acc_sw_ocl_loaded_from_cache(const acc_sw_ocl *o);

/* acc_sw_ocl_cache_path: the cache file create used or wrote ("" without
 * a cache directory). Owned by o. */
const char *acc_sw_ocl_cache_path(const acc_sw_ocl *o);

/* acc_sw_ocl_run_batch: align every pair of (queries, refs) (the same
 * count) on the device of q (a queue of o's context and device), writing
 * out[0 .. count-1] exactly as acc_sw_run_batch would. Writes the inputs
 * without blocking, runs the forward kernel, then the reverse one, reads
 * the hits back, each step waiting on the previous one's event; the call
 * blocks only at the end. One work-group per pair, queries of any length
 * up to ACC_SW_MAX_QUERY_LEN. Device memory: the encoded residues, 8 bytes
 * per reference residue (scratch) and 32 bytes per pair.
 * Returns 0, EMBER_EINVAL (as acc_sw_run_batch: counts differ, invalid
 * scoring, a residue the scoring does not encode, a sequence too long),
 * EMBER_ENOMEM, EMBER_EPLATFORM (an OpenCL call failed; the reason in err)
 * or EMBER_EINTERNAL. Not thread-safe for one handle (kernel arguments are
 * set per call). */
int acc_sw_ocl_run_batch(acc_sw_ocl *o, cl_command_queue q,
                         const acc_sw_scoring *s, const acc_seqset *queries,
                         const acc_seqset *refs, acc_sw_hit *out, char *err,
                         size_t err_len);

/* acc_sw_ocl_device_memory: CL_DEVICE_GLOBAL_MEM_SIZE of dev, 0 if the
 * query fails. */
cl_ulong acc_sw_ocl_device_memory(cl_device_id dev);

#endif
