/*
 * test_engine_state.c - out and state blocks through the engine (ABI v2),
 * with the test accelerator "tally" (tests/accel/tally.h), on the cpu
 * platform and on an emulated FPGA board (virtual clock):
 *
 *   state        one state block updated by 1,000 tasks, read and synced
 *                every 100: every read is the reference value of its
 *                version, the last one the reference after 1,000 updates
 *                (tally's update is order-sensitive, so tasks ran once
 *                each, in order)
 *   chained      task 1 writes out block A on the board, task 2 reads A
 *                and writes B: A never crossed to the host (no upload of
 *                it, no read back), B read back equals the reference
 *   state loss   fail_rate on the board with the state living there: a
 *                failed task completes with EMBER_ESTATE, later tasks on
 *                the lost state too (never a wrong value), restore goes
 *                back to the last synced version (from the board's own
 *                snapshot: no upload), and replaying from there ends at
 *                the right value
 *   pipelined    200 tasks on the state sent at once to the board: each
 *                next one staged while the one ahead runs, all in order
 *                (the reference after 200); with failures injected, every
 *                task behind the first failure EMBER_ESTATE, never run,
 *                and one failure counted against the board
 *   hang         a task on the state hangs on the board (task_timeout):
 *                EMBER_ESTATE, the state lost until restored
 *   disabled     the board's pair is disabled after a failure: a second
 *                state that lived there is lost too, though no task on it
 *                failed; restored, it runs again (on the cpu)
 *   refusals     unknown state id, an in-use output id, a state named as
 *                input, plan() refusing a bad shape, the submitter's admit
 *                refusing the plan's bytes (no out block left behind)
 *   restore busy a restore while a task on the state is queued (not yet
 *                running: the board is busy with another task) is
 *                EMBER_EBUSY, as while one runs; once the task completed
 *                the restore goes through, and the task ran on the bytes
 *                it was submitted on
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "block_cache.h"
#include "ember/ember_errors.h"
#include "engine.h"
#include "engine_jobs.h"
#include "tally.h"

#define APP 5
#define N 64           /* elements per block */
#define STATE_ID 1
#define TASKS 1000

static const acc_descriptor *const accels[] = {&acc_tally_descriptor};
static nam_fpga_emu_config board;

static nam_engine *make_engine_with(int with_board, double fail_rate,
                                   double hang_rate, unsigned threshold,
                                   uint64_t timeout_ms) {
  ejob_board(&board, "fpga0");
  snprintf(board.bitstreams[0], sizeof board.bitstreams[0], "tally");
  board.n_bitstreams = 1;
  board.virtual_clock = 1;
  board.fail_rate = fail_rate;
  board.hang_rate = hang_rate;
  board.seed = 7;
  nam_engine_config cfg = {
    .cpu_workers = 2,
    .fpga = with_board ? &board : NULL,
    .n_fpga = with_board ? 1 : 0,
    .accelerators = accels,
    .n_accelerators = 1,
    .fail_threshold = threshold,
    .task_timeout_ms = timeout_ms,
  };
  nam_engine *e = NULL;
  assert_int_equal(nam_engine_create(&cfg, &e), 0);
  return e;
}

static nam_engine *make_engine(int with_board, double fail_rate) {
  /* keep the pair enabled: these tests are about state, not health */
  return make_engine_with(with_board, fail_rate, 0, 1000, 0);
}

/* ---- one task, waited for ------------------------------------------------ */

typedef struct waiter {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int done;
} waiter;

static void on_done(nam_task *t, void *user) {
  (void)t;
  waiter *w = user;
  pthread_mutex_lock(&w->mu);
  w->done = 1;
  pthread_cond_signal(&w->cv);
  pthread_mutex_unlock(&w->mu);
}

typedef struct task_args {
  uint64_t k;
  const uint64_t *in_ids;
  const acc_block *inputs;
  size_t n_inputs;
  const uint64_t *out_ids;
  size_t n_outputs;
  const uint64_t *state_ids;
  size_t n_states;
  const char *platform;
  int (*admit)(void *user, uint64_t out_bytes, uint64_t scratch_bytes,
               char *why, size_t why_len);
} task_args;

