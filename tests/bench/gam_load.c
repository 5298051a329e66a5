/*
 * gam_load.c - scale load for ember-gam: thousands of simulated NAMs
 * heartbeating and apps acquiring and releasing nodes, against a running
 * GAM or one it starts itself (pinned to one core). Prints heartbeat
 * latency (send -> ack), throughput, the GAM's CPU and memory over the
 * run. The traffic itself is gam_load_traffic.c.
 *
 *   gam_load --spawn build/gam/ember-gam                      (10,000 NAMs,
 *                                                              10 minutes)
 *   gam_load --spawn build/gam/ember-gam --nams 500 --duration 10
 *   gam_load --gam 127.0.0.1:7070 --key /etc/ember/cluster.key \
 *            --pid $(pidof ember-gam) --csv run.csv
 *
 * Exit status: 0 when the run completed with no protocol problem (every
 * NAM registered, every heartbeat acknowledged, every Acquire allocated
 * correctly, no Error, no connection dropped, a spawned GAM exited
 * cleanly), 1 otherwise, 2 for bad usage. Figures are never judged.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "gam_load.h"
#include "hostport.h"

#define MAX_GAM_SETS 32
#define MAX_ARG_LABELS 64
#define HB_BOUNDS 12
#define REALTIME_PRIORITY 10

static const char *const default_labels[] = {
  "sw", "bwa", "gemm", "fft", "kmeans", "lr", "pagerank", "aes",
};

typedef struct args {
  const char *gam, *admin, *spawn, *csv_path, *workdir, *key_file;
  const char *gam_sets[MAX_GAM_SETS];
  int n_gam_sets;
  int pid, gam_cpu, json, keep, verbose, realtime;
  load_options o;
  const char *labels[MAX_ARG_LABELS];
  char *labels_buf;
} args;

/* ------------------------------------------------------------ sampling */

typedef struct proc_sample {
  double t_s;
  double cpu_s;      /* the GAM's user + system time so far */
  long rss_kib;
} proc_sample;

static int proc_read(int pid, proc_sample *s) {
  char path[64], text[2048];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = '\0';
  char *p = strrchr(text, ')');  /* the name may hold spaces */
  unsigned long utime, stime;
  if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
                   &utime, &stime) != 2)
    return -1;
  s->cpu_s = (double)(utime + stime) / (double)sysconf(_SC_CLK_TCK);
  snprintf(path, sizeof path, "/proc/%d/status", pid);
  f = fopen(path, "r");
  if (!f) return -1;
  s->rss_kib = -1;
  char line[256];
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld", &s->rss_kib) == 1) break;
  fclose(f);
  return s->rss_kib < 0 ? -1 : 0;
}

static double self_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------- metrics */

/* The GAM's own heartbeat histogram and a few counters from /metrics. */
typedef struct gam_metrics {
  int ok;
  double le_us[HB_BOUNDS];
  double bucket[HB_BOUNDS];
  int n_bounds;
  double hb_count, hb_sum_s, heartbeats, nodes_lost, store_errors;
  double changes, commits, commit_s;
} gam_metrics;

static int resolve(const char *hp, struct sockaddr_storage *ss,
                   socklen_t *len) {
  hostport a;
  if (hostport_parse(hp, 0, &a, NULL, 0) != 0) return -1;
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
  if (getaddrinfo(a.host, a.port, &hints, &res) != 0) return -1;
  memcpy(ss, res->ai_addr, res->ai_addrlen);
  *len = res->ai_addrlen;
  freeaddrinfo(res);
  return 0;
}

/* libcurl's write callback: append to a growing buffer (NUL-terminated). */
typedef struct text_buf {
  char *data;
  size_t len;
} text_buf;

static size_t text_append(char *data, size_t size, size_t n, void *user) {
  text_buf *b = user;
  size_t add = size * n;
  char *grown = realloc(b->data, b->len + add + 1);
  if (!grown) return 0;  /* curl then fails the transfer */
  memcpy(grown + b->len, data, add);
  b->data = grown;
  b->len += add;
  b->data[b->len] = '\0';
  return add;
}

/* GET http://ADMIN/metrics, bounded by a 2 s timeout; the text or NULL. */
static char *http_metrics(const char *admin) {
  if (!admin) return NULL;
  char url[300];
  snprintf(url, sizeof url, "http://%s/metrics", admin);
  CURL *c = curl_easy_init();
  if (!c) return NULL;
  text_buf b = {NULL, 0};
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, text_append);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 2000L);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
  CURLcode rc = curl_easy_perform(c);
  curl_easy_cleanup(c);
  if (rc != CURLE_OK) {
    free(b.data);
    return NULL;
  }
  return b.data;
}

/* The value of the sample written exactly as series ("name" or
 * "name{labels}") in Prometheus text; 0 when there is none. */
static double sample(const char *text, const char *series) {
  size_t n = strlen(series);
  for (const char *line = text; line && *line;) {
    if (strncmp(line, series, n) == 0 && line[n] == ' ')
      return strtod(line + n + 1, NULL);
    line = strchr(line, '\n');
    if (line) line++;
  }
  return 0;
}

static void metrics_scrape(const char *admin, gam_metrics *m) {
  memset(m, 0, sizeof *m);
  char *text = http_metrics(admin);
  if (!text) return;
  /* the histogram's buckets in the order written: le="BOUND"} COUNT */
  static const char bucket[] = "ember_gam_heartbeat_seconds_bucket{le=\"";
  for (const char *line = strstr(text, bucket); line && m->n_bounds < HB_BOUNDS;
       line = strstr(line + 1, bucket)) {
    char *end;
    double le = strtod(line + sizeof bucket - 1, &end);
    if (end == line + sizeof bucket - 1 || strncmp(end, "\"} ", 3) != 0)
      continue;  /* +Inf */
    m->le_us[m->n_bounds] = le * 1e6;
    m->bucket[m->n_bounds++] = strtod(end + 3, NULL);
  }
  m->hb_count = sample(text, "ember_gam_heartbeat_seconds_count");
  m->hb_sum_s = sample(text, "ember_gam_heartbeat_seconds_sum");
  m->heartbeats = sample(text, "ember_gam_heartbeats_total");
  m->nodes_lost = sample(text, "ember_gam_nodes_lost_total");
  m->store_errors = sample(text, "ember_gam_store_errors_total");
  m->changes = sample(text, "ember_gam_store_changes_total");
  m->commits = sample(text, "ember_gam_store_commits_total");
  m->commit_s = sample(text, "ember_gam_store_commit_seconds_total");
  m->ok = m->n_bounds > 0;
  free(text);
}

