/*
 * engine_jobs.h - sw tasks driven through the NAM engine, for the engine's
 * unit tests, the platform conformance test and the engine benchmarks
 * (test code only).
 *
 * A job is one sw task: two ESQ1 seqset blocks (queries, references), its
 * packed Params, how to submit it (accelerator, app, block ids, priority,
 * platform constraints) and, once its done callback ran, what came back.
 * Completions are counted in one place (ejob_wait), so a test submits any
 * number of jobs and waits for them together.
 *
 * Threads: submit from any thread; done callbacks run on engine threads
 * and only record (no asserts there).
 */
#ifndef EMBER_TESTS_ENGINE_JOBS_H
#define EMBER_TESTS_ENGINE_JOBS_H

#include <stddef.h>
#include <stdint.h>

#include "engine.h"

typedef struct ejob ejob;
struct ejob {
  /* what to run */
  const acc_descriptor *acc;   /* NULL: acc_sw_descriptor */
  acc_block in[2];             /* queries, references */
  uint8_t *owned[2];           /* blocks this job frees (ejob_free) */
  uint8_t *params;             /* packed Ember__Sw__Params (malloc'd) */
  size_t params_len;
  uint64_t app;
  uint64_t block_ids[2];
  int use_ids;                 /* submit with block_ids */
  int priority;
  const char *platform_kind, *prefer_kind;
  /* called at the end of the done callback, on the engine's thread (may
   * block there, e.g. to hold a cpu worker) */
  void (*hook)(struct ejob *j);

  /* what came back (valid once done) */
  nam_task *task;
  int done;                    /* done callbacks seen (must end at 1) */
  int status;
  unsigned order;              /* completion order among all jobs, from 0 */
  uint64_t done_ns;            /* CLOCK_MONOTONIC when the callback ran */
};

/* A seeded generator (splitmix64) for reproducible sequences. */
uint64_t ejob_rand(uint64_t *state);

/* ejob_dna_block - a malloc'd seqset of count random DNA sequences of
 * length len .. len + spread - 1; its bytes in *out. Exits on failure. */
uint8_t *ejob_dna_block(uint64_t *rng, size_t count, size_t len,
                        size_t spread, acc_block *out);

/* ejob_make_dna - a job of pairs random query/reference pairs (queries qlen
 * .. qlen+7, references rlen .. rlen+7), default DNA params. */
void ejob_make_dna(ejob *j, uint64_t *rng, size_t pairs, size_t qlen,
                   size_t rlen);

/* ejob_params_dna / ejob_params_protein - set the job's packed params;
 * protein takes a built-in matrix by name. */
void ejob_params_dna(ejob *j, int match, int mismatch, int open, int ext);
void ejob_params_protein(ejob *j, const char *matrix, int open, int ext);

/* ejob_submit - validate and submit j to e. Returns what
 * nam_engine_submit returned (j->task is set on 0). */
int ejob_submit(nam_engine *e, ejob *j);

/* ejob_reset - forget completions counted so far (before a new run). */
void ejob_reset(void);
/* ejob_done_count - completions since the last reset. */
unsigned ejob_done_count(void);
/* ejob_wait - wait until n completions since the last reset; returns 0, or
 * -1 after seconds (with a line on stderr). */
int ejob_wait(unsigned n, int seconds);

/* ejob_wait_job - wait until j is done; 0, or -1 after seconds. */
int ejob_wait_job(ejob *j, int seconds);

/* ejob_reference - what the accelerator's CPU code gives for j (malloc'd
 * out->data). Exits on failure. */
void ejob_reference(const ejob *j, acc_output *out);

/* ejob_check_output - j finished with status 0 and its output is the same
 * bytes as want (or, want NULL, as ejob_reference). Returns 1 if so, else 0
 * after printing what differed, prefixed with label. */
int ejob_check_output(ejob *j, const acc_output *want, const char *label);

/* ejob_free - free the task (after its callback), owned blocks, params. */
void ejob_free(ejob *j);

/* Board config helpers: a board named name with bitstream "sw" and
 * nam_fpga_emu_config_defaults otherwise. */
void ejob_board(nam_fpga_emu_config *b, const char *name);

/* ejob_platform - the status of the platform named name (0), or -1. */
int ejob_platform(nam_engine *e, const char *name, nam_platform_status *out);

/* ejob_now_ns - CLOCK_MONOTONIC in ns. */
uint64_t ejob_now_ns(void);

#endif
