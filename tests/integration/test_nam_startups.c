/* test_nam_startups - connections that never say Hello, at ember-nam's
 * default limits (max_clients 256, handshake_timeout 10 s, max_startups
 * 64:30:128):
 *
 *   mixed     150 unix and 150 TCP connections (from 127.0.0.2-11; as
 *             another user on the unix socket when the test runs as root)
 *             that never send Hello, each reopened as soon as it is
 *             dropped: good clients (unix, and TCP from 127.0.0.1) are
 *             served at once every time, and clients through their Hello
 *             before the attack keep their connections.
 *   tcp       300 silent TCP connections: likewise.
 *   per_peer  connections through their Hello from one address (and, as
 *             root, one user) past max_clients_per_address
 *             (max_clients_per_uid) are refused with an Error naming the
 *             limit; others are still served.
 *
 * The daemon's RSS, descriptors and log stay bounded during each attack,
 * and its CPU is reported. argv[1], if given, names the one part to run;
 * EMBER_ATTACK_MS=60000 makes each attack last a minute. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frame.h"
#include "harness.h"
#include "hostile.h"
#include "raw_conn.h"

enum { RECV_MS = 10000, PROBE_MS = 3000, N_ADDR = 10 };
#define NOBODY 65534

static nam_proc nam;

static const char *attacker_addr(int i) {
  static char addr[N_ADDR][16];
  snprintf(addr[i % N_ADDR], sizeof addr[0], "127.0.0.%d", 2 + i % N_ADDR);
  return addr[i % N_ADDR];
}

/* The unix socket, reachable by another user: the attackers run as one
 * when the test runs as root. */
static int as_other_user(void) { return geteuid() == 0; }

static void start(void) {
  const char *sets[] = {"log_level=info", "socket_mode=0666", NULL};
  CHECK_EQ(nam_start(&nam, sets), 0);
  CHECK_EQ(chmod(nam.dir, 0711), 0);
}

static void stop(void) {
  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
}

static void drop_privileges(void) {
  if (as_other_user() && (setgid(NOBODY) != 0 || setuid(NOBODY) != 0)) {
    perror("setuid");
    _exit(1);
  }
}

typedef struct silent_attack {
  int n_unix, n_tcp;
} silent_attack;

/* n_unix + n_tcp connections that never say Hello, each reopened as soon
 * as the NAM drops it (the attacker notices within 20 ms). */
static void silent(void *arg) {
  const silent_attack *a = arg;
  int n = a->n_unix + a->n_tcp;
  struct pollfd *p = calloc((size_t)n, sizeof *p);
  CHECK(p != NULL);
  if (a->n_unix) drop_privileges(); /* its TCP side needs no privilege */
  for (int i = 0; i < n; i++)
    p[i] = (struct pollfd){.fd = -1, .events = POLLIN};
  for (;;) {
    for (int i = 0; i < n; i++)
      if (p[i].fd < 0 || p[i].revents) {
        if (p[i].fd >= 0) close(p[i].fd);
        int tcp = i >= a->n_unix;
        p[i].fd = hostile_connect(&nam, tcp, tcp ? attacker_addr(i) : NULL);
        p[i].revents = 0;
      }
    poll(p, (nfds_t)n, 20);
  }
}

/* Clients through their Hello before the attack: still served after it. */
enum { N_KEPT = 8 };

static void greet_kept(raw_conn *kept) {
  for (int i = 0; i < N_KEPT; i++) {
    if (i % 2)
      raw_open_tcp(&kept[i], nam.port);
    else
      raw_open_unix(&kept[i], nam.sock);
    raw_greet(&kept[i], NULL, RECV_MS);
  }
}

static void check_kept(raw_conn *kept) {
  for (int i = 0; i < N_KEPT; i++) {
    Ember__StatsRequest sr = EMBER__STATS_REQUEST__INIT;
    raw_send(&kept[i], EMBER__MSG_TYPE__MSG_STATS_REQUEST, &sr.base, -1);
    uint8_t type;
    ProtobufCMessage *m = raw_recv(&kept[i], &type, RECV_MS);
    CHECK(m != NULL);
    CHECK_EQ(type, EMBER__MSG_TYPE__MSG_STATS);
    protobuf_c_message_free_unpacked(m, NULL);
    raw_close(&kept[i]);
  }
}

