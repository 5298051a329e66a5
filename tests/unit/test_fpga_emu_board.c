/*
 * test_fpga_emu_board.c - the emulated FPGA board model
 * (nam/engine/fpga_emu_board.c, compiled in; no engine): defaults and
 * config checks, the timing model, virtual-clock arithmetic (a pipeline
 * that overlaps DMA and kernels against the same tasks run one after
 * another), reprogramming, the real clock never finishing before the model
 * (lower bounds only: a test never asserts a wall-clock upper bound),
 * memory accounting, seeded fault rates, and hangs released by abort, by
 * an aborted flag and by destroy.
 */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "clock.h"
#include "ember/ember_errors.h"
#include "fpga_emu_board.h"

#define MS 1000000ull

/* a >= b, printing both when not */
#define assert_ge(a, b)                                                      \
  do {                                                                       \
    uint64_t a_ = (a), b_ = (b);                                             \
    if (a_ < b_)                                                             \
      fail_msg("%s = %" PRIu64 " < %s = %" PRIu64, #a, a_, #b, b_);          \
  } while (0)

/* An accelerator with a round timing model: 1 unit per ns. */
static const acc_fpga_model unit_model = {
  .units_per_cycle = 1, .clock_mhz = 1000, .fixed_ns = 0, .source = "test"};
static const acc_descriptor acc_a = {
  .abi_version = ACC_ABI_VERSION, .name = "a", .fpga = &unit_model};
static const acc_descriptor acc_none = {
  .abi_version = ACC_ABI_VERSION, .name = "a"}; /* no FPGA model */

/* A virtual board with bitstreams a and b: 1 GB/s (1 byte per ns), 10 ms
 * reprogram. */
static nam_fpga_emu_config test_config(int virtual_clock) {
  nam_fpga_emu_config c;
  nam_fpga_emu_config_defaults(&c);
  snprintf(c.name, sizeof c.name, "fpga0");
  snprintf(c.bitstreams[0], sizeof c.bitstreams[0], "a");
  snprintf(c.bitstreams[1], sizeof c.bitstreams[1], "b");
  c.n_bitstreams = 2;
  c.pcie_gbps = 1.0;
  c.reprogram_ms = 10;
  c.virtual_clock = virtual_clock;
  return c;
}

static nam_fpga_board *make_board(const nam_fpga_emu_config *c) {
  nam_fpga_board *b = NULL;
  char err[200] = "";
  int rc = nam_fpga_board_create(c, &b, err, sizeof err);
  if (rc) fail_msg("create: %s (%s)", ember_strerror(rc), err);
  return b;
}

static nam_fpga_board_counters counters(nam_fpga_board *b) {
  nam_fpga_board_counters n;
  nam_fpga_board_get_counters(b, &n);
  return n;
}

/* ------------------------------------------------------------------------ */

static void test_defaults(void **state) {
  (void)state;
  nam_fpga_emu_config c;
  memset(&c, 0x5a, sizeof c);
  nam_fpga_emu_config_defaults(&c);
  assert_int_equal(c.memory, 16ull << 30);
  assert_true(c.pcie_gbps > 5.0 && c.pcie_gbps < 7.88); /* Gen3 x8 raw */
  assert_int_equal(c.reprogram_ms, 1500);
  assert_true(c.fail_rate == 0 && c.hang_rate == 0);
  assert_int_equal(c.seed, 1);
  assert_int_equal(c.virtual_clock, 0);
  assert_int_equal(c.n_bitstreams, 0);
  assert_int_equal(c.n_timing, 0);
  assert_string_equal(c.name, "");
}

static void test_create_rejects(void **state) {
  (void)state;
  static const char *const what[] = {
    "memory", "pcie", "fail rate", "rate sum", "bitstream count",
    "empty bitstream", "negative timing",
  };
  for (size_t i = 0; i < sizeof what / sizeof what[0]; i++) {
    nam_fpga_emu_config c = test_config(1);
    switch (i) {
    case 0: c.memory = 0; break;
    case 1: c.pcie_gbps = 0; break;
    case 2: c.fail_rate = 1.5; break;
    case 3: c.fail_rate = 0.6; c.hang_rate = 0.6; break;
    case 4: c.n_bitstreams = NAM_FPGA_MAX_BITSTREAMS + 1; break;
    case 5: c.bitstreams[1][0] = '\0'; break;
    case 6:
      snprintf(c.timing[0].accelerator, sizeof c.timing[0].accelerator, "a");
      c.timing[0].clock_mhz = -1;
      c.n_timing = 1;
      break;
    }
    nam_fpga_board *b = NULL;
    char err[200] = "";
    int rc = nam_fpga_board_create(&c, &b, err, sizeof err);
    if (rc != EMBER_EINVAL)
      fail_msg("%s: rc %d, expected EINVAL", what[i], rc);
    assert_null(b);
    assert_true(err[0] != '\0');
  }
  nam_fpga_board_destroy(NULL);
}

static void test_model(void **state) {
  (void)state;
  nam_fpga_emu_config c;
  nam_fpga_emu_config_defaults(&c);
  snprintf(c.bitstreams[0], sizeof c.bitstreams[0], "sw");
  c.n_bitstreams = 1;
  nam_fpga_board *b = make_board(&c);

  /* the sw accelerator's own model: 128 PEs x 200 MHz + 5 us */
  const acc_descriptor *sw = acc_registry_find("sw");
  assert_non_null(sw);
  assert_non_null(sw->fpga);
  assert_non_null(sw->fpga->source);
  uint64_t cells = 25600000000ull; /* one second at 25.6 GCUPS */
  assert_int_equal(nam_fpga_board_model_ns(b, sw, cells),
                   1000000000ull + sw->fpga->fixed_ns);
  assert_int_equal(nam_fpga_board_model_ns(b, sw, 0), sw->fpga->fixed_ns);
  assert_int_equal(nam_fpga_board_model_ns(b, &acc_none, 1000), 0);
  assert_true(nam_fpga_board_can_load(b, "sw"));
  assert_false(nam_fpga_board_can_load(b, "plf"));
  /* 6 GB at the default effective rate */
  assert_int_equal(nam_fpga_board_dma_ns(b, 6000000000ull),
                   (uint64_t)(6000000000.0 / c.pcie_gbps));
  nam_fpga_board_destroy(b);

  /* a board that overrides the PEs (twice as many) but not the clock */
  snprintf(c.timing[0].accelerator, sizeof c.timing[0].accelerator, "sw");
  c.timing[0].units_per_cycle = 2 * sw->fpga->units_per_cycle;
  c.timing[0].clock_mhz = 0;
  c.n_timing = 1;
  b = make_board(&c);
  assert_int_equal(nam_fpga_board_model_ns(b, sw, cells),
                   500000000ull + sw->fpga->fixed_ns);
  /* rounded up: 1 cell of 256 x 200 MHz is 1/51.2 ns */
  assert_int_equal(nam_fpga_board_model_ns(b, sw, 1), sw->fpga->fixed_ns + 1);
  nam_fpga_board_destroy(b);
}

/* ------------------------------------------------------------------------ */
/* Virtual clock                                                             */

enum { N_TASKS = 4 };
#define IN_BYTES (2 * MS)  /* 2 ms at 1 byte per ns */
#define WORK (5 * MS)      /* 5 ms of kernel */
#define OUT_BYTES (1 * MS) /* 1 ms */

/* One task through the board, its clock carried from stage to stage.
 * ready: when the task may begin (0: as soon as the link is free). Returns
 * its end. */
static uint64_t run_task(nam_fpga_board *b, uint64_t ready) {
  uint64_t clock = ready;
  assert_int_equal(nam_fpga_board_dma(b, NAM_FPGA_TO_BOARD, IN_BYTES, &clock),
                   0);
  assert_int_equal(nam_fpga_board_load(b, "a", &clock), 0);
  nam_fpga_board_kernel(b, nam_fpga_board_model_ns(b, &acc_a, WORK), 0,
                        &clock);
  assert_int_equal(nam_fpga_board_dma(b, NAM_FPGA_FROM_BOARD, OUT_BYTES,
                                      &clock), 0);
  return clock;
}

static void test_virtual_pipeline(void **state) {
  (void)state;
  nam_fpga_emu_config c = test_config(1);

  /* Pipelined: every input DMA goes back to back (0-2, 2-4, ...); the
   * first kernel waits for its input and the 10 ms reprogram (2-12), then
   * kernels run back to back (12-17, ..., 27-32) and the last output
   * leaves at 32-33: in + reprogram + 4 kernels + out. */
  nam_fpga_board *b = make_board(&c);
  uint64_t end = 0;
  for (int i = 0; i < N_TASKS; i++) end = run_task(b, 0);
  uint64_t want = 2 * MS + 10 * MS + N_TASKS * 5 * MS + 1 * MS;
  assert_int_equal(end, want);
  nam_fpga_board_counters n = counters(b);
  assert_int_equal(n.virtual_ns, want);
  assert_int_equal(n.kernel_busy_ns, 10 * MS + N_TASKS * 5 * MS);
  assert_int_equal(n.reprograms, 1);
  assert_int_equal(n.bytes_to, N_TASKS * IN_BYTES);
  assert_int_equal(n.bytes_from, N_TASKS * OUT_BYTES);
  assert_string_equal(n.loaded, "a");
  nam_fpga_board_destroy(b);

  /* Serial: each task starts when the one before has ended:
   * 2 + 10 + 5 + 1, then 3 x (2 + 5 + 1). */
  b = make_board(&c);
  end = 1; /* 0 would mean "when free" */
  for (int i = 0; i < N_TASKS; i++) end = run_task(b, end);
  assert_int_equal(end - 1, 18 * MS + (N_TASKS - 1) * 8 * MS);
  assert_int_equal(counters(b).virtual_ns, end);
  nam_fpga_board_destroy(b);

  /* the pipeline overlaps: 33 ms against 42 ms */
  assert_true(want < 18 * MS + (N_TASKS - 1) * 8 * MS);

  /* nothing sleeps: an hour of kernel returns at once (were it to sleep,
   * the test would run into its timeout) */
  b = make_board(&c);
  uint64_t clock = 0;
  nam_fpga_board_kernel(b, 3600000 * MS, 0, &clock);
  assert_int_equal(clock, 3600000 * MS);
  assert_int_equal(counters(b).virtual_ns, 3600000 * MS);
  nam_fpga_board_destroy(b);
}

static void test_virtual_link(void **state) {
  (void)state;
  nam_fpga_emu_config c = test_config(1);
  nam_fpga_board *b = make_board(&c);
  /* full duplex: one direction does not wait for the other */
  uint64_t to = 0, from = 0;
  nam_fpga_board_dma(b, NAM_FPGA_TO_BOARD, MS, &to);
  nam_fpga_board_dma(b, NAM_FPGA_FROM_BOARD, MS, &from);
  assert_int_equal(to, MS);
  assert_int_equal(from, MS);
  /* each direction is serialised */
  uint64_t again = 0;
  nam_fpga_board_dma(b, NAM_FPGA_TO_BOARD, MS, &again);
  assert_int_equal(again, 2 * MS);
  /* a transfer whose data is ready later starts then */
  uint64_t late = 10 * MS;
  nam_fpga_board_dma(b, NAM_FPGA_FROM_BOARD, MS, &late);
  assert_int_equal(late, 11 * MS);
  assert_int_equal(counters(b).virtual_ns, 11 * MS);
  assert_int_equal(nam_fpga_board_dma(b, (enum nam_fpga_dir)7, 1, NULL),
                   EMBER_EINVAL);
  nam_fpga_board_destroy(b);
}

static void test_reprogram(void **state) {
  (void)state;
  nam_fpga_emu_config c = test_config(1);
  nam_fpga_board *b = make_board(&c);
  assert_string_equal(counters(b).loaded, "");
  assert_int_equal(nam_fpga_board_reprogram_ns(b, "a"), 10 * MS);

  uint64_t clock = 5 * MS;
  assert_int_equal(nam_fpga_board_load(b, "a", &clock), 0);
  assert_int_equal(clock, 15 * MS);
  assert_int_equal(counters(b).reprograms, 1);
  assert_int_equal(nam_fpga_board_reprogram_ns(b, "a"), 0);

  /* already loaded: free, clock unchanged */
  clock = 20 * MS;
  assert_int_equal(nam_fpga_board_load(b, "a", &clock), 0);
  assert_int_equal(clock, 20 * MS);
  assert_int_equal(counters(b).reprograms, 1);

  /* a kernel, then a switch: the reprogram waits for the kernel */
  clock = 20 * MS;
  nam_fpga_board_kernel(b, 3 * MS, 0, &clock);
  assert_int_equal(clock, 23 * MS);
  uint64_t other = 21 * MS; /* ready before the kernel ends */
  assert_int_equal(nam_fpga_board_load(b, "b", &other), 0);
  assert_int_equal(other, 33 * MS);
  nam_fpga_board_counters n = counters(b);
  assert_int_equal(n.reprograms, 2);
  assert_string_equal(n.loaded, "b");
  assert_int_equal(n.kernel_busy_ns, 23 * MS);
  assert_int_equal(nam_fpga_board_reprogram_ns(b, "a"), 10 * MS);

  /* a bitstream the board does not have */
  assert_int_equal(nam_fpga_board_load(b, "plf", &clock), EMBER_ENOTFOUND);
  assert_int_equal(counters(b).reprograms, 2);
  nam_fpga_board_destroy(b);
}

/* ------------------------------------------------------------------------ */
/* Real clock: lower bounds only                                             */

static void test_real_clock(void **state) {
  (void)state;
  nam_fpga_emu_config c = test_config(0);
  c.reprogram_ms = 20;
  nam_fpga_board *b = make_board(&c);
  const uint64_t d = 20 * MS; /* 20 MB at 1 GB/s, 20 ms of kernel */

  /* DMA: no clock given, so it starts now */
  uint64_t t0 = clock_now_ns();
  nam_fpga_board_dma(b, NAM_FPGA_TO_BOARD, d, NULL);
  assert_ge(clock_now_ns(), t0 + d);

  /* reprogram */
  uint64_t t1 = clock_now_ns(), clock = t1;
  assert_int_equal(nam_fpga_board_load(b, "a", &clock), 0);
  assert_ge(clock, t1 + d);
  assert_ge(clock_now_ns(), t1 + d);

  /* a kernel whose CPU work was quick lasts the model */
  uint64_t t2 = clock_now_ns();
  clock = t2;
  nam_fpga_board_kernel(b, d, 0, &clock);
  assert_ge(clock, t2 + d);
  assert_ge(clock_now_ns(), t2 + d);

  /* a kernel whose CPU work took longer than the model lasts until now:
   * ready 30 ms ago, model 20 ms, so it ends now (not in the past) */
  uint64_t t3 = clock_now_ns();
  clock = t3 - 30 * MS;
  nam_fpga_board_kernel(b, d, 30 * MS, &clock);
  assert_ge(clock, t3);

  /* absolute deadlines: a chain of stages ends exactly where the model
   * says, however late each sleep woke up */
  uint64_t t4 = clock_now_ns() + MS;
  clock = t4;
  for (int i = 0; i < 4; i++)
    nam_fpga_board_dma(b, NAM_FPGA_FROM_BOARD, 4 * MS, &clock);
  assert_int_equal(clock, t4 + 16 * MS);
  assert_ge(clock_now_ns(), t4 + 16 * MS);
  assert_int_equal(counters(b).virtual_ns, 0);
  nam_fpga_board_destroy(b);
}

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */

static void test_memory(void **state) {
  (void)state;
  nam_fpga_emu_config c = test_config(1);
  c.memory = 1000;
  nam_fpga_board *b = make_board(&c);
  assert_int_equal(nam_fpga_board_alloc(b, 600), 0);
  assert_int_equal(nam_fpga_board_alloc(b, 500), EMBER_ENOMEM);
  assert_int_equal(counters(b).memory_used, 600);
  assert_int_equal(nam_fpga_board_alloc(b, 400), 0);
  assert_int_equal(nam_fpga_board_alloc(b, 1), EMBER_ENOMEM);
  nam_fpga_board_free(b, 600);
  nam_fpga_board_free(b, 400);
  assert_int_equal(counters(b).memory_used, 0);
  assert_int_equal(nam_fpga_board_alloc(b, 1000), 0);
  assert_int_equal(nam_fpga_board_alloc(b, UINT64_MAX), EMBER_ENOMEM);
  nam_fpga_board_destroy(b);
}

/* ------------------------------------------------------------------------ */
/* Fault injection                                                           */

enum { DRAWS = 10000 };

static void draw_all(const nam_fpga_emu_config *c, char *seq) {
  nam_fpga_board *b = make_board(c);
  for (int i = 0; i < DRAWS; i++) seq[i] = (char)nam_fpga_board_draw_fault(b);
  nam_fpga_board_counters n = counters(b);
  assert_int_equal(n.tasks, DRAWS);
  unsigned fails = 0, hangs = 0;
  for (int i = 0; i < DRAWS; i++) {
    fails += seq[i] == NAM_FPGA_FAULT_FAIL;
    hangs += seq[i] == NAM_FPGA_FAULT_HANG;
  }
  assert_int_equal(n.failures_injected, fails);
  assert_int_equal(n.hangs_injected, hangs);
  nam_fpga_board_destroy(b);
}

static void test_fault_rates(void **state) {
  (void)state;
  static char s1[DRAWS], s2[DRAWS], s3[DRAWS];
  nam_fpga_emu_config c = test_config(1);
  c.fail_rate = 0.1;
  c.hang_rate = 0.05;
  c.seed = 42;
  draw_all(&c, s1);
  draw_all(&c, s2);
  assert_memory_equal(s1, s2, DRAWS); /* same seed, same faults */
  c.seed = 43;
  draw_all(&c, s3);
  assert_memory_not_equal(s1, s3, DRAWS);

  /* close to the rates: binomial, 10,000 draws; bounds at ~4 sigma
   * (sigma 30 for 10%, 22 for 5%) */
  unsigned fails = 0, hangs = 0;
  for (int i = 0; i < DRAWS; i++) {
    fails += s1[i] == NAM_FPGA_FAULT_FAIL;
    hangs += s1[i] == NAM_FPGA_FAULT_HANG;
  }
  assert_in_range(fails, 880, 1120);
  assert_in_range(hangs, 410, 590);

  /* no faults configured: none drawn */
  c.fail_rate = c.hang_rate = 0;
  draw_all(&c, s3);
  for (int i = 0; i < DRAWS; i++) assert_int_equal(s3[i], NAM_FPGA_FAULT_NONE);
  /* always fails */
  c.fail_rate = 1;
  draw_all(&c, s3);
  for (int i = 0; i < DRAWS; i++) assert_int_equal(s3[i], NAM_FPGA_FAULT_FAIL);
}

/* ------------------------------------------------------------------------ */
/* Hangs                                                                     */

typedef struct hanger {
  nam_fpga_board *board;
  const void *key;
  const atomic_int *aborted;
  int rc;
  pthread_t thread;
} hanger;

static void *hang_thread(void *arg) {
  hanger *h = arg;
  h->rc = nam_fpga_board_hang(h->board, h->key, h->aborted);
  return NULL;
}

static void start_hang(hanger *h, nam_fpga_board *b, const void *key,
                       const atomic_int *aborted) {
  unsigned before = counters(b).hanging;
  h->board = b;
  h->key = key;
  h->aborted = aborted;
  h->rc = 1;
  assert_int_equal(pthread_create(&h->thread, NULL, hang_thread, h), 0);
  /* readiness: the board reports the waiter */
  struct timespec ms = {0, 1000000};
  while (counters(b).hanging == before) nanosleep(&ms, NULL);
}

static void test_hang_abort(void **state) {
  (void)state;
  nam_fpga_emu_config c = test_config(0);
  nam_fpga_board *b = make_board(&c);
  int key1, key2, other;

  hanger h1, h2;
  start_hang(&h1, b, &key1, NULL);
  start_hang(&h2, b, &key2, NULL);
  assert_int_equal(counters(b).hanging, 2);
  nam_fpga_board_abort(b, &other); /* nobody waits with that key */
  assert_int_equal(counters(b).hanging, 2);
  nam_fpga_board_abort(b, &key1);
  pthread_join(h1.thread, NULL);
  assert_int_equal(h1.rc, EMBER_ETIMEDOUT);
  assert_int_equal(counters(b).hanging, 1);
  nam_fpga_board_abort(b, &key2);
  pthread_join(h2.thread, NULL);
  assert_int_equal(h2.rc, EMBER_ETIMEDOUT);

  /* the aborted flag: set, then abort (any key) wakes the waiter */
  atomic_int flag = 0;
  start_hang(&h1, b, &key1, &flag);
  atomic_store(&flag, 1);
  nam_fpga_board_abort(b, NULL);
  pthread_join(h1.thread, NULL);
  assert_int_equal(h1.rc, EMBER_ETIMEDOUT);
  /* a flag already set: no wait at all */
  assert_int_equal(nam_fpga_board_hang(b, &key1, &flag), EMBER_ETIMEDOUT);
  assert_int_equal(counters(b).hanging, 0);
  nam_fpga_board_destroy(b);
}

static void test_hang_destroy(void **state) {
  (void)state;
  nam_fpga_emu_config c = test_config(1);
  nam_fpga_board *b = make_board(&c);
  int key1, key2;
  hanger h1, h2;
  start_hang(&h1, b, &key1, NULL);
  start_hang(&h2, b, &key2, NULL);
  nam_fpga_board_destroy(b); /* returns once both have left */
  pthread_join(h1.thread, NULL);
  pthread_join(h2.thread, NULL);
  assert_int_equal(h1.rc, EMBER_ESHUTDOWN);
  assert_int_equal(h2.rc, EMBER_ESHUTDOWN);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(test_defaults),
    cmocka_unit_test(test_create_rejects),
    cmocka_unit_test(test_model),
    cmocka_unit_test(test_virtual_pipeline),
    cmocka_unit_test(test_virtual_link),
    cmocka_unit_test(test_reprogram),
    cmocka_unit_test(test_real_clock),
    cmocka_unit_test(test_memory),
    cmocka_unit_test(test_fault_rates),
    cmocka_unit_test(test_hang_abort),
    cmocka_unit_test(test_hang_destroy),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
