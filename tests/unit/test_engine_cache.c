/*
 * test_engine_cache.c - the engine's block cache (nam_engine_block_cache)
 * with an emulated FPGA board whose small device memory is the budget:
 *
 *   isolation  app 1's block 7 is invisible to app 2: fetch and drop are
 *              ENOTFOUND, app 2's task naming block 7 runs on app 2's own
 *              bytes (its inputs are copied for the task), and app 2 may
 *              use id 7 for a block of its own
 *   eviction   more cached blocks than the board holds: evictions are
 *              counted, resident bytes stay within the budget, results
 *              stay right
 *   pins       a pinned copy is never evicted: the least recently used
 *              unpinned one goes instead; with every byte pinned, a fetch
 *              that needs room is EBUSY
 *   reuse      one cached reference block across 10 tasks: 1 upload and 9
 *              hits for it on the board
 *
 * The board runs on its virtual clock (nothing sleeps).
 */
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
#include "engine_jobs.h"

#define WAIT_S 30
#define BOARD "fpga0"

static nam_fpga_emu_config board_cfg;

/* An engine with one board (platform index 0: no cpu) of memory bytes. */
static nam_engine *board_engine(uint64_t memory) {
  ejob_board(&board_cfg, BOARD);
  board_cfg.memory = memory;
  board_cfg.virtual_clock = 1;
  nam_engine_config cfg = {.no_cpu = 1, .fpga = &board_cfg, .n_fpga = 1};
  nam_engine *e = NULL;
  assert_int_equal(nam_engine_create(&cfg, &e), 0);
  nam_platform_status ps;
  assert_int_equal(nam_engine_platforms(e, &ps, 1), 1);
  assert_string_equal(ps.name, BOARD);
  assert_int_equal(ps.cache_budget, memory);
  ejob_reset();
  return e;
}

static nam_platform_status board_status(nam_engine *e) {
  nam_platform_status ps;
  assert_int_equal(ejob_platform(e, BOARD, &ps), 0);
  return ps;
}

static void put(nam_engine *e, uint64_t app, uint64_t id, unsigned flags,
                const acc_block *b) {
  int rc = nam_block_cache_put(nam_engine_block_cache(e), app, id, flags,
                               b->data, b->size, NULL, NULL);
  assert_int_equal(rc, 0);
}

/* Are two packed results different? (isolation must not be vacuous) */
static int outputs_differ(const ejob *a, const ejob *b) {
  acc_output x = {0}, y = {0};
  ejob_reference(a, &x);
  ejob_reference(b, &y);
  int differ = x.size != y.size || memcmp(x.data, y.data, x.size) != 0;
  free(x.data);
  free(y.data);
  return differ;
}

