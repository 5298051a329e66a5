/*
 * test_frame.c - ember's framing (proto/frame.c): encode/decode of every
 * message type, the incremental reader and its limits, unknown and malformed
 * frames, fd passing over a unix socket pair, the output buffer, and
 * allocation failure (the test links with -Wl,--wrap=malloc,realloc,free).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/select.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ember/ember_errors.h"
#include "frame.h"
#include "alloc_fail.h"

/* The reader's first allocation (READ_CHUNK in frame.c). */
#define FIRST_CHUNK ((size_t)64 << 10)

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

/* Open fds, found with fcntl(F_GETFD). */
static int count_open_fds(void) {
  int n = 0;
  for (int fd = 0; fd < 1024; fd++)
    if (fcntl(fd, F_GETFD) != -1) n++;
  return n;
}

static int fd_is_open(int fd) { return fcntl(fd, F_GETFD) != -1; }

/* A memfd holding text, to tell received fds apart. */
static int memfd_with(const char *text) {
  int fd = memfd_create("test-frame", MFD_CLOEXEC);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  return fd;
}

static void assert_fd_holds(int fd, const char *text) {
  char buf[64] = "";
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  assert_int_equal(n, (ssize_t)strlen(text));
  assert_string_equal(buf, text);
}

static void assert_same_file(int a, int b) {
  struct stat sa, sb;
  assert_int_equal(fstat(a, &sa), 0);
  assert_int_equal(fstat(b, &sb), 0);
  assert_int_equal(sa.st_dev, sb.st_dev);
  assert_int_equal(sa.st_ino, sb.st_ino);
}

