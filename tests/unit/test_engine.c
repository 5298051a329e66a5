/*
 * test_engine.c - the NAM engine (nam/engine/): task queue order, and the
 * engine driven with real "sw" tasks: completion, priorities, cancellation,
 * limits, destroy, counters.
 *
 * To hold the single cpu worker deterministically, a "gate" task's done
 * callback (which runs on the worker) waits until the test opens the gate:
 * while it waits, everything submitted stays queued.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "accelerators/sw/sw.pb-c.h"
#include "ember/ember_errors.h"
#include "engine.h"
#include "engine_internal.h"
#include "sw/seqset.h"
#include "sw/sw.h"

#define WAIT_SECONDS 30 /* a hung wait fails the test instead of the timeout */

/* ------------------------------------------------------------------------ */
/* Jobs: one sw task, its input blocks and what its done callback saw.       */

typedef struct job {
  uint8_t *blocks[2];
  acc_block in[2];
  size_t pairs;
  uint8_t params[64];
  size_t params_len;
  int priority;
  const char *platform_kind;
  uint64_t inline_max_ns;   /* nam_task_spec.inline_max_ns */
  int gate;                 /* the done callback waits for open_gate() */
  int open_gate_when_done;  /* the done callback opens the gate */

  nam_task *task;
  int calls;                /* done callbacks; must end at 1 */
  int other_task;           /* callbacks for a task that is not j->task */
  int status;
  char message[256];
  pthread_t thread;
  int order;                /* completion order, from 0 */
} job;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int n_done, gate_open, gate_entered;
static pthread_t test_thread;

static void on_done(nam_task *t, void *user) {
  job *j = user;
  pthread_mutex_lock(&lock);
  if (t != j->task) j->other_task++; /* no cmocka asserts off the test thread */
  j->calls++;
  j->status = nam_task_status(t);
  snprintf(j->message, sizeof j->message, "%s", nam_task_message(t));
  j->thread = pthread_self();
  j->order = n_done++;
  if (j->open_gate_when_done) gate_open = 1;
  pthread_cond_broadcast(&changed);
  if (j->gate) {
    gate_entered = 1;
    while (!gate_open) pthread_cond_wait(&changed, &lock);
  }
  pthread_mutex_unlock(&lock);
}

static void deadline_in(struct timespec *ts, int seconds) {
  clock_gettime(CLOCK_REALTIME, ts);
  ts->tv_sec += seconds;
}

/* Wait until n done callbacks have run. */
static void wait_done(int n) {
  struct timespec until;
  deadline_in(&until, WAIT_SECONDS);
  pthread_mutex_lock(&lock);
  while (n_done < n)
    if (pthread_cond_timedwait(&changed, &lock, &until) == ETIMEDOUT) {
      int got = n_done;
      pthread_mutex_unlock(&lock);
      fail_msg("waited %d s for %d done callbacks, got %d", WAIT_SECONDS, n,
               got);
    }
  pthread_mutex_unlock(&lock);
}

/* Wait until the gate task's callback holds the worker. */
static void wait_gate_entered(void) {
  struct timespec until;
  deadline_in(&until, WAIT_SECONDS);
  pthread_mutex_lock(&lock);
  while (!gate_entered)
    if (pthread_cond_timedwait(&changed, &lock, &until) == ETIMEDOUT) {
      pthread_mutex_unlock(&lock);
      fail_msg("the gate task did not complete in %d s", WAIT_SECONDS);
    }
  pthread_mutex_unlock(&lock);
}

static void open_gate(void) {
  pthread_mutex_lock(&lock);
  gate_open = 1;
  pthread_cond_broadcast(&changed);
  pthread_mutex_unlock(&lock);
}

static int done_count(void) {
  pthread_mutex_lock(&lock);
  int n = n_done;
  pthread_mutex_unlock(&lock);
  return n;
}

/* Poll the counters until n tasks run (there is no "started" callback),
 * or have already finished. */
static void wait_running(nam_engine *e, unsigned n) {
  nam_engine_counters c;
  struct timespec start, now, pause = {0, 1000000};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    nam_engine_get_counters(e, &c);
    if (c.running >= n || c.completed >= n) return;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > WAIT_SECONDS)
      fail_msg("waited for %u running tasks, %u run", n, c.running);
    nanosleep(&pause, NULL);
  }
}

