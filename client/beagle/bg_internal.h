/*
 * bg_internal.h - libember-beagle's insides: the process-wide ember client
 * and its resources (bg_client.c), instances with their queue of plf
 * operations (bg_instance.c), and the BEAGLE calls built on them
 * (bg_api.c, bg_lnl.c).
 *
 * An instance is one plf state block (accelerators/plf/plf_layout.h) on
 * the process's one ember client. Calls that only change the instance are
 * checked here, with BEAGLE's return codes, and queued as plf Ops; a call
 * that needs an answer sends the queue and its own Lnl or Get op as one
 * task and waits for it: one round trip per likelihood.
 */
#ifndef EMBER_BG_INTERNAL_H
#define EMBER_BG_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "accelerators/plf/plf.pb-c.h"
#include "ember/ember.h"
#include "ember_beagle.h"
#include "plf_layout.h"

/* ---- the client and its resources (bg_client.c) ------------------------ */

/* One resource: a platform kind of the NAM (or the embedded engine). */
typedef struct bg_resource {
  const char *kind;       /* "cpu", "opencl", "fpga-emu" */
  int runs_plf;           /* the plf accelerator runs on this kind */
  long support, required; /* BEAGLE flags */
} bg_resource;

/* bg_client - the process's ember client, connected on first use to
 * $EMBER_NAM (an address, or "embedded"), else embedded. NULL (with a
 * message on stderr) when it cannot connect. */
ember_client *bg_client(void);

/* bg_resources - the resource table (BEAGLE's resource numbers are its
 * indices); never empty. Valid until beagleFinalize. */
const bg_resource *bg_resources(size_t *n);

/* bg_close_client - drop the client and the resource lists (beagleFinalize,
 * once no instance is left). */
void bg_close_client(void);

/* bg_warn - one line of the debug log, "libember-beagle: ...", when
 * $EMBER_BEAGLE_DEBUG asks for it (1: stderr; a path: that file); nothing
 * otherwise. Failures reach the program as BEAGLE's return codes. */
void bg_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* bg_vector_flag - BEAGLE_FLAG_VECTOR_AVX where kind's plf kernels run
 * AVX2 or AVX-512 on this CPU, else BEAGLE_FLAG_VECTOR_NONE. */
long bg_vector_flag(const char *kind);

/* bg_default_threads - threads over patterns for an instance whose program
 * did not say (beagleSetCPUThreadCount): the CPUs this process may run on
 * (1 to 64). The plf executor starts them only where they pay. */
unsigned bg_default_threads(void);

/* bg_ember_error - a BEAGLE code for an ember error. */
int bg_ember_error(int ember_rc);

/* ---- instances (bg_instance.c) ----------------------------------------- */

/* A chunk of the queue's memory: everything the pending ops point to. */
typedef struct bg_chunk bg_chunk;

#define BG_MAX_INPUTS 16        /* input blocks per task (ember_submit) */

typedef struct bg_instance {
  pthread_mutex_t lock;
  int id;
  /* the shape, BEAGLE's counts and the plf layout */
  int tips, buffers, states, patterns, categories;
  int eigens, matrices, scale_buffers, partitions_max;
  plf_shape shape;
  plf_layout layout;
  Ember__Plf__Instance pinst;
  long flags;                   /* as details.flags reports them */
  int single, log_scalers, inv_transposed;
  int resource;
  const char *kind;             /* the resource's platform kind */
  /* SCALING_ALWAYS or AUTO: every update rescales into the dest's own
   * scale buffer (dest - tips) and adds its children's, as BEAGLE does;
   * the last scale buffer is the edge's sum. The program passes none. */
  int auto_scale;
  unsigned threads;             /* beagleSetCPUThreadCount, else
                                   bg_default_threads() */
  ember_block *block;           /* the state block */
  /* the queue */
  bg_chunk *arena;
  Ember__Plf__Op **ops;
  size_t n_ops, cap_ops;
  size_t pending_bytes;         /* about what the packed ops take */
  ember_block *inputs[BG_MAX_INPUTS];
  size_t n_inputs;
  /* what the client keeps itself */
  double *pattern_weights;      /* [patterns], 1 until set */
  uint8_t *scale_raw;           /* RAW scalers: 1 where a buffer holds a
                                   node's factors (its log kept in plf) */
  double *site_cache;           /* site lnls of the last log-likelihood */
  int site_cache_valid;
  /* the last edge log-likelihood with derivatives: their sums, and per
   * site (beagleGetDerivatives, beagleGetSiteDerivatives) */
  double last_first, last_second;
  double *site_first, *site_second;
  int have_derivatives;
  /* the program asks for site lnls after its log-likelihoods (BEAST does,
   * every time): they come back with the lnl, not in a round trip of
   * their own; off again after BG_SITE_UNUSED_MAX results nobody read */
  int site_with_lnl;
  int site_unused;
  int partition_count;          /* beagleSetPatternPartitions; 0: none */
  double last_lnl;
  int have_last_lnl;
} bg_instance;

