/*
 * cnn_partition.c - a CNN's training split into balanced stages (FPDeep's
 * coarse and fine phases, then pairwise balancing), and the plan printed.
 *
 * Positions: the network's pieces in order, layer by layer and channel by
 * channel, numbered 0..units; a cut is a position, stage i holds the
 * pieces [cut[i], cut[i+1]). Work at a position (the work of the pieces
 * before it) is computed from per-layer sums, never from a table of every
 * piece: a connected layer may have 2^26 input channels.
 */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_partition.h"
#include "cnn_text.h"
#include "errbuf.h"

/* Pairwise balancing stops after this many sweeps even if cuts still
 * move (each sweep never raises the bottleneck). */
#define BALANCE_MAX_SWEEPS 1000

typedef struct layer_cut {
  cnn_split split;   /* how the layer may be cut */
  uint32_t units;    /* its pieces: channels, or 1 for WHOLE */
  uint64_t macs;     /* FP + EB + PG */
  uint64_t elem;
  uint64_t params;   /* weights + biases: what its UPDATE sweeps */
} layer_cut;

struct cnn_plan {
  size_t nlayers;
  layer_cut *cuts;                 /* per layer */
  uint64_t *first;                 /* nlayers + 1: first position of each */
  uint64_t *macs_before;           /* nlayers + 1 */
  uint64_t *elem_before;           /* nlayers + 1 */
  uint64_t *params_before;         /* nlayers + 1 */
  uint32_t batch;                  /* samples per update; 0: no updates */
  char **labels;                   /* per layer: conv1, pool1, ... */
  cnn_stage *stages;
  char **names;                    /* per stage: the platform's label */
  cnn_plan_totals totals;
};

const char *cnn_split_name(cnn_split split) {
  switch (split) {
  case CNN_SPLIT_WHOLE: return "whole";
  case CNN_SPLIT_ICP: return "ICP";
  case CNN_SPLIT_OCP: return "OCP";
  }
  return "?";
}

/* ---- work at a position ------------------------------------------------- */

/* The part of total spread evenly over units that the first c of them
 * hold: each holds total / units, the first total % units one more. */
static uint64_t spread(uint64_t total, uint32_t units, uint64_t c) {
  uint64_t q = total / units, r = total % units;
  return c * q + (c < r ? c : r);
}

