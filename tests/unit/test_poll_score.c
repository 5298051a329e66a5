/*
 * test_poll_score.c - when libember's ember_run and the NAM's loop poll
 * instead of sleeping (common/poll_score.h): polling goes on while it
 * catches, stops after misses, tries once in probe_every at zero and is
 * back after one catch; the moving average follows its samples.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "poll_score.h"

static void catches_keep_it_polling(void **state) {
  (void)state;
  poll_score s = {.points = 1};
  for (int i = 0; i < 100; i++) {
    assert_true(poll_score_try(&s, 32));
    poll_score_caught(&s);
  }
  assert_int_equal(s.points, POLL_SCORE_MAX);
  /* two misses cost what four catches earned */
  poll_score_missed(&s);
  poll_score_missed(&s);
  assert_int_equal(s.points, POLL_SCORE_MAX - 4);
  assert_true(poll_score_try(&s, 32));
}

static void misses_stop_it_but_for_probes(void **state) {
  (void)state;
  poll_score s = {.points = 1};
  poll_score_missed(&s);
  assert_int_equal(s.points, 0);
  int tries = 0;
  for (int i = 0; i < 320; i++) tries += poll_score_try(&s, 32);
  assert_int_equal(tries, 10);
  poll_score_caught(&s); /* a probe that caught */
  assert_true(poll_score_try(&s, 32));
}

static void average_follows_samples(void **state) {
  (void)state;
  uint64_t avg = 0;
  poll_average_add(&avg, 8000);
  assert_int_equal(avg, 1000);
  for (int i = 0; i < 200; i++) poll_average_add(&avg, 30000);
  assert_true(avg > 29000 && avg <= 30000);
  for (int i = 0; i < 200; i++) poll_average_add(&avg, 10000);
  assert_true(avg >= 10000 && avg < 11000); /* going down as well */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(catches_keep_it_polling),
      cmocka_unit_test(misses_stop_it_but_for_probes),
      cmocka_unit_test(average_follows_samples),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
