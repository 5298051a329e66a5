/* test_nam_sendq - clients that do not read their results. One submits
 * cheap tasks with large results as fast as the NAM takes them and never
 * reads: the NAM stops taking its frames past max_send_queue, its RSS stays
 * bounded, a well-behaved client is served meanwhile, and the reader-less
 * client is disconnected after send_stall_timeout with a warning naming
 * it. Another goes over the limit and then reads: every result comes. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "harness.h"
#include "raw_conn.h"
#include "sw/seqset.h"

enum {
  RECV_MS = 10000,
  PAIRS = 8192,              /* per task: a result of about 40 KB */
  RSS_GROWTH_CAP_KB = 256 * 1024, /* generous: the limit is 1 MiB */
  STUCK_MS = 1500,           /* no byte taken this long: the NAM paused us */
  PUMP_MS = 40000,           /* how long a phase may take at most */
  READER_TASKS = 200,        /* about 8 MB of results */
};

static nam_proc nam;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static long rss_kb(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %ld kB", &kb) == 1) break;
  if (f) fclose(f);
  return kb;
}

/* The log lines that have both a and b. */
static int log_count(const char *a, const char *b) {
  FILE *f = fopen(nam.log_path, "r");
  char line[1024];
  int found = 0;
  while (f && fgets(line, sizeof line, f))
    found += strstr(line, a) && strstr(line, b);
  if (f) fclose(f);
  return found;
}

static int log_has(const char *a, const char *b) { return log_count(a, b) > 0; }

/* The NAM logs a pause right after it happens, but the pump sees the socket
 * stop taking frames as soon as the kernel's buffers fill: on a slow
 * (sanitizer) build the line can come a little after. */
static int wait_log_count(const char *a, const char *b, int want, int ms) {
  int n = log_count(a, b);
  for (uint64_t until = now_ms() + (uint64_t)ms; n < want && now_ms() < until;
       n = log_count(a, b))
    usleep(50 * 1000);
  return n;
}

static void put_block(raw_conn *r, uint64_t id, const void *data, size_t len) {
  int fd = memfd_create("test", MFD_ALLOW_SEALING | MFD_CLOEXEC);
  CHECK(fd >= 0);
  CHECK_EQ(write(fd, data, len), (ssize_t)len);
  CHECK_EQ(fcntl(fd, F_ADD_SEALS, F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW |
                                      F_SEAL_WRITE), 0);
  Ember__PutBlock pb = EMBER__PUT_BLOCK__INIT;
  pb.block_id = id;
  pb.size = len;
  pb.has_transport = 1;
  pb.transport = EMBER__PUT_BLOCK__TRANSPORT__FD;
  raw_send(r, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &pb.base, fd);
  close(fd);
}

/* Blocks 1 and 2: PAIRS short sequences each, cheap to align. */
static void put_pairs(raw_conn *r) {
  static const char *const kinds[] = {"ACGTAC", "ACGAAC", "TTGTAC", "ACGTTT"};
  const char **seqs = malloc(PAIRS * sizeof *seqs);
  size_t *lens = malloc(PAIRS * sizeof *lens);
  for (int b = 0; b < 2; b++) {
    for (size_t i = 0; i < PAIRS; i++) {
      seqs[i] = kinds[(i + (size_t)b) % 4];
      lens[i] = 6;
    }
    size_t bytes = acc_seqset_bytes(lens, PAIRS);
    uint8_t *buf = malloc(bytes);
    CHECK_EQ(acc_seqset_write(buf, bytes, seqs, lens, PAIRS), 0);
    put_block(r, (uint64_t)b + 1, buf, bytes);
    free(buf);
  }
  free(seqs);
  free(lens);
}

static void submit_frame(proto_wbuf *w, uint64_t task) {
  uint64_t ids[2] = {1, 2};
  Ember__Submit s = EMBER__SUBMIT__INIT;
  s.task_id = task;
  s.accelerator = "sw";
  s.n_input_blocks = 2;
  s.input_blocks = ids;
  CHECK_EQ(proto_wbuf_append(w, EMBER__MSG_TYPE__MSG_SUBMIT, &s.base, 0), 0);
}

/* A client that only writes: Submits as fast as they are taken. */
typedef struct pump {
  int fd;
  uint64_t next_task;
  proto_wbuf w;
  long base_kb, max_kb;
} pump;

