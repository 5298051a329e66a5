/*
 * test_nam_cnn_stages - cnn stages through the real ember-nam, as a
 * hostile tenant would use them (issue 25):
 *
 *   padding   convolutions whose padding is at least their kernel (size=1
 *             with padding=1 and 2, size=3 with padding=3: oneDNN runs them
 *             as gemm convolutions, which need a scratchpad) on a NAM with
 *             2 cpu workers: INIT, then FORWARD, BACKWARD and UPDATE round
 *             after round on the pooled stage, which the workers take in
 *             turn. ember-nam died in a memset on the second FORWARD (the
 *             stage ran in the scratchpad of the thread that built it);
 *             now every task succeeds with a finite loss, the daemon lives
 *             and serves another client.
 *   leave     a client builds a stage of about 200 MiB (its size computed
 *             here by building the same stage, cnn_cpu_stage_bytes), which
 *             the pool keeps while it is connected; once it disconnects
 *             the NAM's RSS falls back to what it was before it came (the
 *             pool kept it for good: 8 stages by count, whoever left).
 *   budget    one client runs three such stages of different batches: the
 *             pool keeps what its byte budget (accelerator_cache, 256 MiB
 *             by default) holds, one of them, so the NAM's RSS stays
 *             within the budget of its baseline (plus the state blocks);
 *             with accelerator_cache=0 it keeps none.
 *
 * RSS is /proc/PID/status's VmRSS, waited for (at most 20 s) where it
 * must fall: the stage's tensors are mmap'd buffers (over glibc's 32 MiB
 * threshold), given back to the system when freed. Under a sanitizer the
 * stages are half as big and ASan's quarantine is off in the daemon.
 */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "accelerators/cnn/cnn.pb-c.h"
#include "cnn_cpu.h"
#include "cnn_layout.h"
#include "cnn_net.h"
#include "harness.h"
#include "hostile.h"

#ifdef EMBER_SANITIZED
#define ROUNDS 3
#define BIG_BATCH 32
#else
#define ROUNDS 6
#define BIG_BATCH 64
#endif
#define MiB (1024.0 * 1024.0)

/* A stage as a client drives it: the network, its range and batch, its
 * state block on the NAM. */
typedef struct stage {
  char cfg[1024];
  size_t len;
  uint32_t end, batch;
  cnn_shape in;
  ember_block *state;
} stage;

/* The daemon the running part started, for the reports below. */
static nam_proc *running;

/* Whether the daemon still runs; when it has died, says how (once). */
static int alive(nam_proc *p) {
  int st;
  if (p->pid <= 0) return 0;
  if (waitpid(p->pid, &st, WNOHANG) == 0) return 1;
  if (WIFSIGNALED(st))
    fprintf(stderr, "ember-nam died: %s\n", strsignal(WTERMSIG(st)));
  else
    fprintf(stderr, "ember-nam exited with %d\n", WEXITSTATUS(st));
  p->pid = 0;
  return 0;
}

/* On a failed check: how the daemon fared, and none left behind. */
static void at_exit(void) {
  if (!running) return;
  if (alive(running)) nam_kill9(running);
  nam_cleanup(running);
  running = NULL;
}

static void start(nam_proc *p, const char *const *sets) {
  CHECK_EQ(nam_start(p, sets), 0);
  running = p;
}

static void stop(nam_proc *p) {
  CHECK(alive(p));
  CHECK_EQ(nam_stop(p), 0);
  nam_cleanup(p);
  running = NULL;
}

static ember_client *connect_to(const nam_proc *p) {
  ember_client *c = NULL;
  ember_options o = {.size = sizeof o, .client_name = "test_nam_cnn_stages",
                     .no_fallback = 1};
  int rc = ember_connect(p->unix_addr, &o, &c);
  if (rc) {
    fprintf(stderr, "connect: %s (%s)\n", ember_errname(rc),
            ember_last_error());
    exit(1);
  }
  return c;
}

