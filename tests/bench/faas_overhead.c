/*
 * faas_overhead - what serving sw through ember costs, against calling the
 * kernel directly (Blaze section 6.4 measured the same for its NAM).
 *
 * One batch of DNA pairs (150-base reads cut with ~3% substitutions from
 * 300-base windows of the bundled human EMBL entries) is aligned
 *   (a) by calling the sw accelerator in-process on T threads,
 *   (b) through libember's embedded mode,
 *   (c) through ember-nam over its unix socket,
 *   (d) through ember-nam over TCP loopback,
 * with 1 and 4 client threads sharing one client; T is the NAM's number of
 * cpu workers (one per core). It prints pairs/s and the ratios b/a, c/a,
 * d/a (each the best of three runs), then the round-trip latency of
 * one-pair tasks over the unix socket and TCP loopback beside the kernel's
 * own time for one pair, called in-process. With --sweep it also finds the
 * smallest batch that keeps 0.97 of in-process throughput over the unix
 * socket.
 *
 * Usage: faas_overhead [PAIRS (default 100000)] [LATENCY_SAMPLES (10000)]
 *                      [--sweep]
 * FAAS_SET=key=value passes one more --set to the NAM (e.g.
 * opencl.enabled=false, to see what an idle platform's threads cost).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../integration/harness.h"
#include "sw/seqset.h"
#include "sw/sw.h"

#define HUM1 EMBER_SOURCE_DIR "/tests/data/sw/emboss_test_hum1.fa"
#define QLEN 150
#define RLEN 300
#define REPEATS 3

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng(void) { /* splitmix64: fixed seed, same batch every run */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

typedef struct batch {
  size_t n;
  ember_seq *q, *r;
  char *text;
} batch;

static int make_batch(batch *b, size_t n) {
  ember_seq *chroms;
  size_t nc;
  char *storage = fasta_read(HUM1, &chroms, &nc);
  if (!storage) return -1;
  b->n = n;
  b->q = malloc(n * sizeof *b->q);
  b->r = malloc(n * sizeof *b->r);
  b->text = malloc(n * (QLEN + RLEN));
  static const char acgt[] = "ACGT";
  for (size_t i = 0; i < n; i++) {
    const ember_seq *c;
    do c = &chroms[rng() % nc]; while (c->length < RLEN);
    size_t at = rng() % (c->length - RLEN + 1);
    char *ref = b->text + i * (QLEN + RLEN), *read = ref + RLEN;
    memcpy(ref, c->residues + at, RLEN);
    size_t off = rng() % (RLEN - QLEN + 1);
    memcpy(read, ref + off, QLEN);
    for (size_t k = 0; k < QLEN; k++)
      if (rng() % 100 < 3) read[k] = acgt[rng() % 4];
    b->q[i] = (ember_seq){read, QLEN};
    b->r[i] = (ember_seq){ref, RLEN};
  }
  free(chroms);
  free(storage);
  return 0;
}

/* ---- (a) the kernel in-process ---------------------------------------- */

typedef struct direct {
  const batch *b;
  size_t per;
  atomic_size_t next;
  uint8_t *params;
  size_t params_len;
} direct;

static uint8_t *seqset(const ember_seq *s, size_t n, size_t *bytes) {
  const char *res[8192];
  size_t lens[8192];
  for (size_t i = 0; i < n; i++) {
    res[i] = s[i].residues;
    lens[i] = s[i].length;
  }
  *bytes = acc_seqset_bytes(lens, n);
  uint8_t *buf = malloc(*bytes);
  acc_seqset_write(buf, *bytes, res, lens, n);
  return buf;
}

static void *direct_worker(void *arg) {
  direct *d = arg;
  for (;;) {
    size_t first = atomic_fetch_add(&d->next, d->per);
    if (first >= d->b->n) break;
    size_t count = d->b->n - first < d->per ? d->b->n - first : d->per;
    acc_block in[2];
    uint8_t *qb = seqset(d->b->q + first, count, &in[0].size);
    uint8_t *rb = seqset(d->b->r + first, count, &in[1].size);
    in[0].data = qb;
    in[1].data = rb;
    void *prep;
    char err[256];
    acc_output out = {0};
    if (acc_sw_descriptor.validate(d->params, d->params_len, in, 2, &prep, err,
                                   sizeof err) != 0 ||
        acc_sw_descriptor.run_cpu(prep, in, 2, &(acc_run_ctx){0}, &out, err,
                                  sizeof err) != 0) {
      fprintf(stderr, "direct: %s\n", err);
      exit(1);
    }
    acc_sw_descriptor.release(prep);
    free(out.data);
    free(qb);
    free(rb);
  }
  return NULL;
}