static void socket_pair(int sv[2]) {
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

static uint32_t le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

/* One frame of msg in w (w is reset first). */
static void frame_of(proto_wbuf *w, uint8_t type, const ProtobufCMessage *msg) {
  proto_wbuf_free(w);
  assert_int_equal(proto_wbuf_append(w, type, msg, 0), 0);
}

/* ------------------------------------------------------------------------ */
/* One sample message of every type.                                        */

static Ember__Hello hello = EMBER__HELLO__INIT;
static Ember__Welcome welcome = EMBER__WELCOME__INIT;
static Ember__Error error_msg = EMBER__ERROR__INIT;
static Ember__ListAccelerators list_acc = EMBER__LIST_ACCELERATORS__INIT;
static Ember__PlatformInfo platform_info = EMBER__PLATFORM_INFO__INIT;
static Ember__AcceleratorInfo acc_info = EMBER__ACCELERATOR_INFO__INIT;
static Ember__PlatformInfo *platform_infos[1] = {&platform_info};
static Ember__AcceleratorInfo *acc_infos[1] = {&acc_info};
static char *acc_platforms[2] = {"cpu", "fpga-emu"};
static Ember__AcceleratorList acc_list = EMBER__ACCELERATOR_LIST__INIT;
static uint8_t block_bytes[300];
static Ember__PutBlock put_block = EMBER__PUT_BLOCK__INIT;
static Ember__ReleaseBlock release_block = EMBER__RELEASE_BLOCK__INIT;
static uint64_t submit_inputs[2] = {7, 8};
static uint8_t submit_params[3] = {0x08, 0x01, 0x10};
static Ember__Submit submit = EMBER__SUBMIT__INIT;
static Ember__Cancel cancel_msg = EMBER__CANCEL__INIT;
static Ember__StageTimes stage_times = EMBER__STAGE_TIMES__INIT;
static uint8_t result_output[5] = {1, 2, 3, 4, 5};
static Ember__Result result_msg = EMBER__RESULT__INIT;
static Ember__StatsRequest stats_request = EMBER__STATS_REQUEST__INIT;
static Ember__Stats stats = EMBER__STATS__INIT;

typedef struct sample {
  uint8_t type;
  const ProtobufCMessage *msg;
} sample;

static sample samples[12];

static void init_samples(void) {
  hello.protocol_version = PROTO_VERSION;
  hello.client_name = "test-frame";
  welcome.protocol_version = PROTO_VERSION;
  welcome.server_name = "nam";
  welcome.has_max_frame = 1;
  welcome.max_frame = PROTO_DEFAULT_MAX_FRAME;
  welcome.has_max_inflight = 1;
  welcome.max_inflight = 64;
  welcome.has_max_block_bytes = 1;
  welcome.max_block_bytes = (uint64_t)1 << 33;
  error_msg.code = EMBER_EPARAM;
  error_msg.message = "gap_open must be a non-negative penalty, got -6";
  error_msg.has_task_id = 1;
  error_msg.task_id = 42;
  platform_info.name = "cpu";
  platform_info.kind = "cpu";
  platform_info.state = "ready";
  platform_info.has_workers = 1;
  platform_info.workers = 2;
  acc_info.name = "sw";
  acc_info.version = 1;
  acc_info.n_platforms = 2;
  acc_info.platforms = acc_platforms;
  acc_list.n_accelerators = 1;
  acc_list.accelerators = acc_infos;
  acc_list.n_platforms = 1;
  acc_list.platforms = platform_infos;
  for (size_t i = 0; i < sizeof block_bytes; i++)
    block_bytes[i] = (uint8_t)(i * 7);
  put_block.block_id = 1234567890123ull;
  put_block.size = sizeof block_bytes;
  put_block.has_data = 1;
  put_block.data.data = block_bytes;
  put_block.data.len = sizeof block_bytes;
  release_block.block_id = 99;
  submit.task_id = 5;
  submit.accelerator = "sw";
  submit.has_params = 1;
  submit.params.data = submit_params;
  submit.params.len = sizeof submit_params;
  submit.n_input_blocks = 2;
  submit.input_blocks = submit_inputs;
  submit.has_priority = 1;
  submit.priority = -3;
  submit.platform = "cpu";
  cancel_msg.task_id = 5;
  stage_times.has_queue_ns = 1;
  stage_times.queue_ns = 1000;
  stage_times.has_exec_ns = 1;
  stage_times.exec_ns = 2000;
  result_msg.task_id = 5;
  result_msg.status = EMBER_ECANCELED;
  result_msg.message = "canceled";
  result_msg.has_output = 1;
  result_msg.output.data = result_output;
  result_msg.output.len = sizeof result_output;
  result_msg.platform = "cpu";
  result_msg.times = &stage_times;
  stats.has_tasks_submitted = 1;
  stats.tasks_submitted = 10;
  stats.has_tasks_completed = 1;
  stats.tasks_completed = 9;
  stats.has_clients = 1;
  stats.clients = 3;

  size_t i = 0;
#define S(t, m) samples[i++] = (sample){t, &(m).base}
  S(EMBER__MSG_TYPE__MSG_HELLO, hello);
  S(EMBER__MSG_TYPE__MSG_WELCOME, welcome);
  S(EMBER__MSG_TYPE__MSG_ERROR, error_msg);
  S(EMBER__MSG_TYPE__MSG_LIST_ACCELERATORS, list_acc);
  S(EMBER__MSG_TYPE__MSG_ACCELERATOR_LIST, acc_list);
  S(EMBER__MSG_TYPE__MSG_PUT_BLOCK, put_block);
  S(EMBER__MSG_TYPE__MSG_RELEASE_BLOCK, release_block);
  S(EMBER__MSG_TYPE__MSG_SUBMIT, submit);
  S(EMBER__MSG_TYPE__MSG_CANCEL, cancel_msg);
  S(EMBER__MSG_TYPE__MSG_RESULT, result_msg);
  S(EMBER__MSG_TYPE__MSG_STATS_REQUEST, stats_request);
  S(EMBER__MSG_TYPE__MSG_STATS, stats);
#undef S
  assert_int_equal(i, sizeof samples / sizeof samples[0]);
}

static int setup(void **state) {
  init_samples();
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Encode / decode                                                           */

/* Every message type: header, payload, decoded message packs to the same
 * bytes. */
static void round_trip_each_type(void **state) {
  for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
    const sample *s = &samples[i];
    proto_wbuf w = {0};
    assert_int_equal(proto_wbuf_append(&w, s->type, s->msg, 0), 0);
    size_t plen = protobuf_c_message_get_packed_size(s->msg);
    assert_int_equal(w.len, PROTO_HEADER_SIZE + plen);
    assert_int_equal(le32(w.data), plen);
    assert_int_equal(w.data[4], s->type);

    proto_reader r;
    proto_frame f;
    proto_reader_init(&r, 0);
    assert_int_equal(proto_reader_feed(&r, w.data, w.len), 0);
    assert_int_equal(proto_reader_next(&r, &f), 1);
    assert_int_equal(f.type, s->type);
    assert_int_equal(f.len, plen);
    assert_memory_equal(f.payload, w.data + PROTO_HEADER_SIZE, plen);
    assert_ptr_equal(proto_descriptor(f.type), s->msg->descriptor);

    ProtobufCMessage *m = proto_unpack(&f);
    assert_non_null(m);
    assert_ptr_equal(m->descriptor, s->msg->descriptor);
    assert_int_equal(protobuf_c_message_get_packed_size(m), plen);
    uint8_t *again = __real_malloc(plen + 1);
    assert_int_equal(protobuf_c_message_pack(m, again), plen);
    assert_memory_equal(again, f.payload, plen);
    __real_free(again);
    protobuf_c_message_free_unpacked(m, NULL);

    assert_int_equal(proto_reader_next(&r, &f), 0);
    proto_reader_free(&r);
    proto_wbuf_free(&w);
  }
}

/* Spot checks of decoded fields. */
static void decoded_fields(void **state) {
  proto_wbuf w = {0};
  proto_reader r;
  proto_frame f;

  frame_of(&w, EMBER__MSG_TYPE__MSG_SUBMIT, &submit.base);
  proto_reader_init(&r, 0);
  assert_int_equal(proto_reader_feed(&r, w.data, w.len), 0);
  assert_int_equal(proto_reader_next(&r, &f), 1);
  Ember__Submit *s = (Ember__Submit *)proto_unpack(&f);
  assert_non_null(s);
  assert_int_equal(s->task_id, 5);
  assert_string_equal(s->accelerator, "sw");
  assert_int_equal(s->has_params, 1);
  assert_int_equal(s->params.len, sizeof submit_params);
  assert_memory_equal(s->params.data, submit_params, sizeof submit_params);
  assert_int_equal(s->n_input_blocks, 2);
  assert_int_equal(s->input_blocks[0], 7);
  assert_int_equal(s->input_blocks[1], 8);
  assert_int_equal(s->priority, -3);
  assert_string_equal(s->platform, "cpu");
  protobuf_c_message_free_unpacked(&s->base, NULL);
  proto_reader_free(&r);

  frame_of(&w, EMBER__MSG_TYPE__MSG_RESULT, &result_msg.base);
  proto_reader_init(&r, 0);
  assert_int_equal(proto_reader_feed(&r, w.data, w.len), 0);
  assert_int_equal(proto_reader_next(&r, &f), 1);
  Ember__Result *res = (Ember__Result *)proto_unpack(&f);
  assert_non_null(res);
  assert_int_equal(res->status, EMBER_ECANCELED);
  assert_string_equal(res->message, "canceled");
  assert_int_equal(res->output.len, sizeof result_output);
  assert_memory_equal(res->output.data, result_output, sizeof result_output);
  assert_non_null(res->times);
  assert_int_equal(res->times->exec_ns, 2000);
  assert_int_equal(res->times->has_total_ns, 0);
  protobuf_c_message_free_unpacked(&res->base, NULL);
  proto_reader_free(&r);
  proto_wbuf_free(&w);
}

static void type_table(void **state) {
  for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++) {
    assert_ptr_equal(proto_descriptor(samples[i].type),
                     samples[i].msg->descriptor);
    assert_string_not_equal(proto_type_name(samples[i].type), "unknown");
  }
  assert_string_equal(proto_type_name(EMBER__MSG_TYPE__MSG_HELLO), "Hello");
  assert_string_equal(proto_type_name(EMBER__MSG_TYPE__MSG_STATS), "Stats");
  assert_null(proto_descriptor(EMBER__MSG_TYPE__MSG_NONE));
  assert_string_equal(proto_type_name(EMBER__MSG_TYPE__MSG_NONE), "unknown");
  assert_string_equal(proto_type_name(EMBER__MSG_TYPE__MSG_LEASE_ENDED),
                      "LeaseEnded");
  assert_string_equal(proto_type_name(EMBER__MSG_TYPE__MSG_BLOCK_REPLY),
                      "BlockReply");
  assert_string_equal(proto_type_name(EMBER__MSG_TYPE__MSG_LEASE_PROOF),
                      "LeaseProof");
  assert_null(proto_descriptor(EMBER__MSG_TYPE__MSG_LEASE_PROOF + 1));
  assert_string_equal(proto_type_name(EMBER__MSG_TYPE__MSG_LEASE_PROOF + 1),
                      "unknown");
  assert_null(proto_descriptor(255));
  assert_string_equal(proto_type_name(255), "unknown");
}

