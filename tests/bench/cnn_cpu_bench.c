/* cnn_cpu_bench - one cnn stage on the CPU (accelerators/cnn/cnn_cpu.c)
 * against oneDNN's convolution primitives called directly on the same
 * shapes: FP + EB + PG of AlexNet's conv1..conv5 and VGG-16's conv1_2,
 * conv3_2 and conv5_2, at batch 1 and 16. Prints time per pass (best of
 * the repetitions, the two alternating pass for pass), GFLOP/s (2 flops
 * per multiply-add of FP, EB and PG together) for both, their ratio, and
 * the median of the ratios of the pairs of passes (stage GF/s over
 * direct, each pair run back to back: steadier than the best times on a
 * shared machine); asserts nothing.
 *
 * Each layer is a one-layer stage [1, 2) behind an identity max-pool, so
 * that EB runs; activations are linear (ReLU would add work that the
 * direct primitives lack). The stage's figures include what a stage does
 * around the primitives: NCHW in and out (copies and reorders), the error
 * in and out, gradient accumulation. The direct ones are the three
 * primitives alone on memories in the layouts they chose. AlexNet's conv2,
 * conv4 and conv5 are ungrouped here (the original splits them in two
 * groups for two GPUs; darknet's .cfg grammar read here has no groups).
 *
 *   cnn_cpu_bench [--reps N] [--min-seconds S] [--only NAME]
 *
 * Threads: oneDNN's OpenMP team (OMP_NUM_THREADS). The load average is
 * printed: on a shared machine, compare figures from one run only. */
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cnn_cpu.h"
#include "cnn_ref.h"

typedef struct bench_layer {
  const char *name;
  uint32_t h, w, c, filters, size, stride, padding;
} bench_layer;

static const bench_layer layers[] = {
    {"alexnet conv1", 227, 227, 3, 96, 11, 4, 0},
    {"alexnet conv2", 27, 27, 96, 256, 5, 1, 2},
    {"alexnet conv3", 13, 13, 256, 384, 3, 1, 1},
    {"alexnet conv4", 13, 13, 384, 384, 3, 1, 1},
    {"alexnet conv5", 13, 13, 384, 256, 3, 1, 1},
    {"vgg16 conv1_2", 224, 224, 64, 64, 3, 1, 1},
    {"vgg16 conv3_2", 56, 56, 256, 256, 3, 1, 1},
    {"vgg16 conv5_2", 14, 14, 512, 512, 3, 1, 1},
};

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void die(const char *what, int rc) {
  fprintf(stderr, "cnn_cpu_bench: %s failed (%d)\n", what, rc);
  exit(1);
}

