/* test_nam_fds - clients that make ember-nam hold file descriptors, with
 * the daemon under a low RLIMIT_NOFILE (as a unit without LimitNOFILE
 * would leave it, only lower, so that it runs out fast):
 *
 *   unclaimed  16 unix clients send frames other than PutBlock with fds
 *              attached, over and over: the NAM closes them as it reads
 *              the frames, its descriptors stay flat, good clients (a new
 *              unix and a new TCP connection each time) are served.
 *   bound      fds that wait for a frame that never completes: past
 *              max_client_fds the client gets an Error and is closed.
 *   nofile     the limits do not fit RLIMIT_NOFILE: the NAM warns at
 *              start; clients through their Hello take every descriptor
 *              it leaves its clients: more are refused with an Error (CPU
 *              and log stay low, the daemon keeps its own), and good
 *              clients are served once they go; silent connections that
 *              take them make way for good clients. With the limit
 *              lowered under the running daemon, accept fails: accepting
 *              pauses instead of spinning.
 *
 *   unit       the shipped unit's LimitNOFILE holds what the default
 *              limits need; a soft limit is raised to the hard one.
 *
 * argv[1], if given, names the one part to run. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"
#include "harness.h"
#include "hostile.h"
#include "raw_conn.h"

enum { RECV_MS = 10000, PROBE_MS = 3000 };

static nam_proc nam;

static void start(unsigned long nofile, const char *const *sets) {
  nam.nofile = nofile;
  CHECK_EQ(nam_start_config(&nam, NULL, sets), 0);
  nam_wait_idle(&nam); /* its CPU is the attack's from here */
}

static void stop(void) {
  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
}

static int log_has(const char *text) {
  FILE *f = fopen(nam.log_path, "r");
  char line[2048];
  int found = 0;
  while (f && !found && fgets(line, sizeof line, f))
    found = strstr(line, text) != NULL;
  if (f) fclose(f);
  return found;
}

static int memfd(void) {
  int fd = memfd_create("hostile", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  CHECK(fd >= 0);
  CHECK_EQ(ftruncate(fd, 4096), 0);
  return fd;
}

/* A frame of type with an empty payload, n copies of fd with it. */
static int send_with_fds(int sock, uint8_t type, int fd, size_t n) {
  uint8_t frame[PROTO_HEADER_SIZE] = {0, 0, 0, 0, type};
  int fds[PROTO_MAX_FDS_PER_SEND];
  for (size_t i = 0; i < n; i++) fds[i] = fd;
  return proto_send(sock, frame, sizeof frame, fds, n);
}

/* Read whatever is there without waiting; 0 at the end of the stream. */
static int drain(int sock) {
  char buf[65536];
  for (;;) {
    ssize_t n = recv(sock, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) continue;
    return n == 0 ? 0 : errno == EAGAIN ? 1 : 0;
  }
}

/* A unix connection through its Hello, or -1 (refused, no Welcome within
 * 2 s): never exits, for attackers in their own process. */
static int greeted_unix(void) {
  int fd = hostile_connect(&nam, 0, NULL);
  if (fd < 0) return -1;
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  proto_wbuf w = {0};
  Ember__Hello h = EMBER__HELLO__INIT;
  h.protocol_version = PROTO_VERSION;
  CHECK_EQ(proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_HELLO, &h.base, 0), 0);
  int ok = poll(&p, 1, 2000) == 1 &&
           send(fd, w.data, w.len, MSG_NOSIGNAL) == (ssize_t)w.len;
  proto_wbuf_free(&w);
  proto_reader rd;
  proto_reader_init(&rd, 0);
  proto_frame f;
  int rc = 0;
  p.events = POLLIN;
  while (ok && (rc = proto_reader_next(&rd, &f)) == 0)
    ok = poll(&p, 1, 2000) == 1 && proto_recv(fd, &rd) > 0;
  ok = ok && rc == 1 && f.type == EMBER__MSG_TYPE__MSG_WELCOME;
  proto_reader_free(&rd);
  if (!ok) {
    close(fd);
    return -1;
  }
  return fd;
}

