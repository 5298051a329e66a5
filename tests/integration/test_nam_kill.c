/* test_nam_kill - kill -9 the NAM in the middle of a batch: every result
 * still arrives exactly once and equals the reference (the in-flight tasks
 * fall back to the CPU in-process); restart it and the client reconnects. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"

/* make the batch long enough to be killed in the middle; a sanitizer build
 * runs 5-15 times slower (CI runs this under ASan and TSan), and its
 * in-process fallback of the rest dominated CI's TSan pass at 40 */
#ifdef EMBER_SANITIZED
#define COPIES 8
#else
#define COPIES 40
#endif

int main(void) {
  pair_set ps;
  CHECK_EQ(pairs_load_dna(&ps, 0), 0);
  ember_sw_result *want = pairs_reference_default(&ps);

  nam_proc nam;
  const char *sets[] = {"cpu_workers=1", NULL};
  CHECK_EQ(nam_start(&nam, sets), 0);
  ember_client *c;
  ember_options opts = {.client_name = "test_nam_kill", .embedded_threads = 2};
  CHECK_EQ(ember_connect(nam.unix_addr, &opts, &c), 0);
  CHECK_EQ(ember_is_connected(c), 1);

  align_job j;
  align_job_start(&j, c, &ps, COPIES, 50);
  size_t at_kill = align_job_wait_tenth(&j);
  nam_kill9(&nam);
  align_job_join(&j);
  printf("killed the NAM after %zu of %zu pairs\n", at_kill, j.n);
  CHECK(at_kill > 0 && at_kill < j.n);
  CHECK_EQ(j.rc, 0);
  CHECK_EQ(align_job_equal(&j, want), j.n);
  CHECK(j.rep.tasks_fallback > 0);
  CHECK(j.rep.tasks > j.rep.tasks_fallback); /* some did run on the NAM */
  printf("%zu tasks: %zu on the NAM's cpu, %zu fell back; all %zu results equal\n",
         j.rep.tasks, j.rep.tasks_cpu, j.rep.tasks_fallback, j.n);

  /* restart: the same client goes back to the NAM by itself (it retries
   * with a backoff of at most 2 s) */
  CHECK_EQ(nam_restart(&nam), 0);
  ember_sw_params p;
  ember_sw_params_default(&p);
  ember_sw_report rep = {.size = sizeof rep};
  int reconnected = 0;
  for (int attempt = 0; attempt < 100 && !reconnected; attempt++) {
    memset(j.got, 0, ps.n * sizeof *j.got);
    CHECK_EQ(ember_sw_align(c, &p, ps.queries, ps.refs, ps.n, j.got, &rep, NULL, NULL), 0);
    CHECK_EQ(results_compare(j.got, want, ps.n, "after restart"), ps.n);
    reconnected = rep.tasks_fallback == 0 && ember_is_connected(c);
    if (!reconnected) nanosleep(&(struct timespec){0, 50000000}, NULL);
  }
  CHECK(reconnected);
  ember_client_stats st = {.size = sizeof st};
  ember_client_get_stats(c, &st);
  CHECK(st.reconnects >= 1);
  printf("reconnected (%llu reconnects), %zu tasks on cpu after the restart\n",
         (unsigned long long)st.reconnects, rep.tasks_cpu);
  ember_close(c);
  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
  align_job_free(&j);
  free(want);
  pairs_free(&ps);
  printf("1 passed, 0 failed\n");
  return 0;
}