/* The bucket bound under which a fraction q of the interval's heartbeats
 * were handled (from the difference of two scrapes); -1 past the last. */
static double metrics_quantile_us(const gam_metrics *a, const gam_metrics *b,
                                  double q) {
  double count = b->hb_count - a->hb_count;
  if (count <= 0) return 0;
  for (int i = 0; i < b->n_bounds && i < a->n_bounds; i++)
    if (b->bucket[i] - a->bucket[i] >= q * count) return b->le_us[i];
  return -1;
}

/* ---------------------------------------------------------------- spawn */

typedef struct spawned {
  pid_t pid;
  char dir[256];
  char listen[64], admin[64];
  int status;          /* from waitpid, once stopped */
  double stop_s;       /* SIGTERM -> exit */
  int killed;
} spawned;

static int free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET,
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  int port = -1;
  if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
      getsockname(fd, (struct sockaddr *)&a, &len) == 0)
    port = ntohs(a.sin_port);
  if (fd >= 0) close(fd);
  return port;
}

static int run_wait(char *const argv[]) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execv(argv[0], argv);
    _exit(127);
  }
  int st;
  if (waitpid(pid, &st, 0) != pid) return -1;
  return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void print_log_tail(const char *dir) {
  char path[300], line[512];
  snprintf(path, sizeof path, "%s/gam.log", dir);
  FILE *f = fopen(path, "r");
  if (!f) return;
  char ring[20][512];
  size_t n = 0;
  while (fgets(line, sizeof line, f)) snprintf(ring[n++ % 20], 512, "%s", line);
  fclose(f);
  fprintf(stderr, "gam_load: last lines of %s:\n", path);
  for (size_t i = n > 20 ? n - 20 : 0; i < n; i++)
    fprintf(stderr, "  %s", ring[i % 20]);
}

/* Start ember-gam in a fresh directory (key, token, database), on CPU
 * gam_cpu when >= 0, and wait for its READY=1 on a notify socket. */
static int spawn_gam(const args *a, spawned *g) {
  memset(g, 0, sizeof *g);
  const char *tmp = a->workdir ? a->workdir : getenv("TMPDIR");
  snprintf(g->dir, sizeof g->dir, "%s/gam_load.XXXXXX", tmp ? tmp : "/tmp");
  if (!mkdtemp(g->dir)) {
    fprintf(stderr, "gam_load: mkdtemp %s: %s\n", g->dir, strerror(errno));
    return -1;
  }
  char key[300], token[300], db[300], notify[300], logp[300];
  snprintf(key, sizeof key, "%s/key", g->dir);
  snprintf(token, sizeof token, "%s/token", g->dir);
  snprintf(db, sizeof db, "%s/gam.db", g->dir);
  snprintf(notify, sizeof notify, "%s/notify", g->dir);
  snprintf(logp, sizeof logp, "%s/gam.log", g->dir);
  char *create[] = {(char *)a->spawn, "--create-key", key, NULL};
  if (run_wait(create) != 0) {
    fprintf(stderr, "gam_load: %s --create-key failed\n", a->spawn);
    return -1;
  }
  int tf = open(token, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (tf < 0 || write(tf, "gam-load-token\n", 15) != 15) {
    fprintf(stderr, "gam_load: %s: %s\n", token, strerror(errno));
    if (tf >= 0) close(tf);
    return -1;
  }
  close(tf);
  int port = free_port(), aport = free_port();
  if (port < 0 || aport < 0) return -1;
  snprintf(g->listen, sizeof g->listen, "127.0.0.1:%d", port);
  snprintf(g->admin, sizeof g->admin, "127.0.0.1:%d", aport);

  int ns = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  struct sockaddr_un un = {.sun_family = AF_UNIX};
  if (strlen(notify) >= sizeof un.sun_path) {
    fprintf(stderr, "gam_load: %s: path too long for a socket\n", notify);
    if (ns >= 0) close(ns);
    return -1;
  }
  memcpy(un.sun_path, notify, strlen(notify) + 1);
  if (ns < 0 || bind(ns, (struct sockaddr *)&un, sizeof un) != 0) {
    fprintf(stderr, "gam_load: notify socket: %s\n", strerror(errno));
    if (ns >= 0) close(ns);
    return -1;
  }

  char set[MAX_GAM_SETS + 8][320];
  char *argv[2 * (MAX_GAM_SETS + 8) + 2];
  int n = 0, k = 0;
  argv[n++] = (char *)a->spawn;
#define SET(...) do { snprintf(set[k], sizeof set[k], __VA_ARGS__); \
                      argv[n++] = "--set"; argv[n++] = set[k++]; } while (0)
  SET("cluster_key_file=%s", key);
  SET("admin_token_file=%s", token);
  SET("database=%s", db);
  SET("listen=%s", g->listen);
  SET("admin_listen=%s", g->admin);
  SET("heartbeat_interval=%ums", (unsigned)(1000.0 / a->o.rate + 0.5));
  /* every simulated NAM and app comes from this one address, and the
   * ramp opens them all at once: no per-address limits, and room for all
   * of them before Hello */
  SET("max_connections_per_address=0");
  SET("max_startups_per_address=0");
  SET("max_startups=%u:100:%u", a->o.nams + 64, a->o.nams + 64);
  for (int i = 0; i < a->n_gam_sets; i++) SET("%s", a->gam_sets[i]);
#undef SET
  argv[n] = NULL;

  g->pid = fork();
  if (g->pid < 0) {
    close(ns);
    return -1;
  }
  if (g->pid == 0) {
    setpgid(0, 0);  /* our Ctrl-C is ours to handle; we stop it after */
    if (a->gam_cpu >= 0) {
      cpu_set_t set1;
      CPU_ZERO(&set1);
      CPU_SET(a->gam_cpu, &set1);
      if (sched_setaffinity(0, sizeof set1, &set1) != 0) _exit(126);
    }
    if (a->realtime) {
      struct sched_param sp = {.sched_priority = REALTIME_PRIORITY};
      if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) _exit(125);
    }
    int lf = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (lf >= 0) {
      dup2(lf, 1);
      dup2(lf, 2);
    }
    setenv("NOTIFY_SOCKET", notify, 1);
    execv(argv[0], argv);
    _exit(127);
  }
  /* ready: a datagram holding READY=1 */
  for (int waited = 0; waited < 60000; waited += 100) {
    struct pollfd p = {.fd = ns, .events = POLLIN};
    if (poll(&p, 1, 100) == 1) {
      char msg[512];
      ssize_t r = recv(ns, msg, sizeof msg - 1, 0);
      if (r > 0) {
        msg[r] = '\0';
        if (strstr(msg, "READY=1")) {
          close(ns);
          return 0;
        }
      }
    }
    int st;
    if (waitpid(g->pid, &st, WNOHANG) == g->pid) {
      fprintf(stderr, "gam_load: ember-gam exited during start-up (status "
              "%d)\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
      print_log_tail(g->dir);
      g->pid = 0;
      close(ns);
      return -1;
    }
  }
  fprintf(stderr, "gam_load: ember-gam not ready after 60 s\n");
  close(ns);
  return -1;
}

