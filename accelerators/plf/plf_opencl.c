/*
 * plf_opencl.c - host side of the plf accelerator on OpenCL (plf.cl,
 * embedded at build time as plf_cl_source.h): programs and their binary
 * cache, and the run: a task's operations queued in order on the state
 * buffer (plf_opencl.h).
 *
 * Where things are: every region of the state block (plf_layout.h) is a
 * byte offset into the one state buffer, given to the kernels as an
 * argument; small payloads (eigen systems, vectors, tip states, partials
 * and matrix values, partition ranges, flags) are written into it with
 * clEnqueueWriteBuffer from memory that stays valid until the run ends
 * (the task's own arrays, or copies kept by the run); input slices are
 * copied from the input buffers with clEnqueueCopyBuffer (or converted to
 * float by plf_convert in single precision).
 *
 * What the host mirrors: the flags word, the tip kinds and the partition
 * ranges are read back once at the start (not at all on a scratch
 * instance, which is zero-filled) and kept up to date as the task sets
 * them, so that the host picks each kernel's child kind and pattern range
 * itself. Pattern weights are read back only when a log-likelihood needs
 * the ones an earlier task set.
 *
 * Work-items: P(t) one work-group per (matrix, category), its items over
 * the S x S entries (exp(lambda r t) once per group in local memory);
 * partials one item per (category, pattern, state) of the op's pattern
 * range, then, when rescaling, one per pattern (max over categories and
 * states, log into the scale buffer, added to the cumulative one); scale
 * sums and log-likelihoods one per pattern. Launches go in chunks of 2^24
 * items (or groups).
 *
 * Without fp64 (single precision only): P(t) is computed on the host, as
 * the CPU executor does, from the eigen systems and rate sets the task
 * set or, the first time one is needed, read back.
 *
 * Log-likelihoods: plf_root / plf_edge write each pattern's site value
 * into the instance's site lnl region; the host reads the term's patterns
 * back and sums weight * site in double in pattern order, as the CPU
 * executor does, once everything has run.
 */
#include "plf_opencl.h"

#include <math.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cl_cache.h"
#include "ember/ember_errors.h"
#include "errbuf.h"
#include "plf_cl_source.h"
#include "plf_exec.h"
#include "plf_kernel.h"
#include "plf_result.h"
#include "plf_task.h"


/* work-items per group (at most; the kernel and device may allow fewer) */
#define PLF_WG 64
/* work-items (or groups, for plf_matrices) per launch */
#define PLF_CHUNK ((uint64_t)1 << 24)

enum {
  K_MATRICES,
  K_PARTIALS,
  K_RESCALE,
  K_SCALE_SUM,
  K_ROOT,
  K_EDGE,
  K_CONVERT,
  K_COUNT
};

static const char *const kernel_names[K_COUNT] = {
    "plf_matrices", "plf_partials", "plf_rescale", "plf_scale_sum",
    "plf_root",     "plf_edge",     "plf_convert"};

enum { PREC_DOUBLE, PREC_SINGLE, PREC_COUNT };

typedef struct plf_prog {
  cl_program prog;
  cl_kernel k[K_COUNT];
  size_t wg[K_COUNT];
  bool from_cache;
  char options[256];
  char cache_path[1024];
} plf_prog;

struct plf_ocl {
  cl_context ctx;
  cl_device_id dev;
  int fp64;                   /* model values in double (cl_khr_fp64) */
  plf_prog prog[PREC_COUNT];  /* [PREC_DOUBLE] only with fp64 */
  char name[256];
};

static void device_string(cl_device_id dev, cl_device_info what, char *buf,
                          size_t len) {
  buf[0] = '\0';
  if (clGetDeviceInfo(dev, what, len - 1, buf, NULL) != CL_SUCCESS)
    buf[0] = '\0';
  buf[len - 1] = '\0';
}

/* ---- programs ------------------------------------------------------------ */

static int make_kernels(const plf_ocl *o, plf_prog *p, char *err,
                        size_t err_len) {
  size_t dev_wg = 1, items[16] = {0};
  cl_uint dims = 0;
  cl_int rc = clGetDeviceInfo(o->dev, CL_DEVICE_MAX_WORK_GROUP_SIZE,
                              sizeof dev_wg, &dev_wg, NULL);
  if (rc == CL_SUCCESS)
    rc = clGetDeviceInfo(o->dev, CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS,
                         sizeof dims, &dims, NULL);
  if (rc == CL_SUCCESS && dims >= 1 && dims <= 16)
    rc = clGetDeviceInfo(o->dev, CL_DEVICE_MAX_WORK_ITEM_SIZES,
                         dims * sizeof *items, items, NULL);
  if (rc != CL_SUCCESS) goto fail;
  if (items[0] && items[0] < dev_wg) dev_wg = items[0];
  for (int i = 0; i < K_COUNT; i++) {
    p->k[i] = clCreateKernel(p->prog, kernel_names[i], &rc);
    if (rc != CL_SUCCESS) goto fail;
    size_t kwg = 1;
    rc = clGetKernelWorkGroupInfo(p->k[i], o->dev, CL_KERNEL_WORK_GROUP_SIZE,
                                  sizeof kwg, &kwg, NULL);
    if (rc != CL_SUCCESS) goto fail;
    size_t wg = PLF_WG;
    if (kwg < wg) wg = kwg;
    if (dev_wg < wg) wg = dev_wg;
    size_t p2 = 1;
    while (p2 * 2 <= wg) p2 *= 2;
    p->wg[i] = p2;
  }
  return 0;
fail:
  return errbuf_printf(err, err_len, EMBER_EPLATFORM,
                       "plf.cl (%s): kernel setup failed (%d)", p->options,
                       (int)rc);
}

static int build_program(const plf_ocl *o, plf_prog *p, int prec,
                         const char *cache_dir, bool exact_div, char *err,
                         size_t err_len) {
  snprintf(p->options, sizeof p->options,
           "-cl-std=CL1.2 -DPLF_DOUBLE=%d -DPLF_FP64=%d%s",
           prec == PREC_DOUBLE, o->fp64,
           prec == PREC_SINGLE && exact_div
               ? " -cl-fp32-correctly-rounded-divide-sqrt"
               : "");
  if (cache_dir && *cache_dir)
    acc_cl_cache_name(p->cache_path, sizeof p->cache_path, cache_dir, "plf",
                      o->dev, acc_plf_cl_source, p->options);
  if (p->cache_path[0] && (p->prog = acc_cl_cache_load(o->ctx, o->dev,
                                                       p->cache_path,
                                                       p->options))) {
    p->from_cache = true;
  } else {
    const char *src = acc_plf_cl_source;
    cl_int rc;
    p->prog = clCreateProgramWithSource(o->ctx, 1, &src, NULL, &rc);
    if (rc != CL_SUCCESS) {
      p->prog = NULL;
      return errbuf_printf(err, err_len, EMBER_EPLATFORM,
                           "plf.cl: clCreateProgramWithSource failed (%d)",
                           (int)rc);
    }
    rc = clBuildProgram(p->prog, 1, &o->dev, p->options, NULL, NULL);
    if (rc != CL_SUCCESS) {
      char what[300]; /* "plf.cl (OPTIONS)" */
      snprintf(what, sizeof what, "plf.cl (%s)", p->options);
      return acc_cl_build_failed(p->prog, o->dev, rc, what, err, err_len);
    }
    if (p->cache_path[0]) acc_cl_cache_store(p->prog, p->cache_path);
  }
  return make_kernels(o, p, err, err_len);
}

