/*
 * test_nam_state - out and state blocks (ABI v2) through the real ember-nam
 * and through libember's embedded engine, with the test accelerator tally
 * loaded as a plugin (tally.so in EMBER_TEST_PLUGIN_DIR: ember-nam's
 * plugin_dir, and ember_options.plugin_dir in embedded mode). The same
 * code runs in each client mode:
 *
 *   state      one state block updated by 1,000 tasks (ember_submit with
 *              states), read and synced every 100: each read is the
 *              reference (tally_step) of its version; on cpu, and on the
 *              NAM's fpga-emu board (embedded mode has no board)
 *   chained    task 1: input -> out A, task 2: A -> out B; B read back is
 *              the reference, and the client's byte counters show that A
 *              never crossed the socket (unix socket and TCP inline),
 *              against a run that reads A back and sends it again
 *   state loss a second NAM whose board fails 20% of tasks (fixed seed),
 *              state on the board: a failed task is EMBER_ESTATE, so are
 *              later tasks and reads until ember_block_restore, which gives
 *              the synced version; replaying ends at the right value, and
 *              no read ever gives a wrong one
 *   errors     an output id in use, an unknown state id, a plain block
 *              named as state (by the library: EMBER_EINVAL; raw: by the
 *              NAM), ember_block_sync on a plain block, a BlockOp for
 *              another connection's block id (EMBER_ENOTFOUND), malformed
 *              and unknown BlockOps, a protocol-1 Hello (EMBER_EVERSION):
 *              each a clear error, and the daemon serves on
 *   plugins    embedded: tally listed with its origin; a plugin_dir whose
 *              tally.so is group-writable is refused, and said so
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frame.h"
#include "harness.h"
#include "raw_conn.h"
#include "tally.h"

#define N 64            /* values in a state block */
#define NCHAIN 4096     /* values in a chained block: 32 KiB */
#define TASKS 1000
#define LOSS_TASKS 200

static nam_proc nam, faulty;