/* ------------------------------------------------------------------------ */
/* The reader                                                                */

/* Every proper prefix of a valid frame needs more bytes; never a frame. */
static void truncated_prefixes(void **state) {
  for (size_t k = 0; k < sizeof samples / sizeof samples[0]; k++) {
    proto_wbuf w = {0};
    frame_of(&w, samples[k].type, samples[k].msg);
    for (size_t n = 0; n < w.len; n++) {
      proto_reader r;
      proto_frame f = {0};
      proto_reader_init(&r, 0);
      assert_int_equal(proto_reader_feed(&r, w.data, n), 0);
      assert_int_equal(proto_reader_next(&r, &f), 0);
      assert_int_equal(proto_reader_next(&r, &f), 0); /* and stays so */
      /* the rest completes it */
      assert_int_equal(proto_reader_feed(&r, w.data + n, w.len - n), 0);
      assert_int_equal(proto_reader_next(&r, &f), 1);
      assert_int_equal(f.type, samples[k].type);
      assert_int_equal(f.len, w.len - PROTO_HEADER_SIZE);
      assert_int_equal(proto_reader_next(&r, &f), 0);
      proto_reader_free(&r);
    }
    proto_wbuf_free(&w);
  }
}

/* A header announcing more than the limit: ETOOBIG, and the reader never
 * allocates for it. */
static void over_limit_without_allocating(void **state) {
  const uint32_t lens[] = {1025, 1u << 20, 0x7fffffff, 0xffffffff};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    proto_reader r;
    proto_frame f;
    uint8_t h[PROTO_HEADER_SIZE];
    proto_reader_init(&r, 1024);
    proto_header_write(h, lens[i], EMBER__MSG_TYPE__MSG_PUT_BLOCK);
    assert_int_equal(proto_reader_feed(&r, h, sizeof h), 0);
    assert_int_equal(proto_reader_next(&r, &f), EMBER_ETOOBIG);
    assert_in_range(r.cap, 1, FIRST_CHUNK);
    /* asking where to read more does not size it for that length either
     * (it offers a whole chunk of room, so it may double once) */
    size_t avail = 0;
    int err = 0;
    assert_non_null(proto_reader_space(&r, &avail, &err));
    assert_int_equal(err, 0);
    assert_in_range(r.cap, 1, 2 * FIRST_CHUNK);
    assert_int_equal(proto_reader_next(&r, &f), EMBER_ETOOBIG);
    proto_reader_free(&r);
  }

  /* the default limit too */
  proto_reader r;
  proto_frame f;
  uint8_t h[PROTO_HEADER_SIZE];
  proto_reader_init(&r, 0);
  assert_int_equal(r.max_frame, PROTO_DEFAULT_MAX_FRAME);
  proto_header_write(h, (uint32_t)PROTO_DEFAULT_MAX_FRAME + 1, 1);
  assert_int_equal(proto_reader_feed(&r, h, sizeof h), 0);
  assert_int_equal(proto_reader_next(&r, &f), EMBER_ETOOBIG);
  assert_in_range(r.cap, 1, FIRST_CHUNK);
  proto_reader_free(&r);
}

/* A payload of exactly the limit is accepted; the writer refuses one over. */
static void exactly_at_limit(void **state) {
  const size_t max = 100000; /* over the first chunk: the reader grows */
  uint8_t *buf = __real_malloc(PROTO_HEADER_SIZE + max);
  proto_header_write(buf, (uint32_t)max, 200);
  memset(buf + PROTO_HEADER_SIZE, 0xab, max);
  proto_reader r;
  proto_frame f;
  proto_reader_init(&r, max);
  assert_int_equal(proto_reader_feed(&r, buf, PROTO_HEADER_SIZE + max), 0);
  assert_int_equal(proto_reader_next(&r, &f), 1);
  assert_int_equal(f.type, 200);
  assert_int_equal(f.len, max);
  assert_memory_equal(f.payload, buf + PROTO_HEADER_SIZE, max);
  proto_reader_free(&r);
  __real_free(buf);

  /* the writer's limit */
  proto_wbuf w = {0};
  size_t plen = protobuf_c_message_get_packed_size(&put_block.base);
  assert_int_equal(proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_PUT_BLOCK,
                                     &put_block.base, plen - 1),
                   EMBER_ETOOBIG);
  assert_int_equal(w.len, 0);
  assert_int_equal(proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_PUT_BLOCK,
                                     &put_block.base, plen),
                   0);
  assert_int_equal(w.len, PROTO_HEADER_SIZE + plen);
  proto_wbuf_free(&w);
}

/* An unknown type comes out as a frame (the caller rejects it) and the
 * stream goes on; proto_unpack gives NULL. */
static void unknown_type(void **state) {
  const uint8_t types[] = {EMBER__MSG_TYPE__MSG_NONE, 13, 200, 255};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    uint8_t buf[PROTO_HEADER_SIZE + 3];
    proto_header_write(buf, 3, types[i]);
    memcpy(buf + PROTO_HEADER_SIZE, "abc", 3);
    proto_wbuf w = {0};
    frame_of(&w, EMBER__MSG_TYPE__MSG_CANCEL, &cancel_msg.base);

    proto_reader r;
    proto_frame f;
    proto_reader_init(&r, 0);
    assert_int_equal(proto_reader_feed(&r, buf, sizeof buf), 0);
    assert_int_equal(proto_reader_feed(&r, w.data, w.len), 0);
    assert_int_equal(proto_reader_next(&r, &f), 1);
    assert_int_equal(f.type, types[i]);
    assert_int_equal(f.len, 3);
    assert_memory_equal(f.payload, "abc", 3);
    assert_null(proto_unpack(&f));
    assert_int_equal(proto_reader_next(&r, &f), 1);
    assert_int_equal(f.type, EMBER__MSG_TYPE__MSG_CANCEL);
    ProtobufCMessage *m = proto_unpack(&f);
    assert_non_null(m);
    assert_int_equal(((Ember__Cancel *)m)->task_id, 5);
    protobuf_c_message_free_unpacked(m, NULL);
    proto_reader_free(&r);
    proto_wbuf_free(&w);
  }
}

