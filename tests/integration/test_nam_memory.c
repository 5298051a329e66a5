/*
 * test_nam_memory - every byte a task makes ember-nam hold is counted
 * before it is taken (issue 25, item 3):
 *
 *   scratch   a plf Submit with no state block describes a ~540 MiB
 *             instance (its scratch) under max_block_bytes=64MiB: two of
 *             them must be refused at admission (ETOOBIG) and the
 *             daemon's peak RSS (VmHWM) stay within 64 MiB of where it
 *             was; a small instance still runs. Before, both ran:
 *             peak RSS +953 MiB (11 -> 964 MiB); now +0.5 MiB.
 *   outs      cnn FORWARDs whose 16 MiB out blocks each fit the limit
 *             (64 MiB) but not all together: the ones that would pass it
 *             are refused (EBUSY) before they run, the RSS growth stays
 *             under the limit plus the stage, and the bytes the NAM
 *             reports (Stats.held_bytes) are at least half the RSS growth
 *             (less a stage's allowance). Before, all 8 ran: RSS
 *             +131 MiB while Stats said 1.5 MiB; now 3 run, 5 are
 *             refused, RSS +51 MiB and Stats says 51 MiB.
 *   daemon    three clients each under max_block_bytes (32 MiB) but
 *             together over max_memory (50 MiB): the PutBlock and the
 *             Submit that would pass it are refused with EBUSY naming
 *             max_memory, and both go through once another client
 *             released its block (before: no max_memory at all).
 *
 * argv[1], if given, names the one part to run. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelerators/cnn/cnn.pb-c.h"
#include "accelerators/plf/plf.pb-c.h"
#include "cnn_layout.h"
#include "cnn_net.h"
#include "frame.h"
#include "harness.h"
#include "hostile.h"
#include "raw_conn.h"

enum { RECV_MS = 30000 };
#define MiB ((uint64_t)1 << 20)

#ifdef EMBER_SANITIZED
#define BIG_PATTERNS (1u << 18)  /* a ~135 MiB instance */
#else
#define BIG_PATTERNS (1u << 20)  /* a ~540 MiB instance */
#endif

static nam_proc nam;
static int started;

static void at_exit(void) {
  if (started) nam_cleanup(&nam);
}

static void start(const char *const *sets) {
  CHECK_EQ(nam_start(&nam, sets), 0);
  started = 1;
  nam_wait_idle(&nam);
}

static void stop(void) {
  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
  started = 0;
}

/* A figure of /proc/PID/status in bytes ("VmRSS", "VmHWM"). */
static uint64_t proc_kb(const char *key) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)nam.pid);
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  size_t klen = strlen(key);
  unsigned long long kb = 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
      kb = strtoull(line + klen + 1, NULL, 10);
      break;
    }
  fclose(f);
  CHECK(kb > 0);
  return kb * 1024;
}

static double mib(uint64_t b) { return (double)b / (double)MiB; }

static double mib_signed(uint64_t after, uint64_t before) {
  return after >= before ? mib(after - before) : -mib(before - after);
}

/* ---- frames ------------------------------------------------------------- */

/* PutBlock inline (TCP): bytes of size, flags. */
static void put_block(raw_conn *r, uint64_t id, const void *data,
                      uint64_t size, uint32_t flags) {
  Ember__PutBlock pb = EMBER__PUT_BLOCK__INIT;
  pb.block_id = id;
  pb.size = size;
  pb.has_data = 1;
  pb.data.data = (uint8_t *)data;
  pb.data.len = size;
  pb.has_flags = flags != 0;
  pb.flags = flags;
  pb.transport = EMBER__PUT_BLOCK__TRANSPORT__INLINE;
  raw_send(r, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &pb.base, -1);
}

static void release_block(raw_conn *r, uint64_t id) {
  Ember__ReleaseBlock rb = EMBER__RELEASE_BLOCK__INIT;
  rb.block_id = id;
  raw_send(r, EMBER__MSG_TYPE__MSG_RELEASE_BLOCK, &rb.base, -1);
}

