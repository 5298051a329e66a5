/*
 * test_sw_opencl.c - the OpenCL sw kernels (sw.cl) against the 32-bit
 * scalar reference on the conformance data, on every OpenCL device found,
 * and the program binary cache.
 *
 *   dna       2000 read/window pairs, DNA 3/-3/6/1; 300 of them with three
 *             other schemes (zero gap penalties, open < extend) and with
 *             work-groups capped at 16 rows (tiles), 40 at 1 row; the 5
 *             long pairs (10-12.5 kbp: queries in tiles of 256 rows)
 *   protein   globin (also in tiles of 32 rows) and Swiss-Prot consecutive
 *             pairs, BLOSUM62 11/1, and
 *             the Swiss-Prot pairs with BLOSUM45, PAM250, EBLOSUM62 (file)
 *   edge      empty sequences, no positive score, IUPAC and lower case
 *             (work-groups of 16, 4 and 1),
 *             invalid residue, mismatched counts
 *   cache     second create loads the cached binary; a damaged cache file
 *             and one the driver rejects both fall back to a rebuild
 *
 * Tolerance: none, every score and coordinate must be equal. A machine
 * without an OpenCL device exits 77, which ctest reports as skipped.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ember/ember_errors.h"
#include "sw/sw.h"
#include "sw/sw_opencl.h"
#include "sw_fasta.h"

#define DATA EMBER_SOURCE_DIR "/tests/data/sw/"
#define SHOW_MAX 5
#define SKIP 77 /* ctest's SKIP_RETURN_CODE: no OpenCL device here */

static int failures;

#define CHECK(cond, ...)                                 \
  do {                                                   \
    if (!(cond)) {                                       \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      printf(__VA_ARGS__);                               \
      printf("\n");                                      \
      failures++;                                        \
    }                                                    \
  } while (0)

typedef struct device {
  cl_device_id id;
  cl_context ctx;
  cl_command_queue q;
  acc_sw_ocl *sw;
  char name[256];
} device;

typedef struct set {
  uint8_t *qb, *rb;
  acc_seqset qs, rs;
} set;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void set_view(set *st, size_t qsize, size_t rsize) {
  acc_block qblk = {st->qb, qsize}, rblk = {st->rb, rsize};
  char err[256];
  if (!st->qb || !st->rb || acc_seqset_view(&qblk, &st->qs, err, sizeof err) ||
      acc_seqset_view(&rblk, &st->rs, err, sizeof err)) {
    fprintf(stderr, "cannot build seqsets\n");
    exit(1);
  }
}

/* set_pairs: query idx[k] of fq with reference idx[k] + shift of fr. */
static void set_pairs(set *st, const swt_fasta *fq, const swt_fasta *fr,
                      size_t first, size_t count, size_t shift) {
  size_t *qi = malloc(count * sizeof *qi), *ri = malloc(count * sizeof *ri);
  for (size_t k = 0; k < count; k++) {
    qi[k] = first + k;
    ri[k] = first + k + shift;
  }
  size_t qsize, rsize;
  st->qb = swt_seqset_list(fq, qi, count, &qsize);
  st->rb = swt_seqset_list(fr, ri, count, &rsize);
  set_view(st, qsize, rsize);
  free(qi);
  free(ri);
}

static void set_free(set *st) {
  free(st->qb);
  free(st->rb);
}