/* device_has: ext is among the device's extensions. */
static bool device_has(cl_device_id dev, const char *ext) {
  size_t len = 0;
  if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, 0, NULL, &len) !=
          CL_SUCCESS ||
      len == 0)
    return false;
  char *s = malloc(len + 1);
  if (!s) return false;
  bool found = false;
  if (clGetDeviceInfo(dev, CL_DEVICE_EXTENSIONS, len, s, NULL) ==
      CL_SUCCESS) {
    s[len] = '\0';
    size_t n = strlen(ext);
    for (char *at = strstr(s, ext); at && !found; at = strstr(at + 1, ext))
      found = (at == s || at[-1] == ' ') &&
              (at[n] == '\0' || at[n] == ' ');
  }
  free(s);
  return found;
}

int plf_ocl_create(cl_context ctx, cl_device_id dev, const char *cache_dir,
                   int use_fp64, plf_ocl **out, char *err, size_t err_len) {
  if (!ctx || !dev || !out) return EMBER_EINVAL;
  *out = NULL;
  plf_ocl *o = calloc(1, sizeof *o);
  if (!o) return EMBER_ENOMEM;
  o->ctx = ctx;
  o->dev = dev;
  device_string(dev, CL_DEVICE_NAME, o->name, sizeof o->name);
  int rc;
  /* the kernels read the state's little-endian values as they are */
  cl_bool little = CL_TRUE;
  if (clGetDeviceInfo(dev, CL_DEVICE_ENDIAN_LITTLE, sizeof little, &little,
                      NULL) == CL_SUCCESS &&
      !little) {
    rc = errbuf_printf(err, err_len, EMBER_EPLATFORM,
                       "plf.cl: big-endian device not supported");
    goto fail;
  }
  o->fp64 = use_fp64 && device_has(dev, "cl_khr_fp64");
  cl_device_fp_config single = 0;
  bool exact_div =
      clGetDeviceInfo(dev, CL_DEVICE_SINGLE_FP_CONFIG, sizeof single, &single,
                      NULL) == CL_SUCCESS &&
      (single & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT);
  for (int prec = 0; prec < PREC_COUNT; prec++) {
    if (prec == PREC_DOUBLE && !o->fp64) continue;
    rc = build_program(o, &o->prog[prec], prec, cache_dir, exact_div, err,
                       err_len);
    if (rc) goto fail;
  }
  *out = o;
  return 0;
fail:
  plf_ocl_destroy(o);
  return rc;
}

void plf_ocl_destroy(plf_ocl *o) {
  if (!o) return;
  for (int prec = 0; prec < PREC_COUNT; prec++) {
    plf_prog *p = &o->prog[prec];
    for (int i = 0; i < K_COUNT; i++)
      if (p->k[i]) clReleaseKernel(p->k[i]);
    if (p->prog) clReleaseProgram(p->prog);
  }
  free(o);
}

bool plf_ocl_has_double(const plf_ocl *o) {
  return o && o->prog[PREC_DOUBLE].prog != NULL;
}

bool plf_ocl_loaded_from_cache(const plf_ocl *o) {
  if (!o) return false;
  for (int prec = 0; prec < PREC_COUNT; prec++)
    if (o->prog[prec].prog && !o->prog[prec].from_cache) return false;
  return true;
}

/* ---- a run ------------------------------------------------------------- */

/* Host memory a queued command reads or writes: freed at the end. */
typedef struct keep {
  struct keep *next;
  max_align_t data[];
} keep;

/* A log-likelihood term: its patterns' site values (read back), and the
 * pattern weights in force (NULL: all 1). */
typedef struct lnl_term {
  const double *site;
  const double *pw;
  uint32_t p0, p1;
} lnl_term;

/* An Lnl operation: its terms, in order. */
typedef struct lnl_rec {
  size_t first, count;
  bool by_partition;
} lnl_rec;

/* A Get in single precision: floats read back, widened at the end. */
typedef struct widen {
  const float *src;
  double *dst;
  size_t n;
} widen;

typedef struct run {
  const plf_ocl *o;
  const plf_prog *pg;
  int fp64;                   /* the program's model values are double */
  cl_command_queue q;
  bool ooo;                   /* out of order: a barrier after each */
  bool enqueued;              /* something may still be queued */
  cl_mem st;
  const plf_task *t;
  const plf_shape *s;
  const plf_layout *l;
  const acc_block *in;
  void *const *dev_in;
  size_t n_in;
  /* the mirror */
  uint32_t flags;
  int32_t *tip_kinds;         /* compact values */
  uint32_t *ranges;           /* partitions x 2, when PLF_SET_PARTITIONS */
  const double *pw;           /* pattern weights in force, NULL: all 1 */
  bool pw_on_device;          /* set by an earlier task, not read yet */
  /* without fp64: eigen systems and rate sets on the host, for P(t)
   * (NULL: not here yet; the task's own arrays, or read back) */
  const double **eig_vec, **eig_inv, **eig_val;
  const double **rates;
  keep *kept;
  lnl_term *terms;
  size_t n_terms;
  lnl_rec *lnls;
  size_t n_lnls;
  widen *widens;
  size_t n_widens;
  plf_answers *a;
  size_t n_site, n_values;
  char *err;
  size_t err_len;
} run;

static const int32_t kind_states = 1, kind_partials = 0;

static void *kept(run *r, size_t bytes) {
  keep *k = malloc(sizeof *k + (bytes ? bytes : 1));
  if (!k) return NULL;
  k->next = r->kept;
  r->kept = k;
  return k->data;
}

/* These two return their constant themselves, not errbuf_printf's value:
 * inlined, the constant shows the compiler that their callers' error paths
 * return (GCC's -Wmaybe-uninitialized in op_lnl). */
static int no_memory(run *r) {
  errbuf_printf(r->err, r->err_len, EMBER_ENOMEM, "plf opencl: out of memory");
  return EMBER_ENOMEM;
}

