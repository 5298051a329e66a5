/* hostile.c - ember-nam under attack: what it holds, a good client, and
 * attackers in a process of their own. */
#include "hostile.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"

int hostile_window_ms(int default_ms) {
  const char *env = getenv("EMBER_ATTACK_MS");
  int ms = env ? atoi(env) : 0;
  return ms > 0 ? ms : HOSTILE_SCALE(default_ms);
}

uint64_t hostile_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void nam_usage_read(const nam_proc *p, nam_usage *u) {
  char path[64], line[512];
  memset(u, 0, sizeof *u);
  snprintf(path, sizeof path, "/proc/%d/status", (int)p->pid);
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) u->rss_kb = atol(line + 6);
  fclose(f);
  snprintf(path, sizeof path, "/proc/%d/fd", (int)p->pid);
  DIR *d = opendir(path);
  CHECK(d != NULL);
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') u->fds++;
  closedir(d);
  snprintf(path, sizeof path, "/proc/%d/stat", (int)p->pid);
  f = fopen(path, "r");
  CHECK(f != NULL);
  CHECK(fgets(line, sizeof line, f) != NULL);
  fclose(f);
  /* fields 14 and 15 (utime, stime) follow the ')' that ends the name */
  const char *q = strrchr(line, ')');
  CHECK(q != NULL);
  unsigned long ut = 0, st = 0;
  CHECK(sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu",
               &ut, &st) == 2);
  u->cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
  struct stat sb;
  u->log_bytes = stat(p->log_path, &sb) == 0 ? (long)sb.st_size : 0;
}

void nam_wait_idle(const nam_proc *p) {
  nam_usage a, b;
  nam_usage_read(p, &a);
  for (int i = 0; i < 100; i++) {
    usleep(300 * 1000);
    nam_usage_read(p, &b);
    if (b.cpu_s - a.cpu_s < 0.015) return;
    a = b;
  }
}

const char *nam_usage_text(const nam_usage *u, char *buf, size_t len) {
  snprintf(buf, len, "rss %.1f MB, %d fds, cpu %.2f s, log %.1f KB",
           u->rss_kb / 1024.0, u->fds, u->cpu_s, u->log_bytes / 1024.0);
  return buf;
}

