/*
 * sw_opencl.c - host side of the OpenCL sw kernels (sw.cl, embedded at
 * build time as sw_cl_source.h): program build and binary cache, batch
 * transfers, the forward and reverse kernels chained by events.
 */
#include "sw_opencl.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember/ember_errors.h"
#include "sw_cl_source.h"

#define BUILD_OPTIONS "-cl-std=CL1.2"
#define CACHE_MAGIC "EMBSWCL1"
#define CACHE_MAX_BYTES (256u << 20)
#define MATRIX_LOCAL_BYTES (ACC_SW_MAX_ALPHABET * ACC_SW_MAX_ALPHABET * 4)

_Static_assert(sizeof(acc_sw_hit) == 5 * sizeof(cl_int),
               "acc_sw_hit is read back as 5 ints per pair");

struct acc_sw_ocl {
  cl_context ctx;
  cl_device_id dev;
  cl_program prog;
  cl_kernel fwd, rev;
  size_t max_wg;          /* over both kernels and the local memory */
  size_t wg_cap;          /* acc_sw_ocl_set_max_work_group */
  bool from_cache;
  char cache_path[1024];
};

static void seterr(char *err, size_t len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t len, const char *fmt, ...) {
  if (!err || !len) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err, len, fmt, ap);
  va_end(ap);
}

static uint64_t fnv1a64(uint64_t h, const void *data, size_t n) {
  const uint8_t *p = data;
  for (size_t i = 0; i < n; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}
#define FNV_INIT 0xcbf29ce484222325ull

static void device_string(cl_device_id dev, cl_device_info what, char *buf,
                          size_t len) {
  buf[0] = '\0';
  if (clGetDeviceInfo(dev, what, len - 1, buf, NULL) != CL_SUCCESS)
    buf[0] = '\0';
  buf[len - 1] = '\0';
}

cl_ulong acc_sw_ocl_device_memory(cl_device_id dev) {
  cl_ulong v = 0;
  if (clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof v, &v, NULL) !=
      CL_SUCCESS)
    return 0;
  return v;
}

/* ---- binary cache ------------------------------------------------------
 * File: "EMBSWCL1", payload size (uint64), FNV-1a 64 of the payload, the
 * payload (the program binary for the device). */

static void cache_path(acc_sw_ocl *o, const char *dir) {
  char name[512], driver[256], version[256];
  device_string(o->dev, CL_DEVICE_NAME, name, sizeof name);
  device_string(o->dev, CL_DRIVER_VERSION, driver, sizeof driver);
  device_string(o->dev, CL_DEVICE_VERSION, version, sizeof version);
  uint64_t key = fnv1a64(FNV_INIT, name, strlen(name) + 1);
  key = fnv1a64(key, driver, strlen(driver) + 1);
  key = fnv1a64(key, version, strlen(version) + 1);
  uint64_t src = fnv1a64(FNV_INIT, acc_sw_cl_source, strlen(acc_sw_cl_source));
  src = fnv1a64(src, BUILD_OPTIONS, strlen(BUILD_OPTIONS));
  int n = snprintf(o->cache_path, sizeof o->cache_path,
                   "%s/ember-sw-%016llx-%016llx.clbin", dir,
                   (unsigned long long)key, (unsigned long long)src);
  if (n < 0 || (size_t)n >= sizeof o->cache_path) o->cache_path[0] = '\0';
}

/* cache_read: the payload of a sound cache file (malloc'd), or NULL. */
static unsigned char *cache_read(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  unsigned char hdr[24];
  unsigned char *data = NULL;
  uint64_t len, sum;
  if (fread(hdr, 1, sizeof hdr, f) != sizeof hdr ||
      memcmp(hdr, CACHE_MAGIC, 8) != 0)
    goto fail;
  memcpy(&len, hdr + 8, 8);
  memcpy(&sum, hdr + 16, 8);
  if (len == 0 || len > CACHE_MAX_BYTES) goto fail;
  data = malloc((size_t)len);
  if (!data || fread(data, 1, (size_t)len, f) != len || fgetc(f) != EOF)
    goto fail;
  if (fnv1a64(FNV_INIT, data, (size_t)len) != sum) goto fail;
  fclose(f);
  *size = (size_t)len;
  return data;
fail:
  free(data);
  fclose(f);
  return NULL;
}

