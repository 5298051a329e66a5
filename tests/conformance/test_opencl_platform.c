/*
 * test_opencl_platform.c - the opencl platform (nam/engine/platform_opencl.c)
 * through the engine: an engine with OpenCL on and no cpu platform runs sw
 * tasks, and every output must be byte-identical to run_cpu's.
 *
 *   - nam_engine_platforms lists opencl platforms (kind, device, budget)
 *   - one reference block in the block cache (EMBER_BLOCK_CACHE) serves
 *     four tasks with different query blocks: uploaded once (one miss,
 *     then hits), the tasks in flight together through the pipeline
 *   - anonymous inputs (no block ids): DNA with another scheme, protein
 *     globins (BLOSUM62) and Swiss-Prot (PAM250), submitted together
 *   - a task canceled while it runs ends canceled, or done and right
 *
 * Without an OpenCL device (no ICD; ctest runs it so a second time with
 * OCL_ICD_VENDORS naming an empty place) the engine starts with no opencl
 * platform and refuses opencl tasks with EMBER_ENOPLATFORM.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "block_cache.h"
#include "ember/ember_errors.h"
#include "engine.h"
#include "sw/sw.h"
#include "sw_fasta.h"

#define DATA EMBER_SOURCE_DIR "/tests/data/sw/"
#define WAIT_SECONDS 60
#define APP 7

static int failures;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int n_done;
static int n_events;

#define CHECK(cond, ...)                                     \
  do {                                                       \
    if (!(cond)) {                                           \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      printf(__VA_ARGS__);                                   \
      printf("\n");                                          \
      failures++;                                            \
    }                                                        \
  } while (0)


static void on_event(void *user, int level, const char *msg) {
  (void)user;
  printf("engine event <%d>: %s\n", level, msg);
  pthread_mutex_lock(&lock);
  n_events++;
  pthread_mutex_unlock(&lock);
}

static void on_done(nam_task *t, void *user) {
  (void)t, (void)user;
  pthread_mutex_lock(&lock);
  n_done++;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&lock);
}

/* wait_done: until n done callbacks have run; false after WAIT_SECONDS. */
static bool wait_done(int n) {
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_sec += WAIT_SECONDS;
  pthread_mutex_lock(&lock);
  int rc = 0;
  while (n_done < n && rc != ETIMEDOUT)
    rc = pthread_cond_timedwait(&changed, &lock, &until);
  bool ok = n_done >= n;
  pthread_mutex_unlock(&lock);
  CHECK(ok, "waited %d s for %d done callbacks", WAIT_SECONDS, n);
  return ok;
}

/* A task to run: params, blocks, the CPU's packed answer. */
typedef struct job {
  const char *label;
  uint8_t params[64];
  size_t params_len;
  acc_block in[2];
  acc_output cpu;
  nam_task *task;
} job;

static void dna_params(job *j, int match, int mismatch, int open, int ext) {
  Ember__Sw__Params p = EMBER__SW__PARAMS__INIT;
  p.has_match = p.has_mismatch = p.has_gap_open = p.has_gap_extend = 1;
  p.match = match;
  p.mismatch = mismatch;
  p.gap_open = open;
  p.gap_extend = ext;
  j->params_len = ember__sw__params__pack(&p, j->params);
}

static void protein_params(job *j, const char *matrix) {
  Ember__Sw__Params p = EMBER__SW__PARAMS__INIT;
  p.has_alphabet = p.has_gap_open = p.has_gap_extend = 1;
  p.alphabet = EMBER__SW__ALPHABET__PROTEIN;
  p.matrix_name = (char *)matrix;
  p.gap_open = 11;
  p.gap_extend = 1;
  j->params_len = ember__sw__params__pack(&p, j->params);
}

/* block: a seqset of records first .. first+count-1 of f (malloc'd). */
static acc_block block(const swt_fasta *f, size_t first, size_t count) {
  acc_block b;
  b.data = swt_seqset(f, first, count, &b.size);
  if (!b.data) {
    fprintf(stderr, "cannot build a seqset\n");
    exit(1);
  }
  return b;
}