static double run_direct(const batch *b, unsigned threads, size_t per) {
  direct d = {.b = b, .per = per};
  atomic_init(&d.next, 0);
  Ember__Sw__Params p = EMBER__SW__PARAMS__INIT;
  d.params_len = ember__sw__params__get_packed_size(&p);
  d.params = malloc(d.params_len + 1);
  ember__sw__params__pack(&p, d.params);
  pthread_t th[64];
  uint64_t t0 = now_ns();
  for (unsigned i = 0; i < threads; i++) pthread_create(&th[i], NULL, direct_worker, &d);
  for (unsigned i = 0; i < threads; i++) pthread_join(th[i], NULL);
  double secs = (double)(now_ns() - t0) / 1e9;
  free(d.params);
  return (double)b->n / secs;
}

/* ---- (b), (c), (d) through libember ------------------------------------ */

typedef struct client_job {
  ember_client *c;
  const batch *b;
  size_t first, count;
  ember_sw_result *out;
  ember_sw_report rep;
  int rc;
} client_job;

static void *client_worker(void *arg) {
  client_job *j = arg;
  ember_sw_params p;
  ember_sw_params_default(&p);
  j->rep.size = sizeof j->rep;
  j->rc = ember_sw_align(j->c, &p, j->b->q + j->first, j->b->r + j->first, j->count,
                         j->out + j->first, &j->rep, NULL, NULL);
  return NULL;
}

static double run_client(const char *address, const batch *b, unsigned client_threads,
                         unsigned engine_threads, size_t *fallbacks) {
  ember_client *c;
  ember_options opts = {.client_name = "faas_overhead",
                        .embedded_threads = engine_threads, .no_fallback = 1};
  if (ember_connect(address, &opts, &c) != 0) {
    fprintf(stderr, "%s: %s\n", address, ember_last_error());
    exit(1);
  }
  ember_sw_result *out = malloc(b->n * sizeof *out);
  client_job jobs[16];
  pthread_t th[16];
  size_t share = (b->n + client_threads - 1) / client_threads;
  uint64_t t0 = now_ns();
  for (unsigned i = 0; i < client_threads; i++) {
    size_t first = i * share;
    jobs[i] = (client_job){.c = c, .b = b, .first = first, .out = out,
                           .count = first >= b->n ? 0 : b->n - first < share ? b->n - first : share};
    pthread_create(&th[i], NULL, client_worker, &jobs[i]);
  }
  *fallbacks = 0;
  for (unsigned i = 0; i < client_threads; i++) {
    pthread_join(th[i], NULL);
    if (jobs[i].rc) {
      fprintf(stderr, "%s: %s\n", address, ember_last_error());
      exit(1);
    }
    *fallbacks += jobs[i].rep.tasks_fallback;
  }
  double secs = (double)(now_ns() - t0) / 1e9;
  free(out);
  ember_close(c);
  return (double)b->n / secs;
}

static double best_client(const char *address, const batch *b, unsigned ct,
                          unsigned cores, size_t *fallbacks) {
  double best = 0;
  for (int r = 0; r < REPEATS; r++) {
    double v = run_client(address, b, ct, cores, fallbacks);
    if (v > best) best = v;
  }
  return best;
}

/* ---- the machine's own floor ------------------------------------------- */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}


/* A byte bounced between two threads through pipes: two wake-ups per round
 * trip, nothing else. A NAM round trip wakes three threads at least (the
 * NAM's loop, the client's reader, the caller) besides the kernel, so this
 * says what the latency figures below can be on this machine. */
static int ping_fd[2], pong_fd[2];

static void *pong(void *arg) {
  char c;
  while (read(ping_fd[0], &c, 1) == 1 && write(pong_fd[1], &c, 1) == 1) {}
  return NULL;
}

static void wake_floor(size_t samples) {
  if (pipe(ping_fd) != 0 || pipe(pong_fd) != 0) return;
  pthread_t th;
  pthread_create(&th, NULL, pong, NULL);
  uint64_t *rt = malloc(samples * sizeof *rt);
  char c = 'x';
  for (size_t i = 0; i < samples; i++) {
    uint64_t t0 = now_ns();
    if (write(ping_fd[1], &c, 1) != 1 || read(pong_fd[0], &c, 1) != 1) break;
    rt[i] = now_ns() - t0;
  }
  close(ping_fd[1]);
  pthread_join(th, NULL);
  close(ping_fd[0]);
  close(pong_fd[0]);
  close(pong_fd[1]);
  qsort(rt, samples, sizeof *rt, cmp_u64);
  printf("floor: thread ping-pong through pipes (2 wake-ups):  p50 %6.1f us  p99 %6.1f us\n",
         rt[samples / 2] / 1e3, rt[samples * 99 / 100] / 1e3);
  free(rt);
}

/* ---- one-pair round trips ---------------------------------------------- */