static void stage_init(stage *s, const char *cfg, uint32_t batch) {
  memset(s, 0, sizeof *s);
  snprintf(s->cfg, sizeof s->cfg, "%s", cfg);
  s->len = strlen(s->cfg);
  s->batch = batch;
  cnn_net *net = NULL;
  char err[256];
  if (cnn_cfg_parse(s->cfg, s->len, "test", &net, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    exit(1);
  }
  size_t n;
  cnn_net_layers(net, &n);
  s->end = (uint32_t)n;
  s->in = cnn_net_input(net);
  cnn_net_destroy(net);
}

/* The bytes the NAM's pool counts for s's stage: the same stage built
 * here. */
static uint64_t stage_bytes(const stage *s) {
  cnn_net *net = NULL;
  cnn_cpu_stage *st = NULL;
  char err[256];
  CHECK(cnn_cfg_parse(s->cfg, s->len, "test", &net, err, sizeof err) == 0);
  if (cnn_cpu_stage_create(net, 0, s->end, s->batch, &st, err, sizeof err)) {
    fprintf(stderr, "stage: %s\n", err);
    exit(1);
  }
  uint64_t b = cnn_cpu_stage_bytes(st);
  cnn_cpu_stage_destroy(st);
  cnn_net_destroy(net);
  return b;
}

/* Submit a task of op on s (inputs in, n_in); exits when the NAM refuses
 * it. */
static ember_task *submit(ember_client *c, Ember__Cnn__Op op, stage *s,
                          ember_block *const *in, size_t n_in) {
  Ember__Cnn__Params p = EMBER__CNN__PARAMS__INIT;
  p.op = op;
  p.net.data = (uint8_t *)s->cfg;
  p.net.len = s->len;
  p.first = 0;
  p.end = s->end;
  p.batch = s->batch;
  p.has_seed = 1;
  p.seed = 25;
  size_t len = ember__cnn__params__get_packed_size(&p);
  uint8_t *buf = malloc(len);
  CHECK(buf != NULL);
  ember__cnn__params__pack(&p, buf);
  ember_submit_options o = {.size = sizeof o, .platform = "cpu",
                            .states = &s->state, .n_states = 1};
  ember_task *t = NULL;
  int rc = ember_submit(c, "cnn", buf, len, in, n_in, &o, &t);
  free(buf);
  if (rc) {
    fprintf(stderr, "cnn op %d: ember_submit: %s (%s)\n", (int)op,
            ember_errname(rc), ember_last_error());
    exit(1);
  }
  return t;
}

/* Wait for t; it must have succeeded. Its Result's loss into *loss when
 * loss is given. Frees t. */
static void finish(ember_task *t, const char *what, double *loss) {
  CHECK_EQ(ember_task_wait(t, 120000), 0);
  int rc = ember_task_status(t);
  if (rc) {
    fprintf(stderr, "%s: %s: %s\n", what, ember_errname(rc),
            ember_task_message(t));
    /* the connection closed: say whether the daemon died, and how */
    for (int i = 0; i < 200 && running && alive(running); i++) {
      struct timespec ms = {0, 10 * 1000 * 1000};
      nanosleep(&ms, NULL);
    }
    exit(1);
  }
  if (loss) {
    size_t size;
    const void *res = ember_task_output(t, &size);
    Ember__Cnn__Result *r = ember__cnn__result__unpack(NULL, size, res);
    CHECK(r != NULL);
    *loss = r->has_loss ? r->loss : NAN;
    ember__cnn__result__free_unpacked(r, NULL);
  }
  ember_task_free(t);
}

/* s's state block on c, sized by the layout. */
static void state_on(ember_client *c, stage *s) {
  cnn_net *net = NULL;
  char err[256];
  CHECK(cnn_cfg_parse(s->cfg, s->len, "test", &net, err, sizeof err) == 0);
  cnn_layout L;
  CHECK(cnn_layout_compute(net, 0, s->end, s->batch, 1, &L) == 0);
  cnn_net_destroy(net);
  void *zero = calloc(1, L.total);
  CHECK(zero != NULL);
  CHECK_EQ(ember_block_create(c, zero, L.total, EMBER_BLOCK_STATE,
                              &s->state), 0);
  free(zero);
}

/* INIT, then rounds of FORWARD, BACKWARD and UPDATE on s; every task must
 * succeed, every loss be finite. */
static void train(ember_client *c, stage *s, int rounds) {
  state_on(c, s);
  finish(submit(c, EMBER__CNN__OP__INIT, s, NULL, 0), "INIT", NULL);
  size_t px = (size_t)s->in.h * s->in.w * s->in.c * s->batch;
  float *x = malloc(px * sizeof *x);
  uint8_t *labels = malloc(s->batch);
  CHECK(x && labels);
  for (size_t i = 0; i < px; i++) x[i] = (float)((i * 7919) % 101) / 101.0f;
  for (uint32_t i = 0; i < s->batch; i++) labels[i] = (uint8_t)(i % 10);
  ember_block *in[2];
  CHECK_EQ(ember_block_create(c, x, px * sizeof *x, 0, &in[0]), 0);
  CHECK_EQ(ember_block_create(c, labels, s->batch, 0, &in[1]), 0);
  /* a round's tasks queued at once, as ember_train's pipeline queues
   * them: they run one at a time (one state block), each on whichever
   * worker is free when the one before ends */
  for (int r = 0; r < rounds; r++) {
    double loss = NAN;
    ember_task *f = submit(c, EMBER__CNN__OP__FORWARD, s, in, 2);
    ember_task *b = submit(c, EMBER__CNN__OP__BACKWARD, s, NULL, 0);
    ember_task *u = submit(c, EMBER__CNN__OP__UPDATE, s, NULL, 0);
    finish(f, "FORWARD", &loss);
    CHECK(isfinite(loss));
    finish(b, "BACKWARD", NULL);
    finish(u, "UPDATE", NULL);
  }
  ember_block_release(in[0]);
  ember_block_release(in[1]);
  free(x);
  free(labels);
}

/* The daemon's resident bytes (VmRSS), or exits. */
static uint64_t rss(const nam_proc *p) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)p->pid);
  FILE *f = fopen(path, "r");
  CHECK(f != NULL);
  unsigned long long kib = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmRSS: %llu kB", &kib) == 1) break;
  fclose(f);
  CHECK(kib > 0);
  return kib * 1024;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Wait (at most 20 s; none under a sanitizer, whose allocator keeps what
 * is freed: CHECK_RSS) for the daemon's RSS to be at most limit; returns
 * the last figure. */