static int cl_fail(run *r, const char *what, cl_int rc) {
  errbuf_printf(r->err, r->err_len, EMBER_EPLATFORM,
                "plf opencl: %s failed (%d)", what, (int)rc);
  return EMBER_EPLATFORM;
}

/* queued: the result of an enqueue; on an out-of-order queue, a barrier
 * keeps the next command after it. */
static int queued(run *r, cl_int rc, const char *what) {
  if (rc != CL_SUCCESS) return cl_fail(r, what, rc);
  r->enqueued = true;
  if (r->ooo &&
      (rc = clEnqueueBarrierWithWaitList(r->q, 0, NULL, NULL)) != CL_SUCCESS)
    return cl_fail(r, "clEnqueueBarrierWithWaitList", rc);
  return 0;
}

/* write: bytes at src (valid until the run ends) to the state at off. */
static int write_at(run *r, uint64_t off, size_t bytes, const void *src) {
  if (!bytes) return 0;
  return queued(r, clEnqueueWriteBuffer(r->q, r->st, CL_FALSE, (size_t)off,
                                        bytes, src, 0, NULL, NULL),
                "clEnqueueWriteBuffer");
}

/* write_copy: the same from a copy of src (which may change). */
static int write_copy(run *r, uint64_t off, size_t bytes, const void *src) {
  void *c = kept(r, bytes);
  if (!c) return no_memory(r);
  memcpy(c, src, bytes);
  return write_at(r, off, bytes, c);
}

/* read_at: bytes of the state at off into dst (valid until the run
 * ends), once the commands before have run. */
static int read_at(run *r, uint64_t off, size_t bytes, void *dst) {
  if (!bytes) return 0;
  return queued(r, clEnqueueReadBuffer(r->q, r->st, CL_FALSE, (size_t)off,
                                       bytes, dst, 0, NULL, NULL),
                "clEnqueueReadBuffer");
}

static int copy_within(run *r, cl_mem src, uint64_t src_off, uint64_t off,
                       size_t bytes) {
  if (!bytes) return 0;
  return queued(r, clEnqueueCopyBuffer(r->q, src, r->st, (size_t)src_off,
                                       (size_t)off, bytes, 0, NULL, NULL),
                "clEnqueueCopyBuffer");
}

static int fill_zero(run *r, uint64_t off, size_t bytes, size_t pattern) {
  static const uint64_t zero = 0;
  if (!bytes) return 0;
  return queued(r, clEnqueueFillBuffer(r->q, r->st, &zero, pattern,
                                       (size_t)off, bytes, 0, NULL, NULL),
                "clEnqueueFillBuffer");
}

/* The flags word, after the mirror changed. */
static int write_flags(run *r) {
  return write_copy(r, r->l->flags, sizeof r->flags, &r->flags);
}

/* Kernel arguments, set in order; the first failure is kept. */
typedef struct kargs {
  cl_kernel k;
  cl_uint i;
  cl_int rc;
} kargs;

static void arg(kargs *a, size_t size, const void *v) {
  if (a->rc == CL_SUCCESS) a->rc = clSetKernelArg(a->k, a->i, size, v);
  a->i++;
}
static void arg_mem(kargs *a, cl_mem m) { arg(a, sizeof m, &m); }
static void arg_int(kargs *a, int64_t v) {
  cl_int x = (cl_int)v;
  arg(a, sizeof x, &x);
}
static void arg_u64(kargs *a, uint64_t v) {
  cl_ulong x = v;
  arg(a, sizeof x, &x);
}

static kargs args_of(run *r, int kernel) {
  kargs a = {r->pg->k[kernel], 0, CL_SUCCESS};
  arg_mem(&a, r->st);
  return a;
}

/* launch: the kernel of a (arguments up to base set) over n items, or n
 * work-groups when groups (plf_matrices), in chunks. */
static int launch(run *r, int kernel, kargs *a, uint64_t n, bool groups) {
  if (a->rc != CL_SUCCESS) return cl_fail(r, "clSetKernelArg", a->rc);
  if (n == 0) return 0;
  const size_t wg = r->pg->wg[kernel];
  const cl_uint base_at = a->i;
  cl_ulong total = n;
  cl_int rc = clSetKernelArg(a->k, base_at + 1, sizeof total, &total);
  if (rc != CL_SUCCESS) return cl_fail(r, "clSetKernelArg", rc);
  for (uint64_t base = 0; base < n; base += PLF_CHUNK) {
    uint64_t m = n - base < PLF_CHUNK ? n - base : PLF_CHUNK;
    size_t global = groups ? (size_t)m * wg
                           : (size_t)((m + wg - 1) / wg * wg);
    cl_ulong b = base;
    rc = clSetKernelArg(a->k, base_at, sizeof b, &b);
    if (rc != CL_SUCCESS) return cl_fail(r, "clSetKernelArg", rc);
    int e = queued(r, clEnqueueNDRangeKernel(r->q, a->k, 1, NULL, &global,
                                             &wg, 0, NULL, NULL),
                   kernel_names[kernel]);
    if (e) return e;
  }
  return 0;
}

/* plf_range (plf_exec.c) on the mirror. */
static void range_of(const run *r, int32_t partition, uint32_t *p0,
                     uint32_t *p1) {
  *p0 = 0;
  *p1 = r->s->patterns;
  if (partition < 0) return;
  if (!(r->flags & PLF_SET_PARTITIONS)) {
    if (partition != 0) *p1 = 0;
    return;
  }
  *p0 = r->ranges[2 * partition];
  *p1 = r->ranges[2 * partition + 1];
}

/* plf_task_prepare refused every op that writes or always reads the
 * partials of a states-only tip; child_of checks reads. */
static uint64_t partials_off(const run *r, uint32_t b) {
  return plf_partials_at(r->l, b);
}
static uint64_t matrix_off(const run *r, uint32_t m) {
  return r->l->matrices + (uint64_t)m * r->l->matrix_stride;
}
static uint64_t scale_off(const run *r, uint32_t i) {
  return r->l->scales + (uint64_t)i * r->l->scale_stride;
}
static uint64_t tip_states_off(const run *r, uint32_t tip) {
  return r->l->tip_states + (uint64_t)tip * r->s->patterns * sizeof(int32_t);
}

/* A child as the kernels take it: its partials or tip states (states 1)
 * and the edge's matrices. */
typedef struct child {
  uint64_t x, m;
  int states;
} child;

static int child_of(const run *r, uint32_t b, uint32_t m, child *c) {
  *c = (child){0, matrix_off(r, m), 0};
  if (b < r->s->compact && r->tip_kinds[b]) {
    c->x = tip_states_off(r, b);
    c->states = 1;
  } else if (b < r->s->states_only) {
    return errbuf_printf(r->err, r->err_len, EMBER_EPARAM,
                         "plf opencl: tip %u holds states only (no partials) "
                         "and its states are not set",
                         b);
  } else {
    c->x = partials_off(r, b);
  }
  return 0;
}

