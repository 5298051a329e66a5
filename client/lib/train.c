/*
 * train.c - ember_train and ember_train_plan (ember.h, "CNN training"):
 * the network read and split into stages by cnn_partition (FPDeep's
 * partitioner, platforms weighted by their speed for cnn), each stage a
 * state block pinned to one platform of one client, then epoch after
 * epoch the pipeline (train_pipeline.c) over shuffled samples
 * (train_data.c), a test pass, the epoch callback and the weights file
 * (train_weights.c). `ember train` and Python's ember.train are front ends
 * to these calls.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_partition.h"
#include "last_error.h"
#include "struct_abi.h"
#include "train_internal.h"

#define EMBER__TRAIN_PARAMS_V0 EMBER__V0_SIZE(ember_train_params, user)
#define EMBER__TRAIN_RESULT_V0 EMBER__V0_SIZE(ember_train_result, tasks)

/* Speeds (training operations per second) of a platform with no figure
 * for cnn yet: only their ratios steer the split. fpga-emu's is FPDeep's
 * 1157 GOPS per FPGA (cnn_accel.c's model). */
#define SPEED_CPU 2.0e10
#define SPEED_OPENCL 1.0e10
#define SPEED_FPGA_EMU 1.157e12
#define MAX_PLATFORMS 64

void ember_train_params_default(ember_train_params *p) {
  memset(p, 0, sizeof *p);
  p->size = sizeof *p;
  p->epochs = 1;
  p->learning_rate = p->momentum = p->decay = -1;
  p->stages = 1;
  p->seed = 1;
}

/* A platform that runs cnn: its client, name and speed. */
typedef struct candidate {
  size_t client;
  char name[64];
  char kind[32];
  char label[192];
  char device[128];
  double speed;
  int measured;  /* speed is the NAM's figure, not a per-kind default */
} candidate;

typedef struct setup {
  ember_train_params p;
  cnn_net *net;
  char *text;
  size_t text_len;
  cnn_plan *plan;
  train_run run;
  candidate *stage_platform;   /* one per stage */
} setup;

static double speed_of(const ember_platform_info *pl, int *measured) {
  *measured = 1;
  for (size_t k = 0; k < pl->n_pairs; k++) {
    const ember_pair_info *pair = pl->pairs[k];
    if (strcmp(pair->accelerator, "cnn") == 0 && pair->ns_per_unit > 0 &&
        strcmp(pair->speed, "unknown") != 0 &&
        strcmp(pair->speed, "calibrating") != 0)
      return 1e9 / pair->ns_per_unit;
  }
  *measured = 0;
  if (strcmp(pl->kind, "fpga-emu") == 0) return SPEED_FPGA_EMU;
  if (strcmp(pl->kind, "opencl") == 0) return SPEED_OPENCL;
  return SPEED_CPU;
}

/* Platforms alike (same kind and device on the same NAM, e.g. its
 * emulated boards) get one figure: the mean of those the NAM has measured.
 * Each measured figure is a moving average over whatever tasks that
 * platform ran last (small UPDATEs, slices, whole stages), so alike boards
 * drift apart from run to run; and a board not measured yet would get the
 * per-kind default. Either way the plan would pile the work on whichever
 * looks faster. */
static void share_figures(candidate *c, size_t n) {
  double alike[MAX_PLATFORMS] = {0}; /* n <= MAX_PLATFORMS */
  for (size_t i = 0; i < n; i++) {
    double sum = 0;
    size_t measured = 0;
    for (size_t j = 0; j < n; j++)
      if (c[j].measured && strcmp(c[j].kind, c[i].kind) == 0 &&
          strcmp(c[j].device, c[i].device) == 0) {
        sum += 1 / c[j].speed;
        measured++;
      }
    if (measured) alike[i] = measured / sum;
  }
  for (size_t i = 0; i < n; i++)
    if (alike[i] > 0) c[i].speed = alike[i];
}

static int runs_cnn(const ember_platform_info *pl) {
  for (size_t k = 0; k < pl->n_pairs; k++)
    if (strcmp(pl->pairs[k]->accelerator, "cnn") == 0) return 1;
  return 0;
}

