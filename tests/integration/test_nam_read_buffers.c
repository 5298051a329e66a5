/* test_nam_read_buffers - what ember-nam's read buffers hold for clients:
 *
 *   prehello  16 TCP connections each announce a 64 MiB Hello and send
 *             its bytes: refused at the length prefix (a Hello is at most
 *             PROTO_MAX_HELLO_FRAME), RSS stays flat, good clients served.
 *   shrink    8 clients each send one large inline PutBlock, release it
 *             and ping: the buffers shrink back, RSS returns.
 *   count     a client whose blocks fill most of max_block_bytes announces
 *             a frame that would pass it: refused at the length prefix
 *             with an Error that says so.
 *
 * argv[1], if given, names the one part to run. */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frame.h"
#include "harness.h"
#include "hostile.h"
#include "raw_conn.h"

enum { RECV_MS = 10000, PROBE_MS = 3000 };
#define MiB ((size_t)1 << 20)

static nam_proc nam;

/* ---- prehello ----------------------------------------------------------- */

enum { N_PRE = 16 };

static void test_prehello(void) {
  const size_t each = HOSTILE_SCALE(32) * MiB;
  printf("%d TCP connections announce a 64 MiB Hello and send %zu MiB of "
         "it:\n", N_PRE, each / MiB);
  const char *sets[] = {"log_level=info", NULL};
  CHECK_EQ(nam_start(&nam, sets), 0);
  nam_usage before, after;
  char text[128];
  nam_usage_read(&nam, &before);
  printf("  before: %s\n", nam_usage_text(&before, text, sizeof text));
  int fds[N_PRE];
  size_t sent[N_PRE] = {0};
  uint8_t h[PROTO_HEADER_SIZE];
  proto_header_write(h, 64u << 20, EMBER__MSG_TYPE__MSG_HELLO);
  for (int i = 0; i < N_PRE; i++) {
    fds[i] = hostile_connect(&nam, 1, "127.0.0.2");
    CHECK(fds[i] >= 0);
    struct pollfd p = {.fd = fds[i], .events = POLLOUT};
    CHECK_EQ(poll(&p, 1, RECV_MS), 1);
    CHECK_EQ(send(fds[i], h, sizeof h, MSG_NOSIGNAL), (ssize_t)sizeof h);
  }
  static uint8_t chunk[1 << 16];
  memset(chunk, 'h', sizeof chunk);
  /* send until each has sent its share, the NAM closed it or 5 s passed */
  int open = N_PRE;
  uint64_t end = hostile_now_ms() + 5000;
  while (open > 0 && hostile_now_ms() < end) {
    struct pollfd p[N_PRE];
    for (int i = 0; i < N_PRE; i++)
      p[i] = (struct pollfd){.fd = fds[i], .events = POLLOUT};
    poll(p, N_PRE, 100);
    for (int i = 0; i < N_PRE; i++) {
      if (fds[i] < 0 || !(p[i].revents & (POLLOUT | POLLERR | POLLHUP)))
        continue;
      size_t n = each - sent[i] < sizeof chunk ? each - sent[i] : sizeof chunk;
      ssize_t got = send(fds[i], chunk, n, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (got > 0) sent[i] += (size_t)got;
      if ((got < 0 && errno != EAGAIN) || sent[i] == each) {
        fds[i] = -fds[i] - 2; /* done: keep it open, stop sending */
        open--;
      }
    }
  }
  size_t total = 0;
  for (int i = 0; i < N_PRE; i++) total += sent[i];
  probe_stats u = {0}, t = {0};
  probe_window(&nam, 500, 20, PROBE_MS, &u, &t);
  nam_usage_read(&nam, &after);
  printf("  after %zu MiB sent: %s\n", total / MiB,
         nam_usage_text(&after, text, sizeof text));
  probe_report("meanwhile", &u, &t);
  for (int i = 0; i < N_PRE; i++) close(fds[i] >= 0 ? fds[i] : -fds[i] - 2);
  /* 512 MiB buffered before the fix (+517 MB RSS); the margin is for the
   * NAM's own start-up (its threads' first pages), seen up to +35 MB */
  CHECK_RSS(after.rss_kb - before.rss_kb < 64 * 1024);
  probe_check(&u, &t);
  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
}

/* ---- shrink ------------------------------------------------------------- */

enum { N_BIG = 8 };

static void test_shrink(void) {
  const size_t big = HOSTILE_SCALE(60) * MiB;
  printf("%d TCP clients each put a %zu MiB inline block, release it and "
         "ping:\n", N_BIG, big / MiB);
  const char *sets[] = {"log_level=info", NULL};
  CHECK_EQ(nam_start(&nam, sets), 0);
  nam_usage before, after;
  char text[128];
  nam_usage_read(&nam, &before);
  printf("  before: %s\n", nam_usage_text(&before, text, sizeof text));
  uint8_t *data = malloc(big);
  CHECK(data != NULL);
  memset(data, 0x5a, big);
  raw_conn c[N_BIG];
  for (int i = 0; i < N_BIG; i++) {
    raw_open_tcp(&c[i], nam.port);
    raw_greet(&c[i], NULL, RECV_MS);
    Ember__PutBlock pb = EMBER__PUT_BLOCK__INIT;
    pb.block_id = 7;
    pb.size = big;
    pb.has_data = 1;
    pb.data.data = data;
    pb.data.len = big;
    pb.transport = EMBER__PUT_BLOCK__TRANSPORT__INLINE;
    raw_send(&c[i], EMBER__MSG_TYPE__MSG_PUT_BLOCK, &pb.base, -1);
    Ember__ReleaseBlock rb = EMBER__RELEASE_BLOCK__INIT;
    rb.block_id = 7;
    raw_send(&c[i], EMBER__MSG_TYPE__MSG_RELEASE_BLOCK, &rb.base, -1);
    Ember__StatsRequest sr = EMBER__STATS_REQUEST__INIT;
    raw_send(&c[i], EMBER__MSG_TYPE__MSG_STATS_REQUEST, &sr.base, -1);
    uint8_t type;
    ProtobufCMessage *m = raw_recv(&c[i], &type, RECV_MS);
    CHECK(m != NULL);
    CHECK_EQ(type, EMBER__MSG_TYPE__MSG_STATS);
    CHECK_EQ(((Ember__Stats *)m)->block_bytes, 0);
    protobuf_c_message_free_unpacked(m, NULL);
  }
  free(data);
  nam_usage_read(&nam, &after);
  printf("  after, all %d still connected: %s\n", N_BIG,
         nam_usage_text(&after, text, sizeof text));
  CHECK_RSS(after.rss_kb - before.rss_kb < 48 * 1024);
  for (int i = 0; i < N_BIG; i++) raw_close(&c[i]);
  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
}

/* ---- count -------------------------------------------------------------- */

static void test_count(void) {
  printf("a frame that would take a client over max_block_bytes (8 MiB):\n");
  const char *sets[] = {"max_block_bytes=8MiB", NULL};
  CHECK_EQ(nam_start(&nam, sets), 0);
  size_t size = 6 * MiB;
  uint8_t *data = calloc(1, size);
  CHECK(data != NULL);
  raw_conn r;
  raw_open_tcp(&r, nam.port);
  raw_greet(&r, NULL, RECV_MS);
  Ember__PutBlock pb = EMBER__PUT_BLOCK__INIT;
  pb.block_id = 1;
  pb.size = size;
  pb.has_data = 1;
  pb.data.data = data;
  pb.data.len = size;
  pb.transport = EMBER__PUT_BLOCK__TRANSPORT__INLINE;
  raw_send(&r, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &pb.base, -1);
  free(data);
  /* held: the Stats say so */
  Ember__StatsRequest sr = EMBER__STATS_REQUEST__INIT;
  raw_send(&r, EMBER__MSG_TYPE__MSG_STATS_REQUEST, &sr.base, -1);
  uint8_t type;
  ProtobufCMessage *m = raw_recv(&r, &type, RECV_MS);
  CHECK(m != NULL);
  CHECK_EQ(type, EMBER__MSG_TYPE__MSG_STATS);
  CHECK_EQ(((Ember__Stats *)m)->block_bytes, size);
  protobuf_c_message_free_unpacked(m, NULL);
  /* 4 MiB more would pass 8 MiB: refused at its length prefix */
  uint8_t h[PROTO_HEADER_SIZE + 16] = {0};
  proto_header_write(h, 4u << 20, EMBER__MSG_TYPE__MSG_PUT_BLOCK);
  raw_send_bytes(&r, h, sizeof h, -1);
  raw_expect_error(&r, EMBER_ETOOBIG, "over max_block_bytes", RECV_MS);
  raw_expect_closed(&r, RECV_MS);
  raw_close(&r);
  /* and a client with room takes the same frame */
  raw_open_tcp(&r, nam.port);
  raw_greet(&r, NULL, RECV_MS);
  data = calloc(1, 4 * MiB);
  CHECK(data != NULL);
  pb.block_id = 2;
  pb.size = pb.data.len = 4 * MiB;
  pb.data.data = data;
  raw_send(&r, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &pb.base, -1);
  free(data);
  raw_send(&r, EMBER__MSG_TYPE__MSG_STATS_REQUEST, &sr.base, -1);
  m = raw_recv(&r, &type, RECV_MS);
  CHECK(m != NULL);
  CHECK_EQ(type, EMBER__MSG_TYPE__MSG_STATS);
  CHECK_EQ(((Ember__Stats *)m)->block_bytes, 4 * MiB);
  protobuf_c_message_free_unpacked(m, NULL);
  raw_close(&r);
  printf("  refused at its prefix; a client with room is served\n");
  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  if (test_part(argc, argv, "prehello")) test_prehello();
  if (test_part(argc, argv, "shrink")) test_shrink();
  if (test_part(argc, argv, "count")) test_count();
  return 0;
}