/* An input slice's device buffer (*mem) or, without one, its host bytes
 * (*host). */
static int slice_of(run *r, const Ember__Plf__InputSlice *from, cl_mem *mem,
                    const uint8_t **host) {
  *mem = NULL;
  *host = NULL;
  if (from->input >= r->n_in) {
    return errbuf_printf(r->err, r->err_len, EMBER_EINVAL,
                         "plf opencl: input %u of %zu", from->input, r->n_in);
  }
  if (r->dev_in && r->dev_in[from->input]) {
    *mem = (cl_mem)r->dev_in[from->input];
    return 0;
  }
  if (r->in && r->in[from->input].data) {
    *host = r->in[from->input].data + from->offset;
    return 0;
  }
  return errbuf_printf(
      r->err, r->err_len, EMBER_EFORMAT,
      "plf opencl: input %u is neither on the device nor in host memory",
      from->input);
}

/* ---- operations ------------------------------------------------------------ */

static int op_tip_states(run *r, const Ember__Plf__SetTipStates *m) {
  uint64_t off = tip_states_off(r, m->tip);
  size_t bytes = (size_t)r->s->patterns * sizeof(int32_t);
  int rc;
  if (m->from) {
    cl_mem mem;
    const uint8_t *host;
    if ((rc = slice_of(r, m->from, &mem, &host))) return rc;
    rc = mem ? copy_within(r, mem, m->from->offset, off, bytes)
             : write_at(r, off, bytes, host);
  } else {
    rc = write_at(r, off, bytes, m->states.data);
  }
  if (rc) return rc;
  r->tip_kinds[m->tip] = 1;
  return write_at(r, r->l->tip_kinds + (uint64_t)m->tip * sizeof(int32_t),
                  sizeof kind_states, &kind_states);
}

static int op_partials(run *r, const Ember__Plf__SetPartials *m) {
  const plf_shape *s = r->s;
  size_t ps = (size_t)s->patterns * s->states;
  size_t n = m->tip ? ps : ps * s->categories;   /* values given */
  uint32_t reps = m->tip ? s->categories : 1;     /* times written */
  size_t real = r->l->real;
  uint64_t dest = partials_off(r, m->buffer);
  cl_mem mem = NULL;
  const uint8_t *host = NULL;
  int rc = 0;
  if (m->from && (rc = slice_of(r, m->from, &mem, &host))) return rc;
  if (mem && s->single) {
    /* doubles on the device: converted there */
    kargs a = args_of(r, K_CONVERT);
    arg_u64(&a, dest);
    arg_mem(&a, mem);
    arg_u64(&a, m->from->offset / 4);
    arg_u64(&a, n);
    rc = launch(r, K_CONVERT, &a, (uint64_t)n * reps, false);
  } else if (mem) {
    for (uint32_t c = 0; c < reps && !rc; c++)
      rc = copy_within(r, mem, m->from->offset, dest + c * n * real,
                       n * real);
  } else {
    const void *src = host ? (const void *)host : (const void *)m->values;
    if (s->single || (host && ((uintptr_t)host % sizeof(double)))) {
      /* converted (or aligned) on the host */
      void *buf = kept(r, n * real);
      if (!buf) return no_memory(r);
      for (size_t i = 0; i < n; i++) {
        double v;
        memcpy(&v, (const uint8_t *)src + i * sizeof v, sizeof v);
        if (s->single)
          ((float *)buf)[i] = (float)v;
        else
          ((double *)buf)[i] = v;
      }
      src = buf;
    }
    for (uint32_t c = 0; c < reps && !rc; c++)
      rc = write_at(r, dest + c * n * real, n * real, src);
  }
  if (rc) return rc;
  if (m->buffer < s->compact) {
    r->tip_kinds[m->buffer] = 0;
    rc = write_at(r, r->l->tip_kinds + (uint64_t)m->buffer * sizeof(int32_t),
                  sizeof kind_partials, &kind_partials);
  }
  return rc;
}

static int op_eigen(run *r, const Ember__Plf__SetEigen *m) {
  size_t ss = (size_t)r->s->states * r->s->states;
  if (r->eig_vec) {
    r->eig_vec[m->eigen] = m->vectors;
    r->eig_inv[m->eigen] = m->inverse;
    r->eig_val[m->eigen] = m->values;
  }
  uint64_t e = r->l->eigens + (uint64_t)m->eigen * r->l->eigen_stride;
  int rc = write_at(r, e, ss * sizeof(double), m->vectors);
  if (!rc) rc = write_at(r, e + ss * sizeof(double), ss * sizeof(double),
                         m->inverse);
  if (!rc) rc = write_at(r, e + 2 * ss * sizeof(double),
                         r->s->states * sizeof(double), m->values);
  return rc;
}

static int op_vector(run *r, const Ember__Plf__SetVector *m) {
  const plf_shape *s = r->s;
  const plf_layout *l = r->l;
  uint64_t off;
  switch (m->kind) {
  case EMBER__PLF__SET_VECTOR__KIND__FREQUENCIES:
    off = l->frequencies + (uint64_t)m->index * s->states * sizeof(double);
    break;
  case EMBER__PLF__SET_VECTOR__KIND__CATEGORY_WEIGHTS:
    off = l->cat_weights + (uint64_t)m->index * s->categories * sizeof(double);
    break;
  case EMBER__PLF__SET_VECTOR__KIND__CATEGORY_RATES:
    off = l->cat_rates + (uint64_t)m->index * s->categories * sizeof(double);
    if (r->rates) r->rates[m->index] = m->values;
    break;
  default: /* PATTERN_WEIGHTS */
    off = l->pattern_weights;
    r->pw = m->values;
    r->pw_on_device = false;
    r->flags |= PLF_SET_PATTERN_WEIGHTS;
    break;
  }
  int rc = write_at(r, off, m->n_values * sizeof(double), m->values);
  if (!rc && m->kind == EMBER__PLF__SET_VECTOR__KIND__PATTERN_WEIGHTS)
    rc = write_flags(r);
  return rc;
}

/* plf_set_partitions (plf_exec.c): a partition without patterns gets the
 * empty range [P, P). */