/* ---- unclaimed ------------------------------------------------------ */

enum { N_PINNERS = 16 };

/* 16 clients each pin 60 fds at once (four StatsRequests with 15 each),
 * as many as a NAM that never closes them holds, then add one every
 * 200 ms; each reconnects when the NAM closes it. */
static void pin_fds(void *arg) {
  (void)arg;
  int fd = memfd(), conns[N_PINNERS], sent[N_PINNERS];
  for (int i = 0; i < N_PINNERS; i++) {
    conns[i] = greeted_unix();
    sent[i] = 0;
  }
  for (unsigned round = 0;; round++) {
    for (int i = 0; i < N_PINNERS; i++) {
      size_t n = sent[i] < 60 ? 15 : round % 10 == 0 ? 1 : 0;
      if (conns[i] >= 0 && n &&
          send_with_fds(conns[i], EMBER__MSG_TYPE__MSG_STATS_REQUEST, fd,
                        n) == 0)
        sent[i] += (int)n;
      else if (conns[i] >= 0 && n)
        sent[i] = -1;
      if (conns[i] < 0 || sent[i] < 0 || !drain(conns[i])) {
        if (conns[i] >= 0) close(conns[i]);
        conns[i] = greeted_unix();
        sent[i] = 0;
      }
    }
    usleep(20 * 1000);
  }
}

static void test_unclaimed(void) {
  printf("fds attached to StatsRequests by %d unix clients (RLIMIT_NOFILE "
         "256):\n", N_PINNERS);
  const char *sets[] = {"log_level=info", NULL};
  start(256, sets);
  nam_usage before, after;
  char text[128];
  nam_usage_read(&nam, &before);
  printf("  before: %s\n", nam_usage_text(&before, text, sizeof text));
  pid_t attacker = attack_start(pin_fds, NULL);
  usleep(300 * 1000);
  probe_stats u = {0}, t = {0};
  int most_fds = 0;
  uint64_t end = hostile_now_ms() + HOSTILE_SCALE(3000);
  nam_usage mid;
  nam_usage_read(&nam, &mid);
  while (hostile_now_ms() < end) {
    probe_window(&nam, 200, 20, PROBE_MS, &u, &t);
    nam_usage now;
    nam_usage_read(&nam, &now);
    if (now.fds > most_fds) most_fds = now.fds;
  }
  nam_usage_read(&nam, &after);
  attack_stop(attacker);
  printf("  during: %s; at most %d fds\n",
         nam_usage_text(&after, text, sizeof text), most_fds);
  probe_report("during the attack", &u, &t);
  /* its sockets and at most one message's fds at a time for each client */
  CHECK(most_fds <= before.fds + N_PINNERS * 2 + 16);
  CHECK(after.cpu_s - before.cpu_s < 0.25 * HOSTILE_SCALE(3000) / 1000.0);
  CHECK(after.log_bytes - before.log_bytes <
        log_allowance(&u, &t, HOSTILE_SCALE(3000)));
  probe_check(&u, &t);
  stop();
}

/* ---- bound ---------------------------------------------------------- */

static void test_bound(void) {
  printf("fds waiting for a frame that never completes:\n");
  start(0, NULL);
  nam_usage before, after;
  nam_usage_read(&nam, &before);
  raw_conn r;
  raw_open_unix(&r, nam.sock);
  raw_greet(&r, NULL, RECV_MS);
  int fd = memfd();
  /* the first bytes of a PutBlock header, then one byte at a time, each
   * with 16 fds: the frame never completes */
  uint8_t b = 200;
  int fds[PROTO_MAX_FDS_PER_SEND];
  for (int i = 0; i < PROTO_MAX_FDS_PER_SEND; i++) fds[i] = fd;
  CHECK_EQ(proto_send(r.fd, &b, 1, fds, PROTO_MAX_FDS_PER_SEND), 0);
  b = 0;
  CHECK_EQ(proto_send(r.fd, &b, 1, fds, PROTO_MAX_FDS_PER_SEND), 0);
  raw_expect_error(&r, EMBER_EPROTO, "over max_client_fds (16)", RECV_MS);
  raw_expect_closed(&r, RECV_MS);
  raw_close(&r);
  close(fd);
  /* and they are gone with it */
  for (int i = 0; i < 100; i++) {
    nam_usage_read(&nam, &after);
    if (after.fds <= before.fds) break;
    usleep(20 * 1000);
  }
  printf("  daemon fds: %d before, %d after\n", before.fds, after.fds);
  CHECK(after.fds <= before.fds);
  stop();
}

