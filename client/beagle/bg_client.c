/* bg_client.c - libember-beagle's ember client, its resources (one per
 * platform kind of the NAM or the embedded engine), BEAGLE's resource
 * lists, version and citation, and beagleFinalize. */
#include <math.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bg_internal.h"

#define BEAGLE_API_VERSION "3.1.2"

static pthread_mutex_t g_client_lock = PTHREAD_MUTEX_INITIALIZER;
static ember_client *g_client;
static int g_connect_failed;
static bg_resource *g_resources;
static size_t g_n_resources;
static BeagleResourceList g_list;
static BeagleResource *g_list_items;
static char **g_list_strings;          /* names and descriptions, owned */
static BeagleBenchmarkedResourceList *g_bench;
static char g_version[64];

/* ---- messages and errors -------------------------------------------------- */

/* The library never writes to stderr by itself: a program's output is its
 * own. EMBER_BEAGLE_DEBUG asks for the log: a path (it holds a '/') is
 * appended to, any other value means stderr. */
void bg_warn(const char *fmt, ...) {
  const char *debug = getenv("EMBER_BEAGLE_DEBUG");
  if (!debug || !*debug) return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  if (!strchr(debug, '/')) {
    fprintf(stderr, "libember-beagle: %s\n", line);
    return;
  }
  FILE *f = fopen(debug, "ae");
  if (!f) return;
  fprintf(f, "libember-beagle[%ld]: %s\n", (long)getpid(), line);
  fclose(f);
}

int bg_ember_error(int ember_rc) {
  switch (ember_rc) {
  case 0:
    return BEAGLE_SUCCESS;
  case EMBER_ENOMEM:
    return BEAGLE_ERROR_OUT_OF_MEMORY;
  case EMBER_ENOPLATFORM:
  case EMBER_ECONNECT:
    return BEAGLE_ERROR_NO_RESOURCE;
  case EMBER_EPARAM:
    return BEAGLE_ERROR_OUT_OF_RANGE;
  default:
    return BEAGLE_ERROR_GENERAL;
  }
}

/* ---- the client ----------------------------------------------------------- */

static const char *address_wanted(void) {
  const char *a = getenv("EMBER_NAM");
  return a && *a ? a : "embedded";
}

static ember_client *client_locked(void) {
  if (g_client || g_connect_failed) return g_client;
  const char *address = address_wanted();
  ember_options o = {.size = sizeof o, .client_name = "libember-beagle"};
  /* a NAM that cannot be reached fails the instance at once: tasks on
   * state blocks never run in-process */
  o.no_fallback = strcmp(address, "embedded") != 0;
  int rc = ember_connect(address, &o, &g_client);
  if (rc) {
    g_client = NULL;
    g_connect_failed = 1;
    bg_warn("cannot connect to %s: %s (%s)", address, ember_strerror(rc),
            ember_last_error());
  }
  return g_client;
}

ember_client *bg_client(void) {
  pthread_mutex_lock(&g_client_lock);
  ember_client *c = client_locked();
  pthread_mutex_unlock(&g_client_lock);
  return c;
}

/* ---- resources ------------------------------------------------------------ */

/* What every resource supports, whatever its processor. Calls that only
 * change an instance are queued and computed with the next call that needs
 * a result: that is BEAGLE's asynchronous computation as well. */
#define BG_COMMON_FLAGS                                                      \
  (BEAGLE_FLAG_PRECISION_SINGLE | BEAGLE_FLAG_PRECISION_DOUBLE |             \
   BEAGLE_FLAG_COMPUTATION_SYNCH | BEAGLE_FLAG_COMPUTATION_ASYNCH |          \
   BEAGLE_FLAG_EIGEN_REAL | BEAGLE_FLAG_SCALING_MANUAL |                     \
   BEAGLE_FLAG_SCALERS_RAW | BEAGLE_FLAG_SCALERS_LOG |                       \
   BEAGLE_FLAG_INVEVEC_STANDARD | BEAGLE_FLAG_INVEVEC_TRANSPOSED |           \
   BEAGLE_FLAG_THREADING_NONE)

/* The cpu kind's kernels are ember's AVX2 and AVX-512 ones where the CPU
 * has them (unless EMBER_PLF_ISA=scalar), and it threads over patterns
 * (bg_default_threads). The opencl kind is a GPU's, or a CPU's such as
 * pocl's (probe_kinds looks); fpga-emu boards run no vector code of
 * their own. */
