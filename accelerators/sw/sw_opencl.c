/*
 * sw_opencl.c - host side of the OpenCL sw kernels (sw.cl, embedded at
 * build time as sw_cl_source.h): program build (binaries cached by
 * cl_cache.c), the
 * launch plan (pairs in classes of query length, cut into chunks), the
 * forward and reverse kernels chained by events on blocks already on the
 * device, and acc_sw_ocl_run_batch, which puts host blocks there first.
 */
#include "sw_opencl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cl_cache.h"
#include "ember/ember_errors.h"
#include "errbuf.h"
#include "sw_cl_source.h"

#define BUILD_OPTIONS "-cl-std=CL1.2"
/* static local memory of a kernel: scores by (query index, letter) */
#define TABLES_LOCAL_BYTES (ACC_SW_MAX_ALPHABET * 256)

_Static_assert(sizeof(acc_sw_hit) == 5 * sizeof(cl_int),
               "acc_sw_hit is read back as 5 ints per pair");

struct acc_sw_ocl {
  cl_context ctx;
  cl_device_id dev;
  cl_program prog;
  cl_kernel fwd, rev;
  size_t max_wg;          /* over both kernels and the local memory */
  size_t wg_cap;          /* acc_sw_ocl_set_max_work_group */
  uint64_t chunk_cells;   /* acc_sw_ocl_set_chunk_cells */
  size_t min_groups;      /* work-groups a chunk holds at least */
  bool from_cache;
  char cache_path[1024];
};

cl_ulong acc_sw_ocl_device_memory(cl_device_id dev) {
  cl_ulong v = 0;
  if (clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof v, &v, NULL) !=
      CL_SUCCESS)
    return 0;
  return v;
}

/* ---- program ------------------------------------------------------------ */

static int build(acc_sw_ocl *o, char *err, size_t err_len) {
  cl_int rc = clBuildProgram(o->prog, 1, &o->dev, BUILD_OPTIONS, NULL, NULL);
  if (rc == CL_SUCCESS) return 0;
  return acc_cl_build_failed(o->prog, o->dev, rc, "sw.cl", err, err_len);
}

/* work-groups per compute unit a chunk holds at least */
#define GROUPS_PER_UNIT 4

static int make_kernels(acc_sw_ocl *o, char *err, size_t err_len) {
  cl_int rc;
  o->fwd = clCreateKernel(o->prog, "sw_forward", &rc);
  if (rc != CL_SUCCESS) goto fail;
  o->rev = clCreateKernel(o->prog, "sw_reverse", &rc);
  if (rc != CL_SUCCESS) goto fail;
  size_t dev_wg = 1, k1 = 1, k2 = 1;
  cl_ulong local = 0, used1 = 0, used2 = 0;
  if ((rc = clGetDeviceInfo(o->dev, CL_DEVICE_MAX_WORK_GROUP_SIZE,
                            sizeof dev_wg, &dev_wg, NULL)) != CL_SUCCESS ||
      (rc = clGetDeviceInfo(o->dev, CL_DEVICE_LOCAL_MEM_SIZE, sizeof local,
                            &local, NULL)) != CL_SUCCESS ||
      (rc = clGetKernelWorkGroupInfo(o->fwd, o->dev, CL_KERNEL_WORK_GROUP_SIZE,
                                     sizeof k1, &k1, NULL)) != CL_SUCCESS ||
      (rc = clGetKernelWorkGroupInfo(o->rev, o->dev, CL_KERNEL_WORK_GROUP_SIZE,
                                     sizeof k2, &k2, NULL)) != CL_SUCCESS ||
      (rc = clGetKernelWorkGroupInfo(o->fwd, o->dev, CL_KERNEL_LOCAL_MEM_SIZE,
                                     sizeof used1, &used1, NULL)) !=
          CL_SUCCESS ||
      (rc = clGetKernelWorkGroupInfo(o->rev, o->dev, CL_KERNEL_LOCAL_MEM_SIZE,
                                     sizeof used2, &used2, NULL)) != CL_SUCCESS)
    goto fail;
  size_t wg = dev_wg < k1 ? dev_wg : k1;
  if (k2 < wg) wg = k2;
  /* dynamic local memory: 4 ints per work-item (xh, xf double buffers) */
  cl_ulong used = used1 > used2 ? used1 : used2;
  if (used < TABLES_LOCAL_BYTES) used = TABLES_LOCAL_BYTES;
  cl_ulong by_local = local > used ? (local - used) / 16 : 0;
  if (by_local < wg) wg = (size_t)by_local;
  size_t p2 = 1;
  while (p2 * 2 <= wg) p2 *= 2;
  if (wg == 0) {
    return errbuf_printf(err, err_len, EMBER_EPLATFORM,
                         "sw.cl: no work-group size fits the device");
  }
  o->max_wg = p2;
  o->wg_cap = ACC_SW_OCL_DEFAULT_WG < p2 ? ACC_SW_OCL_DEFAULT_WG : p2;
  /* a chunk keeps every compute unit busy: a few groups per unit */
  cl_uint units = 1;
  if (clGetDeviceInfo(o->dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units,
                      &units, NULL) != CL_SUCCESS || units == 0)
    units = 1;
  o->min_groups = (size_t)units * GROUPS_PER_UNIT;
  return 0;
fail:
  return errbuf_printf(err, err_len, EMBER_EPLATFORM,
                       "sw.cl: kernel setup failed (%d)", (int)rc);
}

