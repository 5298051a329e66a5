/*
 * test_sw_opencl_ops.c - the "sw" descriptor's OpenCL implementation
 * (acc_sw_descriptor.opencl, sw_opencl.h) the way the opencl platform
 * drives it: the raw input blocks are written to device buffers on a
 * transfer queue without blocking, and run() takes the buffers and the
 * write events and runs on a second (compute) queue. Every output must be
 * byte-identical to acc_sw_descriptor.run_cpu's packed Result.
 *
 *   dna      2000 read/window pairs, DNA 3/-3/6/1; 300 of them with three
 *            other schemes; one reference block on the device serving
 *            three query blocks (the block cache's reuse); 300 pairs cut
 *            into chunks of 2^20 cells
 *   long     the 5 long DNA pairs (10-12.5 kbp: queries in tiles)
 *   protein  globin and Swiss-Prot consecutive pairs, BLOSUM62 11/1 by
 *            name, BLOSUM45 and PAM250 by name, EBLOSUM62 10/2 sent as an
 *            explicit matrix
 *   misc     IUPAC and lower-case letters; cancel before the run and while
 *            it runs (chunks of one pair); bad arguments: wrong input
 *            count, a buffer smaller than its block, inputs other than the
 *            validated ones
 *
 * Tolerance: none. The first OpenCL device found is used; a machine
 * without one exits 77, which ctest reports as skipped.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember/ember_errors.h"
#include "sw/sw.h"
#include "sw/sw_opencl.h"
#include "sw_fasta.h"

#define DATA EMBER_SOURCE_DIR "/tests/data/sw/"
#define SKIP 77 /* ctest's SKIP_RETURN_CODE: no OpenCL device here */

static int failures;

#define CHECK(cond, ...)                                     \
  do {                                                       \
    if (!(cond)) {                                           \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      printf(__VA_ARGS__);                                   \
      printf("\n");                                          \
      failures++;                                            \
    }                                                        \
  } while (0)

typedef struct device {
  cl_device_id id;
  cl_context ctx;
  cl_command_queue transfer, compute;
  void *state;            /* acc_sw_opencl_ops state: an acc_sw_ocl */
  char name[256];
} device;

/* A block on the device, as the platform's block cache holds one. */
typedef struct dev_block {
  cl_mem mem;
  cl_event written;
} dev_block;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* upload: write b to a new buffer on the transfer queue, not blocking. */
static dev_block upload(device *d, const acc_block *b) {
  dev_block db = {0};
  cl_int rc;
  db.mem = clCreateBuffer(d->ctx, CL_MEM_READ_ONLY, b->size, NULL, &rc);
  CHECK(rc == CL_SUCCESS, "clCreateBuffer %zu bytes: %d", b->size, rc);
  if (rc != CL_SUCCESS) return db;
  rc = clEnqueueWriteBuffer(d->transfer, db.mem, CL_FALSE, 0, b->size,
                            b->data, 0, NULL, &db.written);
  CHECK(rc == CL_SUCCESS, "clEnqueueWriteBuffer: %d", rc);
  clFlush(d->transfer);
  return db;
}

static void block_free(dev_block *db) {
  if (db->written) {
    clWaitForEvents(1, &db->written);
    clReleaseEvent(db->written);
  }
  if (db->mem) clReleaseMemObject(db->mem);
  memset(db, 0, sizeof *db);
}

/* A task: params packed, the two host blocks. */
typedef struct task {
  uint8_t *params;
  size_t params_len;
  acc_block in[2];
  uint8_t *qb, *rb;
} task;

static void task_free(task *t) {
  free(t->params);
  free(t->qb);
  free(t->rb);
  memset(t, 0, sizeof *t);
}

static void pack_params(task *t, const Ember__Sw__Params *p) {
  t->params_len = ember__sw__params__get_packed_size(p);
  t->params = malloc(t->params_len ? t->params_len : 1);
  ember__sw__params__pack(p, t->params);
}