/* compare: OpenCL against the scalar reference on one set. */
static void compare(device *d, const char *label, const acc_sw_scoring *s,
                    const set *st) {
  size_t n = st->qs.count;
  acc_sw_hit *ref = calloc(n ? n : 1, sizeof *ref);
  acc_sw_hit *got = calloc(n ? n : 1, sizeof *got);
  double t0 = now();
  int rc = acc_sw_run_batch_isa(ACC_SW_ISA_SCALAR, s, &st->qs, &st->rs, 0, n,
                                ref, NULL, NULL);
  double t1 = now();
  CHECK(rc == 0, "%s: scalar rc %d", label, rc);
  char err[256] = "";
  rc = acc_sw_ocl_run_batch(d->sw, d->q, s, &st->qs, &st->rs, got, err,
                            sizeof err);
  double t2 = now();
  CHECK(rc == 0, "%s: acc_sw_ocl_run_batch rc %d (%s): %s", label, rc,
        ember_strerror(rc), err);
  size_t eq = 0, positive = 0;
  int shown = 0;
  for (size_t k = 0; rc == 0 && k < n; k++) {
    const acc_sw_hit *a = &ref[k], *b = &got[k];
    bool same = a->score == b->score && a->query_start == b->query_start &&
                a->query_end == b->query_end &&
                a->ref_start == b->ref_start && a->ref_end == b->ref_end;
    eq += same;
    positive += a->score > 0;
    if (!same && shown++ < SHOW_MAX)
      printf("  MISMATCH %s pair %zu: scalar %d q %d..%d r %d..%d; opencl "
             "%d q %d..%d r %d..%d\n",
             label, k, a->score, a->query_start, a->query_end, a->ref_start,
             a->ref_end, b->score, b->query_start, b->query_end,
             b->ref_start, b->ref_end);
  }
  printf("%s [%s]: %zu/%zu pairs equal to scalar (%zu with a positive "
         "score); scalar %.2f s, opencl %.2f s\n",
         label, d->name, eq, n, positive, t1 - t0, t2 - t1);
  CHECK(rc != 0 || eq == n, "%s: %zu of %zu differ", label, n - eq, n);
  free(ref);
  free(got);
}

/* compare_capped: compare with the work-group size capped at cap, so
 * that queries span many tiles; the default cap is restored after. */
static void compare_capped(device *d, const char *label,
                           const acc_sw_scoring *s, const set *st,
                           size_t cap) {
  size_t got = acc_sw_ocl_set_max_work_group(d->sw, cap);
  char l2[160];
  snprintf(l2, sizeof l2, "%s, work-groups of %zu", label, got);
  compare(d, l2, s, st);
  acc_sw_ocl_set_max_work_group(d->sw, ACC_SW_OCL_DEFAULT_WG);
}

static void load(const char *name, swt_fasta *f) {
  if (swt_fasta_read(name, f) != 0) exit(1);
}

static void run_dna(device *d) {
  swt_fasta fq, fr;
  load(DATA "dna_queries.fa", &fq);
  load(DATA "dna_refs.fa", &fr);
  acc_sw_scoring s;
  char err[256];
  if (acc_sw_scoring_dna(3, -3, 6, 1, &s, err, sizeof err) != 0) {
    printf("FAIL scoring: %s\n", err);
    failures++;
    return;
  }
  set st;
  set_pairs(&st, &fq, &fr, 0, fq.n, 0);
  compare(d, "dna 3/-3/6/1", &s, &st);
  set_free(&st);
  /* other gap schemes, including open < extend and zero penalties */
  static const int gaps[][4] = {{2, -3, 5, 2}, {1, -1, 0, 0}, {5, -4, 1, 3}};
  for (size_t g = 0; g < sizeof gaps / sizeof gaps[0]; g++) {
    acc_sw_scoring s2;
    char label[64];
    acc_sw_scoring_dna(gaps[g][0], gaps[g][1], gaps[g][2], gaps[g][3], &s2,
                       err, sizeof err);
    snprintf(label, sizeof label, "dna %d/%d/%d/%d, 300 pairs", gaps[g][0],
             gaps[g][1], gaps[g][2], gaps[g][3]);
    set_pairs(&st, &fq, &fr, 0, 300, 0);
    compare(d, label, &s2, &st);
    set_free(&st);
  }
  /* 150 bp queries in tiles of 16 and of 1 rows */
  set_pairs(&st, &fq, &fr, 0, 300, 0);
  compare_capped(d, "dna 3/-3/6/1, 300 pairs", &s, &st, 16);
  set_free(&st);
  set_pairs(&st, &fq, &fr, 300, 40, 0);
  compare_capped(d, "dna 3/-3/6/1, 40 pairs", &s, &st, 1);
  set_free(&st);
  swt_fasta_free(&fq);
  swt_fasta_free(&fr);

  load(DATA "dna_long_queries.fa", &fq);
  load(DATA "dna_long_refs.fa", &fr);
  set_pairs(&st, &fq, &fr, 0, fq.n, 0);
  compare(d, "dna_long 3/-3/6/1", &s, &st);
  set_free(&st);
  swt_fasta_free(&fq);
  swt_fasta_free(&fr);
}