int acc_sw_ocl_create(cl_context ctx, cl_device_id dev, const char *cache_dir,
                      acc_sw_ocl **out, char *err, size_t err_len) {
  if (!ctx || !dev || !out) return EMBER_EINVAL;
  *out = NULL;
  acc_sw_ocl *o = calloc(1, sizeof *o);
  if (!o) return EMBER_ENOMEM;
  o->ctx = ctx;
  o->dev = dev;
  o->chunk_cells = ACC_SW_OCL_DEFAULT_CHUNK_CELLS;
  if (cache_dir && *cache_dir)
    acc_cl_cache_name(o->cache_path, sizeof o->cache_path, cache_dir, "sw",
                      dev, acc_sw_cl_source, BUILD_OPTIONS);

  int rc;
  /* the kernels read the blocks' little-endian integers as they are */
  cl_bool little = CL_TRUE;
  if (clGetDeviceInfo(dev, CL_DEVICE_ENDIAN_LITTLE, sizeof little, &little,
                      NULL) == CL_SUCCESS &&
      !little) {
    rc = errbuf_printf(err, err_len, EMBER_EPLATFORM,
                       "sw.cl: big-endian device not supported");
    goto fail;
  }
  if (o->cache_path[0] &&
      (o->prog = acc_cl_cache_load(ctx, dev, o->cache_path, BUILD_OPTIONS))) {
    o->from_cache = true;
  } else {
    const char *src = acc_sw_cl_source;
    cl_int crc;
    o->prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &crc);
    if (crc != CL_SUCCESS) {
      rc = errbuf_printf(err, err_len, EMBER_EPLATFORM,
                         "sw.cl: clCreateProgramWithSource failed (%d)",
                         (int)crc);
      goto fail;
    }
    if ((rc = build(o, err, err_len)) != 0) goto fail;
    if (o->cache_path[0]) acc_cl_cache_store(o->prog, o->cache_path);
  }
  if ((rc = make_kernels(o, err, err_len)) != 0) goto fail;
  *out = o;
  return 0;
fail:
  acc_sw_ocl_destroy(o);
  return rc;
}

void acc_sw_ocl_destroy(acc_sw_ocl *o) {
  if (!o) return;
  if (o->fwd) clReleaseKernel(o->fwd);
  if (o->rev) clReleaseKernel(o->rev);
  if (o->prog) clReleaseProgram(o->prog);
  free(o);
}

bool acc_sw_ocl_loaded_from_cache(const acc_sw_ocl *o) {
  return o && o->from_cache;
}

size_t acc_sw_ocl_set_max_work_group(acc_sw_ocl *o, size_t wg) {
  if (!o) return 0;
  size_t p2 = 1;
  while (p2 * 2 <= wg && p2 * 2 <= o->max_wg) p2 *= 2;
  o->wg_cap = p2;
  return p2;
}