typedef struct task_blocks {
  uint64_t *in, *out, *state;
  size_t n_in, n_out, n_state;
} task_blocks;

static void submit(raw_conn *r, uint64_t task_id, const char *acc,
                   const uint8_t *params, size_t len, const task_blocks *b) {
  Ember__Submit s = EMBER__SUBMIT__INIT;
  s.task_id = task_id;
  s.accelerator = (char *)acc;
  s.has_params = 1;
  s.params.data = (uint8_t *)params;
  s.params.len = len;
  s.platform = "cpu";
  if (b) {
    s.input_blocks = b->in;
    s.n_input_blocks = b->n_in;
    s.output_blocks = b->out;
    s.n_output_blocks = b->n_out;
    s.state_blocks = b->state;
    s.n_state_blocks = b->n_state;
  }
  raw_send(r, EMBER__MSG_TYPE__MSG_SUBMIT, &s.base, -1);
}

/* The next answer to a task: a Result (*refused 0) or an Error naming a
 * task (*refused 1); its status and text. Errors about blocks (no task
 * id) fail the test: every block here must be taken. */
static uint64_t next_answer(raw_conn *r, int *code, int *refused, char *text,
                            size_t len) {
  for (;;) {
    uint8_t type;
    ProtobufCMessage *m = raw_recv(r, &type, RECV_MS);
    CHECK(m != NULL);
    uint64_t id = 0;
    if (type == EMBER__MSG_TYPE__MSG_RESULT) {
      Ember__Result *res = (Ember__Result *)m;
      id = res->task_id;
      *code = res->status;
      *refused = 0;
      snprintf(text, len, "%s", res->message ? res->message : "");
    } else if (type == EMBER__MSG_TYPE__MSG_ERROR) {
      Ember__Error *e = (Ember__Error *)m;
      if (!e->has_task_id) {
        fprintf(stderr, "unexpected Error %s: %s\n", ember_errname(e->code),
                e->message);
        exit(1);
      }
      id = e->task_id;
      *code = e->code;
      *refused = 1;
      snprintf(text, len, "%s", e->message);
    }
    protobuf_c_message_free_unpacked(m, NULL);
    if (id) return id;
  }
}

/* The answer to task id, which must be the next one. */
static int answer_of(raw_conn *r, uint64_t id, int *refused, char *text,
                     size_t len) {
  int code;
  CHECK_EQ(next_answer(r, &code, refused, text, len), id);
  return code;
}

/* What the NAM reports it holds: Stats.held_bytes, or (a NAM that does
 * not say) the block bytes, which was all it reported. */
static uint64_t reported_bytes(raw_conn *r) {
  Ember__StatsRequest sr = EMBER__STATS_REQUEST__INIT;
  raw_send(r, EMBER__MSG_TYPE__MSG_STATS_REQUEST, &sr.base, -1);
  for (;;) {
    uint8_t type;
    ProtobufCMessage *m = raw_recv(r, &type, RECV_MS);
    CHECK(m != NULL);
    if (type != EMBER__MSG_TYPE__MSG_STATS) {
      protobuf_c_message_free_unpacked(m, NULL);
      continue;
    }
    Ember__Stats *st = (Ember__Stats *)m;
    uint64_t b = st->has_held_bytes ? st->held_bytes : st->block_bytes;
    protobuf_c_message_free_unpacked(m, NULL);
    return b;
  }
}

/* A plf task's Params with no ops on an instance of `patterns` patterns
 * (4 states, 4 categories, 4 buffers: 128 bytes a pattern and more). */