/* The platforms of client c that run cnn (of kind, when given). */
static int platforms_of(ember_client *const *clients, size_t n_clients,
                        size_t c, const char *kind, candidate *out,
                        size_t *n) {
  ember_listing *l = NULL;
  int rc = ember_list_accelerators(clients[c], &l);
  if (rc) {
    ember__client_set_error("%s: cannot list its platforms: %s",
                            ember_client_address(clients[c]),
                            ember_last_error());
    return rc;
  }
  *n = 0;
  char kinds[256] = "";
  for (size_t i = 0; i < ember_listing_platforms(l) && *n < MAX_PLATFORMS;
       i++) {
    const ember_platform_info *pl = ember_listing_platform(l, i);
    if (!runs_cnn(pl)) continue;
    if (!strstr(kinds, pl->kind)) {
      size_t used = strlen(kinds);
      snprintf(kinds + used, sizeof kinds - used, "%s%s", used ? ", " : "",
               pl->kind);
    }
    if (kind && strcmp(kind, pl->kind) != 0 && strcmp(kind, pl->name) != 0)
      continue;
    candidate *cd = &out[(*n)++];
    cd->client = c;
    snprintf(cd->name, sizeof cd->name, "%s", pl->name);
    snprintf(cd->kind, sizeof cd->kind, "%s", pl->kind);
    if (n_clients > 1)
      snprintf(cd->label, sizeof cd->label, "%s %s",
               ember_client_address(clients[c]), pl->name);
    else
      snprintf(cd->label, sizeof cd->label, "%s", pl->name);
    snprintf(cd->device, sizeof cd->device, "%s", pl->device);
    cd->speed = speed_of(pl, &cd->measured);
  }
  ember_listing_free(l);
  share_figures(out, *n);
  if (*n == 0) {
    ember__client_set_error("%s: no platform %s%s runs cnn (cnn runs on: %s)",
                            ember_client_address(clients[c]),
                            kind ? "of kind " : "", kind ? kind : "",
                            kinds[0] ? kinds : "none");
    return EMBER_ENOPLATFORM;
  }
  return 0;
}

static int read_net(setup *s) {
  const ember_train_params *p = &s->p;
  char err[512];
  int rc;
  if (p->net_path) {
    FILE *f = fopen(p->net_path, "rb");
    s->text = malloc(CNN_CFG_MAX_BYTES + 1);
    if (!s->text) {
      if (f) fclose(f);
      ember__client_set_error("out of memory");
      return EMBER_ENOMEM;
    }
    if (!f) {
      ember__client_set_error("%s: cannot open", p->net_path);
      return EMBER_EIO;
    }
    s->text_len = fread(s->text, 1, CNN_CFG_MAX_BYTES + 1, f);
    fclose(f);
    if (s->text_len > CNN_CFG_MAX_BYTES) {
      ember__client_set_error("%s: over %u bytes", p->net_path,
                              CNN_CFG_MAX_BYTES);
      return EMBER_EPARAM;
    }
  } else if (p->net_text) {
    if (p->net_len > CNN_CFG_MAX_BYTES) {
      ember__client_set_error("net: %zu bytes, over %u", p->net_len,
                              CNN_CFG_MAX_BYTES);
      return EMBER_EPARAM;
    }
    s->text = malloc(p->net_len ? p->net_len : 1);
    if (!s->text) {
      ember__client_set_error("out of memory");
      return EMBER_ENOMEM;
    }
    memcpy(s->text, p->net_text, p->net_len);
    s->text_len = p->net_len;
  } else {
    ember__client_set_error("ember_train: no network (net_path or net_text)");
    return EMBER_EINVAL;
  }
  rc = cnn_cfg_parse(s->text, s->text_len,
                     p->net_path ? p->net_path : "net", &s->net, err,
                     sizeof err);
  if (rc == EMBER_ENOMEM) {
    ember__client_set_error("out of memory");
    return rc;
  }
  if (rc) {
    ember__client_set_error("%s", err);
    return EMBER_EPARAM;
  }
  return 0;
}

/* The SGD and batch settings: the caller's, else the .cfg's. The
 * micro-batch, unless given: the .cfg's batch / subdivisions where it
 * writes subdivisions (darknet's forward batch, rounded down, the
 * mini-batch then subdivisions of them), else the largest divisor of the
 * batch up to 16. */