const char *acc_sw_ocl_cache_path(const acc_sw_ocl *o) {
  return o ? o->cache_path : "";
}

size_t acc_sw_ocl_set_chunk_cells(acc_sw_ocl *o, uint64_t cells) {
  if (!o) return 0;
  o->chunk_cells = cells ? cells : 1;
  return (size_t)o->chunk_cells;
}

/* ---- launch plan --------------------------------------------------------- */

static bool scoring_ok(const acc_sw_scoring *s) {
  if (s->size < 1 || s->size > ACC_SW_MAX_ALPHABET) return false;
  if (s->gap_open < 0 || s->gap_open > ACC_SW_MAX_GAP || s->gap_extend < 0 ||
      s->gap_extend > ACC_SW_MAX_GAP)
    return false;
  for (int c = 0; c < 256; c++)
    if (s->encode[c] < -1 || s->encode[c] >= s->size) return false;
  for (int i = 0; i < s->size * s->size; i++)
    if (s->matrix[i] < -128 || s->matrix[i] > 127) return false;
  return true;
}

#define CL_TRY(call, what)                                                     \
  do {                                                                         \
    cl_int rc_ = (call);                                                       \
    if (rc_ != CL_SUCCESS) {                                                   \
      rc = errbuf_printf(err, err_len, EMBER_EPLATFORM,                        \
                         "sw opencl: %s failed (%d)", what, (int)rc_);         \
      goto done;                                                               \
    }                                                                          \
  } while (0)

/* Pairs go to the device in classes of query length: the work-group of a
 * class is the smallest power of two covering its queries, at least MIN_WG
 * and at most the cap (longer queries go tile by tile). A class is cut
 * into chunks of about o->chunk_cells cells and at least o->min_groups
 * pairs, one forward and one reverse launch each; cancellation is checked
 * between chunks. */
#define MIN_WG 32
#define MAX_CLASSES 32
#define NBUF 6      /* per-run buffers: encode, matrix, order, scratch,
                       forward cells, hits */

/* wg_class: log2 of the work-group size for a query of len residues. */
static int wg_class(const acc_sw_ocl *o, size_t len) {
  int c = 0;
  while (((size_t)1 << c) < MIN_WG) c++;
  while (((size_t)1 << c) < len && ((size_t)1 << c) < o->wg_cap) c++;
  while (((size_t)1 << c) > o->wg_cap) c--;
  return c;
}

static size_t seq_len(const acc_seqset *set, uint32_t k) {
  return acc_seqset_u32(set->offsets + 4 * ((size_t)k + 1)) -
         acc_seqset_u32(set->offsets + 4 * (size_t)k);
}

/* residue_bytes: the residue area's size (offsets[count]). */
static size_t residue_bytes(const acc_seqset *set) {
  return acc_seqset_u32(set->offsets + 4 * (size_t)set->count);
}

/* block_bytes: the size of the ESQ1 block a view was made from. */
static size_t block_bytes(const acc_seqset *set) {
  return ACC_SEQSET_HEADER + 4 * ((size_t)set->count + 1) +
         residue_bytes(set);
}

static size_t max_len(const acc_seqset *set) {
  size_t max = 0;
  for (uint32_t k = 0; k < set->count; k++) {
    size_t len = seq_len(set, k);
    if (len > max) max = len;
  }
  return max;
}

/* run_bytes: per-run device buffers (see NBUF) for n pairs. */
static void run_bytes(const acc_sw_ocl *o, size_t n, size_t qmax,
                      size_t rtotal, int alphabet, size_t bytes[NBUF]) {
  bytes[0] = 256;
  bytes[1] = (size_t)alphabet * (size_t)alphabet * sizeof(cl_int);
  bytes[2] = n * sizeof(cl_uint);
  bytes[3] = qmax > o->wg_cap ? 2 * rtotal * sizeof(cl_int) : 0;
  bytes[4] = n * 3 * sizeof(cl_int);
  bytes[5] = n * 5 * sizeof(cl_int);
}