/* Run one tally task; returns its status (or submit's error). */
static int run_task(nam_engine *e, const task_args *a, char *why,
                    size_t why_len) {
  uint8_t params[8];
  memcpy(params, &a->k, 8);
  waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  nam_task_spec spec = {
    .acc = &acc_tally_descriptor, .params = params, .params_len = 8,
    .inputs = a->inputs, .n_inputs = a->n_inputs, .app = APP,
    .block_ids = a->in_ids, .platform_kind = a->platform,
    .output_ids = a->out_ids, .n_outputs = a->n_outputs,
    .state_ids = a->state_ids, .n_states = a->n_states,
    .done = on_done, .user = &w, .err = why, .err_len = why_len,
    .admit = a->admit,
  };
  nam_task *t = NULL;
  int rc = nam_engine_submit(e, &spec, &t);
  if (rc) return rc;
  pthread_mutex_lock(&w.mu);
  while (!w.done) pthread_cond_wait(&w.cv, &w.mu);
  pthread_mutex_unlock(&w.mu);
  rc = nam_task_status(t);
  snprintf(why, why_len, "%s", nam_task_message(t));
  nam_task_free(t);
  return rc;
}

/* ---- many tasks on one state, in flight together ------------------------ */

enum { FLIGHT = 200 };

typedef struct flight {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned done;
} flight;

static void on_flight_done(nam_task *t, void *user) {
  (void)t;
  flight *f = user;
  pthread_mutex_lock(&f->mu);
  f->done++;
  pthread_cond_signal(&f->cv);
  pthread_mutex_unlock(&f->mu);
}

/* Submit tally tasks k = 1..FLIGHT on the state to the board at once,
 * wait for all; their statuses into rc[] (a submit refused because the
 * state was lost meanwhile: its error), how many were staged on the board
 * before the task ahead of them finished into *overlapped. */
static void run_flight(nam_engine *e, int *rc, unsigned *overlapped) {
  static nam_task *t[FLIGHT];
  flight f = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  uint64_t sid = STATE_ID;
  unsigned submitted = 0;
  for (uint64_t j = 0; j < FLIGHT; j++) {
    uint64_t k = j + 1;
    nam_task_spec spec = {
      .acc = &acc_tally_descriptor, .params = &k, .params_len = 8, .app = APP,
      .platform_kind = "fpga-emu", .state_ids = &sid, .n_states = 1,
      .done = on_flight_done, .user = &f,
    };
    t[j] = NULL;
    rc[j] = nam_engine_submit(e, &spec, &t[j]);
    if (rc[j])
      assert_int_equal(rc[j], EMBER_ESTATE);
    else
      submitted++;
  }
  pthread_mutex_lock(&f.mu);
  while (f.done < submitted) pthread_cond_wait(&f.cv, &f.mu);
  pthread_mutex_unlock(&f.mu);
  *overlapped = 0;
  for (size_t j = 0; j < FLIGHT; j++) {
    if (!t[j]) continue;
    rc[j] = nam_task_status(t[j]);
    const nam_task_times *now = nam_task_get_times(t[j]);
    if (j > 0 && t[j - 1] && now->staged &&
        now->staged < nam_task_get_times(t[j - 1])->finished)
      (*overlapped)++;
  }
  for (size_t j = 0; j < FLIGHT; j++) nam_task_free(t[j]);
}

/* ---- block ops, waited for ----------------------------------------------- */

typedef struct op_wait {
  waiter w;
  nam_block_op_result r;
} op_wait;

static void on_op(const nam_block_op_result *r, void *user) {
  op_wait *o = user;
  pthread_mutex_lock(&o->w.mu);
  o->r = *r;
  o->w.done = 1;
  pthread_cond_signal(&o->w.cv);
  pthread_mutex_unlock(&o->w.mu);
}

static nam_block_op_result block_op(nam_engine *e, int op, uint64_t id) {
  op_wait o = {{PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0}, {0}};
  assert_int_equal(nam_engine_block_op(e, op, APP, id, on_op, &o), 0);
  pthread_mutex_lock(&o.w.mu);
  while (!o.w.done) pthread_cond_wait(&o.w.cv, &o.w.mu);
  pthread_mutex_unlock(&o.w.mu);
  return o.r;
}

/* ---- reference values ---------------------------------------------------- */

static uint64_t initial(size_t i) { return i * 1000 + 1; }