static uint64_t rss_falls_to(const nam_proc *p, uint64_t limit) {
#ifdef EMBER_SANITIZED
  double end = now_s();
#else
  double end = now_s() + 20;
#endif
  uint64_t r = rss(p);
  while (r > limit && now_s() < end) {
    struct timespec ms = {0, 50 * 1000 * 1000};
    nanosleep(&ms, NULL);
    r = rss(p);
  }
  return r;
}

/* RSS once two readings 50 ms apart agree (at most 2 s), from r. */
static uint64_t settled(const nam_proc *p, uint64_t r) {
  uint64_t prev = 0;
  for (int i = 0; i < 40 && r != prev; i++) {
    struct timespec ms = {0, 50 * 1000 * 1000};
    nanosleep(&ms, NULL);
    prev = r;
    r = rss(p);
  }
  return r;
}

#define PADDED                                                               \
  "[net]\nheight=12\nwidth=12\nchannels=1\nbatch=8\n"                        \
  "[convolutional]\nfilters=8\nsize=%u\npadding=%u\nactivation=relu\n"      \
  "[maxpool]\nsize=2\nstride=2\n"                                            \
  "[connected]\noutput=10\nactivation=linear\n[softmax]\n"

#define BIG                                                                  \
  "[net]\nheight=64\nwidth=64\nchannels=1\n"                                 \
  "[convolutional]\nfilters=48\nsize=1\npadding=1\nactivation=relu\n"       \
  "[connected]\noutput=10\nactivation=linear\n[softmax]\n"

static void test_padding(void) {
  nam_proc nam;
  const char *sets[] = {"cpu_workers=2", "fpga-emu.boards=0",
                        "opencl.enabled=false", NULL};
  start(&nam, sets);
  ember_client *c = connect_to(&nam);
  static const unsigned shapes[][2] = {{1, 1}, {1, 2}, {3, 3}};
  for (size_t i = 0; i < 3; i++) {
    char cfg[1024];
    snprintf(cfg, sizeof cfg, PADDED, shapes[i][0], shapes[i][1]);
    stage s;
    stage_init(&s, cfg, 8);
    train(c, &s, ROUNDS);
    ember_block_release(s.state);
    CHECK(alive(&nam));
    printf("padding: size=%u padding=%u: INIT and %d rounds of FORWARD, "
           "BACKWARD, UPDATE on the pooled stage, 2 workers: all done\n",
           shapes[i][0], shapes[i][1], ROUNDS);
  }
  ember_close(c);
  /* and the daemon serves the next client */
  c = connect_to(&nam);
  char cfg[1024];
  snprintf(cfg, sizeof cfg, PADDED, 1u, 1u);
  stage s;
  stage_init(&s, cfg, 8);
  train(c, &s, 1);
  ember_block_release(s.state);
  ember_close(c);
  stop(&nam);
}

/* A client's warm-up (oneDNN's code, OpenMP's threads), then the
 * baseline: the daemon's RSS with no client. */
