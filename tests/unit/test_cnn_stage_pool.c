/* test_cnn_stage_pool.c - the cnn accelerator's pool of built CPU stages
 * (accelerators/cnn/cnn_stage_pool.c, issue 25): idle stages kept within
 * a byte budget (cnn_cpu_stage_bytes), least recently given back evicted
 * first, a stage over the budget not kept, a budget lowered evicting at
 * once; each stage its last taker's, and an app that leaves
 * (cnn_stage_pool_app_gone, the descriptor's app_gone) takes its idle
 * stages with it and those it has on loan when they come back; a stage
 * discarded after a failure forgotten. The figures are the pool's own
 * (cnn_stage_pool_get_stats); the stages are small (kilobytes to a few
 * MiB: batches 2, 4 and 8 of a 12 x 12 network). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "accel.h"
#include "cnn_stage_pool.h"
#include "cnn_test_util.h"

#define NET_TEXT                                                             \
  "[net]\nheight=12\nwidth=12\nchannels=1\n"                                 \
  "[convolutional]\nfilters=8\nsize=1\npadding=1\nactivation=relu\n"        \
  "[maxpool]\nsize=2\nstride=2\n"                                            \
  "[connected]\noutput=10\nactivation=linear\n[softmax]\n"

static cnn_net *net;

static int setup(void **state) {
  (void)state;
  net = cnn_test_parse(NET_TEXT);
  cnn_stage_pool_clear();
  return 0;
}

static int teardown(void **state) {
  (void)state;
  cnn_stage_pool_clear();
  cnn_stage_pool_set_budget(CNN_STAGE_POOL_DEFAULT_BYTES);
  cnn_net_destroy(net);
  return 0;
}

static cnn_pool_key key_of(uint32_t batch) {
  return (cnn_pool_key){(const uint8_t *)NET_TEXT, strlen(NET_TEXT), 0, 4,
                        batch, 0, 0};
}

static cnn_cpu_stage *take(uint32_t batch, uint64_t app) {
  cnn_pool_key k = key_of(batch);
  cnn_cpu_stage *s = NULL;
  char err[256] = "";
  int rc = cnn_stage_pool_take(net, &k, app, &s, err, sizeof err);
  if (rc) fail_msg("take batch %u: %d %s", batch, rc, err);
  assert_non_null(s);
  return s;
}

static void give(uint32_t batch, cnn_cpu_stage *s) {
  cnn_pool_key k = key_of(batch);
  cnn_stage_pool_give(&k, s);
}

static cnn_stage_pool_stats stats(void) {
  cnn_stage_pool_stats st;
  cnn_stage_pool_get_stats(&st);
  return st;
}

/* A stage's bytes: one built and given back into an empty pool. */
static uint64_t bytes_of(uint32_t batch) {
  cnn_stage_pool_clear();
  give(batch, take(batch, 1));
  uint64_t b = stats().idle_bytes;
  cnn_stage_pool_clear();
  assert_true(b > 0);
  return b;
}

static void reuse_and_budget(void **state) {
  (void)state;
  uint64_t b2 = bytes_of(2), b4 = bytes_of(4), b8 = bytes_of(8);
  print_message("  stage bytes: batch 2 %llu, 4 %llu, 8 %llu\n",
                (unsigned long long)b2, (unsigned long long)b4,
                (unsigned long long)b8);
  assert_true(b2 < b4 && b4 < b8);

  /* room for the batch-4 and batch-8 stages, not for a third */
  cnn_stage_pool_set_budget(b4 + b8);
  cnn_stage_pool_stats before = stats();
  cnn_cpu_stage *s2 = take(2, 1), *s4 = take(4, 1), *s8 = take(8, 1);
  cnn_stage_pool_stats st = stats();
  assert_int_equal(st.lent, 3);
  assert_int_equal(st.lent_bytes, b2 + b4 + b8);
  assert_int_equal(st.builds - before.builds, 3);
  give(2, s2);
  give(4, s4);
  give(8, s8);  /* evicts the batch-2 stage, the least recently given */
  st = stats();
  assert_int_equal(st.lent, 0);
  assert_int_equal(st.idle, 2);
  assert_int_equal(st.idle_bytes, b4 + b8);
  assert_true(st.idle_bytes <= st.budget);
  assert_int_equal(st.evicted - before.evicted, 1);
  /* the kept ones are reused, the evicted one built again */
  cnn_cpu_stage *again = take(8, 1);
  assert_ptr_equal(again, s8);
  give(8, again);
  assert_int_equal(stats().hits - before.hits, 1);
  give(2, take(2, 1));  /* built; evicts the batch-4 stage (LRU) */
  st = stats();
  assert_int_equal(st.builds - before.builds, 4);
  assert_int_equal(st.idle_bytes, b2 + b8);

  /* a stage larger than the budget is not kept */
  cnn_stage_pool_clear();
  cnn_stage_pool_set_budget(b8 - 1);
  give(8, take(8, 1));
  st = stats();
  assert_int_equal(st.idle, 0);
  assert_int_equal(st.idle_bytes, 0);

  /* lowering the budget evicts at once; 0 keeps none */
  cnn_stage_pool_set_budget(b2 + b4 + b8);
  s2 = take(2, 1);
  s4 = take(4, 1);
  give(2, s2);
  give(4, s4);
  assert_int_equal(stats().idle_bytes, b2 + b4);
  cnn_stage_pool_set_budget(b4);
  st = stats();
  assert_int_equal(st.idle, 1);
  assert_int_equal(st.idle_bytes, b4);  /* the batch-2 one was older */
  cnn_stage_pool_set_budget(0);
  assert_int_equal(stats().idle, 0);
  give(2, take(2, 1));
  assert_int_equal(stats().idle, 0);
}