size_t acc_sw_ocl_batch_bytes(const acc_sw_ocl *o, const acc_seqset *queries,
                              const acc_seqset *refs, int alphabet) {
  if (!o || !queries || !refs || queries->count != refs->count) return 0;
  size_t bytes[NBUF];
  size_t sum = block_bytes(queries) + block_bytes(refs);
  run_bytes(o, queries->count, max_len(queries), residue_bytes(refs),
            alphabet, bytes);
  for (int i = 0; i < NBUF; i++) sum += bytes[i] ? bytes[i] : 4;
  return sum;
}

/* One launch pair: pairs order[first .. first+count-1], one class. */
typedef struct chunk {
  cl_uint first;
  cl_uint count;
  size_t wg;
} chunk;

/* plan: the pairs in class order (a stable counting sort) and the chunks
 * (malloc'd, *n_chunks of them). Returns 0 or EMBER_ENOMEM. */
static int plan(const acc_sw_ocl *o, const acc_seqset *q, const acc_seqset *r,
                cl_uint *order, chunk **chunks, size_t *n_chunks) {
  const uint32_t n = q->count;
  size_t start[MAX_CLASSES + 1] = {0};
  for (uint32_t k = 0; k < n; k++) start[wg_class(o, seq_len(q, k)) + 1]++;
  for (int c = 0; c < MAX_CLASSES; c++) start[c + 1] += start[c];
  size_t fill[MAX_CLASSES];
  memcpy(fill, start, sizeof fill);
  for (uint32_t k = 0; k < n; k++) order[fill[wg_class(o, seq_len(q, k))]++] = k;

  /* every chunk holds a pair at least */
  chunk *ch = malloc((size_t)n * sizeof *ch);
  if (!ch) return EMBER_ENOMEM;
  size_t nc = 0;
  for (int c = 0; c < MAX_CLASSES; c++) {
    uint64_t cells = 0;
    for (size_t k = start[c]; k < start[c + 1]; k++) {
      if (cells == 0) ch[nc++] = (chunk){(cl_uint)k, 0, (size_t)1 << c};
      ch[nc - 1].count++;
      cells += (uint64_t)seq_len(q, order[k]) * seq_len(r, order[k]);
      if (cells >= o->chunk_cells && ch[nc - 1].count >= o->min_groups)
        cells = 0;
    }
  }
  *chunks = ch;
  *n_chunks = nc;
  return 0;
}

/* set_args: the arguments every launch of k shares (all but first and the
 * local buffers): qblk rblk matrix encode size open ext scratch fwd [hits]
 * order. */
static cl_int set_args(cl_kernel k, cl_mem qblk, cl_mem rblk,
                       const cl_mem *mem, int size, int open, int ext,
                       bool reverse) {
  cl_int rc = CL_SUCCESS;
  cl_uint a = 0;
  rc |= clSetKernelArg(k, a++, sizeof(cl_mem), &qblk);
  rc |= clSetKernelArg(k, a++, sizeof(cl_mem), &rblk);
  rc |= clSetKernelArg(k, a++, sizeof(cl_mem), &mem[1]);   /* matrix */
  rc |= clSetKernelArg(k, a++, sizeof(cl_mem), &mem[0]);   /* encode */
  rc |= clSetKernelArg(k, a++, sizeof(cl_int), &size);
  rc |= clSetKernelArg(k, a++, sizeof(cl_int), &open);
  rc |= clSetKernelArg(k, a++, sizeof(cl_int), &ext);
  rc |= clSetKernelArg(k, a++, sizeof(cl_mem), &mem[3]);   /* scratch */
  rc |= clSetKernelArg(k, a++, sizeof(cl_mem), &mem[4]);   /* fwd cells */
  if (reverse) rc |= clSetKernelArg(k, a++, sizeof(cl_mem), &mem[5]);
  rc |= clSetKernelArg(k, a++, sizeof(cl_mem), &mem[2]);   /* order */
  return rc;
}

