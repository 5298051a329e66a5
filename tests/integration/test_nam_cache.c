/*
 * test_nam_cache - ember-nam's block cache through the real daemon (one
 * emulated board on its virtual clock, tasks required on fpga-emu so that
 * their blocks go through the board's cache):
 *
 *   isolation   two raw clients (libember hides block ids, so the frames
 *               are written by hand as in test_nam_bad_input): A puts blocks
 *               1 and 2 with EMBER_BLOCK_CACHE and runs a task; B's task
 *               naming ids 1 and 2 is refused with EMBER_ENOTFOUND; B puts
 *               its own blocks 1 and 2 (other sequences) and gets its own
 *               answer; A still gets its own
 *   disconnect  1,000 cycles of connect / two cached blocks / run a task /
 *               release / close through libember: afterwards the board's
 *               cache holds 0 blocks and 0 bytes, the NAM holds 0 block
 *               bytes (/metrics), and the daemon's RSS did not grow more
 *               than 16 MiB past what it was after the first 100 cycles
 *               (each cycle moves ~60 KB of blocks: a leak of them would be
 *               over 50 MB)
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "accelerators/sw/sw.pb-c.h"
#include "frame.h"
#include "harness.h"
#include "raw_conn.h"
#include "sw/seqset.h"

#ifdef EMBER_SANITIZED
/* ASan's quarantine keeps freed memory, so RSS says nothing there (LSan
 * checks for leaks instead), and a sanitized daemon is 10-20x slower: the
 * cycles are fewer and the RSS bound is not checked */
enum { CYCLES = 200, WARM = 100, PAIRS = 100 };
#define CHECK_RSS 0
#else
enum { CYCLES = 1000, WARM = 100, PAIRS = 100 };
#define CHECK_RSS 1
#endif
#define RSS_SLACK_KB (16 * 1024)

static nam_proc nam;
static int metrics_port;

/* ------------------------------------------------------------------------ */
/* Raw protocol clients (raw_conn.h)                                         */

/* every answer comes within 5 s */
enum { RECV_MS = 5000 };

static void put_seqs(raw_conn *r, uint64_t id, const char *const *seqs,
                     size_t n) {
  size_t lens[8];
  for (size_t i = 0; i < n; i++) lens[i] = strlen(seqs[i]);
  size_t bytes = acc_seqset_bytes(lens, n);
  uint8_t *buf = malloc(bytes);
  CHECK(buf != NULL);
  CHECK_EQ(acc_seqset_write(buf, bytes, seqs, lens, n), 0);
  int fd = memfd_create("test", MFD_ALLOW_SEALING | MFD_CLOEXEC);
  CHECK(fd >= 0);
  CHECK_EQ(write(fd, buf, bytes), (ssize_t)bytes);
  CHECK_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW |
                                      F_SEAL_WRITE), 0);
  Ember__PutBlock pb = EMBER__PUT_BLOCK__INIT;
  pb.block_id = id;
  pb.size = bytes;
  pb.has_transport = 1;
  pb.transport = EMBER__PUT_BLOCK__TRANSPORT__FD;
  pb.has_flags = 1;
  pb.flags = EMBER_BLOCK_CACHE;
  raw_send(r, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &pb.base, fd);
  close(fd);
  free(buf);
}

static void submit(raw_conn *r, uint64_t task, uint64_t q, uint64_t ref) {
  Ember__Submit s = EMBER__SUBMIT__INIT;
  uint64_t ids[2] = {q, ref};
  s.task_id = task;
  s.accelerator = "sw";
  s.n_input_blocks = 2;
  s.input_blocks = ids;
  s.platform = "fpga-emu";
  raw_send(r, EMBER__MSG_TYPE__MSG_SUBMIT, &s.base, -1);
}

/* The score of the one pair of task's Result. */
static int expect_score(raw_conn *r, uint64_t task) {
  uint8_t type;
  ProtobufCMessage *m = raw_recv(r, &type, RECV_MS);
  CHECK(m != NULL);
  if (type != EMBER__MSG_TYPE__MSG_RESULT) {
    fprintf(stderr, "expected a Result, got %s\n", proto_type_name(type));
    exit(1);
  }
  Ember__Result *res = (Ember__Result *)m;
  CHECK_EQ(res->task_id, task);
  CHECK_EQ(res->status, 0);
  CHECK(strcmp(res->platform, "fpga0") == 0);
  Ember__Sw__Result *sr = ember__sw__result__unpack(NULL, res->output.len,
                                                   res->output.data);
  CHECK(sr && sr->n_score == 1);
  int score = sr->score[0];
  ember__sw__result__free_unpacked(sr, NULL);
  protobuf_c_message_free_unpacked(m, NULL);
  return score;
}

