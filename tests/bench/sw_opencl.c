/*
 * sw_opencl.c - GCUPS of the OpenCL sw kernels (sw.cl) on every OpenCL
 * device found, next to the CPU kernels, on the same pairs.
 *
 *   sw_opencl [SECONDS] [WORKGROUP]
 *
 * Each data set runs as whole batches for about SECONDS of wall time
 * (default 2) per kernel; giga cell updates per wall second count the
 * qlen x rlen cells of each pair once (the reverse pass that finds the
 * starts is extra work inside that time). OpenCL batches include the
 * transfers; the first batch (kernel compile for the work-group size) is
 * not timed. WORKGROUP caps the OpenCL work-group size (default
 * ACC_SW_OCL_DEFAULT_WG). CPU kernels run on one thread. Prints figures
 * only; asserts nothing.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember/ember_errors.h"
#include "sw/sw.h"
#include "sw/sw_opencl.h"
#include "sw_fasta.h"

#define DATA EMBER_SOURCE_DIR "/tests/data/sw/"

typedef struct dataset {
  const char *label;
  acc_sw_scoring scoring;
  uint8_t *qblock, *rblock;
  acc_seqset q, r;
  uint64_t cells;
} dataset;

static double wall(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int build(dataset *d, const swt_fasta *fq, const swt_fasta *fr,
                 size_t n, size_t shift) {
  size_t *qi = malloc(n * sizeof *qi), *ri = malloc(n * sizeof *ri);
  d->cells = 0;
  for (size_t k = 0; k < n; k++) {
    qi[k] = k;
    ri[k] = k + shift;
    d->cells += (uint64_t)fq->lens[k] * fr->lens[k + shift];
  }
  size_t qs, rs;
  d->qblock = swt_seqset_list(fq, qi, n, &qs);
  d->rblock = swt_seqset_list(fr, ri, n, &rs);
  free(qi);
  free(ri);
  acc_block qb = {d->qblock, qs}, rb = {d->rblock, rs};
  if (!d->qblock || !d->rblock || acc_seqset_view(&qb, &d->q, NULL, 0) ||
      acc_seqset_view(&rb, &d->r, NULL, 0))
    return -1;
  return 0;
}

static void report(const dataset *d, const char *what, size_t runs,
                   double t) {
  printf("%-26s %-40s %7.3f GCUPS  (%zu runs, %.2f s)\n", d->label, what,
         (double)d->cells * (double)runs / t / 1e9, runs, t);
}

static void bench_cpu(const dataset *d, double seconds) {
  size_t n = d->q.count;
  acc_sw_hit *out = calloc(n, sizeof *out);
  for (int isa = 0; isa < ACC_SW_ISA_COUNT; isa++) {
    if (!acc_sw_isa_supported((acc_sw_isa)isa)) continue;
    size_t runs = 0;
    double t0 = wall(), t;
    do {
      acc_sw_run_batch_isa((acc_sw_isa)isa, &d->scoring, &d->q, &d->r, 0, n,
                           out, NULL, NULL);
      runs++;
    } while ((t = wall() - t0) < seconds);
    char what[64];
    snprintf(what, sizeof what, "cpu %s, 1 thread",
             acc_sw_isa_name((acc_sw_isa)isa));
    report(d, what, runs, t);
  }
  free(out);
}

static void bench_ocl(const dataset *d, acc_sw_ocl *o, cl_command_queue q,
                      const char *dev, double seconds) {
  size_t n = d->q.count;
  acc_sw_hit *out = calloc(n, sizeof *out);
  char err[256];
  int rc = acc_sw_ocl_run_batch(o, q, &d->scoring, &d->q, &d->r, out, err,
                                sizeof err);
  if (rc != 0) {
    printf("%-26s opencl: %s\n", d->label, err);
    free(out);
    return;
  }
  size_t runs = 0;
  double t0 = wall(), t;
  do {
    acc_sw_ocl_run_batch(o, q, &d->scoring, &d->q, &d->r, out, err,
                         sizeof err);
    runs++;
  } while ((t = wall() - t0) < seconds);
  char what[96];
  snprintf(what, sizeof what, "opencl %.32s", dev);
  report(d, what, runs, t);
  free(out);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  double seconds = argc > 1 ? atof(argv[1]) : 2.0;
  size_t wg = argc > 2 ? (size_t)atol(argv[2]) : ACC_SW_OCL_DEFAULT_WG;
  swt_fasta dq, dr, lq, lr, glob;
  if (swt_fasta_read(DATA "dna_queries.fa", &dq) ||
      swt_fasta_read(DATA "dna_refs.fa", &dr) ||
      swt_fasta_read(DATA "dna_long_queries.fa", &lq) ||
      swt_fasta_read(DATA "dna_long_refs.fa", &lr) ||
      swt_fasta_read(DATA "emboss_test_globins630.fa", &glob))
    return 1;
  dataset sets[3] = {{.label = "DNA 150 x 300-600"},
                     {.label = "DNA 10-12.5 kbp"},
                     {.label = "globins BLOSUM62"}};
  char err[256];
  acc_sw_matrix m;
  acc_sw_scoring_dna(3, -3, 6, 1, &sets[0].scoring, err, sizeof err);
  sets[1].scoring = sets[0].scoring;
  acc_sw_matrix_builtin("BLOSUM62", &m);
  acc_sw_scoring_matrix(&m, 11, 1, &sets[2].scoring, err, sizeof err);
  if (build(&sets[0], &dq, &dr, dq.n, 0) ||
      build(&sets[1], &lq, &lr, lq.n, 0) ||
      build(&sets[2], &glob, &glob, glob.n - 1, 1)) {
    fprintf(stderr, "cannot build the data sets\n");
    return 1;
  }
  for (int k = 0; k < 3; k++) bench_cpu(&sets[k], seconds);

  cl_platform_id plats[8];
  cl_uint np = 0;
  if (clGetPlatformIDs(8, plats, &np) != CL_SUCCESS) np = 0;
  for (cl_uint p = 0; p < np && p < 8; p++) {
    cl_device_id ids[8];
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 8, ids, &nd) !=
        CL_SUCCESS)
      continue;
    for (cl_uint k = 0; k < nd && k < 8; k++) {
      char name[128] = "";
      clGetDeviceInfo(ids[k], CL_DEVICE_NAME, sizeof name - 1, name, NULL);
      cl_int rc;
      cl_context ctx = clCreateContext(NULL, 1, &ids[k], NULL, NULL, &rc);
      if (rc != CL_SUCCESS) continue;
      cl_command_queue q = clCreateCommandQueue(ctx, ids[k], 0, &rc);
      acc_sw_ocl *o = NULL;
      if (rc == CL_SUCCESS &&
          acc_sw_ocl_create(ctx, ids[k], NULL, &o, err, sizeof err) == 0) {
        size_t got = acc_sw_ocl_set_max_work_group(o, wg);
        printf("opencl device %s: work-groups up to %zu\n", name, got);
        for (int s = 0; s < 3; s++) bench_ocl(&sets[s], o, q, name, seconds);
      } else {
        printf("opencl device %s: %s\n", name, err);
      }
      acc_sw_ocl_destroy(o);
      if (q) clReleaseCommandQueue(q);
      clReleaseContext(ctx);
    }
  }
  for (int k = 0; k < 3; k++) {
    free(sets[k].qblock);
    free(sets[k].rblock);
  }
  swt_fasta_free(&dq);
  swt_fasta_free(&dr);
  swt_fasta_free(&lq);
  swt_fasta_free(&lr);
  swt_fasta_free(&glob);
  return 0;
}
