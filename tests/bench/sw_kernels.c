/*
 * sw_kernels.c - GCUPS of each sw kernel variant on the test data.
 *
 *   sw_kernels [SECONDS] [THREADS] [VARIANT]
 *
 * For every variant this CPU supports, runs whole batches for about SECONDS
 * of CPU time (default 2) on each data set and prints giga cell updates per
 * second, per CPU second (steady on a shared machine) and per wall second,
 * counting the qlen x rlen cells of each pair once (the reverse pass that
 * finds the starts is extra work inside that time). THREADS (default 1)
 * splits each batch into slices run on that many threads, as the engine
 * does. VARIANT (scalar, sse41, avx2, avx512) limits the run to one.
 * In the same run, on the same pairs and one thread, it measures the field's
 * libraries: parasail's striped 16-bit SW (score and ends only, and with
 * its traceback for the starts) and SSW (score, ends and starts); then the
 * OpenCL kernel on every OpenCL device found (wall-clock GCUPS).
 * Prints figures only; asserts nothing.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <parasail.h>
#include <ssw.h>

#include "ember/ember_errors.h"
#include "sw/sw.h"
#ifdef EMBER_HAVE_OPENCL
#include "sw/sw_opencl.h"
#endif
#include "sw_fasta.h"

#define DATA EMBER_SOURCE_DIR "/tests/data/sw/"

typedef struct dataset {
  const char *label;
  acc_sw_scoring scoring;
  uint8_t *qblock, *rblock;
  acc_seqset q, r;
  uint64_t cells;
} dataset;

typedef struct slice {
  acc_sw_isa isa;
  const dataset *d;
  size_t first, count;
  acc_sw_hit *out;
  size_t redone;
  int rc;
} slice;

static double clock_s(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int build(dataset *d, const swt_fasta *fq, const size_t *qi,
                 const swt_fasta *fr, const size_t *ri, size_t n) {
  size_t qs, rs;
  d->qblock = swt_seqset_list(fq, qi, n, &qs);
  d->rblock = swt_seqset_list(fr, ri, n, &rs);
  if (!d->qblock || !d->rblock) return -1;
  acc_block qb = {d->qblock, qs}, rb = {d->rblock, rs};
  char err[200];
  if (acc_seqset_view(&qb, &d->q, err, sizeof err) ||
      acc_seqset_view(&rb, &d->r, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", d->label, err);
    return -1;
  }
  d->cells = 0;
  for (size_t i = 0; i < n; i++)
    d->cells += (uint64_t)fq->lens[qi[i]] * fr->lens[ri[i]];
  return 0;
}

static void *run_slice(void *arg) {
  slice *s = arg;
  s->rc = acc_sw_run_batch_isa(s->isa, &s->d->scoring, &s->d->q, &s->d->r,
                               s->first, s->count, s->out, NULL, &s->redone);
  return NULL;
}

static void bench(const dataset *d, acc_sw_isa isa, double seconds,
                  int threads) {
  size_t n = d->q.count;
  acc_sw_hit *hits = malloc(n * sizeof *hits);
  slice sl[64];
  pthread_t tid[64];
  size_t runs = 0, redone = 0;
  double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  double t, cpu;
  do {
    for (int k = 0; k < threads; k++) {
      size_t a = n * (size_t)k / (size_t)threads;
      size_t b = n * (size_t)(k + 1) / (size_t)threads;
      sl[k] = (slice){isa, d, a, b - a, hits + a, 0, 0};
      if (threads == 1)
        run_slice(&sl[k]);
      else
        pthread_create(&tid[k], NULL, run_slice, &sl[k]);
    }
    for (int k = 0; k < threads; k++) {
      if (threads > 1) pthread_join(tid[k], NULL);
      if (sl[k].rc) {
        printf("%s %s: error %s\n", d->label, acc_sw_isa_name(isa),
               ember_strerror(sl[k].rc));
        free(hits);
        return;
      }
      redone += sl[k].redone;
    }
    runs++;
    t = clock_s(CLOCK_MONOTONIC) - t0;
    cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
  } while (cpu < seconds);
  double cells = (double)d->cells * (double)runs;
  printf("%-28s %-7s %7.2f GCUPS per CPU second, %7.2f wall  (%zu runs of "
         "%zu pairs, %zu redone in 32-bit per run)\n",
         d->label, acc_sw_isa_name(isa), cells / cpu / 1e9, cells / t / 1e9,
         runs, n, redone / runs);
  free(hits);
}

/* ---- the field's libraries, side by side ------------------------------- */