/* The state after versions 1..v (task j applies k = j). */
static void reference(uint64_t *out, uint64_t v) {
  for (size_t i = 0; i < N; i++) {
    uint64_t s = initial(i);
    for (uint64_t j = 1; j <= v; j++) s = tally_step(s, j, 0);
    out[i] = s;
  }
}

static void put_state(nam_engine *e, uint64_t *bytes) {
  for (size_t i = 0; i < N; i++) bytes[i] = initial(i);
  assert_int_equal(nam_block_cache_put(nam_engine_block_cache(e), APP, STATE_ID,
                                       EMBER_BLOCK_STATE, bytes, N * 8, NULL,
                                       NULL),
                   0);
}

static void expect_read(nam_engine *e, uint64_t id, const uint64_t *want,
                        uint64_t version, const char *what) {
  nam_block_op_result r = block_op(e, NAM_BLOCK_READ, id);
  if (r.status) fail_msg("%s: read: %s", what, ember_strerror(r.status));
  assert_int_equal(r.size, N * 8);
  if (version) assert_int_equal(r.version, version);
  if (memcmp(r.bytes, want, N * 8) != 0)
    fail_msg("%s: read gave other bytes (first %llu, want %llu)", what,
             (unsigned long long)((uint64_t *)r.bytes)[0],
             (unsigned long long)want[0]);
  free(r.bytes);
}

/* 1,000 updates, reads and syncs every 100. */
static void run_state(int with_board) {
  nam_engine *e = make_engine(with_board, 0);
  static uint64_t bytes[N], want[N];
  put_state(e, bytes);
  uint64_t sid = STATE_ID;
  char why[300];
  for (uint64_t j = 1; j <= TASKS; j++) {
    task_args a = {.k = j, .state_ids = &sid, .n_states = 1,
                   .platform = with_board ? "fpga-emu" : "cpu"};
    int rc = run_task(e, &a, why, sizeof why);
    if (rc) fail_msg("task %llu: %s (%s)", (unsigned long long)j,
                     ember_strerror(rc), why);
    if (j % 100 == 0) {
      reference(want, j);
      expect_read(e, STATE_ID, want, j, "state");
      nam_block_op_result r = block_op(e, NAM_BLOCK_SYNC, STATE_ID);
      assert_int_equal(r.status, 0);
      assert_int_equal(r.version, j);
    }
  }
  reference(want, TASKS);
  expect_read(e, STATE_ID, want, TASKS, "final state");
  nam_engine_destroy(e);
}

static void test_state_cpu(void **state) {
  (void)state;
  run_state(0);
}

static void test_state_board(void **state) {
  (void)state;
  run_state(1);
}

/* Out block A made on the board feeds task 2 there, without the host. */
static void test_chained(void **state) {
  (void)state;
  nam_engine *e = make_engine(1, 0);
  nam_block_cache *cache = nam_engine_block_cache(e);
  static uint64_t in[N], want[N];
  for (size_t i = 0; i < N; i++) in[i] = i + 7;
  assert_int_equal(nam_block_cache_put(cache, APP, 10, 0, in, N * 8, NULL,
                                       NULL), 0);
  nam_block_cache_stats before;
  nam_block_cache_get_stats(cache, &before);
  char why[300];
  uint64_t in_id = 10, a_id = 11, b_id = 12;
  acc_block in_blk = {(const uint8_t *)in, N * 8};
  task_args t1 = {.k = 5, .in_ids = &in_id, .inputs = &in_blk, .n_inputs = 1,
                  .out_ids = &a_id, .n_outputs = 1, .platform = "fpga-emu"};
  assert_int_equal(run_task(e, &t1, why, sizeof why), 0);
  nam_block_cache_stats mid;
  nam_block_cache_get_stats(cache, &mid);
  /* task 2 names A as its input: its bytes live only on the board */
  acc_block a_blk = {NULL, N * 8};
  task_args t2 = {.k = 9, .in_ids = &a_id, .inputs = &a_blk, .n_inputs = 1,
                  .out_ids = &b_id, .n_outputs = 1, .platform = "fpga-emu"};
  int rc = run_task(e, &t2, why, sizeof why);
  if (rc) fail_msg("chained task: %s (%s)", ember_strerror(rc), why);
  nam_block_cache_stats after;
  nam_block_cache_get_stats(cache, &after);
  unsigned fp = 1; /* cpu is platform 0, the board 1 */
  /* A was a hit on the board: nothing uploaded, nothing read back but
   * task 2's 8-byte result message */
  assert_int_equal(after.platform[fp].bytes_to, mid.platform[fp].bytes_to);
  assert_int_equal(after.platform[fp].bytes_from,
                   mid.platform[fp].bytes_from + 8);
  assert_int_equal(after.platform[fp].hits, mid.platform[fp].hits + 1);
  for (size_t i = 0; i < N; i++)
    want[i] = tally_step(tally_step(in[i], 5, 0), 9, 0);
  expect_read(e, b_id, want, 0, "chained out block");
  /* the read brought B (only B) back over the board's link */
  nam_block_cache_get_stats(cache, &after);
  assert_int_equal(after.platform[fp].bytes_from,
                   mid.platform[fp].bytes_from + 8 + N * 8);
  /* A can also run on the cpu: read back through the host, same value */
  uint64_t c_id = 13;
  task_args t3 = {.k = 9, .in_ids = &a_id, .inputs = &a_blk, .n_inputs = 1,
                  .out_ids = &c_id, .n_outputs = 1, .platform = "cpu"};
  assert_int_equal(run_task(e, &t3, why, sizeof why), 0);
  expect_read(e, c_id, want, 0, "out block read on the cpu");
  nam_engine_destroy(e);
}