static int settle(setup *s) {
  const ember_train_params *p = &s->p;
  const cnn_train *tr = cnn_net_train(s->net);
  train_run *r = &s->run;
  uint32_t batch = p->batch ? p->batch : tr->batch;
  if (batch < 1 || batch > CNN_MAX_BATCH) {
    ember__client_set_error("batch %u out of 1..%u", batch, CNN_MAX_BATCH);
    return EMBER_EPARAM;
  }
  uint32_t micro = p->micro_batch;
  if (!micro && tr->subdivisions) {
    if (tr->subdivisions > batch) {
      ember__client_set_error("the network's subdivisions=%u is more than "
                              "the batch %u", tr->subdivisions, batch);
      return EMBER_EPARAM;
    }
    micro = batch / tr->subdivisions;
    batch = micro * tr->subdivisions;
  }
  if (!micro)
    for (micro = batch < 16 ? batch : 16; batch % micro; micro--) {}
  if (micro < 1 || micro > batch || batch % micro) {
    ember__client_set_error("micro-batch %u does not divide the batch %u",
                            micro, batch);
    return EMBER_EPARAM;
  }
  r->micro = micro;
  r->per_batch = batch / micro;
  r->lr = p->learning_rate >= 0 ? p->learning_rate : tr->learning_rate;
  r->momentum = p->momentum >= 0 ? p->momentum : tr->momentum;
  r->decay = p->decay >= 0 ? p->decay : tr->decay;
  if (!(r->lr > 0 && r->lr <= 10) || !(r->momentum < 1) ||
      !(r->decay < 1)) {
    ember__client_set_error("learning rate %g (0, 10], momentum %g and "
                            "decay %g [0, 1): out of range", r->lr,
                            r->momentum, r->decay);
    return EMBER_EPARAM;
  }
  r->schedule = tr;
  r->sync = p->sync;
  r->seed = p->seed;
  r->updates = 0;
  return 0;
}

/* How the plan cuts layer L: the split of any stage holding a part of it,
 * WHOLE when none does. */
static cnn_split split_in(const cnn_stage *st, size_t n, uint32_t L) {
  for (size_t i = 0; i < n; i++) {
    if (st[i].begin.layer == L && st[i].begin_split != CNN_SPLIT_WHOLE)
      return st[i].begin_split;
    if (st[i].end.layer == L && st[i].end_split != CNN_SPLIT_WHOLE)
      return st[i].end_split;
  }
  return CNN_SPLIT_WHOLE;
}

/* Whether the pipeline can run the plan's pieces: at most
 * CNN_MAX_ERROR_PIECES slices of a layer (the error pieces or addends of
 * the unit before it), and no cut layer right after an OCP-cut one (OCP
 * slices take their output error in one block). */
static int runs_as_units(const cnn_stage *st, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint32_t L = st[i].begin.layer;
    if (st[i].begin_split == CNN_SPLIT_WHOLE) continue;
    size_t slices = 0; /* the stages holding a part of layer L */
    for (size_t k = 0; k < n; k++)
      slices += (st[k].begin.layer == L &&
                 st[k].begin_split != CNN_SPLIT_WHOLE) ||
                (st[k].end.layer == L && st[k].end_split != CNN_SPLIT_WHOLE &&
                 st[k].begin.layer != L);
    if (slices > CNN_MAX_ERROR_PIECES) return 0;
  }
  for (size_t i = 0; i < n; i++) {
    uint32_t L = st[i].end.layer;
    if (st[i].end_split == CNN_SPLIT_OCP &&
        split_in(st, n, L + 1) != CNN_SPLIT_WHOLE)
      return 0;
  }
  return 1;
}

/* The plan: stages dealt over the clients in order, on each over its
 * platforms in turn; FPDeep's partitioner, weighted by speed: its fine
 * phase (stages may cut a layer's input channels, ICP, or its output
 * channels, OCP) unless asked for whole layers. */