/* cpu_answer: validate and run on the CPU (the reference). */
static void cpu_answer(job *j) {
  char err[256] = "";
  void *prep = NULL;
  int rc = acc_sw_descriptor.validate(j->params, j->params_len, j->in, 2,
                                      &prep, err, sizeof err);
  CHECK(rc == 0, "%s: validate: %s", j->label, err);
  if (rc) return;
  rc = acc_sw_descriptor.run_cpu(prep, j->in, 2, NULL, &j->cpu, err,
                                 sizeof err);
  CHECK(rc == 0, "%s: run_cpu: %s", j->label, err);
  acc_sw_descriptor.release(prep);
}

static void submit(nam_engine *e, job *j, const uint64_t *ids) {
  nam_task_spec spec = {
    .acc = &acc_sw_descriptor,
    .params = j->params,
    .params_len = j->params_len,
    .inputs = j->in,
    .n_inputs = 2,
    .app = APP,
    .block_ids = ids,
    .platform_kind = "opencl",
    .done = on_done,
    .user = j,
  };
  char err[256] = "";
  spec.err = err;
  spec.err_len = sizeof err;
  int rc = nam_engine_submit(e, &spec, &j->task);
  CHECK(rc == 0, "%s: submit: %s", j->label, err[0] ? err : ember_strerror(rc));
  if (rc) j->task = NULL;
}

/* check: the task's output is the CPU's, byte for byte; frees the task. */
static void check(job *j) {
  if (!j->task) return;
  int st = nam_task_status(j->task);
  acc_output out = {0};
  nam_task_take_output(j->task, &out);
  bool same = st == 0 && out.size == j->cpu.size &&
              memcmp(out.data, j->cpu.data, out.size) == 0;
  const nam_task_times *tm = nam_task_get_times(j->task);
  printf("%s: status %d (%s) on %s: output %s the CPU's; queued %.3f s, "
         "staged %.3f s, executed %.3f s\n",
         j->label, st, nam_task_message(j->task), nam_task_platform(j->task),
         same ? "identical to" : "DIFFERS from",
         (double)(tm->started - tm->queued) / 1e9,
         (double)(tm->staged - tm->started) / 1e9,
         (double)(tm->executed - tm->staged) / 1e9);
  CHECK(same, "%s: status %d: %s", j->label, st, nam_task_message(j->task));
  CHECK(strncmp(nam_task_platform(j->task), "opencl", 6) == 0,
        "%s: ran on %s", j->label, nam_task_platform(j->task));
  free(out.data);
  nam_task_free(j->task);
  j->task = NULL;
}

static bool have_device(void) {
  cl_platform_id plats[8];
  cl_uint np = 0;
  if (clGetPlatformIDs(8, plats, &np) != CL_SUCCESS) return false;
  for (cl_uint i = 0; i < np && i < 8; i++) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(plats[i], CL_DEVICE_TYPE_ALL, 0, NULL, &nd) ==
            CL_SUCCESS &&
        nd > 0)
      return true;
  }
  return false;
}

/* no_device: the engine starts without opencl platforms, says why, and
 * refuses an opencl task. */