static uint64_t rng_state;
static uint32_t rng(void) {
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (uint32_t)(rng_state >> 33);
}

/* A seqset block of count random DNA sequences of length len .. len+7. */
static uint8_t *dna_block(size_t count, size_t len, acc_block *out) {
  size_t *lengths = calloc(count, sizeof *lengths);
  char **seqs = calloc(count, sizeof *seqs);
  assert_non_null(lengths);
  assert_non_null(seqs);
  for (size_t i = 0; i < count; i++) {
    lengths[i] = len + rng() % 8;
    seqs[i] = malloc(lengths[i]);
    assert_non_null(seqs[i]);
    for (size_t k = 0; k < lengths[i]; k++) seqs[i][k] = "ACGT"[rng() % 4];
  }
  size_t size = acc_seqset_bytes(lengths, count);
  assert_true(size > 0);
  uint8_t *block = malloc(size);
  assert_non_null(block);
  assert_int_equal(acc_seqset_write(block, size, (const char *const *)seqs,
                                    lengths, count), 0);
  for (size_t i = 0; i < count; i++) free(seqs[i]);
  free(seqs);
  free(lengths);
  out->data = block;
  out->size = size;
  return block;
}

/* A job of pairs query/reference pairs of about len residues each. */
static void make_job(job *j, size_t pairs, size_t len) {
  memset(j, 0, sizeof *j);
  j->pairs = pairs;
  j->blocks[0] = dna_block(pairs, len, &j->in[0]);
  j->blocks[1] = dna_block(pairs, len, &j->in[1]);
}

/* Pack non-default params into the job. */
static void job_params(job *j, int32_t match, int32_t mismatch) {
  Ember__Sw__Params p = EMBER__SW__PARAMS__INIT;
  p.has_match = p.has_mismatch = 1;
  p.match = match;
  p.mismatch = mismatch;
  j->params_len = ember__sw__params__get_packed_size(&p);
  assert_in_range(j->params_len, 1, sizeof j->params);
  ember__sw__params__pack(&p, j->params);
}

static void *validate(job *j) {
  void *prepared = NULL;
  char err[256] = "";
  int rc = acc_sw_descriptor.validate(j->params, j->params_len, j->in, 2,
                                      &prepared, err, sizeof err);
  if (rc) fail_msg("validate: %d %s", rc, err);
  assert_non_null(prepared);
  return prepared;
}

static int submit_job(nam_engine *e, job *j) {
  nam_task_spec spec = {
    .acc = &acc_sw_descriptor,
    .params = j->params,
    .params_len = j->params_len,
    .inputs = j->in,
    .n_inputs = 2,
    .priority = j->priority,
    .platform_kind = j->platform_kind,
    .done = on_done,
    .user = j,
    .inline_max_ns = j->inline_max_ns,
  };
  /* the callback may run before submit returns: publish the task first
   * (a task run inline calls it on this thread, inside submit) */
  if (!j->inline_max_ns) pthread_mutex_lock(&lock);
  int rc = nam_engine_submit(e, &spec, &j->task);
  if (!j->inline_max_ns) pthread_mutex_unlock(&lock);
  if (rc) assert_null(j->task);
  return rc;
}

/* What the sw accelerator returns for this job when run directly. */
static void expected_output(job *j, acc_output *out) {
  void *prepared = validate(j);
  char err[256] = "";
  acc_run_ctx ctx = {0};
  int rc = acc_sw_descriptor.run_cpu(prepared, j->in, 2, &ctx, out, err,
                                     sizeof err);
  if (rc) fail_msg("run_cpu: %d %s", rc, err);
  acc_sw_descriptor.release(prepared);
}