static uint8_t *plf_params(uint32_t patterns, size_t *len) {
  Ember__Plf__Instance in = EMBER__PLF__INSTANCE__INIT;
  in.states = 4;
  in.patterns = patterns;
  in.has_categories = 1;
  in.categories = 4;
  in.tips = 2;
  in.partials = 4;
  in.matrices = 4;
  Ember__Plf__Params p = EMBER__PLF__PARAMS__INIT;
  p.instance = &in;
  *len = ember__plf__params__get_packed_size(&p);
  uint8_t *buf = malloc(*len);
  CHECK(buf != NULL);
  ember__plf__params__pack(&p, buf);
  return buf;
}

/* ---- scratch ------------------------------------------------------------ */

static void test_scratch(void) {
  const char *sets[] = {"max_block_bytes=64MiB", "cpu_workers=2",
                        "fpga-emu.boards=0", "opencl.enabled=false", NULL};
  start(sets);
  size_t len;
  uint8_t *big = plf_params(BIG_PATTERNS, &len);
  printf("scratch: two %zu-byte plf Submits, no state block, an instance of "
         "%u patterns (~%.0f MiB), max_block_bytes=64MiB:\n", len,
         BIG_PATTERNS, mib((uint64_t)BIG_PATTERNS * 4 * 4 * 4 * 8));
  uint64_t hwm0 = proc_kb("VmHWM"), rss0 = proc_kb("VmRSS");
  raw_conn r;
  raw_open_tcp(&r, nam.port);
  raw_greet(&r, NULL, RECV_MS);
  submit(&r, 1, "plf", big, len, NULL);
  submit(&r, 2, "plf", big, len, NULL);
  free(big);
  int refused = 0, ran = 0;
  for (int i = 0; i < 2; i++) {
    int code, was_error;
    char text[512];
    uint64_t id = next_answer(&r, &code, &was_error, text, sizeof text);
    printf("  task %llu: %s%s%s\n", (unsigned long long)id,
           code ? ember_errname(code) : "ran", code ? ": " : "", text);
    if (code == EMBER_ETOOBIG && was_error && strstr(text, "max_block_bytes"))
      refused++;
    if (code == 0) ran++;
  }
  /* a small instance without state still runs */
  uint8_t *small = plf_params(1024, &len);
  submit(&r, 3, "plf", small, len, NULL);
  free(small);
  int was_error;
  char text[512];
  int small_rc = answer_of(&r, 3, &was_error, text, sizeof text);
  uint64_t hwm1 = proc_kb("VmHWM"), rss1 = proc_kb("VmRSS");
  printf("  refused %d of 2 (ran %d); peak RSS %.1f -> %.1f MiB (%+.1f), "
         "RSS %.1f -> %.1f MiB; a 1,024-pattern instance: %s\n", refused,
         ran, mib(hwm0), mib(hwm1), mib_signed(hwm1, hwm0), mib(rss0),
         mib(rss1), small_rc ? ember_errname(small_rc) : "ran");
  raw_close(&r);
  CHECK_EQ(refused, 2);
  CHECK_RSS(hwm1 < hwm0 + 64 * MiB);
  CHECK_EQ(small_rc, 0);
  stop();
}

/* ---- outs --------------------------------------------------------------- */

#define OUTS_NET "[net]\nheight=1\nwidth=1\nchannels=1\n" \
                 "[connected]\noutput=65536\nactivation=linear\n[softmax]\n"
enum { OUTS_BATCH = 64, N_FORWARD = 8 };

static uint8_t *cnn_params(Ember__Cnn__Op op, size_t *len) {
  Ember__Cnn__Params p = EMBER__CNN__PARAMS__INIT;
  p.op = op;
  p.net.data = (uint8_t *)OUTS_NET;
  p.net.len = strlen(OUTS_NET);
  p.first = 0;
  p.end = 1;
  p.batch = OUTS_BATCH;
  p.has_seed = 1;
  p.seed = 25;
  *len = ember__cnn__params__get_packed_size(&p);
  uint8_t *buf = malloc(*len);
  CHECK(buf != NULL);
  ember__cnn__params__pack(&p, buf);
  return buf;
}

