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
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Work-group size used unless acc_sw_ocl_set_max_work_group says otherwise
 * (and the device allows it): queries longer than this are done in tiles
 * of this many rows. */
#define ACC_SW_OCL_DEFAULT_WG 256

/* acc_sw_ocl_set_max_work_group: cap the work-group size of later batches
 * at wg, rounded down to a power of two within what the device and kernels
 * allow (at least 1). Returns the cap now in force (0 if o is NULL). For
 * tuning and for tests that force many tiles; results never depend on it.
 * Not thread-safe against a running batch on o. */
size_t acc_sw_ocl_set_max_work_group(acc_sw_ocl *o, size_t wg);

/* acc_sw_ocl_cache_path: the cache file create used or wrote ("" without
 * a cache directory). Owned by o. */
const char *acc_sw_ocl_cache_path(const acc_sw_ocl *o);

/* Launches are cut into chunks of about this many DP cells (forward pass)
 * so that a run can be canceled between them; a chunk also holds at least
 * 4 work-groups (pairs) per compute unit of the device, to keep it busy.
 * See acc_sw_ocl_set_chunk_cells. */
#define ACC_SW_OCL_DEFAULT_CHUNK_CELLS ((uint64_t)1 << 27)

/* acc_sw_ocl_set_chunk_cells: cells per chunk of later runs (0 reads as
 * 1: the fewest pairs a chunk may hold). Returns the value now in force (0 if o is NULL).
 * For tests and tuning; results never depend on it. Not thread-safe
 * against a running batch on o. */
size_t acc_sw_ocl_set_chunk_cells(acc_sw_ocl *o, uint64_t cells);

/* acc_sw_ocl_run_resident: align every pair of (queries, refs) (the same
 * count) whose blocks are already in device buffers of o's context:
 * qblock and rblock hold exactly the bytes of the blocks the views were
 * made from (acc_seqset_view; the buffers may be larger), at offset 0.
 * Their writes may still be under way: wait[0 .. n_wait) complete when
 * they are there, and the first kernel waits for them. The views are read
 * on the host for the plan (lengths); the residues are only read on the
 * device, so they must be valid for s (a validated task): a letter s does
 * not encode scores as index 0. Writes out[0 .. count-1] exactly as
 * acc_sw_run_batch would and blocks until they are there.
 * Pairs are launched in classes of query length: the work-group is the
 * smallest power of two, at least 32 and at most the cap, covering the
 * query; longer queries (up to ACC_SW_MAX_QUERY_LEN) go in tiles of the
 * cap's size. Each class is cut into chunks (see
 * ACC_SW_OCL_DEFAULT_CHUNK_CELLS), at most two queued at a time; cancel
 * (may be NULL) is read before each chunk. Device memory besides the
 * blocks: 256 bytes of encode table, the matrix, 36 bytes per pair, and 8
 * bytes per reference residue when some query is longer than the cap.
 * Returns 0, EMBER_EINVAL (counts differ, invalid scoring, a sequence too
 * long, a buffer smaller than its block), EMBER_ENOMEM, EMBER_ECANCELED,
 * EMBER_EPLATFORM (an OpenCL call failed; the reason in err) or
 * EMBER_EINTERNAL. Nothing of the run is still queued when it returns. Not
 * thread-safe for one handle (kernel arguments are set per call); q may
 * be in order or out of order. */
int acc_sw_ocl_run_resident(acc_sw_ocl *o, cl_command_queue q,
                            const acc_sw_scoring *s, const acc_seqset *queries,
                            const acc_seqset *refs, cl_mem qblock,
                            cl_mem rblock, cl_uint n_wait,
                            const cl_event *wait, const atomic_int *cancel,
                            acc_sw_hit *out, char *err, size_t err_len);

/* acc_sw_ocl_run_batch: acc_sw_ocl_run_resident on host blocks: checks
 * every residue against s (EMBER_EINVAL for one it does not encode),
 * writes the two blocks into new buffers on q without blocking (the views
 * need not be contiguous) and runs on them; the call blocks only at the
 * end. Device memory: see acc_sw_ocl_batch_bytes. Returns as
 * acc_sw_ocl_run_resident (never EMBER_ECANCELED). Not thread-safe for one
 * handle. */
int acc_sw_ocl_run_batch(acc_sw_ocl *o, cl_command_queue q,
                         const acc_sw_scoring *s, const acc_seqset *queries,
                         const acc_seqset *refs, acc_sw_hit *out, char *err,
                         size_t err_len);

/* acc_sw_ocl_batch_bytes: device memory acc_sw_ocl_run_batch would
 * allocate for (queries, refs) with an alphabet of that size under o's
 * current work-group cap (for splitting batches to a memory budget): the
 * two blocks and the per-run buffers (each at least 4 bytes); 0 when the
 * counts differ. Thread-safe. */
size_t acc_sw_ocl_batch_bytes(const acc_sw_ocl *o, const acc_seqset *queries,
                              const acc_seqset *refs, int alphabet);

/* acc_sw_ocl_device_memory: CL_DEVICE_GLOBAL_MEM_SIZE of dev, 0 if the
 * query fails. */
cl_ulong acc_sw_ocl_device_memory(cl_device_id dev);

/* acc_sw_opencl_ops: the "sw" descriptor's OpenCL implementation
 * (acc_sw_descriptor.opencl). create builds an acc_sw_ocl (cl_context,
 * cl_device_id, cache_dir as acc_sw_ocl_create); destroy frees it; run
 * takes a task prepared by acc_sw_descriptor.validate, the host blocks
 * (queries, references) and the two cl_mem holding them, and packs the
 * Result message as run_cpu does (acc_sw_ocl_run_resident: ctx->cancel is
 * read between chunks). run returns 0, EMBER_EINVAL (bad arguments, inputs
 * other than the validated ones), EMBER_ENOMEM, EMBER_ECANCELED,
 * EMBER_EPLATFORM or EMBER_EINTERNAL, with the reason in err. One state
 * is used by one thread at a time. */
extern const acc_opencl_ops acc_sw_opencl_ops;

#endif