/* Injected failures with the state on the board. */
static void test_state_loss(void **state) {
  (void)state;
  nam_engine *e = make_engine(1, 0.2);
  static uint64_t bytes[N], want[N];
  put_state(e, bytes);
  uint64_t sid = STATE_ID, done = 0, synced = 0;
  unsigned lost = 0, lost_after = 0, snapshot_restores = 0;
  int check_upload = 0;
  nam_block_cache_stats mark;
  char why[300];
  while (done < 200) {
    task_args a = {.k = done + 1, .state_ids = &sid, .n_states = 1,
                   .platform = "fpga-emu"};
    int rc = run_task(e, &a, why, sizeof why);
    if (rc == 0 && check_upload) {
      nam_block_cache_stats now;
      nam_block_cache_get_stats(nam_engine_block_cache(e), &now);
      assert_int_equal(now.platform[1].bytes_to, mark.platform[1].bytes_to);
      snapshot_restores++;
    }
    check_upload = 0;
    if (rc == 0) {
      done++;
      if (done % 10 == 0) {
        nam_block_op_result r = block_op(e, NAM_BLOCK_SYNC, STATE_ID);
        assert_int_equal(r.status, 0);
        synced = done;
      }
      continue;
    }
    if (rc != EMBER_ESTATE)
      fail_msg("task %llu: %s (%s), not ESTATE", (unsigned long long)done + 1,
               ember_strerror(rc), why);
    lost++;
    /* the lost state refuses work and reads until restored */
    task_args b = a;
    rc = run_task(e, &b, why, sizeof why);
    assert_int_equal(rc, EMBER_ESTATE);
    lost_after++;
    assert_int_equal(block_op(e, NAM_BLOCK_READ, STATE_ID).status,
                     EMBER_ESTATE);
    nam_block_op_result r = block_op(e, NAM_BLOCK_RESTORE, STATE_ID);
    assert_int_equal(r.status, 0);
    assert_int_equal(r.version, synced);
    done = synced;
    reference(want, done);
    expect_read(e, STATE_ID, want, done, "restored state");
    /* synced on the board, restored there from its device snapshot: the
     * next task finds it on the board (no upload: bytes_to stays) */
    if (synced) {
      nam_block_cache_get_stats(nam_engine_block_cache(e), &mark);
      check_upload = 1;
    }
  }
  assert_true(lost > 0); /* 20% injected: the test saw losses */
  assert_true(snapshot_restores > 0);
  assert_int_equal(lost_after, lost);
  reference(want, 200);
  expect_read(e, STATE_ID, want, 0, "state after losses");
  nam_engine_destroy(e);
}

/* Tasks on one state sent together to the board's pipeline: each next one
 * is dispatched and staged while the one ahead runs (its stage-in
 * overlaps that run), and they still run once each, in order: the state
 * ends at the reference after FLIGHT updates. */