static int op_partitions(run *r, const Ember__Plf__SetPartitions *m) {
  const plf_shape *s = r->s;
  uint32_t *ranges = kept(r, 2 * (size_t)s->partitions * sizeof *ranges);
  if (!ranges) return no_memory(r);
  for (uint32_t i = 0; i < s->partitions; i++)
    ranges[2 * i] = ranges[2 * i + 1] = s->patterns;
  for (uint32_t p = 0; p < s->patterns; p++) {
    uint32_t i = m->of[p];
    if (ranges[2 * i] == s->patterns) ranges[2 * i] = p;
    ranges[2 * i + 1] = p + 1;
  }
  r->ranges = ranges;
  r->flags |= PLF_SET_PARTITIONS;
  int rc = write_at(r, r->l->partition_ranges,
                    2 * (size_t)s->partitions * sizeof *ranges, ranges);
  if (!rc) rc = write_flags(r);
  return rc;
}

static int op_matrix(run *r, const Ember__Plf__SetMatrix *m) {
  uint64_t off = matrix_off(r, m->matrix);
  if (!r->s->single)
    return write_at(r, off, m->n_values * sizeof(double), m->values);
  float *f = kept(r, m->n_values * sizeof *f);
  if (!f) return no_memory(r);
  for (size_t i = 0; i < m->n_values; i++) f[i] = (float)m->values[i];
  return write_at(r, off, m->n_values * sizeof *f, f);
}

/* small_buffer: a new read-only buffer holding bytes at src (valid until
 * the run ends), written on the queue; released by the caller once its
 * kernel is queued (OpenCL keeps it until the kernel is done). */
static int small_buffer(run *r, const void *src, size_t bytes, cl_mem *out) {
  cl_int crc;
  *out = clCreateBuffer(r->o->ctx, CL_MEM_READ_ONLY, bytes, NULL, &crc);
  if (crc != CL_SUCCESS) {
    *out = NULL;
    return cl_fail(r, "clCreateBuffer", crc);
  }
  return queued(r, clEnqueueWriteBuffer(r->q, *out, CL_FALSE, 0, bytes, src,
                                        0, NULL, NULL),
                "clEnqueueWriteBuffer");
}

static uint32_t eigen_of(const Ember__Plf__UpdateMatrices *m, size_t i) {
  return m->n_eigens == 0 ? 0 : m->n_eigens == 1 ? m->eigens[0]
                                                 : m->eigens[i];
}

static uint32_t rate_set_of(const Ember__Plf__UpdateMatrices *m, size_t i) {
  return m->n_rate_sets == 0 ? 0 : m->n_rate_sets == 1 ? m->rate_sets[0]
                                                       : m->rate_sets[i];
}

/* P(t) on the host, without fp64: as the CPU executor computes it (in
 * double, then rounded to float), from the eigen systems and rate sets
 * this task set or, the first time one is needed, read back (the queue
 * is waited for then). */
static int host_matrices(run *r, const Ember__Plf__UpdateMatrices *m) {
  const plf_shape *s = r->s;
  const plf_layout *l = r->l;
  size_t ss = (size_t)s->states * s->states;
  bool wait = false;
  int rc = 0;
  for (size_t i = 0; i < m->n_matrices && !rc; i++) {
    uint32_t e = eigen_of(m, i), rs = rate_set_of(m, i);
    if (!r->eig_vec[e]) {
      double *buf = kept(r, l->eigen_stride);
      if (!buf) return no_memory(r);
      rc = read_at(r, l->eigens + (uint64_t)e * l->eigen_stride,
                   l->eigen_stride, buf);
      r->eig_vec[e] = buf;
      r->eig_inv[e] = buf + ss;
      r->eig_val[e] = buf + 2 * ss;
      wait = true;
    }
    if (!rc && !r->rates[rs]) {
      double *buf = kept(r, s->categories * sizeof(double));
      if (!buf) return no_memory(r);
      rc = read_at(r, l->cat_rates + (uint64_t)rs * s->categories *
                                         sizeof(double),
                   s->categories * sizeof(double), buf);
      r->rates[rs] = buf;
      wait = true;
    }
  }
  if (rc) return rc;
  cl_int crc;
  if (wait && (crc = clFinish(r->q)) != CL_SUCCESS)
    return cl_fail(r, "reading eigen systems back", crc);
  size_t n = (size_t)s->categories * ss;
  double *p = malloc(n * sizeof *p);
  if (!p) return no_memory(r);
  for (size_t i = 0; i < m->n_matrices && !rc; i++) {
    uint32_t e = eigen_of(m, i);
    float *f = kept(r, n * sizeof *f);
    if (!f) {
      rc = no_memory(r);
      break;
    }
    plf_transition_matrices_d((int)s->states, (int)s->categories,
                              r->eig_vec[e], r->eig_inv[e], r->eig_val[e],
                              r->rates[rate_set_of(m, i)], m->lengths[i], p,
                              NULL, NULL);
    for (size_t k = 0; k < n; k++) f[k] = (float)p[k];
    rc = write_at(r, matrix_off(r, m->matrices[i]), n * sizeof *f, f);
  }
  free(p);
  return rc;
}

/* P(t) on the device: one work-group per (matrix, category). The batch's
 * matrix, eigen and rate-set indices and its lengths go in two small
 * buffers made for the launch. */
static int op_update_matrices(run *r, const Ember__Plf__UpdateMatrices *m) {
  const plf_shape *s = r->s;
  size_t n = m->n_matrices;
  if (n == 0) return 0;
  if (!r->fp64) return host_matrices(r, m);
  uint32_t *idx = kept(r, 3 * n * sizeof *idx);
  if (!idx) return no_memory(r);
  for (size_t i = 0; i < n; i++) {
    idx[3 * i] = m->matrices[i];
    idx[3 * i + 1] = eigen_of(m, i);
    idx[3 * i + 2] = rate_set_of(m, i);
  }
  cl_mem bidx = NULL, blens = NULL;
  int rc = small_buffer(r, idx, 3 * n * sizeof *idx, &bidx);
  if (!rc) rc = small_buffer(r, m->lengths, n * sizeof(double), &blens);
  if (!rc) {
    const plf_layout *l = r->l;
    kargs a = args_of(r, K_MATRICES);
    arg_u64(&a, l->eigens);
    arg_u64(&a, l->eigen_stride);
    arg_u64(&a, l->cat_rates);
    arg_u64(&a, l->matrices);
    arg_u64(&a, l->matrix_stride);
    arg_int(&a, s->states);
    arg_int(&a, s->categories);
    arg_mem(&a, bidx);
    arg_mem(&a, blens);
    arg(&a, (size_t)s->states * (r->fp64 ? sizeof(double) : sizeof(float)),
        NULL);
    rc = launch(r, K_MATRICES, &a, (uint64_t)n * s->categories, true);
  }
  if (bidx) clReleaseMemObject(bidx);
  if (blens) clReleaseMemObject(blens);
  return rc;
}