#define CHECK_OK(call)                                                       \
  do {                                                                       \
    int rc_ = (call);                                                        \
    if (rc_ != 0) {                                                          \
      fprintf(stderr, "%s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,     \
              ember_errname(rc_), ember_last_error());                       \
      exit(1);                                                               \
    }                                                                        \
  } while (0)

static ember_client *open_client(const char *address) {
  int embedded = strcmp(address, "embedded") == 0;
  ember_options o = {.client_name = "test_nam_state", .no_fallback = 1,
                     .embedded_threads = 2,
                     .plugin_dir = embedded ? EMBER_TEST_PLUGIN_DIR : ""};
  ember_client *c;
  CHECK_OK(ember_connect(address, &o, &c));
  if (embedded && ember_last_error()[0]) {
    fprintf(stderr, "embedded connect said: %s\n", ember_last_error());
    exit(1);
  }
  return c;
}

static ember_block *make_block(ember_client *c, const uint64_t *v, size_t n,
                               unsigned flags) {
  void *data;
  ember_block *b;
  CHECK_OK(ember_block_alloc(c, n * 8, flags, &data, &b));
  memcpy(data, v, n * 8);
  CHECK_OK(ember_block_seal(b));
  return b;
}

/* Submit one tally task and wait; returns its status. */
static int tally(ember_client *c, uint64_t k, ember_block *const *in,
                 size_t n_in, ember_block *state, ember_block **out,
                 const char *platform, char *msg, size_t msg_len) {
  ember_submit_options so = {.platform = platform};
  if (state) {
    so.states = &state;
    so.n_states = 1;
  }
  if (out) {
    so.outputs = out;
    so.n_outputs = 1;
  }
  ember_task *t;
  int rc = ember_submit(c, "tally", &k, sizeof k, in, n_in, &so, &t);
  if (rc) {
    snprintf(msg, msg_len, "%s", ember_last_error());
    return rc;
  }
  CHECK_OK(ember_task_wait(t, 60000));
  rc = ember_task_status(t);
  snprintf(msg, msg_len, "%s", ember_task_message(t));
  ember_task_free(t);
  return rc;
}

static uint64_t initial(size_t i) { return i * 1000 + 1; }

/* The state after versions 1..v (task j applies k = j). */
static void reference(uint64_t *out, uint64_t v) {
  for (size_t i = 0; i < N; i++) {
    uint64_t s = initial(i);
    for (uint64_t j = 1; j <= v; j++) s = tally_step(s, j, 0);
    out[i] = s;
  }
}

/* Read b: it must be want (n values), and at version (0: any). */
static void expect_read(ember_block *b, const uint64_t *want, size_t n,
                        uint64_t version, const char *what) {
  void *data;
  size_t size;
  uint64_t v;
  int rc = ember_block_read(b, &data, &size, &v);
  if (rc) {
    fprintf(stderr, "%s: read: %s (%s)\n", what, ember_errname(rc),
            ember_last_error());
    exit(1);
  }
  CHECK_EQ(size, n * 8);
  if (version) CHECK_EQ(v, version);
  if (memcmp(data, want, n * 8) != 0) {
    fprintf(stderr, "%s: wrong bytes: first %llu, want %llu\n", what,
            (unsigned long long)((uint64_t *)data)[0],
            (unsigned long long)want[0]);
    exit(1);
  }
  free(data);
}

/* ---- (a) 1,000 updates ---------------------------------------------------- */

static void run_state(ember_client *c, const char *platform) {
  uint64_t v[N], want[N];
  for (size_t i = 0; i < N; i++) v[i] = initial(i);
  ember_block *s = make_block(c, v, N, EMBER_BLOCK_STATE);
  char msg[512];
  for (uint64_t j = 1; j <= TASKS; j++) {
    int rc = tally(c, j, NULL, 0, s, NULL, platform, msg, sizeof msg);
    if (rc) {
      fprintf(stderr, "%s on %s: task %llu: %s (%s)\n",
              ember_client_address(c), platform, (unsigned long long)j,
              ember_errname(rc), msg);
      exit(1);
    }
    if (j % 100 == 0) {
      reference(want, j);
      expect_read(s, want, N, j, "state");
      uint64_t synced = 0;
      CHECK_OK(ember_block_sync(s, &synced));
      CHECK_EQ(synced, j);
    }
  }
  reference(want, TASKS);
  expect_read(s, want, N, TASKS, "final state");
  ember_block_release(s);
  printf("  state: %d updates on %s: ok\n", TASKS, platform);
}

/* ---- (b) chained out blocks ------------------------------------------------ */

static uint64_t crossed(const ember_client_stats *a,
                        const ember_client_stats *b) {
  return (b->bytes_sent - a->bytes_sent) +
         (b->bytes_received - a->bytes_received) +
         (b->bytes_sent_by_fd - a->bytes_sent_by_fd);
}

static void run_chained(ember_client *c) {
  int remote = strcmp(ember_client_address(c), "embedded") != 0;
  static uint64_t in[NCHAIN], want[NCHAIN];
  for (size_t i = 0; i < NCHAIN; i++) {
    in[i] = i + 7;
    want[i] = tally_step(tally_step(in[i], 5, 0), 9, 0);
  }
  ember_block *inb = make_block(c, in, NCHAIN, 0);
  ember_block *a, *b, *b2;
  char msg[512];
  ember_client_stats s0 = {.size = sizeof s0}, s1 = s0, s2 = s0, s3 = s0,
                     s4 = s0;
  ember_client_get_stats(c, &s0);
  CHECK_OK(tally(c, 5, &inb, 1, NULL, &a, NULL, msg, sizeof msg));
  ember_client_get_stats(c, &s1);
  CHECK_OK(tally(c, 9, &a, 1, NULL, &b, NULL, msg, sizeof msg));
  ember_client_get_stats(c, &s2);
  expect_read(b, want, NCHAIN, 0, "chained B");
  ember_client_get_stats(c, &s3);

  /* the same through the client: A read back and sent again */
  void *abytes;
  size_t asize;
  CHECK_OK(ember_block_read(a, &abytes, &asize, NULL));
  CHECK_EQ(asize, NCHAIN * 8);
  ember_block *acopy = make_block(c, abytes, NCHAIN, 0);
  free(abytes);
  CHECK_OK(tally(c, 9, &acopy, 1, NULL, &b2, NULL, msg, sizeof msg));
  ember_client_get_stats(c, &s4);
  expect_read(b2, want, NCHAIN, 0, "round-tripped B");

  uint64_t size = NCHAIN * 8, chained = crossed(&s1, &s2),
           round_trip = crossed(&s3, &s4);
  printf("  chained (%s): task 1 %llu bytes (in: %llu), task 2 %llu, read B "
         "%llu; round trip through the client %llu\n",
         ember_client_address(c), (unsigned long long)crossed(&s0, &s1),
         (unsigned long long)size, (unsigned long long)chained,
         (unsigned long long)crossed(&s2, &s3),
         (unsigned long long)round_trip);
  if (remote) {
    /* the input went to the NAM, A did not come back nor go again */
    CHECK(crossed(&s0, &s1) >= size);
    CHECK(chained < size / 8);
    CHECK(crossed(&s2, &s3) >= size); /* reading B brings B */
    CHECK(round_trip >= 2 * size);    /* A back, and A again */
  } else {
    CHECK_EQ(crossed(&s0, &s4), 0);
  }
  ember_block_release(acopy);
  ember_block_release(b2);
  ember_block_release(b);
  ember_block_release(a);
  ember_block_release(inb);
}

/* ---- (c) state loss --------------------------------------------------------- */

static void run_state_loss(ember_client *c) {
  uint64_t v[N], want[N];
  for (size_t i = 0; i < N; i++) v[i] = initial(i);
  ember_block *s = make_block(c, v, N, EMBER_BLOCK_STATE);
  uint64_t done = 0, synced = 0;
  unsigned lost = 0;
  char msg[512];
  while (done < LOSS_TASKS) {
    int rc = tally(c, done + 1, NULL, 0, s, NULL, "fpga-emu", msg, sizeof msg);
    if (rc == 0) {
      done++;
      if (done % 10 == 0) {
        reference(want, done);
        expect_read(s, want, N, done, "state between losses");
        CHECK_OK(ember_block_sync(s, &synced));
        CHECK_EQ(synced, done);
      }
      continue;
    }
    if (rc != EMBER_ESTATE) {
      fprintf(stderr, "task %llu: %s (%s), not ESTATE\n",
              (unsigned long long)done + 1, ember_errname(rc), msg);
      exit(1);
    }
    if (!lost) printf("  first loss: %s\n", msg);
    lost++;
    /* nothing runs on it, nothing reads it, until restored */
    CHECK_EQ(tally(c, done + 1, NULL, 0, s, NULL, "fpga-emu", msg, sizeof msg),
             EMBER_ESTATE);
    void *data;
    size_t size;
    CHECK_EQ(ember_block_read(s, &data, &size, NULL), EMBER_ESTATE);
    uint64_t version = ~0ull;
    CHECK_OK(ember_block_restore(s, &version));
    CHECK_EQ(version, synced);
    done = synced;
    reference(want, done);
    expect_read(s, want, N, 0, "restored state");
  }
  CHECK(lost > 0);
  reference(want, LOSS_TASKS);
  expect_read(s, want, N, 0, "state after the losses");
  ember_block_release(s);
  printf("  state loss: %u losses in %d updates, restored each time: ok\n",
         lost, LOSS_TASKS);
}

/* ---- (d) errors: through the library ---------------------------------------- */

static void run_client_errors(ember_client *c) {
  uint64_t v[N];
  for (size_t i = 0; i < N; i++) v[i] = initial(i);
  ember_block *plain = make_block(c, v, N, 0);
  char msg[512];
  CHECK_EQ(tally(c, 1, NULL, 0, plain, NULL, NULL, msg, sizeof msg),
           EMBER_EINVAL);
  CHECK(strstr(msg, "EMBER_BLOCK_STATE") != NULL);
  CHECK_EQ(ember_block_sync(plain, NULL), EMBER_EINVAL);
  CHECK(strstr(ember_last_error(), "not a state block") != NULL);
  CHECK_EQ(ember_block_restore(plain, NULL), EMBER_EINVAL);
  ember_block_release(plain);
}

/* ---- (d) errors: raw frames -------------------------------------------------- */

/* over TCP (raw_conn.h): blocks travel inline (a unix socket wants sealed
 * memfds); every answer comes within 10 s */
enum { RECV_MS = 10000 };

static ProtobufCMessage *expect_type(raw_conn *r, uint8_t want) {
  uint8_t type;
  ProtobufCMessage *m = raw_recv(r, &type, RECV_MS);
  if (!m || type != want) {
    fprintf(stderr, "expected %s, got %s\n", proto_type_name(want),
            m ? proto_type_name(type) : "the end of the stream");
    exit(1);
  }
  return m;
}

/* e is an Error with code whose message contains text; frees it. */
static void check_error(Ember__Error *e, int code, const char *text) {
  CHECK(e != NULL);
  printf("    Error %s: %s\n", ember_errname(e->code), e->message);
  if (e->code != code || !strstr(e->message, text)) {
    fprintf(stderr, "expected %s containing '%s'\n", ember_errname(code), text);
    exit(1);
  }
  protobuf_c_message_free_unpacked(&e->base, NULL);
}

/* The next frame is such an Error. */
static void expect_error(raw_conn *r, int code, const char *text) {
  check_error((Ember__Error *)expect_type(r, EMBER__MSG_TYPE__MSG_ERROR), code,
              text);
}

/* A BlockReply to request_id with status whose message contains text. */
static void expect_block_reply(raw_conn *r, uint64_t request_id, int status,
                               const char *text) {
  Ember__BlockReply *b =
      (Ember__BlockReply *)expect_type(r, EMBER__MSG_TYPE__MSG_BLOCK_REPLY);
  printf("    BlockReply %llu %s: %s\n", (unsigned long long)b->request_id,
         ember_errname(b->status), b->message ? b->message : "");
  CHECK_EQ(b->request_id, request_id);
  CHECK_EQ(b->status, status);
  if (text) CHECK(b->message && strstr(b->message, text));
  protobuf_c_message_free_unpacked(&b->base, NULL);
}

static void greeted(raw_conn *r) {
  raw_open_tcp(r, nam.port);
  raw_greet(r, NULL, RECV_MS);
}

static void put_inline(raw_conn *r, uint64_t id, unsigned flags) {
  static uint64_t v[N];
  Ember__PutBlock p = EMBER__PUT_BLOCK__INIT;
  p.block_id = id;
  p.size = sizeof v;
  p.has_data = 1;
  p.data.data = (uint8_t *)v;
  p.data.len = sizeof v;
  if (flags) {
    p.has_flags = 1;
    p.flags = flags;
  }
  raw_send(r, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &p.base, -1);
}

static void submit(raw_conn *r, uint64_t task_id, uint64_t *in, size_t n_in,
                   uint64_t *out, size_t n_out, uint64_t *st, size_t n_st) {
  uint64_t k = 1;
  Ember__Submit s = EMBER__SUBMIT__INIT;
  s.task_id = task_id;
  s.accelerator = "tally";
  s.has_params = 1;
  s.params.data = (uint8_t *)&k;
  s.params.len = sizeof k;
  s.input_blocks = in;
  s.n_input_blocks = n_in;
  s.output_blocks = out;
  s.n_output_blocks = n_out;
  s.state_blocks = st;
  s.n_state_blocks = n_st;
  raw_send(r, EMBER__MSG_TYPE__MSG_SUBMIT, &s.base, -1);
}

static void block_op(raw_conn *r, uint64_t request_id, uint64_t block_id,
                     int op) {
  Ember__BlockOp m = EMBER__BLOCK_OP__INIT;
  m.request_id = request_id;
  m.block_id = block_id;
  m.op = (Ember__BlockOp__Op)op;
  raw_send(r, EMBER__MSG_TYPE__MSG_BLOCK_OP, &m.base, -1);
}

/* other: a library client of the same NAM that holds state block
 * other_id (ids are per connection: the raw client's namespace lacks it) */
static void run_raw_errors(uint64_t other_id) {
  raw_conn r;
  printf("  protocol-1 Hello:\n");
  raw_open_tcp(&r, nam.port);
  check_error(raw_hello(&r, 1, NULL, RECV_MS), EMBER_EVERSION,
              "protocol version 1");
  CHECK(raw_recv(&r, &(uint8_t){0}, RECV_MS) == NULL);
  raw_close(&r);

  printf("  submits naming blocks wrongly:\n");
  greeted(&r);
  put_inline(&r, 1, 0);
  put_inline(&r, 2, EMBER_BLOCK_STATE);
  uint64_t in = 1, out_in_use = 2, unknown = 99, plain = 1;
  submit(&r, 1, &in, 1, &out_in_use, 1, NULL, 0);
  expect_error(&r, EMBER_EINVAL, "in use");
  submit(&r, 2, NULL, 0, NULL, 0, &unknown, 1);
  expect_error(&r, EMBER_ENOTFOUND, "99");
  submit(&r, 3, NULL, 0, NULL, 0, &plain, 1);
  expect_error(&r, EMBER_EINVAL, "state");

  printf("  block ops:\n");
  block_op(&r, 10, other_id, EMBER__BLOCK_OP__OP__READ);
  expect_block_reply(&r, 10, EMBER_ENOTFOUND, NULL);
  block_op(&r, 11, 1, EMBER__BLOCK_OP__OP__SYNC);
  expect_block_reply(&r, 11, EMBER_EINVAL, NULL);
  block_op(&r, 12, 1, 7);
  expect_error(&r, EMBER_EPROTO, "unknown block op 7");
  uint8_t malformed[9] = {4, 0, 0, 0, EMBER__MSG_TYPE__MSG_BLOCK_OP,
                          0xff, 0xff, 0xff, 0xff};
  raw_send_bytes(&r, malformed, sizeof malformed, -1);
  expect_error(&r, EMBER_EPROTO, "malformed BlockOp");
  /* missing required fields */
  uint8_t empty[5] = {0, 0, 0, 0, EMBER__MSG_TYPE__MSG_BLOCK_OP};
  raw_send_bytes(&r, empty, sizeof empty, -1);
  expect_error(&r, EMBER_EPROTO, "malformed BlockOp");
  /* the connection goes on: its own state block reads */
  block_op(&r, 13, 2, EMBER__BLOCK_OP__OP__READ);
  expect_block_reply(&r, 13, 0, NULL);
  raw_close(&r);
}

/* ---- plugins in embedded mode ----------------------------------------------- */

static void run_embedded_plugins(void) {
  ember_client *c = open_client("embedded");
  ember_listing *l;
  CHECK_OK(ember_list_accelerators(c, &l));
  int found = 0;
  for (size_t i = 0; i < ember_listing_accelerators(l); i++) {
    const ember_accel_info *a = ember_listing_accelerator(l, i);
    if (strcmp(a->name, "tally") == 0) {
      found = 1;
      CHECK(strstr(a->origin, "tally.so") != NULL);
    }
  }
  CHECK(found);
  ember_listing_free(l);
  ember_client_stats st = {.size = sizeof st};
  ember_client_get_stats(c, &st);
  CHECK_EQ(st.plugins_loaded, 1);
  CHECK_EQ(st.plugins_refused, 0);
  ember_close(c);

  /* a group-writable copy is refused, and ember_connect says so */
  char dir[] = "/tmp/ember-state-plugins.XXXXXX", from[512], to[600];
  CHECK(mkdtemp(dir) != NULL);
  snprintf(from, sizeof from, "%s/tally.so", EMBER_TEST_PLUGIN_DIR);
  snprintf(to, sizeof to, "%s/tally.so", dir);
  FILE *fi = fopen(from, "rb"), *fo = fopen(to, "wb");
  CHECK(fi && fo);
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, fi)) > 0)
    CHECK(fwrite(buf, 1, n, fo) == n);
  fclose(fi);
  CHECK(fclose(fo) == 0);
  CHECK_EQ(chmod(to, 0664), 0);
  ember_options o = {.client_name = "test_nam_state", .plugin_dir = dir};
  CHECK_OK(ember_connect("embedded", &o, &c));
  printf("  refused: %s\n", ember_last_error());
  CHECK(strstr(ember_last_error(), "refused (unsafe)") != NULL);
  CHECK(strstr(ember_last_error(), "writable by its group") != NULL);
  ember_client_get_stats(c, &st);
  CHECK_EQ(st.plugins_loaded, 0);
  CHECK_EQ(st.plugins_refused, 1);
  ember_close(c);
  unlink(to);
  rmdir(dir);
}

