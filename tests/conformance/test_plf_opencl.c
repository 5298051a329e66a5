/*
 * test_plf_opencl.c - the "plf" descriptor's OpenCL implementation
 * (acc_plf_opencl_ops, accelerators/plf/plf_opencl.h) against its run_cpu,
 * the way the opencl platform drives it: the input block written to a
 * device buffer on a transfer queue without blocking, run() on a compute
 * queue waiting for that write, the instance a device buffer that stays
 * across tasks.
 *
 * Random instances (argument: the state count, 4, 20 or 61), each of
 * C = 1 and 4 categories, double and single precision, scaling off and
 * on, tips as compact states (some missing) or as partials, one or three
 * partitions (each with its own matrices, eigen system and rate set):
 *   setup     eigen systems, frequencies, weights, rates, pattern weights,
 *             partitions, tips inline and from input slices (partials at
 *             an offset that is not 8-byte aligned), P(t)
 *   compute   partials (rescaled into per-node buffers, a cumulative one
 *             kept by the ops), accumulate, root lnl by partition with
 *             site lnls, edge lnls (partials and tip-state children), Get
 *             of partials, scales, site lnls and matrices
 *   update    new lengths, a matrix set directly, remove / accumulate /
 *             copy / reset (by partition) of scale buffers, partials again,
 *             lnl, new pattern weights and lnl again in the same task
 *   again     a task that reads the instance's flags, partition ranges
 *             and pattern weights set by earlier tasks
 *   scratch   setup and compute in one task without an instance (the
 *             scratch buffer full of garbage first; inputs in host memory
 *             only, no device buffers)
 * After the tasks the whole instance is read back and compared with the
 * CPU's, region by region. Single-precision instances run a second time
 * on a handle built without fp64 (model values converted in software).
 * The S = 4 run also checks: a double instance refused without fp64, a
 * cancelled run, an out-of-order queue, and the program binary cache.
 *
 * Tolerances (relative; scale and site values, logs, against max(|x|, 1);
 * matrices against their row's largest entry; partials against 1e-6 of
 * their pattern's largest at least): 1e-10 in double, 1e-4 in single.
 * Exit 77 (skipped) when no OpenCL device exists.
 */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accel.h"
#include "accelerators/plf/plf.pb-c.h"
#include "ember/ember_errors.h"
#include "plf/plf_layout.h"
#include "plf/plf_opencl.h"

#define SKIP 77

static int failures;
static long checks;