#define DN(call)                                                             \
  do {                                                                       \
    dnnl_status_t st_ = (call);                                              \
    if (st_ != dnnl_success) die(#call, (int)st_);                           \
  } while (0)

static float *randoms(size_t n, unsigned seed) {
  float *p = malloc(n * sizeof *p);
  if (!p) die("malloc", 0);
  for (size_t i = 0; i < n; i++) {
    seed = seed * 1103515245u + 12345u;
    p[i] = (float)((seed >> 8) & 0xffff) / 32768.0f - 1.0f;
  }
  return p;
}

typedef struct timing {
  double best, total;
  int reps;
} timing;

static void record(timing *t, double dt) {
  if (dt < t->best) t->best = dt;
  t->total += dt;
  t->reps++;
}

/* The pairs' ratios (direct time / stage time of one alternation), kept
 * for their median: on a shared machine one pass may run at half speed,
 * and a best time can come from a lucky pass of one side only. */
#define MAX_PAIRS 4096

typedef struct pairs {
  double ratio[MAX_PAIRS];
  size_t n;
} pairs;

static void pair_add(pairs *p, double stage_s, double direct_s) {
  if (p->n < MAX_PAIRS) p->ratio[p->n++] = direct_s / stage_s;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double pair_median(pairs *p) {
  qsort(p->ratio, p->n, sizeof *p->ratio, cmp_double);
  return p->n % 2 ? p->ratio[p->n / 2]
                  : 0.5 * (p->ratio[p->n / 2 - 1] + p->ratio[p->n / 2]);
}

/* The stage: forward and backward of one batch. */
typedef struct stage_run {
  cnn_cpu_stage *s;
  float *w, *b, *in, *dout, *out, *din;
} stage_run;

static void stage_setup(stage_run *r, const cnn_net *net, uint32_t batch) {
  char err[256];
  int rc = cnn_cpu_stage_create(net, 1, 2, batch, &r->s, err, sizeof err);
  if (rc) {
    fprintf(stderr, "cnn_cpu_bench: %s\n", err);
    die("cnn_cpu_stage_create", rc);
  }
  size_t nl;
  const cnn_layer *l = &cnn_net_layers(net, &nl)[1];
  size_t nin = batch * cnn_ref_elems(l->in), nout = batch * cnn_ref_elems(l->out);
  r->w = randoms(l->weights, 1), r->b = randoms(l->biases, 2);
  r->in = randoms(nin, 3), r->dout = randoms(nout, 4);
  r->out = malloc(nout * sizeof *r->out), r->din = malloc(nin * sizeof *r->din);
  if (!r->out || !r->din) die("malloc", 0);
  if ((rc = cnn_cpu_stage_set_params(r->s, 1, r->w, r->b))) die("set_params", rc);
}

static double stage_pass(stage_run *r) {
  int rc;
  double t0 = now();
  if ((rc = cnn_cpu_stage_forward(r->s, r->in, r->out, NULL, NULL)))
    die("forward", rc);
  if ((rc = cnn_cpu_stage_backward(r->s, r->dout, r->din))) die("backward", rc);
  return now() - t0;
}

static void stage_teardown(stage_run *r) {
  cnn_cpu_stage_destroy(r->s);
  free(r->w), free(r->b), free(r->in), free(r->dout), free(r->out);
  free(r->din);
}

static dnnl_memory_t mem_of(dnnl_engine_t eng, const_dnnl_primitive_desc_t pd,
                            dnnl_query_t what, int index) {
  dnnl_memory_t m;
  const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, what, index);
  DN(dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE));
  void *p;
  DN(dnnl_memory_get_data_handle(m, &p));
  size_t n = dnnl_memory_desc_get_size(md) / sizeof(float);
  float *f = p;
  for (size_t i = 0; i < n; i++) f[i] = (float)((i * 7919) % 1000) / 1000.f - 0.5f;
  return m;
}

/* oneDNN directly: convolution forward, backward data, backward weights. */
typedef struct direct_run {
  dnnl_engine_t eng;
  dnnl_stream_t stream;
  dnnl_primitive_desc_t fpd, dpd, wpd;
  dnnl_primitive_t fp, dp, wp;
  dnnl_memory_t m[11];
  dnnl_exec_arg_t fa[4], da[3], wa[4];
} direct_run;

