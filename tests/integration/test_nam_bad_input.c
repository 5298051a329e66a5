/* test_nam_bad_input - a raw client sends what a client should not: garbage,
 * frames over the limit, no Hello, another protocol version, unknown and
 * malformed messages, unknown accelerators and blocks, unsealed or
 * wrong-size memfds, and parameters the sw accelerator must refuse. Each
 * gets an Error that says what was wrong; the daemon carries on and serves
 * a well-behaved client afterwards. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "accelerators/sw/sw.pb-c.h"
#include "frame.h"
#include "harness.h"
#include "raw_conn.h"
#include "sw/seqset.h"

static nam_proc nam;

/* every answer comes within 5 s */
enum { RECV_MS = 5000 };

static void greeted(raw_conn *r) {
  raw_open_unix(r, nam.sock);
  raw_greet(r, NULL, RECV_MS);
}

static int sealed_memfd(const void *data, size_t len, int seal) {
  int fd = memfd_create("test", MFD_ALLOW_SEALING | MFD_CLOEXEC);
  CHECK(fd >= 0);
  CHECK_EQ(write(fd, data, len), (ssize_t)len);
  if (seal)
    CHECK_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW |
                                        F_SEAL_WRITE), 0);
  return fd;
}

static void put_block(raw_conn *r, uint64_t id, const void *data, size_t len) {
  int fd = sealed_memfd(data, len, 1);
  Ember__PutBlock pb = EMBER__PUT_BLOCK__INIT;
  pb.block_id = id;
  pb.size = len;
  pb.has_transport = 1;
  pb.transport = EMBER__PUT_BLOCK__TRANSPORT__FD;
  raw_send(r, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &pb.base, fd);
  close(fd);
}

static void put_seqs(raw_conn *r, uint64_t id, const char *const *seqs, size_t n) {
  size_t lens[8];
  for (size_t i = 0; i < n; i++) lens[i] = strlen(seqs[i]);
  size_t bytes = acc_seqset_bytes(lens, n);
  uint8_t *buf = malloc(bytes);
  CHECK_EQ(acc_seqset_write(buf, bytes, seqs, lens, n), 0);
  put_block(r, id, buf, bytes);
  free(buf);
}

static void submit(raw_conn *r, uint64_t task, const char *acc,
                   const Ember__Sw__Params *p, uint64_t q, uint64_t ref) {
  Ember__Submit s = EMBER__SUBMIT__INIT;
  uint8_t params[256];
  uint64_t ids[2] = {q, ref};
  s.task_id = task;
  s.accelerator = (char *)acc;
  if (p) {
    s.has_params = 1;
    s.params.data = params;
    s.params.len = ember__sw__params__pack(p, params);
  }
  s.n_input_blocks = 2;
  s.input_blocks = ids;
  raw_send(r, EMBER__MSG_TYPE__MSG_SUBMIT, &s.base, -1);
}

static void test_framing(void) {
  raw_conn r;
  printf("garbage bytes:\n");
  raw_open_unix(&r, nam.sock);
  const char *http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  raw_send_bytes(&r, http, strlen(http), -1);
  raw_expect_error(&r, EMBER_ETOOBIG, "over the limit", RECV_MS);
  raw_expect_closed(&r, RECV_MS);
  raw_close(&r);

  printf("a frame over the limit (announced, never sent):\n");
  greeted(&r);
  uint8_t big[5] = {0, 0, 0, 0x10, EMBER__MSG_TYPE__MSG_SUBMIT}; /* 256 MiB */
  raw_send_bytes(&r, big, sizeof big, -1);
  raw_expect_error(&r, EMBER_ETOOBIG, "over the limit", RECV_MS);
  raw_expect_closed(&r, RECV_MS);
  raw_close(&r);

  printf("no Hello first:\n");
  raw_open_unix(&r, nam.sock);
  Ember__ListAccelerators la = EMBER__LIST_ACCELERATORS__INIT;
  raw_send(&r, EMBER__MSG_TYPE__MSG_LIST_ACCELERATORS, &la.base, -1);
  raw_expect_error(&r, EMBER_EPROTO, "first message must be Hello", RECV_MS);
  raw_expect_closed(&r, RECV_MS);
  raw_close(&r);

  printf("another protocol version:\n");
  raw_open_unix(&r, nam.sock);
  raw_check_error(raw_hello(&r, 99, NULL, RECV_MS), EMBER_EVERSION,
                  "protocol version 99");
  raw_expect_closed(&r, RECV_MS);
  raw_close(&r);

  printf("unknown and malformed messages (the connection goes on):\n");
  greeted(&r);
  uint8_t unknown[8] = {3, 0, 0, 0, 200, 1, 2, 3};
  raw_send_bytes(&r, unknown, sizeof unknown, -1);
  raw_expect_error(&r, EMBER_EPROTO, "unknown message type 200", RECV_MS);
  uint8_t malformed[9] = {4, 0, 0, 0, EMBER__MSG_TYPE__MSG_SUBMIT, 0xff, 0xff, 0xff, 0xff};
  raw_send_bytes(&r, malformed, sizeof malformed, -1);
  raw_expect_error(&r, EMBER_EPROTO, "malformed Submit", RECV_MS);
  Ember__Result res = EMBER__RESULT__INIT;
  res.task_id = 1;
  raw_send(&r, EMBER__MSG_TYPE__MSG_RESULT, &res.base, -1);
  raw_expect_error(&r, EMBER_EPROTO, "not a message a client sends", RECV_MS);
  raw_send(&r, EMBER__MSG_TYPE__MSG_LIST_ACCELERATORS, &la.base, -1);
  uint8_t type;
  ProtobufCMessage *m = raw_recv(&r, &type, RECV_MS);
  CHECK(m && type == EMBER__MSG_TYPE__MSG_ACCELERATOR_LIST);
  protobuf_c_message_free_unpacked(m, NULL);
  raw_close(&r);
}