int hostile_connect(const nam_proc *p, int tcp, const char *src) {
  int fd = socket(tcp ? AF_INET : AF_UNIX,
                  SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int rc;
  if (tcp) {
    if (src) {
      struct sockaddr_in me = {.sin_family = AF_INET};
      inet_pton(AF_INET, src, &me.sin_addr);
      if (bind(fd, (struct sockaddr *)&me, sizeof me) != 0) {
        close(fd);
        return -1;
      }
    }
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)p->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
  } else {
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%.107s", p->sock);
    rc = connect(fd, (struct sockaddr *)&sa, sizeof sa);
  }
  if (rc != 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  return fd;
}

/* The next frame within the deadline: 1 with its type (message freed),
 * 0 at the end of the stream or on time-out (why says which). */
static int next_frame(int fd, proto_reader *rd, uint64_t deadline,
                      uint8_t *type, char *why, size_t why_len) {
  for (;;) {
    proto_frame f;
    int rc = proto_reader_next(rd, &f);
    if (rc < 0) {
      snprintf(why, why_len, "a reply over the frame limit");
      return 0;
    }
    if (rc == 1) {
      *type = f.type;
      if (f.type == EMBER__MSG_TYPE__MSG_ERROR) {
        Ember__Error *e = (Ember__Error *)proto_unpack(&f);
        snprintf(why, why_len, "Error: %s", e ? e->message : "(malformed)");
        if (e) protobuf_c_message_free_unpacked(&e->base, NULL);
      }
      return 1;
    }
    uint64_t now = hostile_now_ms();
    if (now >= deadline) {
      snprintf(why, why_len, "timed out");
      return 0;
    }
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    if (poll(&pf, 1, (int)(deadline - now)) <= 0) {
      snprintf(why, why_len, "timed out");
      return 0;
    }
    ssize_t n = proto_recv(fd, rd);
    if (n == -EAGAIN) continue;
    if (n <= 0) {
      snprintf(why, why_len, "closed%s%s", n < 0 ? ": " : "",
               n < 0 ? strerror((int)-n) : "");
      return 0;
    }
  }
}

static int send_all(int fd, const proto_wbuf *w, uint64_t deadline) {
  size_t off = 0;
  while (off < w->len) {
    ssize_t n = send(fd, w->data + off, w->len - off, MSG_NOSIGNAL);
    if (n > 0) {
      off += (size_t)n;
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return -1;
    uint64_t now = hostile_now_ms();
    if (now >= deadline) return -1;
    struct pollfd pf = {.fd = fd, .events = POLLOUT};
    poll(&pf, 1, (int)(deadline - now));
  }
  return 0;
}

int good_client(const nam_proc *p, int tcp, int timeout_ms, double *ms,
                char *why, size_t why_len) {
  uint64_t t0 = hostile_now_ms(), deadline = t0 + (uint64_t)timeout_ms;
  int fd = hostile_connect(p, tcp, "127.0.0.1");
  if (fd < 0) {
    snprintf(why, why_len, "connect: %s", strerror(errno));
    return -1;
  }
  /* a unix connect to a full backlog fails at once (EAGAIN); TCP waits */
  struct pollfd pf = {.fd = fd, .events = POLLOUT};
  int err = 0;
  socklen_t elen = sizeof err;
  if (poll(&pf, 1, timeout_ms) != 1 ||
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err) {
    snprintf(why, why_len, "connect: %s", err ? strerror(err) : "timed out");
    close(fd);
    return -1;
  }
  proto_wbuf w = {0};
  Ember__Hello h = EMBER__HELLO__INIT;
  h.protocol_version = PROTO_VERSION;
  h.client_name = "good";
  Ember__StatsRequest sr = EMBER__STATS_REQUEST__INIT;
  CHECK_EQ(proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_HELLO, &h.base, 0), 0);
  CHECK_EQ(proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_STATS_REQUEST,
                             &sr.base, 0), 0);
  proto_reader rd;
  proto_reader_init(&rd, 0);
  int rc = -1;
  uint8_t type = 0;
  if (send_all(fd, &w, deadline) != 0) {
    snprintf(why, why_len, "send: %s", strerror(errno));
  } else if (next_frame(fd, &rd, deadline, &type, why, why_len)) {
    if (type == EMBER__MSG_TYPE__MSG_WELCOME &&
        next_frame(fd, &rd, deadline, &type, why, why_len)) {
      if (type == EMBER__MSG_TYPE__MSG_STATS)
        rc = 0;
      else if (type != EMBER__MSG_TYPE__MSG_ERROR)
        snprintf(why, why_len, "%s instead of Stats", proto_type_name(type));
    } else if (type != EMBER__MSG_TYPE__MSG_ERROR &&
               type != EMBER__MSG_TYPE__MSG_WELCOME) {
      snprintf(why, why_len, "%s instead of Welcome", proto_type_name(type));
    }
  }
  *ms = (double)(hostile_now_ms() - t0);
  proto_reader_free(&rd);
  proto_wbuf_free(&w);
  close(fd);
  return rc;
}

static void count(probe_stats *s, int rc, double ms, const char *why) {
  s->tries++;
  if (rc == 0) {
    s->served++;
    s->sum_ms += ms;
    if (ms > s->worst_ms) s->worst_ms = ms;
  } else if (!s->first_failure[0]) {
    snprintf(s->first_failure, sizeof s->first_failure, "try %u: %s",
             s->tries, why);
  }
}

void probe_window(const nam_proc *p, int window_ms, int interval_ms,
                  int timeout_ms, probe_stats *u, probe_stats *t) {
  uint64_t end = hostile_now_ms() + (uint64_t)window_ms;
  for (int tcp = 0; hostile_now_ms() < end; tcp = !tcp) {
    double ms = 0;
    char why[256] = "";
    int rc = good_client(p, tcp, timeout_ms, &ms, why, sizeof why);
    count(tcp ? t : u, rc, ms, why);
    usleep((useconds_t)interval_ms * 1000);
  }
}

long log_allowance(const probe_stats *u, const probe_stats *t, int ms) {
  return 4096 + 4 * 400L * (ms / 1000 + 1) + 256L * (u->tries + t->tries);
}

static void report_one(const char *kind, const probe_stats *s) {
  printf("    %s: %u/%u served", kind, s->served, s->tries);
  if (s->served)
    printf(" (mean %.1f ms, worst %.1f ms)", s->sum_ms / s->served,
           s->worst_ms);
  if (s->first_failure[0]) printf("; first failure: %s", s->first_failure);
  printf("\n");
}

void probe_report(const char *what, const probe_stats *u,
                  const probe_stats *t) {
  printf("  good clients %s:\n", what);
  report_one("unix", u);
  report_one("tcp", t);
  fflush(stdout);
}

void probe_check(const probe_stats *u, const probe_stats *t) {
  CHECK(u->tries > 0 && t->tries > 0);
  CHECK_EQ(u->served, u->tries);
  CHECK_EQ(t->served, t->tries);
}

pid_t attack_start(void (*fn)(void *arg), void *arg) {
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* not left behind by a failed test */
    fn(arg);
    _exit(0);
  }
  return pid;
}

void attack_stop(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
}
