/* test_nam_slowloris - clients that hold connections without using them.
 * With short timeouts: a connection that never says Hello, one that
 * trickles a frame a byte at a time and one that sits idle are each sent an
 * Error saying why and closed; a peer's reset is logged as such. With a
 * small max_clients_tcp: clients through their Hello fill the TCP side, a
 * further one is refused with an Error that says so, and a unix-socket
 * client is still served; silent TCP connections that fill it make way
 * for a new one, the oldest first. ember_nam_connections_dropped_total
 * and ember_nam_connections_refused_total count each by its limit.
 *
 * As a bench (nothing checked): test_nam_slowloris bench N holds N silent
 * TCP connections, reconnecting as the NAM closes them, and prints a unix
 * client's round-trip latency meanwhile (exit status 1: it was locked out). */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "harness.h"
#include "raw_conn.h"

enum { RECV_MS = 10000 };

static nam_proc nam;
static int metrics_port;

/* The value of the sample named exactly name in the NAM's /metrics. */
static long long metric(const char *name) {
  char *text = NULL;
  long long v = -1;
  CHECK_EQ(nam_http_get(metrics_port, "/metrics", &text), 200);
  size_t n = strlen(name);
  for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p)
    if (strncmp(p, name, n) == 0 && p[n] == ' ') v = atoll(p + n + 1);
  free(text);
  return v;
}