static int make_plan(setup *s, ember_client *const *clients,
                     size_t n_clients) {
  size_t N = s->p.stages ? s->p.stages : 1;
  if (N > CNN_PLAN_MAX_STAGES) {
    ember__client_set_error("%zu stages: at most %d", N, CNN_PLAN_MAX_STAGES);
    return EMBER_EPARAM;
  }
  s->stage_platform = calloc(N, sizeof *s->stage_platform);
  candidate *found = calloc(MAX_PLATFORMS, sizeof *found);
  cnn_platform *pl = calloc(N, sizeof *pl);
  int rc = s->stage_platform && found && pl ? 0 : EMBER_ENOMEM;
  if (rc) ember__client_set_error("out of memory");
  size_t at = 0;
  for (size_t c = 0; c < n_clients && !rc; c++) {
    size_t n = 0;
    /* stages [c*N/n_clients, (c+1)*N/n_clients) are this client's */
    size_t end = (c + 1) * N / n_clients;
    if (at == end) continue;
    rc = platforms_of(clients, n_clients, c, s->p.platform, found, &n);
    for (size_t k = 0; !rc && at < end; k++, at++)
      s->stage_platform[at] = found[k % n];
  }
  for (size_t i = 0; !rc && i < N; i++) {
    pl[i].name = s->stage_platform[i].label;
    pl[i].speed = s->stage_platform[i].speed;
  }
  /* FPDeep's fine phase (ICP, OCP slices, each layer's split searched)
   * unless asked for whole layers; a plan the pipeline cannot run as
   * units (runs_as_units) falls back to the default splits, then to
   * whole layers */
  static const unsigned tries[] = {0, CNN_PLAN_FIXED_SPLITS,
                                   CNN_PLAN_LAYERS_ONLY};
  char err[512];
  size_t k0 = s->p.layer_split_only ? 2 : s->p.fixed_splits ? 1 : 0;
  for (size_t k = k0; !rc && k < 3; k++) {
    rc = cnn_plan_create(s->net, pl, N, s->run.micro * s->run.per_batch,
                         tries[k], &s->plan, err, sizeof err);
    if (rc && k < 2) { /* too few pieces with some split: try the next */
      rc = 0;
      continue;
    }
    if (rc) ember__client_set_error("%s", err);
    size_t n;
    const cnn_stage *st = rc ? NULL : cnn_plan_stages(s->plan, &n);
    if (rc || k == 2 || runs_as_units(st, n)) break;
    cnn_plan_destroy(s->plan);
    s->plan = NULL;
  }
  free(found);
  free(pl);
  return rc;
}

/* Append a unit of plan stage i: layers [first, end), or with slice (a
 * cnn_split) the slice [c0, c1) of layer first. */
static int add_unit(setup *s, ember_client *const *clients, size_t i,
                    uint32_t first, uint32_t end, cnn_split slice,
                    uint32_t c0, uint32_t c1) {
  train_run *r = &s->run;
  train_stage *t = &r->stages[r->n_stages++];
  t->first = first;
  t->end = end;
  t->plan_stage = i;
  t->slice = slice != CNN_SPLIT_WHOLE;
  t->ocp = slice == CNN_SPLIT_OCP;
  t->c0 = c0;
  t->c1 = c1;
  t->client_index = s->stage_platform[i].client;
  t->client = clients[t->client_index];
  snprintf(t->platform, sizeof t->platform, "%s", s->stage_platform[i].name);
  t->speed = s->stage_platform[i].speed;
  /* a device (a board, an OpenCL device) runs its tasks one at a time in
   * the order they came; the cpu platform runs several at once */
  t->in_order = strcmp(s->stage_platform[i].kind, "cpu") != 0;
  return 0;
}

/* What a split cuts in a layer: its input channels (ICP), its output
 * channels (OCP). */
static uint32_t split_channels(const cnn_layer *l, cnn_split split) {
  return split == CNN_SPLIT_OCP ? cnn_layer_outputs(l)
                                : cnn_layer_channels(l);
}

/* The plan's stages as units: each stage's leading slice, whole layers
 * and trailing slice, with their platform. */
