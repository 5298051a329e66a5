/* harness.c - real ember-nam processes for integration tests. */
#include "harness.h"

#include <errno.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sw/seqset.h"
#include "sw/sw.h"

#define NAM_BIN EMBER_BINARY_DIR "/nam/ember-nam"
#define DNA_QUERIES EMBER_SOURCE_DIR "/tests/data/sw/dna_queries.fa"
#define DNA_REFS EMBER_SOURCE_DIR "/tests/data/sw/dna_refs.fa"

int test_part(int argc, char **argv, const char *name) {
  return argc < 2 || strcmp(argv[1], name) == 0;
}

int free_tcp_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof sa;
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  return ntohs(sa.sin_port);
}

static int open_notify_socket(nam_proc *p) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(p->notify_path, sizeof p->notify_path, "%s/notify", p->dir);
  unlink(p->notify_path);
  snprintf(sa.sun_path, sizeof sa.sun_path, "%.107s", p->notify_path);
  p->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (p->notify_fd < 0 || bind(p->notify_fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    perror("notify socket");
    return -1;
  }
  return 0;
}

/* One notify message containing what within timeout_ms: 1, else 0. */
static int notify_seen(nam_proc *p, const char *what, int timeout_ms) {
  struct pollfd pf = {.fd = p->notify_fd, .events = POLLIN};
  if (poll(&pf, 1, timeout_ms) != 1) return 0;
  char msg[512];
  ssize_t n = recv(p->notify_fd, msg, sizeof msg - 1, 0);
  if (n <= 0) return 0;
  msg[n] = '\0';
  return strstr(msg, what) != NULL;
}

int nam_wait_notify(nam_proc *p, const char *what) {
  for (int waited = 0; waited < 10000; waited += 100)
    if (notify_seen(p, what, 100)) return 0;
  return -1;
}

/* Wait for READY=1 from the daemon, or its death, for up to 10 s. */
static int wait_ready(nam_proc *p) {
  for (int waited = 0; waited < 10000; waited += 100) {
    if (notify_seen(p, "READY=1", 100)) return 0;
    int status;
    if (waitpid(p->pid, &status, WNOHANG) == p->pid) {
      fprintf(stderr, "harness: ember-nam exited before READY (log: %s)\n",
              p->log_path);
      p->pid = 0;
      return -1;
    }
  }
  fprintf(stderr, "harness: no READY=1 from ember-nam within 10 s\n");
  return -1;
}

static int spawn(nam_proc *p) {
  char listen[512];
  snprintf(listen, sizeof listen, "listen=unix:%s, tcp:127.0.0.1:%d", p->sock,
           p->port);
  const char *argv[48];
  size_t n = 0;
  argv[n++] = NAM_BIN;
  argv[n++] = "--set";
  argv[n++] = listen;
  argv[n++] = "--set";
  argv[n++] = "log_level=debug";
  argv[n++] = "--set";
  argv[n++] = "metrics_listen=";  /* no fixed port; a test may set one */
  /* kernels built once for all tests (pocl builds take seconds) */
  argv[n++] = "--set";
  argv[n++] = "opencl.cache_dir=" EMBER_BINARY_DIR "/kernel-cache";
  if (p->config_path) {
    argv[n++] = "--config";
    argv[n++] = p->config_path;
  }
  for (size_t i = 0; i < p->n_sets; i++) {
    /* "--option=value" items go as they are (e.g. --label=fast) */
    if (strncmp(p->sets[i], "--", 2) != 0) argv[n++] = "--set";
    argv[n++] = p->sets[i];
  }
  argv[n] = NULL;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    FILE *log = fopen(p->log_path, "a");
    if (log) {
      dup2(fileno(log), 2);
      dup2(fileno(log), 1);
    }
    setenv("NOTIFY_SOCKET", p->notify_path, 1);
    if (p->nofile) { /* as systemd's LimitNOFILE= would */
      struct rlimit rl = {.rlim_cur = p->nofile, .rlim_max = p->nofile};
      if (setrlimit(RLIMIT_NOFILE, &rl) != 0) _exit(126);
    }
    if (p->watchdog_usec) { /* as systemd's WatchdogSec= would */
      char usec[32];
      snprintf(usec, sizeof usec, "%llu", (unsigned long long)p->watchdog_usec);
      setenv("WATCHDOG_USEC", usec, 1);
    }
    execv(NAM_BIN, (char *const *)argv);
    _exit(127);
  }
  p->pid = pid;
  return wait_ready(p);
}