#define CHECK(cond, ...)                                     \
  do {                                                       \
    checks++;                                                \
    if (!(cond)) {                                           \
      printf("FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
      printf(__VA_ARGS__);                                   \
      printf("\n");                                          \
      failures++;                                            \
    }                                                        \
  } while (0)

/* ---- random numbers (splitmix64) ------------------------------------------ */

static uint64_t rng_state;

static uint64_t rnd(void) {
  uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static double unif(double lo, double hi) {
  return lo + (hi - lo) * (double)(rnd() >> 11) * 0x1p-53;
}

static uint32_t below(uint32_t n) { return (uint32_t)(rnd() % n); }

/* ---- eigen systems --------------------------------------------------------- */

/* Cyclic Jacobi: a (n x n, symmetric, destroyed) = u diag(w) u^T. */
static void jacobi(int n, double *a, double *u, double *w) {
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) u[i * n + j] = i == j;
  for (int sweep = 0; sweep < 100; sweep++) {
    double off = 0;
    for (int i = 0; i < n; i++)
      for (int j = i + 1; j < n; j++) off += a[i * n + j] * a[i * n + j];
    if (off < 1e-30) break;
    for (int p = 0; p < n; p++)
      for (int q = p + 1; q < n; q++) {
        double apq = a[p * n + q];
        if (fabs(apq) < 1e-300) continue;
        double theta = (a[q * n + q] - a[p * n + p]) / (2 * apq);
        double t = (theta >= 0 ? 1 : -1) /
                   (fabs(theta) + sqrt(theta * theta + 1));
        double c = 1 / sqrt(t * t + 1), s = t * c;
        for (int k = 0; k < n; k++) {   /* columns p, q */
          double akp = a[k * n + p], akq = a[k * n + q];
          a[k * n + p] = c * akp - s * akq;
          a[k * n + q] = s * akp + c * akq;
        }
        for (int k = 0; k < n; k++) {   /* rows p, q */
          double apk = a[p * n + k], aqk = a[q * n + k];
          a[p * n + k] = c * apk - s * aqk;
          a[q * n + k] = s * apk + c * aqk;
        }
        for (int k = 0; k < n; k++) {
          double ukp = u[k * n + p], ukq = u[k * n + q];
          u[k * n + p] = c * ukp - s * ukq;
          u[k * n + q] = s * ukp + c * ukq;
        }
      }
  }
  for (int i = 0; i < n; i++) w[i] = a[i * n + i];
}

/* A random reversible model: frequencies pi, and E, Einv, eigenvalues of
 * Q (Q_ij = R_ij pi_j, mean rate 1), as plf_model.h builds them. */
typedef struct model {
  double *pi, *vec, *inv, *val;
} model;

static void random_model(int S, model *m) {
  m->pi = malloc(S * sizeof *m->pi);
  m->vec = malloc((size_t)S * S * sizeof *m->vec);
  m->inv = malloc((size_t)S * S * sizeof *m->inv);
  m->val = malloc(S * sizeof *m->val);
  double *R = calloc((size_t)S * S, sizeof *R), *A = malloc((size_t)S * S * 8);
  double *U = malloc((size_t)S * S * 8), sum = 0;
  for (int i = 0; i < S; i++) sum += (m->pi[i] = unif(0.4, 1.6));
  for (int i = 0; i < S; i++) m->pi[i] /= sum;
  for (int i = 0; i < S; i++)
    for (int j = i + 1; j < S; j++) R[i * S + j] = R[j * S + i] = unif(0.2, 3);
  double mean = 0;
  for (int i = 0; i < S; i++) {
    double row = 0;
    for (int j = 0; j < S; j++) row += R[i * S + j] * m->pi[j];
    mean += m->pi[i] * row;
  }
  for (int i = 0; i < S; i++) {
    double diag = 0;
    for (int j = 0; j < S; j++)
      if (j != i) diag -= R[i * S + j] * m->pi[j] / mean;
    for (int j = 0; j < S; j++)
      A[i * S + j] = i == j ? diag
                            : R[i * S + j] / mean * sqrt(m->pi[i] * m->pi[j]);
  }
  jacobi(S, A, U, m->val);
  for (int i = 0; i < S; i++)
    for (int k = 0; k < S; k++) {
      m->vec[i * S + k] = U[i * S + k] / sqrt(m->pi[i]);
      m->inv[k * S + i] = U[i * S + k] * sqrt(m->pi[i]);
    }
  free(R);
  free(A);
  free(U);
}

static void model_free(model *m) {
  free(m->pi);
  free(m->vec);
  free(m->inv);
  free(m->val);
}

/* ---- building tasks --------------------------------------------------------- */

/* Everything a task's messages point to, freed together. */
typedef struct task {
  Ember__Plf__Instance inst;
  Ember__Plf__Op **ops;
  size_t n_ops, cap;
  void **mem;
  size_t n_mem, cap_mem;
} task;

static void *tmem(task *t, size_t size) {
  if (t->n_mem == t->cap_mem) {
    t->cap_mem = t->cap_mem ? 2 * t->cap_mem : 64;
    t->mem = realloc(t->mem, t->cap_mem * sizeof *t->mem);
  }
  return t->mem[t->n_mem++] = calloc(1, size ? size : 1);
}

static void *tdup(task *t, const void *src, size_t size) {
  void *p = tmem(t, size);
  if (size) memcpy(p, src, size); /* src may be NULL when size is 0 */
  return p;
}

static Ember__Plf__Op *top(task *t) {
  Ember__Plf__Op *op = tmem(t, sizeof *op);
  ember__plf__op__init(op);
  if (t->n_ops == t->cap) {
    t->cap = t->cap ? 2 * t->cap : 32;
    t->ops = realloc(t->ops, t->cap * sizeof *t->ops);
  }
  t->ops[t->n_ops++] = op;
  return op;
}

static void task_free(task *t) {
  for (size_t i = 0; i < t->n_mem; i++) free(t->mem[i]);
  free(t->mem);
  free(t->ops);
  memset(t, 0, sizeof *t);
}

static uint8_t *task_pack(task *t, size_t *len) {
  Ember__Plf__Params p = EMBER__PLF__PARAMS__INIT;
  p.instance = &t->inst;
  p.n_ops = t->n_ops;
  p.ops = t->ops;
  *len = ember__plf__params__get_packed_size(&p);
  uint8_t *buf = malloc(*len);
  ember__plf__params__pack(&p, buf);
  return buf;
}

static void op_eigen(task *t, uint32_t e, const model *m, int S) {
  Ember__Plf__Op *op = top(t);
  Ember__Plf__SetEigen *x = tmem(t, sizeof *x);
  ember__plf__set_eigen__init(x);
  x->eigen = e;
  x->n_vectors = x->n_inverse = (size_t)S * S;
  x->n_values = S;
  x->vectors = tdup(t, m->vec, (size_t)S * S * 8);
  x->inverse = tdup(t, m->inv, (size_t)S * S * 8);
  x->values = tdup(t, m->val, (size_t)S * 8);
  op->op_case = EMBER__PLF__OP__OP_EIGEN;
  op->eigen = x;
}

static void op_vector(task *t, Ember__Plf__SetVector__Kind kind,
                      uint32_t index, const double *v, size_t n) {
  Ember__Plf__Op *op = top(t);
  Ember__Plf__SetVector *x = tmem(t, sizeof *x);
  ember__plf__set_vector__init(x);
  x->kind = kind;
  x->has_index = 1;
  x->index = index;
  x->n_values = n;
  x->values = tdup(t, v, n * 8);
  op->op_case = EMBER__PLF__OP__OP_VECTOR;
  op->vector = x;
}

static void op_partitions(task *t, const uint32_t *of, size_t n) {
  Ember__Plf__Op *op = top(t);
  Ember__Plf__SetPartitions *x = tmem(t, sizeof *x);
  ember__plf__set_partitions__init(x);
  x->n_of = n;
  x->of = tdup(t, of, n * 4);
  op->op_case = EMBER__PLF__OP__OP_PARTITIONS;
  op->partitions = x;
}

static Ember__Plf__InputSlice *slice(task *t, uint64_t offset) {
  Ember__Plf__InputSlice *s = tmem(t, sizeof *s);
  ember__plf__input_slice__init(s);
  s->input = 0;
  s->offset = offset;
  return s;
}

/* tip states inline (states) or from the input at offset (states NULL) */
static void op_tip_states(task *t, uint32_t tip, const int32_t *states,
                          size_t P, uint64_t offset) {
  Ember__Plf__Op *op = top(t);
  Ember__Plf__SetTipStates *x = tmem(t, sizeof *x);
  ember__plf__set_tip_states__init(x);
  x->tip = tip;
  if (states) {
    x->has_states = 1;
    x->states.len = P * 4;
    x->states.data = tdup(t, states, P * 4);
  } else {
    x->from = slice(t, offset);
  }
  op->op_case = EMBER__PLF__OP__OP_TIP_STATES;
  op->tip_states = x;
}

static void op_partials(task *t, uint32_t buffer, const double *v, size_t n,
                        uint64_t offset, int tip) {
  Ember__Plf__Op *op = top(t);
  Ember__Plf__SetPartials *x = tmem(t, sizeof *x);
  ember__plf__set_partials__init(x);
  x->buffer = buffer;
  if (v) {
    x->n_values = n;
    x->values = tdup(t, v, n * 8);
  } else {
    x->from = slice(t, offset);
  }
  x->has_tip = 1;
  x->tip = tip;
  op->op_case = EMBER__PLF__OP__OP_PARTIALS;
  op->partials = x;
}

static void op_matrix(task *t, uint32_t m, const double *v, size_t n) {
  Ember__Plf__Op *op = top(t);
  Ember__Plf__SetMatrix *x = tmem(t, sizeof *x);
  ember__plf__set_matrix__init(x);
  x->matrix = m;
  x->n_values = n;
  x->values = tdup(t, v, n * 8);
  op->op_case = EMBER__PLF__OP__OP_MATRIX;
  op->matrix = x;
}

static void op_update_matrices(task *t, const uint32_t *mats,
                               const double *lens, size_t n,
                               const uint32_t *eig, size_t n_eig,
                               const uint32_t *rs, size_t n_rs) {
  Ember__Plf__Op *op = top(t);
  Ember__Plf__UpdateMatrices *x = tmem(t, sizeof *x);
  ember__plf__update_matrices__init(x);
  x->n_matrices = x->n_lengths = n;
  x->matrices = tdup(t, mats, n * 4);
  x->lengths = tdup(t, lens, n * 8);
  x->n_eigens = n_eig;
  x->eigens = tdup(t, eig, n_eig * 4);
  x->n_rate_sets = n_rs;
  x->rate_sets = tdup(t, rs, n_rs * 4);
  op->op_case = EMBER__PLF__OP__OP_UPDATE_MATRICES;
  op->update_matrices = x;
}

typedef struct pop {
  uint32_t dest, c1, m1, c2, m2;
  int32_t scale, cum, part;
} pop;

static void op_update_partials(task *t, const pop *p, size_t n) {
  Ember__Plf__Op *op = top(t);
  Ember__Plf__UpdatePartials *x = tmem(t, sizeof *x);
  ember__plf__update_partials__init(x);
  x->n_ops = n;
  x->ops = tmem(t, n * sizeof *x->ops);
  for (size_t i = 0; i < n; i++) {
    Ember__Plf__PartialsOp *o = x->ops[i] = tmem(t, sizeof *o);
    ember__plf__partials_op__init(o);
    o->dest = p[i].dest;
    o->child1 = p[i].c1;
    o->matrix1 = p[i].m1;
    o->child2 = p[i].c2;
    o->matrix2 = p[i].m2;
    o->has_scale_write = 1;
    o->scale_write = p[i].scale;
    o->has_cumulative_scale = 1;
    o->cumulative_scale = p[i].cum;
    o->has_partition = 1;
    o->partition = p[i].part;
  }
  op->op_case = EMBER__PLF__OP__OP_UPDATE_PARTIALS;
  op->update_partials = x;
}

static void op_scale(task *t, Ember__Plf__ScaleOp__Kind kind,
                     const uint32_t *scales, size_t n, uint32_t cum,
                     int32_t part) {
  Ember__Plf__Op *op = top(t);
  Ember__Plf__ScaleOp *x = tmem(t, sizeof *x);
  ember__plf__scale_op__init(x);
  x->kind = kind;
  x->n_scales = n;
  x->scales = tdup(t, scales, n * 4);
  x->cumulative = cum;
  x->has_partition = 1;
  x->partition = part;
  op->op_case = EMBER__PLF__OP__OP_SCALE;
  op->scale = x;
}

typedef struct term {
  uint32_t buffer;
  int32_t child, matrix;
  uint32_t weights, freqs;
  int32_t cum, part;
} term;

static void op_lnl(task *t, const term *tm, size_t n, int by_part,
                   int site) {
  Ember__Plf__Op *op = top(t);
  Ember__Plf__Lnl *x = tmem(t, sizeof *x);
  ember__plf__lnl__init(x);
  x->n_terms = n;
  x->terms = tmem(t, n * sizeof *x->terms);
  for (size_t i = 0; i < n; i++) {
    Ember__Plf__LnlTerm *o = x->terms[i] = tmem(t, sizeof *o);
    ember__plf__lnl_term__init(o);
    o->buffer = tm[i].buffer;
    o->has_child = o->has_matrix = 1;
    o->child = tm[i].child;
    o->matrix = tm[i].matrix;
    o->weights = tm[i].weights;
    o->frequencies = tm[i].freqs;
    o->has_cumulative_scale = 1;
    o->cumulative_scale = tm[i].cum;
    o->has_partition = 1;
    o->partition = tm[i].part;
  }
  x->has_by_partition = 1;
  x->by_partition = by_part;
  x->has_site_lnl = 1;
  x->site_lnl = site;
  op->op_case = EMBER__PLF__OP__OP_LNL;
  op->lnl = x;
}

static void op_get(task *t, Ember__Plf__Get__Kind kind, uint32_t index) {
  Ember__Plf__Op *op = top(t);
  Ember__Plf__Get *x = tmem(t, sizeof *x);
  ember__plf__get__init(x);
  x->kind = kind;
  x->has_index = 1;
  x->index = index;
  op->op_case = EMBER__PLF__OP__OP_GET;
  op->get = x;
}

/* ---- one random instance ------------------------------------------------------ */

enum { TIPS = 6, EIGENS = 2, RATE_SETS = 2 };
#define NODES (2 * TIPS - 1)
#define EDGES (2 * TIPS - 2)

typedef struct config {
  int S, C, single, scaling, states, parts;
} config;

typedef struct inst {
  config cf;
  uint32_t P;
  plf_layout layout;
  /* tree: internal node TIPS + k joins kids[k][0..1]; the root is last */
  uint32_t kids[TIPS - 1][2];
  uint32_t part_start[4];          /* partition k: [start[k], start[k+1]) */
  model models[EIGENS];
  double *rates[RATE_SETS], *cweights[EIGENS], *pw, *pw2;
  int32_t *tip_states[TIPS];
  double *tip_partials[TIPS];      /* P x S, or C x P x S for tip 2 */
  uint8_t *input;                  /* the input block */
  size_t input_size;
  uint64_t states_at[TIPS], partials_at[TIPS];
  double lens[EDGES];
  uint32_t cum, cum2, cum3;        /* scale buffers past the nodes' */
} inst;

/* matrix of edge e (above node e) in partition k */
static uint32_t mat_of(uint32_t e, int k) { return (uint32_t)k * EDGES + e; }
/* scale buffer of internal node n */
static uint32_t scale_of(uint32_t n) { return n - TIPS; }

static void inst_make(inst *in, config cf) {
  memset(in, 0, sizeof *in);
  in->cf = cf;
  int S = cf.S, C = cf.C;
  uint32_t P = in->P = S == 61 ? 131 : 257 + (uint32_t)S;
  /* the instance */
  plf_shape sh = {.states = (uint32_t)S, .patterns = P,
                  .categories = (uint32_t)C, .tips = TIPS, .partials = NODES + 1,
                  .compact = cf.states ? TIPS : 0, .eigens = EIGENS,
                  .matrices = EDGES * (uint32_t)cf.parts,
                  .scale_buffers = TIPS - 1 + 3, .rate_sets = RATE_SETS,
                  .partitions = (uint32_t)cf.parts, .single = cf.single};
  char err[256];
  if (plf_layout_compute(&sh, &in->layout, err, sizeof err)) {
    printf("layout: %s\n", err);
    exit(1);
  }
  in->cum = TIPS - 1;
  in->cum2 = TIPS;
  in->cum3 = TIPS + 1;
  /* a random tree: join two of the roots left, TIPS - 1 times */
  uint32_t pool[TIPS], n = TIPS;
  for (uint32_t i = 0; i < TIPS; i++) pool[i] = i;
  for (uint32_t k = 0; k < TIPS - 1; k++) {
    uint32_t a = below(n);
    in->kids[k][0] = pool[a];
    pool[a] = pool[--n];
    uint32_t b = below(n);
    in->kids[k][1] = pool[b];
    pool[b] = TIPS + k;
  }
  /* partitions: contiguous, random sizes (at least one pattern each) */
  in->part_start[0] = 0;
  for (int k = 1; k < cf.parts; k++)
    in->part_start[k] = in->part_start[k - 1] + 1 +
                        below(P / (uint32_t)cf.parts);
  in->part_start[cf.parts] = P;
  for (int e = 0; e < EIGENS; e++) {
    random_model(S, &in->models[e]);
    in->cweights[e] = malloc(C * sizeof(double));
    double sum = 0;
    for (int c = 0; c < C; c++) sum += (in->cweights[e][c] = unif(0.2, 1));
    for (int c = 0; c < C; c++) in->cweights[e][c] /= sum;
  }
  for (int r = 0; r < RATE_SETS; r++) {
    in->rates[r] = malloc(C * sizeof(double));
    for (int c = 0; c < C; c++) in->rates[r][c] = unif(0.05, 2.5);
  }
  in->pw = malloc(P * sizeof(double));
  in->pw2 = malloc(P * sizeof(double));
  for (uint32_t p = 0; p < P; p++) {
    in->pw[p] = 1 + below(5);
    in->pw2[p] = unif(0.5, 3);
  }
  for (int e = 0; e < EDGES; e++) in->lens[e] = unif(0.01, 0.6);
  /* tips: states (about 5% missing: S or -1), or partials (rows of 0/1
   * with a few ambiguous, some all ones) */
  for (int k = 0; k < TIPS; k++) {
    in->tip_states[k] = malloc(P * sizeof(int32_t));
    for (uint32_t p = 0; p < P; p++) {
      uint32_t x = below(100);
      in->tip_states[k][p] = x < 3 ? S : x < 5 ? -1 : (int32_t)below(S);
    }
    size_t nv = (size_t)P * S * (k == 2 ? C : 1);
    in->tip_partials[k] = malloc(nv * sizeof(double));
    for (size_t i = 0; i < nv; i++) in->tip_partials[k][i] = 0;
    for (size_t row = 0; row < nv / S; row++) {
      double *v = in->tip_partials[k] + row * S;
      uint32_t x = below(100);
      if (x < 4) {
        for (int s = 0; s < S; s++) v[s] = 1;
      } else if (x < 15) {
        for (int s = 0; s < S; s++) v[s] = unif(0, 1);
      } else {
        v[below(S)] = 1;
      }
    }
  }
  /* the input block: 4 bytes of padding, tips 1 and 3's states, then tips
   * 1, 3 and 2's partials (at 4 mod 8) */
  size_t size = 4 + 2 * (size_t)P * 4;
  uint64_t at = 4;
  in->states_at[1] = at;
  at += (uint64_t)P * 4;
  in->states_at[3] = at;
  at += (uint64_t)P * 4;
  const int ptips[3] = {1, 3, 2};
  for (int i = 0; i < 3; i++) {
    int k = ptips[i];
    in->partials_at[k] = at;
    size_t bytes = (size_t)P * S * (k == 2 ? C : 1) * 8;
    at += bytes;
    size += bytes;
  }
  in->input = malloc(size);
  in->input_size = size;
  memset(in->input, 0xEE, 4);
  memcpy(in->input + in->states_at[1], in->tip_states[1], (size_t)P * 4);
  memcpy(in->input + in->states_at[3], in->tip_states[3], (size_t)P * 4);
  for (int i = 0; i < 3; i++) {
    int k = ptips[i];
    memcpy(in->input + in->partials_at[k], in->tip_partials[k],
           (size_t)P * S * (k == 2 ? C : 1) * 8);
  }
}

static void inst_free(inst *in) {
  for (int e = 0; e < EIGENS; e++) {
    model_free(&in->models[e]);
    free(in->cweights[e]);
  }
  for (int r = 0; r < RATE_SETS; r++) free(in->rates[r]);
  for (int k = 0; k < TIPS; k++) {
    free(in->tip_states[k]);
    free(in->tip_partials[k]);
  }
  free(in->pw);
  free(in->pw2);
  free(in->input);
}

static void task_begin(task *t, const inst *in) {
  memset(t, 0, sizeof *t);
  ember__plf__instance__init(&t->inst);
  t->inst.states = (uint32_t)in->cf.S;
  t->inst.patterns = in->P;
  t->inst.has_categories = 1;
  t->inst.categories = (uint32_t)in->cf.C;
  t->inst.tips = TIPS;
  t->inst.partials = NODES + 1;
  t->inst.has_compact = 1;
  t->inst.compact = in->cf.states ? TIPS : 0;
  t->inst.has_eigens = 1;
  t->inst.eigens = EIGENS;
  t->inst.matrices = EDGES * (uint32_t)in->cf.parts;
  t->inst.has_scale_buffers = 1;
  t->inst.scale_buffers = TIPS - 1 + 3;
  t->inst.has_category_rate_sets = 1;
  t->inst.category_rate_sets = RATE_SETS;
  t->inst.has_partitions = 1;
  t->inst.partitions = (uint32_t)in->cf.parts;
  t->inst.has_precision = 1;
  t->inst.precision = in->cf.single ? EMBER__PLF__PRECISION__SINGLE
                                    : EMBER__PLF__PRECISION__DOUBLE;
}

/* the partition of each pattern */
static void partition_of(const inst *in, uint32_t *of) {
  for (int k = 0; k < in->cf.parts; k++)
    for (uint32_t p = in->part_start[k]; p < in->part_start[k + 1]; p++)
      of[p] = (uint32_t)k;
}

static void add_setup(task *t, const inst *in) {
  int S = in->cf.S, C = in->cf.C;
  uint32_t P = in->P;
  for (int e = 0; e < EIGENS; e++) {
    op_eigen(t, (uint32_t)e, &in->models[e], S);
    op_vector(t, EMBER__PLF__SET_VECTOR__KIND__FREQUENCIES, (uint32_t)e,
              in->models[e].pi, (size_t)S);
    op_vector(t, EMBER__PLF__SET_VECTOR__KIND__CATEGORY_WEIGHTS, (uint32_t)e,
              in->cweights[e], (size_t)C);
  }
  for (int r = 0; r < RATE_SETS; r++)
    op_vector(t, EMBER__PLF__SET_VECTOR__KIND__CATEGORY_RATES, (uint32_t)r,
              in->rates[r], (size_t)C);
  op_vector(t, EMBER__PLF__SET_VECTOR__KIND__PATTERN_WEIGHTS, 0, in->pw, P);
  if (in->cf.parts > 1) {
    uint32_t *of = malloc(P * 4);
    partition_of(in, of);
    op_partitions(t, of, P);
    free(of);
  }
  for (uint32_t k = 0; k < TIPS; k++) {
    size_t ps = (size_t)P * S;
    if (in->cf.states && k != 4 && k != 2) {
      /* compact states: tips 1 and 3 from the input */
      if (k == 1 || k == 3)
        op_tip_states(t, k, NULL, P, in->states_at[k]);
      else
        op_tip_states(t, k, in->tip_states[k], P, 0);
    } else if (k == 2) {
      /* every category's partials: inline, or from the input */
      if (in->cf.states)
        op_partials(t, k, in->tip_partials[k], ps * C, 0, 0);
      else
        op_partials(t, k, NULL, 0, in->partials_at[k], 0);
    } else if (k == 1 || k == 3) {
      op_partials(t, k, NULL, 0, in->partials_at[k], 1);
    } else {
      op_partials(t, k, in->tip_partials[k], ps, 0, 1);
    }
  }
  /* P(t): partition k's edges with eigen k % EIGENS, rate set (k + 1) % 2,
   * its lengths scaled */
  uint32_t mats[EDGES * 3], eig[EDGES * 3], rs[EDGES * 3];
  double lens[EDGES * 3];
  size_t n = 0;
  for (int k = 0; k < in->cf.parts; k++)
    for (uint32_t e = 0; e < EDGES; e++, n++) {
      mats[n] = mat_of(e, k);
      lens[n] = in->lens[e] * (1 + 0.3 * k);
      eig[n] = (uint32_t)k % EIGENS;
      rs[n] = (uint32_t)(k + 1) % RATE_SETS;
    }
  op_update_matrices(t, mats, lens, n, eig, n, rs, n);
  op_get(t, EMBER__PLF__GET__KIND__MATRIX, mat_of(3, in->cf.parts - 1));
}

/* every internal node, post-order, for each partition (or all patterns) */
static void add_partials(task *t, const inst *in, int cum_in_ops) {
  pop ops[(TIPS - 1) * 3];
  size_t n = 0;
  for (uint32_t k = 0; k < TIPS - 1; k++)
    for (int part = 0; part < in->cf.parts; part++, n++) {
      uint32_t a = in->kids[k][0], b = in->kids[k][1];
      ops[n] = (pop){.dest = TIPS + k, .c1 = a, .m1 = mat_of(a, part),
                     .c2 = b, .m2 = mat_of(b, part),
                     .scale = in->cf.scaling ? (int32_t)scale_of(TIPS + k) : -1,
                     .cum = in->cf.scaling && cum_in_ops ? (int32_t)in->cum2
                                                         : -1,
                     .part = in->cf.parts > 1 ? part : -1};
    }
  op_update_partials(t, ops, n);
}

static void add_accumulate(task *t, const inst *in) {
  uint32_t sc[TIPS - 1];
  for (uint32_t k = 0; k < TIPS - 1; k++) sc[k] = scale_of(TIPS + k);
  op_scale(t, EMBER__PLF__SCALE_OP__KIND__RESET, NULL, 0, in->cum, -1);
  op_scale(t, EMBER__PLF__SCALE_OP__KIND__ACCUMULATE, sc, TIPS - 1, in->cum,
           -1);
}

static void add_root_lnl(task *t, const inst *in, int site) {
  term tm[3];
  int parts = in->cf.parts;
  for (int k = 0; k < parts; k++)
    tm[k] = (term){.buffer = NODES - 1, .child = -1, .matrix = -1,
                   .weights = (uint32_t)k % EIGENS,
                   .freqs = (uint32_t)k % EIGENS,
                   .cum = in->cf.scaling ? (int32_t)in->cum : -1,
                   .part = parts > 1 ? k : -1};
  op_lnl(t, tm, (size_t)parts, parts > 1, site);
}

/* edges: the root's two children across a matrix, and tip 0 (states or
 * partials) below an internal node */
static void add_edge_lnl(task *t, const inst *in) {
  uint32_t root = TIPS + TIPS - 2;
  uint32_t a = in->kids[TIPS - 2][0], b = in->kids[TIPS - 2][1];
  term tm[2] = {
      {.buffer = a, .child = (int32_t)b, .matrix = (int32_t)mat_of(b, 0),
       .weights = 1, .freqs = 0,
       .cum = in->cf.scaling ? (int32_t)in->cum : -1, .part = -1},
      {.buffer = root - 1, .child = 0, .matrix = (int32_t)mat_of(0, 0),
       .weights = 0, .freqs = 1, .cum = -1,
       .part = in->cf.parts > 1 ? in->cf.parts - 1 : -1}};
  op_lnl(t, tm, 2, 1, 1);
}

static void add_compute(task *t, const inst *in) {
  if (in->cf.scaling)
    op_scale(t, EMBER__PLF__SCALE_OP__KIND__RESET, NULL, 0, in->cum2, -1);
  add_partials(t, in, 1);
  if (in->cf.scaling) add_accumulate(t, in);
  add_root_lnl(t, in, 1);
  add_edge_lnl(t, in);
  op_get(t, EMBER__PLF__GET__KIND__PARTIALS, NODES - 1);
  op_get(t, EMBER__PLF__GET__KIND__PARTIALS, TIPS + 1);
  if (in->cf.scaling) {
    op_get(t, EMBER__PLF__GET__KIND__SCALE, in->cum);
    op_get(t, EMBER__PLF__GET__KIND__SCALE, in->cum2);
    op_get(t, EMBER__PLF__GET__KIND__SCALE, scale_of(TIPS + 2));
  }
  op_get(t, EMBER__PLF__GET__KIND__SITE_LNL, 0);
  op_get(t, EMBER__PLF__GET__KIND__MATRIX, mat_of(0, 0));
}

static void add_update(task *t, const inst *in) {
  int S = in->cf.S, C = in->cf.C;
  /* new lengths for three edges of partition 0 (one eigen, one rate set
   * for all) */
  uint32_t mats[3] = {mat_of(0, 0), mat_of(4, 0), mat_of(7, 0)};
  double lens[3] = {0.05, 0.33, 0.7};
  uint32_t e1 = 1, r0 = 0;
  op_update_matrices(t, mats, lens, 3, &e1, 1, &r0, 1);
  op_get(t, EMBER__PLF__GET__KIND__MATRIX, mats[1]);
  /* a matrix set directly: rows of random probabilities */
  double *m = malloc((size_t)C * S * S * 8);
  for (int r = 0; r < C * S; r++) {
    double sum = 0;
    for (int j = 0; j < S; j++) sum += (m[r * S + j] = unif(0.01, 1));
    for (int j = 0; j < S; j++) m[r * S + j] /= sum;
  }
  op_matrix(t, mat_of(2, 0), m, (size_t)C * S * S);
  free(m);
  if (in->cf.scaling) {
    uint32_t one = scale_of(TIPS + 1), two[2] = {scale_of(TIPS),
                                                 scale_of(TIPS + 3)};
    op_scale(t, EMBER__PLF__SCALE_OP__KIND__REMOVE, &one, 1, in->cum, -1);
    op_scale(t, EMBER__PLF__SCALE_OP__KIND__REMOVE, two, 2, in->cum, -1);
    op_scale(t, EMBER__PLF__SCALE_OP__KIND__COPY, &in->cum, 1, in->cum3, -1);
    op_scale(t, EMBER__PLF__SCALE_OP__KIND__RESET, NULL, 0, in->cum3,
             in->cf.parts > 1 ? 1 : -1);
    op_scale(t, EMBER__PLF__SCALE_OP__KIND__ACCUMULATE, two, 2, in->cum3,
             in->cf.parts > 1 ? 0 : -1);
    op_get(t, EMBER__PLF__GET__KIND__SCALE, in->cum3);
  }
  add_partials(t, in, 0);
  if (in->cf.scaling) add_accumulate(t, in);
  add_root_lnl(t, in, 0);
  term sum[3];
  for (int k = 0; k < in->cf.parts; k++)
    sum[k] = (term){.buffer = NODES - 1, .child = -1, .matrix = -1,
                    .weights = 0, .freqs = 1,
                    .cum = in->cf.scaling ? (int32_t)in->cum : -1,
                    .part = in->cf.parts > 1 ? k : -1};
  op_lnl(t, sum, (size_t)in->cf.parts, 0, 1);
  op_get(t, EMBER__PLF__GET__KIND__PARTIALS, 1);
  op_vector(t, EMBER__PLF__SET_VECTOR__KIND__PATTERN_WEIGHTS, 0, in->pw2,
            in->P);
  add_root_lnl(t, in, 1);
  op_get(t, EMBER__PLF__GET__KIND__SITE_LNL, 0);
}

static void add_again(task *t, const inst *in) {
  add_root_lnl(t, in, 1);
  add_edge_lnl(t, in);
  op_get(t, EMBER__PLF__GET__KIND__PARTIALS, NODES - 1);
}

/* ---- running and comparing ------------------------------------------------------ */

typedef struct device {
  cl_device_id id;
  cl_context ctx;
  cl_command_queue transfer, compute, ooo;
  void *state;          /* acc_plf_opencl_ops' handle (fp64 when it has it) */
  plf_ocl *soft;        /* built without fp64 */
  char name[256];
} device;

static const acc_descriptor *plf;

/* the worst relative error seen per precision, for the log */
static double worst[2];

static void note(int single, double e) {
  if (e > worst[single]) worst[single] = e;
}

/* |a - b| <= tol max(|a|, |b|, floor) */
static int close_to(double a, double b, double tol, double floor,
                    double *rel) {
  if (a == b) {
    *rel = 0;
    return 1;
  }
  if (isnan(a) || isnan(b) || isinf(a) || isinf(b)) {
    *rel = INFINITY;
    return 0;
  }
  double m = fmax(fmax(fabs(a), fabs(b)), floor);
  *rel = fabs(a - b) / m;
  return *rel <= tol;
}

static int compare(const char *what, const char *ctx, const double *cpu,
                   const double *dev, size_t n, double tol, double floor,
                   int single) {
  size_t bad = 0, first = 0;
  double max = 0;
  for (size_t i = 0; i < n; i++) {
    double rel;
    if (!close_to(cpu[i], dev[i], tol, floor, &rel)) {
      if (!bad) first = i;
      bad++;
    }
    if (rel > max && isfinite(rel)) max = rel;
  }
  note(single, max);
  CHECK(bad == 0, "%s: %s: %zu of %zu values differ (first %zu: cpu %.17g "
        "device %.17g), max rel %.3g", ctx, what, bad, n, first,
        n ? cpu[first] : 0, n ? dev[first] : 0, max);
  return bad == 0;
}

/* matrices: each entry against its row's largest */
static void compare_matrices(const char *ctx, const double *cpu,
                             const double *dev, size_t n, int S, double tol,
                             int single) {
  size_t bad = 0;
  double max = 0;
  for (size_t r = 0; r < n / (size_t)S; r++) {
    double rowmax = 0;
    for (int j = 0; j < S; j++) rowmax = fmax(rowmax, fabs(cpu[r * S + j]));
    for (int j = 0; j < S; j++) {
      double rel;
      if (!close_to(cpu[r * S + j], dev[r * S + j], tol, rowmax, &rel)) bad++;
      if (rel > max) max = rel;
    }
  }
  note(single, max);
  CHECK(bad == 0, "%s: matrices: %zu of %zu entries differ, max rel %.3g",
        ctx, bad, n, max);
}

/* partials [C][P][S]: each value against its pattern's largest times
 * 1e-6 at least (values that small hardly count) */
static void compare_partials(const char *ctx, const double *cpu,
                             const double *dev, int S, uint32_t P, int C,
                             double tol, int single) {
  size_t bad = 0, n = (size_t)C * P * S;
  double max = 0;
  for (uint32_t p = 0; p < P; p++) {
    double pm = 0;
    for (int c = 0; c < C; c++)
      for (int i = 0; i < S; i++)
        pm = fmax(pm, fabs(cpu[((size_t)c * P + p) * S + i]));
    for (int c = 0; c < C; c++)
      for (int i = 0; i < S; i++) {
        size_t k = ((size_t)c * P + p) * S + i;
        double rel;
        if (!close_to(cpu[k], dev[k], tol, pm * 1e-6, &rel)) bad++;
        if (rel > max) max = rel;
      }
  }
  note(single, max);
  CHECK(bad == 0, "%s: partials: %zu of %zu values differ, max rel %.3g",
        ctx, bad, n, max);
}

/* The Results of one task on the CPU and on the device, compared. */
static void compare_results(const char *ctx, const inst *in, const task *t,
                            const Ember__Plf__Result *c,
                            const Ember__Plf__Result *d, double tol) {
  int single = in->cf.single;
  CHECK(c->n_lnl == d->n_lnl && c->n_site_lnl == d->n_site_lnl &&
            c->n_values == d->n_values,
        "%s: result sizes %zu/%zu/%zu vs %zu/%zu/%zu", ctx, c->n_lnl,
        c->n_site_lnl, c->n_values, d->n_lnl, d->n_site_lnl, d->n_values);
  if (c->n_lnl != d->n_lnl || c->n_site_lnl != d->n_site_lnl ||
      c->n_values != d->n_values)
    return;
  CHECK(c->has_non_finite == d->has_non_finite &&
            c->non_finite == d->non_finite,
        "%s: non_finite %u vs %u", ctx, c->non_finite, d->non_finite);
  compare("lnl", ctx, c->lnl, d->lnl, c->n_lnl, tol, 0, single);
  compare("site lnl", ctx, c->site_lnl, d->site_lnl, c->n_site_lnl, tol, 1,
          single);
  /* values: one Get after another */
  size_t at = 0;
  int S = in->cf.S, C = in->cf.C;
  uint32_t P = in->P;
  for (size_t i = 0; i < t->n_ops; i++) {
    const Ember__Plf__Op *op = t->ops[i];
    if (op->op_case != EMBER__PLF__OP__OP_GET) continue;
    const double *cv = c->values + at, *dv = d->values + at;
    switch (op->get->kind) {
    case EMBER__PLF__GET__KIND__PARTIALS:
      compare_partials(ctx, cv, dv, S, P, C, tol, single);
      at += (size_t)C * P * S;
      break;
    case EMBER__PLF__GET__KIND__MATRIX:
      compare_matrices(ctx, cv, dv, (size_t)C * S * S, S, tol, single);
      at += (size_t)C * S * S;
      break;
    default: /* SCALE, SITE_LNL: logs */
      compare(op->get->kind == EMBER__PLF__GET__KIND__SCALE ? "scale"
                                                              : "site lnl",
              ctx, cv, dv, P, tol, 1, single);
      at += P;
      break;
    }
  }
}

/* The instance's regions after the tasks: model values, flags, tip states
 * and kinds, partition ranges exactly; computed buffers to tol. */
static void compare_states(const char *ctx, const inst *in,
                           const uint8_t *c, const uint8_t *d, double tol) {
  const plf_layout *l = &in->layout;
  int S = in->cf.S, C = in->cf.C, single = in->cf.single;
  uint32_t P = in->P;
  CHECK(memcmp(c, d, l->partials) == 0, "%s: flags differ", ctx);
  CHECK(memcmp(c + l->tip_states, d + l->tip_states,
               l->matrices - l->tip_states) == 0,
        "%s: tip states or kinds differ", ctx);
  CHECK(memcmp(c + l->eigens, d + l->eigens, l->site_lnl - l->eigens) == 0,
        "%s: model values, pattern weights or partition ranges differ", ctx);
  size_t cps = (size_t)C * P * S, css = (size_t)C * S * S;
  double *a = malloc((cps > css ? cps : css) * 8);
  double *b = malloc((cps > css ? cps : css) * 8);
#define WIDEN(dst, src, n)                                              \
  for (size_t i_ = 0; i_ < (n); i_++)                                   \
    dst[i_] = single ? (double)((const float *)(src))[i_]               \
                     : ((const double *)(src))[i_];
  for (uint32_t k = 0; k < NODES + 1; k++) {
    /* tip buffers that hold states have stale (zero) partials */
    uint64_t off = plf_partials_at(l, (uint32_t)k);
    WIDEN(a, c + off, cps);
    WIDEN(b, d + off, cps);
    compare_partials(ctx, a, b, S, P, C, tol, single);
  }
  for (uint32_t k = 0; k < EDGES * (uint32_t)in->cf.parts; k++) {
    uint64_t off = l->matrices + k * l->matrix_stride;
    WIDEN(a, c + off, css);
    WIDEN(b, d + off, css);
    compare_matrices(ctx, a, b, css, S, tol, single);
  }
  for (uint32_t k = 0; k < TIPS - 1 + 3; k++) {
    uint64_t off = l->scales + k * l->scale_stride;
    WIDEN(a, c + off, P);
    WIDEN(b, d + off, P);
    compare("scale buffer", ctx, a, b, P, tol, 1, single);
  }
#undef WIDEN
  compare("site lnl region", ctx, (const double *)(c + l->site_lnl),
          (const double *)(d + l->site_lnl), P, tol, 1, single);
  free(a);
  free(b);
}

/* One task through run_cpu on host (the CPU's instance, or a scratch
 * block when host is NULL) and through the OpenCL ops on mem (or a scratch
 * buffer filled with garbage when mem is NULL); host_only: the device
 * gets no input buffer, only the host bytes. */
static void run_pair(device *dv, void *handle, cl_command_queue q,
                     const char *ctx, const inst *in, task *t, uint8_t *host,
                     cl_mem mem, int host_only) {
  size_t len;
  uint8_t *params = task_pack(t, &len);
  acc_block input = {in->input, in->input_size};
  void *prep = NULL;
  char err[512] = "";
  int rc = plf->validate(params, len, &input, 1, &prep, err, sizeof err);
  CHECK(rc == 0, "%s: validate: %s", ctx, err);
  if (rc) {
    free(params);
    return;
  }
  double tol = in->cf.single ? 1e-4 : 1e-10;
  /* CPU */
  acc_mut_block hs = {host, in->layout.total};
  acc_run_ctx cctx = {0};
  uint8_t *scratch = NULL;
  if (host) {
    cctx.states = &hs;
    cctx.n_states = 1;
  } else {
    scratch = malloc(in->layout.total);
    memset(scratch, 0xAB, in->layout.total);
    cctx.scratch = (acc_mut_block){scratch, in->layout.total};
  }
  acc_output cout = {0};
  rc = plf->run_cpu(prep, &input, 1, &cctx, &cout, err, sizeof err);
  CHECK(rc == 0, "%s: run_cpu: %s", ctx, err);
  /* device: the input written on the transfer queue, not waited for */
  cl_int crc;
  cl_mem inmem = clCreateBuffer(dv->ctx, CL_MEM_READ_ONLY, in->input_size,
                                NULL, &crc);
  CHECK(crc == CL_SUCCESS, "%s: clCreateBuffer %d", ctx, crc);
  cl_event written = NULL;
  crc = clEnqueueWriteBuffer(dv->transfer, inmem, CL_FALSE, 0,
                             in->input_size, in->input, 0, NULL, &written);
  CHECK(crc == CL_SUCCESS, "%s: clEnqueueWriteBuffer %d", ctx, crc);
  clFlush(dv->transfer);
  cl_mem scratch_mem = NULL;
  acc_run_ctx dctx = {0};
  void *states[1] = {mem};
  if (mem) {
    dctx.dev_states = states;
    dctx.n_states = 1;
  } else {
    scratch_mem = clCreateBuffer(dv->ctx, CL_MEM_READ_WRITE,
                                 in->layout.total, NULL, &crc);
    CHECK(crc == CL_SUCCESS, "%s: scratch buffer %d", ctx, crc);
    crc = clEnqueueWriteBuffer(q, scratch_mem, CL_TRUE, 0, in->layout.total,
                               scratch, 0, NULL, NULL);
    CHECK(crc == CL_SUCCESS, "%s: scratch garbage %d", ctx, crc);
    dctx.dev_scratch = scratch_mem;
  }
  void *dev_inputs[1] = {host_only ? NULL : inmem};
  void *waits[1] = {written};
  acc_output dout = {0};
  rc = plf->opencl->run(handle, q, prep, &input, dev_inputs, 1, waits, 1,
                        &dctx, &dout, err, sizeof err);
  CHECK(rc == 0, "%s: opencl run: %s (%s)", ctx, err, ember_errname(rc));
  if (rc == 0 && cout.data) {
    Ember__Plf__Result *c =
        ember__plf__result__unpack(NULL, cout.size, cout.data);
    Ember__Plf__Result *d =
        ember__plf__result__unpack(NULL, dout.size, dout.data);
    CHECK(c && d, "%s: results unpack", ctx);
    if (c && d) compare_results(ctx, in, t, c, d, tol);
    if (c) ember__plf__result__free_unpacked(c, NULL);
    if (d) ember__plf__result__free_unpacked(d, NULL);
  }
  if (written) {
    clWaitForEvents(1, &written);
    clReleaseEvent(written);
  }
  clReleaseMemObject(inmem);
  if (scratch_mem) clReleaseMemObject(scratch_mem);
  free(scratch);
  free(cout.data);
  free(dout.data);
  plf->release(prep);
  free(params);
}

/* The four tasks on one instance (CPU and device), then the instances
 * compared; and the scratch task. */
static void run_instance(device *dv, void *handle, cl_command_queue q,
                         const inst *in, const char *name) {
  const plf_layout *l = &in->layout;
  uint8_t *host = calloc(1, l->total);
  cl_int crc;
  cl_mem mem = clCreateBuffer(dv->ctx, CL_MEM_READ_WRITE, l->total, NULL,
                              &crc);
  CHECK(crc == CL_SUCCESS, "%s: state buffer %d", name, crc);
  crc = clEnqueueWriteBuffer(q, mem, CL_TRUE, 0, l->total, host, 0, NULL,
                             NULL);
  CHECK(crc == CL_SUCCESS, "%s: state zeroed %d", name, crc);
  static const char *const parts[4] = {"setup", "compute", "update",
                                       "again"};
  void (*add[4])(task *, const inst *) = {add_setup, add_compute, add_update,
                                          add_again};
  for (int k = 0; k < 4; k++) {
    task t;
    task_begin(&t, in);
    add[k](&t, in);
    char ctx[256];
    snprintf(ctx, sizeof ctx, "%s %s", name, parts[k]);
    run_pair(dv, handle, q, ctx, in, &t, host, mem, 0);
    task_free(&t);
  }
  uint8_t *back = malloc(l->total);
  crc = clEnqueueReadBuffer(q, mem, CL_TRUE, 0, l->total, back, 0, NULL,
                            NULL);
  CHECK(crc == CL_SUCCESS, "%s: read back %d", name, crc);
  if (crc == CL_SUCCESS)
    compare_states(name, in, host, back, in->cf.single ? 1e-4 : 1e-10);
  free(back);
  clReleaseMemObject(mem);
  free(host);

  task t;
  task_begin(&t, in);
  add_setup(&t, in);
  add_compute(&t, in);
  char ctx[256];
  snprintf(ctx, sizeof ctx, "%s scratch", name);
  run_pair(dv, handle, q, ctx, in, &t, NULL, NULL, 1);
  task_free(&t);
}

static void run_configs(device *dv, int S) {
  int n = 0;
  int has_double = plf_ocl_has_double(dv->state);
  for (int C = 1; C <= 4; C += 3)
    for (int single = !has_double; single < 2; single++)
      for (int scaling = 0; scaling < 2; scaling++)
        for (int states = 0; states < 2; states++)
          for (int parts = 1; parts <= 3; parts += 2) {
            config cf = {S, C, single, scaling, states, parts};
            rng_state = 0x5EED0000u + (uint64_t)S * 1000 + (uint64_t)n++;
            inst in;
            inst_make(&in, cf);
            char name[128];
            snprintf(name, sizeof name, "S=%d C=%d %s scaling=%d tips=%s "
                     "partitions=%d", S, C, single ? "single" : "double",
                     scaling, states ? "states" : "partials", parts);
            int before = failures;
            run_instance(dv, dv->state, dv->compute, &in, name);
            if (single && dv->soft) {
              char soft[160];
              snprintf(soft, sizeof soft, "%s (no fp64)", name);
              run_instance(dv, dv->soft, dv->compute, &in, soft);
            }
            printf("%s %s\n", failures == before ? "ok  " : "FAIL", name);
            inst_free(&in);
          }
}

/* ---- the S = 4 extras --------------------------------------------------------- */

static void run_misc(device *dv) {
  config cf = {4, 4, 0, 1, 1, 3};
  rng_state = 0xABCDEF;
  inst in;
  inst_make(&in, cf);
  task t;
  task_begin(&t, &in);
  add_setup(&t, &in);
  add_compute(&t, &in);
  size_t len;
  uint8_t *params = task_pack(&t, &len);
  acc_block input = {in.input, in.input_size};
  void *prep = NULL;
  char err[512] = "";
  int rc = plf->validate(params, len, &input, 1, &prep, err, sizeof err);
  CHECK(rc == 0, "misc validate: %s", err);
  cl_int crc;
  cl_mem scratch = clCreateBuffer(dv->ctx, CL_MEM_READ_WRITE,
                                  in.layout.total, NULL, &crc);
  acc_run_ctx ctx = {0};
  ctx.dev_scratch = scratch;
  void *dev_inputs[1] = {NULL};
  acc_output out = {0};
  /* a double instance on the handle without fp64 */
  if (dv->soft) {
    rc = plf->opencl->run(dv->soft, dv->compute, prep, &input, dev_inputs, 1,
                          NULL, 0, &ctx, &out, err, sizeof err);
    CHECK(rc == EMBER_ENOPLATFORM && strstr(err, "cl_khr_fp64"),
          "double without fp64: %s (%s)", err, ember_errname(rc));
    free(out.data);
    out = (acc_output){0};
    CHECK(!plf_ocl_has_double(dv->soft), "the soft handle has no double");
  }
  /* canceled before the first operation */
  atomic_int cancel = 1;
  ctx.cancel = &cancel;
  rc = plf->opencl->run(dv->state, dv->compute, prep, &input, dev_inputs, 1,
                        NULL, 0, &ctx, &out, err, sizeof err);
  CHECK(rc == EMBER_ECANCELED, "cancel: %s (%s)", err, ember_errname(rc));
  free(out.data);
  out = (acc_output){0};
  ctx.cancel = NULL;
  /* no instance at all */
  acc_run_ctx none = {0};
  rc = plf->opencl->run(dv->state, dv->compute, prep, &input, dev_inputs, 1,
                        NULL, 0, &none, &out, err, sizeof err);
  CHECK(rc == EMBER_EINTERNAL, "no instance: %s (%s)", err,
        ember_errname(rc));
  free(out.data);
  plf->release(prep);
  free(params);
  task_free(&t);
  clReleaseMemObject(scratch);

  /* the whole sequence on an out-of-order queue */
  if (dv->ooo) {
    run_instance(dv, dv->state, dv->ooo, &in, "misc out-of-order queue");
    printf("ok   out-of-order queue\n");
  } else {
    printf("note: no out-of-order queue on this device\n");
  }
  inst_free(&in);

  /* the binary cache: built, then loaded */
  char dir[] = "/tmp/plf-opencl-cache-XXXXXX";
  if (mkdtemp(dir)) {
    plf_ocl *a = NULL, *b = NULL;
    rc = plf_ocl_create(dv->ctx, dv->id, dir, 1, &a, err, sizeof err);
    CHECK(rc == 0 && !plf_ocl_loaded_from_cache(a), "cache build: %s", err);
    rc = plf_ocl_create(dv->ctx, dv->id, dir, 1, &b, err, sizeof err);
    CHECK(rc == 0 && plf_ocl_loaded_from_cache(b), "cache load: %s", err);
    plf_ocl_destroy(a);
    plf_ocl_destroy(b);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) printf("note: could not remove %s\n", dir);
  }
}