static void isolation(void **state) {
  (void)state;
  uint64_t rng = 7;
  nam_engine *e = board_engine(1 << 20);
  nam_block_cache *cache = nam_engine_block_cache(e);
  ejob a, b;
  ejob_make_dna(&a, &rng, 8, 60, 120);
  ejob_make_dna(&b, &rng, 8, 60, 120);
  assert_true(outputs_differ(&a, &b));

  /* app 1 owns blocks 7 and 8 */
  put(e, 1, 7, EMBER_BLOCK_CACHE, &a.in[0]);
  put(e, 1, 8, EMBER_BLOCK_CACHE, &a.in[1]);
  a.app = 1;
  a.use_ids = 1;
  a.block_ids[0] = 7;
  a.block_ids[1] = 8;
  assert_int_equal(ejob_submit(e, &a), 0);
  assert_int_equal(ejob_wait(1, WAIT_S), 0);
  assert_true(ejob_check_output(&a, NULL, "app 1, its own blocks"));

  /* app 2 can neither pin nor drop them */
  nam_block_pin pin;
  memset(&pin, 0, sizeof pin);
  assert_int_equal(nam_block_cache_fetch(cache, 2, 7, 0, &pin),
                   EMBER_ENOTFOUND);
  assert_null(pin.data);
  assert_int_equal(nam_block_cache_drop(cache, 2, 7), EMBER_ENOTFOUND);
  assert_int_equal(nam_block_cache_drop_app(cache, 2), 0);

  /* app 2's task names ids 7 and 8, which it never put: it runs on its own
   * bytes (copied for the task), never on app 1's */
  b.app = 2;
  b.use_ids = 1;
  b.block_ids[0] = 7;
  b.block_ids[1] = 8;
  assert_int_equal(ejob_submit(e, &b), 0);
  assert_int_equal(ejob_wait(2, WAIT_S), 0);
  assert_true(ejob_check_output(&b, NULL, "app 2 naming app 1's ids"));
  assert_string_equal(nam_task_platform(b.task), BOARD);

  /* app 2 may put its own block 7: a separate namespace */
  put(e, 2, 7, EMBER_BLOCK_CACHE, &b.in[0]);
  put(e, 2, 8, EMBER_BLOCK_CACHE, &b.in[1]);
  assert_int_equal(nam_block_cache_fetch(cache, 2, 7, 0, &pin), 0);
  assert_ptr_equal(pin.data, b.in[0].data);
  assert_int_equal(nam_block_cache_release(cache, &pin), 0);
  assert_int_equal(nam_block_cache_fetch(cache, 1, 7, 0, &pin), 0);
  assert_ptr_equal(pin.data, a.in[0].data);
  assert_int_equal(pin.hit, 1); /* app 1's copy stayed cached */
  assert_int_equal(nam_block_cache_release(cache, &pin), 0);

  /* both apps run again with their ids: each gets its own answer */
  nam_task_free(a.task);
  nam_task_free(b.task);
  a.task = b.task = NULL;
  a.done = b.done = 0;
  assert_int_equal(ejob_submit(e, &a), 0);
  assert_int_equal(ejob_submit(e, &b), 0);
  assert_int_equal(ejob_wait(4, WAIT_S), 0);
  assert_true(ejob_check_output(&a, NULL, "app 1 again"));
  assert_true(ejob_check_output(&b, NULL, "app 2, its own block 7"));

  /* app 2 goes: its two blocks only */
  assert_int_equal(nam_block_cache_drop_app(cache, 2), 2);
  assert_int_equal(nam_block_cache_fetch(cache, 2, 7, 0, &pin),
                   EMBER_ENOTFOUND);
  assert_int_equal(nam_block_cache_fetch(cache, 1, 8, 0, &pin), 0);
  assert_ptr_equal(pin.data, a.in[1].data);
  assert_int_equal(nam_block_cache_release(cache, &pin), 0);
  nam_engine_destroy(e);
  ejob_free(&a);
  ejob_free(&b);
}

static void eviction_under_budget(void **state) {
  (void)state;
  enum { N = 12 };
  const uint64_t budget = 32 << 10;
  uint64_t rng = 11;
  nam_engine *e = board_engine(budget);
  ejob jobs[N];
  uint64_t total = 0;
  for (int i = 0; i < N; i++) {
    ejob_make_dna(&jobs[i], &rng, 16, 80, 400); /* ~1.5 + ~6.5 KB */
    jobs[i].app = 5;
    jobs[i].use_ids = 1;
    for (int k = 0; k < 2; k++) {
      jobs[i].block_ids[k] = 100 + 2 * (uint64_t)i + (uint64_t)k;
      put(e, 5, jobs[i].block_ids[k], EMBER_BLOCK_CACHE, &jobs[i].in[k]);
      total += jobs[i].in[k].size;
    }
  }
  assert_true(total > 2 * budget);
  /* two passes: the second finds some blocks evicted, uploads them again */
  for (int pass = 0; pass < 2; pass++) {
    for (int i = 0; i < N; i++) {
      nam_task_free(jobs[i].task);
      jobs[i].task = NULL;
      jobs[i].done = 0;
      assert_int_equal(ejob_submit(e, &jobs[i]), 0);
    }
    assert_int_equal(ejob_wait((unsigned)(N * (pass + 1)), WAIT_S), 0);
    for (int i = 0; i < N; i++) {
      char label[64];
      snprintf(label, sizeof label, "pass %d task %d", pass, i);
      assert_true(ejob_check_output(&jobs[i], NULL, label));
      assert_string_equal(nam_task_platform(jobs[i].task), BOARD);
    }
  }
  nam_platform_status ps = board_status(e);
  printf("board: %llu hits, %llu misses, %llu evictions, %llu of %llu bytes "
         "resident in %llu blocks, %llu bytes uploaded\n",
         (unsigned long long)ps.cache_hits,
         (unsigned long long)ps.cache_misses,
         (unsigned long long)ps.cache_evictions,
         (unsigned long long)ps.cache_resident,
         (unsigned long long)ps.cache_budget,
         (unsigned long long)ps.cache_blocks,
         (unsigned long long)ps.bytes_to);
  assert_true(ps.cache_evictions > 0);
  assert_in_range(ps.cache_resident, 1, budget);
  assert_int_equal(ps.cache_pinned, 0);
  assert_int_equal(ps.cache_hits + ps.cache_misses, 4 * N);
  /* what was evicted was uploaded again: more than the blocks' bytes */
  assert_true(ps.bytes_to > total);
  assert_int_equal(ps.completed, 2 * N);
  nam_engine_destroy(e);
  for (int i = 0; i < N; i++) ejob_free(&jobs[i]);
}