int nam_start(nam_proc *p, const char *const *sets) {
  p->watchdog_usec = 0;
  p->nofile = 0;
  return nam_start_config(p, NULL, sets);
}

int nam_start_config(nam_proc *p, const char *path, const char *const *sets) {
  unsigned long long watchdog_usec = p->watchdog_usec;
  unsigned long nofile = p->nofile;
  memset(p, 0, sizeof *p);
  p->watchdog_usec = watchdog_usec;
  p->nofile = nofile;
  p->config_path = path;
  p->notify_fd = -1;
  snprintf(p->dir, sizeof p->dir, "/tmp/ember-test.XXXXXX");
  if (!mkdtemp(p->dir)) {
    perror("mkdtemp");
    return -1;
  }
  snprintf(p->sock, sizeof p->sock, "%s/nam.sock", p->dir);
  snprintf(p->unix_addr, sizeof p->unix_addr, "unix:%s", p->sock);
  snprintf(p->log_path, sizeof p->log_path, "%s/nam.log", p->dir);
  p->port = free_tcp_port();
  snprintf(p->tcp_addr, sizeof p->tcp_addr, "tcp:127.0.0.1:%d", p->port);
  for (; sets && sets[p->n_sets] && p->n_sets < 16; p->n_sets++)
    p->sets[p->n_sets] = sets[p->n_sets];
  if (p->port < 0 || open_notify_socket(p) != 0) return -1;
  return spawn(p);
}

int nam_restart(nam_proc *p) { return spawn(p); }

void nam_kill9(nam_proc *p) {
  if (p->pid <= 0) return;
  kill(p->pid, SIGKILL);
  waitpid(p->pid, NULL, 0);
  p->pid = 0;
}

int nam_stop(nam_proc *p) {
  if (p->pid <= 0) return -1;
  int status = 0;
  kill(p->pid, SIGTERM);
  if (waitpid(p->pid, &status, 0) != p->pid) return -1;
  p->pid = 0;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void nam_cleanup(nam_proc *p) {
  if (p->pid > 0) nam_stop(p);
  if (p->notify_fd >= 0) close(p->notify_fd);
  if (getenv("EMBER_TEST_KEEP")) {
    fprintf(stderr, "harness: kept %s\n", p->dir);
    return;
  }
  unlink(p->notify_path);
  unlink(p->log_path);
  unlink(p->sock);
  rmdir(p->dir);
}

int nam_http_get(int port, const char *path, char **body) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    perror("nam_http_get: connect");
    if (fd >= 0) close(fd);
    return -1;
  }
  char req[512];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: localhost\r\n\r\n",
                   path);
  size_t len = 0, cap = 1 << 16;
  char *buf = malloc(cap);
  ssize_t got = write(fd, req, (size_t)n) == n ? 1 : -1;
  while (buf && got > 0 && (got = read(fd, buf + len, cap - len - 1)) > 0) {
    len += (size_t)got;
    if (len + 1 == cap) {
      char *bigger = realloc(buf, cap *= 2);
      if (!bigger) free(buf);
      buf = bigger;
    }
  }
  close(fd);
  if (!buf) return -1;
  buf[len] = '\0';
  int status = -1;
  if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) status = -1;
  char *sep = strstr(buf, "\r\n\r\n");
  *body = strdup(sep ? sep + 4 : "");
  free(buf);
  return *body ? status : -1;
}