static void run_protein(device *d) {
  swt_fasta glob, swiss;
  load(DATA "emboss_test_globins630.fa", &glob);
  load(DATA "emboss_test_swiss_seq.fa", &swiss);
  set g, w;
  set_pairs(&g, &glob, &glob, 0, glob.n - 1, 1);
  set_pairs(&w, &swiss, &swiss, 0, swiss.n - 1, 1);
  static const char *const names[] = {"BLOSUM62", "BLOSUM45", "PAM250"};
  char err[256], label[96];
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    acc_sw_matrix m;
    acc_sw_scoring s;
    if (acc_sw_matrix_builtin(names[k], &m) != 0 ||
        acc_sw_scoring_matrix(&m, 11, 1, &s, err, sizeof err) != 0) {
      printf("FAIL scoring %s\n", names[k]);
      failures++;
      continue;
    }
    if (k == 0) {
      snprintf(label, sizeof label, "protein globins %s 11/1", names[k]);
      compare(d, label, &s, &g);
      compare_capped(d, label, &s, &g, 32);
    }
    snprintf(label, sizeof label, "protein Swiss-Prot %s 11/1", names[k]);
    compare(d, label, &s, &w);
  }
  acc_sw_matrix m;
  acc_sw_scoring s;
  if (acc_sw_matrix_read_file(DATA "EBLOSUM62", &m, err, sizeof err) != 0 ||
      acc_sw_scoring_matrix(&m, 10, 2, &s, err, sizeof err) != 0) {
    printf("FAIL EBLOSUM62: %s\n", err);
    failures++;
  } else {
    compare(d, "protein Swiss-Prot EBLOSUM62 (file) 10/2", &s, &w);
  }
  set_free(&g);
  set_free(&w);
  swt_fasta_free(&glob);
  swt_fasta_free(&swiss);
}

static void run_edge(device *d) {
  static const char *const q[] = {"", "ACGT", "AAAA", "acgtNNRYacgt",
                                  "GATTACA", "C"};
  static const char *const r[] = {"ACGT", "", "TTTT", "ACGTACGTAAAACGT",
                                  "GATTACAGATTACA", "C"};
  size_t n = sizeof q / sizeof q[0], ql[8], rl[8];
  for (size_t k = 0; k < n; k++) {
    ql[k] = strlen(q[k]);
    rl[k] = strlen(r[k]);
  }
  set st;
  size_t qsize = acc_seqset_bytes(ql, n), rsize = acc_seqset_bytes(rl, n);
  st.qb = malloc(qsize);
  st.rb = malloc(rsize);
  acc_seqset_write(st.qb, qsize, q, ql, n);
  acc_seqset_write(st.rb, rsize, r, rl, n);
  set_view(&st, qsize, rsize);
  acc_sw_scoring s;
  char err[256];
  acc_sw_scoring_dna(3, -3, 6, 1, &s, err, sizeof err);
  compare(d, "edge cases", &s, &st);
  compare_capped(d, "edge cases", &s, &st, 1);
  compare_capped(d, "edge cases", &s, &st, 4);

  acc_sw_hit hits[8];
  /* device memory of a batch: the blocks, the tables, results; the
   * scratch rows only when queries are done in tiles */
  size_t plain = acc_sw_ocl_batch_bytes(d->sw, &st.qs, &st.rs, s.size);
  /* the two blocks (8-byte headers, 2 x 7 offsets, 28 + 38 residues),
   * the 256-byte encode table, 5 x 5 scores, 6 x (1 + 3 + 5) pair order
   * and result ints, 4 bytes standing for the unused scratch */
  size_t expect = 2 * 8 + 2 * 7 * 4 + 28 + 38 + 256 + 5 * 5 * 4 +
                  6 * 9 * 4 + 4;
  CHECK(plain == expect, "batch bytes %zu, expected %zu", plain, expect);
  acc_sw_ocl_set_max_work_group(d->sw, 4);
  size_t tiled = acc_sw_ocl_batch_bytes(d->sw, &st.qs, &st.rs, s.size);
  CHECK(tiled == expect - 4 + 2 * 38 * 4, "batch bytes in tiles %zu", tiled);
  acc_sw_ocl_set_max_work_group(d->sw, ACC_SW_OCL_DEFAULT_WG);
  printf("edge [%s]: device memory for the batch: %zu bytes, %zu in tiles\n",
         d->name, plain, tiled);

  /* counts differ */
  acc_seqset short_r = st.rs;
  short_r.count = 2;
  CHECK(acc_sw_ocl_batch_bytes(d->sw, &st.qs, &short_r, s.size) == 0,
        "batch bytes of mismatched counts");
  int rc = acc_sw_ocl_run_batch(d->sw, d->q, &s, &st.qs, &short_r, hits, err,
                                sizeof err);
  CHECK(rc == EMBER_EINVAL, "mismatched counts: rc %d", rc);
  set_free(&st);

  /* a residue DNA scoring does not encode */
  const char *bq[] = {"ACGT", "ACXT"}, *br[] = {"ACGT", "ACGT"};
  size_t bl[] = {4, 4};
  qsize = acc_seqset_bytes(bl, 2);
  st.qb = malloc(qsize);
  st.rb = malloc(qsize);
  acc_seqset_write(st.qb, qsize, bq, bl, 2);
  acc_seqset_write(st.rb, qsize, br, bl, 2);
  set_view(&st, qsize, qsize);
  rc = acc_sw_ocl_run_batch(d->sw, d->q, &s, &st.qs, &st.rs, hits, err,
                            sizeof err);
  CHECK(rc == EMBER_EINVAL, "invalid residue: rc %d", rc);
  printf("edge [%s]: invalid input rejected: %s\n", d->name,
         rc == EMBER_EINVAL ? "yes" : "no");
  set_free(&st);
}