enum peer { PARASAIL_ENDS, PARASAIL_TRACE, SSW_STARTS, N_PEERS };
static const char *const peer_names[N_PEERS] = {
  "parasail sw_striped_16 (score, ends)",
  "parasail sw_trace_striped_16 + cigar (starts)",
  "SSW ssw_align (score, ends, starts)",
};

static void align_peer(enum peer which, const dataset *d,
                       const parasail_matrix_t *pm, const int8_t *ssw_matrix,
                       const uint8_t *q, size_t ql, const uint8_t *r, size_t rl) {
  const acc_sw_scoring *sc = &d->scoring;
  if (which == PARASAIL_ENDS || which == PARASAIL_TRACE) {
    parasail_result_t *res =
        which == PARASAIL_ENDS
            ? parasail_sw_striped_16((const char *)q, (int)ql, (const char *)r,
                                     (int)rl, sc->gap_open, sc->gap_extend, pm)
            : parasail_sw_trace_striped_16((const char *)q, (int)ql,
                                           (const char *)r, (int)rl,
                                           sc->gap_open, sc->gap_extend, pm);
    if (which == PARASAIL_TRACE)
      parasail_cigar_free(parasail_result_get_cigar(res, (const char *)q, (int)ql,
                                                    (const char *)r, (int)rl, pm));
    parasail_result_free(res);
    return;
  }
  int8_t qn[65536], rn[65536];
  if (ql > sizeof qn || rl > sizeof rn) return;
  for (size_t i = 0; i < ql; i++) qn[i] = sc->encode[q[i]];
  for (size_t i = 0; i < rl; i++) rn[i] = sc->encode[r[i]];
  s_profile *prof = ssw_init(qn, (int32_t)ql, ssw_matrix, sc->size, 2);
  s_align *a = ssw_align(prof, rn, (int32_t)rl, (uint8_t)sc->gap_open,
                         (uint8_t)sc->gap_extend, 0x08, 0, 0, 15);
  align_destroy(a);
  init_destroy(prof);
}

static void bench_peers(const dataset *d, const parasail_matrix_t *pm,
                        double seconds) {
  int8_t ssw_matrix[ACC_SW_MAX_ALPHABET * ACC_SW_MAX_ALPHABET];
  for (int i = 0; i < d->scoring.size * d->scoring.size; i++)
    ssw_matrix[i] = (int8_t)d->scoring.matrix[i];
  for (int w = 0; w < N_PEERS; w++) {
    size_t runs = 0;
    double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID), cpu;
    do {
      for (uint32_t i = 0; i < d->q.count; i++) {
        const uint8_t *q, *r;
        size_t ql, rl;
        acc_seqset_get(&d->q, i, &q, &ql);
        acc_seqset_get(&d->r, i, &r, &rl);
        align_peer((enum peer)w, d, pm, ssw_matrix, q, ql, r, rl);
      }
      runs++;
      cpu = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
    } while (cpu < seconds);
    printf("%-28s %-46s %7.2f GCUPS per CPU second\n", d->label, peer_names[w],
           (double)d->cells * (double)runs / cpu / 1e9);
  }
}

#ifdef EMBER_HAVE_OPENCL
/* ---- the OpenCL kernel, on every device the ICD loader finds ----------- */

static void bench_opencl_device(const dataset *sets, int n_sets, cl_device_id dev,
                                double seconds) {
  char name[128] = "", err[256] = "";
  clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof name - 1, name, NULL);
  cl_int rc;
  cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &rc);
  if (rc != CL_SUCCESS) return;
  cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &rc);
  acc_sw_ocl *o = NULL;
  if (rc != CL_SUCCESS || acc_sw_ocl_create(ctx, dev, NULL, &o, err, sizeof err) != 0) {
    printf("opencl %s: %s\n", name, err);
  } else {
    for (int s = 0; s < n_sets; s++) {
      const dataset *d = &sets[s];
      acc_sw_hit *out = calloc(d->q.count, sizeof *out);
      size_t runs = 0;
      double t0 = clock_s(CLOCK_MONOTONIC), t;
      do {
        if (acc_sw_ocl_run_batch(o, q, &d->scoring, &d->q, &d->r, out, err,
                                 sizeof err) != 0) {
          printf("%s opencl: %s\n", d->label, err);
          break;
        }
        runs++;
      } while ((t = clock_s(CLOCK_MONOTONIC) - t0) < seconds);
      if (runs)
        printf("%-28s opencl %-39.39s %7.2f GCUPS wall\n", d->label, name,
               (double)d->cells * (double)runs / t / 1e9);
      free(out);
    }
  }
  acc_sw_ocl_destroy(o);
  if (q) clReleaseCommandQueue(q);
  clReleaseContext(ctx);
}