static void direct_setup(direct_run *r, const bench_layer *L, uint32_t batch) {
  dnnl_engine_t eng;
  dnnl_stream_t stream;
  DN(dnnl_engine_create(&eng, dnnl_cpu, 0));
  DN(dnnl_stream_create(&stream, eng, dnnl_stream_default_flags));
  uint32_t oh = (L->h + 2 * L->padding - L->size) / L->stride + 1;
  uint32_t ow = (L->w + 2 * L->padding - L->size) / L->stride + 1;
  dnnl_dims_t sd = {batch, L->c, L->h, L->w};
  dnnl_dims_t wd = {L->filters, L->c, L->size, L->size};
  dnnl_dims_t bd = {L->filters};
  dnnl_dims_t dd = {batch, L->filters, oh, ow};
  dnnl_dims_t st = {L->stride, L->stride}, pad = {L->padding, L->padding};
  dnnl_memory_desc_t s_md, w_md, b_md, d_md;
  DN(dnnl_memory_desc_init_by_tag(&s_md, 4, sd, dnnl_f32, dnnl_format_tag_any));
  DN(dnnl_memory_desc_init_by_tag(&w_md, 4, wd, dnnl_f32, dnnl_format_tag_any));
  DN(dnnl_memory_desc_init_by_tag(&b_md, 1, bd, dnnl_f32, dnnl_format_tag_any));
  DN(dnnl_memory_desc_init_by_tag(&d_md, 4, dd, dnnl_f32, dnnl_format_tag_any));
  dnnl_convolution_desc_t cd;
  dnnl_primitive_desc_t fpd, dpd, wpd;
  DN(dnnl_convolution_forward_desc_init(&cd, dnnl_forward_training,
                                        dnnl_convolution_direct, &s_md, &w_md,
                                        &b_md, &d_md, st, pad, pad));
  DN(dnnl_primitive_desc_create(&fpd, &cd, NULL, eng, NULL));
  DN(dnnl_convolution_backward_data_desc_init(&cd, dnnl_convolution_direct,
                                              &s_md, &w_md, &d_md, st, pad,
                                              pad));
  DN(dnnl_primitive_desc_create(&dpd, &cd, NULL, eng, fpd));
  DN(dnnl_convolution_backward_weights_desc_init(
      &cd, dnnl_convolution_direct, &s_md, &w_md, &b_md, &d_md, st, pad, pad));
  DN(dnnl_primitive_desc_create(&wpd, &cd, NULL, eng, fpd));
  dnnl_primitive_t fp, dp, wp;
  DN(dnnl_primitive_create(&fp, fpd));
  DN(dnnl_primitive_create(&dp, dpd));
  DN(dnnl_primitive_create(&wp, wpd));
  dnnl_memory_t m[11] = {
      mem_of(eng, fpd, dnnl_query_src_md, 0),
      mem_of(eng, fpd, dnnl_query_weights_md, 0),
      mem_of(eng, fpd, dnnl_query_weights_md, 1),
      mem_of(eng, fpd, dnnl_query_dst_md, 0),
      mem_of(eng, dpd, dnnl_query_diff_dst_md, 0),
      mem_of(eng, dpd, dnnl_query_weights_md, 0),
      mem_of(eng, dpd, dnnl_query_diff_src_md, 0),
      mem_of(eng, wpd, dnnl_query_src_md, 0),
      mem_of(eng, wpd, dnnl_query_diff_dst_md, 0),
      mem_of(eng, wpd, dnnl_query_diff_weights_md, 0),
      mem_of(eng, wpd, dnnl_query_diff_weights_md, 1)};
  dnnl_exec_arg_t fa[4] = {{DNNL_ARG_SRC, m[0]}, {DNNL_ARG_WEIGHTS, m[1]},
                           {DNNL_ARG_BIAS, m[2]}, {DNNL_ARG_DST, m[3]}};
  dnnl_exec_arg_t da[3] = {{DNNL_ARG_DIFF_DST, m[4]}, {DNNL_ARG_WEIGHTS, m[5]},
                           {DNNL_ARG_DIFF_SRC, m[6]}};
  dnnl_exec_arg_t wa[4] = {{DNNL_ARG_SRC, m[7]}, {DNNL_ARG_DIFF_DST, m[8]},
                           {DNNL_ARG_DIFF_WEIGHTS, m[9]},
                           {DNNL_ARG_DIFF_BIAS, m[10]}};
  r->eng = eng, r->stream = stream;
  r->fpd = fpd, r->dpd = dpd, r->wpd = wpd;
  r->fp = fp, r->dp = dp, r->wp = wp;
  memcpy(r->m, m, sizeof m);
  memcpy(r->fa, fa, sizeof fa);
  memcpy(r->da, da, sizeof da);
  memcpy(r->wa, wa, sizeof wa);
}

static double direct_pass(direct_run *r) {
  double t0 = now();
  DN(dnnl_primitive_execute(r->fp, r->stream, 4, r->fa));
  DN(dnnl_primitive_execute(r->dp, r->stream, 3, r->da));
  DN(dnnl_primitive_execute(r->wp, r->stream, 4, r->wa));
  DN(dnnl_stream_wait(r->stream));
  return now() - t0;
}