static double mono_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void stop_gam(spawned *g) {
  if (g->pid <= 0) return;
  double t = mono_s();
  kill(g->pid, SIGTERM);
  for (int i = 0; i < 3000; i++) {  /* 30 s */
    if (waitpid(g->pid, &g->status, WNOHANG) == g->pid) {
      g->stop_s = mono_s() - t;
      g->pid = 0;
      return;
    }
    usleep(10000);
  }
  kill(g->pid, SIGKILL);
  waitpid(g->pid, &g->status, 0);
  g->killed = 1;
  g->stop_s = mono_s() - t;
  g->pid = 0;
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char path[600];
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      unlink(path);
    }
  closedir(d);
  rmdir(dir);
}

/* --------------------------------------------------------------- report */

typedef struct report {
  const args *a;
  int pid;
  FILE *csv;
  proc_sample *samples;       /* one per second */
  size_t n_samples, cap_samples;
  int *phase_of;              /* each sample's phase */
  double last_cpu_s, last_t_s, last_self_s;
  proc_sample base, at_steady, at_drain;
  double self_at_steady, self_at_drain;
  double steady_t_s, drain_t_s;
  gam_metrics m_steady, m_drain;
  double cpu_iv[4096];        /* per-second GAM CPU %, steady */
  size_t n_cpu_iv;
} report;

static const char *phase_name(enum load_phase p) {
  return p == LOAD_RAMP ? "ramp" : p == LOAD_STEADY ? "steady" : "drain";
}

static void on_phase(void *user, enum load_phase p, double t_s) {
  report *R = user;
  proc_sample s = {.t_s = t_s};
  if (R->pid > 0) proc_read(R->pid, &s);
  if (p == LOAD_RAMP) {
    R->base = s;
  } else if (p == LOAD_STEADY) {
    R->at_steady = s;
    R->steady_t_s = t_s;
    R->self_at_steady = self_cpu_s();
    metrics_scrape(R->a->admin, &R->m_steady);
  } else {
    R->at_drain = s;
    R->drain_t_s = t_s;
    R->self_at_drain = self_cpu_s();
    metrics_scrape(R->a->admin, &R->m_drain);
  }
  fprintf(stderr, "gam_load: %6.1f s: %s\n", t_s, phase_name(p));
}

static void on_second(void *user, const load_interval *iv) {
  report *R = user;
  proc_sample s = {.t_s = iv->t_s, .rss_kib = -1};
  double cpu_pct = -1;
  if (R->pid > 0 && proc_read(R->pid, &s) == 0 && R->last_t_s > 0)
    cpu_pct = 100.0 * (s.cpu_s - R->last_cpu_s) / (iv->t_s - R->last_t_s);
  double self = self_cpu_s();
  double self_pct = R->last_t_s > 0
      ? 100.0 * (self - R->last_self_s) / (iv->t_s - R->last_t_s) : 0;
  R->last_cpu_s = s.cpu_s;
  R->last_self_s = self;
  R->last_t_s = iv->t_s;
  if (R->n_samples == R->cap_samples) {
    size_t cap = R->cap_samples ? 2 * R->cap_samples : 1024;
    proc_sample *grown = realloc(R->samples, cap * sizeof *grown);
    int *ph = realloc(R->phase_of, cap * sizeof *ph);
    if (grown) R->samples = grown;
    if (ph) R->phase_of = ph;
    if (grown && ph) R->cap_samples = cap;
  }
  if (R->n_samples < R->cap_samples) {
    R->samples[R->n_samples] = s;
    R->phase_of[R->n_samples++] = iv->phase;
  }
  if (iv->phase == LOAD_STEADY && cpu_pct >= 0 &&
      R->n_cpu_iv < sizeof R->cpu_iv / sizeof R->cpu_iv[0])
    R->cpu_iv[R->n_cpu_iv++] = cpu_pct;
  const load_counters *n = iv->total;
  if (R->csv) {
    fprintf(R->csv,
            "%.3f,%s,%u,%llu,%llu,%llu,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%u,%llu,"
            "%llu,%.2f,%llu,%llu,%.1f,%ld,%.1f\n",
            iv->t_s, phase_name(iv->phase), iv->nams_up,
            (unsigned long long)n->hb_sent, (unsigned long long)n->hb_acked,
            (unsigned long long)iv->hb->count,
            lh_quantile(iv->hb, 0.5) / 1e3, lh_quantile(iv->hb, 0.99) / 1e3,
            lh_quantile(iv->hb, 0.999) / 1e3, iv->hb->max_ns / 1e3,
            lh_quantile(iv->lag, 0.99) / 1e3, iv->lag->max_ns / 1e3,
            iv->apps_open, (unsigned long long)n->allocations,
            (unsigned long long)iv->alloc->count,
            lh_quantile(iv->alloc, 0.5) / 1e6,
            (unsigned long long)n->releases,
            (unsigned long long)(n->nam_errors + n->register_errors +
                                 n->acquire_errors + n->app_errors +
                                 n->bad_frames + n->disconnects),
            cpu_pct, s.rss_kib, self_pct);
    fflush(R->csv);
  }
  long sec = lround(iv->t_s);
  if (R->a->verbose || sec % 10 == 0)
    fprintf(stderr,
            "gam_load: %5lds %-6s up %5u  acks/s %6llu  p50 %7.1f us  p99 "
            "%7.1f us  max %8.1f us  lag p99 %6.1f us  gam cpu %5.1f%%  rss "
            "%7.1f MiB  apps %u\n",
            sec, phase_name(iv->phase), iv->nams_up,
            (unsigned long long)iv->hb->count,
            lh_quantile(iv->hb, 0.5) / 1e3, lh_quantile(iv->hb, 0.99) / 1e3,
            iv->hb->max_ns / 1e3, lh_quantile(iv->lag, 0.99) / 1e3, cpu_pct,
            s.rss_kib / 1024.0, iv->apps_open);
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return (a > b) - (a < b);
}