static void dna_params(task *t, int match, int mismatch, int open, int ext) {
  Ember__Sw__Params p = EMBER__SW__PARAMS__INIT;
  p.has_match = p.has_mismatch = p.has_gap_open = p.has_gap_extend = 1;
  p.match = match;
  p.mismatch = mismatch;
  p.gap_open = open;
  p.gap_extend = ext;
  pack_params(t, &p);
}

/* protein_params: a built-in matrix by name, or m sent as an explicit
 * matrix when name is NULL. */
static void protein_params(task *t, const char *name, const acc_sw_matrix *m,
                           int open, int ext) {
  Ember__Sw__Params p = EMBER__SW__PARAMS__INIT;
  Ember__Sw__Matrix mx = EMBER__SW__MATRIX__INIT;
  int32_t scores[ACC_SW_MAX_ALPHABET * ACC_SW_MAX_ALPHABET];
  char alphabet[ACC_SW_MAX_ALPHABET + 1];
  p.has_alphabet = 1;
  p.alphabet = EMBER__SW__ALPHABET__PROTEIN;
  p.has_gap_open = p.has_gap_extend = 1;
  p.gap_open = open;
  p.gap_extend = ext;
  if (name) {
    p.matrix_name = (char *)name;
  } else {
    snprintf(alphabet, sizeof alphabet, "%s", m->alphabet);
    memcpy(scores, m->scores, sizeof scores);
    mx.alphabet = alphabet;
    mx.n_scores = (size_t)m->size * (size_t)m->size;
    mx.scores = scores;
    p.matrix = &mx;
  }
  pack_params(t, &p);
}

/* pairs: query first + k of fq with reference first + k + shift of fr. */
static void pairs(task *t, const swt_fasta *fq, const swt_fasta *fr,
                  size_t first, size_t count, size_t shift) {
  size_t *qi = malloc(count * sizeof *qi), *ri = malloc(count * sizeof *ri);
  for (size_t k = 0; k < count; k++) {
    qi[k] = first + k;
    ri[k] = first + k + shift;
  }
  t->qb = swt_seqset_list(fq, qi, count, &t->in[0].size);
  t->rb = swt_seqset_list(fr, ri, count, &t->in[1].size);
  t->in[0].data = t->qb;
  t->in[1].data = t->rb;
  if (!t->qb || !t->rb) {
    fprintf(stderr, "cannot build seqsets\n");
    exit(1);
  }
  free(qi);
  free(ri);
}

/* show_diff: the first pair where two packed Results differ. */
static void show_diff(const char *label, const acc_output *a,
                      const acc_output *b) {
  Ember__Sw__Result *x = ember__sw__result__unpack(NULL, a->size, a->data);
  Ember__Sw__Result *y = ember__sw__result__unpack(NULL, b->size, b->data);
  if (!x || !y || x->n_score != y->n_score) {
    printf("  %s: results do not decode alike (%zu and %zu bytes)\n", label,
           a->size, b->size);
  } else {
    for (size_t k = 0; k < x->n_score; k++)
      if (x->score[k] != y->score[k] ||
          x->query_start[k] != y->query_start[k] ||
          x->query_end[k] != y->query_end[k] ||
          x->ref_start[k] != y->ref_start[k] ||
          x->ref_end[k] != y->ref_end[k]) {
        printf("  %s: first mismatch at pair %zu: cpu %d q %d..%d r %d..%d; "
               "opencl %d q %d..%d r %d..%d\n",
               label, k, x->score[k], x->query_start[k], x->query_end[k],
               x->ref_start[k], x->ref_end[k], y->score[k],
               y->query_start[k], y->query_end[k], y->ref_start[k],
               y->ref_end[k]);
        break;
      }
  }
  ember__sw__result__free_unpacked(x, NULL);
  ember__sw__result__free_unpacked(y, NULL);
}

/* run_on: validate t, run it on the CPU and through the OpenCL ops on the
 * given device blocks; the outputs must be the same bytes. */