static int op_update_partials(run *r, const Ember__Plf__UpdatePartials *m) {
  const plf_shape *s = r->s;
  for (size_t i = 0; i < m->n_ops; i++) {
    const Ember__Plf__PartialsOp *o = m->ops[i];
    uint32_t p0, p1;
    range_of(r, o->partition, &p0, &p1);
    uint32_t np = p1 - p0;
    child c1, c2;
    int rc;
    if ((rc = child_of(r, o->child1, o->matrix1, &c1)) ||
        (rc = child_of(r, o->child2, o->matrix2, &c2)))
      return rc;
    if (np == 0) continue;
    uint64_t dest = partials_off(r, o->dest);
    kargs a = args_of(r, K_PARTIALS);
    arg_int(&a, s->states);
    arg_int(&a, s->patterns);
    arg_int(&a, p0);
    arg_int(&a, np);
    arg_u64(&a, dest);
    arg_u64(&a, c1.x);
    arg_int(&a, c1.states);
    arg_u64(&a, c1.m);
    arg_u64(&a, c2.x);
    arg_int(&a, c2.states);
    arg_u64(&a, c2.m);
    rc = launch(r, K_PARTIALS, &a, (uint64_t)s->categories * np * s->states,
                false);
    if (rc) return rc;
    if (o->scale_write < 0) continue;
    kargs b = args_of(r, K_RESCALE);
    arg_int(&b, s->states);
    arg_int(&b, s->patterns);
    arg_int(&b, s->categories);
    arg_int(&b, p0);
    arg_u64(&b, dest);
    arg_u64(&b, scale_off(r, (uint32_t)o->scale_write));
    arg_u64(&b, o->cumulative_scale >= 0
                    ? scale_off(r, (uint32_t)o->cumulative_scale)
                    : 0);
    arg_int(&b, o->cumulative_scale >= 0);
    if ((rc = launch(r, K_RESCALE, &b, np, false))) return rc;
  }
  return 0;
}

static int op_scale(run *r, const Ember__Plf__ScaleOp *m) {
  uint32_t p0, p1;
  range_of(r, m->partition, &p0, &p1);
  size_t real = r->l->real;
  uint64_t cum = scale_off(r, m->cumulative);
  size_t bytes = (size_t)(p1 - p0) * real;
  if (p1 == p0) return 0;
  switch (m->kind) {
  case EMBER__PLF__SCALE_OP__KIND__RESET:
    return fill_zero(r, cum + p0 * real, bytes, real);
  case EMBER__PLF__SCALE_OP__KIND__COPY:
    return copy_within(r, r->st, scale_off(r, m->scales[0]) + p0 * real,
                       cum + p0 * real, bytes);
  default:
    break;
  }
  if (m->n_scales == 0) return 0;
  cl_mem idx;
  int rc = small_buffer(r, m->scales, m->n_scales * sizeof *m->scales, &idx);
  if (rc) return rc;
  kargs a = args_of(r, K_SCALE_SUM);
  arg_u64(&a, cum);
  arg_u64(&a, r->l->scales);
  arg_u64(&a, r->l->scale_stride);
  arg_mem(&a, idx);
  arg_int(&a, (int64_t)m->n_scales);
  arg_int(&a, m->kind == EMBER__PLF__SCALE_OP__KIND__ACCUMULATE ? 1 : -1);
  arg_int(&a, p0);
  rc = launch(r, K_SCALE_SUM, &a, p1 - p0, false);
  clReleaseMemObject(idx);
  return rc;
}

/* The pattern weights an Lnl uses now; those of an earlier task are read
 * back the first time. */
static int pattern_weights(run *r, const double **pw) {
  if (r->pw_on_device) {
    size_t bytes = (size_t)r->s->patterns * sizeof(double);
    double *buf = kept(r, bytes);
    if (!buf) return no_memory(r);
    int rc = read_at(r, r->l->pattern_weights, bytes, buf);
    if (rc) return rc;
    r->pw = buf;
    r->pw_on_device = false;
  }
  *pw = r->pw;
  return 0;
}

static int op_lnl(run *r, const Ember__Plf__Lnl *m) {
  const plf_shape *s = r->s;
  const plf_layout *l = r->l;
  const double *pw;
  int rc = pattern_weights(r, &pw);
  if (rc) return rc;
  lnl_rec *rec = &r->lnls[r->n_lnls++];
  *rec = (lnl_rec){r->n_terms, m->n_terms, m->by_partition};
  for (size_t i = 0; i < m->n_terms; i++) {
    const Ember__Plf__LnlTerm *t = m->terms[i];
    uint32_t p0, p1;
    range_of(r, t->partition, &p0, &p1);
    lnl_term *term = &r->terms[r->n_terms++];
    *term = (lnl_term){NULL, pw, p0, p1};
    child c = {0};
    if (t->child >= 0 &&
        (rc = child_of(r, (uint32_t)t->child, (uint32_t)t->matrix, &c)))
      return rc;
    if (p1 == p0) continue;
    uint64_t w = l->cat_weights + (uint64_t)t->weights * s->categories *
                                      sizeof(double);
    uint64_t f = l->frequencies + (uint64_t)t->frequencies * s->states *
                                      sizeof(double);
    int has_cum = t->cumulative_scale >= 0;
    uint64_t cum = has_cum ? scale_off(r, (uint32_t)t->cumulative_scale) : 0;
    int kernel = t->child >= 0 ? K_EDGE : K_ROOT;
    kargs a = args_of(r, kernel);
    arg_int(&a, s->states);
    arg_int(&a, s->patterns);
    arg_int(&a, s->categories);
    arg_int(&a, p0);
    arg_u64(&a, partials_off(r, t->buffer));
    if (kernel == K_EDGE) {
      arg_u64(&a, c.x);
      arg_int(&a, c.states);
      arg_u64(&a, c.m);
    }
    arg_u64(&a, w);
    arg_u64(&a, f);
    arg_u64(&a, cum);
    arg_int(&a, has_cum);
    arg_u64(&a, l->site_lnl);
    if ((rc = launch(r, kernel, &a, p1 - p0, false))) return rc;
    size_t bytes = (size_t)(p1 - p0) * sizeof(double);
    double *site = kept(r, bytes);
    if (!site) return no_memory(r);
    if ((rc = read_at(r, l->site_lnl + (uint64_t)p0 * sizeof(double), bytes,
                      site)))
      return rc;
    term->site = site;
  }
  if (m->site_lnl) {
    rc = read_at(r, l->site_lnl, s->patterns * sizeof(double),
                 r->a->site_lnl + r->n_site);
    r->n_site += s->patterns;
  }
  return rc;
}