static void put_block(raw_conn *r, uint64_t id, const void *data, size_t len);

static void test_blocks(void) {
  raw_conn r;
  printf("blocks:\n");
  greeted(&r);
  const char *data = "ACGTACGT";
  int fd = sealed_memfd(data, 8, 0);
  Ember__PutBlock pb = EMBER__PUT_BLOCK__INIT;
  pb.block_id = 1;
  pb.size = 8;
  pb.has_transport = 1;
  pb.transport = EMBER__PUT_BLOCK__TRANSPORT__FD;
  raw_send(&r, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &pb.base, fd);
  close(fd);
  raw_expect_error(&r, EMBER_EBLOCK, "not sealed", RECV_MS);
  fd = sealed_memfd(data, 8, 1);
  pb.block_id = 2;
  pb.size = 9;
  raw_send(&r, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &pb.base, fd);
  close(fd);
  raw_expect_error(&r, EMBER_EBLOCK, "holds 8 bytes", RECV_MS);
  /* small blocks may come inline over a unix socket (cheaper than a
   * memfd); larger ones must be memfds */
  pb.has_transport = 0;
  pb.has_data = 1;
  pb.block_id = 3;
  pb.data.data = (uint8_t *)data;
  pb.data.len = 8;
  pb.size = 8;
  raw_send(&r, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &pb.base, -1);
  uint8_t *over = calloc(PROTO_UNIX_INLINE_MAX + 1, 1);
  pb.block_id = 4;
  pb.data.data = over;
  pb.data.len = pb.size = PROTO_UNIX_INLINE_MAX + 1;
  raw_send(&r, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &pb.base, -1);
  free(over);
  raw_expect_error(&r, EMBER_EBLOCK, "sealed memfds", RECV_MS);
  /* the small one is there: putting it again is refused */
  pb.block_id = 3;
  pb.data.data = (uint8_t *)data;
  pb.data.len = pb.size = 8;
  raw_send(&r, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &pb.base, -1);
  raw_expect_error(&r, EMBER_EINVAL, "block 3 already exists", RECV_MS);
  Ember__ReleaseBlock rb = EMBER__RELEASE_BLOCK__INIT;
  rb.block_id = 42;
  raw_send(&r, EMBER__MSG_TYPE__MSG_RELEASE_BLOCK, &rb.base, -1);
  raw_expect_error(&r, EMBER_ENOTFOUND, "block 42 not found", RECV_MS);
  submit(&r, 7, "sw", NULL, 42, 43);
  raw_expect_error(&r, EMBER_ENOTFOUND, "block 42 not found", RECV_MS);
  /* per-client block bytes: the second 600 KB block passes 1 MiB */
  char *big = calloc(600 << 10, 1);
  put_block(&r, 50, big, 600 << 10);
  put_block(&r, 51, big, 600 << 10);
  free(big);
  raw_expect_error(&r, EMBER_EBUSY, "max_block_bytes", RECV_MS);
  rb.block_id = 50;
  raw_send(&r, EMBER__MSG_TYPE__MSG_RELEASE_BLOCK, &rb.base, -1);
  pb.has_transport = 1;
  pb.transport = EMBER__PUT_BLOCK__TRANSPORT__FD;
  pb.has_data = 0;
  raw_send(&r, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &pb.base, -1); /* no fd with it */
  raw_expect_error(&r, EMBER_EPROTO, "no fd came with it", RECV_MS);
  raw_expect_closed(&r, RECV_MS);
  raw_close(&r);
}