/* launch: one chunk on k. */
static cl_int launch(cl_command_queue q, cl_kernel k, bool reverse,
                     const chunk *c, cl_uint nwait, const cl_event *wait,
                     cl_event *ev) {
  cl_uint a = reverse ? 11 : 10;   /* first: after order */
  cl_int rc = clSetKernelArg(k, a++, sizeof c->first, &c->first);
  rc |= clSetKernelArg(k, a++, 2 * c->wg * sizeof(cl_int), NULL);
  rc |= clSetKernelArg(k, a++, 2 * c->wg * sizeof(cl_int), NULL);
  if (rc != CL_SUCCESS) return rc;
  const size_t global = c->count * c->wg;
  return clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &c->wg, nwait, wait,
                                ev);
}

/* check_views: counts and lengths of a batch (not the residues). */
static int check_views(const acc_seqset *q, const acc_seqset *r, char *err,
                       size_t err_len) {
  if (q->count != r->count) {
    return errbuf_printf(err, err_len, EMBER_EINVAL,
                         "sw opencl: %u queries but %u references", q->count,
                         r->count);
  }
  for (uint32_t k = 0; k < q->count; k++)
    if (seq_len(q, k) > ACC_SW_MAX_QUERY_LEN ||
        seq_len(r, k) > ACC_SW_MAX_REF_LEN) {
      return errbuf_printf(err, err_len, EMBER_EINVAL,
                           "sw opencl: pair %u: a sequence is too long", k);
    }
  return 0;
}

static bool canceled(const atomic_int *cancel) {
  return cancel && atomic_load_explicit(cancel, memory_order_relaxed);
}

/* block_fits: the device buffer holds at least the view's block. */
static bool block_fits(cl_mem m, const acc_seqset *set) {
  size_t size = 0;
  return clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, NULL) ==
             CL_SUCCESS &&
         size >= block_bytes(set);
}