/* bg_get - the instance, locked; NULL when there is none of that number.
 * bg_put unlocks it. */
bg_instance *bg_get(int id);
void bg_put(bg_instance *in);

/* bg_instance_create / bg_instance_destroy: beagleCreateInstance's and
 * beagleFinalizeInstance's work (bg_instance.c); flags as the details
 * report them (SCALING_ALWAYS or AUTO: scaling by the instance). */
int bg_instance_create(const plf_shape *shape, int tips, int buffers,
                       int resource, const char *kind, long flags,
                       int log_scalers, int inv_transposed, unsigned threads,
                       bg_instance **out, char *err, size_t err_len);
int bg_instance_finalize(int id);
int bg_finalize_all(void);

/* Queue memory: zeroed bytes that live until the queue is sent; a copy of
 * n items. NULL when out of memory. */
void *bg_alloc(bg_instance *in, size_t size);
void *bg_copy(bg_instance *in, const void *src, size_t size);

/* bg_push - append a new op (its oneof to be set by the caller); NULL when
 * out of memory. extra_bytes: about what its payload packs to. */
Ember__Plf__Op *bg_push(bg_instance *in, size_t extra_bytes);

/* bg_derivatives_here - whether the instance's platform kind computes
 * derivatives along an edge (cpu and fpga-emu do, opencl does not). */
static inline int bg_derivatives_here(const bg_instance *in) {
  return strcmp(in->kind, "opencl") != 0;
}

/* bg_scale_op - queue a scale op (accumulate, remove, reset or copy of
 * scale buffers into cumulative, on partition or all: -1), checked as
 * BEAGLE checks them. A BEAGLE code. */
int bg_scale_op(bg_instance *in, Ember__Plf__ScaleOp__Kind kind,
                const int *scales, int count, int cumulative, int partition);

/* bg_input - hand size bytes as an input block of the next task, for a
 * large payload; fills *slice. Returns 0 or a BEAGLE error. */
int bg_input(bg_instance *in, const void *data, size_t size,
             Ember__Plf__InputSlice **slice);

/* bg_flush - send the queue as one task and wait. With result non-NULL,
 * *result gets the unpacked Result (free it with
 * ember__plf__result__free_unpacked). An empty queue sends nothing (and
 * gives no result). Returns 0 or a BEAGLE error; the queue is empty after
 * either. */
int bg_flush(bg_instance *in, Ember__Plf__Result **result);

/* bg_maybe_flush - send the queue when it has grown large. */
int bg_maybe_flush(bg_instance *in);

/* Index checks: BEAGLE_ERROR_OUT_OF_RANGE unless 0 <= i < n (or i is
 * BEAGLE_OP_NONE where allowed). */
static inline int bg_in_range(int i, int n) { return i >= 0 && i < n; }
static inline int bg_opt_in_range(int i, int n) {
  return i == BEAGLE_OP_NONE || (i >= 0 && i < n);
}

/* ---- log-likelihoods (bg_lnl.c) ---------------------------------------- */

/* One term of a root or edge log-likelihood, BEAGLE's indices. */
typedef struct bg_term {
  int buffer, child, matrix, weights, frequencies, cumulative, partition;
  int first, second;   /* derivative matrices across the edge, or -1 */
} bg_term;

/* bg_lnl - the sum over terms (by_partition: one value per term in
 * per_term too, and their sum in *sum), queued ops first. count > 1
 * subsets of one sum (BEAGLE's "multi" form) are combined per site here.
 * Returns BEAGLE's code (BEAGLE_ERROR_FLOATING_POINT when the sum is not
 * finite). */
int bg_lnl(bg_instance *in, const bg_term *terms, int n, int by_partition,
           double *per_term, double *sum);
int bg_lnl_multi(bg_instance *in, const bg_term *terms, int n, int scaled,
                 double *sum);

/* bg_lnl_derivatives - one edge term with its derivative matrices: the
 * log-likelihood into *sum, the sums of its first and second derivatives
 * along the edge into *first and *second (each may be NULL); the site
 * values kept for beagleGetSiteLogLikelihoods and
 * beagleGetSiteDerivatives. BEAGLE's code. */
int bg_lnl_derivatives(bg_instance *in, const bg_term *term, double *sum,
                       double *first, double *second);

#endif