static void run_on(device *d, const char *label, const task *t,
                   const dev_block *q, const dev_block *r) {
  const acc_descriptor *acc = &acc_sw_descriptor;
  char err[512] = "";
  void *prep = NULL;
  int rc = acc->validate(t->params, t->params_len, t->in, 2, &prep, err,
                         sizeof err);
  CHECK(rc == 0, "%s: validate rc %d: %s", label, rc, err);
  if (rc) return;
  acc_output cpu = {0}, dev = {0};
  double t0 = now();
  rc = acc->run_cpu(prep, t->in, 2, NULL, &cpu, err, sizeof err);
  double t1 = now();
  CHECK(rc == 0, "%s: run_cpu rc %d: %s", label, rc, err);
  void *mems[2] = {q->mem, r->mem};
  void *events[2];
  unsigned n_ev = 0;
  if (q->written) events[n_ev++] = q->written;
  if (r->written) events[n_ev++] = r->written;
  atomic_int cancel = 0;
  acc_run_ctx ctx = {.cancel = &cancel};
  rc = acc->opencl->run(d->state, d->compute, prep, t->in, mems, 2, events,
                        n_ev, &ctx, &dev, err, sizeof err);
  double t2 = now();
  CHECK(rc == 0, "%s: opencl run rc %d (%s): %s", label, rc,
        ember_strerror(rc), err);
  bool same = rc == 0 && cpu.size == dev.size &&
              memcmp(cpu.data, dev.data, cpu.size) == 0;
  if (rc == 0 && !same) show_diff(label, &cpu, &dev);
  printf("%s [%s]: %u pairs, %llu cells: output %s the CPU's (%zu bytes); "
         "cpu %.2f s, opencl %.2f s\n",
         label, d->name, acc_seqset_u32(t->in[0].data + 4),
         (unsigned long long)acc->work(prep), same ? "identical to" :
         "DIFFERS from", cpu.size, t1 - t0, t2 - t1);
  CHECK(rc != 0 || same, "%s: output differs from run_cpu", label);
  free(cpu.data);
  free(dev.data);
  acc->release(prep);
}

/* run_task: t's blocks uploaded for this run only. */
static void run_task(device *d, const char *label, const task *t) {
  dev_block q = upload(d, &t->in[0]), r = upload(d, &t->in[1]);
  if (q.mem && r.mem) run_on(d, label, t, &q, &r);
  block_free(&q);
  block_free(&r);
}

static void load(const char *name, swt_fasta *f) {
  if (swt_fasta_read(name, f) != 0) exit(1);
}

static void run_dna(device *d) {
  swt_fasta fq, fr;
  load(DATA "dna_queries.fa", &fq);
  load(DATA "dna_refs.fa", &fr);
  task t = {0};
  pairs(&t, &fq, &fr, 0, fq.n, 0);
  dna_params(&t, 3, -3, 6, 1);
  run_task(d, "dna 3/-3/6/1", &t);
  task_free(&t);

  static const int schemes[][4] = {{2, -3, 5, 2}, {1, -1, 0, 0},
                                   {5, -4, 1, 3}};
  for (size_t g = 0; g < sizeof schemes / sizeof schemes[0]; g++) {
    char label[64];
    snprintf(label, sizeof label, "dna %d/%d/%d/%d, 300 pairs",
             schemes[g][0], schemes[g][1], schemes[g][2], schemes[g][3]);
    pairs(&t, &fq, &fr, 0, 300, 0);
    dna_params(&t, schemes[g][0], schemes[g][1], schemes[g][2],
               schemes[g][3]);
    run_task(d, label, &t);
    task_free(&t);
  }

  /* one reference block on the device, three query blocks against it */
  task base = {0};
  pairs(&base, &fq, &fr, 0, 200, 0);
  dev_block r = upload(d, &base.in[1]);
  for (size_t shift = 0; shift < 3 && r.mem; shift++) {
    task u = {0};
    size_t *qi = malloc(200 * sizeof *qi);
    for (size_t k = 0; k < 200; k++) qi[k] = 200 * shift + k;
    u.qb = swt_seqset_list(&fq, qi, 200, &u.in[0].size);
    free(qi);
    u.in[0].data = u.qb;
    u.in[1] = base.in[1];
    dna_params(&u, 3, -3, 6, 1);
    dev_block q = upload(d, &u.in[0]);
    char label[96];
    snprintf(label, sizeof label, "dna, queries %zu..%zu on a resident "
             "reference block", 200 * shift, 200 * shift + 199);
    if (q.mem) run_on(d, label, &u, &q, &r);
    block_free(&q);
    free(u.qb);
    free(u.params);
  }
  block_free(&r);
  task_free(&base);

  /* many chunks, each waiting for the one before last */
  size_t chunk = acc_sw_ocl_set_chunk_cells(d->state, (uint64_t)1 << 20);
  pairs(&t, &fq, &fr, 300, 300, 0);
  dna_params(&t, 3, -3, 6, 1);
  char label[96];
  snprintf(label, sizeof label, "dna 3/-3/6/1, 300 pairs in chunks of %zu "
           "cells", chunk);
  run_task(d, label, &t);
  task_free(&t);
  acc_sw_ocl_set_chunk_cells(d->state, ACC_SW_OCL_DEFAULT_CHUNK_CELLS);
  swt_fasta_free(&fq);
  swt_fasta_free(&fr);
}