static void bench_opencl(const dataset *sets, int n_sets, double seconds) {
  cl_platform_id plats[8];
  cl_uint np = 0;
  if (clGetPlatformIDs(8, plats, &np) != CL_SUCCESS) np = 0;
  for (cl_uint p = 0; p < np && p < 8; p++) {
    cl_device_id ids[8];
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 8, ids, &nd) != CL_SUCCESS)
      continue;
    for (cl_uint k = 0; k < nd && k < 8; k++)
      bench_opencl_device(sets, n_sets, ids[k], seconds);
  }
}
#endif

int main(int argc, char **argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 2.0;
  int threads = argc > 2 ? atoi(argv[2]) : 1;
  if (threads < 1 || threads > 64) threads = 1;
  acc_sw_isa only = ACC_SW_ISA_COUNT;
  if (argc > 3 && acc_sw_isa_parse(argv[3], &only) != 0) {
    fprintf(stderr, "unknown variant %s\n", argv[3]);
    return 2;
  }
  setvbuf(stdout, NULL, _IOLBF, 0);

  swt_fasta dq, dr, lq, lr, glob;
  if (swt_fasta_read(DATA "dna_queries.fa", &dq) ||
      swt_fasta_read(DATA "dna_refs.fa", &dr) ||
      swt_fasta_read(DATA "dna_long_queries.fa", &lq) ||
      swt_fasta_read(DATA "dna_long_refs.fa", &lr) ||
      swt_fasta_read(DATA "emboss_test_globins630.fa", &glob))
    return 1;

  dataset sets[3];
  memset(sets, 0, sizeof sets);
  char err[200];
  size_t *a = malloc(dq.n * sizeof *a), *b = malloc(glob.n * sizeof *b);
  for (size_t i = 0; i < dq.n; i++) a[i] = i;
  sets[0].label = "dna 150 x 300-600, 3/-3/6/1";
  acc_sw_scoring_dna(3, -3, 6, 1, &sets[0].scoring, err, sizeof err);
  if (build(&sets[0], &dq, a, &dr, a, dq.n)) return 1;

  for (size_t i = 0; i < lq.n; i++) a[i] = i;
  sets[1].label = "dna long 10-12.5 kbp";
  sets[1].scoring = sets[0].scoring;
  if (build(&sets[1], &lq, a, &lr, a, lq.n)) return 1;

  for (size_t i = 0; i + 1 < glob.n; i++) {
    a[i] = i;
    b[i] = i + 1;
  }
  sets[2].label = "globins, BLOSUM62 11/1";
  acc_sw_matrix m;
  acc_sw_matrix_builtin("BLOSUM62", &m);
  acc_sw_scoring_matrix(&m, 11, 1, &sets[2].scoring, err, sizeof err);
  if (build(&sets[2], &glob, a, &glob, b, glob.n - 1)) return 1;

  printf("sw kernels, %d thread(s), ~%.1f s per figure; default variant "
         "here: %s\n", threads, seconds,
         acc_sw_isa_name(acc_sw_isa_selected()));
  for (int s = 0; s < 3; s++)
    for (int isa = 0; isa < ACC_SW_ISA_COUNT; isa++)
      if (acc_sw_isa_supported((acc_sw_isa)isa) &&
          (only == ACC_SW_ISA_COUNT || only == (acc_sw_isa)isa))
        bench(&sets[s], (acc_sw_isa)isa, seconds, threads);

  /* the peers: one thread, the short-read and protein sets (SSW clips
   * scores at 16 bits, so the long pairs are left out) */
  parasail_matrix_t *dna = parasail_matrix_create("ACGT", 3, -3);
  bench_peers(&sets[0], dna, seconds);
  bench_peers(&sets[2], parasail_matrix_lookup("blosum62"), seconds);
  parasail_matrix_free(dna);
#ifdef EMBER_HAVE_OPENCL
  bench_opencl(sets, 3, seconds);
#endif

  for (int s = 0; s < 3; s++) {
    free(sets[s].qblock);
    free(sets[s].rblock);
  }
  free(a);
  free(b);
  swt_fasta_free(&dq);
  swt_fasta_free(&dr);
  swt_fasta_free(&lq);
  swt_fasta_free(&lr);
  swt_fasta_free(&glob);
  return 0;
}