static uint64_t baseline(const nam_proc *nam) {
  ember_client *c = connect_to(nam);
  char cfg[1024];
  snprintf(cfg, sizeof cfg, PADDED, 1u, 1u);
  stage s;
  stage_init(&s, cfg, 8);
  train(c, &s, 1);
  ember_block_release(s.state);
  ember_close(c);
  /* its small stage goes too */
  return settled(nam, rss(nam));
}

static void test_leave(void) {
  nam_proc nam;
  const char *sets[] = {"cpu_workers=1", "fpga-emu.boards=0",
                        "opencl.enabled=false", NULL};
  start(&nam, sets);
  uint64_t base = baseline(&nam);
  stage s;
  stage_init(&s, BIG, BIG_BATCH);
  uint64_t big = stage_bytes(&s);
  ember_client *c = connect_to(&nam);
  train(c, &s, 1);
  uint64_t held = rss(&nam);
  printf("leave: baseline RSS %.1f MiB; a stage of %.1f MiB; RSS %.1f MiB "
         "while its client is connected\n", base / MiB, big / MiB,
         held / MiB);
  /* the pool keeps it while the client is there */
  CHECK(held >= base + big * 3 / 4);
  ember_block_release(s.state);
  ember_close(c);
  uint64_t after = settled(&nam, rss_falls_to(&nam, base + big / 4));
  printf("leave: RSS %.1f MiB after the client left (+%.1f MiB over the "
         "baseline)\n", after / MiB, ((double)after - (double)base) / MiB);
  CHECK_RSS(after <= base + big / 4);
  stop(&nam);
}

/* Three stages of about 200 MiB each on one client, whose pool budget
 * is budget bytes (accelerator_cache, NULL: the default): what stays
 * resident beyond the baseline is at most the budget, the state blocks
 * twice (the client's sealed memfd, mapped, and the cache's copy the
 * tasks update) and 64 MiB for what the allocator keeps of freed small
 * buffers. */
static void test_budget(const char *cache, uint64_t budget) {
  nam_proc nam;
  char set_cache[64];
  snprintf(set_cache, sizeof set_cache, "accelerator_cache=%s",
           cache ? cache : "");
  const char *sets[] = {"cpu_workers=1", "fpga-emu.boards=0",
                        "opencl.enabled=false", cache ? set_cache : NULL,
                        NULL};
  start(&nam, sets);
  uint64_t base = baseline(&nam);
  ember_client *c = connect_to(&nam);
  uint64_t most = 0, states = 0;
  stage s[3];
  for (int i = 0; i < 3; i++) {
    stage_init(&s[i], BIG, BIG_BATCH - 4 * (uint32_t)i);
    uint64_t b = stage_bytes(&s[i]);
    if (b > most) most = b;
    cnn_net *net = NULL;
    char err[256];
    CHECK(cnn_cfg_parse(s[i].cfg, s[i].len, "t", &net, err, sizeof err) ==
          0);
    cnn_layout L;
    CHECK(cnn_layout_compute(net, 0, s[i].end, s[i].batch, 1, &L) == 0);
    cnn_net_destroy(net);
    states += L.total;
    train(c, &s[i], 1);
  }
  uint64_t limit = base + budget + 2 * states + 64 * 1048576ull;
  uint64_t r = rss_falls_to(&nam, limit);
  printf("budget (accelerator_cache %s): baseline RSS %.1f MiB; 3 stages "
         "of up to %.1f MiB each and %.1f MiB of state blocks on one "
         "client: RSS %.1f MiB (at most %.1f MiB)\n",
         cache ? cache : "256MiB, the default", base / MiB, most / MiB,
         states / MiB, r / MiB, limit / MiB);
  CHECK_RSS(r <= limit);
  for (int i = 0; i < 3; i++) ember_block_release(s[i].state);
  ember_close(c);
  stop(&nam);
}

/* test_nam_cnn_stages [padding|leave|budget]: one part, or all. */
int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
#ifdef EMBER_SANITIZED
  /* freed buffers go back at once, so that RSS tells what is held */
  const char *asan = getenv("ASAN_OPTIONS");
  char opts[512];
  snprintf(opts, sizeof opts, "%s%squarantine_size_mb=0", asan ? asan : "",
           asan && asan[0] ? ":" : "");
  setenv("ASAN_OPTIONS", opts, 1);
#endif
  atexit(at_exit);
  const char *only = argc > 1 ? argv[1] : NULL;
  if (!only || strcmp(only, "padding") == 0) test_padding();
  if (!only || strcmp(only, "leave") == 0) test_leave();
  if (!only || strcmp(only, "budget") == 0) {
    test_budget(NULL, 256 * 1048576ull);
    test_budget("0", 0);
  }
  printf("ok\n");
  return 0;
}