static void run_long(device *d) {
  swt_fasta fq, fr;
  load(DATA "dna_long_queries.fa", &fq);
  load(DATA "dna_long_refs.fa", &fr);
  task t = {0};
  pairs(&t, &fq, &fr, 0, fq.n, 0);
  dna_params(&t, 3, -3, 6, 1);
  run_task(d, "dna_long 3/-3/6/1", &t);
  task_free(&t);
  swt_fasta_free(&fq);
  swt_fasta_free(&fr);
}

static void run_protein(device *d) {
  swt_fasta glob, swiss;
  load(DATA "emboss_test_globins630.fa", &glob);
  load(DATA "emboss_test_swiss_seq.fa", &swiss);
  task t = {0};
  pairs(&t, &glob, &glob, 0, glob.n - 1, 1);
  protein_params(&t, "BLOSUM62", NULL, 11, 1);
  run_task(d, "protein globins BLOSUM62 11/1", &t);
  task_free(&t);
  static const char *const names[] = {"BLOSUM62", "BLOSUM45", "PAM250"};
  for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
    char label[96];
    snprintf(label, sizeof label, "protein Swiss-Prot %s 11/1", names[k]);
    pairs(&t, &swiss, &swiss, 0, swiss.n - 1, 1);
    protein_params(&t, names[k], NULL, 11, 1);
    run_task(d, label, &t);
    task_free(&t);
  }
  acc_sw_matrix m;
  char err[256];
  if (acc_sw_matrix_read_file(DATA "EBLOSUM62", &m, err, sizeof err) != 0) {
    printf("FAIL EBLOSUM62: %s\n", err);
    failures++;
  } else {
    pairs(&t, &swiss, &swiss, 0, swiss.n - 1, 1);
    protein_params(&t, NULL, &m, 10, 2);
    run_task(d, "protein Swiss-Prot EBLOSUM62 (explicit matrix) 10/2", &t);
    task_free(&t);
  }
  swt_fasta_free(&glob);
  swt_fasta_free(&swiss);
}

typedef struct canceler {
  atomic_int *flag;
  double after_s;
} canceler;

static void *cancel_later(void *arg) {
  canceler *c = arg;
  struct timespec ts = {0, (long)(c->after_s * 1e9)};
  nanosleep(&ts, NULL);
  atomic_store(c->flag, 1);
  return NULL;
}