static void test_outs(void) {
  const uint64_t limit = 64 * MiB;
  const char *sets[] = {"max_block_bytes=64MiB", "cpu_workers=2",
                        "fpga-emu.boards=0", "opencl.enabled=false",
                        "accelerator_cache=0", NULL};
  start(sets);
  cnn_net *net = NULL;
  char err[256];
  CHECK_EQ(cnn_cfg_parse(OUTS_NET, strlen(OUTS_NET), "test", &net, err,
                         sizeof err), 0);
  cnn_layout L;
  CHECK_EQ(cnn_layout_compute(net, 0, 1, OUTS_BATCH, 1, &L), 0);
  cnn_net_destroy(net);
  uint64_t state = L.total, input = OUTS_BATCH * sizeof(float);
  uint64_t out = L.out_elems * sizeof(float);
  /* a state block counts twice: the platform's working copy */
  uint64_t fit = (limit - 2 * state - input) / out;
  printf("outs: %d cnn FORWARDs with a %.1f MiB out block each on a "
         "%.1f MiB state block, max_block_bytes=64MiB (%llu fit):\n",
         N_FORWARD, mib(out), mib(state), (unsigned long long)fit);
  raw_conn r;
  raw_open_tcp(&r, nam.port);
  raw_greet(&r, NULL, RECV_MS);
  uint8_t *zero = calloc(1, state);
  CHECK(zero != NULL);
  put_block(&r, 1, zero, state, EMBER_BLOCK_STATE);
  put_block(&r, 2, zero, input, 0);
  free(zero);
  size_t len;
  uint8_t *init = cnn_params(EMBER__CNN__OP__INIT, &len);
  uint64_t state_id = 1, in_id = 2;
  task_blocks tb = {.state = &state_id, .n_state = 1};
  submit(&r, 1, "cnn", init, len, &tb);
  free(init);
  int was_error;
  char text[512];
  int rc = answer_of(&r, 1, &was_error, text, sizeof text);
  if (rc) fprintf(stderr, "INIT: %s: %s\n", ember_errname(rc), text);
  CHECK_EQ(rc, 0);
  uint64_t rss0 = proc_kb("VmRSS");
  uint8_t *fwd = cnn_params(EMBER__CNN__OP__FORWARD, &len);
  uint64_t out_ids[N_FORWARD];
  for (int i = 0; i < N_FORWARD; i++) {
    out_ids[i] = 100 + (uint64_t)i;
    task_blocks b = {.in = &in_id, .n_in = 1, .out = &out_ids[i], .n_out = 1,
                     .state = &state_id, .n_state = 1};
    submit(&r, 10 + (uint64_t)i, "cnn", fwd, len, &b);
  }
  free(fwd);
  int ran = 0, refused = 0, other = 0;
  char first_refusal[512] = "";
  for (int i = 0; i < N_FORWARD; i++) {
    int code;
    next_answer(&r, &code, &was_error, text, sizeof text);
    if (code == 0) {
      ran++;
    } else if (code == EMBER_EBUSY && was_error &&
               strstr(text, "max_block_bytes")) {
      if (!refused++) snprintf(first_refusal, sizeof first_refusal, "%s", text);
    } else {
      other++;
      printf("  unexpected: %s: %s\n", ember_errname(code), text);
    }
  }
  uint64_t rss1 = proc_kb("VmRSS");
  uint64_t reported = reported_bytes(&r);
  uint64_t grew = rss1 > rss0 ? rss1 - rss0 : 0;
  printf("  ran %d, refused %d before running%s%s; RSS %.1f -> %.1f MiB "
         "(%+.1f), the NAM reports %.1f MiB held\n", ran, refused,
         refused ? ", e.g. " : "", first_refusal, mib(rss0), mib(rss1),
         mib_signed(rss1, rss0), mib(reported));
  raw_close(&r);
  CHECK_EQ(other, 0);
  CHECK_EQ((uint64_t)ran, fit);
  CHECK_EQ((uint64_t)refused, N_FORWARD - fit);
  /* what it holds stays within the limit, plus a stage's worth (the
   * FORWARD's own output tensor, which oneDNN allocates) */
  CHECK_RSS(grew < limit + 2 * out);
  /* and what it reports within a factor of 2 of what it holds */
  CHECK_RSS(grew <= 2 * reported + 2 * out);
  stop();
}