static const struct {
  const char *kind;
  long processor, framework, extra;
} kinds[] = {
    {"cpu", BEAGLE_FLAG_PROCESSOR_CPU, BEAGLE_FLAG_FRAMEWORK_CPU,
     BEAGLE_FLAG_VECTOR_NONE | BEAGLE_FLAG_THREADING_CPP |
         BEAGLE_FLAG_THREADING_OPENMP},
    {"opencl", BEAGLE_FLAG_PROCESSOR_GPU, BEAGLE_FLAG_FRAMEWORK_OPENCL,
     BEAGLE_FLAG_VECTOR_NONE},
    {"fpga-emu", BEAGLE_FLAG_PROCESSOR_FPGA, 0, BEAGLE_FLAG_VECTOR_NONE},
};
#define N_KINDS (sizeof kinds / sizeof *kinds)

static int list_has(const char *csv, const char *word) {
  size_t n = strlen(word);
  for (const char *p = csv; p && *p;) {
    const char *end = strchr(p, ',');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    if (len == n && strncmp(p, word, n) == 0) return 1;
    p = end ? end + 1 : NULL;
  }
  return 0;
}

/* The kinds the NAM has and whether plf runs on each; with no answer, a
 * cpu that runs it (instances then fail with the connection's error). */
static void probe_kinds(int have[N_KINDS], int plf[N_KINDS],
                        int *opencl_cpu) {
  memset(have, 0, N_KINDS * sizeof *have);
  memset(plf, 0, N_KINDS * sizeof *plf);
  int cpus = 0, others = 0;
  ember_client *c = client_locked();
  ember_listing *l = NULL;
  if (c && ember_list_accelerators(c, &l) == 0) {
    const char *plf_platforms = "";
    for (size_t i = 0; i < ember_listing_accelerators(l); i++) {
      const ember_accel_info *a = ember_listing_accelerator(l, i);
      if (strcmp(a->name, "plf") == 0) plf_platforms = a->platforms;
    }
    for (size_t i = 0; i < ember_listing_platforms(l); i++) {
      const ember_platform_info *p = ember_listing_platform(l, i);
      for (size_t k = 0; k < N_KINDS; k++)
        if (strcmp(p->kind, kinds[k].kind) == 0) {
          have[k] = 1;
          if (strcmp(p->kind, "opencl") == 0) {
            /* platform_opencl.c starts the description with the type */
            if (strncmp(p->device, "CPU ", 4) == 0)
              cpus++;
            else
              others++;
          }
          /* the listing names platforms; a kind runs plf if one of its
           * platforms does */
          if (list_has(plf_platforms, p->name) ||
              list_has(plf_platforms, p->kind))
            plf[k] = 1;
        }
    }
    ember_listing_free(l);
  }
  *opencl_cpu = cpus > 0 && others == 0;
  int any = 0;
  for (size_t k = 0; k < N_KINDS; k++) any |= have[k];
  if (!any) have[0] = plf[0] = 1;
}

long bg_vector_flag(const char *kind) {
  if (strcmp(kind, "cpu") != 0) return BEAGLE_FLAG_VECTOR_NONE;
  const char *isa = getenv("EMBER_PLF_ISA");
  if (isa && strcmp(isa, "scalar") == 0) return BEAGLE_FLAG_VECTOR_NONE;
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")
             ? BEAGLE_FLAG_VECTOR_AVX
             : BEAGLE_FLAG_VECTOR_NONE;
}

unsigned bg_default_threads(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  int n = CPU_COUNT(&set);
  return n < 1 ? 1u : n > 64 ? 64u : (unsigned)n;
}