static int make_stages(setup *s, ember_client *const *clients) {
  size_t N, n_layers;
  const cnn_stage *st = cnn_plan_stages(s->plan, &N);
  const cnn_layer *layers = cnn_net_layers(s->net, &n_layers);
  train_run *r = &s->run;
  r->text = s->text;
  r->text_len = s->text_len;
  r->net = s->net;
  r->n_plan_stages = N;
  r->n_stages = 0;
  r->stages = calloc(3 * N, sizeof *r->stages);
  if (!r->stages) {
    ember__client_set_error("out of memory");
    return EMBER_ENOMEM;
  }
  for (size_t i = 0; i < N; i++) {
    uint32_t L0 = st[i].begin.layer, L1 = st[i].end.layer;
    cnn_split lead = st[i].begin_split, trail = st[i].end_split;
    if (L0 == L1 && (lead || trail)) {
      add_unit(s, clients, i, L0, L0 + 1, lead ? lead : trail,
               st[i].begin.channel, st[i].end.channel);
      continue;
    }
    uint32_t w0 = L0, w1 = L1 + 1;
    if (lead) {
      add_unit(s, clients, i, L0, L0 + 1, lead, st[i].begin.channel,
               split_channels(&layers[L0], lead));
      w0++;
    }
    if (trail) w1--;
    if (w0 < w1) add_unit(s, clients, i, w0, w1, CNN_SPLIT_WHOLE, 0, 0);
    if (trail) add_unit(s, clients, i, L1, L1 + 1, trail, 0,
                        st[i].end.channel);
  }
  /* each slice's layer: its first and last slice units */
  for (size_t u = 0; u < r->n_stages; u++) {
    train_stage *t = &r->stages[u];
    if (!t->slice) continue;
    size_t b = u, e = u;
    while (b > 0 && r->stages[b - 1].slice &&
           r->stages[b - 1].first == t->first)
      b--;
    while (e + 1 < r->n_stages && r->stages[e + 1].slice &&
           r->stages[e + 1].first == t->first)
      e++;
    t->base = b;
    t->last = e;
    t->slice_last = u == e;
    if (r->stages[b].c0 != 0 ||
        r->stages[e].c1 != split_channels(&layers[t->first],
                                          t->ocp ? CNN_SPLIT_OCP
                                                 : CNN_SPLIT_ICP) ||
        r->stages[b].ocp != t->ocp ||
        b == e ||
        (u > b && r->stages[u - 1].c1 != t->c0)) {
      ember__client_set_error("the plan's slices of layer %u do not cover "
                              "its channels", t->first + 1);
      return EMBER_EINTERNAL;
    }
  }
  size_t U = r->n_stages;
  r->slots = (uint32_t)(2 * U < CNN_MAX_SLOTS ? 2 * U : CNN_MAX_SLOTS);
  for (size_t u = 0; u < U; u++) {
    train_stage *t = &r->stages[u];
    int rc = t->ocp     ? cnn_layout_compute_ocp(s->net, t->first, t->c0,
                                                 t->c1, r->micro, r->slots,
                                                 &t->layout)
             : t->slice ? cnn_layout_compute_slice(s->net, t->first, t->c0,
                                                   t->c1, r->micro, r->slots,
                                                   &t->layout)
                        : cnn_layout_compute(s->net, t->first, t->end,
                                             r->micro, r->slots, &t->layout);
    if (rc) {
      ember__client_set_error("stage %zu: state too large",
                              t->plan_stage + 1);
      return EMBER_ETOOBIG;
    }
  }
  return 0;
}

static int make_state_blocks(train_run *r) {
  for (size_t i = 0; i < r->n_stages; i++) {
    train_stage *t = &r->stages[i];
    void *zero = calloc(1, (size_t)t->layout.total);
    if (!zero) {
      ember__client_set_error("out of memory");
      return EMBER_ENOMEM;
    }
    int rc = ember_block_create(t->client, zero, (size_t)t->layout.total,
                                EMBER_BLOCK_STATE, &t->state);
    free(zero);
    if (rc) {
      ember__client_set_error("stage %zu: cannot make its state block "
                              "(%llu bytes): %s", t->plan_stage + 1,
                              (unsigned long long)t->layout.total,
                              ember_last_error());
      return rc;
    }
  }
  return 0;
}

static void setup_free(setup *s) {
  for (size_t i = 0; s->run.stages && i < s->run.n_stages; i++)
    ember_block_release(s->run.stages[i].state);
  free(s->run.stages);
  free(s->stage_platform);
  cnn_plan_destroy(s->plan);
  cnn_net_destroy(s->net);
  free(s->text);
}