static void test_state_pipelined(void **state) {
  (void)state;
  nam_engine *e = make_engine(1, 0);
  static uint64_t bytes[N], want[N];
  static int rc[FLIGHT];
  put_state(e, bytes);
  unsigned overlapped;
  run_flight(e, rc, &overlapped);
  for (size_t j = 0; j < FLIGHT; j++)
    if (rc[j]) fail_msg("task %zu: %s", j + 1, ember_strerror(rc[j]));
  print_message("  %u of %d tasks staged before the one ahead finished\n",
                overlapped, FLIGHT - 1);
  assert_true(overlapped > 0);
  reference(want, FLIGHT);
  expect_read(e, STATE_ID, want, FLIGHT, "pipelined state");
  nam_engine_destroy(e);
}

/* The same with failures injected: the first task that fails loses the
 * state, and every task behind it, though already dispatched on the
 * pipeline, completes with EMBER_ESTATE without running (never a wrong
 * value), and is not counted as a failure of the board; restore goes
 * back to the initial bytes. */
static void test_state_pipelined_loss(void **state) {
  (void)state;
  nam_engine *e = make_engine(1, 0.01);
  static uint64_t bytes[N], want[N];
  static int rc[FLIGHT];
  put_state(e, bytes);
  unsigned overlapped;
  run_flight(e, rc, &overlapped);
  size_t ok = 0;
  while (ok < FLIGHT && rc[ok] == 0) ok++;
  assert_true(ok < FLIGHT); /* 1% injected, seeded: one of 200 failed */
  for (size_t j = ok; j < FLIGHT; j++)
    if (rc[j] != EMBER_ESTATE)
      fail_msg("task %zu after the failure of %zu: %s, not ESTATE", j + 1,
               ok + 1, ember_strerror(rc[j]));
  nam_platform_status ps[4];
  size_t n = nam_engine_platforms(e, ps, 4);
  uint64_t failed = 0;
  for (size_t i = 0; i < n; i++) failed += ps[i].failed;
  print_message("  %zu tasks ran, then task %zu failed; %llu failure "
                "counted\n", ok, ok + 1, (unsigned long long)failed);
  assert_int_equal(failed, 1);
  assert_int_equal(block_op(e, NAM_BLOCK_READ, STATE_ID).status,
                   EMBER_ESTATE);
  nam_block_op_result r = block_op(e, NAM_BLOCK_RESTORE, STATE_ID);
  assert_int_equal(r.status, 0);
  reference(want, 0);
  expect_read(e, STATE_ID, want, 0, "restored state");
  nam_engine_destroy(e);
}

/* A hung task on the state: abandoned, and the state is not trusted. */
static void test_state_hang(void **state) {
  (void)state;
  nam_engine *e = make_engine_with(1, 0, 1.0, 1000, 200);
  static uint64_t bytes[N], want[N];
  put_state(e, bytes);
  uint64_t sid = STATE_ID;
  char why[300];
  task_args a = {.k = 1, .state_ids = &sid, .n_states = 1,
                 .platform = "fpga-emu"};
  assert_int_equal(run_task(e, &a, why, sizeof why), EMBER_ESTATE);
  assert_non_null(strstr(why, "hung"));
  assert_int_equal(block_op(e, NAM_BLOCK_READ, STATE_ID).status, EMBER_ESTATE);
  nam_block_op_result r = block_op(e, NAM_BLOCK_RESTORE, STATE_ID);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.version, 0);
  reference(want, 0);
  expect_read(e, STATE_ID, want, 0, "restored after a hang");
  nam_engine_destroy(e);
}

