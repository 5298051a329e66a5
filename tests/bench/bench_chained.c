/*
 * bench_chained - two tasks chained on a platform through an out block,
 * against the same data round-tripped through the client.
 *
 * A real ember-nam is started with the test accelerator tally loaded from
 * its plugin directory (tests/accel; tally.h: out[i] = 3 * in[i] + k) and
 * fpga-emu boards that carry it. For each platform (cpu, fpga-emu), each
 * transport (unix socket, TCP loopback) and each block size, it runs PAIRS
 * pairs of tasks in two ways:
 *
 *   chained     task 1: X -> out A; task 2: A -> out B. A stays on the
 *               platform that made it (ABI v2 out blocks): its bytes never
 *               cross the socket.
 *   round trip  task 1: X -> out A; A read back (ember_block_read), put
 *               again as a new input block A' (ember_block_create);
 *               task 2: A' -> out B.
 *
 * The input X is put once per size, before the timing, and B is never
 * read: the figures are what the intermediate costs. Each pair waits for
 * task 1 before submitting task 2 (an out block is an input only once its
 * maker completed). Task 2's result (the sum of B's values) is checked
 * against the reference for every pair.
 *
 * Bytes over the socket are counted in this process by wrapping the
 * sendmsg/recvmsg calls libember makes (-Wl,--wrap; stream sockets only):
 * frame headers, messages and inline block bytes, both directions. Over
 * the unix socket libember hands a new block to the NAM as a memfd (its fd
 * passed with SCM_RIGHTS, the bytes shared, not sent): those bytes are
 * printed apart, as "memfd". Times are wall-clock per pair, median and p90.
 *
 * Usage: bench_chained [PAIRS (20)] [SIZES in KiB, comma-separated
 *        (64,1024,16384)] [PLATFORMS (cpu,fpga-emu)]
 * Prints figures only; it fails (exit 1) on a wrong result or an error,
 * never on a time.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "../integration/harness.h"

/* ------------------------------------------------------------------------ */
/* Bytes over the client's sockets                                          */

static atomic_uint_fast64_t sock_sent, sock_received, fds_passed;

ssize_t __real_sendmsg(int fd, const struct msghdr *msg, int flags);
ssize_t __real_recvmsg(int fd, struct msghdr *msg, int flags);

static int is_stream(int fd) {
  int type = 0;
  socklen_t len = sizeof type;
  return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
         type == SOCK_STREAM;
}

static unsigned fds_in(const struct msghdr *msg) {
  unsigned n = 0;
  if (!msg->msg_control) return 0;
  for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)msg); c;
       c = CMSG_NXTHDR((struct msghdr *)msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
      n += (unsigned)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
  return n;
}

ssize_t __wrap_sendmsg(int fd, const struct msghdr *msg, int flags);
ssize_t __wrap_sendmsg(int fd, const struct msghdr *msg, int flags) {
  ssize_t n = __real_sendmsg(fd, msg, flags);
  if (n > 0 && is_stream(fd)) {
    atomic_fetch_add(&sock_sent, (uint64_t)n);
    atomic_fetch_add(&fds_passed, fds_in(msg));
  }
  return n;
}

ssize_t __wrap_recvmsg(int fd, struct msghdr *msg, int flags);
ssize_t __wrap_recvmsg(int fd, struct msghdr *msg, int flags) {
  ssize_t n = __real_recvmsg(fd, msg, flags);
  if (n > 0 && is_stream(fd)) atomic_fetch_add(&sock_received, (uint64_t)n);
  return n;
}

/* ------------------------------------------------------------------------ */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void die(const char *what, int rc) {
  fprintf(stderr, "bench_chained: %s: %s (%s)\n", what, ember_strerror(rc),
          ember_last_error());
  exit(1);
}

/* tally without state (tally.h): each value v becomes 3 * v + k */
static uint64_t tally_ref(uint64_t v, uint64_t k) { return 3 * v + k; }

#define K1 7u  /* task 1's k */
#define K2 11u /* task 2's k */

typedef struct sample {
  double *ns;                  /* per pair */
  uint64_t sent, received, memfd, fds;
} sample;

typedef struct size_case {
  size_t bytes;
  uint64_t want;               /* task 2's result: the sum of B */
} size_case;