static void test_params(void) {
  raw_conn r;
  printf("tasks and parameters:\n");
  greeted(&r);
  const char *q1[] = {"ACGTACGTAC"}, *r1[] = {"TTACGTACGTAA"};
  const char *q2[] = {"ACGT", "ACGA"}, *bad[] = {"ACGTZ"};
  const char *empty_ok[] = {"ACGT", ""};
  put_seqs(&r, 1, q1, 1);
  put_seqs(&r, 2, r1, 1);
  put_seqs(&r, 3, q2, 2);
  put_seqs(&r, 4, bad, 1);
  put_seqs(&r, 5, empty_ok, 2);

  submit(&r, 10, "nope", NULL, 1, 2);
  raw_expect_error(&r, EMBER_ENOACCEL, "unknown accelerator 'nope'", RECV_MS);
  submit(&r, 11, "sw", NULL, 3, 2);
  raw_expect_error(&r, EMBER_EFORMAT, "mismatched batch sizes", RECV_MS);
  submit(&r, 12, "sw", NULL, 4, 2);
  raw_expect_error(&r, EMBER_EFORMAT, "unknown residue 'Z'", RECV_MS);
  submit(&r, 13, "sw", NULL, 5, 3);
  raw_expect_error(&r, EMBER_EFORMAT, "empty", RECV_MS);
  Ember__Sw__Params p = EMBER__SW__PARAMS__INIT;
  p.has_gap_open = 1;
  p.gap_open = -6;
  submit(&r, 14, "sw", &p, 1, 2);
  raw_expect_error(&r, EMBER_EPARAM, "gap_open", RECV_MS);
  Ember__Sw__Params pm = EMBER__SW__PARAMS__INIT;
  pm.has_alphabet = 1;
  pm.alphabet = EMBER__SW__ALPHABET__PROTEIN;
  pm.matrix_name = "BLOSUM99";
  submit(&r, 15, "sw", &pm, 1, 2);
  raw_expect_error(&r, EMBER_EPARAM, "BLOSUM99", RECV_MS);

  /* and a good one on the same connection */
  submit(&r, 16, "sw", NULL, 1, 2);
  uint8_t type;
  ProtobufCMessage *m = raw_recv(&r, &type, RECV_MS);
  CHECK(m && type == EMBER__MSG_TYPE__MSG_RESULT);
  Ember__Result *res = (Ember__Result *)m;
  CHECK_EQ(res->task_id, 16);
  CHECK_EQ(res->status, 0);
  Ember__Sw__Result *sr = ember__sw__result__unpack(NULL, res->output.len,
                                                   res->output.data);
  CHECK(sr && sr->n_score == 1 && sr->score[0] == 27);
  printf("  Result: score %d, query %d-%d, ref %d-%d on %s\n", sr->score[0],
         sr->query_start[0], sr->query_end[0], sr->ref_start[0], sr->ref_end[0],
         res->platform);
  ember__sw__result__free_unpacked(sr, NULL);
  protobuf_c_message_free_unpacked(m, NULL);
  raw_close(&r);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const char *sets[] = {"max_block_bytes=1MiB", NULL};
  CHECK_EQ(nam_start(&nam, sets), 0);
  test_framing();
  test_blocks();
  test_params();
  /* the daemon is alive and serves a normal client */
  CHECK_EQ(kill(nam.pid, 0), 0);
  pair_set ps;
  CHECK_EQ(pairs_load_dna(&ps, 200), 0);
  ember_sw_params p;
  ember_sw_params_default(&p);
  ember_sw_result *want = calloc(ps.n, sizeof *want), *got = calloc(ps.n, sizeof *got);
  CHECK_EQ(pairs_reference(&ps, &p, want), 0);
  ember_client *c;
  ember_options opts = {.no_fallback = 1};
  CHECK_EQ(ember_connect(nam.unix_addr, &opts, &c), 0);
  CHECK_EQ(ember_sw_align(c, &p, ps.queries, ps.refs, ps.n, got, NULL, NULL, NULL), 0);
  CHECK_EQ(results_compare(got, want, ps.n, "after abuse"), ps.n);
  ember_close(c);
  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
  free(want);
  free(got);
  pairs_free(&ps);
  printf("1 passed, 0 failed\n");
  return 0;
}