int main(void) {
  char plugin_set[600];
  snprintf(plugin_set, sizeof plugin_set, "plugin_dir=%s",
           EMBER_TEST_PLUGIN_DIR);
  const char *sets[] = {plugin_set, "cpu_workers=2", "opencl.enabled=false",
                        "fpga-emu.boards=1", "fpga-emu.clock=virtual",
                        "fpga-emu.bitstreams=sw,tally", "log_level=warning",
                        NULL};
  CHECK_EQ(nam_start(&nam, sets), 0);

  printf("plugins in embedded mode:\n");
  run_embedded_plugins();

  const char *modes[] = {nam.unix_addr, "embedded"};
  for (size_t m = 0; m < 2; m++) {
    printf("%s:\n", modes[m]);
    ember_client *c = open_client(modes[m]);
    run_state(c, "cpu");
    if (strcmp(modes[m], "embedded") != 0)
      run_state(c, "fpga-emu");
    else
      printf("  state on fpga-emu: skipped (an embedded engine has no "
             "board)\n");
    run_chained(c);
    run_client_errors(c);
    ember_close(c);
  }
  printf("%s:\n", nam.tcp_addr);
  ember_client *c = open_client(nam.tcp_addr);
  run_chained(c);
  ember_close(c);

  printf("errors (raw frames):\n");
  c = open_client(nam.unix_addr);
  uint64_t v[N] = {0};
  ember_block *held = make_block(c, v, N, EMBER_BLOCK_STATE);
  /* ids are per connection and start at 1: take one the raw client lacks */
  for (int i = 0; i < 5; i++) ember_block_release(make_block(c, v, N, 0));
  ember_block *other = make_block(c, v, N, EMBER_BLOCK_STATE);
  char msg[512];
  CHECK_OK(tally(c, 1, NULL, 0, other, NULL, NULL, msg, sizeof msg));
  /* the id is the library's: the 7th block of this connection */
  run_raw_errors(7);
  /* ... and the owner still reads it */
  uint64_t want[N];
  for (size_t i = 0; i < N; i++) want[i] = tally_step(0, 1, 0);
  expect_read(other, want, N, 1, "the other connection's block");
  ember_block_release(other);
  ember_block_release(held);
  ember_close(c);
  /* the daemon serves on */
  c = open_client(nam.unix_addr);
  run_chained(c);
  ember_close(c);

  printf("state loss (fpga-emu.fail_rate=0.2):\n");
  const char *fsets[] = {plugin_set, "cpu_workers=1", "opencl.enabled=false",
                         "fpga-emu.boards=1", "fpga-emu.clock=virtual",
                         "fpga-emu.bitstreams=sw,tally",
                         "fpga-emu.fail_rate=0.2", "fpga-emu.seed=7",
                         /* keep the pair: 3 failures in a row would
                          * disable it (ENOPLATFORM for fpga-emu) */
                         "fail_threshold=1000",
                         "log_level=error", NULL};
  CHECK_EQ(nam_start(&faulty, fsets), 0);
  c = open_client(faulty.unix_addr);
  run_state_loss(c);
  ember_close(c);

  nam_cleanup(&faulty);
  nam_cleanup(&nam);
  printf("test_nam_state: ok\n");
  return 0;
}