/* The layer holding position pos (< units), by binary search. */
static size_t layer_at(const cnn_plan *p, uint64_t pos) {
  size_t lo = 0, hi = p->nlayers; /* first[lo] <= pos < first[hi] */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (p->first[mid] <= pos)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/* Multiply-adds, element operations and parameters of the pieces before
 * pos. */
typedef struct work {
  uint64_t macs, elem, params;
} work;

static work work_before(const cnn_plan *p, uint64_t pos) {
  size_t l;
  uint64_t c;
  const layer_cut *lc;
  if (pos >= p->first[p->nlayers])
    return (work){p->macs_before[p->nlayers], p->elem_before[p->nlayers],
                  p->params_before[p->nlayers]};
  l = layer_at(p, pos);
  lc = &p->cuts[l];
  c = pos - p->first[l];
  /* ICP: the activation waits for the complete sums, at the last channel,
   * which is never before pos when c < units; the parameters spread with
   * the channels either way (a slice updates its own) */
  return (work){
      p->macs_before[l] + spread(lc->macs, lc->units, c),
      p->elem_before[l] +
          (lc->split == CNN_SPLIT_OCP ? spread(lc->elem, lc->units, c) : 0),
      p->params_before[l] + spread(lc->params, lc->units, c)};
}

/* Training operations per sample (cnn_partition.h): each update's 5 per
 * parameter (cnn_task's UPDATE) shared by the batch's samples. */
static double ops_of(const cnn_plan *p, work w) {
  double upd = p->batch ? 5.0 * (double)w.params / p->batch : 0;
  return 2.0 * (double)w.macs + 2.0 * (double)w.elem + upd;
}

static double ops_before(const cnn_plan *p, uint64_t pos) {
  return ops_of(p, work_before(p, pos));
}

/* The position in [lo, hi] whose work before it is closest to target (the
 * lower one on a tie). */
static uint64_t closest(const cnn_plan *p, uint64_t lo, uint64_t hi,
                        double target) {
  uint64_t a = lo, b = hi; /* first position in [lo, hi] with work >= target */
  while (a < b) {
    uint64_t mid = a + (b - a) / 2;
    if (ops_before(p, mid) >= target)
      b = mid;
    else
      a = mid + 1;
  }
  if (a > lo && target - ops_before(p, a - 1) <= ops_before(p, a) - target)
    return a - 1;
  return a;
}

/* ---- the split -------------------------------------------------------- */

/* Per layer: how it is cut (the default rule, or choice[l] when it is not
 * WHOLE), its pieces and work; positions and work before each layer. */
static void layout(cnn_plan *p, const cnn_layer *layers, size_t nstages,
                   unsigned flags, const cnn_split *choice) {
  p->first[0] = p->macs_before[0] = p->elem_before[0] = 0;
  p->params_before[0] = 0;
  for (size_t l = 0; l < p->nlayers; l++) {
    const cnn_layer *ly = &layers[l];
    layer_cut *lc = &p->cuts[l];
    /* a batch-normalized convolution stays whole: its normalisation needs
     * every output's whole sum (cnn_task.c refuses slices of it) */
    bool splittable = (ly->kind == CNN_LAYER_CONV ||
                       ly->kind == CNN_LAYER_CONNECTED) && !ly->batch_norm;
    lc->macs = ly->fp_macs + ly->eb_macs + ly->pg_macs;
    lc->elem = ly->elem_ops;
    lc->params = cnn_layer_params(ly);
    lc->split = CNN_SPLIT_WHOLE;
    lc->units = 1;
    if (splittable && !(flags & CNN_PLAN_LAYERS_ONLY)) {
      /* a connected layer's input channels are its flattened inputs
       * (<= CNN_MAX_ACTIVATIONS, 2^26) */
      uint64_t ic = ly->kind == CNN_LAYER_CONV
                        ? ly->in.c
                        : (uint64_t)ly->in.h * ly->in.w * ly->in.c;
      uint64_t oc = ly->out.c;
      cnn_split want = choice[l];
      if (want == CNN_SPLIT_WHOLE)
        want = ic < nstages && oc > ic ? CNN_SPLIT_OCP : CNN_SPLIT_ICP;
      if (want == CNN_SPLIT_OCP) {
        lc->split = CNN_SPLIT_OCP;
        lc->units = (uint32_t)oc;
      } else {
        lc->split = CNN_SPLIT_ICP;
        lc->units = (uint32_t)ic;
      }
    }
    p->first[l + 1] = p->first[l] + lc->units;
    p->macs_before[l + 1] = p->macs_before[l] + lc->macs;
    p->elem_before[l + 1] = p->elem_before[l] + lc->elem;
    p->params_before[l + 1] = p->params_before[l] + lc->params;
  }
}

/* The time of the stage [a, b) on a platform of speed. */
static double stage_time(const cnn_plan *p, uint64_t a, uint64_t b,
                         double speed) {
  return (ops_before(p, b) - ops_before(p, a)) / speed;
}

/* Place cut[i] (between stages i - 1 and i) in (cut[i-1], cut[i+1]) where
 * the larger of the two stages' times is smallest; keeps it unless a move
 * is strictly better. Returns whether it moved. */
static bool balance_pair(const cnn_plan *p, uint64_t *cut, size_t i,
                         const cnn_platform *pf) {
  uint64_t lo = cut[i - 1] + 1, hi = cut[i + 1] - 1, a = lo, b = hi, best;
  double sa = pf[i - 1].speed, sb = pf[i].speed, now, t;
  /* first c with time(left) >= time(right): left grows with c, right
   * shrinks */
  while (a < b) {
    uint64_t mid = a + (b - a) / 2;
    if (stage_time(p, cut[i - 1], mid, sa) >=
        stage_time(p, mid, cut[i + 1], sb))
      b = mid;
    else
      a = mid + 1;
  }
  best = a;
  t = fmax(stage_time(p, cut[i - 1], a, sa), stage_time(p, a, cut[i + 1], sb));
  if (a > lo) {
    double t2 = fmax(stage_time(p, cut[i - 1], a - 1, sa),
                     stage_time(p, a - 1, cut[i + 1], sb));
    if (t2 < t) {
      best = a - 1;
      t = t2;
    }
  }
  now = fmax(stage_time(p, cut[i - 1], cut[i], sa),
             stage_time(p, cut[i], cut[i + 1], sb));
  if (best == cut[i] || !(t < now)) return false;
  cut[i] = best;
  return true;
}

/* Pairwise balancing, sweeping forward and back until no cut moves. */
static void balance(const cnn_plan *p, const cnn_platform *pf, size_t n,
                    uint64_t *cut) {
  for (int sweep = 0; sweep < BALANCE_MAX_SWEEPS; sweep++) {
    bool moved = false;
    for (size_t k = 1; k < n; k++)
      moved |= balance_pair(p, cut, sweep % 2 ? n - k : k, pf);
    if (!moved) break;
  }
}

/* The largest stage time of the cuts. */
static double bottleneck(const cnn_plan *p, const cnn_platform *pf,
                         size_t n, const uint64_t *cut) {
  double worst = 0;
  for (size_t i = 0; i < n; i++)
    worst = fmax(worst, stage_time(p, cut[i], cut[i + 1], pf[i].speed));
  return worst;
}

/* FPDeep's phases: cut[0..n], cut[0] = 0, cut[n] = units, strictly
 * increasing. */
static void fpdeep_cuts(const cnn_plan *p, const cnn_platform *pf, size_t n,
                        uint64_t *cut) {
  uint64_t units = p->first[p->nlayers];
  double total = ops_before(p, units), speeds = 0, before = 0;
  for (size_t i = 0; i < n; i++) speeds += pf[i].speed;
  cut[0] = 0;
  cut[n] = units;
  for (size_t i = 1; i < n; i++) {
    double target;
    size_t best = 0;
    before += pf[i - 1].speed;
    target = total * (before / speeds);
    /* coarse: the layer boundary closest to the cumulative target */
    for (size_t l = 1; l <= p->nlayers; l++)
      if (fabs(ops_before(p, p->first[l]) - target) <
          fabs(ops_before(p, p->first[best]) - target))
        best = l;
    /* fine: the channel closest to it in the layers on either side of
     * that boundary (a WHOLE layer has no position inside it) */
    cut[i] = closest(p, p->first[best ? best - 1 : 0],
                     p->first[best < p->nlayers ? best + 1 : best], target);
  }
  /* no empty stage: push cuts apart, forward then back (units >= n) */
  for (size_t i = 1; i < n; i++)
    if (cut[i] <= cut[i - 1]) cut[i] = cut[i - 1] + 1;
  for (size_t i = n - 1; i >= 1; i--)
    if (cut[i] >= cut[i + 1]) cut[i] = cut[i + 1] - 1;
  balance(p, pf, n, cut);
}

/* Whether the stages can hold every piece with no stage's time over t,
 * each taking the most pieces it can within t and leaving one for each
 * stage after it; the cuts in cut. */
static bool fits(const cnn_plan *p, const cnn_platform *pf, size_t n,
                 double t, uint64_t *cut) {
  uint64_t units = p->first[p->nlayers];
  cut[0] = 0;
  cut[n] = units;
  for (size_t i = 0; i + 1 < n; i++) {
    uint64_t a = cut[i] + 1, b = units - (n - 1 - i);
    if (stage_time(p, cut[i], a, pf[i].speed) > t) return false;
    while (a < b) { /* the last c in [a, b] within t */
      uint64_t mid = a + (b - a + 1) / 2;
      if (stage_time(p, cut[i], mid, pf[i].speed) <= t)
        a = mid;
      else
        b = mid - 1;
    }
    cut[i + 1] = a;
  }
  return stage_time(p, cut[n - 1], units, pf[n - 1].speed) <= t;
}

/* The plan's cuts: FPDeep's, unless a search for the smallest bottleneck
 * (bisection over the time with fits(), then balanced pairwise) finds a
 * strictly smaller one. scratch holds n + 1 cuts. */
static void place_cuts(const cnn_plan *p, const cnn_platform *pf, size_t n,
                       uint64_t *cut, uint64_t *scratch) {
  double lo = 0, hi;
  fpdeep_cuts(p, pf, n, cut);
  hi = bottleneck(p, pf, n, cut);
  if (n < 2 || !fits(p, pf, n, hi, scratch)) return;
  for (int k = 0; k < 200 && hi - lo > hi * 1e-12; k++) {
    double mid = lo + (hi - lo) / 2;
    if (fits(p, pf, n, mid, scratch))
      hi = mid;
    else
      lo = mid;
  }
  fits(p, pf, n, hi, scratch);
  balance(p, pf, n, scratch);
  if (bottleneck(p, pf, n, scratch) < bottleneck(p, pf, n, cut))
    memcpy(cut, scratch, (n + 1) * sizeof *cut);
}

/* The point of position pos as a stage's begin (pos < units), or as the
 * end after the pieces before pos (pos > 0). */
static cnn_point point_begin(const cnn_plan *p, uint64_t pos) {
  size_t l = layer_at(p, pos);
  return (cnn_point){(uint32_t)l, (uint32_t)(pos - p->first[l])};
}

static cnn_point point_end(const cnn_plan *p, uint64_t pos) {
  size_t l = layer_at(p, pos - 1);
  return (cnn_point){(uint32_t)l, (uint32_t)(pos - p->first[l])};
}

static void fill_stages(cnn_plan *p, const cnn_platform *pf, size_t n,
                        const uint64_t *cut) {
  cnn_plan_totals *t = &p->totals;
  double speeds = 0;
  t->stages = n;
  t->macs = p->macs_before[p->nlayers];
  t->elem_ops = p->elem_before[p->nlayers];
  t->params = p->params_before[p->nlayers];
  t->batch = p->batch;
  t->ops = ops_before(p, p->first[p->nlayers]);
  t->bottleneck = 0;
  t->time = 0;
  for (size_t i = 0; i < n; i++) {
    cnn_stage *s = &p->stages[i];
    work w0 = work_before(p, cut[i]), w1 = work_before(p, cut[i + 1]);
    const layer_cut *first, *last;
    s->platform = i;
    s->name = p->names[i];
    s->begin = point_begin(p, cut[i]);
    s->end = point_end(p, cut[i + 1]);
    first = &p->cuts[s->begin.layer];
    last = &p->cuts[s->end.layer];
    s->begin_split = s->begin.channel > 0 ||
                             (s->begin.layer == s->end.layer &&
                              s->end.channel < last->units)
                         ? first->split
                         : CNN_SPLIT_WHOLE;
    s->end_split = s->end.channel < last->units ||
                           (s->begin.layer == s->end.layer &&
                            s->begin.channel > 0)
                       ? last->split
                       : CNN_SPLIT_WHOLE;
    work w = {w1.macs - w0.macs, w1.elem - w0.elem, w1.params - w0.params};
    s->macs = w.macs;
    s->elem_ops = w.elem;
    s->params = w.params;
    s->ops = ops_of(p, w);
    s->share = t->ops > 0 ? s->ops / t->ops : 1.0 / (double)n;
    s->time = s->ops / pf[i].speed;
    speeds += pf[i].speed;
    if (s->time > t->time) {
      t->time = s->time;
      t->bottleneck = i;
    }
  }
  t->ideal_time = t->ops / speeds;
  t->utilisation = t->time > 0 ? t->ideal_time / t->time : 1.0;
  for (size_t i = 0; i < n; i++) {
    cnn_stage *s = &p->stages[i];
    s->idle = t->time > 0 ? 1.0 - s->time / t->time : 0.0;
  }
}

/* A copy of s; NULL when out of memory. */
static char *copy_str(const char *s) {
  size_t n = strlen(s) + 1;
  char *c = malloc(n);
  if (c) memcpy(c, s, n);
  return c;
}

/* conv1, pool1, fc1, softmax: by kind, numbered from 1 in order. */
static int label_layers(cnn_plan *p, const cnn_layer *layers) {
  unsigned conv = 0, pool = 0, fc = 0, avg = 0, drop = 0;
  for (size_t l = 0; l < p->nlayers; l++) {
    char b[32];
    switch (layers[l].kind) {
    case CNN_LAYER_CONV: snprintf(b, sizeof b, "conv%u", ++conv); break;
    case CNN_LAYER_MAXPOOL: snprintf(b, sizeof b, "pool%u", ++pool); break;
    case CNN_LAYER_CONNECTED: snprintf(b, sizeof b, "fc%u", ++fc); break;
    case CNN_LAYER_SOFTMAX: snprintf(b, sizeof b, "softmax"); break;
    case CNN_LAYER_AVGPOOL: snprintf(b, sizeof b, "avgpool%u", ++avg); break;
    case CNN_LAYER_DROPOUT: snprintf(b, sizeof b, "dropout%u", ++drop); break;
    default: snprintf(b, sizeof b, "layer%zu", l); break;
    }
    if (!(p->labels[l] = copy_str(b))) return EMBER_ENOMEM;
  }
  return 0;
}

void cnn_plan_destroy(cnn_plan *plan) {
  if (!plan) return;
  if (plan->labels)
    for (size_t l = 0; l < plan->nlayers; l++) free(plan->labels[l]);
  if (plan->names)
    for (size_t i = 0; i < plan->totals.stages; i++) free(plan->names[i]);
  free(plan->labels);
  free(plan->names);
  free(plan->cuts);
  free(plan->first);
  free(plan->macs_before);
  free(plan->elem_before);
  free(plan->params_before);
  free(plan->stages);
  free(plan);
}

static int check_args(const cnn_net *net, const cnn_platform *pf, size_t n,
                      unsigned flags, char *err, size_t err_len) {
  if (!net || (!pf && n) ||
      (flags & ~(CNN_PLAN_LAYERS_ONLY | CNN_PLAN_FIXED_SPLITS))) {
    return errbuf_printf(err, err_len, EMBER_EINVAL,
                         "invalid arguments (net %p, platforms %p, flags %#x)",
                         (const void *)net, (const void *)pf, flags);
  }
  if (n < 1) {
    return errbuf_printf(err, err_len, EMBER_EPARAM,
                         "no platforms: a plan needs at least 1 stage");
  }
  if (n > CNN_PLAN_MAX_STAGES) {
    return errbuf_printf(err, err_len, EMBER_ETOOBIG,
                         "%zu stages: over the limit of %d", n,
                         CNN_PLAN_MAX_STAGES);
  }
  for (size_t i = 0; i < n; i++)
    if (!isfinite(pf[i].speed) || !(pf[i].speed > 0)) {
      return errbuf_printf(
          err, err_len, EMBER_EPARAM,
          "platform %zu (%s): speed %g: must be a finite number > 0", i,
          pf[i].name && *pf[i].name ? pf[i].name : "unnamed", pf[i].speed);
    }
  return 0;
}

/* The cuts of the plan laid out with choice (layout()) into cut, scratch
 * its room (n + 1 each); its bottleneck, or -1 when the network has fewer
 * pieces than n. */
static double cuts_for(cnn_plan *p, const cnn_layer *layers,
                       const cnn_platform *pf, size_t n, unsigned flags,
                       const cnn_split *choice, uint64_t *cut,
                       uint64_t *scratch) {
  layout(p, layers, n, flags, choice);
  if (n > p->first[p->nlayers]) return -1;
  place_cuts(p, pf, n, cut, scratch);
  return bottleneck(p, pf, n, cut);
}

/* Each convolutional or connected layer in turn cut the other way (ICP
 * or OCP), kept when the plan's bottleneck gets strictly smaller: the
 * finer of a layer's two splits can balance stages its default cannot
 * (LeNet's conv2 has 20 input but 50 output channels). choice holds the
 * splits kept; cut the best cuts, laid out. */
static void search_splits(cnn_plan *p, const cnn_layer *layers,
                          const cnn_platform *pf, size_t n, unsigned flags,
                          cnn_split *choice, uint64_t *cut,
                          uint64_t *scratch) {
  uint64_t *trial = scratch + n + 1;
  double best = cuts_for(p, layers, pf, n, flags, choice, cut, scratch);
  for (size_t l = 0; l < p->nlayers && n > 1; l++) {
    if (p->cuts[l].split == CNN_SPLIT_WHOLE) continue;
    cnn_split was = choice[l];
    choice[l] = p->cuts[l].split == CNN_SPLIT_ICP ? CNN_SPLIT_OCP
                                                  : CNN_SPLIT_ICP;
    double t = cuts_for(p, layers, pf, n, flags, choice, trial, scratch);
    if (t >= 0 && t < best * (1 - 1e-9)) {
      best = t;
      memcpy(cut, trial, (n + 1) * sizeof *cut);
    } else { /* back to the kept splits' layout */
      choice[l] = was;
      layout(p, layers, n, flags, choice);
    }
  }
}

int cnn_plan_create(const cnn_net *net, const cnn_platform *platforms,
                    size_t n, uint32_t batch, unsigned flags, cnn_plan **out,
                    char *err, size_t err_len) {
  cnn_plan *p;
  const cnn_layer *layers;
  uint64_t *cut = NULL;
  cnn_split *choice = NULL;
  size_t nl;
  int rc;
  if (err && err_len) err[0] = '\0';
  if (!out) {
    return errbuf_printf(err, err_len, EMBER_EINVAL,
                         "invalid arguments (out NULL)");
  }
  *out = NULL;
  if ((rc = check_args(net, platforms, n, flags, err, err_len))) return rc;
  layers = cnn_net_layers(net, &nl);
  if (!(p = calloc(1, sizeof *p))) goto nomem;
  p->nlayers = nl;
  p->batch = batch;
  p->cuts = calloc(nl, sizeof *p->cuts);
  p->first = calloc(nl + 1, sizeof *p->first);
  p->macs_before = calloc(nl + 1, sizeof *p->macs_before);
  p->elem_before = calloc(nl + 1, sizeof *p->elem_before);
  p->params_before = calloc(nl + 1, sizeof *p->params_before);
  p->labels = calloc(nl, sizeof *p->labels);
  if (!p->cuts || !p->first || !p->macs_before || !p->elem_before ||
      !p->params_before || !p->labels)
    goto nomem;
  if (!(choice = calloc(nl ? nl : 1, sizeof *choice))) goto nomem;
  layout(p, layers, n, flags, choice);
  if (n > p->first[nl]) {
    errbuf_printf(err, err_len, EMBER_EPARAM,
                  "%zu stages but the network has only %llu pieces to split "
                  "(%zu layers%s): more stages than work to split",
                  n, (unsigned long long)p->first[nl], nl,
                  flags & CNN_PLAN_LAYERS_ONLY ? ", channel splits forbidden"
                                               : " and their channels");
    free(choice);
    cnn_plan_destroy(p);
    return EMBER_EPARAM;
  }
  if ((rc = label_layers(p, layers))) goto nomem;
  p->stages = calloc(n, sizeof *p->stages);
  p->names = calloc(n, sizeof *p->names);
  cut = calloc(3 * (n + 1), sizeof *cut);
  if (!p->stages || !p->names || !cut) goto nomem;
  p->totals.stages = n;
  for (size_t i = 0; i < n; i++) {
    const char *name = platforms[i].name;
    char b[32];
    if (!name || !*name) {
      snprintf(b, sizeof b, "p%zu", i);
      name = b;
    }
    if (!(p->names[i] = copy_str(name))) goto nomem;
  }
  if (flags & (CNN_PLAN_LAYERS_ONLY | CNN_PLAN_FIXED_SPLITS))
    place_cuts(p, platforms, n, cut, cut + n + 1);
  else
    search_splits(p, layers, platforms, n, flags, choice, cut, cut + n + 1);
  fill_stages(p, platforms, n, cut);
  free(cut);
  free(choice);
  *out = p;
  return 0;
nomem:
  free(cut);
  free(choice);
  cnn_plan_destroy(p);
  return errbuf_printf(err, err_len, EMBER_ENOMEM, "out of memory");
}

const cnn_stage *cnn_plan_stages(const cnn_plan *plan, size_t *count) {
  if (count) *count = plan->totals.stages;
  return plan->stages;
}

const cnn_plan_totals *cnn_plan_totals_get(const cnn_plan *plan) {
  return &plan->totals;
}

cnn_split cnn_plan_layer_split(const cnn_plan *plan, size_t layer,
                               uint32_t *channels) {
  if (layer >= plan->nlayers) {
    if (channels) *channels = 0;
    return CNN_SPLIT_WHOLE;
  }
  if (channels) *channels = plan->cuts[layer].units;
  return plan->cuts[layer].split;
}

/* ---- printing ------------------------------------------------------------ */

/* "conv2" or "conv2 in-ch [0:12)" */
static void piece(const cnn_plan *p, uint32_t layer, cnn_split split,
                  uint32_t c0, uint32_t c1, char *b, size_t n) {
  if (split == CNN_SPLIT_WHOLE)
    snprintf(b, n, "%s", p->labels[layer]);
  else
    snprintf(b, n, "%s %s [%u:%u)", p->labels[layer],
             split == CNN_SPLIT_ICP ? "in-ch" : "out-ch", c0, c1);
}

static void stage_layers(const cnn_plan *p, const cnn_stage *s, char *b,
                         size_t n) {
  char first[96], last[96];
  if (s->begin.layer == s->end.layer) {
    piece(p, s->begin.layer, s->begin_split, s->begin.channel,
          s->end.channel, b, n);
    return;
  }
  piece(p, s->begin.layer, s->begin_split, s->begin.channel,
        p->cuts[s->begin.layer].units, first, sizeof first);
  piece(p, s->end.layer, s->end_split, 0, s->end.channel, last, sizeof last);
  snprintf(b, n, "%s .. %s", first, last);
}

size_t cnn_plan_format(const cnn_plan *plan, char *buf, size_t len) {
  cnn_text o = {buf, len, 0};
  const cnn_plan_totals *t = &plan->totals;
  char layers[200];
  if (buf && len) buf[0] = '\0';
  cnn_text_put(&o, "%5s %-12s %-40s %14s %7s %11s %6s\n", "stage", "platform",
      "layers and channels", "MACs", "share", "s/sample", "idle");
  for (size_t i = 0; i < t->stages; i++) {
    const cnn_stage *s = &plan->stages[i];
    stage_layers(plan, s, layers, sizeof layers);
    cnn_text_put(&o, "%5zu %-12s %-40s %14llu %6.2f%% %11.4g %5.1f%%\n", i, s->name,
        layers, (unsigned long long)s->macs, 100.0 * s->share, s->time,
        100.0 * s->idle);
  }
  cnn_text_put(&o, "total: %zu stages, %llu multiply-adds and %llu element "
          "operations per sample", t->stages, (unsigned long long)t->macs,
      (unsigned long long)t->elem_ops);
  if (t->batch == 1)
    cnn_text_put(&o, ", %llu parameters updated every sample",
                 (unsigned long long)t->params);
  else if (t->batch)
    cnn_text_put(&o, ", %llu parameters updated every %u samples",
                 (unsigned long long)t->params, t->batch);
  cnn_text_put(&o, " (%.4g operations); bottleneck stage %zu (%s) at %.4g "
          "s/sample, expected utilisation %.1f%%\n", t->ops, t->bottleneck,
      plan->stages[t->bottleneck].name, t->time, 100.0 * t->utilisation);
  return o.need;
}