static void attack(const char *what, silent_attack a) {
  printf("%s: %d unix (%s) and %d TCP connections that never say Hello, "
         "reopened when dropped:\n", what, a.n_unix,
         as_other_user() ? "uid 65534" : "the test's uid", a.n_tcp);
  start();
  raw_conn kept[N_KEPT];
  greet_kept(kept);
  nam_usage before, after;
  char text[128];
  nam_usage_read(&nam, &before);
  printf("  before: %s\n", nam_usage_text(&before, text, sizeof text));
  pid_t attacker = attack_start(silent, &a);
  usleep(500 * 1000); /* they hold what they can */
  nam_usage mid;
  nam_usage_read(&nam, &mid);
  probe_stats u = {0}, t = {0};
  int window = hostile_window_ms(4000);
  probe_window(&nam, window, 20, PROBE_MS, &u, &t);
  nam_usage_read(&nam, &after);
  attack_stop(attacker);
  printf("  during %d ms: %s; cpu %.2f s of it\n", window,
         nam_usage_text(&after, text, sizeof text), after.cpu_s - mid.cpu_s);
  probe_report("during the attack", &u, &t);
  check_kept(kept);
  printf("  the %d clients through their Hello before it kept their "
         "connections\n", N_KEPT);
  CHECK(after.fds <= before.fds + 256 + 16);
  CHECK_RSS(after.rss_kb - before.rss_kb < 64 * 1024);
  CHECK(after.log_bytes - mid.log_bytes < log_allowance(&u, &t, window));
  probe_check(&u, &t);
  stop();
}

/* ---- per_peer ----------------------------------------------------------- */

/* Hello from n connections; returns how many were welcomed and, in why,
 * the text of the first refusal. */
static int greet_many(int n, int tcp, const char *src, int *fds, char *why,
                      size_t why_len) {
  int welcomed = 0;
  why[0] = '\0';
  for (int i = 0; i < n; i++) {
    raw_conn r;
    if (tcp) {
      r.fd = hostile_connect(&nam, 1, src);
      CHECK(r.fd >= 0);
      struct pollfd p = {.fd = r.fd, .events = POLLOUT};
      CHECK_EQ(poll(&p, 1, RECV_MS), 1);
      proto_reader_init(&r.rd, 0);
      r.challenged = 0;
    } else {
      raw_open_unix(&r, nam.sock);
    }
    Ember__Error *e = raw_hello(&r, PROTO_VERSION, NULL, RECV_MS);
    proto_reader_free(&r.rd);
    if (!e) {
      fds[welcomed++] = r.fd;
      continue;
    }
    if (!why[0]) snprintf(why, why_len, "%s", e->message);
    protobuf_c_message_free_unpacked(&e->base, NULL);
    close(r.fd);
  }
  return welcomed;
}

static void test_per_peer(void) {
  printf("clients through their Hello from one peer:\n");
  start();
  int fds[200];
  char why[256];
  int got = greet_many(100, 1, "127.0.0.2", fds, why, sizeof why);
  printf("  127.0.0.2: %d of 100 welcomed; refused: %s\n", got, why);
  CHECK_EQ(got, 64);
  CHECK(strstr(why, "too many clients from 127.0.0.2 "
                    "(max_clients_per_address 64)") != NULL);
  probe_stats u = {0}, t = {0};
  probe_window(&nam, 500, 20, PROBE_MS, &u, &t);
  probe_report("from 127.0.0.1 and the unix socket meanwhile", &u, &t);
  probe_check(&u, &t);
  for (int i = 0; i < got; i++) close(fds[i]);
  if (as_other_user()) {
    int sv[2];
    CHECK_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
      drop_privileges();
      got = greet_many(150, 0, NULL, fds, why, sizeof why);
      char line[320];
      int n = snprintf(line, sizeof line, "%d %s", got, why);
      (void)!write(sv[1], line, (size_t)n + 1);
      pause(); /* holding them */
      _exit(0);
    }
    char line[320] = "";
    struct pollfd p = {.fd = sv[0], .events = POLLIN};
    CHECK_EQ(poll(&p, 1, 60000), 1);
    CHECK(read(sv[0], line, sizeof line - 1) > 0);
    printf("  uid 65534: %s\n", line);
    CHECK_EQ(atoi(line), 128);
    CHECK(strstr(line, "too many clients from uid 65534 "
                       "(max_clients_per_uid 128)") != NULL);
    probe_stats u2 = {0}, t2 = {0};
    probe_window(&nam, 500, 20, PROBE_MS, &u2, &t2);
    probe_report("meanwhile (unix: uid 0)", &u2, &t2);
    attack_stop(pid);
    close(sv[0]);
    close(sv[1]);
    probe_check(&u2, &t2);
  } else {
    printf("  (not root: max_clients_per_uid is not tried)\n");
  }
  stop();
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (test_part(argc, argv, "mixed"))
    attack("mixed", (silent_attack){.n_unix = 150, .n_tcp = 150});
  if (test_part(argc, argv, "tcp"))
    attack("tcp", (silent_attack){.n_unix = 0, .n_tcp = 300});
  if (test_part(argc, argv, "per_peer")) test_per_peer();
  return 0;
}