static void expect_not_found(raw_conn *r, uint64_t task) {
  uint8_t type;
  ProtobufCMessage *m = raw_recv(r, &type, RECV_MS);
  CHECK(m != NULL);
  if (type != EMBER__MSG_TYPE__MSG_ERROR) {
    fprintf(stderr, "expected an Error, got %s\n", proto_type_name(type));
    exit(1);
  }
  Ember__Error *e = (Ember__Error *)m;
  printf("  B naming A's blocks: %s: %s\n", ember_errname(e->code),
         e->message);
  CHECK_EQ(e->code, EMBER_ENOTFOUND);
  CHECK(e->has_task_id && e->task_id == task);
  protobuf_c_message_free_unpacked(m, NULL);
}

static void test_isolation(void) {
  printf("isolation:\n");
  raw_conn a, b;
  raw_open_unix(&a, nam.sock);
  raw_greet(&a, NULL, RECV_MS);
  raw_open_unix(&b, nam.sock);
  raw_greet(&b, NULL, RECV_MS);
  const char *qa[] = {"ACGTACGTACGTAAAA"}, *ra[] = {"TTACGTACGTACGTAAAATT"};
  const char *qb[] = {"GATTACA"}, *rb[] = {"CCGATTACACC"};
  put_seqs(&a, 1, qa, 1);
  put_seqs(&a, 2, ra, 1);
  submit(&a, 10, 1, 2);
  int score_a = expect_score(&a, 10);

  submit(&b, 20, 1, 2);
  expect_not_found(&b, 20);

  put_seqs(&b, 1, qb, 1);
  put_seqs(&b, 2, rb, 1);
  submit(&b, 21, 1, 2);
  int score_b = expect_score(&b, 21);
  submit(&a, 11, 1, 2);
  CHECK_EQ(expect_score(&a, 11), score_a);
  printf("  A's score %d, B's score %d (its own blocks 1 and 2)\n", score_a,
         score_b);
  CHECK_EQ(score_a, 16 * 3);
  CHECK_EQ(score_b, 7 * 3);
  raw_close(&a);
  raw_close(&b);
}

/* ------------------------------------------------------------------------ */
/* Blocks freed on disconnect                                                */

static long rss_kb(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
  fclose(f);
  CHECK(kb > 0);
  return kb;
}

static char *http_get(int port, const char *path) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  CHECK(fd >= 0);
  CHECK_EQ(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
  char req[128];
  int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\n\r\n", path);
  CHECK_EQ(write(fd, req, (size_t)n), n);
  size_t len = 0, cap = 1 << 16;
  char *buf = malloc(cap);
  ssize_t got;
  while (buf && (got = read(fd, buf + len, cap - len - 1)) > 0) {
    len += (size_t)got;
    if (len + 1 == cap) buf = realloc(buf, cap *= 2);
  }
  close(fd);
  CHECK(buf != NULL);
  buf[len] = '\0';
  return buf;
}

/* The value of a metric line "name value", -1 if absent. */
static double metric(const char *text, const char *name) {
  size_t n = strlen(name);
  for (const char *line = text; line && *line;) {
    if (strncmp(line, name, n) == 0 && line[n] == ' ')
      return atof(line + n + 1);
    line = strchr(line, '\n');
    if (line) line++;
  }
  return -1;
}

/* fpga0's cache as the NAM lists it: its counters (the strings and pairs
 * went with the listing). */
static ember_platform_info board_info(void) {
  ember_client *c;
  ember_options opts = {.no_fallback = 1};
  CHECK_EQ(ember_connect(nam.unix_addr, &opts, &c), 0);
  ember_listing *l;
  ember_platform_info out;
  CHECK_EQ(ember_list_accelerators(c, &l), 0);
  int found = 0;
  for (size_t i = 0; i < ember_listing_platforms(l); i++)
    if (strcmp(ember_listing_platform(l, i)->name, "fpga0") == 0) {
      out = *ember_listing_platform(l, i);
      found = 1;
    }
  CHECK(found);
  out.name = out.kind = out.state = out.device = out.loaded = NULL;
  out.pairs = NULL;
  out.n_pairs = 0;
  ember_listing_free(l);
  ember_close(c);
  return out;
}