static int no_device(nam_engine *e) {
  nam_platform_status st[16];
  size_t np = nam_engine_platforms(e, st, 16);
  CHECK(np == 0, "%zu platforms without a device or cpu", np);
  CHECK(n_events > 0, "no event says why there is no opencl platform");
  job j = {.label = "no device"};
  dna_params(&j, 3, -3, 6, 1);
  static const char *const seq[] = {"ACGT"};
  size_t len = 4, size = acc_seqset_bytes(&len, 1);
  uint8_t *b = malloc(size);
  acc_seqset_write(b, size, seq, &len, 1);
  j.in[0] = j.in[1] = (acc_block){b, size};
  nam_task_spec spec = {.acc = &acc_sw_descriptor, .params = j.params,
                        .params_len = j.params_len,
                        .inputs = j.in, .n_inputs = 2, .app = APP,
                        .platform_kind = "opencl", .done = on_done};
  nam_task *t = NULL;
  int rc = nam_engine_submit(e, &spec, &t);
  CHECK(rc == EMBER_ENOPLATFORM, "opencl task without a device: rc %d", rc);
  free(b);
  printf("no OpenCL device: engine up with %zu platforms, opencl task "
         "refused (%s)\n", np, ember_strerror(rc));
  nam_engine_destroy(e);
  printf(failures ? "FAILED\n" : "OK\n");
  return failures ? 1 : 0;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  nam_engine_config cfg = {0};
  cfg.no_cpu = 1;
  cfg.opencl.enabled = 1;
  cfg.event = on_event;
  nam_engine *e = NULL;
  int rc = nam_engine_create(&cfg, &e);
  CHECK(rc == 0, "nam_engine_create: %s", ember_strerror(rc));
  if (rc) return 1;
  if (!have_device()) return no_device(e);

  nam_platform_status st[16];
  size_t np = nam_engine_platforms(e, st, 16);
  unsigned n_opencl = 0;
  for (size_t i = 0; i < np; i++) {
    printf("platform %s: kind %s, device %s, state %s, %u workers, block "
           "budget %.2f GiB\n",
           st[i].name, st[i].kind, st[i].device, st[i].state, st[i].workers,
           (double)st[i].cache_budget / (double)(1u << 30));
    if (strcmp(st[i].kind, "opencl") == 0) {
      n_opencl++;
      CHECK(st[i].device[0] != '\0', "%s: no device name", st[i].name);
      CHECK(st[i].cache_budget > 0, "%s: no block budget", st[i].name);
    }
  }
  CHECK(n_opencl > 0, "no opencl platform among %zu", np);
  char where[256] = "";
  nam_engine_platforms_for(e, &acc_sw_descriptor, where, sizeof where);
  printf("sw runs on: %s\n", where);
  CHECK(strstr(where, "opencl0") != NULL, "sw not on opencl0: %s", where);

  swt_fasta fq, fr, glob, swiss;
  if (swt_fasta_read(DATA "dna_queries.fa", &fq) ||
      swt_fasta_read(DATA "dna_refs.fa", &fr) ||
      swt_fasta_read(DATA "emboss_test_globins630.fa", &glob) ||
      swt_fasta_read(DATA "emboss_test_swiss_seq.fa", &swiss))
    return 1;

  /* the engine's calibration tasks (nam/engine/calibrate.c) go through
   * the block cache too: count from their end */
  rc = nam_engine_wait_calibrated(e, 1000 * WAIT_SECONDS);
  CHECK(rc == 0, "calibration: %s", ember_strerror(rc));
  nam_block_cache *cache = nam_engine_block_cache(e);
  nam_block_cache_stats cs0;
  nam_block_cache_get_stats(cache, &cs0);

  /* one cached reference block, four query blocks */
  enum { NQ = 4, NP = 150 };
  acc_block ref = block(&fr, 0, NP);
  rc = nam_block_cache_put(cache, APP, 100, EMBER_BLOCK_CACHE, ref.data,
                           ref.size, NULL, NULL);
  CHECK(rc == 0, "put reference block: %s", ember_strerror(rc));
  job reuse[NQ];
  char labels[NQ][64];
  uint64_t ids[NQ][2];
  for (int k = 0; k < NQ; k++) {
    job *j = &reuse[k];
    memset(j, 0, sizeof *j);
    snprintf(labels[k], sizeof labels[k], "queries %d..%d, cached "
             "reference block", NP * k, NP * k + NP - 1);
    j->label = labels[k];
    dna_params(j, 3, -3, 6, 1);
    j->in[0] = block(&fq, (size_t)NP * k, NP);
    j->in[1] = ref;
    ids[k][0] = 200 + (uint64_t)k;
    ids[k][1] = 100;
    rc = nam_block_cache_put(cache, APP, ids[k][0], 0, j->in[0].data,
                             j->in[0].size, NULL, NULL);
    CHECK(rc == 0, "put query block %d: %s", k, ember_strerror(rc));
    cpu_answer(j);
  }
  int submitted = 0;
  for (int k = 0; k < NQ; k++, submitted++) submit(e, &reuse[k], ids[k]);
  if (wait_done(submitted))
    for (int k = 0; k < NQ; k++) check(&reuse[k]);
  nam_block_cache_stats cs;
  nam_block_cache_get_stats(cache, &cs);
  cs.platform[0].hits -= cs0.platform[0].hits;
  cs.platform[0].misses -= cs0.platform[0].misses;
  cs.platform[0].bytes_to -= cs0.platform[0].bytes_to;
  printf("block cache on opencl0: %llu hits, %llu misses, %llu bytes "
         "uploaded\n",
         (unsigned long long)cs.platform[0].hits,
         (unsigned long long)cs.platform[0].misses,
         (unsigned long long)cs.platform[0].bytes_to);
  /* the reference once, each query block once */
  CHECK(cs.platform[0].misses == NQ + 1 && cs.platform[0].hits == NQ - 1,
        "%llu misses, %llu hits", (unsigned long long)cs.platform[0].misses,
        (unsigned long long)cs.platform[0].hits);

  /* anonymous inputs, three tasks in flight */
  job anon[3];
  memset(anon, 0, sizeof anon);
  anon[0].label = "dna 2/-3/5/2, 300 pairs, anonymous";
  dna_params(&anon[0], 2, -3, 5, 2);
  anon[0].in[0] = block(&fq, 600, 300);
  anon[0].in[1] = block(&fr, 600, 300);
  anon[1].label = "protein globins BLOSUM62 11/1, anonymous";
  protein_params(&anon[1], "BLOSUM62");
  anon[1].in[0] = block(&glob, 0, glob.n - 1);
  anon[1].in[1] = block(&glob, 1, glob.n - 1);
  anon[2].label = "protein Swiss-Prot PAM250 11/1, anonymous";
  protein_params(&anon[2], "PAM250");
  anon[2].in[0] = block(&swiss, 0, swiss.n - 1);
  anon[2].in[1] = block(&swiss, 1, swiss.n - 1);
  for (int k = 0; k < 3; k++) cpu_answer(&anon[k]);
  for (int k = 0; k < 3; k++, submitted++) submit(e, &anon[k], NULL);
  if (wait_done(submitted))
    for (int k = 0; k < 3; k++) check(&anon[k]);

  /* cancel while running: ECANCELED, or done in time and right */
  job big = {.label = "dna 3/-3/6/1, 2000 pairs, canceled"};
  dna_params(&big, 3, -3, 6, 1);
  big.in[0] = block(&fq, 0, fq.n);
  big.in[1] = block(&fr, 0, fq.n);
  cpu_answer(&big);
  submit(e, &big, NULL);
  submitted++;
  struct timespec pause = {0, 300 * 1000 * 1000};
  nanosleep(&pause, NULL);
  if (big.task) nam_task_cancel(big.task);
  if (wait_done(submitted) && big.task) {
    int s = nam_task_status(big.task);
    printf("%s: status %d (%s)\n", big.label, s, nam_task_message(big.task));
    if (s == 0) {
      check(&big);
    } else {
      CHECK(s == EMBER_ECANCELED, "canceled task: status %d", s);
      nam_task_free(big.task);
    }
  }

  nam_engine_counters c;
  nam_engine_get_counters(e, &c);
  printf("engine: %llu submitted, %llu completed, %llu failed, %llu "
         "canceled\n",
         (unsigned long long)c.submitted, (unsigned long long)c.completed,
         (unsigned long long)c.failed, (unsigned long long)c.canceled);
  nam_engine_destroy(e);

  for (int k = 0; k < NQ; k++) {
    free((void *)reuse[k].in[0].data);
    free(reuse[k].cpu.data);
  }
  free((void *)ref.data);
  for (int k = 0; k < 3; k++) {
    free((void *)anon[k].in[0].data);
    free((void *)anon[k].in[1].data);
    free(anon[k].cpu.data);
  }
  free((void *)big.in[0].data);
  free((void *)big.in[1].data);
  free(big.cpu.data);
  swt_fasta_free(&fq);
  swt_fasta_free(&fr);
  swt_fasta_free(&glob);
  swt_fasta_free(&swiss);
  if (failures) {
    printf("FAILED: %d errors\n", failures);
    return 1;
  }
  printf("OK\n");
  return 0;
}