/* A finished job ran fine and gave the right output. */
static void check_result(job *j) {
  assert_int_equal(j->calls, 1);
  assert_int_equal(j->other_task, 0);
  assert_int_equal(j->status, 0);
  assert_string_equal(j->message, "");
  assert_int_equal(nam_task_status(j->task), 0);
  assert_string_equal(nam_task_platform(j->task), "cpu");
  const nam_task_times *tm = nam_task_get_times(j->task);
  assert_true(tm->queued > 0);
  assert_in_range(tm->started, tm->queued, UINT64_MAX);
  assert_in_range(tm->finished, tm->started, UINT64_MAX);

  acc_output got = {0}, want = {0};
  nam_task_take_output(j->task, &got);
  expected_output(j, &want);
  assert_non_null(got.data);
  assert_int_equal(got.size, want.size);
  assert_memory_equal(got.data, want.data, want.size);
  Ember__Sw__Result *r = ember__sw__result__unpack(NULL, got.size, got.data);
  assert_non_null(r);
  assert_int_equal(r->n_score, j->pairs);
  ember__sw__result__free_unpacked(r, NULL);
  free(got.data);
  free(want.data);
  /* taken: the task holds no output any more */
  nam_task_take_output(j->task, &got);
  assert_null(got.data);
  assert_int_equal(got.size, 0);
}

static void check_canceled(job *j, const char *message) {
  assert_int_equal(j->calls, 1);
  assert_int_equal(j->other_task, 0);
  assert_int_equal(j->status, EMBER_ECANCELED);
  assert_string_equal(j->message, message);
  acc_output out = {(uint8_t *)1, 1};
  nam_task_take_output(j->task, &out);
  assert_null(out.data);
}

static void free_job(job *j) {
  nam_task_free(j->task);
  j->task = NULL;
  free(j->blocks[0]);
  free(j->blocks[1]);
}

static void check_counters(nam_engine *e, uint64_t submitted,
                           uint64_t completed, uint64_t failed,
                           uint64_t canceled, unsigned queued,
                           unsigned running) {
  nam_engine_counters c;
  nam_engine_get_counters(e, &c);
  assert_int_equal(c.submitted, submitted);
  assert_int_equal(c.completed, completed);
  assert_int_equal(c.failed, failed);
  assert_int_equal(c.canceled, canceled);
  assert_int_equal(c.queued, queued);
  assert_int_equal(c.running, running);
}

static nam_engine *engine(unsigned workers, unsigned capacity) {
  nam_engine_config cfg = {.cpu_workers = workers,
                           .queue_capacity = capacity};
  nam_engine *e = (nam_engine *)1;
  assert_int_equal(nam_engine_create(&cfg, &e), 0);
  assert_non_null(e);
  return e;
}

/* Submit a gate job and wait until its callback holds the only worker. */
static void hold_worker(nam_engine *e, job *gate) {
  make_job(gate, 1, 20);
  gate->gate = 1;
  assert_int_equal(submit_job(e, gate), 0);
  wait_gate_entered();
}