int acc_sw_ocl_run_resident(acc_sw_ocl *o, cl_command_queue q,
                            const acc_sw_scoring *s, const acc_seqset *queries,
                            const acc_seqset *refs, cl_mem qblock,
                            cl_mem rblock, cl_uint n_wait,
                            const cl_event *wait, const atomic_int *cancel,
                            acc_sw_hit *out, char *err, size_t err_len) {
  if (!o || !q || !s || !queries || !refs || !qblock || !rblock ||
      (n_wait && !wait))
    return EMBER_EINVAL;
  int rc = check_views(queries, refs, err, err_len);
  if (rc) return rc;
  if (!scoring_ok(s)) {
    return errbuf_printf(err, err_len, EMBER_EINVAL,
                         "sw opencl: invalid scoring");
  }
  const uint32_t n = queries->count;
  if (n == 0) return 0;
  if (!out) return EMBER_EINVAL;
  if (!block_fits(qblock, queries) || !block_fits(rblock, refs)) {
    return errbuf_printf(
        err, err_len, EMBER_EINVAL,
        "sw opencl: a device buffer is smaller than its block");
  }
  if (canceled(cancel)) {
    return errbuf_printf(err, err_len, EMBER_ECANCELED, "sw opencl: canceled");
  }

  cl_uint *order = malloc((size_t)n * sizeof *order);
  chunk *chunks = NULL;
  size_t n_chunks = 0;
  cl_event *fev = NULL, *rev = NULL;    /* per chunk: forward, reverse */
  cl_event *fwait = malloc(((size_t)n_wait + 3) * sizeof *fwait);
  cl_mem mem[NBUF] = {0};
  cl_event tev[3] = {0}, marker = NULL, read_ev = NULL;
  uint8_t encode[256];
  cl_int matrix[ACC_SW_MAX_ALPHABET * ACC_SW_MAX_ALPHABET];
  bool enqueued = false;
  if (!order || !fwait ||
      plan(o, queries, refs, order, &chunks, &n_chunks) != 0 ||
      !(fev = calloc(n_chunks, sizeof *fev)) ||
      !(rev = calloc(n_chunks, sizeof *rev))) {
    rc = errbuf_printf(err, err_len, EMBER_ENOMEM,
                       "sw opencl: out of memory for %u pairs", n);
    goto done;
  }
  /* letters the scoring rejects read as index 0: only validated input
   * comes here (acc_sw_ocl_run_batch checks it, so does the descriptor) */
  for (int c = 0; c < 256; c++)
    encode[c] = s->encode[c] < 0 ? 0 : (uint8_t)s->encode[c];
  for (int i = 0; i < s->size * s->size; i++) matrix[i] = s->matrix[i];

  /* the tables and the order, written without blocking */
  size_t bytes[NBUF];
  run_bytes(o, n, max_len(queries), residue_bytes(refs), s->size, bytes);
  cl_int crc;
  for (int i = 0; i < NBUF; i++) {
    mem[i] = clCreateBuffer(o->ctx, i < 3 ? CL_MEM_READ_ONLY
                                          : CL_MEM_READ_WRITE,
                            bytes[i] ? bytes[i] : 4, NULL, &crc);
    CL_TRY(crc, "clCreateBuffer");
  }
  const void *host[3] = {encode, matrix, order};
  for (int i = 0; i < 3; i++) {
    CL_TRY(clEnqueueWriteBuffer(q, mem[i], CL_FALSE, 0, bytes[i], host[i], 0,
                                NULL, &tev[i]),
           "clEnqueueWriteBuffer");
    enqueued = true;
  }
  /* forward launches wait for the blocks (the caller's events) and the
   * tables; each reverse launch for its forward one */
  const cl_uint nw = n_wait + 3;
  if (n_wait) memcpy(fwait, wait, n_wait * sizeof *fwait);
  memcpy(fwait + n_wait, tev, sizeof tev);

  const int size = s->size, open = s->gap_open, ext = s->gap_extend;
  CL_TRY(set_args(o->fwd, qblock, rblock, mem, size, open, ext, false),
         "clSetKernelArg");
  CL_TRY(set_args(o->rev, qblock, rblock, mem, size, open, ext, true),
         "clSetKernelArg");
  for (size_t c = 0; c < n_chunks; c++) {
    /* at most two chunks queued: wait for the one before the last, then
     * look at the cancel flag */
    if (c >= 2) CL_TRY(clWaitForEvents(1, &rev[c - 2]), "a kernel");
    if (canceled(cancel)) {
      rc = errbuf_printf(err, err_len, EMBER_ECANCELED,
                         "sw opencl: canceled after %zu of %zu chunks", c,
                         n_chunks);
      goto done;
    }
    CL_TRY(launch(q, o->fwd, false, &chunks[c], nw, fwait, &fev[c]),
           "sw_forward");
    CL_TRY(launch(q, o->rev, true, &chunks[c], 1, &fev[c], &rev[c]),
           "sw_reverse");
    CL_TRY(clFlush(q), "clFlush");
  }
  /* the read waits for every reverse launch (the queue may be out of
   * order) */
  CL_TRY(clEnqueueMarkerWithWaitList(q, (cl_uint)n_chunks, rev, &marker),
         "clEnqueueMarkerWithWaitList");
  CL_TRY(clEnqueueReadBuffer(q, mem[5], CL_FALSE, 0, bytes[5], out, 1,
                             &marker, &read_ev),
         "clEnqueueReadBuffer");
  CL_TRY(clWaitForEvents(1, &read_ev), "reading the hits");
  enqueued = false;   /* everything before the read is complete */
  for (uint32_t k = 0; k < n; k++)
    if (out[k].score < 0) {
      rc = errbuf_printf(err, err_len, EMBER_EINTERNAL,
                         "sw opencl: pair %u: reverse pass lost the score", k);
      break;
    }

done:
  /* nothing may still run on our buffers or read our host memory */
  if (enqueued) clFinish(q);
  for (size_t c = 0; c < n_chunks; c++) {
    if (fev && fev[c]) clReleaseEvent(fev[c]);
    if (rev && rev[c]) clReleaseEvent(rev[c]);
  }
  for (int i = 0; i < 3; i++)
    if (tev[i]) clReleaseEvent(tev[i]);
  if (marker) clReleaseEvent(marker);
  if (read_ev) clReleaseEvent(read_ev);
  for (int i = 0; i < NBUF; i++)
    if (mem[i]) clReleaseMemObject(mem[i]);
  free(fev);
  free(rev);
  free(fwait);
  free(chunks);
  free(order);
  return rc;
}