static int by_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double quantile(double *v, size_t n, double q) {
  qsort(v, n, sizeof *v, by_double);
  size_t i = (size_t)(q * (double)(n - 1) + 0.5);
  return v[i < n ? i : n - 1];
}

/* Submit tally with k on in, making one out block; wait; check status. */
static ember_block *tally(ember_client *c, const char *platform,
                          ember_block *in, uint64_t k, uint64_t *sum) {
  uint8_t params[8];
  memcpy(params, &k, sizeof params); /* little-endian hosts only (tally.h) */
  ember_block *out = NULL;
  ember_submit_options o = {.platform = platform, .outputs = &out,
                            .n_outputs = 1};
  ember_task *t = NULL;
  int rc = ember_run(c, "tally", params, sizeof params, &in, 1, &o, &t);
  if (rc == 0) rc = ember_task_status(t);
  if (rc) {
    fprintf(stderr, "bench_chained: tally on %s: %s: %s\n", platform,
            ember_strerror(rc), t ? ember_task_message(t) : "");
    exit(1);
  }
  size_t len = 0;
  const void *res = ember_task_output(t, &len);
  if (len != 8) {
    fprintf(stderr, "bench_chained: tally result of %zu bytes\n", len);
    exit(1);
  }
  memcpy(sum, res, 8);
  ember_task_free(t);
  return out;
}

/* One pair, chained or round-tripped; returns its wall time. */
static uint64_t pair(ember_client *c, const char *platform, ember_block *x,
                     int round_trip, const size_case *sc) {
  uint64_t sum;
  uint64_t t0 = now_ns();
  ember_block *a = tally(c, platform, x, K1, &sum);
  ember_block *a2 = NULL, *in2 = a;
  if (round_trip) {
    void *data = NULL;
    size_t size = 0;
    int rc = ember_block_read(a, &data, &size, NULL);
    if (rc) die("ember_block_read", rc);
    if (size != sc->bytes) {
      fprintf(stderr, "bench_chained: read %zu bytes, want %zu\n", size,
              sc->bytes);
      exit(1);
    }
    rc = ember_block_create(c, data, size, 0, &a2);
    free(data);
    if (rc) die("ember_block_create", rc);
    in2 = a2;
  }
  ember_block *b = tally(c, platform, in2, K2, &sum);
  uint64_t ns = now_ns() - t0;
  ember_block_release(b);
  ember_block_release(a2);
  ember_block_release(a);
  if (sum != sc->want) {
    fprintf(stderr, "bench_chained: %s %s pair: sum %llu, want %llu\n",
            platform, round_trip ? "round-trip" : "chained",
            (unsigned long long)sum, (unsigned long long)sc->want);
    exit(1);
  }
  return ns;
}

/* pairs pairs of one mode; bytes and fds counted around them. */
static void run_mode(ember_client *c, const char *platform,
                     ember_block *x, int round_trip, const size_case *sc,
                     unsigned pairs, sample *s) {
  pair(c, platform, x, round_trip, sc); /* warm-up, not counted */
  uint64_t sent = atomic_load(&sock_sent), recv = atomic_load(&sock_received);
  uint64_t fds = atomic_load(&fds_passed);
  for (unsigned i = 0; i < pairs; i++)
    s->ns[i] = (double)pair(c, platform, x, round_trip, sc);
  s->sent = atomic_load(&sock_sent) - sent;
  s->received = atomic_load(&sock_received) - recv;
  s->fds = atomic_load(&fds_passed) - fds;
  /* each fd passed is a block put over the unix socket as a memfd (A':
   * X was put before): its bytes are shared with the NAM, not sent */
  s->memfd = s->fds * sc->bytes;
}

static void print_row(const char *platform, const char *transport,
                      const char *mode, const size_case *sc, unsigned pairs,
                      sample *s) {
  double med = quantile(s->ns, pairs, 0.5), p90 = quantile(s->ns, pairs, 0.9);
  printf("%-9s %-5s %8zu %-10s %12.0f %12.0f %12.0f %10.3f %10.3f\n",
         platform, transport, sc->bytes >> 10, mode,
         (double)s->sent / pairs, (double)s->received / pairs,
         (double)s->memfd / pairs, med / 1e6, p90 / 1e6);
}