/* ---- main ---------------------------------------------------------------------- */

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int S = argc > 1 ? atoi(argv[1]) : 4;
  if (S < 2 || S > 64) {
    fprintf(stderr, "usage: %s STATES (4, 20, 61)\n", argv[0]);
    return 2;
  }
  plf = acc_registry_find("plf");
  if (!plf || !plf->opencl) {
    printf("FAIL: the plf descriptor has no OpenCL implementation\n");
    return 1;
  }
  CHECK(plf->opencl == &acc_plf_opencl_ops, "plf names acc_plf_opencl_ops");

  device d = {0};
  cl_platform_id plats[8];
  cl_uint np = 0;
  if (clGetPlatformIDs(8, plats, &np) == CL_SUCCESS) {
    if (np > 8) np = 8;
    for (cl_uint p = 0; p < np && !d.id; p++) {
      cl_uint nd = 0;
      if (clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 1, &d.id, &nd) !=
              CL_SUCCESS ||
          nd == 0)
        d.id = NULL;
    }
  }
  if (!d.id) {
    printf("no OpenCL device: skipped\n");
    return SKIP;
  }
  clGetDeviceInfo(d.id, CL_DEVICE_NAME, sizeof d.name - 1, d.name, NULL);
  cl_int rc;
  d.ctx = clCreateContext(NULL, 1, &d.id, NULL, NULL, &rc);
  CHECK(rc == CL_SUCCESS, "clCreateContext %d", rc);
  if (rc != CL_SUCCESS) return 1;
  d.transfer = clCreateCommandQueue(d.ctx, d.id, 0, &rc);
  CHECK(rc == CL_SUCCESS, "transfer queue %d", rc);
  d.compute = clCreateCommandQueue(d.ctx, d.id, 0, &rc);
  CHECK(rc == CL_SUCCESS, "compute queue %d", rc);
  if (S == 4) {
    d.ooo = clCreateCommandQueue(d.ctx, d.id,
                                 CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE, &rc);
    if (rc != CL_SUCCESS) d.ooo = NULL;
  }
  char err[2048] = "";
  double t0 = now();
  int erc = plf->opencl->create(d.ctx, d.id, NULL, &d.state, err,
                                sizeof err);
  CHECK(erc == 0 && d.state, "create: %s", err);
  erc = plf_ocl_create(d.ctx, d.id, NULL, 0, &d.soft, err, sizeof err);
  CHECK(erc == 0 && d.soft, "create without fp64: %s", err);
  printf("device %s: programs built in %.2f s; double precision %s\n",
         d.name, now() - t0,
         d.state && plf_ocl_has_double(d.state) ? "yes" : "no");
  if (d.state && d.transfer && d.compute) {
    if (!plf_ocl_has_double(d.state))
      printf("note: no cl_khr_fp64: double instances are not compared\n");
    run_configs(&d, S);
    if (S == 4) run_misc(&d);
  }
  plf->opencl->destroy(d.state);
  plf->opencl->destroy(NULL);
  plf_ocl_destroy(d.soft);
  if (d.ooo) clReleaseCommandQueue(d.ooo);
  if (d.transfer) clReleaseCommandQueue(d.transfer);
  if (d.compute) clReleaseCommandQueue(d.compute);
  clReleaseContext(d.ctx);
  printf("worst relative error: double %.3g, single %.3g\n", worst[0],
         worst[1]);
  if (failures) {
    printf("FAILED: %d of %ld checks\n", failures, checks);
    return 1;
  }
  printf("OK: %ld checks\n", checks);
  return 0;
}