/* A pair disabled on the board takes down every state that lived there. */
static void test_state_disabled(void **state) {
  (void)state;
  nam_engine *e = make_engine_with(1, 0, 0, 1, 0);
  static uint64_t bytes[N], other[N], want[N];
  put_state(e, bytes);
  for (size_t i = 0; i < N; i++) other[i] = initial(i);
  uint64_t sid = STATE_ID, oid = 2;
  assert_int_equal(nam_block_cache_put(nam_engine_block_cache(e), APP, oid,
                                       EMBER_BLOCK_STATE, other, N * 8, NULL,
                                       NULL), 0);
  char why[300];
  /* the other state lives on the board after one good task */
  task_args o = {.k = 1, .state_ids = &oid, .n_states = 1,
                 .platform = "fpga-emu"};
  assert_int_equal(run_task(e, &o, why, sizeof why), 0);
  /* then the board fails a task on the first state: the pair goes */
  assert_int_equal(nam_engine_set_fault_rates(e, 1.0, 0), 0);
  task_args a = {.k = 1, .state_ids = &sid, .n_states = 1,
                 .platform = "fpga-emu"};
  assert_int_equal(run_task(e, &a, why, sizeof why), EMBER_ESTATE);
  nam_platform_status ps;
  assert_int_equal(ejob_platform(e, "fpga0", &ps), 0);
  assert_string_equal(ps.pairs[0].state, "disabled");
  /* the other state never failed, but its platform did: lost */
  assert_int_equal(block_op(e, NAM_BLOCK_READ, oid).status, EMBER_ESTATE);
  o.platform = NULL;
  assert_int_equal(run_task(e, &o, why, sizeof why), EMBER_ESTATE);
  /* restored (never synced: its first bytes), it runs on the cpu */
  nam_block_op_result r = block_op(e, NAM_BLOCK_RESTORE, oid);
  assert_int_equal(r.status, 0);
  assert_int_equal(r.version, 0);
  o.platform = "cpu";
  assert_int_equal(run_task(e, &o, why, sizeof why), 0);
  reference(want, 1);
  expect_read(e, oid, want, 1, "restored state, run on the cpu");
  nam_engine_destroy(e);
}

/* An admit that refuses, as ember-nam's does over a client's limit: it
 * sees the plan's bytes before any out block is declared. */
static uint64_t admitted_out = UINT64_MAX, admitted_scratch = UINT64_MAX;
static int refuse_admit(void *user, uint64_t out_bytes, uint64_t scratch_bytes,
                        char *why, size_t why_len) {
  (void)user;
  admitted_out = out_bytes;
  admitted_scratch = scratch_bytes;
  snprintf(why, why_len, "over the test's limit");
  return EMBER_EBUSY;
}

static void test_refusals(void **state) {
  (void)state;
  nam_engine *e = make_engine(0, 0);
  static uint64_t bytes[N];
  put_state(e, bytes);
  char why[300];
  uint64_t missing = 99, sid = STATE_ID, out = 20;
  task_args a = {.k = 1, .state_ids = &missing, .n_states = 1};
  assert_int_equal(run_task(e, &a, why, sizeof why), EMBER_ENOTFOUND);
  assert_non_null(strstr(why, "99"));
  /* an output id in use: the state's */
  task_args b = {.k = 1, .state_ids = &sid, .n_states = 1, .out_ids = &sid,
                 .n_outputs = 1};
  assert_int_equal(run_task(e, &b, why, sizeof why), EMBER_EINVAL);
  /* a state named as an input */
  acc_block blk = {(const uint8_t *)bytes, N * 8};
  task_args c = {.k = 1, .in_ids = &sid, .inputs = &blk, .n_inputs = 1,
                 .out_ids = &out, .n_outputs = 1};
  assert_int_equal(run_task(e, &c, why, sizeof why), EMBER_EINVAL);
  /* plan(): no state and no output */
  task_args d = {.k = 1};
  assert_int_equal(run_task(e, &d, why, sizeof why), EMBER_EPARAM);
  assert_non_null(strstr(why, "tally"));
  /* admit refusing the plan's bytes: its code and reason */
  task_args g = {.k = 1, .state_ids = &sid, .n_states = 1, .out_ids = &out,
                 .n_outputs = 1, .admit = refuse_admit};
  assert_int_equal(run_task(e, &g, why, sizeof why), EMBER_EBUSY);
  assert_non_null(strstr(why, "over the test's limit"));
  assert_int_equal(admitted_out, N * 8); /* tally's out: the state's size */
  assert_int_equal(admitted_scratch, N * 8); /* and its scratch */
  /* the refused outputs left no id behind: 20 is still free */
  task_args f = {.k = 1, .state_ids = &sid, .n_states = 1, .out_ids = &out,
                 .n_outputs = 1};
  assert_int_equal(run_task(e, &f, why, sizeof why), 0);
  nam_engine_destroy(e);
}

