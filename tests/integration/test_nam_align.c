/* test_nam_align - the same batch through unix, TCP and embedded equals the
 * scalar reference; results come from the NAM's cpu platform, not the
 * fallback; ListAccelerators shows sw on cpu. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void align_via(const char *address, const pair_set *ps,
                      const ember_sw_result *want, int expect_remote) {
  ember_client *c;
  ember_options opts = {.client_name = "test_nam_align", .no_fallback = expect_remote};
  CHECK_EQ(ember_connect(address, &opts, &c), 0);
  CHECK_EQ(ember_is_connected(c), expect_remote);
  ember_sw_params p;
  ember_sw_params_default(&p);
  ember_sw_result *got = calloc(ps->n, sizeof *got);
  ember_sw_report rep = {.size = sizeof rep};
  int rc = ember_sw_align(c, &p, ps->queries, ps->refs, ps->n, got, &rep, NULL, NULL);
  if (rc) fprintf(stderr, "%s: %s: %s\n", address, ember_strerror(rc), ember_last_error());
  CHECK_EQ(rc, 0);
  CHECK_EQ(results_compare(got, want, ps->n, address), ps->n);
  CHECK(rep.tasks > 1);
  CHECK_EQ(rep.tasks_fallback, 0);
  /* all in the NAM (or the embedded engine): cpu, opencl or fpga-emu */
  CHECK_EQ(rep.tasks_cpu + rep.tasks_opencl + rep.tasks_fpga_emu, rep.tasks);
  ember_client_stats st = {.size = sizeof st};
  ember_client_get_stats(c, &st);
  CHECK_EQ(st.tasks_completed, rep.tasks);
  CHECK_EQ(st.tasks_fallback, 0);

  ember_listing *l;
  CHECK_EQ(ember_list_accelerators(c, &l), 0);
  int found = 0;
  for (size_t i = 0; i < ember_listing_accelerators(l); i++) {
    const ember_accel_info *a = ember_listing_accelerator(l, i);
    CHECK_EQ(a->size, sizeof *a);
    if (strcmp(a->name, "sw") == 0 && strstr(a->platforms, "cpu")) found = 1;
  }
  CHECK(found);
  CHECK(ember_listing_platforms(l) >= 1);
  CHECK_EQ(strcmp(ember_listing_platform(l, 0)->kind, "cpu"), 0);
  CHECK(ember_listing_platform(l, ember_listing_platforms(l)) == NULL);
  ember_listing_free(l);
  printf("%s: %zu pairs in %zu tasks equal to the reference\n", address, ps->n,
         rep.tasks);
  free(got);
  ember_close(c);
}

int main(void) {
  pair_set ps;
  CHECK_EQ(pairs_load_dna(&ps, 0), 0);
  ember_sw_result *want = pairs_reference_default(&ps);

  nam_proc nam;
  const char *sets[] = {"cpu_workers=2", NULL};
  CHECK_EQ(nam_start(&nam, sets), 0);
  align_via(nam.unix_addr, &ps, want, 1);
  align_via(nam.tcp_addr, &ps, want, 1);
  align_via("embedded", &ps, want, 0);
  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
  free(want);
  pairs_free(&ps);
  printf("1 passed, 0 failed\n");
  return 0;
}