/* Send until no byte is taken for STUCK_MS (returns 0; only when until_closed
 * is 0) or the NAM closes the connection (returns 1); fails the test past
 * PUMP_MS or when the NAM's RSS grows past the cap. A bench (bench_until
 * set) checks nothing and returns 0 at that time. */
static int pump_run(pump *p, int until_closed, uint64_t bench_until) {
  uint64_t start = now_ms(), last_progress = start, last_rss = 0;
  for (;;) {
    uint64_t now = now_ms();
    if (now - last_rss >= 50) {
      last_rss = now;
      long kb = rss_kb(nam.pid);
      if (kb > p->max_kb) p->max_kb = kb;
      if (bench_until) {
        if (now >= bench_until) return 0;
      } else if (kb - p->base_kb > RSS_GROWTH_CAP_KB) {
        fprintf(stderr, "ember-nam grew from %ld to %ld kB under a client "
                "that does not read\n", p->base_kb, kb);
        exit(1);
      }
    }
    if (!bench_until && now - start > PUMP_MS) {
      fprintf(stderr, "after %d ms: %s (%llu tasks submitted, RSS %ld kB)\n",
              PUMP_MS, until_closed ? "the NAM never disconnected the client"
                                    : "the NAM never stopped reading",
              (unsigned long long)p->next_task, p->max_kb);
      exit(1);
    }
    if (!until_closed && now - last_progress >= STUCK_MS) return 0;
    if (p->w.sent == p->w.len) {
      p->w.len = p->w.sent = 0;
      submit_frame(&p->w, ++p->next_task);
    }
    ssize_t n = send(p->fd, p->w.data + p->w.sent, p->w.len - p->w.sent,
                     MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p->w.sent += (size_t)n;
      last_progress = now;
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return 1; /* EPIPE */
    struct pollfd pf = {.fd = p->fd, .events = POLLOUT};
    if (poll(&pf, 1, 50) == 1 && (pf.revents & (POLLHUP | POLLERR))) return 1;
  }
}

static void good_client_served(void) {
  pair_set ps;
  CHECK_EQ(pairs_load_dna(&ps, 50), 0);
  ember_sw_result *want = pairs_reference_default(&ps);
  ember_client *c;
  ember_options opts = {.client_name = "good", .no_fallback = 1};
  CHECK_EQ(ember_connect(nam.tcp_addr, &opts, &c), 0);
  ember_sw_params p;
  ember_sw_params_default(&p);
  p.pairs_per_task = 10;
  ember_sw_result *got = calloc(ps.n, sizeof *got);
  ember_sw_report rep = {.size = sizeof rep};
  uint64_t t0 = now_ms();
  CHECK_EQ(ember_sw_align(c, &p, ps.queries, ps.refs, ps.n, got, &rep, NULL,
                          NULL), 0);
  CHECK_EQ(results_compare(got, want, ps.n, "good client"), ps.n);
  CHECK_EQ(rep.tasks_fallback, 0);
  printf("  a well-behaved client meanwhile: %zu pairs right in %llu ms\n",
         ps.n, (unsigned long long)(now_ms() - t0));
  ember_close(c);
  free(got);
  free(want);
  pairs_free(&ps);
}

static void test_never_reads(void) {
  printf("a client that never reads its results:\n");
  int paused_before = log_count("over max_send_queue", "its frames wait");
  raw_conn r;
  raw_open_unix(&r, nam.sock);
  raw_greet(&r, NULL, RECV_MS);
  put_pairs(&r);
  pump p = {.fd = r.fd, .base_kb = rss_kb(nam.pid)};
  p.max_kb = p.base_kb;
  CHECK(p.base_kb > 0);
  CHECK_EQ(pump_run(&p, 0, 0), 0);
  printf("  the NAM stopped taking its frames after %llu Submits (RSS %ld "
         "kB, %ld at the start)\n", (unsigned long long)p.next_task, p.max_kb,
         p.base_kb);
  CHECK_EQ(wait_log_count("over max_send_queue", "its frames wait",
                          paused_before + 1, 10000),
           paused_before + 1);
  good_client_served();
  uint64_t t0 = now_ms();
  CHECK_EQ(pump_run(&p, 1, 0), 1);
  printf("  disconnected %llu ms later; RSS at most %ld kB\n",
         (unsigned long long)(now_ms() - t0), p.max_kb);
  char who[64];
  snprintf(who, sizeof who, "client pid %d ", (int)getpid());
  CHECK(log_has(who, "reply bytes queued unread, over max_send_queue"));
  proto_wbuf_free(&p.w);
  raw_close(&r);
}

/* A writer thread sends READER_TASKS Submits, blocking as the NAM pauses. */
typedef struct writer {
  int fd;
  int rc;
} writer;

static void *write_all(void *arg) {
  writer *wr = arg;
  proto_wbuf w = {0};
  for (uint64_t t = 1; t <= READER_TASKS; t++) submit_frame(&w, t);
  wr->rc = proto_send(wr->fd, w.data, w.len, NULL, 0);
  proto_wbuf_free(&w);
  return NULL;
}

static void test_reads_late(void) {
  printf("a client over the limit that then reads gets every result:\n");
  raw_conn r;
  raw_open_unix(&r, nam.sock);
  raw_greet(&r, NULL, RECV_MS);
  put_pairs(&r);
  writer wr = {.fd = r.fd};
  pthread_t th;
  CHECK_EQ(pthread_create(&th, NULL, write_all, &wr), 0);
  uint64_t t0 = now_ms();
  /* long enough to go over max_send_queue, well short of the stall */
  while (!log_has("over max_send_queue", "its frames wait") &&
         now_ms() - t0 < PUMP_MS)
    usleep(50 * 1000);
  CHECK(log_has("over max_send_queue", "its frames wait"));
  static char seen[READER_TASKS + 1];
  for (int i = 0; i < READER_TASKS; i++) {
    uint8_t type;
    ProtobufCMessage *m = raw_recv(&r, &type, RECV_MS);
    CHECK(m != NULL);
    CHECK_EQ(type, EMBER__MSG_TYPE__MSG_RESULT);
    Ember__Result *res = (Ember__Result *)m;
    CHECK_EQ(res->status, 0);
    CHECK(res->task_id >= 1 && res->task_id <= READER_TASKS);
    CHECK(!seen[res->task_id]);
    seen[res->task_id] = 1;
    protobuf_c_message_free_unpacked(m, NULL);
  }
  pthread_join(th, NULL);
  CHECK_EQ(wr.rc, 0);
  CHECK(log_has("reads again", "its frames go on"));
  printf("  all %d results, each once\n", READER_TASKS);
  raw_close(&r);
}

/* rss SECONDS: a NAM at its defaults and a client that never reads,
 * reconnecting whenever it is disconnected; prints the NAM's RSS. */
static int bench_rss(int seconds) {
  CHECK_EQ(nam_start(&nam, NULL), 0);
  pump p = {.base_kb = rss_kb(nam.pid)};
  p.max_kb = p.base_kb;
  uint64_t start = now_ms(), end = start + (uint64_t)seconds * 1000;
  unsigned disconnects = 0;
  while (now_ms() < end) {
    raw_conn r;
    raw_open_unix(&r, nam.sock);
    raw_greet(&r, NULL, RECV_MS);
    put_pairs(&r);
    p.fd = r.fd;
    p.w.len = p.w.sent = 0;
    uint64_t slice = now_ms() + 5000;
    while (pump_run(&p, 1, slice < end ? slice : end) == 0 && now_ms() < end) {
      printf("  %3llu s: RSS %ld kB, %llu Submits sent\n",
             (unsigned long long)((now_ms() - start) / 1000), rss_kb(nam.pid),
             (unsigned long long)p.next_task);
      fflush(stdout);
      slice = now_ms() + 5000;
    }
    if (now_ms() < end) disconnects++;
    raw_close(&r);
  }
  printf("RSS %ld kB at the start, at most %ld kB over %d s; the client was "
         "disconnected %u times\n", p.base_kb, p.max_kb, seconds, disconnects);
  proto_wbuf_free(&p.w);
  nam_stop(&nam);
  nam_cleanup(&nam);
  return 0;
}

/* argv[1], if given, names the one part to run (reads_late, never_reads). */
int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "rss") == 0) return bench_rss(atoi(argv[2]));
  const char *sets[] = {"max_send_queue=1MiB", "send_stall_timeout=4s",
                        "fpga-emu.boards=0", "cpu_workers=1", NULL};
  CHECK_EQ(nam_start(&nam, sets), 0);
  if (argc < 2 || strcmp(argv[1], "reads_late") == 0) test_reads_late();
  if (argc < 2 || strcmp(argv[1], "never_reads") == 0) test_never_reads();
  CHECK_EQ(nam_stop(&nam), 0);
  nam_cleanup(&nam);
  return 0;
}