static int op_get(run *r, const Ember__Plf__Get *m) {
  const plf_shape *s = r->s;
  uint64_t off;
  size_t n;
  double *dst = r->a->values + r->n_values;
  switch (m->kind) {
  case EMBER__PLF__GET__KIND__PARTIALS:
    off = partials_off(r, m->index);
    n = (size_t)s->categories * s->patterns * s->states;
    break;
  case EMBER__PLF__GET__KIND__SCALE:
    off = scale_off(r, m->index);
    n = s->patterns;
    break;
  case EMBER__PLF__GET__KIND__MATRIX:
    off = matrix_off(r, m->index);
    n = (size_t)s->categories * s->states * s->states;
    break;
  default: /* SITE_LNL, kept in double */
    r->n_values += s->patterns;
    return read_at(r, r->l->site_lnl, s->patterns * sizeof(double), dst);
  }
  r->n_values += n;
  if (!s->single) return read_at(r, off, n * sizeof(double), dst);
  float *f = kept(r, n * sizeof *f);
  if (!f) return no_memory(r);
  r->widens[r->n_widens++] = (widen){f, dst, n};
  return read_at(r, off, n * sizeof *f, f);
}

static int run_op(run *r, const Ember__Plf__Op *op) {
  switch (op->op_case) {
  case EMBER__PLF__OP__OP_TIP_STATES:
    return op_tip_states(r, op->tip_states);
  case EMBER__PLF__OP__OP_PARTIALS:
    return op_partials(r, op->partials);
  case EMBER__PLF__OP__OP_EIGEN:
    return op_eigen(r, op->eigen);
  case EMBER__PLF__OP__OP_VECTOR:
    return op_vector(r, op->vector);
  case EMBER__PLF__OP__OP_PARTITIONS:
    return op_partitions(r, op->partitions);
  case EMBER__PLF__OP__OP_MATRIX:
    return op_matrix(r, op->matrix);
  case EMBER__PLF__OP__OP_UPDATE_MATRICES:
    return op_update_matrices(r, op->update_matrices);
  case EMBER__PLF__OP__OP_UPDATE_PARTIALS:
    return op_update_partials(r, op->update_partials);
  case EMBER__PLF__OP__OP_SCALE:
    return op_scale(r, op->scale);
  case EMBER__PLF__OP__OP_LNL:
    return op_lnl(r, op->lnl);
  case EMBER__PLF__OP__OP_GET:
    return op_get(r, op->get);
  default:
    return errbuf_printf(
        r->err, r->err_len, EMBER_EINTERNAL,
        "plf opencl: an operation of unknown kind"); /* plf_task_prepare refused
                                                        it */
  }
}

/* ---- the run's frame --------------------------------------------------------- */

/* Whether an UpdateMatrices op asks for dP/dt or d2P/dt2. */
static bool has_matrix_derivatives(const plf_task *t) {
  for (size_t i = 0; i < t->params->n_ops; i++) {
    const Ember__Plf__Op *op = t->params->ops[i];
    if (op->op_case == EMBER__PLF__OP__OP_UPDATE_MATRICES &&
        (op->update_matrices->n_first_derivatives ||
         op->update_matrices->n_second_derivatives))
      return true;
  }
  return false;
}

/* What the task needs of the mirror and how many records it makes. */
typedef struct needs {
  bool kinds, ranges;
  size_t terms, lnls, gets;
} needs;

static needs needs_of(const plf_task *t) {
  needs n = {0};
  for (size_t i = 0; i < t->params->n_ops; i++) {
    const Ember__Plf__Op *op = t->params->ops[i];
    switch (op->op_case) {
    case EMBER__PLF__OP__OP_UPDATE_PARTIALS:
      n.kinds = true;
      for (size_t k = 0; k < op->update_partials->n_ops; k++)
        if (op->update_partials->ops[k]->partition >= 0) n.ranges = true;
      break;
    case EMBER__PLF__OP__OP_SCALE:
      if (op->scale->partition >= 0) n.ranges = true;
      break;
    case EMBER__PLF__OP__OP_LNL:
      n.kinds = true;
      n.lnls++;
      n.terms += op->lnl->n_terms;
      for (size_t k = 0; k < op->lnl->n_terms; k++)
        if (op->lnl->terms[k]->partition >= 0) n.ranges = true;
      break;
    case EMBER__PLF__OP__OP_GET:
      n.gets++;
      break;
    default:
      break;
    }
  }
  return n;
}

static bool mem_holds(cl_mem m, uint64_t bytes) {
  size_t size = 0;
  return clGetMemObjectInfo(m, CL_MEM_SIZE, sizeof size, &size, NULL) ==
             CL_SUCCESS &&
         size >= bytes;
}

/* start: the instance's buffer, after the wait events; zero-filled for a
 * scratch instance, else its mirrored parts read back. */
static int start(run *r, const needs *nd, const acc_run_ctx *ctx,
                 cl_uint n_wait, const cl_event *wait) {
  const plf_layout *l = r->l;
  bool scratch = false;
  if (ctx && ctx->n_states == 1 && ctx->dev_states && ctx->dev_states[0]) {
    r->st = (cl_mem)ctx->dev_states[0];
  } else if (ctx && ctx->n_states == 0 && ctx->dev_scratch) {
    r->st = (cl_mem)ctx->dev_scratch;
    scratch = true;
  } else {
    return errbuf_printf(r->err, r->err_len, EMBER_EINTERNAL,
                         "plf opencl: no instance to run on");
  }
  if (!mem_holds(r->st, l->total)) {
    return errbuf_printf(
        r->err, r->err_len, EMBER_EINVAL,
        "plf opencl: the instance's buffer is smaller than its %llu bytes",
        (unsigned long long)l->total);
  }
  cl_command_queue_properties props = 0;
  cl_int crc = clGetCommandQueueInfo(r->q, CL_QUEUE_PROPERTIES, sizeof props,
                                     &props, NULL);
  if (crc != CL_SUCCESS) return cl_fail(r, "clGetCommandQueueInfo", crc);
  r->ooo = (props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE) != 0;
  r->tip_kinds = kept(r, (r->s->compact ? r->s->compact : 1) *
                             sizeof *r->tip_kinds);
  if (!r->tip_kinds) return no_memory(r);
  memset(r->tip_kinds, 0, r->s->compact * sizeof *r->tip_kinds);
  if (!r->fp64) {
    size_t ne = r->s->eigens, nr = r->s->rate_sets;
    if (!(r->eig_vec = kept(r, 3 * ne * sizeof *r->eig_vec)) ||
        !(r->rates = kept(r, nr * sizeof *r->rates)))
      return no_memory(r);
    memset(r->eig_vec, 0, 3 * ne * sizeof *r->eig_vec);
    memset(r->rates, 0, nr * sizeof *r->rates);
    r->eig_inv = r->eig_vec + ne;
    r->eig_val = r->eig_vec + 2 * ne;
  }
  int rc;
  if (n_wait &&
      (rc = queued(r, clEnqueueBarrierWithWaitList(r->q, n_wait, wait, NULL),
                   "clEnqueueBarrierWithWaitList")))
    return rc;
  if (scratch) return fill_zero(r, 0, (size_t)l->total, sizeof(uint32_t));

  if ((rc = read_at(r, l->flags, sizeof r->flags, &r->flags))) return rc;
  if (nd->kinds &&
      (rc = read_at(r, l->tip_kinds, r->s->compact * sizeof *r->tip_kinds,
                    r->tip_kinds)))
    return rc;
  if (nd->ranges) {
    size_t bytes = 2 * (size_t)r->s->partitions * sizeof *r->ranges;
    if (!(r->ranges = kept(r, bytes))) return no_memory(r);
    if ((rc = read_at(r, l->partition_ranges, bytes, r->ranges))) return rc;
  }
  if ((crc = clFinish(r->q)) != CL_SUCCESS)
    return cl_fail(r, "reading the instance's flags", crc);
  r->enqueued = false;
  r->pw_on_device = (r->flags & PLF_SET_PATTERN_WEIGHTS) != 0;
  return 0;
}