/* Payloads that are not valid messages of their type: NULL. */
static void malformed_payload(void **state) {
  static const struct {
    uint8_t type;
    size_t len;
    uint8_t bytes[12];
  } bad[] = {
    /* Hello without its required protocol_version */
    {EMBER__MSG_TYPE__MSG_HELLO, 0, {0}},
    /* a varint that never ends */
    {EMBER__MSG_TYPE__MSG_HELLO, 3, {0x08, 0xff, 0xff}},
    /* a string field longer than the payload */
    {EMBER__MSG_TYPE__MSG_HELLO, 5, {0x08, 0x01, 0x12, 0x40, 'x'}},
    /* wire type 7 does not exist */
    {EMBER__MSG_TYPE__MSG_CANCEL, 2, {0x0f, 0x01}},
    /* field number 0 */
    {EMBER__MSG_TYPE__MSG_CANCEL, 2, {0x00, 0x01}},
    /* Submit missing accelerator */
    {EMBER__MSG_TYPE__MSG_SUBMIT, 2, {0x08, 0x05}},
    /* a nested message (times) that is cut */
    {EMBER__MSG_TYPE__MSG_RESULT, 8, {0x08, 0x01, 0x10, 0x00, 0x32, 0x05, 0x08, 0x01}},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    proto_frame f = {.type = bad[i].type, .payload = bad[i].bytes,
                     .len = bad[i].len};
    ProtobufCMessage *m = proto_unpack(&f);
    if (m) fail_msg("bad payload %zu of type %u decoded", i, f.type);
  }
  /* a valid payload of one type sent under another */
  proto_wbuf w = {0};
  frame_of(&w, EMBER__MSG_TYPE__MSG_SUBMIT, &error_msg.base);
  proto_frame f = {.type = w.data[4], .payload = w.data + PROTO_HEADER_SIZE,
                   .len = w.len - PROTO_HEADER_SIZE};
  assert_null(proto_unpack(&f));
  proto_wbuf_free(&w);
}

/* Many frames fed at once come out in order. */
static void many_frames_one_feed(void **state) {
  enum { N = 500 };
  proto_wbuf w = {0};
  for (uint64_t i = 0; i < N; i++) {
    Ember__Cancel c = EMBER__CANCEL__INIT;
    c.task_id = i;
    assert_int_equal(proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_CANCEL,
                                       &c.base, 0), 0);
    if (i % 50 == 0) /* and an empty one here and there */
      assert_int_equal(proto_wbuf_append(&w,
                                         EMBER__MSG_TYPE__MSG_STATS_REQUEST,
                                         &stats_request.base, 0), 0);
  }
  proto_reader r;
  proto_frame f;
  proto_reader_init(&r, 0);
  assert_int_equal(proto_reader_feed(&r, w.data, w.len), 0);
  for (uint64_t i = 0; i < N; i++) {
    assert_int_equal(proto_reader_next(&r, &f), 1);
    assert_int_equal(f.type, EMBER__MSG_TYPE__MSG_CANCEL);
    Ember__Cancel *c = (Ember__Cancel *)proto_unpack(&f);
    assert_non_null(c);
    assert_int_equal(c->task_id, i);
    protobuf_c_message_free_unpacked(&c->base, NULL);
    if (i % 50 == 0) {
      assert_int_equal(proto_reader_next(&r, &f), 1);
      assert_int_equal(f.type, EMBER__MSG_TYPE__MSG_STATS_REQUEST);
      assert_int_equal(f.len, 0);
    }
  }
  assert_int_equal(proto_reader_next(&r, &f), 0);
  /* the buffer is reused once drained */
  assert_int_equal(r.start, r.end);
  proto_reader_free(&r);
  proto_wbuf_free(&w);
}

/* Frames split across many feeds of varying sizes, including one frame
 * larger than the reader's first chunk. */
static void frames_split_across_feeds(void **state) {
  enum { BIG = 200000 };
  uint8_t *big = __real_malloc(BIG);
  for (size_t i = 0; i < BIG; i++) big[i] = (uint8_t)(i ^ (i >> 8));
  Ember__PutBlock pb = EMBER__PUT_BLOCK__INIT;
  pb.block_id = 77;
  pb.size = BIG;
  pb.has_data = 1;
  pb.data.data = big;
  pb.data.len = BIG;

  proto_wbuf w = {0};
  assert_int_equal(proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_HELLO,
                                     &hello.base, 0), 0);
  assert_int_equal(proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_PUT_BLOCK,
                                     &pb.base, 0), 0);
  assert_int_equal(proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_SUBMIT,
                                     &submit.base, 0), 0);
  size_t ends[3];
  ends[0] = PROTO_HEADER_SIZE + protobuf_c_message_get_packed_size(&hello.base);
  ends[1] = ends[0] + PROTO_HEADER_SIZE +
            protobuf_c_message_get_packed_size(&pb.base);
  ends[2] = w.len;

  const size_t chunks[] = {1, 2, 3, 5, 7, 64, 4096, 70000};
  for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
    proto_reader r;
    proto_frame f;
    proto_reader_init(&r, 0);
    size_t off = 0, got = 0;
    while (off < w.len) {
      size_t n = chunks[c] + off % 3; /* vary the split points */
      if (n > w.len - off) n = w.len - off;
      assert_int_equal(proto_reader_feed(&r, w.data + off, n), 0);
      off += n;
      int rc;
      while ((rc = proto_reader_next(&r, &f)) == 1) {
        assert_in_range(got, 0, 2);
        /* a frame only once all its bytes are in */
        assert_in_range(ends[got], 0, off);
        if (got == 1) {
          Ember__PutBlock *m = (Ember__PutBlock *)proto_unpack(&f);
          assert_non_null(m);
          assert_int_equal(m->data.len, BIG);
          assert_memory_equal(m->data.data, big, BIG);
          protobuf_c_message_free_unpacked(&m->base, NULL);
        } else {
          ProtobufCMessage *m = proto_unpack(&f);
          assert_non_null(m);
          protobuf_c_message_free_unpacked(m, NULL);
        }
        got++;
      }
      assert_int_equal(rc, 0);
      /* and no frame is held back once complete */
      assert_true(got == 3 || ends[got] > off);
    }
    assert_int_equal(got, 3);
    proto_reader_free(&r);
  }
  proto_wbuf_free(&w);
  __real_free(big);
}

/* proto_reader_space/commit as a socket reader uses them: the space offered
 * fits the whole announced frame. */