/* ---- daemon ------------------------------------------------------------- */

static void test_daemon(void) {
  const char *sets[] = {"max_block_bytes=32MiB", "max_memory=50MiB",
                        "cpu_workers=2", "fpga-emu.boards=0",
                        "opencl.enabled=false", NULL};
  start(sets);
  const uint64_t size = 20 * MiB;
  printf("daemon: 3 clients, a 20 MiB block each, max_block_bytes=32MiB, "
         "max_memory=50MiB:\n");
  uint8_t *data = calloc(1, size);
  CHECK(data != NULL);
  raw_conn c[3];
  for (int i = 0; i < 3; i++) {
    raw_open_tcp(&c[i], nam.port);
    raw_greet(&c[i], NULL, RECV_MS);
  }
  /* each taken before the next is sent: a Stats round trip after it */
  put_block(&c[0], 1, data, size, 0);
  CHECK(reported_bytes(&c[0]) >= size);
  put_block(&c[1], 1, data, size, 0);
  CHECK(reported_bytes(&c[1]) >= 2 * size);
  /* the third would pass max_memory: refused, retryable */
  put_block(&c[2], 1, data, size, 0);
  uint8_t type;
  ProtobufCMessage *m = raw_recv(&c[2], &type, RECV_MS);
  CHECK(m != NULL);
  CHECK_EQ(type, EMBER__MSG_TYPE__MSG_ERROR);
  Ember__Error *e = (Ember__Error *)m;
  printf("  third PutBlock: %s: %s\n", ember_errname(e->code), e->message);
  int put_rc = e->code, names_it = strstr(e->message, "max_memory") != NULL;
  protobuf_c_message_free_unpacked(m, NULL);
  CHECK_EQ(put_rc, EMBER_EBUSY);
  CHECK(names_it);
  /* a plf task of ~16 MiB scratch: within the client's limit, over the
   * NAM's */
  size_t len;
  uint8_t *mid = plf_params(1u << 15, &len);
  submit(&c[2], 1, "plf", mid, len, NULL);
  int was_error;
  char text[512];
  int rc = answer_of(&c[2], 1, &was_error, text, sizeof text);
  printf("  its Submit of a 16 MiB instance: %s: %s\n",
         rc ? ember_errname(rc) : "ran", text);
  CHECK_EQ(rc, EMBER_EBUSY);
  CHECK(was_error && strstr(text, "max_memory") != NULL);
  /* the first client lets go: both go through */
  release_block(&c[0], 1);
  CHECK(reported_bytes(&c[0]) < 2 * size);
  submit(&c[2], 2, "plf", mid, len, NULL);
  rc = answer_of(&c[2], 2, &was_error, text, sizeof text);
  CHECK_EQ(rc, 0);
  put_block(&c[2], 1, data, size, 0);
  CHECK(reported_bytes(&c[2]) >= 2 * size);
  printf("  after the first released its block: the Submit ran, the "
         "PutBlock was taken\n");
  free(mid);
  free(data);
  for (int i = 0; i < 3; i++) raw_close(&c[i]);
  stop();
}

int main(int argc, char **argv) {
  signal(SIGPIPE, SIG_IGN);
  atexit(at_exit);
  if (test_part(argc, argv, "scratch")) test_scratch();
  if (test_part(argc, argv, "outs")) test_outs();
  if (test_part(argc, argv, "daemon")) test_daemon();
  return 0;
}