static void direct_teardown(direct_run *r) {
  for (int i = 0; i < 11; i++) dnnl_memory_destroy(r->m[i]);
  dnnl_primitive_destroy(r->fp), dnnl_primitive_destroy(r->dp);
  dnnl_primitive_destroy(r->wp);
  dnnl_primitive_desc_destroy(r->fpd), dnnl_primitive_desc_destroy(r->dpd);
  dnnl_primitive_desc_destroy(r->wpd);
  dnnl_stream_destroy(r->stream);
  dnnl_engine_destroy(r->eng);
}

int main(int argc, char **argv) {
  int reps = 3;
  double min_s = 1.0;
  const char *only = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
      reps = atoi(argv[++i]);
    } else if (!strcmp(argv[i], "--min-seconds") && i + 1 < argc) {
      min_s = atof(argv[++i]);
    } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
      only = argv[++i];
    } else {
      fprintf(stderr, "usage: cnn_cpu_bench [--reps N] [--min-seconds S] "
                      "[--only NAME]\n");
      return 2;
    }
  }
  double load[3] = {0};
  if (getloadavg(load, 3) < 0) load[0] = -1;
  const char *omp = getenv("OMP_NUM_THREADS");
  printf("cnn_cpu_bench: FP+EB+PG per pass, best of >= %d reps and >= %.1f s;"
         " OMP_NUM_THREADS=%s; load average %.2f %.2f %.2f\n",
         reps, min_s, omp ? omp : "(unset)", load[0], load[1], load[2]);
  printf("%-14s %5s %10s %10s %9s %9s %6s %6s  %s\n", "layer", "batch",
         "stage ms", "direct ms", "stage GF/s", "direct GF/s", "ratio",
         "median", "stage implementations (fwd bwd_weights bwd_data)");
  uint32_t batches[2] = {1, 16};
  for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++) {
    const bench_layer *L = &layers[i];
    if (only && !strstr(L->name, only)) continue;
    char cfg[512], err[256], impl[256];
    int n = snprintf(cfg, sizeof cfg,
                     "[net]\nheight=%u\nwidth=%u\nchannels=%u\n"
                     "[maxpool]\nsize=1\nstride=1\npadding=0\n"
                     "[convolutional]\nfilters=%u\nsize=%u\nstride=%u\n"
                     "padding=%u\nactivation=linear\n"
                     "[connected]\noutput=2\nactivation=linear\n[softmax]\n",
                     L->h, L->w, L->c, L->filters, L->size, L->stride,
                     L->padding);
    cnn_net *net;
    int rc = cnn_cfg_parse(cfg, (size_t)n, L->name, &net, err, sizeof err);
    if (rc) {
      fprintf(stderr, "cnn_cpu_bench: %s\n", err);
      return 1;
    }
    size_t nl;
    const cnn_layer *cl = &cnn_net_layers(net, &nl)[1];
    double flops1 = 2.0 * (double)(cl->fp_macs + cl->eb_macs + cl->pg_macs);
    for (int k = 0; k < 2; k++) {
      uint32_t batch = batches[k];
      /* the two alternate, pass for pass, so that both see the same load */
      stage_run sr;
      direct_run dr;
      stage_setup(&sr, net, batch);
      direct_setup(&dr, L, batch);
      snprintf(impl, sizeof impl, "%s", cnn_cpu_stage_impl(sr.s, 1));
      timing ts = {1e30, 0, 0}, td = {1e30, 0, 0};
      static pairs pr;
      pr.n = 0;
      stage_pass(&sr);  /* warm-up */
      direct_pass(&dr);
      while (ts.reps < reps || ts.total + td.total < min_s) {
        double a = stage_pass(&sr), b = direct_pass(&dr);
        record(&ts, a);
        record(&td, b);
        pair_add(&pr, a, b);
      }
      stage_teardown(&sr);
      direct_teardown(&dr);
      double gs = flops1 * batch / ts.best * 1e-9;
      double gd = flops1 * batch / td.best * 1e-9;
      printf("%-14s %5u %10.3f %10.3f %9.1f %9.1f %6.3f %6.3f  %s\n",
             L->name, batch, ts.best * 1e3, td.best * 1e3, gs, gd, gs / gd,
             pair_median(&pr), impl);
      fflush(stdout);
    }
    cnn_net_destroy(net);
  }
  return 0;
}