static void pinned_blocks_stay(void **state) {
  (void)state;
  enum { BLK = 16 << 10 };
  nam_engine *e = board_engine(3 * BLK);
  nam_block_cache *cache = nam_engine_block_cache(e);
  uint8_t *bytes[4];
  for (int i = 0; i < 4; i++) {
    bytes[i] = malloc(BLK);
    assert_non_null(bytes[i]);
    memset(bytes[i], 'A' + i, BLK);
    assert_int_equal(nam_block_cache_put(cache, 9, (uint64_t)i,
                                         EMBER_BLOCK_CACHE, bytes[i], BLK,
                                         NULL, NULL), 0);
  }
  enum { A, B, C, D };
  nam_block_pin pa, pb, pc, pd, tmp;
  memset(&tmp, 0, sizeof tmp);
  /* A stays pinned (as a running task's input is); B, C cached */
  assert_int_equal(nam_block_cache_fetch(cache, 9, A, 0, &pa), 0);
  assert_int_equal(nam_block_cache_fetch(cache, 9, B, 0, &pb), 0);
  assert_int_equal(nam_block_cache_release(cache, &pb), 0);
  assert_int_equal(nam_block_cache_fetch(cache, 9, C, 0, &pc), 0);
  assert_int_equal(nam_block_cache_release(cache, &pc), 0);
  nam_platform_status ps = board_status(e);
  assert_int_equal(ps.cache_resident, 3 * BLK);
  assert_int_equal(ps.cache_pinned, BLK);
  assert_int_equal(ps.cache_evictions, 0);

  /* D needs room: B (least recently used, unpinned) goes, not A */
  assert_int_equal(nam_block_cache_fetch(cache, 9, D, 0, &pd), 0);
  ps = board_status(e);
  assert_int_equal(ps.cache_evictions, 1);
  assert_int_equal(ps.cache_resident, 3 * BLK);
  assert_int_equal(nam_block_cache_fetch(cache, 9, A, 0, &tmp), 0);
  assert_int_equal(tmp.hit, 1);
  assert_int_equal(nam_block_cache_release(cache, &tmp), 0);
  assert_int_equal(nam_block_cache_fetch(cache, 9, C, 0, &tmp), 0);
  assert_int_equal(tmp.hit, 1);
  assert_int_equal(nam_block_cache_release(cache, &tmp), 0);

  /* B again: A and D are pinned, so C - the only unpinned copy, though
   * just used - goes */
  assert_int_equal(nam_block_cache_fetch(cache, 9, B, 0, &pb), 0);
  assert_int_equal(pb.hit, 0);
  ps = board_status(e);
  assert_int_equal(ps.cache_evictions, 2);
  assert_int_equal(ps.cache_pinned, 3 * BLK);

  /* everything resident is pinned: C cannot come in */
  assert_int_equal(nam_block_cache_fetch(cache, 9, C, 0, &tmp), EMBER_EBUSY);
  assert_null(tmp.data);
  ps = board_status(e);
  assert_int_equal(ps.cache_evictions, 2);
  assert_int_equal(ps.cache_resident, 3 * BLK);
  /* the pinned copies are still the blocks' own bytes */
  assert_ptr_equal(pa.data, bytes[A]);
  assert_ptr_equal(pb.data, bytes[B]);
  assert_ptr_equal(pd.data, bytes[D]);

  /* one release makes room again */
  assert_int_equal(nam_block_cache_release(cache, &pd), 0);
  assert_int_equal(nam_block_cache_fetch(cache, 9, C, 0, &tmp), 0);
  assert_int_equal(nam_block_cache_release(cache, &tmp), 0);
  ps = board_status(e);
  assert_int_equal(ps.cache_evictions, 3);
  assert_int_equal(ps.cache_pinned, 2 * BLK);
  assert_int_equal(nam_block_cache_release(cache, &pa), 0);
  assert_int_equal(nam_block_cache_release(cache, &pb), 0);
  assert_int_equal(board_status(e).cache_pinned, 0);
  nam_engine_destroy(e);
  for (int i = 0; i < 4; i++) free(bytes[i]);
}