static void run_size(ember_client *c, const char *platform,
                     const char *transport, size_t bytes, unsigned pairs) {
  size_t n = bytes / 8;
  uint64_t *v = malloc(bytes);
  if (!v) die("malloc", EMBER_ENOMEM);
  size_case sc = {.bytes = bytes, .want = 0};
  for (size_t i = 0; i < n; i++) {
    v[i] = i * 2654435761u;
    sc.want += tally_ref(tally_ref(v[i], K1), K2);
  }
  ember_block *x = NULL;
  int rc = ember_block_create(c, v, bytes, 0, &x);
  free(v);
  if (rc) die("ember_block_create", rc);
  sample s[2];
  const char *mode[2] = {"chained", "round-trip"};
  for (int m = 0; m < 2; m++) {
    s[m].ns = calloc(pairs, sizeof *s[m].ns);
    if (!s[m].ns) die("calloc", EMBER_ENOMEM);
    run_mode(c, platform, x, m, &sc, pairs, &s[m]);
  }
  for (int m = 0; m < 2; m++) {
    print_row(platform, transport, mode[m], &sc, pairs, &s[m]);
    free(s[m].ns);
  }
  ember_block_release(x);
}

/* "a,b,c" -> values (at most max); returns how many. */
static size_t split(const char *list, char items[][32], size_t max) {
  size_t n = 0;
  const char *p = list;
  while (*p && n < max) {
    size_t len = strcspn(p, ",");
    snprintf(items[n++], 32, "%.*s", (int)(len < 31 ? len : 31), p);
    p += len + (p[len] == ',');
  }
  return n;
}

int main(int argc, char **argv) {
  unsigned pairs = argc > 1 ? (unsigned)atoi(argv[1]) : 20;
  const char *sizes_arg = argc > 2 ? argv[2] : "64,1024,16384";
  const char *plats_arg = argc > 3 ? argv[3] : "cpu,fpga-emu";
  char sizes[8][32], plats[4][32];
  size_t n_sizes = split(sizes_arg, sizes, 8);
  size_t n_plats = split(plats_arg, plats, 4);
  if (pairs == 0 || n_sizes == 0 || n_plats == 0) {
    fprintf(stderr, "usage: bench_chained [PAIRS] [KIB,KIB,..] "
            "[PLATFORM,..]\n");
    return 2;
  }
  for (size_t i = 0; i < n_sizes; i++)
    if (atoi(sizes[i]) <= 0 || atoi(sizes[i]) > 65536) {
      fprintf(stderr, "bench_chained: size %s KiB: 1 .. 65536\n", sizes[i]);
      return 2;
    }

  /* tally has no OpenCL implementation: no opencl platform */
  const char *sets[] = {"plugin_dir=" EMBER_TEST_PLUGIN_DIR,
                        "opencl.enabled=false", "fpga-emu.boards=1",
                        "fpga-emu.bitstreams=tally", "log_level=info", NULL};
  nam_proc nam;
  if (nam_start(&nam, sets) != 0) return 1;
  printf("bench_chained: %u pairs per row; tally (out = 3 * in + k) via "
         "ember-nam; fpga-emu with its default board (real clock)\n"
         "bytes per pair over the socket (sent/received by the client), "
         "memfd: block bytes shared, not sent; ms per pair\n", pairs);
  printf("%-9s %-5s %8s %-10s %12s %12s %12s %10s %10s\n", "platform",
         "via", "KiB", "mode", "sent B", "received B", "memfd B",
         "median ms", "p90 ms");
  const char *transports[2] = {"unix", "tcp"};
  int failed = 0;
  for (size_t pi = 0; pi < n_plats && !failed; pi++)
    for (int ti = 0; ti < 2; ti++) {
      ember_options o = {.client_name = "bench_chained", .no_fallback = 1};
      ember_client *c = NULL;
      int rc = ember_connect(ti == 0 ? nam.unix_addr : nam.tcp_addr, &o, &c);
      if (rc) {
        fprintf(stderr, "bench_chained: connect %s: %s (%s)\n",
                transports[ti], ember_strerror(rc), ember_last_error());
        failed = 1;
        break;
      }
      for (size_t si = 0; si < n_sizes; si++)
        run_size(c, plats[pi], transports[ti], (size_t)atoi(sizes[si]) << 10,
                 pairs);
      ember_close(c);
    }
  nam_cleanup(&nam);
  return failed;
}