/* Submit one tally task without waiting for it. */
static nam_task *submit_task(nam_engine *e, const task_args *a, waiter *w) {
  uint8_t params[8];
  memcpy(params, &a->k, 8);
  char err[256] = "";
  nam_task_spec spec = {
    .acc = &acc_tally_descriptor, .params = params, .params_len = 8,
    .inputs = a->inputs, .n_inputs = a->n_inputs, .app = APP,
    .block_ids = a->in_ids, .platform_kind = a->platform,
    .output_ids = a->out_ids, .n_outputs = a->n_outputs,
    .state_ids = a->state_ids, .n_states = a->n_states,
    .done = on_done, .user = w, .err = err, .err_len = sizeof err,
  };
  nam_task *t = NULL;
  int rc = nam_engine_submit(e, &spec, &t);
  if (rc) fail_msg("submit: %s (%s)", ember_strerror(rc), err);
  return t;
}

static void wait_task(waiter *w) {
  pthread_mutex_lock(&w->mu);
  while (!w->done) pthread_cond_wait(&w->cv, &w->mu);
  pthread_mutex_unlock(&w->mu);
}

static void test_restore_busy_while_queued(void **state) {
  (void)state;
  /* one board, one task at a time, real clock and a slow link: a 4 MiB
   * task without state holds it for about 200 ms */
  ejob_board(&board, "fpga0");
  snprintf(board.bitstreams[0], sizeof board.bitstreams[0], "tally");
  board.n_bitstreams = 1;
  board.virtual_clock = 0;
  board.pcie_gbps = 0.04;
  board.reprogram_ms = 0;
  nam_engine_config cfg = {
    .no_cpu = 1, .pipeline_depth = 1, .fpga = &board, .n_fpga = 1,
    .accelerators = accels, .n_accelerators = 1, .fail_threshold = 1000,
  };
  nam_engine *e = NULL;
  assert_int_equal(nam_engine_create(&cfg, &e), 0);
  static uint64_t bytes[N], want[N];
  put_state(e, bytes);
  enum { BIG = 512 * 1024 };
  uint64_t *big = calloc(BIG, sizeof *big);
  assert_non_null(big);
  acc_block blk = {(const uint8_t *)big, BIG * sizeof *big};
  uint64_t in_id = 29, out = 30, sid = STATE_ID;
  assert_int_equal(nam_block_cache_put(nam_engine_block_cache(e), APP, in_id,
                                       0, big, blk.size, NULL, NULL),
                   0);
  task_args slow = {.k = 1, .in_ids = &in_id, .inputs = &blk, .n_inputs = 1,
                    .out_ids = &out, .n_outputs = 1, .platform = "fpga-emu"};
  task_args on_state = {.k = 1, .state_ids = &sid, .n_states = 1,
                        .platform = "fpga-emu"};
  waiter w1 = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  waiter w2 = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
  nam_task *t1 = submit_task(e, &slow, &w1);
  nam_task *t2 = submit_task(e, &on_state, &w2);
  /* the state's task waits behind the slow one: queued, not running */
  nam_block_op_result r = block_op(e, NAM_BLOCK_RESTORE, STATE_ID);
  assert_int_equal(r.status, EMBER_EBUSY);
  pthread_mutex_lock(&w2.mu);
  int done_early = w2.done;
  pthread_mutex_unlock(&w2.mu);
  assert_false(done_early); /* it was still queued when refused */
  wait_task(&w1);
  wait_task(&w2);
  assert_int_equal(nam_task_status(t1), 0);
  assert_int_equal(nam_task_status(t2), 0);
  reference(want, 1);
  expect_read(e, STATE_ID, want, 1, "the state after its queued task");
  /* nothing queued on it now: the restore goes back to its first bytes */
  r = block_op(e, NAM_BLOCK_RESTORE, STATE_ID);
  assert_int_equal(r.status, 0);
  reference(want, 0);
  expect_read(e, STATE_ID, want, 0, "restored state");
  nam_task_free(t1);
  nam_task_free(t2);
  free(big);
  nam_engine_destroy(e);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_state_cpu),
      cmocka_unit_test(test_state_board),
      cmocka_unit_test(test_chained),
      cmocka_unit_test(test_state_loss),
      cmocka_unit_test(test_state_pipelined),
      cmocka_unit_test(test_state_pipelined_loss),
      cmocka_unit_test(test_state_hang),
      cmocka_unit_test(test_state_disabled),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_restore_busy_while_queued),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