/* ---- data ------------------------------------------------------------- */

/* Our own FASTA files only (one sequence per record, no surprises). */
char *fasta_read(const char *path, ember_seq **seqs, size_t *n) {
  FILE *f = fopen(path, "r");
  if (!f) {
    perror(path);
    return NULL;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  rewind(f);
  char *text = malloc((size_t)size + 1);
  size_t cap = 1024;
  *seqs = malloc(cap * sizeof **seqs);
  *n = 0;
  if (!text || !*seqs || fread(text, 1, (size_t)size, f) != (size_t)size) {
    fclose(f);
    free(text);
    free(*seqs);
    return NULL;
  }
  fclose(f);
  text[size] = '\0';
  /* compact residues in place: drop header and newline bytes */
  char *w = text, *r = text;
  ember_seq *cur = NULL;
  while (*r) {
    if (*r == '>') {
      while (*r && *r != '\n') r++;
      if (*n == cap) {
        cap *= 2;
        *seqs = realloc(*seqs, cap * sizeof **seqs);
      }
      cur = &(*seqs)[(*n)++];
      cur->residues = w;
      cur->length = 0;
    } else if (*r == '\n' || *r == '\r') {
      r++;
    } else {
      *w++ = *r++;
      if (cur) cur->length++;
    }
  }
  return text;
}

int pairs_load_dna(pair_set *ps, size_t max) {
  memset(ps, 0, sizeof *ps);
  size_t nq, nr;
  char *tq = fasta_read(DNA_QUERIES, &ps->queries, &nq);
  char *tr = fasta_read(DNA_REFS, &ps->refs, &nr);
  if (!tq || !tr || nq != nr) {
    fprintf(stderr, "harness: cannot load DNA pairs\n");
    return -1;
  }
  /* one allocation to free: keep both texts alive via a small array */
  char **keep = malloc(2 * sizeof *keep);
  keep[0] = tq;
  keep[1] = tr;
  ps->storage = (char *)keep;
  ps->n = max && max < nq ? max : nq;
  return 0;
}

void pairs_free(pair_set *ps) {
  char **keep = (char **)ps->storage;
  if (keep) {
    free(keep[0]);
    free(keep[1]);
    free(keep);
  }
  free(ps->queries);
  free(ps->refs);
  memset(ps, 0, sizeof *ps);
}

static uint8_t *seqset_of(const ember_seq *s, size_t n, size_t *bytes) {
  const char **res = malloc(n * sizeof *res);
  size_t *lens = malloc(n * sizeof *lens);
  for (size_t i = 0; i < n; i++) {
    res[i] = s[i].residues;
    lens[i] = s[i].length;
  }
  *bytes = acc_seqset_bytes(lens, n);
  uint8_t *buf = malloc(*bytes);
  if (acc_seqset_write(buf, *bytes, res, lens, n) != 0) {
    free(buf);
    buf = NULL;
  }
  free(res);
  free(lens);
  return buf;
}

int pairs_reference(const pair_set *ps, const ember_sw_params *p,
                    ember_sw_result *out) {
  acc_sw_scoring sc;
  char err[256];
  if (acc_sw_scoring_dna(p->match, p->mismatch, p->gap_open, p->gap_extend, &sc,
                         err, sizeof err) != 0) {
    fprintf(stderr, "harness: %s\n", err);
    return -1;
  }
  size_t qb, rb;
  uint8_t *q = seqset_of(ps->queries, ps->n, &qb);
  uint8_t *r = seqset_of(ps->refs, ps->n, &rb);
  acc_block bq = {q, qb}, br = {r, rb};
  acc_seqset vq, vr;
  acc_sw_hit *hits = calloc(ps->n, sizeof *hits);
  int rc = acc_seqset_view(&bq, &vq, err, sizeof err) ||
           acc_seqset_view(&br, &vr, err, sizeof err) ||
           acc_sw_run_batch_isa(ACC_SW_ISA_SCALAR, &sc, &vq, &vr, 0, ps->n, hits,
                                NULL, NULL);
  for (size_t i = 0; rc == 0 && i < ps->n; i++) {
    out[i].score = hits[i].score;
    out[i].query_start = hits[i].query_start;
    out[i].query_end = hits[i].query_end;
    out[i].ref_start = hits[i].ref_start;
    out[i].ref_end = hits[i].ref_end;
  }
  free(hits);
  free(q);
  free(r);
  return rc ? -1 : 0;
}

size_t results_compare(const ember_sw_result *got, const ember_sw_result *want,
                       size_t n, const char *what) {
  size_t equal = 0, reported = 0;
  for (size_t i = 0; i < n; i++) {
    if (memcmp(&got[i], &want[i], sizeof got[i]) == 0) {
      equal++;
    } else if (reported++ < 3) {
      fprintf(stderr,
              "%s: pair %zu: got score %d q %d-%d r %d-%d, want %d q %d-%d r %d-%d\n",
              what, i, got[i].score, got[i].query_start, got[i].query_end,
              got[i].ref_start, got[i].ref_end, want[i].score, want[i].query_start,
              want[i].query_end, want[i].ref_start, want[i].ref_end);
    }
  }
  return equal;
}

ember_sw_result *pairs_reference_default(const pair_set *ps) {
  ember_sw_params p;
  ember_sw_params_default(&p);
  ember_sw_result *want = calloc(ps->n, sizeof *want);
  if (!want || pairs_reference(ps, &p, want) != 0) {
    fprintf(stderr, "harness: no reference answers\n");
    exit(1);
  }
  return want;
}

static void on_job_progress(size_t done, size_t total, void *user) {
  atomic_store(&((align_job *)user)->done, done);
}

static void *job_main(void *arg) {
  align_job *j = arg;
  ember_sw_params p;
  ember_sw_params_default(&p);
  p.pairs_per_task = j->pairs_per_task;
  j->rep.size = sizeof j->rep;
  j->rc = ember_sw_align(j->c, &p, j->q, j->r, j->n, j->got, &j->rep,
                         on_job_progress, j);
  return NULL;
}

void align_job_start(align_job *j, ember_client *c, const pair_set *ps,
                     size_t copies, size_t pairs_per_task) {
  memset(j, 0, sizeof *j);
  j->c = c;
  j->base_n = ps->n;
  j->n = ps->n * copies;
  j->pairs_per_task = pairs_per_task;
  j->q = malloc(j->n * sizeof *j->q);
  j->r = malloc(j->n * sizeof *j->r);
  j->got = calloc(j->n, sizeof *j->got);
  if (!j->q || !j->r || !j->got) exit(1);
  for (size_t i = 0; i < j->n; i++) {
    j->q[i] = ps->queries[i % ps->n];
    j->r[i] = ps->refs[i % ps->n];
  }
  atomic_init(&j->done, 0);
  pthread_t th;
  if (pthread_create(&th, NULL, job_main, j) != 0) exit(1);
  j->thread = (unsigned long)th;
}

size_t align_job_wait_tenth(align_job *j) {
  struct timespec tick = {0, 1000000};
  for (int i = 0; i < 60000 && atomic_load(&j->done) < j->n / 10; i++)
    nanosleep(&tick, NULL);
  return atomic_load(&j->done);
}

void align_job_join(align_job *j) { pthread_join((pthread_t)j->thread, NULL); }

size_t align_job_equal(const align_job *j, const ember_sw_result *want) {
  size_t equal = 0;
  for (size_t i = 0; i < j->n; i++)
    equal += memcmp(&j->got[i], &want[i % j->base_n], sizeof want[0]) == 0;
  return equal;
}

void align_job_free(align_job *j) {
  free(j->q);
  free(j->r);
  free(j->got);
}