/* RSS in the steady phase: least-squares slope (KiB per minute) over its
 * last 80%, and the samples nearest its start, middle and end. */
static double rss_slope(const report *R, long *mid_kib, long *first_kib) {
  double from = R->steady_t_s + 0.2 * (R->drain_t_s - R->steady_t_s);
  double mid_t = (R->steady_t_s + R->drain_t_s) / 2, best = 1e300;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  size_t n = 0;
  *mid_kib = *first_kib = -1;
  for (size_t i = 0; i < R->n_samples; i++) {
    const proc_sample *s = &R->samples[i];
    if (R->phase_of[i] != LOAD_STEADY || s->rss_kib < 0) continue;
    if (fabs(s->t_s - mid_t) < best) {
      best = fabs(s->t_s - mid_t);
      *mid_kib = s->rss_kib;
    }
    if (s->t_s < from) continue;
    if (*first_kib < 0) *first_kib = s->rss_kib;
    double x = s->t_s / 60.0, y = (double)s->rss_kib;
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
    n++;
  }
  double den = (double)n * sxx - sx * sx;
  return n >= 3 && den > 0 ? ((double)n * sxy - sx * sy) / den : 0;
}

typedef struct verdict {
  int ok;
  char why[512];
} verdict;

static void judge(const args *a, const load_result *r, const spawned *g,
                  verdict *v) {
  const load_counters *n = &r->total;
  v->ok = 1;
  v->why[0] = '\0';
#define BAD(cond, ...) do { if (cond) { size_t l = strlen(v->why); \
    snprintf(v->why + l, sizeof v->why - l, __VA_ARGS__); v->ok = 0; } } while (0)
  BAD(r->nams_up != a->o.nams, " %u of %u NAMs up;", r->nams_up, a->o.nams);
  BAD(n->register_errors, " %llu register errors;",
      (unsigned long long)n->register_errors);
  BAD(n->connect_failures, " %llu connect failures;",
      (unsigned long long)n->connect_failures);
  BAD(n->disconnects, " %llu dropped connections;",
      (unsigned long long)n->disconnects);
  BAD(n->hb_missing, " %llu heartbeats never acked;",
      (unsigned long long)n->hb_missing);
  BAD(n->hb_unexpected_acks, " %llu unexpected acks;",
      (unsigned long long)n->hb_unexpected_acks);
  BAD(n->nam_errors, " %llu heartbeat errors;",
      (unsigned long long)n->nam_errors);
  BAD(n->bad_frames, " %llu bad frames;", (unsigned long long)n->bad_frames);
  BAD(n->acquire_errors + n->acquire_timeouts, " %llu acquires failed;",
      (unsigned long long)(n->acquire_errors + n->acquire_timeouts));
  BAD(n->app_connect_failures, " %llu app connections failed;",
      (unsigned long long)n->app_connect_failures);
  BAD(n->bad_grants, " %llu bad grants;", (unsigned long long)n->bad_grants);
  BAD(n->app_errors, " %llu app errors;", (unsigned long long)n->app_errors);
  BAD(a->o.apps_per_s > 0 && r->steady_s >= 2 && n->allocations == 0,
      " no allocation at all;");
  if (a->spawn) {
    BAD(g->killed, " ember-gam ignored SIGTERM (killed);");
    BAD(!g->killed && !(WIFEXITED(g->status) && WEXITSTATUS(g->status) == 0),
        " ember-gam exited with status %d;",
        WIFEXITED(g->status) ? WEXITSTATUS(g->status)
                             : 128 + WTERMSIG(g->status));
  }
#undef BAD
}

