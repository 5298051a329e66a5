/*
 * idle_cost - what connected clients that do nothing cost ember-nam.
 *
 * Starts ember-nam (default settings, one cpu worker per core), connects
 * CLIENTS clients over its unix socket, runs one one-pair task on each (a
 * client that has used the NAM, not only greeted it), then leaves them idle for
 * SECONDS and reports the NAM's CPU time over that window from
 * /proc/PID/stat, and pidstat's own figure when sysstat is installed.
 * Prints figures; asserts nothing.
 *
 * Usage: idle_cost [SECONDS (default 60)] [CLIENTS (default 1; 0: the NAM
 *                  alone, for comparison)]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../integration/harness.h"

/* utime + stime of pid, in clock ticks; -1 if unreadable */
static long long cpu_ticks(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* the name may hold spaces */
  if (!p) return -1;
  unsigned long long utime, stime;
  /* after ")": state, then 10 fields before utime (14th) and stime */
  if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu",
             &utime, &stime) != 2)
    return -1;
  return (long long)(utime + stime);
}

int main(int argc, char **argv) {
  unsigned seconds = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 60;
  size_t n = argc > 2 ? strtoul(argv[2], NULL, 10) : 1;
  if (seconds == 0 || n > 1000) {
    fprintf(stderr, "usage: idle_cost [SECONDS] [CLIENTS (0..1000)]\n");
    return 2;
  }
  nam_proc nam;
  const char *sets[] = {"log_level=warning", NULL};
  if (nam_start(&nam, sets) != 0) return 1;
  ember_client **c = calloc(n ? n : 1, sizeof *c);
  ember_sw_params p;
  ember_sw_params_default(&p);
  ember_seq q = {"ACGTACGTTT", 10}, r = {"TTACGTACGTTTAA", 14};
  for (size_t i = 0; i < n; i++) {
    ember_options opts = {.client_name = "idle_cost", .no_fallback = 1};
    ember_sw_result res;
    if (ember_connect(nam.unix_addr, &opts, &c[i]) != 0 ||
        ember_sw_align(c[i], &p, &q, &r, 1, &res, NULL, NULL, NULL) != 0) {
      fprintf(stderr, "client %zu: %s\n", i, ember_last_error());
      return 1;
    }
  }
  sleep(1); /* what the tasks started has settled */
  long ticks_per_s = sysconf(_SC_CLK_TCK);
  long long before = cpu_ticks(nam.pid);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "pidstat -u -p %d %u 1 2>/dev/null | tail -n 2",
           (int)nam.pid, seconds);
  int have_pidstat = system("command -v pidstat > /dev/null 2>&1") == 0;
  printf("ember-nam (pid %d), %zu idle client%s connected, %u s:\n",
         (int)nam.pid, n, n > 1 ? "s" : "", seconds);
  fflush(stdout);
  if (have_pidstat) {
    if (system(cmd) != 0) sleep(seconds);
  } else {
    sleep(seconds);
  }
  long long after = cpu_ticks(nam.pid);
  printf("/proc/%d/stat: %lld ticks of CPU (%.3f s) in %u s: %.3f%% of a core\n",
         (int)nam.pid, after - before, (double)(after - before) / ticks_per_s,
         seconds, 100.0 * (double)(after - before) / ticks_per_s / seconds);
  for (size_t i = 0; i < n; i++) ember_close(c[i]);
  free(c);
  nam_stop(&nam);
  nam_cleanup(&nam);
  return 0;
}