static char *dup_text(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dup_text(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return strdup(buf);
}

static void build_resources_locked(void) {
  if (g_resources) return;
  int have[N_KINDS], plf[N_KINDS], opencl_cpu;
  probe_kinds(have, plf, &opencl_cpu);
  g_resources = calloc(N_KINDS, sizeof *g_resources);
  g_list_items = calloc(N_KINDS, sizeof *g_list_items);
  g_list_strings = calloc(2 * N_KINDS, sizeof *g_list_strings);
  if (!g_resources || !g_list_items || !g_list_strings) {
    /* nothing to list: a static cpu entry keeps callers safe */
    static bg_resource cpu = {"cpu", 1, 0, 0};
    static BeagleResource item = {"ember cpu", "ember", 0, 0};
    cpu.support = BG_COMMON_FLAGS | kinds[0].processor | kinds[0].framework |
                  kinds[0].extra | bg_vector_flag("cpu");
    cpu.required = kinds[0].processor | kinds[0].framework;
    item.supportFlags = cpu.support;
    item.requiredFlags = cpu.required;
    free(g_resources);
    free(g_list_items);
    free(g_list_strings);
    g_list_items = NULL;
    g_list_strings = NULL;
    g_resources = &cpu;
    g_n_resources = 1;
    g_list.list = &item;
    g_list.length = 1;
    return;
  }
  const char *where = g_client ? ember_client_address(g_client)
                               : address_wanted();
  size_t n = 0;
  for (size_t k = 0; k < N_KINDS; k++) {
    if (!have[k]) continue;
    bg_resource *r = &g_resources[n];
    r->kind = kinds[k].kind;
    r->runs_plf = plf[k];
    long processor = strcmp(r->kind, "opencl") == 0 && opencl_cpu
                         ? BEAGLE_FLAG_PROCESSOR_CPU
                         : kinds[k].processor;
    r->required = processor | kinds[k].framework;
    r->support = r->required | kinds[k].extra | bg_vector_flag(r->kind) |
                 (plf[k] ? BG_COMMON_FLAGS : BEAGLE_FLAG_COMPUTATION_SYNCH);
    char *name = dup_text("ember %s", r->kind);
    char *desc = dup_text("ember platform kind %s of %s%s", r->kind, where,
                          plf[k] ? "" : " (no plf accelerator there)");
    g_list_strings[2 * n] = name;
    g_list_strings[2 * n + 1] = desc;
    g_list_items[n].name = name ? name : "ember";
    g_list_items[n].description = desc ? desc : "ember";
    g_list_items[n].supportFlags = r->support;
    g_list_items[n].requiredFlags = r->required;
    n++;
  }
  g_n_resources = n;
  g_list.list = g_list_items;
  g_list.length = (int)n;
}

const bg_resource *bg_resources(size_t *n) {
  pthread_mutex_lock(&g_client_lock);
  build_resources_locked();
  const bg_resource *r = g_resources;
  *n = g_n_resources;
  pthread_mutex_unlock(&g_client_lock);
  return r;
}

static void free_bench(BeagleBenchmarkedResourceList *b) {
  if (!b) return;
  for (int i = 0; i < b->length; i++) free(b->list[i].implName);
  free(b->list);
  free(b);
}

void bg_close_client(void) {
  pthread_mutex_lock(&g_client_lock);
  if (g_list_strings) {
    for (size_t i = 0; i < 2 * g_n_resources; i++) free(g_list_strings[i]);
    free(g_list_strings);
    free(g_list_items);
    free(g_resources);
  }
  g_list_strings = NULL;
  g_list_items = NULL;
  g_resources = NULL;
  g_n_resources = 0;
  memset(&g_list, 0, sizeof g_list);
  free_bench(g_bench);
  g_bench = NULL;
  ember_close(g_client);
  g_client = NULL;
  g_connect_failed = 0;
  pthread_mutex_unlock(&g_client_lock);
}

/* ---- the library's calls -------------------------------------------------- */

const char *beagleGetVersion(void) {
  pthread_mutex_lock(&g_client_lock);
  if (!g_version[0])
    snprintf(g_version, sizeof g_version, "%s-ember-%s", BEAGLE_API_VERSION,
             ember_version());
  pthread_mutex_unlock(&g_client_lock);
  return g_version;
}

const char *beagleGetCitation(void) {
  return "Using libember-beagle, BEAGLE 3.1's interface on the ember "
         "accelerator service (plf accelerator). BEAGLE: Ayres et al. "
         "(2019) BEAGLE 3: improved performance, scaling, and usability for "
         "a high-performance computing library for statistical "
         "phylogenetics. Systematic Biology, 68(6), 1052-1061.";
}

BeagleResourceList *beagleGetResourceList(void) {
  pthread_mutex_lock(&g_client_lock);
  build_resources_locked();
  pthread_mutex_unlock(&g_client_lock);
  return &g_list;
}

int beagleFinalize(void) {
  int rc = bg_finalize_all();
  bg_close_client();
  return rc;
}

/* ---- benchmarks ----------------------------------------------------------- */

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* A benchmark instance on one resource: a caterpillar tree of the asked
 * shape, every matrix and partials buffer updated, then the root. */
typedef struct bench_run {
  int resource, inst, scaled, internal, buffers;
  int *mi;
  double *len;
  BeagleOperation *ops;
  long flags;
  char *impl;
  double best_ms;   /* the fastest timed evaluation; negative: an error */
} bench_run;

static void bench_free(bench_run *b) {
  if (b->inst >= 0) beagleFinalizeInstance(b->inst);
  free(b->mi);
  free(b->len);
  free(b->ops);
  b->inst = -1;
  b->mi = NULL;
  b->len = NULL;
  b->ops = NULL;
}

/* b's instance on resource r, filled: 0, or a BEAGLE error (b freed). */
static int bench_setup(bench_run *b, int r, int tips, int compact,
                       int states, int patterns, int categories, long pref,
                       long req, int scaled) {
  BeagleInstanceDetails d;
  *b = (bench_run){.resource = r, .inst = -1, .scaled = scaled,
                   .internal = tips - 1, .buffers = 2 * tips - 1};
  b->inst = beagleCreateInstance(tips, b->buffers - compact, compact, states,
                                 patterns, 1, b->buffers, categories,
                                 scaled ? b->internal + 1 : 0, &r, 1, pref,
                                 req, &d);
  if (b->inst < 0) return b->inst;
  b->flags = d.flags;
  b->impl = d.implName ? strdup(d.implName) : NULL;
  size_t ss = (size_t)states * states;
  double *ev = calloc(ss, sizeof *ev), *iv = calloc(ss, sizeof *iv);
  double *val = calloc((size_t)states, sizeof *val);
  double *v = calloc((size_t)patterns * states + categories + states, sizeof *v);
  int *st = calloc((size_t)patterns, sizeof *st);
  b->mi = calloc((size_t)b->buffers, sizeof *b->mi);
  b->len = calloc((size_t)b->buffers, sizeof *b->len);
  b->ops = calloc((size_t)b->internal, sizeof *b->ops);
  int rc = ev && iv && val && v && st && b->mi && b->len && b->ops
               ? 0 : BEAGLE_ERROR_OUT_OF_MEMORY;
  if (rc == 0) {
    int inst = b->inst;
    /* a Jukes-Cantor-like system: identity vectors, rates 0 and -1 */
    for (int i = 0; i < states; i++) {
      ev[i * states + i] = iv[i * states + i] = 1;
      val[i] = i ? -1.0 : 0.0;
    }
    beagleSetEigenDecomposition(inst, 0, ev, iv, val);
    for (int i = 0; i < states; i++) v[i] = 1.0 / states;
    beagleSetStateFrequencies(inst, 0, v);
    for (int c = 0; c < categories; c++) v[c] = 1.0 / categories;
    beagleSetCategoryWeights(inst, 0, v);
    for (int c = 0; c < categories; c++) v[c] = 1.0;
    beagleSetCategoryRates(inst, v);
    for (int t = 0; t < tips; t++) {
      if (t < compact) {
        for (int p = 0; p < patterns; p++) st[p] = (p * 7 + t * 3) % (states + 1);
        beagleSetTipStates(inst, t, st);
      } else {
        for (size_t i = 0; i < (size_t)patterns * states; i++)
          v[i] = (double)((i + (size_t)t) % 3) / 2;
        beagleSetTipPartials(inst, t, v);
      }
    }
    for (int k = 0; k < b->buffers; k++) {
      b->mi[k] = k;
      b->len[k] = 0.1;
    }
    for (int i = 0; i < b->internal; i++) {
      int dest = tips + i;
      b->ops[i] = (BeagleOperation){dest, scaled ? i : BEAGLE_OP_NONE,
                                    BEAGLE_OP_NONE, i == 0 ? 0 : dest - 1,
                                    i == 0 ? 0 : dest - 1, i + 1, i + 1};
    }
  }
  free(ev);
  free(iv);
  free(val);
  free(v);
  free(st);
  if (rc) bench_free(b);
  b->best_ms = rc ? rc : -1;
  return rc;
}

/* One evaluation on b, timed: ms, or a BEAGLE error. */
static double bench_eval(bench_run *b) {
  int root = b->buffers - 1, w = 0;
  int cum = b->scaled ? b->internal : BEAGLE_OP_NONE;
  double t0 = now_ms(), lnl;
  if (b->scaled) beagleResetScaleFactors(b->inst, b->internal);
  beagleUpdateTransitionMatrices(b->inst, 0, b->mi, NULL, NULL, b->len,
                                 b->buffers);
  beagleUpdatePartials(b->inst, b->ops, b->internal, cum);
  int rc = beagleCalculateRootLogLikelihoods(b->inst, &root, &w, &w, &cum, 1,
                                             &lnl);
  if (rc && rc != BEAGLE_ERROR_FLOATING_POINT) return rc;
  return now_ms() - t0;
}

/* Every run in turn, BENCH_ROUNDS times (the first a warm-up): a load
 * that comes and goes then weighs on each resource alike. Each keeps its
 * fastest. */
#define BENCH_ROUNDS 8

static void bench_all(bench_run *runs, size_t n) {
  for (int round = 0; round < BENCH_ROUNDS; round++)
    for (size_t i = 0; i < n; i++) {
      bench_run *b = &runs[i];
      if (b->inst < 0) continue;
      double ms = bench_eval(b);
      if (ms < 0) {
        b->best_ms = ms;
        bench_free(b);
      } else if (round > 0 && (b->best_ms < 0 || ms < b->best_ms)) {
        b->best_ms = ms;
      }
    }
}

static int cmp_bench(const void *a, const void *b) {
  const BeagleBenchmarkedResource *x = a, *y = b;
  if (x->benchmarkResult != y->benchmarkResult)
    return x->benchmarkResult < y->benchmarkResult ? -1 : 1;
  return x->number - y->number;
}

BeagleBenchmarkedResourceList *beagleGetBenchmarkedResourceList(
    int tipCount, int compactBufferCount, int stateCount, int patternCount,
    int categoryCount, int *resourceList, int resourceCount,
    long preferenceFlags, long requirementFlags, int eigenModelCount,
    int partitionCount, int calculateDerivatives, long benchmarkFlags) {
  (void)eigenModelCount;
  (void)partitionCount;
  if (calculateDerivatives) return NULL;   /* plf has no derivatives */
  if (tipCount < 2 || stateCount < 2 || patternCount < 1 ||
      categoryCount < 1 || compactBufferCount < 0 ||
      compactBufferCount > tipCount)
    return NULL;
  size_t n_res;
  const bg_resource *res = bg_resources(&n_res);
  BeagleBenchmarkedResourceList *out = calloc(1, sizeof *out);
  if (!out || !(out->list = calloc(n_res, sizeof *out->list))) {
    free(out);
    return NULL;
  }
  int scaled = (benchmarkFlags & BEAGLE_BENCHFLAG_SCALING_NONE) == 0;
  bench_run *runs = calloc(n_res ? n_res : 1, sizeof *runs);
  if (!runs) {
    free_bench(out);
    return NULL;
  }
  size_t n_runs = 0;
  for (size_t i = 0; i < n_res; i++) {
    int wanted = resourceList == NULL || resourceCount <= 0;
    for (int k = 0; !wanted && k < resourceCount; k++)
      wanted = resourceList[k] == (int)i;
    if (!wanted || !res[i].runs_plf ||
        (requirementFlags & ~res[i].support))
      continue;
    if (bench_setup(&runs[n_runs], (int)i, tipCount, compactBufferCount,
                    stateCount, patternCount, categoryCount, preferenceFlags,
                    requirementFlags, scaled) == 0)
      n_runs++;
    else
      free(runs[n_runs].impl);
  }
  bench_all(runs, n_runs);
  double cpu_ms = -1;
  for (size_t k = 0; k < n_runs; k++) {
    bench_run *r = &runs[k];
    size_t i = (size_t)r->resource;
    bench_free(r);
    if (r->best_ms < 0) {
      free(r->impl);
      continue;
    }
    BeagleBenchmarkedResource *b = &out->list[out->length++];
    b->number = (int)i;
    b->name = g_list.list[i].name;
    b->description = g_list.list[i].description;
    b->supportFlags = res[i].support;
    b->requiredFlags = res[i].required;
    b->returnCode = BEAGLE_SUCCESS;
    b->implName = r->impl;
    b->benchedFlags = r->flags;
    b->benchmarkResult = r->best_ms;
    if (cpu_ms < 0 && strcmp(res[i].kind, "cpu") == 0) cpu_ms = r->best_ms;
  }
  free(runs);
  if (out->length == 0) {
    free_bench(out);
    return NULL;
  }
  for (int i = 0; i < out->length; i++) {
    double base = cpu_ms > 0 ? cpu_ms : out->list[0].benchmarkResult;
    out->list[i].performanceRatio =
        out->list[i].benchmarkResult > 0 ? base / out->list[i].benchmarkResult
                                         : 1.0;
  }
  qsort(out->list, (size_t)out->length, sizeof *out->list, cmp_bench);
  /* the library owns the list (as BEAGLE's): the previous one goes */
  pthread_mutex_lock(&g_client_lock);
  free_bench(g_bench);
  g_bench = out;
  pthread_mutex_unlock(&g_client_lock);
  return out;
}