/* cache_write: best effort; a temporary file renamed into place. */
static void cache_write(const acc_sw_ocl *o) {
  size_t size = 0;
  if (clGetProgramInfo(o->prog, CL_PROGRAM_BINARY_SIZES, sizeof size, &size,
                       NULL) != CL_SUCCESS ||
      size == 0 || size > CACHE_MAX_BYTES)
    return;
  unsigned char *bin = malloc(size);
  if (!bin) return;
  unsigned char *bins[1] = {bin};
  char tmp[1100];
  if (clGetProgramInfo(o->prog, CL_PROGRAM_BINARIES, sizeof bins, bins,
                       NULL) != CL_SUCCESS)
    goto out;
  snprintf(tmp, sizeof tmp, "%s.%ld.%p.tmp", o->cache_path, (long)getpid(),
           (const void *)o);
  FILE *f = fopen(tmp, "wb");
  if (!f) goto out;
  uint64_t len = size, sum = fnv1a64(FNV_INIT, bin, size);
  bool ok = fwrite(CACHE_MAGIC, 1, 8, f) == 8 && fwrite(&len, 8, 1, f) == 1 &&
            fwrite(&sum, 8, 1, f) == 1 && fwrite(bin, 1, size, f) == size;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, o->cache_path) != 0) remove(tmp);
out:
  free(bin);
}

/* ---- program ------------------------------------------------------------ */

static int build(acc_sw_ocl *o, char *err, size_t err_len) {
  cl_int rc = clBuildProgram(o->prog, 1, &o->dev, BUILD_OPTIONS, NULL, NULL);
  if (rc == CL_SUCCESS) return 0;
  /* the log is returned whole or not at all: size it first */
  size_t len = 0;
  char *log = NULL;
  if (clGetProgramBuildInfo(o->prog, o->dev, CL_PROGRAM_BUILD_LOG, 0, NULL,
                            &len) == CL_SUCCESS &&
      len > 0 && (log = malloc(len + 1)) != NULL &&
      clGetProgramBuildInfo(o->prog, o->dev, CL_PROGRAM_BUILD_LOG, len, log,
                            NULL) == CL_SUCCESS)
    log[len] = '\0';
  else if (log)
    log[0] = '\0';
  seterr(err, err_len, "sw.cl: clBuildProgram failed (%d): %s", (int)rc,
         log ? log : "");
  free(log);
  return EMBER_EPLATFORM;
}

/* from_cache: program from the cache file, built; false if missing,
 * damaged or rejected (nothing is left behind). */
static bool from_cache(acc_sw_ocl *o) {
  size_t size;
  unsigned char *bin = cache_read(o->cache_path, &size);
  if (!bin) return false;
  const unsigned char *bins[1] = {bin};
  cl_int status = CL_SUCCESS, rc;
  o->prog = clCreateProgramWithBinary(o->ctx, 1, &o->dev, &size, bins,
                                      &status, &rc);
  free(bin);
  if (rc == CL_SUCCESS && status == CL_SUCCESS &&
      clBuildProgram(o->prog, 1, &o->dev, BUILD_OPTIONS, NULL, NULL) ==
          CL_SUCCESS)
    return true;
  if (o->prog) clReleaseProgram(o->prog);
  o->prog = NULL;
  return false;
}

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
  if (used < MATRIX_LOCAL_BYTES) used = MATRIX_LOCAL_BYTES;
  cl_ulong by_local = local > used ? (local - used) / 16 : 0;
  if (by_local < wg) wg = (size_t)by_local;
  size_t p2 = 1;
  while (p2 * 2 <= wg) p2 *= 2;
  if (wg == 0) {
    seterr(err, err_len, "sw.cl: no work-group size fits the device");
    return EMBER_EPLATFORM;
  }
  o->max_wg = p2;
  o->wg_cap = ACC_SW_OCL_DEFAULT_WG < p2 ? ACC_SW_OCL_DEFAULT_WG : p2;
  return 0;
fail:
  seterr(err, err_len, "sw.cl: kernel setup failed (%d)", (int)rc);
  return EMBER_EPLATFORM;
}