/* ---- nofile --------------------------------------------------------- */

enum { N_HOLDERS = 80 };

/* Clients through their Hello, as many as the NAM takes; the refused ones
 * try again every 20 ms. */
static void hold_greeted(void *arg) {
  (void)arg;
  int fds[N_HOLDERS];
  for (int i = 0; i < N_HOLDERS; i++) fds[i] = -1;
  for (;;) {
    for (int i = 0; i < N_HOLDERS; i++)
      if (fds[i] < 0) fds[i] = greeted_unix();
    usleep(20 * 1000);
  }
}

/* Silent connections that never say Hello, reopened when dropped. */
static void hold_silent(void *arg) {
  (void)arg;
  struct pollfd p[N_HOLDERS];
  for (int i = 0; i < N_HOLDERS; i++)
    p[i] = (struct pollfd){.fd = hostile_connect(&nam, 0, NULL),
                           .events = POLLIN};
  for (;;) {
    poll(p, N_HOLDERS, 50);
    for (int i = 0; i < N_HOLDERS; i++)
      if (p[i].fd < 0 || p[i].revents) {
        if (p[i].fd >= 0) close(p[i].fd);
        p[i].fd = hostile_connect(&nam, 0, NULL);
        p[i].revents = 0;
        if (p[i].fd < 0) usleep(1000); /* the backlog is full */
      }
  }
}

/* A window of ms with an attacker at work: the daemon's CPU and log stay
 * low (nothing spins), and it is still there. */
static void quiet_window(const char *what, int ms) {
  nam_usage before, after;
  char text[128];
  nam_usage_read(&nam, &before);
  usleep((useconds_t)ms * 1000);
  nam_usage_read(&nam, &after);
  double cpu = after.cpu_s - before.cpu_s;
  long logged = after.log_bytes - before.log_bytes;
  printf("  %s for %d ms: cpu %.2f s, log +%ld bytes (%s)\n", what, ms, cpu,
         logged, nam_usage_text(&after, text, sizeof text));
  CHECK(after.rss_kb > 0); /* alive */
  CHECK(cpu < 0.25 * ms / 1000.0);
  CHECK(logged < 4096 + ms);
}

static void served_after(void) {
  double ms = 0;
  char why[256] = "";
  int served = -1;
  for (int i = 0; i < 50 && served != 0; i++) {
    served = good_client(&nam, 0, PROBE_MS, &ms, why, sizeof why);
    if (served) usleep(100 * 1000);
  }
  printf("  once they left, a good client: %s (%.1f ms)\n",
         served == 0 ? "served" : why, ms);
  CHECK_EQ(served, 0);
}