static void reuse_across_tasks(void **state) {
  (void)state;
  enum { N = 10, REF = 1000 };
  uint64_t rng = 23;
  nam_engine *e = board_engine(1 << 20);
  ejob jobs[N];
  acc_block ref;
  uint8_t *ref_bytes = ejob_dna_block(&rng, 20, 300, 8, &ref);
  put(e, 3, REF, EMBER_BLOCK_CACHE, &ref);
  uint64_t query_bytes = 0;
  for (int i = 0; i < N; i++) {
    memset(&jobs[i], 0, sizeof jobs[i]);
    jobs[i].owned[0] = ejob_dna_block(&rng, 20, 80, 8, &jobs[i].in[0]);
    jobs[i].in[1] = ref;
    ejob_params_dna(&jobs[i], 3, -3, 6, 1);
    jobs[i].app = 3;
    jobs[i].use_ids = 1;
    jobs[i].block_ids[0] = (uint64_t)i + 1;
    jobs[i].block_ids[1] = REF;
    put(e, 3, (uint64_t)i + 1, 0, &jobs[i].in[0]); /* queries: not cached */
    query_bytes += jobs[i].in[0].size;
  }
  for (int i = 0; i < N; i++) assert_int_equal(ejob_submit(e, &jobs[i]), 0);
  assert_int_equal(ejob_wait(N, WAIT_S), 0);
  for (int i = 0; i < N; i++) {
    char label[32];
    snprintf(label, sizeof label, "task %d", i);
    assert_true(ejob_check_output(&jobs[i], NULL, label));
  }
  nam_platform_status ps = board_status(e);
  printf("board: %llu hits, %llu misses, %llu bytes uploaded (reference "
         "%zu bytes, queries %llu bytes)\n",
         (unsigned long long)ps.cache_hits,
         (unsigned long long)ps.cache_misses,
         (unsigned long long)ps.bytes_to, ref.size,
         (unsigned long long)query_bytes);
  /* the reference: 1 miss, 9 hits; each query: one miss */
  assert_int_equal(ps.cache_hits, N - 1);
  assert_int_equal(ps.cache_misses, 1 + N);
  assert_int_equal(ps.bytes_to, ref.size + query_bytes);
  assert_int_equal(ps.cache_evictions, 0);
  /* only the cached reference stays on the board */
  assert_int_equal(ps.cache_blocks, 1);
  assert_int_equal(ps.cache_resident, ref.size);
  nam_engine_destroy(e);
  for (int i = 0; i < N; i++) ejob_free(&jobs[i]);
  free(ref_bytes);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(isolation),
    cmocka_unit_test(eviction_under_budget),
    cmocka_unit_test(pinned_blocks_stay),
    cmocka_unit_test(reuse_across_tasks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