static void app_gone(void **state) {
  (void)state;
  cnn_stage_pool_set_budget(CNN_STAGE_POOL_DEFAULT_BYTES);
  cnn_stage_pool_clear();
  cnn_stage_pool_stats before = stats();
  /* app 7 keeps two idle stages and has one on loan; app 8 one idle */
  cnn_cpu_stage *a = take(2, 7), *b = take(4, 7), *c = take(8, 8);
  give(2, a);
  give(8, c);
  give(4, b);
  cnn_cpu_stage *lent = take(4, 7);
  assert_ptr_equal(lent, b);
  cnn_stage_pool_app_gone(7);
  cnn_stage_pool_stats st = stats();
  assert_int_equal(st.idle, 1);       /* app 8's */
  assert_int_equal(st.lent, 1);
  assert_int_equal(st.dropped - before.dropped, 1);
  give(4, lent);                      /* its app left: not kept */
  st = stats();
  assert_int_equal(st.idle, 1);
  assert_int_equal(st.lent, 0);
  assert_int_equal(st.dropped - before.dropped, 2);
  /* app 8's stage is still there: a hit */
  cnn_cpu_stage *c2 = take(8, 8);
  assert_ptr_equal(c2, c);
  /* a stage is its last taker's: app 9 takes app 8's and gives it back */
  cnn_stage_pool_discard(c2);
  assert_int_equal(stats().lent, 0);
  c = take(8, 8);
  give(8, c);
  c2 = take(8, 9);
  assert_ptr_equal(c2, c);
  give(8, c2);
  cnn_stage_pool_app_gone(8);
  assert_int_equal(stats().idle, 1);
  cnn_stage_pool_app_gone(9);
  assert_int_equal(stats().idle, 0);
  /* an app that never was: nothing happens */
  cnn_stage_pool_app_gone(12345);
  assert_int_equal(stats().idle, 0);
}

/* The descriptor passes the engine's calls on: app_gone and the budget
 * (ember-nam's accelerator_cache), and an ABI-3 descriptor has both. */
static void descriptor_hooks(void **state) {
  (void)state;
  const acc_descriptor *d = acc_registry_find("cnn");
  assert_non_null(d);
  assert_int_equal(d->abi_version, ACC_ABI_VERSION);
  assert_non_null(d->app_gone);
  assert_non_null(d->cache_budget);
  acc_cache_budget(d, 12345);
  assert_int_equal(stats().budget, 12345);
  acc_cache_budget(d, CNN_STAGE_POOL_DEFAULT_BYTES);
  give(2, take(2, 21));
  assert_int_equal(stats().idle, 1);
  acc_app_gone(d, 21);
  assert_int_equal(stats().idle, 0);
  /* a version-2 descriptor has neither: the helpers read nothing past it */
  acc_descriptor v2 = *d;
  v2.abi_version = 2;
  give(2, take(2, 22));
  acc_app_gone(&v2, 22);
  assert_int_equal(stats().idle, 1);
  cnn_stage_pool_clear();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(reuse_and_budget),
      cmocka_unit_test(app_gone),
      cmocka_unit_test(descriptor_hooks),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
