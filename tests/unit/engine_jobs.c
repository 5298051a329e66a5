/* engine_jobs.c - sw tasks driven through the NAM engine (see .h). */
#include "engine_jobs.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accelerators/sw/sw.pb-c.h"
#include "ember/ember_errors.h"
#include "sw/seqset.h"
#include "sw/sw.h"

#define NAM_MAX_PLATFORMS_SEEN 16

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static unsigned n_done;

static void init_cond(void) {
  pthread_condattr_t a;
  pthread_condattr_init(&a);
  pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
  pthread_cond_init(&changed, &a);
  pthread_condattr_destroy(&a);
}

uint64_t ejob_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t ejob_rand(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static void *xmalloc(size_t n) {
  void *p = malloc(n ? n : 1);
  if (!p) {
    fprintf(stderr, "engine_jobs: out of memory (%zu bytes)\n", n);
    exit(1);
  }
  return p;
}

uint8_t *ejob_dna_block(uint64_t *rng, size_t count, size_t len,
                        size_t spread, acc_block *out) {
  size_t *lengths = xmalloc(count * sizeof *lengths);
  char **seqs = xmalloc(count * sizeof *seqs);
  for (size_t i = 0; i < count; i++) {
    lengths[i] = len + (spread ? ejob_rand(rng) % spread : 0);
    seqs[i] = xmalloc(lengths[i]);
    for (size_t k = 0; k < lengths[i]; k++)
      seqs[i][k] = "ACGT"[ejob_rand(rng) % 4];
  }
  size_t size = acc_seqset_bytes(lengths, count);
  uint8_t *block = xmalloc(size);
  if (size == 0 || acc_seqset_write(block, size, (const char *const *)seqs,
                                    lengths, count) != 0) {
    fprintf(stderr, "engine_jobs: cannot write a seqset\n");
    exit(1);
  }
  for (size_t i = 0; i < count; i++) free(seqs[i]);
  free(seqs);
  free(lengths);
  out->data = block;
  out->size = size;
  return block;
}

static void set_params(ejob *j, const Ember__Sw__Params *p) {
  free(j->params);
  j->params_len = ember__sw__params__get_packed_size(p);
  j->params = xmalloc(j->params_len);
  ember__sw__params__pack(p, j->params);
}

void ejob_params_dna(ejob *j, int match, int mismatch, int open, int ext) {
  Ember__Sw__Params p = EMBER__SW__PARAMS__INIT;
  p.has_match = p.has_mismatch = p.has_gap_open = p.has_gap_extend = 1;
  p.match = match;
  p.mismatch = mismatch;
  p.gap_open = open;
  p.gap_extend = ext;
  set_params(j, &p);
}

void ejob_params_protein(ejob *j, const char *matrix, int open, int ext) {
  Ember__Sw__Params p = EMBER__SW__PARAMS__INIT;
  p.has_alphabet = 1;
  p.alphabet = EMBER__SW__ALPHABET__PROTEIN;
  p.matrix_name = (char *)matrix;
  p.has_gap_open = p.has_gap_extend = 1;
  p.gap_open = open;
  p.gap_extend = ext;
  set_params(j, &p);
}

void ejob_make_dna(ejob *j, uint64_t *rng, size_t pairs, size_t qlen,
                   size_t rlen) {
  memset(j, 0, sizeof *j);
  j->owned[0] = ejob_dna_block(rng, pairs, qlen, 8, &j->in[0]);
  j->owned[1] = ejob_dna_block(rng, pairs, rlen, 8, &j->in[1]);
  ejob_params_dna(j, 3, -3, 6, 1);
}

static const acc_descriptor *acc_of(const ejob *j) {
  return j->acc ? j->acc : &acc_sw_descriptor;
}

static void on_done(nam_task *t, void *user) {
  ejob *j = user;
  (void)t;
  pthread_mutex_lock(&lock);
  j->done++;
  j->status = nam_task_status(t);
  j->order = n_done++;
  j->done_ns = ejob_now_ns();
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&lock);
  if (j->hook) j->hook(j);
}

static void *validate(const ejob *j) {
  void *prepared = NULL;
  char err[256] = "";
  int rc = acc_of(j)->validate(j->params, j->params_len, j->in, 2, &prepared,
                               err, sizeof err);
  if (rc) {
    fprintf(stderr, "engine_jobs: validate: %d %s\n", rc, err);
    exit(1);
  }
  return prepared;
}