/* ---- host blocks --------------------------------------------------------- */

/* check_residues: every residue of the set is one the scoring encodes. */
static bool check_residues(const acc_sw_scoring *s, const acc_seqset *set) {
  const size_t total = residue_bytes(set);
  for (size_t i = 0; i < total; i++)
    if (s->encode[set->residues[i]] < 0) return false;
  return true;
}

/* upload_view: the block a view was made from into a new buffer, written
 * without blocking in three parts (header, offsets, residues) so that the
 * view's memory need not be contiguous; ev receives up to three events.
 * header (8 bytes) must stay valid until they complete. */
static int upload_view(cl_context ctx, cl_command_queue q,
                       const acc_seqset *set, uint8_t *header, cl_mem *mem,
                       cl_event ev[3]) {
  cl_int rc;
  const size_t offs = 4 * ((size_t)set->count + 1);
  const size_t total = residue_bytes(set);
  *mem = clCreateBuffer(ctx, CL_MEM_READ_ONLY, block_bytes(set), NULL, &rc);
  if (rc != CL_SUCCESS) return rc;
  const uint32_t words[2] = {ACC_SEQSET_MAGIC, set->count};
  for (int i = 0; i < 8; i++)   /* little-endian, as the layout says */
    header[i] = (uint8_t)(words[i / 4] >> (8 * (i % 4)));
  rc = clEnqueueWriteBuffer(q, *mem, CL_FALSE, 0, ACC_SEQSET_HEADER, header,
                            0, NULL, &ev[0]);
  if (rc == CL_SUCCESS)
    rc = clEnqueueWriteBuffer(q, *mem, CL_FALSE, ACC_SEQSET_HEADER, offs,
                              set->offsets, 0, NULL, &ev[1]);
  if (rc == CL_SUCCESS && total)
    rc = clEnqueueWriteBuffer(q, *mem, CL_FALSE, ACC_SEQSET_HEADER + offs,
                              total, set->residues, 0, NULL, &ev[2]);
  return rc;
}

int acc_sw_ocl_run_batch(acc_sw_ocl *o, cl_command_queue q,
                         const acc_sw_scoring *s, const acc_seqset *queries,
                         const acc_seqset *refs, acc_sw_hit *out, char *err,
                         size_t err_len) {
  if (!o || !q || !s || !queries || !refs) return EMBER_EINVAL;
  int rc = check_views(queries, refs, err, err_len);
  if (rc) return rc;
  if (!scoring_ok(s)) {
    return errbuf_printf(err, err_len, EMBER_EINVAL,
                         "sw opencl: invalid scoring");
  }
  if (queries->count == 0) return 0;
  if (!out) return EMBER_EINVAL;
  if (!check_residues(s, queries) || !check_residues(s, refs)) {
    return errbuf_printf(
        err, err_len, EMBER_EINVAL,
        "sw opencl: a sequence holds a residue the scoring does not encode");
  }
  uint8_t qhdr[8], rhdr[8];
  cl_mem qm = NULL, rm = NULL;
  cl_event ev[6] = {0};
  cl_int crc = upload_view(o->ctx, q, queries, qhdr, &qm, ev);
  if (crc == CL_SUCCESS) crc = upload_view(o->ctx, q, refs, rhdr, &rm, ev + 3);
  if (crc != CL_SUCCESS) {
    rc = errbuf_printf(err, err_len, EMBER_EPLATFORM,
                       "sw opencl: block upload failed (%d)", (int)crc);
  } else {
    cl_event wait[6];
    cl_uint nw = 0;
    for (int i = 0; i < 6; i++)
      if (ev[i]) wait[nw++] = ev[i];
    rc = acc_sw_ocl_run_resident(o, q, s, queries, refs, qm, rm, nw, wait,
                                 NULL, out, err, err_len);
  }
  /* the writes read the caller's memory: done before returning */
  for (int i = 0; i < 6; i++)
    if (ev[i]) {
      clWaitForEvents(1, &ev[i]);
      clReleaseEvent(ev[i]);
    }
  if (qm) clReleaseMemObject(qm);
  if (rm) clReleaseMemObject(rm);
  return rc;
}