static void test_nofile(void) {
  printf("limits that do not fit RLIMIT_NOFILE 64:\n");
  const char *sets[] = {"log_level=info", NULL};
  start(64, sets);
  CHECK(log_has("RLIMIT_NOFILE is 64"));
  printf("  warned at start\n");

  /* clients through their Hello take what the NAM leaves its clients */
  pid_t attacker = attack_start(hold_greeted, NULL);
  uint64_t t0 = hostile_now_ms();
  while (!log_has("out of file descriptors") &&
         hostile_now_ms() - t0 < RECV_MS)
    usleep(20 * 1000);
  CHECK(log_has("out of file descriptors"));
  quiet_window("clients hold all the descriptors", HOSTILE_SCALE(2000));
  attack_stop(attacker);
  served_after();

  /* silent connections take them: they make way */
  attacker = attack_start(hold_silent, NULL);
  usleep(500 * 1000);
  nam_usage before, after;
  char text[128];
  nam_usage_read(&nam, &before);
  probe_stats u = {0}, t = {0};
  probe_window(&nam, HOSTILE_SCALE(3000), 20, PROBE_MS, &u, &t);
  nam_usage_read(&nam, &after);
  attack_stop(attacker);
  printf("  silent connections: %s\n",
         nam_usage_text(&after, text, sizeof text));
  probe_report("while silent connections hold the descriptors", &u, &t);
  CHECK(after.log_bytes - before.log_bytes <
        log_allowance(&u, &t, HOSTILE_SCALE(3000)));
  probe_check(&u, &t);
  stop();

  /* the process itself out of descriptors (its limit lowered under it):
   * accepting pauses instead of spinning */
  printf("RLIMIT_NOFILE lowered under a running NAM:\n");
  const char *no_ocl[] = {"log_level=info", "opencl.enabled=false", NULL};
  start(256, no_ocl);
  nam_usage now;
  nam_usage_read(&nam, &now);
  struct rlimit low = {.rlim_cur = (rlim_t)now.fds + 8,
                       .rlim_max = (rlim_t)now.fds + 8};
  CHECK_EQ(prlimit(nam.pid, RLIMIT_NOFILE, &low, NULL), 0);
  attacker = attack_start(hold_greeted, NULL);
  t0 = hostile_now_ms();
  while (!log_has("Too many open files") && hostile_now_ms() - t0 < RECV_MS)
    usleep(20 * 1000);
  CHECK(log_has("Too many open files"));
  quiet_window("accept failing with EMFILE", HOSTILE_SCALE(2000));
  attack_stop(attacker);
  served_after();
  stop();
}

/* ---- unit ----------------------------------------------------------- */

/* The shipped unit's LimitNOFILE holds what the default limits need. */
static void test_unit(void) {
  FILE *f = fopen(EMBER_SOURCE_DIR "/deploy/systemd/ember-nam.service.in", "r");
  CHECK(f != NULL);
  char line[256];
  unsigned long limit = 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "LimitNOFILE=", 12) == 0) limit = strtoul(line + 12, NULL, 10);
  fclose(f);
  printf("the unit's LimitNOFILE: %lu\n", limit);
  CHECK(limit > 0);
  start(limit, NULL);
  CHECK(log_has("room for the"));
  CHECK(!log_has("RLIMIT_NOFILE is"));
  printf("  holds what the default limits need\n");
  stop();
  /* a soft limit under the hard one is raised to it */
  nam.nofile = 0;
  struct rlimit mine, low;
  CHECK_EQ(getrlimit(RLIMIT_NOFILE, &mine), 0);
  low = mine;
  low.rlim_cur = 512 < mine.rlim_max ? 512 : mine.rlim_max;
  CHECK_EQ(setrlimit(RLIMIT_NOFILE, &low), 0); /* the daemon inherits it */
  /* no OpenCL: a SIGTERM that came while pocl's threads were still busy
   * with calibration was never handled under TSan (the test hung in
   * nam_stop once in three CI runs) */
  const char *no_ocl[] = {"opencl.enabled=false", NULL};
  CHECK_EQ(nam_start_config(&nam, NULL, no_ocl), 0);
  nam_wait_idle(&nam);
  CHECK_EQ(setrlimit(RLIMIT_NOFILE, &mine), 0);
  struct rlimit its;
  CHECK_EQ(prlimit(nam.pid, RLIMIT_NOFILE, NULL, &its), 0);
  printf("  soft limit %llu at start, %llu in the daemon (hard %llu)\n",
         (unsigned long long)low.rlim_cur, (unsigned long long)its.rlim_cur,
         (unsigned long long)its.rlim_max);
  CHECK(its.rlim_cur == its.rlim_max);
  stop();
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (test_part(argc, argv, "unit")) test_unit();
  if (test_part(argc, argv, "unclaimed")) test_unclaimed();
  if (test_part(argc, argv, "bound")) test_bound();
  if (test_part(argc, argv, "nofile")) test_nofile();
  return 0;
}
