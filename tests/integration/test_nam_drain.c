/* test_nam_drain - SIGHUP rereads the config file and applies reloadable
 * keys (the daemon says READY=1 again); SIGTERM in the middle of a batch
 * lets the tasks in flight finish: every result arrives, equal to the
 * reference, and the daemon exits 0. */
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

typedef struct job {
  ember_client *c;
  const pair_set *ps;
  size_t n;
  ember_seq *q, *r;
  ember_sw_result *got;
  ember_sw_report rep;
  atomic_size_t done;
  int rc;
} job;

static void on_progress(size_t done, size_t total, void *user) {
  atomic_store(&((job *)user)->done, done);
}

static void *run(void *arg) {
  job *j = arg;
  ember_sw_params p;
  ember_sw_params_default(&p);
  p.pairs_per_task = 100;
  j->rc = ember_sw_align(j->c, &p, j->q, j->r, j->n, j->got, &j->rep, on_progress, j);
  return NULL;
}

static int wait_notify(nam_proc *nam, const char *what) {
  struct pollfd pf = {.fd = nam->notify_fd, .events = POLLIN};
  for (int i = 0; i < 100; i++) {
    if (poll(&pf, 1, 100) != 1) continue;
    char msg[512];
    ssize_t n = recv(nam->notify_fd, msg, sizeof msg - 1, 0);
    if (n <= 0) continue;
    msg[n] = '\0';
    if (strstr(msg, what)) return 0;
  }
  return -1;
}

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
  ember_sw_params p;
  ember_sw_params_default(&p);
  ember_sw_result *want = calloc(ps.n, sizeof *want);
  CHECK_EQ(pairs_reference(&ps, &p, want), 0);

  /* a config file, so that SIGHUP has something to reread */
  char dir[] = "/tmp/ember-drain.XXXXXX", conf[400];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(conf, sizeof conf, "%s/nam.conf", dir);
  FILE *f = fopen(conf, "w");
  fprintf(f, "# test config\nmax_inflight = 16\ncpu_workers = 1\n");
  fclose(f);
  nam_proc nam;
  CHECK_EQ(nam_start_config(&nam, conf, NULL), 0);

  f = fopen(conf, "w");
  fprintf(f, "max_inflight = 32\ncpu_workers = 2\n");
  fclose(f);
  kill(nam.pid, SIGHUP);
  CHECK_EQ(wait_notify(&nam, "READY=1"), 0);
  CHECK(log_contains(&nam, "reload: max_inflight changed"));
  CHECK(log_contains(&nam, "cpu_workers changed but is not reloadable"));
  printf("SIGHUP: max_inflight reloaded, cpu_workers kept; READY=1 again\n");

  job j = {.ps = &ps, .n = ps.n * 20};
  j.q = malloc(j.n * sizeof *j.q);
  j.r = malloc(j.n * sizeof *j.r);
  j.got = calloc(j.n, sizeof *j.got);
  for (size_t i = 0; i < j.n; i++) {
    j.q[i] = ps.queries[i % ps.n];
    j.r[i] = ps.refs[i % ps.n];
  }
  ember_options opts = {.client_name = "test_nam_drain"};
  CHECK_EQ(ember_connect(nam.unix_addr, &opts, &j.c), 0);
  atomic_init(&j.done, 0);
  pthread_t th;
  pthread_create(&th, NULL, run, &j);
  struct timespec tick = {0, 1000000};
  for (int i = 0; i < 20000 && atomic_load(&j.done) < j.n / 10; i++)
    nanosleep(&tick, NULL);
  pid_t pid = nam.pid;
  kill(pid, SIGTERM);
  CHECK_EQ(wait_notify(&nam, "STOPPING=1"), 0);
  int status;
  CHECK_EQ(waitpid(pid, &status, 0), pid);
  nam.pid = 0;
  pthread_join(th, NULL);
  CHECK(WIFEXITED(status));
  CHECK_EQ(WEXITSTATUS(status), 0);
  CHECK_EQ(j.rc, 0);
  size_t equal = 0;
  for (size_t i = 0; i < j.n; i++)
    equal += memcmp(&j.got[i], &want[i % ps.n], sizeof want[0]) == 0;
  CHECK_EQ(equal, j.n);
  CHECK(log_contains(&nam, "draining"));
  printf("SIGTERM mid-batch: exit 0; %zu tasks on the NAM, %zu fell back; all "
         "%zu results equal\n", j.rep.tasks_by_platform[0], j.rep.tasks_fallback, j.n);
  ember_close(j.c);
  nam_cleanup(&nam);
  unlink(conf);
  rmdir(dir);
  free(j.q);
  free(j.r);
  free(j.got);
  free(want);
  pairs_free(&ps);
  printf("1 passed, 0 failed\n");
  return 0;
}