static void run_cache(device *d) {
  char dir[] = "/tmp/ember-sw-ocl-XXXXXX";
  if (!mkdtemp(dir)) {
    printf("FAIL mkdtemp\n");
    failures++;
    return;
  }
  char err[512] = "";
  acc_sw_ocl *a = NULL, *b = NULL, *c = NULL, *e = NULL;
  int rc = acc_sw_ocl_create(d->ctx, d->id, dir, &a, err, sizeof err);
  CHECK(rc == 0, "create: %s", err);
  CHECK(a && !acc_sw_ocl_loaded_from_cache(a), "first create built");
  char path[1100];
  snprintf(path, sizeof path, "%s", a ? acc_sw_ocl_cache_path(a) : "");
  CHECK(access(path, R_OK) == 0, "cache file %s written", path);

  rc = acc_sw_ocl_create(d->ctx, d->id, dir, &b, err, sizeof err);
  CHECK(rc == 0 && acc_sw_ocl_loaded_from_cache(b),
        "second create loads from cache (rc %d)", rc);

  /* the cached program gives the same answers */
  if (b) {
    acc_sw_ocl *keep = d->sw;
    d->sw = b;
    swt_fasta fq, fr;
    load(DATA "dna_queries.fa", &fq);
    load(DATA "dna_refs.fa", &fr);
    set st;
    set_pairs(&st, &fq, &fr, 0, 100, 0);
    acc_sw_scoring s;
    acc_sw_scoring_dna(3, -3, 6, 1, &s, err, sizeof err);
    compare(d, "dna 3/-3/6/1, 100 pairs, cached binary", &s, &st);
    set_free(&st);
    swt_fasta_free(&fq);
    swt_fasta_free(&fr);
    d->sw = keep;
  }

  /* damage the payload: the checksum catches it, create rebuilds */
  FILE *f = fopen(path, "r+b");
  long size = 0;
  if (f) {
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, size / 2, SEEK_SET);
    fputc(0x5a ^ fgetc(f), f);
    fseek(f, size / 2, SEEK_SET);
    fputs("garbage", f);
    fclose(f);
  }
  CHECK(size > 24, "cache file size %ld", size);
  rc = acc_sw_ocl_create(d->ctx, d->id, dir, &c, err, sizeof err);
  CHECK(rc == 0 && c && !acc_sw_ocl_loaded_from_cache(c),
        "damaged cache: rebuilt (rc %d)", rc);
  acc_sw_ocl_destroy(c);
  c = NULL;
  rc = acc_sw_ocl_create(d->ctx, d->id, dir, &c, err, sizeof err);
  CHECK(rc == 0 && acc_sw_ocl_loaded_from_cache(c),
        "rewritten cache loads again (rc %d)", rc);

  /* a sound file whose payload the driver rejects */
  f = fopen(path, "wb");
  if (f) {
    static const char junk[] = "not a program binary for any device";
    uint64_t len = sizeof junk, sum = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < sizeof junk; i++) {
      sum ^= (uint8_t)junk[i];
      sum *= 0x100000001b3ull;
    }
    fwrite("EMBSWCL1", 1, 8, f);
    fwrite(&len, 8, 1, f);
    fwrite(&sum, 8, 1, f);
    fwrite(junk, 1, sizeof junk, f);
    fclose(f);
  }
  rc = acc_sw_ocl_create(d->ctx, d->id, dir, &e, err, sizeof err);
  CHECK(rc == 0 && e && !acc_sw_ocl_loaded_from_cache(e),
        "binary rejected by the driver: rebuilt (rc %d)", rc);
  printf("cache [%s]: built, loaded, damaged -> rebuilt, reloaded, "
         "rejected -> rebuilt (%s)\n", d->name, failures ? "with failures"
                                                          : "ok");
  acc_sw_ocl_destroy(a);
  acc_sw_ocl_destroy(b);
  acc_sw_ocl_destroy(c);
  acc_sw_ocl_destroy(e);
  acc_sw_ocl_destroy(NULL);
  remove(path);
  rmdir(dir);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *what = argc > 1 ? argv[1] : "dna";
  cl_platform_id plats[8];
  cl_uint np = 0;
  if (clGetPlatformIDs(8, plats, &np) != CL_SUCCESS || np == 0) {
    printf("no OpenCL platform: skipped\n");
    return SKIP;
  }
  if (np > 8) np = 8;
  int ndev = 0, found = 0;
  for (cl_uint p = 0; p < np; p++) {
    cl_device_id ids[8];
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 8, ids, &nd) !=
        CL_SUCCESS)
      continue;
    if (nd > 8) nd = 8;
    found += (int)nd;
    for (cl_uint k = 0; k < nd; k++) {
      device d = {.id = ids[k]};
      clGetDeviceInfo(ids[k], CL_DEVICE_NAME, sizeof d.name - 1, d.name, NULL);
      cl_int rc;
      d.ctx = clCreateContext(NULL, 1, &ids[k], NULL, NULL, &rc);
      if (rc != CL_SUCCESS) {
        printf("FAIL %s: clCreateContext %d\n", d.name, rc);
        failures++;
        continue;
      }
      d.q = clCreateCommandQueue(d.ctx, ids[k], 0, &rc);
      char err[1024] = "";
      double t0 = now();
      int erc = acc_sw_ocl_create(d.ctx, d.id, NULL, &d.sw, err, sizeof err);
      CHECK(rc == CL_SUCCESS && erc == 0, "%s: setup: %s", d.name, err);
      printf("device %s: %.1f GiB, program built in %.2f s\n", d.name,
             (double)acc_sw_ocl_device_memory(d.id) / (1 << 30),
             now() - t0);
      if (erc == 0) {
        ndev++;
        if (strcmp(what, "dna") == 0)
          run_dna(&d);
        else if (strcmp(what, "protein") == 0)
          run_protein(&d);
        else if (strcmp(what, "edge") == 0)
          run_edge(&d);
        else if (strcmp(what, "cache") == 0)
          run_cache(&d);
        else {
          fprintf(stderr, "usage: %s dna|protein|edge|cache\n", argv[0]);
          return 2;
        }
      }
      acc_sw_ocl_destroy(d.sw);
      if (d.q) clReleaseCommandQueue(d.q);
      clReleaseContext(d.ctx);
    }
  }
  if (found == 0) {
    printf("no OpenCL device: skipped\n");
    return SKIP;
  }
  printf("%d OpenCL device(s) tested\n", ndev);
  if (failures) {
    printf("FAILED: %d mismatches or errors\n", failures);
    return 1;
  }
  printf("OK\n");
  return 0;
}