/* percentiles of sorted samples */
static double p50_us(const uint64_t *v, size_t n) { return v[n / 2] / 1e3; }
static double p99_us(const uint64_t *v, size_t n) { return v[n * 99 / 100] / 1e3; }

/* The kernel alone on one pair, in-process (validate, run, release): what
 * a round trip through the NAM is compared with. Returns its p50 in us. */
static double kernel_latency(const batch *b, size_t samples) {
  Ember__Sw__Params p = EMBER__SW__PARAMS__INIT;
  size_t params_len = ember__sw__params__get_packed_size(&p);
  uint8_t *params = malloc(params_len + 1);
  ember__sw__params__pack(&p, params);
  uint64_t *t = malloc(samples * sizeof *t);
  acc_block in[2];
  uint8_t *qb = seqset(b->q, 1, &in[0].size), *rb = seqset(b->r, 1, &in[1].size);
  in[0].data = qb;
  in[1].data = rb;
  for (size_t i = 0; i < samples + 100; i++) {
    uint64_t t0 = now_ns();
    void *prep;
    char err[256];
    acc_output out = {0};
    if (acc_sw_descriptor.validate(params, params_len, in, 2, &prep, err,
                                   sizeof err) != 0 ||
        acc_sw_descriptor.run_cpu(prep, in, 2, &(acc_run_ctx){0}, &out, err,
                                  sizeof err) != 0)
      exit(1);
    acc_sw_descriptor.release(prep);
    free(out.data);
    if (i >= 100) t[i - 100] = now_ns() - t0;
  }
  qsort(t, samples, sizeof *t, cmp_u64);
  double p50 = p50_us(t, samples);
  printf("kernel in-process, 1 pair (validate + run):   p50 %6.1f us  p99 %6.1f us\n",
         p50, p99_us(t, samples));
  free(t);
  free(qb);
  free(rb);
  free(params);
  return p50;
}

static void latency(const char *address, const batch *b, size_t samples,
                    double kernel_p50) {
  ember_client *c;
  ember_options opts = {.client_name = "faas_latency", .no_fallback = 1};
  if (ember_connect(address, &opts, &c) != 0) exit(1);
  uint64_t *full = malloc(samples * sizeof *full), *rt = malloc(samples * sizeof *rt);
  uint64_t *inside = malloc(samples * sizeof *inside), *queued = malloc(samples * sizeof *queued);
  uint64_t *exec = malloc(samples * sizeof *exec);
  ember_sw_params p;
  ember_sw_params_default(&p);
  /* prepared blocks: the submit -> result path alone */
  size_t qbytes, rbytes;
  uint8_t *qs = seqset(b->q, 1, &qbytes), *rs = seqset(b->r, 1, &rbytes);
  ember_block *in[2];
  ember_block_create(c, qs, qbytes, 0, &in[0]);
  ember_block_create(c, rs, rbytes, 0, &in[1]);
  for (size_t i = 0; i < samples + 100; i++) { /* 100 warm-up rounds */
    ember_sw_result res;
    uint64_t t0 = now_ns();
    if (ember_sw_align(c, &p, &b->q[i % b->n], &b->r[i % b->n], 1, &res, NULL, NULL,
                       NULL) != 0)
      exit(1);
    uint64_t t1 = now_ns();
    ember_task *t;
    if (ember_run(c, "sw", NULL, 0, in, 2, NULL, &t) != 0 || ember_task_status(t) != 0)
      exit(1);
    uint64_t t2 = now_ns();
    if (i >= 100) {
      full[i - 100] = t1 - t0;
      rt[i - 100] = t2 - t1;
      inside[i - 100] = ember_task_get_info(t)->server_ns;
      queued[i - 100] = ember_task_get_info(t)->queue_ns;
      exec[i - 100] = ember_task_get_info(t)->exec_ns;
    }
    ember_task_free(t);
  }
  uint64_t *all[] = {full, rt, inside, queued, exec};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++)
    qsort(all[i], samples, sizeof *all[i], cmp_u64);
  printf("one-pair round trip over %s, %zu samples:\n", address, samples);
  double rt50 = p50_us(rt, samples), full50 = p50_us(full, samples);
  printf("  task on ready blocks (ember_run):        p50 %6.1f us  p99 %6.1f us"
         "  (kernel + %.1f, p99 kernel + %.1f)\n", rt50, p99_us(rt, samples),
         rt50 - kernel_p50, p99_us(rt, samples) - kernel_p50);
  printf("    of which inside the NAM:               p50 %6.1f us  p99 %6.1f us\n",
         p50_us(inside, samples), p99_us(inside, samples));
  printf("    of which queued (until a worker took it): p50 %6.1f us  p99 %6.1f us\n",
         p50_us(queued, samples), p99_us(queued, samples));
  printf("    of which executing the kernel:         p50 %6.1f us  p99 %6.1f us\n",
         p50_us(exec, samples), p99_us(exec, samples));
  printf("  whole call (ember_sw_align, 1 pair):      p50 %6.1f us  p99 %6.1f us"
         "  (kernel + %.1f)\n", full50, p99_us(full, samples), full50 - kernel_p50);
  ember_block_release(in[0]);
  ember_block_release(in[1]);
  free(qs);
  free(rs);
  free(full);
  free(rt);
  free(inside);
  free(queued);
  free(exec);
  ember_close(c);
}