static void print_text(const args *a, const report *R, const load_result *r,
                       const spawned *g, const verdict *v) {
  const load_counters *n = &r->total;
  const load_counters *s0 = &r->at_steady, *s1 = &r->at_drain;
  double steady = r->steady_s > 0 ? r->steady_s : 1;
  long mid = -1, first80 = -1;
  double slope = rss_slope(R, &mid, &first80);
  const lat_hist *h = &r->hb_steady;
  printf("gam_load: %u NAMs at %.3g heartbeat/s each, %.0f s steady, %.3g "
         "apps/s, labels %zu\n", a->o.nams, a->o.rate, r->steady_s,
         a->o.apps_per_s, a->o.n_labels);
  if (a->spawn)
    printf("  GAM: %s (spawned in %s, pid %d%s%s)\n", a->spawn, g->dir,
           R->pid, a->gam_cpu >= 0 ? ", pinned to one CPU" : "",
           a->realtime ? ", SCHED_FIFO" : "");
  printf("ramp: %u/%u NAMs registered in %.1f s; Register->ack p50 %.0f us "
         "p99 %.0f us max %.1f ms; heartbeats acked %llu (p99 %.0f us, max "
         "%.1f ms)\n",
         r->nams_up, a->o.nams, r->ramp_s, lh_quantile(&r->reg, .5) / 1e3,
         lh_quantile(&r->reg, .99) / 1e3, r->reg.max_ns / 1e6,
         (unsigned long long)r->hb_ramp.count,
         lh_quantile(&r->hb_ramp, .99) / 1e3, r->hb_ramp.max_ns / 1e6);
  printf("heartbeats (steady): sent %llu, acked %llu (%.1f/s), missing %llu "
         "(whole run), errors %llu\n",
         (unsigned long long)(s1->hb_sent - s0->hb_sent),
         (unsigned long long)h->count, (double)h->count / steady,
         (unsigned long long)n->hb_missing,
         (unsigned long long)(n->nam_errors + n->hb_unexpected_acks));
  printf("  send->ack latency (to the ack's arrival): p50 %.1f us, p90 %.1f us, p99 %.1f us, p99.9 "
         "%.1f us, max %.1f us, mean %.1f us\n",
         lh_quantile(h, .5) / 1e3, lh_quantile(h, .9) / 1e3,
         lh_quantile(h, .99) / 1e3, lh_quantile(h, .999) / 1e3,
         h->max_ns / 1e3, lh_mean(h) / 1e3);
  printf("  the same, to when this program read each ack: p50 %.1f us, p99 "
         "%.1f us, p99.9 %.1f us, max %.1f us\n",
         lh_quantile(&r->hb_steady_read, .5) / 1e3,
         lh_quantile(&r->hb_steady_read, .99) / 1e3,
         lh_quantile(&r->hb_steady_read, .999) / 1e3,
         r->hb_steady_read.max_ns / 1e3);
  printf("  sent behind schedule (load generator lag): p99 %.1f us, max "
         "%.1f us\n", lh_quantile(&r->lag_steady, .99) / 1e3,
         r->lag_steady.max_ns / 1e3);
  if (R->m_steady.ok && R->m_drain.ok) {
    double cnt = R->m_drain.hb_count - R->m_steady.hb_count;
    double p50 = metrics_quantile_us(&R->m_steady, &R->m_drain, .5);
    double p99 = metrics_quantile_us(&R->m_steady, &R->m_drain, .99);
    printf("  GAM's own core time (/metrics): %.0f heartbeats, mean %.1f us, "
           "p50 <= %g us, p99 <= %g us; nodes lost %.0f, store errors %.0f\n",
           cnt, cnt > 0 ? 1e6 * (R->m_drain.hb_sum_s - R->m_steady.hb_sum_s) /
                              cnt : 0,
           p50, p99, R->m_drain.nodes_lost, R->m_drain.store_errors);
    const gam_metrics *m0 = &R->m_steady, *m1 = &R->m_drain;
    double commits = m1->commits - m0->commits;
    printf("  GAM's store (steady): %.0f changes in %.0f commits on the "
           "writer thread (mean %.2f ms each, fsync included)\n",
           m1->changes - m0->changes, commits,
           commits > 0 ? 1e3 * (m1->commit_s - m0->commit_s) / commits : 0);
  }
  printf("apps: started %llu, allocated %llu (grants %llu, bad %llu), "
         "errors %llu, timeouts %llu, released %llu, lease-ended messages "
         "%llu\n",
         (unsigned long long)n->apps_started,
         (unsigned long long)n->allocations, (unsigned long long)n->grants,
         (unsigned long long)n->bad_grants,
         (unsigned long long)(n->acquire_errors + n->app_errors),
         (unsigned long long)n->acquire_timeouts,
         (unsigned long long)n->releases,
         (unsigned long long)n->lease_ended_msgs);
  printf("  Acquire->Allocation: p50 %.2f ms, p99 %.2f ms, max %.2f ms\n",
         lh_quantile(&r->alloc, .5) / 1e6, lh_quantile(&r->alloc, .99) / 1e6,
         r->alloc.max_ns / 1e6);
  if (R->pid > 0) {
    double wall = R->drain_t_s - R->steady_t_s;
    double cpu = wall > 0 ? 100 * (R->at_drain.cpu_s - R->at_steady.cpu_s) /
                                wall : 0;
    double sorted[4096];
    size_t k = R->n_cpu_iv;
    memcpy(sorted, R->cpu_iv, k * sizeof *sorted);
    qsort(sorted, k, sizeof *sorted, cmp_double);
    printf("GAM CPU (steady): %.1f%% of one core; per second min %.0f%%, "
           "median %.0f%%, max %.0f%%\n",
           cpu, k ? sorted[0] : 0, k ? sorted[k / 2] : 0,
           k ? sorted[k - 1] : 0);
    printf("GAM RSS: before NAMs %.1f MiB, steady start %.1f MiB, middle "
           "%.1f MiB, end %.1f MiB; slope over the last 80%%: %+.1f KiB/min "
           "(from %.1f MiB)\n",
           R->base.rss_kib / 1024.0, R->at_steady.rss_kib / 1024.0,
           mid / 1024.0, R->at_drain.rss_kib / 1024.0, slope,
           first80 / 1024.0);
  }
  double wall = R->drain_t_s - R->steady_t_s;
  printf("load generator CPU (steady): %.1f%%\n",
         wall > 0 ? 100 * (R->self_at_drain - R->self_at_steady) / wall : 0);
  if (a->spawn)
    printf("GAM stop: %s in %.2f s\n",
           g->killed ? "killed after SIGTERM timed out"
           : WIFEXITED(g->status) && WEXITSTATUS(g->status) == 0
               ? "clean exit" : "exit with an error",
           g->stop_s);
  if (r->first_error[0]) printf("first problem: %s\n", r->first_error);
  printf("result: %s%s\n", v->ok ? "OK" : "FAILED:", v->ok ? "" : v->why);
}

static void json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') printf("\\%c", c);
    else if (c < 0x20) printf("\\u%04x", c);
    else putchar(c);
  }
  putchar('"');
}

