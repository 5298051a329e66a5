/*
 * test_gam_admin_slow - slow clients must not stall ember-gam's admin API:
 * with 100 connections that sent half a request (from 127.0.0.2, another
 * client address), GET /healthz from 127.0.0.1 still answers 200 at once
 * (it used to wait for the idle timeout to free a slot); one address gets
 * at most admin_max_connections_per_ip (the rest are closed), and a
 * half-sent connection is closed after admin_timeout. Then (issue 25)
 * 300 half-sent connections from 10 addresses, reopened as they are
 * closed, over a sustained window: /healthz from 127.0.0.1 answers 200 at
 * once every time (with 32 per address, 256 in all, they used to fill
 * every slot and /healthz waited 4 s in the listen backlog).
 *
 *   test_gam_admin_slow [SECONDS]   the window (default 3; 1.5 under a
 *                                   sanitizer)
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "gam_harness.h"
#include "harness.h"

#define SLOW 100
#define HEALTHZ_BOUND_MS 3000  /* generous: unloaded it takes ~1 ms */
#define SPREAD 300             /* half-sent, from SPREAD_ADDRESSES */
#define SPREAD_ADDRESSES 10
#ifdef EMBER_SANITIZED
#define WINDOW_S 1.5
#else
#define WINDOW_S 3.0
#endif
#define SERVED_BOUND_MS 2000   /* the backlog wait was admin_timeout-long */

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* Connect from `from` to 127.0.0.1:port and send a request without its
 * final empty line; the fd, or -1. The connect does not wait past 200 ms:
 * a server that stopped accepting leaves it pending in the backlog, which
 * is what a flood of slow clients does to it. */
static int half_sent(const char *from, int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  struct sockaddr_in src = {.sin_family = AF_INET};
  struct sockaddr_in dst = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  inet_pton(AF_INET, from, &src.sin_addr);
  if (fd < 0 || bind(fd, (struct sockaddr *)&src, sizeof src) != 0 ||
      (connect(fd, (struct sockaddr *)&dst, sizeof dst) != 0 &&
       errno != EINPROGRESS)) {
    fprintf(stderr, "half_sent from %s: %s\n", from, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  struct pollfd pf = {.fd = fd, .events = POLLOUT};
  if (poll(&pf, 1, 200) == 1) {
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
    if (write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) {
      close(fd);
      return -1;
    }
  }
  return fd;
}

/* Has the server closed fd (EOF or reset) within wait_ms? */
static int closed_within(int fd, int wait_ms) {
  struct pollfd pf = {.fd = fd, .events = POLLIN};
  if (poll(&pf, 1, wait_ms) != 1) return 0;
  char c;
  return read(fd, &c, 1) <= 0;
}

/* GET /healthz with a bound: its status (0 if none came in time) and the
 * time it took in *ms. */
static long healthz(const gam_proc *g, double *ms) {
  char url[128];
  snprintf(url, sizeof url, "%s/healthz", g->admin_url);
  CURL *c = curl_easy_init();
  CHECK(c != NULL);
  FILE *sink = fopen("/dev/null", "w");
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, sink);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)HEALTHZ_BOUND_MS);
  long status = 0;
  double t0 = now_ms();
  if (curl_easy_perform(c) == CURLE_OK)
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  *ms = now_ms() - t0;
  curl_easy_cleanup(c);
  fclose(sink);
  return status;
}

/* 300 half-sent connections from 10 addresses, each reopened when the
 * GAM closes it, for window_s; /healthz from 127.0.0.1 every 100 ms. */
static void spread_out(const gam_proc *g, double window_s) {
  char from[SPREAD_ADDRESSES][16];
  int fds[SPREAD];
  for (int a = 0; a < SPREAD_ADDRESSES; a++)
    snprintf(from[a], sizeof from[a], "127.0.0.%d", a + 2);
  for (int i = 0; i < SPREAD; i++)
    CHECK((fds[i] = half_sent(from[i % SPREAD_ADDRESSES], g->admin_port)) >= 0);
  gam_figures before, after;
  CHECK_EQ(gam_figures_get(g, &before), 0);
  unsigned probes = 0, served = 0, reopened = 0;
  double worst = 0, sum = 0, t0 = now_ms();
  while (now_ms() - t0 < window_s * 1e3) {
    for (int i = 0; i < SPREAD; i++)
      if (closed_within(fds[i], 0)) {
        close(fds[i]);
        CHECK((fds[i] = half_sent(from[i % SPREAD_ADDRESSES],
                                  g->admin_port)) >= 0);
        reopened++;
      }
    double ms;
    long status = healthz(g, &ms);
    probes++;
    if (status == 200 && ms < SERVED_BOUND_MS) served++;
    sum += ms;
    if (ms > worst) worst = ms;
    usleep(100 * 1000);
  }
  CHECK_EQ(gam_figures_get(g, &after), 0);
  double span = (now_ms() - t0) / 1e3;
  printf("%d half-sent connections from %d addresses for %.1f s (%u "
         "reopened): /healthz 200 in time %u of %u, mean %.1f ms, worst "
         "%.1f ms; GAM sockets %u -> %u, RSS %.1f -> %.1f MiB, CPU %.2f s\n",
         SPREAD, SPREAD_ADDRESSES, span, reopened, served, probes,
         sum / probes, worst, before.sockets, after.sockets, before.rss_mib,
         after.rss_mib, after.cpu_s - before.cpu_s);
  CHECK_EQ(served, probes);
  for (int i = 0; i < SPREAD; i++) close(fds[i]);
}

int main(int argc, char **argv) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
  double window_s = argc > 1 ? atof(argv[1]) : WINDOW_S;
  CHECK(window_s > 0);
  gam_proc g;
  CHECK_EQ(gam_start(&g, NULL), 0);

  int fds[SLOW];
  for (int i = 0; i < SLOW; i++) CHECK((fds[i] = half_sent("127.0.0.2", g.admin_port)) >= 0);
  double ms;
  long status = healthz(&g, &ms);
  printf("/healthz with %d half-sent connections open: %ld in %.1f ms\n",
         SLOW, status, ms);
  CHECK_EQ(status, 200);
  CHECK(ms < HEALTHZ_BOUND_MS);

  /* the default per-address limit holds: the last ones were closed */
  CHECK(closed_within(fds[SLOW - 1], 2000));
  for (int i = 0; i < SLOW; i++) close(fds[i]);
  spread_out(&g, window_s);
  CHECK_EQ(gam_stop(&g), 0);
  gam_cleanup(&g);

  /* a half-sent request is dropped after admin_timeout */
  const char *sets[] = {"admin_timeout=1s", NULL};
  CHECK_EQ(gam_start(&g, sets), 0);
  int fd = half_sent("127.0.0.1", g.admin_port);
  CHECK(fd >= 0);
  CHECK(closed_within(fd, 10000));
  close(fd);
  CHECK_EQ(gam_stop(&g), 0);
  gam_cleanup(&g);
  curl_global_cleanup();
  printf("ok\n");
  return 0;
}