int ejob_submit(nam_engine *e, ejob *j) {
  pthread_once(&once, init_cond);
  nam_task_spec spec = {
    .acc = acc_of(j),
    .params = j->params,
    .params_len = j->params_len,
    .inputs = j->in,
    .n_inputs = 2,
    .app = j->app,
    .block_ids = j->use_ids ? j->block_ids : NULL,
    .priority = j->priority,
    .platform_kind = j->platform_kind,
    .prefer_kind = j->prefer_kind,
    .done = on_done,
    .user = j,
  };
  /* the callback may run before submit returns: publish the task first */
  pthread_mutex_lock(&lock);
  int rc = nam_engine_submit(e, &spec, &j->task);
  pthread_mutex_unlock(&lock);
  return rc;
}

void ejob_reset(void) {
  pthread_once(&once, init_cond);
  pthread_mutex_lock(&lock);
  n_done = 0;
  pthread_mutex_unlock(&lock);
}

unsigned ejob_done_count(void) {
  pthread_mutex_lock(&lock);
  unsigned n = n_done;
  pthread_mutex_unlock(&lock);
  return n;
}

int ejob_wait(unsigned n, int seconds) {
  pthread_once(&once, init_cond);
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += seconds;
  pthread_mutex_lock(&lock);
  while (n_done < n)
    if (pthread_cond_timedwait(&changed, &lock, &until) == ETIMEDOUT) {
      unsigned got = n_done;
      pthread_mutex_unlock(&lock);
      fprintf(stderr, "engine_jobs: waited %d s for %u completions, got %u\n",
              seconds, n, got);
      return -1;
    }
  pthread_mutex_unlock(&lock);
  return 0;
}

int ejob_wait_job(ejob *j, int seconds) {
  pthread_once(&once, init_cond);
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_sec += seconds;
  pthread_mutex_lock(&lock);
  while (!j->done)
    if (pthread_cond_timedwait(&changed, &lock, &until) == ETIMEDOUT) {
      pthread_mutex_unlock(&lock);
      fprintf(stderr, "engine_jobs: waited %d s for a task\n", seconds);
      return -1;
    }
  pthread_mutex_unlock(&lock);
  return 0;
}

void ejob_reference(const ejob *j, acc_output *out) {
  void *prepared = validate(j);
  char err[256] = "";
  acc_run_ctx ctx = {0};
  int rc = acc_of(j)->run_cpu(prepared, j->in, 2, &ctx, out, err, sizeof err);
  if (rc) {
    fprintf(stderr, "engine_jobs: run_cpu: %d %s\n", rc, err);
    exit(1);
  }
  acc_of(j)->release(prepared);
}

int ejob_check_output(ejob *j, const acc_output *want, const char *label) {
  acc_output ref = {0};
  if (!want) {
    ejob_reference(j, &ref);
    want = &ref;
  }
  int ok = 1;
  if (j->done != 1 || j->status != 0) {
    printf("%s: %d callbacks, status %d (%s): %s\n", label, j->done,
           j->status, ember_strerror(j->status),
           j->task ? nam_task_message(j->task) : "");
    ok = 0;
  } else {
    acc_output got = {0};
    nam_task_take_output(j->task, &got);
    if (got.size != want->size || !got.data ||
        memcmp(got.data, want->data, want->size) != 0) {
      size_t at = 0;
      while (got.data && at < got.size && at < want->size &&
             got.data[at] == want->data[at])
        at++;
      printf("%s: output of %zu bytes on %s differs from the reference "
             "(%zu bytes) at byte %zu\n", label, got.size,
             nam_task_platform(j->task), want->size, at);
      ok = 0;
    }
    free(got.data);
  }
  free(ref.data);
  return ok;
}

void ejob_free(ejob *j) {
  nam_task_free(j->task);
  j->task = NULL;
  free(j->owned[0]);
  free(j->owned[1]);
  j->owned[0] = j->owned[1] = NULL;
  free(j->params);
  j->params = NULL;
}

void ejob_board(nam_fpga_emu_config *b, const char *name) {
  nam_fpga_emu_config_defaults(b);
  snprintf(b->name, sizeof b->name, "%s", name);
  snprintf(b->bitstreams[0], sizeof b->bitstreams[0], "sw");
  b->n_bitstreams = 1;
}

int ejob_platform(nam_engine *e, const char *name, nam_platform_status *out) {
  nam_platform_status ps[NAM_MAX_PLATFORMS_SEEN];
  size_t n = nam_engine_platforms(e, ps, NAM_MAX_PLATFORMS_SEEN);
  for (size_t i = 0; i < n; i++)
    if (strcmp(ps[i].name, name) == 0) {
      *out = ps[i];
      return 0;
    }
  return -1;
}
