/* test_nam_drain - SIGHUP rereads the config file and applies reloadable
 * keys (the daemon says READY=1 again); SIGTERM in the middle of a batch
 * lets the tasks in flight finish: every result arrives, equal to the
 * reference, and the daemon exits 0; meanwhile GET /readyz answers 503
 * "draining". (The watchdog has test_nam_watchdog.) */
#include <arpa/inet.h>
#include <netinet/in.h>
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

/* copies of the pair set in the batch SIGTERM falls into: long enough to
 * be in flight when the daemon drains; a sanitizer build runs 5-15 times
 * slower, so fewer serve there */
#ifdef EMBER_SANITIZED
#define COPIES 6
#else
#define COPIES 20
#endif

static int log_contains(nam_proc *nam, const char *text) {
  FILE *f = fopen(nam->log_path, "r");
  char line[1024];
  int found = 0;
  while (f && !found && fgets(line, sizeof line, f)) found = strstr(line, text) != NULL;
  if (f) fclose(f);
  return found;
}

/* GET path on 127.0.0.1:port over HTTP/1.0: the whole answer in out
 * (headers and body, NUL-terminated), or -1. */
static int http_get(int port, const char *path, char *out, size_t out_len) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  char req[256];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\n\r\n", path);
  size_t len = 0;
  ssize_t got = write(fd, req, (size_t)n) == n ? 1 : -1;
  while (got > 0 && len + 1 < out_len &&
         (got = read(fd, out + len, out_len - len - 1)) > 0)
    len += (size_t)got;
  out[len] = '\0';
  close(fd);
  return got < 0 ? -1 : 0;
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
  int mport = free_tcp_port();
  char mset[64], answer[1024];
  snprintf(mset, sizeof mset, "metrics_listen=127.0.0.1:%d", mport);
  const char *sets[] = {mset, NULL};
  nam_proc nam = {0};
  CHECK_EQ(nam_start_config(&nam, conf, sets), 0);
  CHECK_EQ(http_get(mport, "/readyz", answer, sizeof answer), 0);
  CHECK(strstr(answer, " 200 ") && strstr(answer, "\r\n\r\nready\n"));

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
  align_job_start(&j, c, &ps, COPIES, 100);
  align_job_wait_tenth(&j);
  pid_t pid = nam.pid;
  kill(pid, SIGTERM);
  CHECK_EQ(nam_wait_notify(&nam, "STOPPING=1"), 0);
  /* tasks are still in flight (the job is not done): draining */
  CHECK_EQ(http_get(mport, "/readyz", answer, sizeof answer), 0);
  if (!strstr(answer, " 503 ") || !strstr(answer, "not ready: draining")) {
    fprintf(stderr, "/readyz while draining answered:\n%s\n", answer);
    exit(1);
  }
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