static void space_fits_announced_frame(void **state) {
  enum { LEN = 300000 };
  proto_reader r;
  proto_frame f;
  uint8_t h[PROTO_HEADER_SIZE];
  proto_header_write(h, LEN, 200);
  proto_reader_init(&r, 0);
  assert_int_equal(proto_reader_feed(&r, h, sizeof h), 0);
  size_t avail = 0;
  int err = 0;
  uint8_t *dst = proto_reader_space(&r, &avail, &err);
  assert_non_null(dst);
  assert_in_range(avail, LEN, SIZE_MAX);
  memset(dst, 0x5a, LEN);
  proto_reader_commit(&r, LEN);
  assert_int_equal(proto_reader_next(&r, &f), 1);
  assert_int_equal(f.len, LEN);
  assert_int_equal(f.payload[LEN - 1], 0x5a);
  proto_reader_free(&r);
}

/* ------------------------------------------------------------------------ */
/* fd passing                                                                */

/* Read from sock into r until want frames are there; returns their count. */
static size_t recv_frames(int sock, proto_reader *r, proto_frame *frames,
                          size_t want) {
  size_t got = 0;
  while (got < want) {
    ssize_t n = proto_recv(sock, r);
    assert_in_range(n, 1, SSIZE_MAX);
    while (got < want && proto_reader_next(r, &frames[got]) == 1) got++;
  }
  return got;
}

static void fd_passing(void **state) {
  int sv[2];
  socket_pair(sv);
  int a = memfd_with("block a"), b = memfd_with("block b"),
      c = memfd_with("block c");

  proto_wbuf w1 = {0}, w2 = {0};
  frame_of(&w1, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &put_block.base);
  frame_of(&w2, EMBER__MSG_TYPE__MSG_RELEASE_BLOCK, &release_block.base);
  int one[1] = {a}, two[2] = {b, c};
  assert_int_equal(proto_send(sv[0], w1.data, w1.len, one, 1), 0);
  assert_int_equal(proto_send(sv[0], w2.data, w2.len, two, 2), 0);
  assert_int_equal(proto_send(sv[0], w2.data, w2.len, NULL, 0), 0);

  proto_reader r;
  proto_frame f[3];
  proto_reader_init(&r, 0);
  assert_int_equal(recv_frames(sv[1], &r, f, 3), 3);
  assert_int_equal(f[0].type, EMBER__MSG_TYPE__MSG_PUT_BLOCK);
  assert_int_equal(f[1].type, EMBER__MSG_TYPE__MSG_RELEASE_BLOCK);
  assert_int_equal(f[2].type, EMBER__MSG_TYPE__MSG_RELEASE_BLOCK);
  assert_int_equal(r.nfds, 3);

  /* in the order they were sent, new fds, close-on-exec */
  int got[3];
  const int sent[3] = {a, b, c};
  const char *text[3] = {"block a", "block b", "block c"};
  for (int i = 0; i < 3; i++) {
    got[i] = proto_reader_pop_fd(&r);
    assert_true(got[i] >= 0);
    assert_int_not_equal(got[i], sent[i]);
    assert_same_file(got[i], sent[i]);
    assert_fd_holds(got[i], text[i]);
    assert_int_equal(fcntl(got[i], F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  }
  assert_int_equal(proto_reader_pop_fd(&r), -1);
  assert_int_equal(r.nfds, 0);
  for (int i = 0; i < 3; i++) {
    close(got[i]);
    close(sent[i]);
  }
  proto_reader_free(&r);
  proto_wbuf_free(&w1);
  proto_wbuf_free(&w2);
  close(sv[0]);
  close(sv[1]);
}

/* Fds nobody popped are closed by proto_reader_free. */
static void unclaimed_fds_closed(void **state) {
  int baseline = count_open_fds();
  int sv[2];
  socket_pair(sv);
  int a = memfd_with("a"), b = memfd_with("b");
  int fds[2] = {a, b};
  assert_int_equal(proto_send(sv[0], "x", 1, fds, 2), 0);
  close(a);
  close(b);
  proto_reader r;
  proto_reader_init(&r, 0);
  assert_int_equal(proto_recv(sv[1], &r), 1);
  assert_int_equal(r.nfds, 2);
  int held[2] = {r.fds[0].fd, r.fds[1].fd};
  assert_true(fd_is_open(held[0]));
  assert_true(fd_is_open(held[1]));
  proto_reader_free(&r);
  assert_false(fd_is_open(held[0]));
  assert_false(fd_is_open(held[1]));
  close(sv[0]);
  close(sv[1]);
  assert_int_equal(count_open_fds(), baseline);
}

/* More fds than proto_recv's control buffer holds: MSG_CTRUNC, -EPROTO,
 * and every fd that arrived is closed. */
static void fds_truncated(void **state) {
  enum { N = PROTO_MAX_FDS_PER_SEND + 4 };
  int baseline = count_open_fds();
  int sv[2];
  socket_pair(sv);
  int fd = memfd_with("x");
  int fds[N];
  for (int i = 0; i < N; i++) fds[i] = fd;

  union {
    char buf[CMSG_SPACE(sizeof(int) * N)];
    struct cmsghdr align;
  } ctrl;
  memset(&ctrl, 0, sizeof ctrl);
  struct iovec iov = {.iov_base = "y", .iov_len = 1};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = ctrl.buf,
                       .msg_controllen = sizeof ctrl.buf};
  struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * N);
  memcpy(CMSG_DATA(c), fds, sizeof fds);
  assert_int_equal(sendmsg(sv[0], &msg, 0), 1);
  close(fd);

  proto_reader r;
  proto_reader_init(&r, 0);
  assert_int_equal(proto_recv(sv[1], &r), -EPROTO);
  assert_int_equal(r.nfds, 0);
  assert_int_equal(r.end - r.start, 0); /* nothing committed */
  proto_reader_free(&r);
  close(sv[0]);
  close(sv[1]);
  assert_int_equal(count_open_fds(), baseline);
}

/* More fds than the reader may hold pending: -ETOOMANYREFS, every fd of
 * that read is closed and its bytes are not taken; the ones it held before
 * are closed by proto_reader_free. max_fds lowers the bound. */