static int reset(void **state) {
  pthread_mutex_lock(&lock);
  n_done = gate_open = gate_entered = 0;
  pthread_mutex_unlock(&lock);
  test_thread = pthread_self();
  rng_state = 12345;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Task queue                                                                */

static void queue_expect(nam_task_queue *q, nam_task *const *want, size_t n) {
  assert_int_equal(q->length, n);
  nam_task *t = q->head, *prev = NULL;
  for (size_t i = 0; i < n; i++, prev = t, t = t->next) {
    if (t != want[i])
      fail_msg("position %zu: task seq %llu prio %d, expected seq %llu "
               "prio %d", i, (unsigned long long)(t ? t->seq : 0),
               t ? t->priority : 0, (unsigned long long)want[i]->seq,
               want[i]->priority);
    assert_ptr_equal(t->prev, prev);
  }
  assert_null(t);
  assert_ptr_equal(q->tail, prev);
}

/* Priority first, then arrival order, for a fixed mix. */
static void queue_priority_then_fifo(void **state) {
  nam_task t[8];
  const int prio[8] = {0, 5, 0, -2, 5, 9, -2, 0};
  nam_task_queue q = {0};
  memset(t, 0, sizeof t);
  for (int i = 0; i < 8; i++) {
    t[i].priority = prio[i];
    t[i].seq = (uint64_t)i;
    nam_queue_insert(&q, &t[i]);
  }
  nam_task *const want[8] = {&t[5], &t[1], &t[4], &t[0],
                             &t[2], &t[7], &t[3], &t[6]};
  queue_expect(&q, want, 8);

  /* remove the head, a middle one and the tail */
  nam_queue_remove(&q, &t[5]);
  assert_null(t[5].prev);
  assert_null(t[5].next);
  nam_queue_remove(&q, &t[2]);
  nam_queue_remove(&q, &t[6]);
  nam_task *const want2[5] = {&t[1], &t[4], &t[0], &t[7], &t[3]};
  queue_expect(&q, want2, 5);

  /* a re-inserted task goes behind the ones of its priority */
  t[2].seq = 8;
  nam_queue_insert(&q, &t[2]);
  nam_task *const want3[6] = {&t[1], &t[4], &t[0], &t[7], &t[2], &t[3]};
  queue_expect(&q, want3, 6);

  for (int i = 0; i < 6; i++) nam_queue_remove(&q, q.head);
  assert_null(q.head);
  assert_null(q.tail);
  assert_int_equal(q.length, 0);
}

/* Many random priorities: the queue equals a stable sort by priority. */
static void queue_matches_stable_sort(void **state) {
  enum { N = 500 };
  nam_task *t = calloc(N, sizeof *t);
  nam_task **want = calloc(N, sizeof *want);
  assert_non_null(t);
  assert_non_null(want);
  nam_task_queue q = {0};
  for (int i = 0; i < N; i++) {
    t[i].priority = (int)(rng() % 7) - 3;
    t[i].seq = (uint64_t)i;
    nam_queue_insert(&q, &t[i]);
  }
  size_t n = 0;
  for (int p = 3; p >= -3; p--)
    for (int i = 0; i < N; i++)
      if (t[i].priority == p) want[n++] = &t[i];
  queue_expect(&q, want, N);
  /* remove every other one, in random-ish order of position */
  for (int i = 0; i < N; i += 2) nam_queue_remove(&q, &t[i]);
  n = 0;
  for (int p = 3; p >= -3; p--)
    for (int i = 1; i < N; i += 2)
      if (t[i].priority == p) want[n++] = &t[i];
  queue_expect(&q, want, N / 2);
  free(want);
  free(t);
}

/* ------------------------------------------------------------------------ */
/* Engine                                                                    */

static void run_tasks(unsigned workers) {
  enum { N = 24 };
  job jobs[N];
  nam_engine *e = engine(workers, 0);
  for (int i = 0; i < N; i++) {
    make_job(&jobs[i], 1 + (size_t)i % 5, 30 + 10 * (size_t)(i % 4));
    if (i % 3 == 0) job_params(&jobs[i], 2, -1);
    jobs[i].priority = i % 4 - 1;
    assert_int_equal(submit_job(e, &jobs[i]), 0);
  }
  wait_done(N);
  int orders[N] = {0};
  for (int i = 0; i < N; i++) {
    check_result(&jobs[i]);
    assert_false(pthread_equal(jobs[i].thread, test_thread));
    assert_in_range(jobs[i].order, 0, N - 1);
    orders[jobs[i].order]++;
  }
  for (int i = 0; i < N; i++) assert_int_equal(orders[i], 1);
  check_counters(e, N, N, 0, 0, 0, 0);

  nam_platform_status ps[4];
  assert_int_equal(nam_engine_platforms(e, ps, 4), 1);
  assert_string_equal(ps[0].name, "cpu");
  assert_string_equal(ps[0].kind, "cpu");
  assert_string_equal(ps[0].state, "ready");
  assert_int_equal(ps[0].workers, workers);
  assert_int_equal(ps[0].completed, N);
  assert_int_equal(ps[0].failed, 0);
  assert_int_equal(ps[0].running, 0);
  assert_int_equal(ps[0].queued, 0);

  nam_engine_destroy(e);
  /* no callback again at destroy */
  assert_int_equal(done_count(), N);
  for (int i = 0; i < N; i++) {
    assert_int_equal(jobs[i].calls, 1);
    free_job(&jobs[i]);
  }
}

static void tasks_complete_one_worker(void **state) { run_tasks(1); }
static void tasks_complete_two_workers(void **state) { run_tasks(2); }

/* With the worker held, queued tasks run by priority, then FIFO. */
static void dispatch_priority_order(void **state) {
  enum { N = 7 };
  const int prio[N] = {0, 5, -1, 5, 0, 10, -1};
  const int want_order[N] = {4, 2, 6, 3, 5, 1, 7}; /* 1-based; gate is 0 */
  job gate, jobs[N];
  nam_engine *e = engine(1, 0);
  hold_worker(e, &gate);
  for (int i = 0; i < N; i++) {
    make_job(&jobs[i], 1, 20);
    jobs[i].priority = prio[i];
    assert_int_equal(submit_job(e, &jobs[i]), 0);
  }
  assert_int_equal(nam_engine_queue_length(e, &acc_sw_descriptor), N);
  open_gate();
  wait_done(N + 1);
  for (int i = 0; i < N; i++) {
    check_result(&jobs[i]);
    if (jobs[i].order != want_order[i])
      fail_msg("task %d (priority %d) finished as #%d, expected #%d", i,
               prio[i], jobs[i].order, want_order[i]);
  }
  nam_engine_destroy(e);
  free_job(&gate);
  for (int i = 0; i < N; i++) free_job(&jobs[i]);
}

/* Canceling a queued task completes it at once, on the calling thread. */
static void cancel_queued(void **state) {
  job gate, a, b, c;
  nam_engine *e = engine(1, 0);
  hold_worker(e, &gate);
  make_job(&a, 2, 40);
  make_job(&b, 2, 40);
  make_job(&c, 2, 40);
  assert_int_equal(submit_job(e, &a), 0);
  assert_int_equal(submit_job(e, &b), 0);
  assert_int_equal(submit_job(e, &c), 0);
  check_counters(e, 4, 1, 0, 0, 3, 0);

  assert_int_equal(nam_task_cancel(b.task), 0);
  assert_int_equal(done_count(), 2); /* before cancel returned */
  check_canceled(&b, "canceled while queued");
  assert_true(pthread_equal(b.thread, test_thread));
  assert_int_equal(nam_task_get_times(b.task)->started, 0);
  assert_int_equal(nam_engine_queue_length(e, &acc_sw_descriptor), 2);
  check_counters(e, 4, 2, 0, 1, 2, 0);
  /* twice: already done */
  assert_int_equal(nam_task_cancel(b.task), EMBER_ENOTFOUND);

  open_gate();
  wait_done(4);
  check_result(&a);
  check_result(&c);
  assert_int_equal(b.calls, 1);
  check_counters(e, 4, 4, 0, 1, 0, 0);
  nam_engine_destroy(e);
  free_job(&gate);
  free_job(&a);
  free_job(&b);
  free_job(&c);
}

/* Canceling a running task: its run sees the flag and it completes with
 * ECANCELED on the worker. */
static void cancel_running(void **state) {
  job a;
  nam_engine *e = engine(1, 0);
  make_job(&a, 400, 1000); /* ~400M cells: far longer than the test needs */
  assert_int_equal(submit_job(e, &a), 0);
  wait_running(e, 1);
  int rc = nam_task_cancel(a.task);
  wait_done(1);
  assert_int_equal(a.calls, 1);
  if (rc == 0) {
    /* the message is the accelerator's when its run stopped, the engine's
     * when the run had finished anyway */
    assert_int_equal(a.status, EMBER_ECANCELED);
    assert_string_not_equal(a.message, "");
    acc_output out = {0};
    nam_task_take_output(a.task, &out);
    assert_null(out.data);
    check_counters(e, 1, 1, 0, 1, 0, 0);
  } else { /* it finished before the cancel could reach it */
    assert_int_equal(rc, EMBER_ENOTFOUND);
    check_result(&a);
  }
  assert_false(pthread_equal(a.thread, test_thread));
  nam_engine_destroy(e);
  free_job(&a);
}

static void cancel_done_task(void **state) {
  job a;
  nam_engine *e = engine(1, 0);
  make_job(&a, 3, 50);
  assert_int_equal(submit_job(e, &a), 0);
  wait_done(1);
  assert_int_equal(nam_task_cancel(a.task), EMBER_ENOTFOUND);
  check_result(&a);
  check_counters(e, 1, 1, 0, 0, 0, 0);
  nam_engine_destroy(e);
  assert_int_equal(a.calls, 1);
  free_job(&a);
}

/* A platform kind that does not exist is refused at submit. */
static void missing_platform_kind(void **state) {
  job a, b, c;
  nam_engine *e = engine(1, 0);
  make_job(&a, 1, 20);
  a.platform_kind = "opencl";
  assert_int_equal(submit_job(e, &a), EMBER_ENOPLATFORM);
  make_job(&b, 1, 20);
  b.platform_kind = "fpga-emu";
  assert_int_equal(submit_job(e, &b), EMBER_ENOPLATFORM);
  check_counters(e, 0, 0, 0, 0, 0, 0);
  /* the kind that exists, and "any" */
  make_job(&c, 1, 20);
  c.platform_kind = "cpu";
  assert_int_equal(submit_job(e, &c), 0);
  wait_done(1);
  check_result(&c);
  assert_int_equal(a.calls + b.calls, 0);
  char names[64];
  nam_engine_platforms_for(e, &acc_sw_descriptor, names, sizeof names);
  assert_string_equal(names, "cpu");
  nam_engine_destroy(e);
  free_job(&a);
  free_job(&b);
  free_job(&c);
}

/* A full queue answers EBUSY; room comes back as tasks leave it. */
static void queue_capacity(void **state) {
  job gate, a, b, c, d;
  nam_engine *e = engine(1, 2);
  hold_worker(e, &gate); /* taken from the queue: it holds no slot */
  make_job(&a, 1, 20);
  make_job(&b, 1, 20);
  make_job(&c, 1, 20);
  make_job(&d, 1, 20);
  assert_int_equal(submit_job(e, &a), 0);
  assert_int_equal(submit_job(e, &b), 0);
  assert_int_equal(submit_job(e, &c), EMBER_EBUSY);
  assert_int_equal(c.calls, 0);
  check_counters(e, 3, 1, 0, 0, 2, 0);
  assert_int_equal(nam_task_cancel(a.task), 0);
  assert_int_equal(submit_job(e, &d), 0);
  open_gate();
  wait_done(4);
  check_canceled(&a, "canceled while queued");
  check_result(&b);
  check_result(&d);
  check_counters(e, 4, 4, 0, 1, 0, 0);
  nam_engine_destroy(e);
  free_job(&gate);
  free_job(&a);
  free_job(&b);
  free_job(&c);
  free_job(&d);
}

/* Destroy cancels what is queued (callbacks on the destroying thread),
 * waits for what runs, and the tasks stay valid for their owners. */
static void destroy_cancels_queued(void **state) {
  enum { N = 5 };
  job gate, jobs[N];
  nam_engine *e = engine(1, 0);
  hold_worker(e, &gate);
  for (int i = 0; i < N; i++) {
    make_job(&jobs[i], 1, 20);
    assert_int_equal(submit_job(e, &jobs[i]), 0);
  }
  /* the first canceled callback lets the worker go, so that destroy can
   * join it; by then the queues are empty */
  jobs[0].open_gate_when_done = 1;
  nam_engine_destroy(e);
  assert_int_equal(done_count(), N + 1);
  for (int i = 0; i < N; i++) {
    check_canceled(&jobs[i], "engine stopped");
    assert_true(pthread_equal(jobs[i].thread, test_thread));
    assert_int_equal(nam_task_status(jobs[i].task), EMBER_ECANCELED);
  }
  assert_int_equal(gate.calls, 1);
  assert_int_equal(gate.status, 0);
  free_job(&gate);
  for (int i = 0; i < N; i++) free_job(&jobs[i]);
}

/* submitted = completed = ok + failed + canceled once all is done. */
static void counters_add_up(void **state) {
  enum { OK = 6, CANCELED = 3 };
  job gate, ok[OK], canceled[CANCELED], bad, refused;
  nam_engine *e = engine(1, 0);
  hold_worker(e, &gate);
  for (int i = 0; i < OK; i++) {
    make_job(&ok[i], 2, 30);
    assert_int_equal(submit_job(e, &ok[i]), 0);
  }
  for (int i = 0; i < CANCELED; i++) {
    make_job(&canceled[i], 2, 30);
    assert_int_equal(submit_job(e, &canceled[i]), 0);
  }
  /* a task that fails: its input changes after it was validated (a
   * residue no scoring knows), so run_cpu refuses it */
  make_job(&bad, 2, 30);
  assert_int_equal(submit_job(e, &bad), 0);
  acc_seqset set;
  char why[128];
  assert_int_equal(acc_seqset_view(&bad.in[0], &set, why, sizeof why), 0);
  const uint8_t *residues;
  size_t len;
  acc_seqset_get(&set, 0, &residues, &len);
  ((uint8_t *)bad.blocks[0])[residues - bad.blocks[0]] = 'Z';
  /* refused at submit: not counted */
  make_job(&refused, 1, 20);
  refused.platform_kind = "opencl";
  assert_int_equal(submit_job(e, &refused), EMBER_ENOPLATFORM);

  for (int i = 0; i < CANCELED; i++)
    assert_int_equal(nam_task_cancel(canceled[i].task), 0);
  open_gate();
  wait_done(1 + OK + CANCELED + 1);

  uint64_t n_ok = 1, n_failed = 0, n_canceled = 0;
  for (int i = 0; i < OK; i++, n_ok++) check_result(&ok[i]);
  for (int i = 0; i < CANCELED; i++, n_canceled++)
    check_canceled(&canceled[i], "canceled while queued");
  assert_int_equal(bad.calls, 1);
  assert_int_equal(bad.status, EMBER_EINVAL);
  assert_string_not_equal(bad.message, "");
  n_failed++;
  uint64_t total = n_ok + n_failed + n_canceled;
  check_counters(e, total, total, n_failed, n_canceled, 0, 0);
  nam_platform_status ps;
  assert_int_equal(nam_engine_platforms(e, &ps, 1), 1);
  assert_int_equal(ps.completed, n_ok);
  assert_int_equal(ps.failed, n_failed);
  nam_engine_destroy(e);
  free_job(&gate);
  for (int i = 0; i < OK; i++) free_job(&ok[i]);
  for (int i = 0; i < CANCELED; i++) free_job(&canceled[i]);
  free_job(&bad);
  free_job(&refused);
}

/* A small task whose submitter allows it runs inside submit, on the
 * submitting thread, once the cpu platform has figures (here from the
 * task before it: a lone cpu platform is not calibrated); behind a
 * queued task it waits its turn like any other. */
static void inline_small_task(void **state) {
  nam_engine *e = engine(1, 0);
  job first, small, gate, ahead, queued;
  make_job(&first, 1, 20); /* its time is the cpu platform's first figure */
  assert_int_equal(submit_job(e, &first), 0);
  wait_done(1);
  make_job(&small, 1, 20);
  small.inline_max_ns = UINT64_MAX / 2; /* whatever it is expected to take */
  assert_int_equal(submit_job(e, &small), 0);
  assert_int_equal(small.calls, 1); /* done before submit returned */
  assert_true(pthread_equal(small.thread, test_thread));
  check_result(&small);

  /* a task queued ahead (the worker is held) goes first: the next one
   * waits behind it instead of jumping the queue */
  hold_worker(e, &gate);
  make_job(&ahead, 1, 20);
  assert_int_equal(submit_job(e, &ahead), 0);
  make_job(&queued, 1, 20);
  queued.inline_max_ns = UINT64_MAX / 2;
  assert_int_equal(submit_job(e, &queued), 0);
  assert_int_equal(queued.calls, 0);
  open_gate();
  wait_done(5);
  assert_true(ahead.order < queued.order);
  assert_false(pthread_equal(queued.thread, test_thread));
  check_result(&ahead);
  check_result(&queued);
  nam_engine_destroy(e);
  free_job(&first);
  free_job(&small);
  free_job(&gate);
  free_job(&ahead);
  free_job(&queued);
}

static void null_is_noop(void **state) {
  nam_engine_destroy(NULL);
  nam_task_free(NULL);
  /* default config: one worker per core */
  nam_engine *e = NULL;
  assert_int_equal(nam_engine_create(NULL, &e), 0);
  nam_platform_status ps;
  assert_int_equal(nam_engine_platforms(e, &ps, 1), 1);
  assert_in_range(ps.workers, 1, 4096);
  assert_int_equal(nam_engine_platforms(e, &ps, 0), 0);
  nam_engine_destroy(e);
}

#define T(f) cmocka_unit_test_setup(f, reset)

int main(void) {
  const struct CMUnitTest tests[] = {
    T(queue_priority_then_fifo),
    T(queue_matches_stable_sort),
    T(tasks_complete_one_worker),
    T(tasks_complete_two_workers),
    T(dispatch_priority_order),
    T(cancel_queued),
    T(cancel_running),
    T(cancel_done_task),
    T(missing_platform_kind),
    T(queue_capacity),
    T(destroy_cancels_queued),
    T(counters_add_up),
    T(inline_small_task),
    T(null_is_noop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
