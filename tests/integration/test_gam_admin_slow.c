/*
 * test_gam_admin_slow - slow clients must not stall ember-gam's admin API:
 * with 100 connections that sent half a request (from 127.0.0.2, another
 * client address), GET /healthz from 127.0.0.1 still answers 200 at once
 * (it used to wait for the idle timeout to free a slot); one address gets
 * at most admin_max_connections_per_ip (the rest are closed), and a
 * half-sent connection is closed after admin_timeout.
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

int main(void) {
  curl_global_init(CURL_GLOBAL_DEFAULT);
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

  /* the default per-address limit (32) holds: the last ones were closed */
  CHECK(closed_within(fds[SLOW - 1], 2000));
  for (int i = 0; i < SLOW; i++) close(fds[i]);
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