static void too_many_pending_fds(void **state) {
  int baseline = count_open_fds();
  int sv[2];
  socket_pair(sv);
  int fd = memfd_with("x");
  proto_reader r;
  proto_reader_init(&r, 0);
  for (int i = 0; i < PROTO_MAX_PENDING_FDS - 2; i++) {
    int d = dup(fd);
    assert_true(d >= 0);
    assert_int_equal(proto_reader_push_fd(&r, d), 0);
  }
  int fds[4] = {fd, fd, fd, fd};
  assert_int_equal(proto_send(sv[0], "zz", 2, fds, 4), 0);
  int before = count_open_fds();
  assert_int_equal(proto_recv(sv[1], &r), -ETOOMANYREFS);
  assert_int_equal(r.nfds, PROTO_MAX_PENDING_FDS - 2);
  assert_int_equal(r.end - r.start, 0);
  assert_int_equal(count_open_fds(), before); /* all four shut */
  int d = dup(sv[0]);
  assert_int_equal(proto_reader_push_fd(&r, d), 0);
  d = dup(sv[0]);
  assert_int_equal(proto_reader_push_fd(&r, d), 0);
  d = dup(sv[0]);
  assert_int_equal(proto_reader_push_fd(&r, d), EMBER_ETOOBIG);
  close(d);
  proto_reader_free(&r);

  /* a lower bound of the reader's own */
  proto_reader_init(&r, 0);
  r.max_fds = 3;
  assert_int_equal(proto_send(sv[0], "zz", 2, fds, 2), 0);
  assert_int_equal(proto_recv(sv[1], &r), 2);
  assert_int_equal(proto_send(sv[0], "zz", 2, fds, 2), 0);
  assert_int_equal(proto_recv(sv[1], &r), -ETOOMANYREFS);
  assert_int_equal(r.nfds, 2);
  proto_reader_free(&r);
  close(fd);
  close(sv[0]);
  close(sv[1]);
  assert_int_equal(count_open_fds(), baseline);
}

/* Fds go with the frames the message that carried them began: a PutBlock
 * takes one that came with its own bytes or before them, never one that
 * came later; fds whose message was read whole and that no frame took are
 * dropped; a refused one stays in its place. */
static void fds_by_position(void **state) {
  int baseline = count_open_fds();
  int sv[2];
  socket_pair(sv);
  int a = memfd_with("a"), b = memfd_with("b");
  proto_wbuf rel = {0}, put = {0};
  frame_of(&rel, EMBER__MSG_TYPE__MSG_RELEASE_BLOCK, &release_block.base);
  frame_of(&put, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &put_block.base);
  int two[2] = {a, a};
  assert_int_equal(proto_send(sv[0], rel.data, rel.len, two, 2), 0);
  assert_int_equal(proto_send(sv[0], put.data, put.len, &b, 1), 0);

  proto_reader r;
  proto_frame f;
  proto_reader_init(&r, 0);
  /* the first message: its frame, then its fds are nobody's */
  assert_int_equal(proto_recv(sv[1], &r), (ssize_t)rel.len);
  assert_int_equal(r.nfds, 2);
  assert_int_equal(proto_reader_next(&r, &f), 1);
  assert_int_equal(f.offset, 0);
  assert_int_equal(proto_reader_next(&r, &f), 0);
  assert_int_equal(proto_reader_drop_fds(&r, 0), 2);
  assert_int_equal(r.nfds, 0);
  /* the second: the PutBlock takes its own */
  assert_int_equal(proto_recv(sv[1], &r), (ssize_t)put.len);
  assert_int_equal(proto_reader_next(&r, &f), 1);
  assert_int_equal(f.offset, rel.len);
  int got = proto_reader_take_fd(&r, f.offset);
  assert_true(got >= 0);
  assert_fd_holds(got, "b");
  close(got);

  /* a PutBlock without one does not take one that came in a later read
   * (one read may bring it with the bytes before its message: the kernel
   * returns a message's fds with its first bytes, and those may follow
   * others in the same read) */
  assert_int_equal(proto_send(sv[0], put.data, put.len, NULL, 0), 0);
  assert_int_equal(proto_recv(sv[1], &r), (ssize_t)put.len);
  assert_int_equal(proto_send(sv[0], rel.data, rel.len, &b, 1), 0);
  assert_int_equal(proto_recv(sv[1], &r), (ssize_t)rel.len);
  assert_int_equal(proto_reader_next(&r, &f), 1);
  assert_int_equal(proto_reader_take_fd(&r, f.offset), -1);
  assert_int_equal(r.nfds, 1);
  /* refused on arrival: its place is kept, the descriptor is not */
  int held = r.fds[0].fd;
  proto_reader_refuse_fd(&r, 0);
  assert_false(fd_is_open(held));
  assert_int_equal(proto_reader_take_fd(&r, UINT64_MAX), PROTO_FD_REFUSED);
  proto_reader_free(&r);
  proto_wbuf_free(&rel);
  proto_wbuf_free(&put);
  close(a);
  close(b);
  close(sv[0]);
  close(sv[1]);
  assert_int_equal(count_open_fds(), baseline);
}

/* After a large frame the buffer goes back to a chunk; a frame on its way
 * keeps its room. */
static void shrinks_after_large_frame(void **state) {
  enum { LEN = 300000 };
  uint8_t *buf = __real_malloc(PROTO_HEADER_SIZE + LEN);
  proto_header_write(buf, LEN, 200);
  memset(buf + PROTO_HEADER_SIZE, 0x11, LEN);
  proto_reader r;
  proto_frame f;
  proto_reader_init(&r, 0);
  assert_int_equal(proto_reader_feed(&r, buf, PROTO_HEADER_SIZE + LEN), 0);
  assert_in_range(r.cap, LEN, SIZE_MAX);
  assert_int_equal(proto_reader_held(&r), r.cap - FIRST_CHUNK);
  /* not while the frame is there, nor while one is on its way */
  proto_reader_shrink(&r);
  assert_in_range(r.cap, LEN, SIZE_MAX);
  assert_int_equal(proto_reader_next(&r, &f), 1);
  assert_int_equal(f.payload[LEN - 1], 0x11);
  assert_int_equal(proto_reader_feed(&r, buf, 1000), 0);
  proto_reader_shrink(&r);
  assert_in_range(r.cap, LEN, SIZE_MAX);
  assert_int_equal(proto_reader_feed(&r, buf + 1000,
                                     PROTO_HEADER_SIZE + LEN - 1000), 0);
  assert_int_equal(proto_reader_next(&r, &f), 1);
  /* then back to a chunk, with what is left kept */
  assert_int_equal(proto_reader_feed(&r, buf, 3), 0);
  proto_reader_shrink(&r);
  assert_int_equal(r.cap, FIRST_CHUNK);
  assert_int_equal(proto_reader_held(&r), 0);
  assert_int_equal(r.end - r.start, 3);
  assert_memory_equal(r.buf + r.start, buf, 3);
  proto_reader_free(&r);
  __real_free(buf);
}

