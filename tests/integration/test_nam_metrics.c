/* test_nam_metrics - GET /metrics on a real ember-nam: after batches over
 * the unix socket and TCP and one refused submit, the task counters, the
 * latency histograms, blocks by transport and frames match what was run;
 * the build and process_* families are there; /healthz and /readyz answer;
 * 404 and 405 for other paths and methods; the text passes
 * `promtool check metrics` when promtool is on PATH. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "harness.h"

/* One HTTP/1.0 exchange on 127.0.0.1:port; returns the status code and the
 * body in *body (malloc'd, NUL-terminated), or -1. */
static int http(int port, const char *method, const char *path, char **body) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    perror("connect to the metrics port");
    if (fd >= 0) close(fd);
    return -1;
  }
  char req[256];
  int n = snprintf(req, sizeof req, "%s %s HTTP/1.0\r\nHost: localhost\r\n\r\n",
                   method, path);
  CHECK(write(fd, req, (size_t)n) == n);
  size_t len = 0, cap = 1 << 16;
  char *buf = malloc(cap);
  ssize_t got;
  while (buf && (got = read(fd, buf + len, cap - len - 1)) > 0) {
    len += (size_t)got;
    if (len + 1 == cap) buf = realloc(buf, cap *= 2);
  }
  close(fd);
  CHECK(buf != NULL);
  buf[len] = '\0';
  int status = -1;
  if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) status = -1;
  char *sep = strstr(buf, "\r\n\r\n");
  *body = strdup(sep ? sep + 4 : "");
  if (status == 200 && strcmp(path, "/metrics") == 0) {
    char *ct = strcasestr(buf, "\r\nContent-Type: text/plain; version=0.0.4");
    CHECK(ct != NULL && (!sep || ct < sep));
  }
  free(buf);
  return status;
}

/* The value of the sample written exactly as series ("name{labels}"), or
 * -1 when there is none. */
static double sample(const char *text, const char *series) {
  size_t n = strlen(series);
  for (const char *line = text; line && *line;) {
    if (strncmp(line, series, n) == 0 && line[n] == ' ')
      return strtod(line + n + 1, NULL);
    line = strchr(line, '\n');
    if (line) line++;
  }
  return -1;
}

#define CHECK_SAMPLE(text, series, want)                                     \
  do {                                                                       \
    double got_ = sample(text, series);                                      \
    if (got_ != (double)(want)) {                                            \
      fprintf(stderr, "%s:%d: %s is %g, want %g\n", __FILE__, __LINE__,      \
              series, got_, (double)(want));                                 \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

static size_t align_via(const char *address, const pair_set *ps) {
  ember_client *c;
  ember_options opts = {.client_name = "test_nam_metrics", .no_fallback = 1};
  CHECK_EQ(ember_connect(address, &opts, &c), 0);
  ember_sw_params p;
  ember_sw_params_default(&p);
  ember_sw_result *got = calloc(ps->n, sizeof *got);
  ember_sw_report rep = {.size = sizeof rep};
  CHECK_EQ(ember_sw_align(c, &p, ps->queries, ps->refs, ps->n, got, &rep,
                          NULL, NULL), 0);
  CHECK_EQ(rep.tasks_fallback, 0);
  free(got);
  /* a reference too long to go inline over the unix socket: a memfd */
  size_t rlen = PROTO_UNIX_INLINE_MAX + 4096;
  char *ref = malloc(rlen);
  uint32_t x = 12345; /* a fixed random sequence: the read is unique */
  for (size_t i = 0; i < rlen; i++) {
    x = x * 1103515245u + 12345u;
    ref[i] = "ACGT"[(x >> 16) & 3];
  }
  ember_seq q = {ref + 1000, 150}, r = {ref, rlen};
  ember_sw_result hit;
  ember_sw_report one = {.size = sizeof one};
  CHECK_EQ(ember_sw_align(c, &p, &q, &r, 1, &hit, &one, NULL, NULL), 0);
  CHECK_EQ(hit.ref_start, 1000); /* the read, where it was cut */
  CHECK_EQ(hit.ref_end, 1149);
  free(ref);
  ember_close(c);
  return rep.tasks + one.tasks;
}

/* A submit the NAM refuses (sw with no inputs); returns its error. */
static int refused_submit(const char *address) {
  ember_client *c;
  ember_options opts = {.client_name = "test_nam_metrics", .no_fallback = 1};
  CHECK_EQ(ember_connect(address, &opts, &c), 0);
  ember_task *t = NULL;
  CHECK_EQ(ember_run(c, "sw", NULL, 0, NULL, 0, NULL, &t), 0);
  int status = ember_task_status(t);
  CHECK(status != 0);
  CHECK_EQ(ember_task_get_info(t)->fell_back, 0);
  ember_task_free(t);
  ember_close(c);
  return status;
}

static void promtool_check(const char *text) {
  /* deploy/setup.sh installs it (Debian's prometheus): without it the
   * format is unchecked, which must not pass as checked */
  if (system("command -v promtool >/dev/null 2>&1") != 0) {
    fprintf(stderr, "promtool not on PATH: install prometheus "
                    "(deploy/setup.sh does)\n");
    exit(1);
  }
  FILE *p = popen("promtool check metrics", "w");
  CHECK(p != NULL);
  fputs(text, p);
  int status = pclose(p);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "promtool check metrics failed (status %d) on:\n%s\n",
            status, text);
    exit(1);
  }
  printf("promtool check metrics: OK\n");
}