static int setup_make(setup *s, ember_client *const *clients,
                      size_t n_clients, const ember_train_params *params) {
  memset(s, 0, sizeof *s);
  if (!clients || !n_clients || !params) {
    ember__client_set_error("ember_train: no clients or parameters");
    return EMBER_EINVAL;
  }
  for (size_t c = 0; c < n_clients; c++)
    if (!clients[c]) {
      ember__client_set_error("ember_train: client %zu is NULL", c);
      return EMBER_EINVAL;
    }
  int rc = ember__struct_in(&s->p, sizeof s->p, params,
                            EMBER__TRAIN_PARAMS_V0, "ember_train_params");
  if (!rc) rc = read_net(s);
  if (!rc) rc = settle(s);
  if (!rc) rc = make_plan(s, clients, n_clients);
  if (!rc) rc = make_stages(s, clients);
  return rc;
}

int ember_train_plan(ember_client *const *clients, size_t n_clients,
                     const ember_train_params *params, char **text) {
  setup s;
  int rc = setup_make(&s, clients, n_clients, params);
  if (!rc) {
    const train_run *r = &s.run;
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "network: %u layers, %llu parameters, %llu "
                      "multiply-adds per sample (FP+EB+PG)\n"
                      "batch %u in micro-batches of %u, %u kept per stage; "
                      "%s updates\n",
                      r->stages[r->n_stages - 1].end,
                      (unsigned long long)cnn_net_params(s.net),
                      (unsigned long long)cnn_net_macs(s.net),
                      r->micro * r->per_batch, r->micro, r->slots,
                      r->sync ? "synchronous" : "FPDeep's pipelined");
    size_t len = cnn_plan_format(s.plan, NULL, 0);
    *text = malloc((size_t)hn + len + 1);
    if (!*text) {
      ember__client_set_error("out of memory");
      rc = EMBER_ENOMEM;
    } else {
      memcpy(*text, head, (size_t)hn);
      cnn_plan_format(s.plan, *text + hn, len + 1);
    }
  }
  setup_free(&s);
  return rc;
}

/* The weights to start from: the file's, or NULL (seeded INIT). */
static int start_weights(setup *s, unsigned *epochs_done) {
  *epochs_done = 0;
  float *params = NULL;
  int rc = 0;
  if (s->p.load_path) {
    params = malloc((size_t)(cnn_net_params(s->net) + 1) * sizeof *params);
    if (!params) {
      ember__client_set_error("out of memory");
      return EMBER_ENOMEM;
    }
    rc = ember__train_weights_load(s->p.load_path, s->net, params, epochs_done);
  }
  if (!rc) rc = ember__train_stages_init(&s->run, params);
  free(params);
  return rc;
}

static int save_weights(setup *s, unsigned epochs_done) {
  float *params =
      malloc((size_t)(cnn_net_params(s->net) + 1) * sizeof *params);
  if (!params) {
    ember__client_set_error("out of memory");
    return EMBER_ENOMEM;
  }
  int rc = ember__train_stages_params(&s->run, params);
  if (!rc)
    rc = ember__train_weights_save(s->p.save_path, s->net, params, epochs_done);
  free(params);
  return rc;
}

static int test_pass(setup *s, const train_samples *test, double *acc) {
  *acc = NAN;
  if (!test->n) return 0;
  train_pass tp;
  int rc = ember__train_pass_run(&s->run, test, NULL, test->n, 0, &tp, NULL,
                                  NULL);
  if (!rc) *acc = (double)tp.correct / (double)test->n;
  return rc;
}

/* One epoch's figures to the callback. */
static int report_epoch(setup *s, unsigned epoch, unsigned last,
                        const train_pass *tp, const uint64_t *exec_ns,
                        double test_acc) {
  if (!s->p.epoch_cb) return 0;
  size_t N = s->run.n_plan_stages;
  double *busy = calloc(N, sizeof *busy);
  const char **names = calloc(N, sizeof *names);
  int rc = 0;
  if (!busy || !names) {
    ember__client_set_error("out of memory");
    rc = EMBER_ENOMEM;
  }
  double secs = (double)tp->wall_ns / 1e9;
  for (size_t i = 0; !rc && i < N; i++) {
    busy[i] = tp->wall_ns ? (double)exec_ns[i] / (double)tp->wall_ns : 0;
    names[i] = s->stage_platform[i].label;
  }
  if (!rc) {
    ember_train_epoch e = {
        .size = sizeof e, .epoch = epoch, .epochs = last,
        .loss = tp->micro_batches ? tp->loss_sum / (double)tp->micro_batches
                                  : NAN,
        .train_accuracy = tp->samples ? (double)tp->correct /
                                            (double)tp->samples
                                      : NAN,
        .test_accuracy = test_acc, .seconds = secs,
        .images_per_second = secs > 0 ? (double)tp->samples / secs : 0,
        .n_stages = N, .stage_busy = busy, .stage_platform = names};
    if (s->p.epoch_cb(&e, s->p.user) != 0) {
      ember__client_set_error("stopped by the epoch callback");
      rc = EMBER_ECANCELED;
    }
  }
  free(busy);
  free(names);
  return rc;
}