static uint8_t *seqset_of(const ember_seq *s, size_t n, size_t *bytes) {
  size_t *lens = malloc(n * sizeof *lens);
  const char **res = malloc(n * sizeof *res);
  CHECK(lens && res);
  for (size_t i = 0; i < n; i++) {
    lens[i] = s[i].length;
    res[i] = s[i].residues;
  }
  *bytes = acc_seqset_bytes(lens, n);
  uint8_t *buf = malloc(*bytes);
  CHECK(buf != NULL);
  CHECK_EQ(acc_seqset_write(buf, *bytes, res, lens, n), 0);
  free(lens);
  free(res);
  return buf;
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void test_disconnect_cycles(void) {
  printf("disconnect cycles:\n");
  pair_set ps;
  CHECK_EQ(pairs_load_dna(&ps, PAIRS), 0);
  size_t qbytes, rbytes;
  uint8_t *qb = seqset_of(ps.queries, ps.n, &qbytes);
  uint8_t *rb = seqset_of(ps.refs, ps.n, &rbytes);
  ember_sw_result *want = pairs_reference_default(&ps);
  void *first = NULL;
  size_t first_size = 0;
  long rss_warm = 0;
  uint64_t t0 = now_ms();
  ember_submit_options so = {.platform = "fpga-emu"};
  for (int cycle = 0; cycle < CYCLES; cycle++) {
    ember_client *c;
    ember_options opts = {.no_fallback = 1};
    CHECK_EQ(ember_connect(nam.unix_addr, &opts, &c), 0);
    ember_block *in[2];
    CHECK_EQ(ember_block_create(c, qb, qbytes, EMBER_BLOCK_CACHE, &in[0]), 0);
    CHECK_EQ(ember_block_create(c, rb, rbytes, EMBER_BLOCK_CACHE, &in[1]), 0);
    ember_task *t;
    CHECK_EQ(ember_run(c, "sw", NULL, 0, in, 2, &so, &t), 0);
    CHECK_EQ(ember_task_status(t), 0);
    const ember_task_info *info = ember_task_get_info(t);
    CHECK_EQ(info->fell_back, 0);
    CHECK(strcmp(info->platform, "fpga0") == 0);
    size_t size;
    const void *out = ember_task_output(t, &size);
    CHECK(out != NULL);
    if (cycle == 0) {
      Ember__Sw__Result *r = ember__sw__result__unpack(NULL, size, out);
      CHECK(r && r->n_score == ps.n);
      for (size_t i = 0; i < ps.n; i++) CHECK_EQ(r->score[i], want[i].score);
      ember__sw__result__free_unpacked(r, NULL);
      first = malloc(size);
      CHECK(first != NULL);
      memcpy(first, out, size);
      first_size = size;
    } else {
      CHECK_EQ(size, first_size);
      CHECK(memcmp(out, first, size) == 0);
    }
    ember_task_free(t);
    ember_block_release(in[0]);
    ember_block_release(in[1]);
    ember_close(c);
    if (cycle + 1 == WARM) rss_warm = rss_kb(nam.pid);
  }
  uint64_t elapsed = now_ms() - t0;

  /* the last client's disconnect is handled on the NAM's loop: wait (5 s
   * at most) until its blocks are gone from the board */
  ember_platform_info bi = board_info();
  for (uint64_t until = now_ms() + 5000;
       (bi.cache_blocks || bi.cache_resident) && now_ms() < until;) {
    struct timespec pause = {0, 20000000};
    nanosleep(&pause, NULL);
    bi = board_info();
  }
  long rss_end = rss_kb(nam.pid);
  char *text = http_get(metrics_port, "/metrics");
  double block_bytes = metric(text, "ember_nam_block_bytes");
  double clients = metric(text, "ember_nam_clients");
  free(text);
  printf("  %d cycles in %.1f s; fpga0: %llu hits, %llu misses, %llu "
         "evictions, %llu blocks and %llu bytes resident now; NAM block "
         "bytes %.0f; RSS %ld kB after %d cycles, %ld kB after %d\n",
         CYCLES, elapsed / 1e3, (unsigned long long)bi.cache_hits,
         (unsigned long long)bi.cache_misses,
         (unsigned long long)bi.cache_evictions,
         (unsigned long long)bi.cache_blocks,
         (unsigned long long)bi.cache_resident, block_bytes, rss_warm, WARM,
         rss_end, CYCLES);
  CHECK_EQ(bi.cache_blocks, 0);
  CHECK_EQ(bi.cache_resident, 0);
  CHECK(bi.cache_misses >= 2 * CYCLES); /* each client's blocks are new */
  CHECK_EQ(block_bytes, 0);
  CHECK(clients <= 1); /* the listing client may still be counted */
  if (CHECK_RSS && rss_end > rss_warm + RSS_SLACK_KB) {
    fprintf(stderr, "RSS grew from %ld kB to %ld kB\n", rss_warm, rss_end);
    exit(1);
  }
  free(first);
  free(want);
  free(qb);
  free(rb);
  pairs_free(&ps);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, NULL, _IOLBF, 0);
  metrics_port = free_tcp_port();
  CHECK(metrics_port > 0);
  char metrics_set[64];
  snprintf(metrics_set, sizeof metrics_set, "metrics_listen=127.0.0.1:%d",
           metrics_port);
  const char *sets[] = {"cpu_workers=1",       "opencl.enabled=false",
                        "fpga-emu.boards=1",   "fpga-emu.clock=virtual",
                        "fpga-emu.memory=8MiB", "log_level=warning",
                        metrics_set,           NULL};
  CHECK_EQ(nam_start(&nam, sets), 0);
  test_isolation();
  test_disconnect_cycles();
  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
  printf("2 passed, 0 failed\n");
  return 0;
}