/* max_frame may change between calls: a frame already given room is
 * taken whatever it becomes, a new one is checked against it; a small
 * limit (before a handshake) keeps the first buffer that small. */
static void limit_changes(void **state) {
  enum { LEN = 200000 };
  uint8_t *buf = __real_malloc(PROTO_HEADER_SIZE + LEN);
  proto_header_write(buf, LEN, 200);
  memset(buf + PROTO_HEADER_SIZE, 0x22, LEN);
  proto_reader r;
  proto_frame f;
  proto_reader_init(&r, PROTO_MAX_HELLO_FRAME);
  assert_int_equal(proto_reader_feed(&r, buf, 10), 0);
  assert_int_equal(r.cap, PROTO_HEADER_SIZE + PROTO_MAX_HELLO_FRAME);
  assert_int_equal(proto_reader_next(&r, &f), EMBER_ETOOBIG);
  proto_reader_free(&r);

  proto_reader_init(&r, LEN);
  assert_int_equal(proto_reader_feed(&r, buf, 1000), 0);
  size_t avail;
  int err = 0;
  assert_non_null(proto_reader_space(&r, &avail, &err)); /* room for it */
  r.max_frame = 1000;
  assert_int_equal(proto_reader_feed(&r, buf + 1000,
                                     PROTO_HEADER_SIZE + LEN - 1000), 0);
  assert_int_equal(proto_reader_next(&r, &f), 1);
  assert_int_equal(f.len, LEN);
  assert_int_equal(proto_reader_feed(&r, buf, 10), 0);
  assert_int_equal(proto_reader_next(&r, &f), EMBER_ETOOBIG);
  proto_reader_free(&r);
  __real_free(buf);
}

static void send_and_recv_errors(void **state) {
  int sv[2];
  socket_pair(sv);
  int fds[PROTO_MAX_FDS_PER_SEND + 1] = {0};
  assert_int_equal(proto_send(sv[0], "x", 1, fds, PROTO_MAX_FDS_PER_SEND + 1),
                   -EINVAL);
  /* nothing there: -EAGAIN, not a block */
  proto_reader r;
  proto_reader_init(&r, 0);
  assert_int_equal(proto_recv(sv[1], &r), -EAGAIN);
  assert_int_equal(proto_recv(-1, &r), -EBADF);
  /* end of stream */
  close(sv[0]);
  assert_int_equal(proto_recv(sv[1], &r), 0);
  proto_reader_free(&r);
  /* a peer that is gone */
  socket_pair(sv);
  close(sv[1]);
  assert_int_equal(proto_send(sv[0], "x", 1, NULL, 0), -EPIPE);
  close(sv[0]);
}

/* A large frame through the socket in several recvmsg calls. */
static void large_frame_over_socket(void **state) {
  enum { BIG = 1 << 20 };
  int sv[2];
  socket_pair(sv);
  uint8_t *big = __real_malloc(BIG);
  for (size_t i = 0; i < BIG; i++) big[i] = (uint8_t)(i * 31);
  Ember__PutBlock pb = EMBER__PUT_BLOCK__INIT;
  pb.block_id = 1;
  pb.size = BIG;
  pb.has_data = 1;
  pb.data.data = big;
  pb.data.len = BIG;
  proto_wbuf w = {0};
  assert_int_equal(proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_PUT_BLOCK,
                                     &pb.base, 0), 0);
  /* the writer side must not block on a full socket buffer: use a thread-
   * free approach by sending from a child process */
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    close(sv[1]);
    _exit(proto_send(sv[0], w.data, w.len, NULL, 0) == 0 ? 0 : 1);
  }
  close(sv[0]);
  proto_reader r;
  proto_frame f;
  proto_reader_init(&r, 0);
  int calls = 0;
  for (;;) {
    ssize_t n = proto_recv(sv[1], &r);
    if (n == -EAGAIN) {
      struct timeval tv = {.tv_sec = 0, .tv_usec = 10000};
      fd_set set;
      FD_ZERO(&set);
      FD_SET(sv[1], &set);
      select(sv[1] + 1, &set, NULL, NULL, &tv);
      continue;
    }
    assert_in_range(n, 1, SSIZE_MAX);
    calls++;
    if (proto_reader_next(&r, &f) == 1) break;
  }
  assert_true(calls > 1);
  assert_int_equal(f.len, w.len - PROTO_HEADER_SIZE);
  Ember__PutBlock *m = (Ember__PutBlock *)proto_unpack(&f);
  assert_non_null(m);
  assert_memory_equal(m->data.data, big, BIG);
  protobuf_c_message_free_unpacked(&m->base, NULL);
  int status = -1;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_int_equal(status, 0);
  proto_reader_free(&r);
  proto_wbuf_free(&w);
  close(sv[1]);
  __real_free(big);
}

/* ------------------------------------------------------------------------ */
/* The output buffer                                                         */

static void wbuf_append_consume(void **state) {
  proto_wbuf w = {0};
  size_t l1 = PROTO_HEADER_SIZE + protobuf_c_message_get_packed_size(&hello.base);
  size_t l2 = PROTO_HEADER_SIZE + protobuf_c_message_get_packed_size(&submit.base);
  assert_int_equal(proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_HELLO,
                                     &hello.base, 0), 0);
  assert_int_equal(proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_SUBMIT,
                                     &submit.base, 0), 0);
  assert_int_equal(w.len, l1 + l2);
  assert_int_equal(w.sent, 0);
  assert_int_equal(w.data[l1 + 4], EMBER__MSG_TYPE__MSG_SUBMIT);

  proto_wbuf_consume(&w, 3);
  assert_int_equal(w.sent, 3);
  assert_int_equal(w.len, l1 + l2);
  proto_wbuf_consume(&w, l1 - 3);
  assert_int_equal(w.sent, l1);
  /* appending while partly sent keeps what is unsent */
  assert_int_equal(proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_CANCEL,
                                     &cancel_msg.base, 0), 0);
  size_t l3 = PROTO_HEADER_SIZE +
              protobuf_c_message_get_packed_size(&cancel_msg.base);
  assert_int_equal(w.len, l1 + l2 + l3);
  assert_int_equal(w.data[w.sent + 4], EMBER__MSG_TYPE__MSG_SUBMIT);

  /* all sent: empty again, small buffer kept */
  uint8_t *data = w.data;
  proto_wbuf_consume(&w, l2 + l3);
  assert_int_equal(w.len, 0);
  assert_int_equal(w.sent, 0);
  assert_ptr_equal(w.data, data);
  assert_int_equal(proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_HELLO,
                                     &hello.base, 0), 0);
  assert_int_equal(w.len, l1);
  assert_int_equal(w.data[4], EMBER__MSG_TYPE__MSG_HELLO);

  /* a burst of large frames: the memory goes back once all is sent */
  enum { BIG = 3 << 20 };
  uint8_t *big = calloc(1, BIG);
  Ember__PutBlock pb = EMBER__PUT_BLOCK__INIT;
  pb.block_id = 1;
  pb.size = BIG;
  pb.has_data = 1;
  pb.data.data = big;
  pb.data.len = BIG;
  assert_int_equal(proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_PUT_BLOCK,
                                     &pb.base, 0), 0);
  assert_in_range(w.cap, (size_t)BIG, SIZE_MAX);
  proto_wbuf_consume(&w, w.len);
  assert_int_equal(w.len, 0);
  assert_null(w.data);
  assert_int_equal(w.cap, 0);
  /* and it works again afterwards */
  assert_int_equal(proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_HELLO,
                                     &hello.base, 0), 0);
  assert_int_equal(w.len, l1);
  __real_free(big);

  proto_wbuf_free(&w);
  assert_null(w.data);
  assert_int_equal(w.len, 0);
  assert_int_equal(w.cap, 0);
  proto_wbuf_free(&w); /* twice is fine */
}