/* finish: the answers from what was read back. */
static void finish(run *r) {
  for (size_t i = 0; i < r->n_widens; i++)
    for (size_t k = 0; k < r->widens[i].n; k++)
      r->widens[i].dst[k] = (double)r->widens[i].src[k];
  size_t n_lnl = 0;
  for (size_t i = 0; i < r->n_lnls; i++) {
    const lnl_rec *rec = &r->lnls[i];
    double sum = 0;
    for (size_t k = 0; k < rec->count; k++) {
      const lnl_term *t = &r->terms[rec->first + k];
      double v = 0;
      for (uint32_t p = t->p0; p < t->p1; p++) {
        double site = t->site[p - t->p0];
        double w = 1;
        if (t->pw) w = r->s->single ? (double)(float)t->pw[p] : t->pw[p];
        v += w * site;
      }
      if (!isfinite(v)) r->a->non_finite++;
      if (rec->by_partition) r->a->lnl[n_lnl++] = v;
      sum += v;
    }
    if (!rec->by_partition) r->a->lnl[n_lnl++] = sum;
  }
}

static int run_task(run *r, const needs *nd, const acc_run_ctx *ctx,
                    cl_uint n_wait, const cl_event *wait) {
  int rc = start(r, nd, ctx, n_wait, wait);
  const atomic_int *cancel = ctx ? ctx->cancel : NULL;
  for (size_t i = 0; !rc && i < r->t->params->n_ops; i++) {
    if (cancel && atomic_load(cancel)) {
      return errbuf_printf(r->err, r->err_len, EMBER_ECANCELED,
                           "plf opencl: canceled after %zu of %zu operations",
                           i, r->t->params->n_ops);
    }
    rc = run_op(r, r->t->params->ops[i]);
    if (!rc && r->enqueued) {
      cl_int crc = clFlush(r->q);
      if (crc != CL_SUCCESS) rc = cl_fail(r, "clFlush", crc);
    }
  }
  if (rc) return rc;
  cl_int crc = clFinish(r->q);
  if (crc != CL_SUCCESS) return cl_fail(r, "the task's commands", crc);
  r->enqueued = false;
  finish(r);
  return 0;
}

static int plf_ocl_run(void *state, void *queue, void *prepared,
                       const acc_block *inputs, void *const *dev_inputs,
                       size_t n_inputs, void *const *wait_events,
                       unsigned n_wait, const acc_run_ctx *ctx,
                       acc_output *out, char *err, size_t err_len) {
  const plf_ocl *o = state;
  const plf_task *t = prepared;
  if (!o || !queue || !t || !out || (n_wait && !wait_events) ||
      (n_inputs && !inputs && !dev_inputs)) {
    return errbuf_printf(err, err_len, EMBER_EINVAL,
                         "plf opencl: invalid arguments");
  }
  const int prec = t->shape.single ? PREC_SINGLE : PREC_DOUBLE;
  if (!o->prog[prec].prog) {
    return errbuf_printf(err, err_len, EMBER_ENOPLATFORM,
                         "plf opencl: %s has no double precision "
                         "(cl_khr_fp64): a double-precision instance cannot "
                         "run there; use single precision or another platform",
                         o->name);
  }
  if (t->n_derivatives || has_matrix_derivatives(t))
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "plf opencl: derivatives along an edge run on the "
                         "cpu and fpga-emu platforms, not on %s",
                         o->name);
  needs nd = needs_of(t);
  plf_answers a = {0};
  run r = {.o = o, .pg = &o->prog[prec], .fp64 = o->fp64,
           .q = (cl_command_queue)queue, .t = t, .s = &t->shape,
           .l = &t->layout, .in = inputs, .dev_in = dev_inputs,
           .n_in = n_inputs, .a = &a, .err = err, .err_len = err_len};
  a.lnl = calloc(t->n_lnl ? t->n_lnl : 1, sizeof *a.lnl);
  a.site_lnl = calloc(t->n_site_lnl ? t->n_site_lnl : 1, sizeof *a.site_lnl);
  a.values = calloc(t->n_values ? t->n_values : 1, sizeof *a.values);
  r.terms = calloc(nd.terms ? nd.terms : 1, sizeof *r.terms);
  r.lnls = calloc(nd.lnls ? nd.lnls : 1, sizeof *r.lnls);
  r.widens = calloc(nd.gets ? nd.gets : 1, sizeof *r.widens);
  int rc;
  if (!a.lnl || !a.site_lnl || !a.values || !r.terms || !r.lnls ||
      !r.widens)
    rc = no_memory(&r);
  else
    rc = run_task(&r, &nd, ctx, n_wait, (const cl_event *)wait_events);
  /* nothing may still read or write the memory freed below */
  if (r.enqueued) clFinish(r.q);
  if (!rc && (rc = plf_pack_result(&a, t, out)) != 0) no_memory(&r);
  while (r.kept) {
    keep *next = r.kept->next;
    free(r.kept);
    r.kept = next;
  }
  free(r.terms);
  free(r.lnls);
  free(r.widens);
  free(a.lnl);
  free(a.site_lnl);
  free(a.values);
  return rc;
}

static int ops_create(void *context, void *device, const char *cache_dir,
                      void **state, char *err, size_t err_len) {
  if (!state) return EMBER_EINVAL;
  plf_ocl *o = NULL;
  int rc = plf_ocl_create((cl_context)context, (cl_device_id)device,
                          cache_dir, 1, &o, err, err_len);
  *state = o;
  return rc;
}

static void ops_destroy(void *state) { plf_ocl_destroy(state); }

const acc_opencl_ops acc_plf_opencl_ops = {
    .create = ops_create,
    .destroy = ops_destroy,
    .run = plf_ocl_run,
};
