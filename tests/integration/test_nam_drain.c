/* test_nam_drain - SIGHUP rereads the config file and applies reloadable
 * keys (the daemon says READY=1 again); SIGTERM in the middle of a batch
 * lets the tasks in flight finish: every result arrives, equal to the
 * reference, and the daemon exits 0. (The watchdog has test_nam_watchdog.) */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

static int log_contains(nam_proc *nam, const char *text) {
  FILE *f = fopen(nam->log_path, "r");
  char line[1024];
  int found = 0;
  while (f && !found && fgets(line, sizeof line, f)) found = strstr(line, text) != NULL;
  if (f) fclose(f);
  return found;
}

int main(void) {
  pair_set ps;
  CHECK_EQ(pairs_load_dna(&ps, 0), 0);
  ember_sw_result *want = pairs_reference_default(&ps);

  /* a config file, so that SIGHUP has something to reread */
  char dir[] = "/tmp/ember-drain.XXXXXX", conf[400];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(conf, sizeof conf, "%s/nam.conf", dir);
  FILE *f = fopen(conf, "w");
  fprintf(f, "# test config\nmax_inflight = 16\ncpu_workers = 1\n");
  fclose(f);
  nam_proc nam = {0};
  CHECK_EQ(nam_start_config(&nam, conf, NULL), 0);

  f = fopen(conf, "w");
  fprintf(f, "max_inflight = 32\ncpu_workers = 2\n");
  fclose(f);
  kill(nam.pid, SIGHUP);
  CHECK_EQ(nam_wait_notify(&nam, "READY=1"), 0);
  CHECK(log_contains(&nam, "reload: max_inflight changed"));
  CHECK(log_contains(&nam, "cpu_workers changed but is not reloadable"));
  printf("SIGHUP: max_inflight reloaded, cpu_workers kept; READY=1 again\n");

  ember_client *c;
  ember_options opts = {.client_name = "test_nam_drain"};
  CHECK_EQ(ember_connect(nam.unix_addr, &opts, &c), 0);
  align_job j;
  align_job_start(&j, c, &ps, 20, 100);
  align_job_wait_tenth(&j);
  pid_t pid = nam.pid;
  kill(pid, SIGTERM);
  CHECK_EQ(nam_wait_notify(&nam, "STOPPING=1"), 0);
  int status;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  nam.pid = 0;
  align_job_join(&j);
  CHECK(WIFEXITED(status));
  CHECK_EQ(WEXITSTATUS(status), 0);
  CHECK_EQ(j.rc, 0);
  CHECK_EQ(align_job_equal(&j, want), j.n);
  CHECK(log_contains(&nam, "draining"));
  printf("SIGTERM mid-batch: exit 0; %zu tasks on the NAM, %zu fell back; all "
         "%zu results equal\n", j.rep.tasks_cpu, j.rep.tasks_fallback, j.n);
  ember_close(c);
  nam_cleanup(&nam);
  unlink(conf);
  rmdir(dir);
  align_job_free(&j);
  free(want);
  pairs_free(&ps);
  printf("1 passed, 0 failed\n");
  return 0;
}