int acc_sw_ocl_create(cl_context ctx, cl_device_id dev, const char *cache_dir,
                      acc_sw_ocl **out, char *err, size_t err_len) {
  if (!ctx || !dev || !out) return EMBER_EINVAL;
  *out = NULL;
  acc_sw_ocl *o = calloc(1, sizeof *o);
  if (!o) return EMBER_ENOMEM;
  o->ctx = ctx;
  o->dev = dev;
  if (cache_dir && *cache_dir) cache_path(o, cache_dir);

  int rc;
  if (o->cache_path[0] && from_cache(o)) {
    o->from_cache = true;
  } else {
    const char *src = acc_sw_cl_source;
    cl_int crc;
    o->prog = clCreateProgramWithSource(ctx, 1, &src, NULL, &crc);
    if (crc != CL_SUCCESS) {
      seterr(err, err_len, "sw.cl: clCreateProgramWithSource failed (%d)",
             (int)crc);
      rc = EMBER_EPLATFORM;
      goto fail;
    }
    if ((rc = build(o, err, err_len)) != 0) goto fail;
    if (o->cache_path[0]) cache_write(o);
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

/* ---- batch ------------------------------------------------------------- */

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

/* encode_set: offsets (count + 1) and encoded residues of a set; checks
 * lengths against limit and every residue. */
static int encode_set(const acc_sw_scoring *s, const acc_seqset *set,
                      uint32_t limit, cl_uint *off, uint8_t **res,
                      size_t *total, size_t *max_len) {
  *total = set->count ? acc_seqset_u32(set->offsets + 4 * (size_t)set->count)
                      : 0;
  *max_len = 0;
  *res = malloc(*total ? *total : 1);
  if (!*res) return EMBER_ENOMEM;
  for (uint32_t k = 0; k <= set->count; k++)
    off[k] = acc_seqset_u32(set->offsets + 4 * (size_t)k);
  for (uint32_t k = 0; k < set->count; k++) {
    size_t len = off[k + 1] - off[k];
    if (len > limit) return EMBER_EINVAL;
    if (len > *max_len) *max_len = len;
  }
  for (size_t i = 0; i < *total; i++) {
    int8_t e = s->encode[set->residues[i]];
    if (e < 0) return EMBER_EINVAL;
    (*res)[i] = (uint8_t)e;
  }
  return 0;
}

#define CL_TRY(call, what)                                               \
  do {                                                                   \
    cl_int rc_ = (call);                                                 \
    if (rc_ != CL_SUCCESS) {                                             \
      seterr(err, err_len, "sw opencl: %s failed (%d)", what, (int)rc_); \
      rc = EMBER_EPLATFORM;                                              \
      goto done;                                                         \
    }                                                                    \
  } while (0)

/* Pairs go to the device in classes of query length, one launch per class
 * and kernel: the work-group of a class is the smallest power of two
 * covering its queries, at least MIN_WG and at most the cap (longer
 * queries go tile by tile). */
#define MIN_WG 32
#define MAX_CLASSES 32
#define NBUF 9      /* device buffers of a batch */
#define NWRITE 6    /* the first NWRITE are written from the host */

/* wg_class: log2 of the work-group size for a query of len residues. */
static int wg_class(const acc_sw_ocl *o, size_t len) {
  int c = 0;
  while (((size_t)1 << c) < MIN_WG) c++;
  while (((size_t)1 << c) < len && ((size_t)1 << c) < o->wg_cap) c++;
  while (((size_t)1 << c) > o->wg_cap) c--;
  return c;
}

/* plan: device buffer sizes of a batch: qres, qoff, rres, roff, matrix,
 * pair order, scratch (only when there are tiles), forward cells, hits. */
static void plan(const acc_sw_ocl *o, size_t n, size_t qmax, size_t qtotal,
                 size_t rtotal, int alphabet, size_t bytes[NBUF]) {
  bytes[0] = qtotal;
  bytes[1] = (n + 1) * sizeof(cl_uint);
  bytes[2] = rtotal;
  bytes[3] = (n + 1) * sizeof(cl_uint);
  bytes[4] = (size_t)alphabet * (size_t)alphabet * sizeof(cl_int);
  bytes[5] = n * sizeof(cl_uint);
  bytes[6] = qmax > o->wg_cap ? 2 * rtotal * sizeof(cl_int) : 0;
  bytes[7] = n * 3 * sizeof(cl_int);
  bytes[8] = n * 5 * sizeof(cl_int);
}
static size_t set_max_len(const acc_seqset *set, size_t *total) {
  size_t max = 0;
  uint32_t prev = acc_seqset_u32(set->offsets);
  for (uint32_t k = 1; k <= set->count; k++) {
    uint32_t cur = acc_seqset_u32(set->offsets + 4 * (size_t)k);
    if (cur - prev > max) max = cur - prev;
    prev = cur;
  }
  *total = prev;
  return max;
}

size_t acc_sw_ocl_batch_bytes(const acc_sw_ocl *o, const acc_seqset *queries,
                              const acc_seqset *refs, int alphabet) {
  if (!o || !queries || !refs || queries->count != refs->count) return 0;
  size_t qtotal, rtotal, bytes[NBUF], sum = 0;
  size_t qmax = set_max_len(queries, &qtotal);
  set_max_len(refs, &rtotal);
  plan(o, queries->count, qmax, qtotal, rtotal, alphabet, bytes);
  for (int i = 0; i < NBUF; i++) sum += bytes[i] ? bytes[i] : 4;
  return sum;
}

static cl_mem buffer(cl_context ctx, cl_mem_flags flags, size_t bytes,
                     cl_int *rc) {
  return clCreateBuffer(ctx, flags, bytes ? bytes : 4, NULL, rc);
}

/* set_args: the arguments every launch of k shares (all but first and
 * the local buffers). */
static cl_int set_args(cl_kernel k, const cl_mem *mem, int size, int open,
                       int ext, bool reverse) {
  cl_int rc = CL_SUCCESS;
  cl_uint a = 0;
  for (int i = 0; i < 5; i++)   /* qres qoff rres roff matrix */
    rc |= clSetKernelArg(k, a++, sizeof(cl_mem), &mem[i]);
  rc |= clSetKernelArg(k, a++, sizeof(cl_int), &size);
  rc |= clSetKernelArg(k, a++, sizeof(cl_int), &open);
  rc |= clSetKernelArg(k, a++, sizeof(cl_int), &ext);
  rc |= clSetKernelArg(k, a++, sizeof(cl_mem), &mem[6]);   /* scratch */
  rc |= clSetKernelArg(k, a++, sizeof(cl_mem), &mem[7]);   /* fwd cells */
  if (reverse) rc |= clSetKernelArg(k, a++, sizeof(cl_mem), &mem[8]);
  rc |= clSetKernelArg(k, a++, sizeof(cl_mem), &mem[5]);   /* order */
  return rc;
}

/* launch: one class of pairs (order[first .. first+count-1]) on k. */
static cl_int launch(cl_command_queue q, cl_kernel k, bool reverse,
                     cl_uint first, size_t count, size_t wg, cl_uint nwait,
                     const cl_event *wait, cl_event *ev) {
  cl_uint a = reverse ? 12 : 11;
  cl_int rc = clSetKernelArg(k, a++, sizeof first, &first);
  rc |= clSetKernelArg(k, a++, 2 * wg * sizeof(cl_int), NULL);
  rc |= clSetKernelArg(k, a++, 2 * wg * sizeof(cl_int), NULL);
  if (rc != CL_SUCCESS) return rc;
  const size_t global = count * wg;
  return clEnqueueNDRangeKernel(q, k, 1, NULL, &global, &wg, nwait, wait, ev);
}

int acc_sw_ocl_run_batch(acc_sw_ocl *o, cl_command_queue q,
                         const acc_sw_scoring *s, const acc_seqset *queries,
                         const acc_seqset *refs, acc_sw_hit *out, char *err,
                         size_t err_len) {
  if (!o || !q || !s || !queries || !refs) return EMBER_EINVAL;
  if (queries->count != refs->count) {
    seterr(err, err_len, "sw opencl: %u queries but %u references",
           queries->count, refs->count);
    return EMBER_EINVAL;
  }
  if (!scoring_ok(s)) {
    seterr(err, err_len, "sw opencl: invalid scoring");
    return EMBER_EINVAL;
  }
  const uint32_t n = queries->count;
  if (n == 0) return 0;
  if (!out) return EMBER_EINVAL;

  int rc = 0;
  cl_uint *qoff = malloc(((size_t)n + 1) * sizeof *qoff);
  cl_uint *roff = malloc(((size_t)n + 1) * sizeof *roff);
  cl_uint *order = malloc((size_t)n * sizeof *order);
  uint8_t *qres = NULL, *rres = NULL;
  cl_int matrix[ACC_SW_MAX_ALPHABET * ACC_SW_MAX_ALPHABET];
  cl_mem mem[NBUF] = {0};
  cl_event wev[NWRITE] = {0}, fev[MAX_CLASSES] = {0}, rev[MAX_CLASSES] = {0};
  cl_event done_ev = NULL;
  size_t qtotal, rtotal, qmax, rmax;
  if (!qoff || !roff || !order) {
    rc = EMBER_ENOMEM;
    goto done;
  }
  if ((rc = encode_set(s, queries, ACC_SW_MAX_QUERY_LEN, qoff, &qres, &qtotal,
                       &qmax)) != 0 ||
      (rc = encode_set(s, refs, ACC_SW_MAX_REF_LEN, roff, &rres, &rtotal,
                       &rmax)) != 0) {
    if (rc == EMBER_EINVAL)
      seterr(err, err_len, "sw opencl: a sequence is too long or holds a "
                           "residue the scoring does not encode");
    goto done;
  }
  for (int i = 0; i < s->size * s->size; i++) matrix[i] = s->matrix[i];

  /* pairs sorted by class (counting sort, stable) */
  size_t start[MAX_CLASSES + 1] = {0};
  for (uint32_t k = 0; k < n; k++)
    start[wg_class(o, qoff[k + 1] - qoff[k]) + 1]++;
  for (int c = 0; c < MAX_CLASSES; c++) start[c + 1] += start[c];
  size_t fill[MAX_CLASSES];
  memcpy(fill, start, sizeof fill);
  for (uint32_t k = 0; k < n; k++)
    order[fill[wg_class(o, qoff[k + 1] - qoff[k])]++] = k;

  size_t bytes[NBUF];
  plan(o, n, qmax, qtotal, rtotal, s->size, bytes);
  cl_int crc;
  const void *host[NWRITE] = {qres, qoff, rres, roff, matrix, order};
  for (int i = 0; i < NBUF; i++) {
    mem[i] = buffer(o->ctx, i < NWRITE ? CL_MEM_READ_ONLY : CL_MEM_READ_WRITE,
                    bytes[i], &crc);
    CL_TRY(crc, "clCreateBuffer");
  }
  cl_uint nwait = 0;
  for (int i = 0; i < NWRITE; i++)
    if (bytes[i]) {
      CL_TRY(clEnqueueWriteBuffer(q, mem[i], CL_FALSE, 0, bytes[i], host[i],
                                  0, NULL, &wev[nwait]),
             "clEnqueueWriteBuffer");
      nwait++;
    }

  const int size = s->size, open = s->gap_open, ext = s->gap_extend;
  CL_TRY(set_args(o->fwd, mem, size, open, ext, false), "clSetKernelArg");
  CL_TRY(set_args(o->rev, mem, size, open, ext, true), "clSetKernelArg");
  cl_uint nrev = 0;
  for (int c = 0; c < MAX_CLASSES; c++) {
    size_t count = start[c + 1] - start[c];
    if (count == 0) continue;
    CL_TRY(launch(q, o->fwd, false, (cl_uint)start[c], count, (size_t)1 << c,
                  nwait, wev, &fev[c]),
           "sw_forward");
    CL_TRY(launch(q, o->rev, true, (cl_uint)start[c], count, (size_t)1 << c,
                  1, &fev[c], &rev[nrev]),
           "sw_reverse");
    nrev++;
  }
  CL_TRY(clEnqueueReadBuffer(q, mem[8], CL_FALSE, 0, bytes[8], out, nrev, rev,
                             &done_ev),
         "clEnqueueReadBuffer");
  CL_TRY(clWaitForEvents(1, &done_ev), "clWaitForEvents");
  for (uint32_t k = 0; k < n; k++)
    if (out[k].score < 0) {
      seterr(err, err_len, "sw opencl: pair %u: reverse pass lost the score",
             k);
      rc = EMBER_EINTERNAL;
      break;
    }

done:
  if (rc != 0 && wev[0]) clFinish(q);   /* no write may still read our memory */
  for (int i = 0; i < NWRITE; i++)
    if (wev[i]) clReleaseEvent(wev[i]);
  for (int c = 0; c < MAX_CLASSES; c++) {
    if (fev[c]) clReleaseEvent(fev[c]);
    if (rev[c]) clReleaseEvent(rev[c]);
  }
  if (done_ev) clReleaseEvent(done_ev);
  for (int i = 0; i < NBUF; i++)
    if (mem[i]) clReleaseMemObject(mem[i]);
  free(qoff);
  free(roff);
  free(order);
  free(qres);
  free(rres);
  return rc;
}