static void run_misc(device *d) {
  const acc_descriptor *acc = &acc_sw_descriptor;
  /* IUPAC letters and lower case */
  static const char *const q[] = {"ACGT", "AAAA", "acgtNNRYacgt", "GATTACA",
                                  "C", "ggggNNNNcccc"};
  static const char *const r[] = {"ACGT", "TTTT", "ACGTACGTAAAACGT",
                                  "GATTACAGATTACA", "C", "GGGGCCCC"};
  const size_t n = sizeof q / sizeof q[0];
  size_t ql[8], rl[8];
  for (size_t k = 0; k < n; k++) {
    ql[k] = strlen(q[k]);
    rl[k] = strlen(r[k]);
  }
  task t = {0};
  t.in[0].size = acc_seqset_bytes(ql, n);
  t.in[1].size = acc_seqset_bytes(rl, n);
  t.qb = malloc(t.in[0].size);
  t.rb = malloc(t.in[1].size);
  acc_seqset_write(t.qb, t.in[0].size, q, ql, n);
  acc_seqset_write(t.rb, t.in[1].size, r, rl, n);
  t.in[0].data = t.qb;
  t.in[1].data = t.rb;
  dna_params(&t, 3, -3, 6, 1);
  run_task(d, "IUPAC and lower case", &t);

  /* bad arguments */
  char err[512] = "";
  void *prep = NULL;
  int rc = acc->validate(t.params, t.params_len, t.in, 2, &prep, err,
                         sizeof err);
  CHECK(rc == 0, "validate: %s", err);
  dev_block qb = upload(d, &t.in[0]), rb = upload(d, &t.in[1]);
  void *mems[2] = {qb.mem, rb.mem};
  void *events[2] = {qb.written, rb.written};
  acc_output out = {0};
  rc = acc->opencl->run(d->state, d->compute, prep, t.in, mems, 1, events, 2,
                        NULL, &out, err, sizeof err);
  CHECK(rc == EMBER_EINVAL, "one input: rc %d", rc);
  printf("misc [%s]: one input: %s\n", d->name, err);
  /* the reference buffer holding the query block (smaller) */
  void *small[2] = {qb.mem, qb.mem};
  rc = acc->opencl->run(d->state, d->compute, prep, t.in, small, 2, events,
                        2, NULL, &out, err, sizeof err);
  CHECK(rc == EMBER_EINVAL, "buffer smaller than its block: rc %d", rc);
  printf("misc [%s]: small buffer: %s\n", d->name, err);
  /* host inputs that are not the validated ones (other counts) */
  static const char *const one[] = {"ACGT"};
  size_t one_len = 4, one_size = acc_seqset_bytes(&one_len, 1);
  uint8_t *ob = malloc(one_size);
  acc_seqset_write(ob, one_size, one, &one_len, 1);
  acc_block other[2] = {{ob, one_size}, {ob, one_size}};
  rc = acc->opencl->run(d->state, d->compute, prep, other, mems, 2, events,
                        2, NULL, &out, err, sizeof err);
  CHECK(rc == EMBER_EINVAL, "other inputs: rc %d", rc);
  printf("misc [%s]: other inputs: %s\n", d->name, err);
  free(ob);

  /* canceled before it starts: nothing runs, nothing is returned */
  atomic_int cancel = 1;
  acc_run_ctx ctx = {.cancel = &cancel};
  rc = acc->opencl->run(d->state, d->compute, prep, t.in, mems, 2, events, 2,
                        &ctx, &out, err, sizeof err);
  CHECK(rc == EMBER_ECANCELED && out.data == NULL,
        "canceled before the run: rc %d", rc);
  acc->release(prep);
  block_free(&qb);
  block_free(&rb);
  task_free(&t);

  /* canceled while it runs: one pair per chunk, the flag set after 0.2 s;
   * a run that finished first must still be right */
  swt_fasta fq, fr;
  load(DATA "dna_queries.fa", &fq);
  load(DATA "dna_refs.fa", &fr);
  pairs(&t, &fq, &fr, 0, 2000, 0);
  dna_params(&t, 3, -3, 6, 1);
  rc = acc->validate(t.params, t.params_len, t.in, 2, &prep, err, sizeof err);
  CHECK(rc == 0, "validate: %s", err);
  qb = upload(d, &t.in[0]);
  rb = upload(d, &t.in[1]);
  mems[0] = qb.mem;
  mems[1] = rb.mem;
  events[0] = qb.written;
  events[1] = rb.written;
  acc_sw_ocl_set_chunk_cells(d->state, 1);
  cancel = 0;
  canceler c = {&cancel, 0.2};
  pthread_t th;
  pthread_create(&th, NULL, cancel_later, &c);
  double t0 = now();
  rc = acc->opencl->run(d->state, d->compute, prep, t.in, mems, 2, events, 2,
                        &ctx, &out, err, sizeof err);
  double t1 = now();
  pthread_join(th, NULL);
  CHECK(rc == EMBER_ECANCELED || rc == 0, "canceled while running: rc %d: "
        "%s", rc, err);
  if (rc == EMBER_ECANCELED)
    printf("misc [%s]: canceled while running after %.2f s: %s\n", d->name,
           t1 - t0, err);
  else
    printf("misc [%s]: finished (%.2f s) before the cancel was seen\n",
           d->name, t1 - t0);
  free(out.data);
  out = (acc_output){0};
  /* the state is still good after a canceled run */
  acc_sw_ocl_set_chunk_cells(d->state, ACC_SW_OCL_DEFAULT_CHUNK_CELLS);
  acc->release(prep);
  block_free(&qb);
  block_free(&rb);
  task_free(&t);
  pairs(&t, &fq, &fr, 0, 100, 0);
  dna_params(&t, 3, -3, 6, 1);
  run_task(d, "dna 3/-3/6/1, 100 pairs after a canceled run", &t);
  task_free(&t);
  swt_fasta_free(&fq);
  swt_fasta_free(&fr);
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *what = argc > 1 ? argv[1] : "dna";
  void (*part)(device *) = NULL;
  if (strcmp(what, "dna") == 0)
    part = run_dna;
  else if (strcmp(what, "long") == 0)
    part = run_long;
  else if (strcmp(what, "protein") == 0)
    part = run_protein;
  else if (strcmp(what, "misc") == 0)
    part = run_misc;
  else {
    fprintf(stderr, "usage: %s dna|long|protein|misc\n", argv[0]);
    return 2;
  }
  CHECK(acc_sw_descriptor.opencl == &acc_sw_opencl_ops,
        "the sw descriptor names acc_sw_opencl_ops");

  cl_platform_id plats[8];
  cl_uint np = 0;
  device d = {0};
  if (clGetPlatformIDs(8, plats, &np) == CL_SUCCESS) {
    if (np > 8) np = 8;
    for (cl_uint p = 0; p < np && !d.id; p++) {
      cl_uint nd = 0;
      if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 1, &d.id, &nd) !=
              CL_SUCCESS ||
          nd == 0)
        d.id = NULL;
    }
  }
  if (!d.id) {
    printf("no OpenCL device: skipped%s\n", failures ? " (FAILED before)" : "");
    return failures ? 1 : SKIP;
  }
  clGetDeviceInfo(d.id, CL_DEVICE_NAME, sizeof d.name - 1, d.name, NULL);
  cl_int rc;
  d.ctx = clCreateContext(NULL, 1, &d.id, NULL, NULL, &rc);
  CHECK(rc == CL_SUCCESS, "clCreateContext %d", rc);
  if (rc != CL_SUCCESS) return 1;
  d.transfer = clCreateCommandQueue(d.ctx, d.id, 0, &rc);
  CHECK(rc == CL_SUCCESS, "transfer queue %d", rc);
  d.compute = clCreateCommandQueue(d.ctx, d.id, 0, &rc);
  CHECK(rc == CL_SUCCESS, "compute queue %d", rc);
  char err[1024] = "";
  double t0 = now();
  int erc = acc_sw_opencl_ops.create(d.ctx, d.id, NULL, &d.state, err,
                                     sizeof err);
  CHECK(erc == 0 && d.state, "create: %s", err);
  printf("device %s: program built in %.2f s\n", d.name, now() - t0);
  if (erc == 0 && d.transfer && d.compute) part(&d);
  acc_sw_opencl_ops.destroy(d.state);
  acc_sw_opencl_ops.destroy(NULL);
  if (d.transfer) clReleaseCommandQueue(d.transfer);
  if (d.compute) clReleaseCommandQueue(d.compute);
  clReleaseContext(d.ctx);
  if (failures) {
    printf("FAILED: %d mismatches or errors\n", failures);
    return 1;
  }
  printf("OK\n");
  return 0;
}