/* ------------------------------------------------------------------------ */
/* Allocation failure                                                        */

/* Feed a stream of frames (one larger than the first chunk) in pieces and
 * build output buffers, failing the Nth allocation each time: every call
 * either works or says EMBER_ENOMEM, state stays usable, nothing leaks. */
static void allocation_failures(void **state) {
  enum { BIG = 150000 };
  uint8_t *big = calloc(1, BIG);
  Ember__PutBlock pb = EMBER__PUT_BLOCK__INIT;
  pb.block_id = 3;
  pb.size = BIG;
  pb.has_data = 1;
  pb.data.data = big;
  pb.data.len = BIG;
  proto_wbuf input = {0};
  assert_int_equal(proto_wbuf_append(&input, EMBER__MSG_TYPE__MSG_HELLO,
                                     &hello.base, 0), 0);
  assert_int_equal(proto_wbuf_append(&input, EMBER__MSG_TYPE__MSG_PUT_BLOCK,
                                     &pb.base, 0), 0);
  assert_int_equal(proto_wbuf_append(&input, EMBER__MSG_TYPE__MSG_SUBMIT,
                                     &submit.base, 0), 0);

  int n, failures = 0, done = 0;
  for (n = 1; !done; n++) {
    long live_before = alloc_live;
    proto_reader r;
    proto_wbuf w = {0};
    proto_frame f;
    int frames = 0, rc = 0;
    alloc_count = 0;
    alloc_fail_at = n;
    proto_reader_init(&r, 0);
    for (size_t off = 0; off < input.len && rc == 0;) {
      size_t len = input.len - off < 40000 ? input.len - off : 40000;
      size_t old_have = r.end - r.start;
      rc = proto_reader_feed(&r, input.data + off, len);
      if (rc) {
        /* a failed feed may have stored part of it; the buffer is intact */
        assert_int_equal(rc, EMBER_ENOMEM);
        assert_in_range(r.start, 0, r.end);
        assert_in_range(r.end - r.start, old_have, r.cap);
        assert_in_range(r.end, 0, r.cap);
        break;
      }
      off += len;
      while (proto_reader_next(&r, &f) == 1) frames++;
    }
    if (rc == 0) {
      rc = proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_HELLO, &hello.base, 0);
      if (rc) {
        assert_int_equal(w.len, 0);
        assert_null(w.data);
      }
    }
    if (rc == 0) {
      uint8_t *old = w.data;
      size_t old_len = w.len;
      rc = proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &pb.base, 0);
      if (rc) { /* the buffer is untouched */
        assert_ptr_equal(w.data, old);
        assert_int_equal(w.len, old_len);
        assert_int_equal(w.data[4], EMBER__MSG_TYPE__MSG_HELLO);
      }
    }
    alloc_fail_at = 0;
    if (rc == 0) {
      assert_int_equal(frames, 3);
      done = 1;
    } else {
      assert_int_equal(rc, EMBER_ENOMEM);
      failures++;
    }
    proto_reader_free(&r);
    proto_wbuf_free(&w);
    assert_int_equal(alloc_live, live_before);
  }
  assert_true(failures >= 3); /* each allocation above was made to fail */

  /* proto_recv cannot get room: -ENOMEM, the bytes stay in the socket */
  int sv[2];
  socket_pair(sv);
  assert_int_equal(proto_send(sv[0], input.data, 100, NULL, 0), 0);
  proto_reader r;
  proto_reader_init(&r, 0);
  alloc_count = 0;
  alloc_fail_at = 1;
  assert_int_equal(proto_recv(sv[1], &r), -ENOMEM);
  alloc_fail_at = 0;
  assert_int_equal(proto_recv(sv[1], &r), 100);
  proto_reader_free(&r);
  close(sv[0]);
  close(sv[1]);

  proto_wbuf_free(&input);
  __real_free(big);
}

int main(void) {
  const struct CMUnitTest tests[] = {
    cmocka_unit_test(round_trip_each_type),
    cmocka_unit_test(decoded_fields),
    cmocka_unit_test(type_table),
    cmocka_unit_test(truncated_prefixes),
    cmocka_unit_test(over_limit_without_allocating),
    cmocka_unit_test(exactly_at_limit),
    cmocka_unit_test(unknown_type),
    cmocka_unit_test(malformed_payload),
    cmocka_unit_test(many_frames_one_feed),
    cmocka_unit_test(frames_split_across_feeds),
    cmocka_unit_test(space_fits_announced_frame),
    cmocka_unit_test(fd_passing),
    cmocka_unit_test(unclaimed_fds_closed),
    cmocka_unit_test(fds_truncated),
    cmocka_unit_test(too_many_pending_fds),
    cmocka_unit_test(fds_by_position),
    cmocka_unit_test(shrinks_after_large_frame),
    cmocka_unit_test(limit_changes),
    cmocka_unit_test(send_and_recv_errors),
    cmocka_unit_test(large_frame_over_socket),
    cmocka_unit_test(wbuf_append_consume),
    cmocka_unit_test(allocation_failures),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