static void print_json(const args *a, const report *R, const load_result *r,
                       const spawned *g, const verdict *v) {
  const load_counters *n = &r->total;
  const lat_hist *h = &r->hb_steady;
  double steady = r->steady_s > 0 ? r->steady_s : 1;
  long mid = -1, first80 = -1;
  double slope = rss_slope(R, &mid, &first80);
  double wall = R->drain_t_s - R->steady_t_s;
  printf("{\"nams\":%u,\"rate\":%g,\"duration_s\":%.3f,\"apps_per_s\":%g,"
         "\"realtime\":%s,", a->o.nams, a->o.rate, r->steady_s, a->o.apps_per_s,
         a->realtime ? "true" : "false");
  printf("\"ramp\":{\"seconds\":%.3f,\"registered\":%u,\"register_p50_us\":"
         "%.1f,\"register_p99_us\":%.1f,\"hb_p99_us\":%.1f},",
         r->ramp_s, r->nams_up, lh_quantile(&r->reg, .5) / 1e3,
         lh_quantile(&r->reg, .99) / 1e3, lh_quantile(&r->hb_ramp, .99) / 1e3);
  printf("\"heartbeats\":{\"sent\":%llu,\"acked\":%llu,\"per_s\":%.1f,"
         "\"missing\":%llu,\"errors\":%llu,\"p50_us\":%.1f,\"p90_us\":%.1f,"
         "\"p99_us\":%.1f,\"p999_us\":%.1f,\"max_us\":%.1f,\"mean_us\":%.1f,"
         "\"lag_p99_us\":%.1f,\"lag_max_us\":%.1f},",
         (unsigned long long)(r->at_drain.hb_sent - r->at_steady.hb_sent),
         (unsigned long long)h->count, (double)h->count / steady,
         (unsigned long long)n->hb_missing,
         (unsigned long long)(n->nam_errors + n->hb_unexpected_acks),
         lh_quantile(h, .5) / 1e3, lh_quantile(h, .9) / 1e3,
         lh_quantile(h, .99) / 1e3, lh_quantile(h, .999) / 1e3,
         h->max_ns / 1e3, lh_mean(h) / 1e3,
         lh_quantile(&r->lag_steady, .99) / 1e3, r->lag_steady.max_ns / 1e3);
  if (R->m_steady.ok && R->m_drain.ok) {
    double cnt = R->m_drain.hb_count - R->m_steady.hb_count;
    printf("\"gam_metrics\":{\"heartbeats\":%.0f,\"mean_us\":%.2f,"
           "\"p50_le_us\":%g,\"p99_le_us\":%g,\"nodes_lost\":%.0f,"
           "\"store_errors\":%.0f,\"changes\":%.0f,\"commits\":%.0f},",
           cnt, cnt > 0 ? 1e6 * (R->m_drain.hb_sum_s - R->m_steady.hb_sum_s) /
                              cnt : 0,
           metrics_quantile_us(&R->m_steady, &R->m_drain, .5),
           metrics_quantile_us(&R->m_steady, &R->m_drain, .99),
           R->m_drain.nodes_lost, R->m_drain.store_errors,
           R->m_drain.changes - R->m_steady.changes,
           R->m_drain.commits - R->m_steady.commits);
  }
  printf("\"apps\":{\"started\":%llu,\"allocations\":%llu,\"grants\":%llu,"
         "\"bad_grants\":%llu,\"errors\":%llu,\"timeouts\":%llu,"
         "\"releases\":%llu,\"alloc_p50_ms\":%.3f,\"alloc_p99_ms\":%.3f,"
         "\"alloc_max_ms\":%.3f},",
         (unsigned long long)n->apps_started,
         (unsigned long long)n->allocations, (unsigned long long)n->grants,
         (unsigned long long)n->bad_grants,
         (unsigned long long)(n->acquire_errors + n->app_errors),
         (unsigned long long)n->acquire_timeouts,
         (unsigned long long)n->releases, lh_quantile(&r->alloc, .5) / 1e6,
         lh_quantile(&r->alloc, .99) / 1e6, r->alloc.max_ns / 1e6);
  if (R->pid > 0)
    printf("\"gam\":{\"cpu_pct\":%.2f,\"rss_base_kib\":%ld,"
           "\"rss_start_kib\":%ld,\"rss_mid_kib\":%ld,\"rss_end_kib\":%ld,"
           "\"rss_slope_kib_per_min\":%.2f},",
           wall > 0 ? 100 * (R->at_drain.cpu_s - R->at_steady.cpu_s) / wall
                    : 0,
           R->base.rss_kib, R->at_steady.rss_kib, mid, R->at_drain.rss_kib,
           slope);
  printf("\"generator_cpu_pct\":%.2f,",
         wall > 0 ? 100 * (R->self_at_drain - R->self_at_steady) / wall : 0);
  if (a->spawn)
    printf("\"gam_stop\":{\"clean\":%s,\"seconds\":%.3f},",
           !g->killed && WIFEXITED(g->status) && WEXITSTATUS(g->status) == 0
               ? "true" : "false", g->stop_s);
  printf("\"first_error\":");
  json_string(r->first_error);
  printf(",\"ok\":%s,\"problems\":", v->ok ? "true" : "false");
  json_string(v->why);
  printf("}\n");
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *out) {
  fprintf(out,
    "Usage: gam_load (--gam HOST:PORT | --spawn PATH-TO-ember-gam) [OPTIONS]\n"
    "Scale load for ember-gam: N simulated NAMs connect (gradually), register\n"
    "and heartbeat, spread evenly over each period; apps acquire 1..3 nodes\n"
    "of one label, hold them a few seconds and release them. Measures each\n"
    "heartbeat's send->ack latency, and the GAM's CPU and RSS every second.\n"
    "\n"
    "  --gam HOST:PORT         a running GAM's protocol address (all the\n"
    "                          load comes from one address: give that GAM\n"
    "                          max_connections_per_address=0, as --spawn does)\n"
    "  --pid PID               that GAM's pid, to sample CPU and RSS\n"
    "  --key FILE              that GAM's cluster_key_file (NAMs register\n"
    "                          with it; required with --gam)\n"
    "  --admin HOST:PORT       its admin API, to read /metrics (optional)\n"
    "  --spawn PATH            start ember-gam in a temp dir (fresh key, token,\n"
    "                          database) pinned to one CPU; stop it at the end\n"
    "  --gam-cpu N             the CPU for --spawn (default: the last one; -1:\n"
    "                          no pinning); this program runs on the others\n"
    "  --gam-set KEY=VALUE     passed to the spawned GAM as --set (repeatable)\n"
    "  --workdir DIR           where --spawn makes its temp dir ($TMPDIR, /tmp)\n"
    "  --keep                  keep that dir (database, gam.log)\n"
    "  --realtime              SCHED_FIFO for this program and the spawned GAM,\n"
    "                          so that other work on a shared machine does not\n"
    "                          delay either (needs CAP_SYS_NICE; both use well\n"
    "                          under a core)\n"
    "  --nams N                simulated NAMs (default 10000)\n"
    "  --rate R                heartbeats per second per NAM (default 1)\n"
    "  --duration S            steady phase in seconds, after every NAM has\n"
    "                          registered (default 600)\n"
    "  --apps-per-second R     app arrivals (default 2; 0: none)\n"
    "  --hold MIN-MAX          seconds an app holds its nodes (default 2-5)\n"
    "  --labels a,b,...        labels; each NAM serves 3..5 of them\n"
    "                          (default sw,bwa,gemm,fft,kmeans,lr,pagerank,aes)\n"
    "  --connect-rate N        NAM connections opened per second (default 1000)\n"
    "  --seed N                random seed (default 1)\n"
    "  --csv FILE              one row per second: t_s,phase,nams_up,hb_sent,\n"
    "                          hb_acked,acks,p50_us,p99_us,p999_us,max_us,\n"
    "                          lag_p99_us,lag_max_us,apps_open,allocations,\n"
    "                          allocs,alloc_p50_ms,releases,errors,gam_cpu_pct,\n"
    "                          gam_rss_kib,gen_cpu_pct\n"
    "  --json                  print the summary as one JSON object\n"
    "  -v, --verbose           a progress line every second (else every 10 s)\n"
    "  -h, --help\n"
    "\n"
    "Latency is measured on the monotonic clock from just before a heartbeat\n"
    "is written to when the kernel received its ack (the socket's receive\n"
    "timestamp, SO_TIMESTAMPNS), so it includes the loopback path both ways\n"
    "and every delay in the GAM but not this program's lateness in reading;\n"
    "the summary also gives the latency to the read. The summary's\n"
    "latencies cover the steady phase only.\n"
    "\"sent behind schedule\" shows whether this program kept up: if its p99\n"
    "is large, the figures say more about the generator than the GAM.\n"
    "GAM RSS slope is a least-squares fit over the last 80%% of the steady\n"
    "phase (flat memory: near 0 KiB/min).\n"
    "Exit status: 0 with no protocol problem, 1 otherwise, 2 bad usage.\n"
    "Timing figures are reported, never judged.\n");
}