int main(void) {
  pair_set ps;
  CHECK_EQ(pairs_load_dna(&ps, 0), 0);
  int port = free_tcp_port();
  CHECK(port > 0);
  char metrics_set[64];
  snprintf(metrics_set, sizeof metrics_set, "metrics_listen=127.0.0.1:%d", port);
  nam_proc nam;
  const char *sets[] = {"cpu_workers=2", "node_name=metrics-test", metrics_set,
                        "fpga-emu.memory=64MiB", "fpga-emu.reprogram_time=10ms",
                        NULL};
  CHECK_EQ(nam_start(&nam, sets), 0);

  char *text;
  CHECK_EQ(http(port, "GET", "/metrics", &text), 200);
  CHECK_SAMPLE(text, "ember_nam_task_latency_seconds_count{stage=\"total\"}", 0);
  CHECK_SAMPLE(text, "ember_nam_info{node=\"metrics-test\",version=\"" EMBER_VERSION_TEXT "\"}", 1);
  char build[128];
  snprintf(build, sizeof build,
           "ember_nam_build_info{version=\"" EMBER_VERSION_TEXT "\",protocol=\"%d\"}",
           PROTO_VERSION);
  CHECK_SAMPLE(text, build, 1);
  /* process_*: this process's own figures, so only their sense is known */
  CHECK(sample(text, "process_cpu_seconds_total") >= 0);
  CHECK(sample(text, "process_resident_memory_bytes") > 1e5);
  CHECK(sample(text, "process_virtual_memory_bytes") >=
        sample(text, "process_resident_memory_bytes"));
  CHECK(sample(text, "process_open_fds") >= 3);
  CHECK(sample(text, "process_max_fds") >= sample(text, "process_open_fds"));
  CHECK(sample(text, "process_start_time_seconds") > 1.5e9);
  CHECK(sample(text, "process_start_time_seconds") <= (double)time(NULL) + 1);
  free(text);

  /* the probes: alive, and ready (listening, platforms up, not draining) */
  CHECK_EQ(http(port, "GET", "/healthz", &text), 200);
  CHECK(strcmp(text, "ok\n") == 0);
  free(text);
  CHECK_EQ(http(port, "GET", "/readyz", &text), 200);
  CHECK(strcmp(text, "ready\n") == 0);
  free(text);

  size_t tasks = align_via(nam.unix_addr, &ps);
  tasks += align_via(nam.tcp_addr, &ps);
  int refused = refused_submit(nam.unix_addr);

  CHECK_EQ(http(port, "GET", "/metrics", &text), 200);
  /* every task ran on one of the platforms, none failed */
  double ok = 0;
  const char *platforms[] = {"cpu", "opencl0", "fpga0"};
  char series[160];
  for (int i = 0; i < 3; i++) {
    snprintf(series, sizeof series, "ember_nam_tasks_total{accelerator=\"sw\","
             "platform=\"%s\",outcome=\"ok\"}", platforms[i]);
    double v = sample(text, series);
    if (v > 0) ok += v;
    snprintf(series, sizeof series, "ember_nam_tasks_total{accelerator=\"sw\","
             "platform=\"%s\",outcome=\"failed\"}", platforms[i]);
    CHECK(sample(text, series) <= 0);
  }
  CHECK_EQ(ok, (double)tasks);
  /* the device platforms' families: cache, pairs, reprograms */
  CHECK_SAMPLE(text, "ember_nam_pair_state{accelerator=\"sw\",platform=\"fpga0\","
                     "state=\"ready\"}", 1);
  CHECK_SAMPLE(text, "ember_nam_pair_errors_total{accelerator=\"sw\","
                     "platform=\"fpga0\"}", 0);
  CHECK_SAMPLE(text, "ember_nam_cache_budget_bytes{platform=\"fpga0\"}",
               64.0 * 1024 * 1024);
  CHECK(sample(text, "ember_nam_reprograms_total{platform=\"fpga0\"}") >= 0);
  CHECK(sample(text, "ember_nam_cache_misses_total{platform=\"fpga0\"}") >= 0);
  CHECK_SAMPLE(text, "ember_nam_retries_total", 0);
  snprintf(series, sizeof series,
           "ember_nam_tasks_rejected_total{accelerator=\"sw\",error=\"%s\"}",
           ember_errname(refused));
  CHECK_SAMPLE(text, series, 1);
  CHECK_SAMPLE(text, "ember_nam_frames_received_total{type=\"Submit\"}", tasks + 1);
  CHECK_SAMPLE(text, "ember_nam_frames_received_total{type=\"Hello\"}", 3);
  CHECK_SAMPLE(text, "ember_nam_results_sent_total", tasks);
  const char *stages[] = {"queue", "exec", "total"};
  for (int i = 0; i < 3; i++) {
    snprintf(series, sizeof series,
             "ember_nam_task_latency_seconds_count{stage=\"%s\"}", stages[i]);
    CHECK_SAMPLE(text, series, tasks);
    snprintf(series, sizeof series,
             "ember_nam_task_latency_seconds_bucket{stage=\"%s\",le=\"+Inf\"}",
             stages[i]);
    CHECK_SAMPLE(text, series, tasks);
    snprintf(series, sizeof series,
             "ember_nam_task_latency_seconds_sum{stage=\"%s\"}", stages[i]);
    CHECK(sample(text, series) > 0);
  }
  CHECK_SAMPLE(text, "ember_nam_connections_total{socket=\"unix\"}", 2);
  CHECK_SAMPLE(text, "ember_nam_connections_total{socket=\"tcp\"}", 1);
  CHECK(sample(text, "ember_nam_blocks_received_total{transport=\"fd\"}") > 0);
  CHECK(sample(text, "ember_nam_blocks_received_total{transport=\"inline\"}") > 0);
  CHECK(sample(text, "ember_nam_block_received_bytes_total{transport=\"fd\"}") >
        0);
  CHECK(sample(text, "ember_nam_block_received_bytes_total{transport=\"inline\"}") >
        0);
  CHECK_SAMPLE(text, "ember_nam_protocol_errors_total", 0);
  CHECK(sample(text, "ember_nam_clients") >= 0); /* closes may still be on the way */
  CHECK_SAMPLE(text, "ember_nam_tasks_in_flight", 0);
  CHECK_SAMPLE(text, "ember_nam_queue_length{accelerator=\"sw\"}", 0);
  CHECK_SAMPLE(text,
               "ember_nam_platform_workers{platform=\"cpu\",kind=\"cpu\",state=\"ready\"}",
               2);
  promtool_check(text);
  printf("%zu tasks and 1 refused submit counted in /metrics\n", tasks);
  free(text);

  char *body;
  CHECK_EQ(http(port, "HEAD", "/metrics", &body), 200);
  free(body);
  CHECK_EQ(http(port, "GET", "/", &body), 404);
  free(body);
  CHECK_EQ(http(port, "POST", "/metrics", &body), 405);
  free(body);

  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
  pairs_free(&ps);
  printf("1 passed, 0 failed\n");
  return 0;
}