int ember_train(ember_client *const *clients, size_t n_clients,
                const ember_train_params *params, ember_train_result *result) {
  setup s;
  train_samples train = {0}, test = {0};
  size_t *order = NULL;
  int rc = setup_make(&s, clients, n_clients, params);
  if (!rc) rc = ember__train_samples_load(&s.p, s.net, &train, &test);
  size_t batch = (size_t)s.run.micro * s.run.per_batch;
  if (!rc && s.p.epochs && train.n < batch) {
    ember__client_set_error("%zu training samples: fewer than one batch of "
                            "%zu", train.n, batch);
    rc = EMBER_EPARAM;
  }
  if (!rc && train.n) {
    order = malloc(train.n * sizeof *order);
    if (!order) {
      ember__client_set_error("out of memory");
      rc = EMBER_ENOMEM;
    }
  }
  uint64_t *exec_ns = NULL;
  if (!rc) {
    exec_ns = calloc(s.run.n_plan_stages, sizeof *exec_ns);
    if (!exec_ns) {
      ember__client_set_error("out of memory");
      rc = EMBER_ENOMEM;
    }
  }
  if (!rc) rc = make_state_blocks(&s.run);
  unsigned done = 0;
  if (!rc) rc = start_weights(&s, &done);
  ember_train_result res = {.size = sizeof res, .test_accuracy = NAN,
                            .loss = NAN, .train_accuracy = NAN};
  uint64_t wall = 0;
  unsigned last = done + s.p.epochs;
  /* a loaded file's epochs count for the mini-batches' numbers */
  if (!rc) s.run.updates = (uint64_t)done * (train.n / batch);
  for (unsigned e = 0; !rc && e < s.p.epochs; e++) {
    size_t n = train.n / batch * batch; /* whole mini-batches */
    ember__train_shuffle(order, train.n, s.p.seed, done + e);
    train_pass tp;
    rc = ember__train_pass_run(&s.run, &train, order, n, 1, &tp, s.p.progress,
                        s.p.user);
    /* the test pass counts its own platform time: keep the epoch's */
    for (size_t i = 0; !rc && i < s.run.n_plan_stages; i++) exec_ns[i] = 0;
    for (size_t u = 0; !rc && u < s.run.n_stages; u++)
      exec_ns[s.run.stages[u].plan_stage] += s.run.stages[u].exec_ns;
    double acc = NAN;
    if (!rc) rc = test_pass(&s, &test, &acc);
    if (!rc && s.p.save_path) rc = save_weights(&s, done + e + 1);
    if (!rc) rc = report_epoch(&s, done + e + 1, last, &tp, exec_ns, acc);
    if (rc) break;
    s.run.updates += n / batch;
    wall += tp.wall_ns;
    res.epochs++;
    res.loss = tp.micro_batches ? tp.loss_sum / (double)tp.micro_batches : NAN;
    res.train_accuracy = (double)tp.correct / (double)tp.samples;
    res.test_accuracy = acc;
  }
  if (!rc && !s.p.epochs) rc = test_pass(&s, &test, &res.test_accuracy);
  res.seconds = (double)wall / 1e9;
  for (size_t i = 0; s.run.stages && i < s.run.n_stages; i++)
    res.tasks += s.run.stages[i].tasks;
  if (!rc && result)
    ember__struct_out(result, &res, sizeof res, EMBER__TRAIN_RESULT_V0);
  free(order);
  free(exec_ns);
  ember__train_samples_free(&train);
  ember__train_samples_free(&test);
  setup_free(&s);
  return rc;
}