static int parse_labels(args *a, const char *list) {
  free(a->labels_buf);
  a->labels_buf = strdup(list);
  if (!a->labels_buf) return -1;
  size_t n = 0;
  char *save = NULL;
  for (char *t = strtok_r(a->labels_buf, ",", &save); t;
       t = strtok_r(NULL, ",", &save)) {
    if (n == MAX_ARG_LABELS) return -1;
    a->labels[n++] = t;
  }
  a->o.labels = a->labels;
  a->o.n_labels = n;
  return n ? 0 : -1;
}

static void raise_nofile(unsigned want) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return;
  if (rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)want + 64)
    fprintf(stderr, "gam_load: warning: %u connections need more than the "
            "open-file limit of %llu\n", want, (unsigned long long)rl.rlim_cur);
}

/* This program on every allowed CPU but the GAM's. */
static void pin_self_away(int gam_cpu) {
  cpu_set_t set;
  if (gam_cpu < 0 || sched_getaffinity(0, sizeof set, &set) != 0) return;
  CPU_CLR(gam_cpu, &set);
  if (CPU_COUNT(&set) > 0) sched_setaffinity(0, sizeof set, &set);
}

static void on_signal(int sig) { gam_load_stop(); }

static int parse_args(int argc, char **argv, args *a) {
  static const struct option opts[] = {
    {"gam", required_argument, 0, 'g'},
    {"pid", required_argument, 0, 'p'},
    {"key", required_argument, 0, 'k'},
    {"admin", required_argument, 0, 'a'},
    {"spawn", required_argument, 0, 's'},
    {"gam-cpu", required_argument, 0, 'C'},
    {"gam-set", required_argument, 0, 'S'},
    {"workdir", required_argument, 0, 'W'},
    {"keep", no_argument, 0, 'K'},
    {"realtime", no_argument, 0, 'T'},
    {"nams", required_argument, 0, 'n'},
    {"rate", required_argument, 0, 'r'},
    {"duration", required_argument, 0, 'd'},
    {"apps-per-second", required_argument, 0, 'A'},
    {"hold", required_argument, 0, 'H'},
    {"labels", required_argument, 0, 'l'},
    {"connect-rate", required_argument, 0, 'R'},
    {"seed", required_argument, 0, 'x'},
    {"csv", required_argument, 0, 'c'},
    {"json", no_argument, 0, 'j'},
    {"verbose", no_argument, 0, 'v'},
    {"help", no_argument, 0, 'h'},
    {0, 0, 0, 0},
  };
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  a->gam_cpu = ncpu > 1 ? (int)ncpu - 1 : -1;
  a->o.nams = 10000;
  a->o.rate = 1;
  a->o.duration_s = 600;
  a->o.apps_per_s = 2;
  a->o.hold_min_s = 2;
  a->o.hold_max_s = 5;
  a->o.app_wait_ms = 10000;
  a->o.connect_per_s = 1000;
  a->o.seed = 1;
  a->o.labels = default_labels;
  a->o.n_labels = sizeof default_labels / sizeof default_labels[0];
  int opt;
  char *end;
  while ((opt = getopt_long(argc, argv, "vh", opts, NULL)) != -1) {
    switch (opt) {
    case 'g': a->gam = optarg; break;
    case 'p': a->pid = atoi(optarg); break;
    case 'k': a->key_file = optarg; break;
    case 'a': a->admin = optarg; break;
    case 's': a->spawn = optarg; break;
    case 'C': a->gam_cpu = atoi(optarg); break;
    case 'S':
      if (a->n_gam_sets == MAX_GAM_SETS) return -1;
      a->gam_sets[a->n_gam_sets++] = optarg;
      break;
    case 'W': a->workdir = optarg; break;
    case 'K': a->keep = 1; break;
    case 'T': a->realtime = 1; break;
    case 'n': a->o.nams = (unsigned)strtoul(optarg, &end, 10);
      if (*end || a->o.nams == 0) return -1;
      break;
    case 'r': a->o.rate = strtod(optarg, &end);
      if (*end || a->o.rate <= 0 || a->o.rate > 100) return -1;
      break;
    case 'd': a->o.duration_s = strtod(optarg, &end);
      if (*end || a->o.duration_s <= 0) return -1;
      break;
    case 'A': a->o.apps_per_s = strtod(optarg, &end);
      if (*end || a->o.apps_per_s < 0) return -1;
      break;
    case 'H':
      if (sscanf(optarg, "%lf-%lf", &a->o.hold_min_s, &a->o.hold_max_s) != 2 ||
          a->o.hold_min_s < 0 || a->o.hold_max_s < a->o.hold_min_s)
        return -1;
      break;
    case 'l': if (parse_labels(a, optarg) != 0) return -1; break;
    case 'R': a->o.connect_per_s = (unsigned)strtoul(optarg, &end, 10);
      if (*end || a->o.connect_per_s == 0) return -1;
      break;
    case 'x': a->o.seed = strtoull(optarg, NULL, 10); break;
    case 'c': a->csv_path = optarg; break;
    case 'j': a->json = 1; break;
    case 'v': a->verbose = 1; break;
    case 'h': usage(stdout); exit(0);
    default: return -1;
    }
  }
  if (optind < argc || (!a->gam && !a->spawn) || (a->gam && a->spawn))
    return -1;
  if (!a->spawn) a->gam_cpu = -1;
  a->o.ramp_timeout_s = 60 + 3.0 * a->o.nams / a->o.connect_per_s;
  return 0;
}