/* metrics_listen=127.0.0.1:PORT on a free port, into buf. */
static const char *metrics_set(char *buf, size_t len) {
  metrics_port = free_tcp_port();
  CHECK(metrics_port > 0);
  snprintf(buf, len, "metrics_listen=127.0.0.1:%d", metrics_port);
  return buf;
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int log_has(const char *text) {
  FILE *f = fopen(nam.log_path, "r");
  char line[1024];
  int found = 0;
  while (f && !found && fgets(line, sizeof line, f))
    found = strstr(line, text) != NULL;
  if (f) fclose(f);
  return found;
}

static void test_no_hello(void) {
  printf("connections that never say Hello (handshake_timeout 1s):\n");
  raw_conn t, u;
  raw_open_tcp(&t, nam.port);
  raw_open_unix(&u, nam.sock);
  uint64_t t0 = now_ms();
  raw_expect_error(&t, EMBER_ETIMEDOUT, "no Hello within handshake_timeout",
                   RECV_MS);
  raw_expect_closed(&t, RECV_MS);
  raw_expect_error(&u, EMBER_ETIMEDOUT, "no Hello within handshake_timeout",
                   RECV_MS);
  raw_expect_closed(&u, RECV_MS);
  uint64_t took = now_ms() - t0;
  printf("  tcp and unix closed after %llu ms\n", (unsigned long long)took);
  CHECK(took >= 900); /* not before its time */
  CHECK_EQ(metric("ember_nam_connections_dropped_total"
                  "{limit=\"handshake_timeout\"}"), 2);
  raw_close(&t);
  raw_close(&u);
}

static void test_trickle(void) {
  printf("a frame trickled a byte every 300 ms (frame_timeout 1s):\n");
  raw_conn r;
  raw_open_tcp(&r, nam.port);
  raw_greet(&r, NULL, RECV_MS);
  /* a Stats request with 20 bytes of padding: 25 bytes, 7.5 s at this rate */
  uint8_t frame[25] = {20, 0, 0, 0, EMBER__MSG_TYPE__MSG_STATS_REQUEST};
  size_t sent = 0;
  struct pollfd p = {.fd = r.fd, .events = POLLIN};
  while (sent < sizeof frame && poll(&p, 1, 300) == 0)
    if (send(r.fd, frame + sent, 1, MSG_NOSIGNAL) == 1) sent++;
  CHECK(sent < sizeof frame);
  raw_expect_error(&r, EMBER_ETIMEDOUT, "not complete within frame_timeout",
                   RECV_MS);
  raw_expect_closed(&r, RECV_MS);
  printf("  closed after %zu of its %zu bytes\n", sent, sizeof frame);
  CHECK_EQ(metric("ember_nam_connections_dropped_total"
                  "{limit=\"frame_timeout\"}"), 1);
  raw_close(&r);
}

static void test_idle(void) {
  printf("a client idle with nothing in flight (idle_timeout 2s):\n");
  raw_conn r;
  raw_open_unix(&r, nam.sock);
  raw_greet(&r, NULL, RECV_MS);
  raw_expect_error(&r, EMBER_ETIMEDOUT, "idle for idle_timeout", RECV_MS);
  raw_expect_closed(&r, RECV_MS);
  raw_close(&r);
  CHECK_EQ(metric("ember_nam_connections_dropped_total"
                  "{limit=\"idle_timeout\"}"), 1);
}

static void test_reset(void) {
  printf("a peer that resets its connection:\n");
  raw_conn r;
  raw_open_tcp(&r, nam.port);
  raw_greet(&r, NULL, RECV_MS);
  struct linger lg = {.l_onoff = 1, .l_linger = 0}; /* close sends RST */
  CHECK_EQ(setsockopt(r.fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg), 0);
  raw_close(&r);
  uint64_t t0 = now_ms();
  while (!log_has("disconnected (Connection reset by peer)") &&
         now_ms() - t0 < RECV_MS)
    usleep(20 * 1000);
  CHECK(log_has("disconnected (Connection reset by peer)"));
  CHECK(!log_has("Bad file descriptor") && !log_has("bad file descriptor"));
  printf("  logged as a reset\n");
}

static void unix_client_served(void) {
  pair_set ps;
  CHECK_EQ(pairs_load_dna(&ps, 20), 0);
  ember_sw_result *want = pairs_reference_default(&ps);
  ember_client *c;
  ember_options opts = {.client_name = "local", .no_fallback = 1};
  CHECK_EQ(ember_connect(nam.unix_addr, &opts, &c), 0);
  ember_sw_params p;
  ember_sw_params_default(&p);
  ember_sw_result *got = calloc(ps.n, sizeof *got);
  ember_sw_report rep = {.size = sizeof rep};
  CHECK_EQ(ember_sw_align(c, &p, ps.queries, ps.refs, ps.n, got, &rep, NULL,
                          NULL), 0);
  CHECK_EQ(results_compare(got, want, ps.n, "unix client"), ps.n);
  CHECK_EQ(rep.tasks_fallback, 0);
  ember_close(c);
  free(got);
  free(want);
  pairs_free(&ps);
}

static void test_tcp_full(void) {
  printf("max_clients_tcp TCP clients through their Hello:\n");
  raw_conn held[8];
  for (int i = 0; i < 8; i++) {
    raw_open_tcp(&held[i], nam.port);
    raw_greet(&held[i], NULL, RECV_MS);
  }
  raw_conn extra;
  raw_open_tcp(&extra, nam.port);
  raw_expect_error(&extra, EMBER_EBUSY, "too many clients on tcp listener (8)",
                   RECV_MS);
  raw_expect_closed(&extra, RECV_MS);
  raw_close(&extra);
  CHECK_EQ(metric("ember_nam_connections_refused_total"
                  "{limit=\"max_clients_tcp\"}"), 1);
  unix_client_served();
  printf("  a unix-socket client is served meanwhile\n");
  /* a slot that comes free is taken again */
  raw_close(&held[0]);
  int welcomed = 0;
  for (int tries = 0; tries < 50 && !welcomed; tries++) {
    raw_open_tcp(&extra, nam.port);
    Ember__Error *e = raw_hello(&extra, PROTO_VERSION, NULL, RECV_MS);
    welcomed = e == NULL;
    if (e) protobuf_c_message_free_unpacked(&e->base, NULL);
    if (!welcomed) raw_close(&extra);
    if (!welcomed) usleep(100 * 1000);
  }
  CHECK(welcomed);
  held[0] = extra;
  printf("  a TCP client is welcomed once one of them closed\n");
  for (int i = 0; i < 8; i++) raw_close(&held[i]);

  printf("max_clients_tcp silent TCP connections:\n");
  raw_conn silent[8];
  for (int i = 0; i < 8; i++) raw_open_tcp(&silent[i], nam.port);
  usleep(200 * 1000); /* all taken */
  raw_open_tcp(&extra, nam.port);
  raw_greet(&extra, NULL, RECV_MS);
  /* the oldest of them made way, told why */
  raw_expect_error(&silent[0], EMBER_EBUSY, "makes way", RECV_MS);
  raw_expect_closed(&silent[0], RECV_MS);
  CHECK_EQ(metric("ember_nam_connections_dropped_total"
                  "{limit=\"max_startups\"}"), 1);
  printf("  a new client is welcomed: the oldest silent one made way\n");
  raw_close(&extra);
  for (int i = 0; i < 8; i++) raw_close(&silent[i]);
}

static int open_silent(void) {
  raw_conn r;
  raw_open_tcp(&r, nam.port);
  proto_reader_free(&r.rd);
  return r.fd;
}

/* bench N: round trips of a unix client (Stats) while N silent TCP
 * connections are held open at the default limits, each reopened as soon
 * as the NAM closes or refuses it. */
static int bench(int n) {
  CHECK_EQ(nam_start(&nam, NULL), 0);
  struct pollfd *fds = calloc((size_t)n, sizeof *fds);
  for (int i = 0; i < n; i++)
    fds[i] = (struct pollfd){.fd = open_silent(), .events = POLLIN};
  usleep(500 * 1000); /* the NAM has taken or refused them all */
  raw_conn u;
  raw_open_unix(&u, nam.sock);
  Ember__Hello h = EMBER__HELLO__INIT;
  h.protocol_version = PROTO_VERSION;
  raw_send(&u, EMBER__MSG_TYPE__MSG_HELLO, &h.base, -1);
  uint8_t type;
  ProtobufCMessage *m = raw_recv(&u, &type, RECV_MS);
  if (!m || type != EMBER__MSG_TYPE__MSG_WELCOME) {
    printf("%d silent TCP connections: the unix client is locked out (%s)\n",
           n, m ? "an Error" : "closed without a word");
    return 1;
  }
  protobuf_c_message_free_unpacked(m, NULL);
  printf("%d silent TCP connections; a unix client greeted\n", n);
  uint64_t worst = 0, sum = 0, count = 0, reopened = 0, start = now_ms();
  while (now_ms() - start < 15000) {
    if (poll(fds, (nfds_t)n, 0) > 0)
      for (int i = 0; i < n; i++)
        if (fds[i].revents) {
          close(fds[i].fd);
          fds[i].fd = open_silent();
          reopened++;
        }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    Ember__StatsRequest sr = EMBER__STATS_REQUEST__INIT;
    raw_send(&u, EMBER__MSG_TYPE__MSG_STATS_REQUEST, &sr.base, -1);
    m = raw_recv(&u, &type, RECV_MS);
    CHECK(m && type == EMBER__MSG_TYPE__MSG_STATS);
    protobuf_c_message_free_unpacked(m, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    uint64_t us = (uint64_t)(((int64_t)(b.tv_sec - a.tv_sec) * 1000000000 +
                              (b.tv_nsec - a.tv_nsec)) / 1000);
    if (us > worst) worst = us;
    sum += us;
    count++;
    usleep(10 * 1000);
  }
  printf("unix client over 15 s: %llu round trips, mean %llu us, worst %llu "
         "us; silent connections closed or refused and reopened: %llu\n",
         (unsigned long long)count, (unsigned long long)(sum / count),
         (unsigned long long)worst, (unsigned long long)reopened);
  for (int i = 0; i < n; i++) close(fds[i].fd);
  free(fds);
  raw_close(&u);
  nam_stop(&nam);
  nam_cleanup(&nam);
  return 0;
}

/* argv[1], if given, names the one part to run (no_hello, trickle, idle,
 * reset, tcp_full): to see each fail alone against an older NAM. */
int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "bench") == 0) return bench(atoi(argv[2]));
  char metrics[64];
  const char *timeouts[] = {"handshake_timeout=1s", "frame_timeout=1s",
                            "idle_timeout=2s",
                            metrics_set(metrics, sizeof metrics), NULL};
  CHECK_EQ(nam_start(&nam, timeouts), 0);
  if (test_part(argc, argv, "no_hello")) test_no_hello();
  if (test_part(argc, argv, "trickle")) test_trickle();
  if (test_part(argc, argv, "idle")) test_idle();
  if (test_part(argc, argv, "reset")) test_reset();
  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);

  if (test_part(argc, argv, "tcp_full")) {
    const char *small[] = {"max_clients_tcp=8",
                           metrics_set(metrics, sizeof metrics), NULL};
    CHECK_EQ(nam_start(&nam, small), 0);
    test_tcp_full();
    CHECK_EQ(nam_stop(&nam), 0);
    nam_cleanup(&nam);
  }
  return 0;
}