/* ---- the smallest batch that keeps 0.97 -------------------------------- */

/* The first n of b. */
static batch head_of(const batch *b, size_t n) {
  batch h = *b;
  h.n = n;
  return h;
}

static void batch_sweep(nam_proc *nam, const batch *b, unsigned cores,
                        size_t per) {
  static const size_t sizes[] = {500, 1000, 2000, 5000, 10000, 20000, 50000};
  printf("\nbatch size over the unix socket (1 client thread): ratio to in-process\n");
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes && sizes[i] <= b->n; i++) {
    batch h = head_of(b, sizes[i]);
    /* the same tasks libember cuts: at least 16 of them (sw_align.c) */
    size_t cut = (h.n + 15) / 16 < per ? (h.n + 15) / 16 : per;
    double a = 0;
    for (int r = 0; r < REPEATS; r++) {
      double v = run_direct(&h, cores, cut);
      if (v > a) a = v;
    }
    size_t fb;
    double v = best_client(nam->unix_addr, &h, 1, cores, &fb);
    printf("  %6zu pairs: %8.0f pairs/s against %8.0f: %.3f%s\n", sizes[i], v, a,
           v / a, v / a >= 0.97 ? "  (>= 0.97)" : "");
  }
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
  size_t samples = argc > 2 ? strtoul(argv[2], NULL, 10) : 10000;
  int sweep = argc > 3 && strcmp(argv[3], "--sweep") == 0;
  unsigned cores = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
  batch b;
  if (n == 0 || samples == 0 || make_batch(&b, n) != 0) {
    fprintf(stderr, "usage: faas_overhead [PAIRS] [LATENCY_SAMPLES]\n");
    return 2;
  }
  /* the task size libember picks for a batch this large */
  size_t per = (size_t)(((uint64_t)1 << 25) / (QLEN * RLEN));
  printf("faas_overhead: %zu DNA pairs (%d x %d), %u cores, sw kernel %s, "
         "%zu pairs per task\n", n, QLEN, RLEN, cores,
         acc_sw_isa_name(acc_sw_isa_selected()), per);

  nam_proc nam;
  char workers[32];
  snprintf(workers, sizeof workers, "cpu_workers=%u", cores);
  const char *extra = getenv("FAAS_SET");
  const char *sets[] = {workers, "log_level=warning", extra ? extra : workers,
                        NULL};
  if (nam_start(&nam, sets) != 0) return 1;

  /* each figure is the best of REPEATS runs: the machine is shared */
  double a = 0;
  for (int r = 0; r < REPEATS; r++) {
    double v = run_direct(&b, cores, per);
    if (v > a) a = v;
  }
  printf("\n%-34s %12s %8s\n", "mode", "pairs/s", "ratio");
  printf("%-34s %12.0f %8s\n", "(a) kernel in-process", a, "1.00");
  const unsigned client_threads[2] = {1, 4};
  for (int k = 0; k < 2; k++) {
    unsigned ct = client_threads[k];
    size_t fb;
    char label[64];
    double v = best_client("embedded", &b, ct, cores, &fb);
    snprintf(label, sizeof label, "(b) embedded, %u client thread%s", ct, ct > 1 ? "s" : "");
    printf("%-34s %12.0f %8.3f\n", label, v, v / a);
    v = best_client(nam.unix_addr, &b, ct, cores, &fb);
    snprintf(label, sizeof label, "(c) unix socket, %u client thread%s", ct, ct > 1 ? "s" : "");
    printf("%-34s %12.0f %8.3f\n", label, v, v / a);
    v = best_client(nam.tcp_addr, &b, ct, cores, &fb);
    snprintf(label, sizeof label, "(d) tcp loopback, %u client thread%s", ct, ct > 1 ? "s" : "");
    printf("%-34s %12.0f %8.3f\n", label, v, v / a);
  }
  printf("\n");
  wake_floor(samples);
  double kernel_p50 = kernel_latency(&b, samples);
  latency(nam.unix_addr, &b, samples, kernel_p50);
  latency(nam.tcp_addr, &b, samples, kernel_p50);
  if (sweep) batch_sweep(&nam, &b, cores, per);
  nam_stop(&nam);
  nam_cleanup(&nam);
  free(b.q);
  free(b.r);
  free(b.text);
  return 0;
}