int main(int argc, char **argv) {
  args a = {0};
  if (parse_args(argc, argv, &a) != 0) {
    usage(stderr);
    return 2;
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);  /* before any thread starts */
  raise_nofile(a.o.nams);
  signal(SIGPIPE, SIG_IGN);
  if (a.realtime) {
    struct sched_param sp = {.sched_priority = REALTIME_PRIORITY};
    if (sched_setscheduler(0, SCHED_FIFO, &sp) != 0) {
      fprintf(stderr, "gam_load: --realtime: %s\n", strerror(errno));
      return 1;
    }
  }
  spawned g = {0};
  if (a.spawn) {
    if (spawn_gam(&a, &g) != 0) {
      if (g.pid > 0) stop_gam(&g);
      if (!a.keep && g.dir[0]) remove_dir(g.dir);
      return 1;
    }
    a.gam = g.listen;
    a.admin = g.admin;
    a.pid = g.pid;
    pin_self_away(a.gam_cpu);
  }
  char key_path[300], err[400];
  snprintf(key_path, sizeof key_path, "%s/key", g.dir);
  if (!a.spawn && !a.key_file) {
    fprintf(stderr, "gam_load: --gam needs --key FILE\n");
    return 2;
  }
  if (lease_key_load(a.spawn ? key_path : a.key_file, &a.o.key, err,
                     sizeof err) != 0) {
    fprintf(stderr, "gam_load: %s\n", err);
    stop_gam(&g);
    return 2;
  }
  if (resolve(a.gam, &a.o.gam, &a.o.gam_len) != 0) {
    fprintf(stderr, "gam_load: cannot resolve '%s'\n", a.gam);
    stop_gam(&g);
    return 2;
  }
  report R = {.a = &a, .pid = a.pid};
  if (a.csv_path) {
    R.csv = fopen(a.csv_path, "w");
    if (!R.csv) {
      fprintf(stderr, "gam_load: %s: %s\n", a.csv_path, strerror(errno));
      stop_gam(&g);
      return 2;
    }
    fprintf(R.csv, "t_s,phase,nams_up,hb_sent,hb_acked,acks,p50_us,p99_us,"
            "p999_us,max_us,lag_p99_us,lag_max_us,apps_open,allocations,"
            "allocs,alloc_p50_ms,releases,errors,gam_cpu_pct,gam_rss_kib,"
            "gen_cpu_pct\n");
  }
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);

  fprintf(stderr, "gam_load: %u NAMs -> %s%s\n", a.o.nams, a.gam,
          a.spawn ? " (spawned)" : "");
  load_hooks hooks = {.user = &R, .second = on_second, .phase = on_phase};
  load_result *r = calloc(1, sizeof *r);
  int rc = r ? gam_load_run(&a.o, &hooks, r) : -1;
  if (a.spawn) {
    if (g.pid > 0 && kill(g.pid, 0) != 0)
      fprintf(stderr, "gam_load: ember-gam is gone\n");
    stop_gam(&g);
  }
  if (R.csv) fclose(R.csv);
  int status = 1;
  if (rc != 0) {
    fprintf(stderr, "gam_load: %s\n", r ? r->first_error : "out of memory");
  } else {
    verdict v;
    judge(&a, r, &g, &v);
    if (a.json) print_json(&a, &R, r, &g, &v);
    else print_text(&a, &R, r, &g, &v);
    status = v.ok ? 0 : 1;
  }
  if (a.spawn && status != 0) print_log_tail(g.dir);
  if (a.spawn && !a.keep) remove_dir(g.dir);
  else if (a.spawn) fprintf(stderr, "gam_load: kept %s\n", g.dir);
  free(R.samples);
  free(R.phase_of);
  free(r);
  free(a.labels_buf);
  curl_global_cleanup();
  return status;
}
