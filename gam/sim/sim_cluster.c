/*
 * sim_cluster.c - one policy on one mix, on a virtual clock.
 *
 * Three kinds of event:
 *   arrival    an app becomes pending, asking for `wanted` containers;
 *   heartbeat  node i reports every heartbeat_ns, the nodes staggered
 *              evenly over the period; each heartbeat is one scheduling
 *              opportunity: the pending apps, in arrival order, go to
 *              gam_policy_offer() (the GAM's real policy code), and every
 *              app granted a lease gets a container on that node;
 *   fpga       node i's FPGA ends a reprogram or a task.
 *
 * An app's tasks form one pool; each of its containers keeps `inflight`
 * tasks queued at its node's NAM (Spark-style: a free executor core takes
 * the next task), so a single container keeps an FPGA busy. An app ends
 * when its last task does; its leases end with it. A node's FPGA runs one
 * task at a time, taken from its NAM's queues by the NAM's sticky rule
 * (nam/engine/dispatch.c): the oldest task, except that the loaded
 * bitstream keeps the FPGA while it has tasks until another label's oldest
 * task has waited reprogram_bound since it was queued or since the last
 * switch, whichever is later. Loading another bitstream (or the first)
 * costs a seeded draw in [reprogram_min, reprogram_max].
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"
#include "sim_events.h"
#include "sim_rng.h"

enum { EV_ARRIVE, EV_HEARTBEAT, EV_FPGA };
enum { FPGA_IDLE, FPGA_REPROGRAM, FPGA_RUN };

typedef struct task {
  size_t container;
  uint64_t queued;
  uint64_t seq;          /* submission order: ties at one time */
} task;

/* A growable ring of tasks: one NAM task queue. */
typedef struct fifo {
  task *v;
  size_t head, n, cap;
} fifo;

typedef struct node {
  char id[16];
  int loaded;            /* label, -1 before the first load */
  uint64_t sticky_since; /* when the loaded label last took the FPGA */
  int state;             /* FPGA_* */
  task current;
  int current_label;
  fifo q[SIM_LABELS];
  gam_label_count counts[SIM_LABELS]; /* leases by label, for the policy */
} node;

typedef struct container {
  size_t app, node;
  unsigned inflight;
} container;

typedef struct app {
  const sim_app_spec *spec;
  unsigned pool;         /* tasks not handed to a container yet */
  unsigned done;
  unsigned wanted;       /* containers still to place */
  unsigned skipped;
  bool arrived, finished;
  size_t *held;          /* node indices it holds leases on */
  size_t *containers;    /* its containers, parallel to held */
  size_t n_held;
  uint64_t first_lease_at;
} app;

typedef struct cluster {
  const sim_model *m;
  const sim_mix *mix;
  gam_policy_params params;
  gam_static_rule *rules;
  node *nodes;
  app *apps;
  container *containers;
  size_t n_containers;
  sim_events ev;
  uint64_t rng;
  uint64_t now;
  uint64_t task_seq;
  size_t finished;
  sim_result res;
  /* scratch for the policy calls */
  gam_sched_node *sched_nodes;
  gam_sched_app *sched_apps;
  size_t *pending, *granted;
  unsigned *skipped;
} cluster;

static const char *const both_labels[SIM_LABELS] = {"lr", "km"};

static int fifo_push(fifo *f, task t) {
  if (f->n == f->cap) {
    size_t cap = f->cap ? f->cap * 2 : 16;
    task *v = malloc(cap * sizeof *v);
    if (!v) return -1;
    for (size_t i = 0; i < f->n; i++) v[i] = f->v[(f->head + i) % f->cap];
    free(f->v);
    f->v = v;
    f->head = 0;
    f->cap = cap;
  }
  f->v[(f->head + f->n++) % f->cap] = t;
  return 0;
}

static const task *fifo_front(const fifo *f) {
  return f->n ? &f->v[f->head] : NULL;
}

static task fifo_pop(fifo *f) {
  task t = f->v[f->head];
  f->head = (f->head + 1) % f->cap;
  f->n--;
  return t;
}

static int task_earlier(const task *a, const task *b) {
  return a->queued != b->queued ? a->queued < b->queued : a->seq < b->seq;
}

/* The NAM's sticky pick (see the top of this file); -1: nothing queued. */
static int fpga_pick(cluster *c, node *nd, task *out) {
  int best = -1;
  for (int l = 0; l < SIM_LABELS; l++) {
    const task *h = fifo_front(&nd->q[l]);
    if (h && (best < 0 || task_earlier(h, fifo_front(&nd->q[best]))))
      best = l;
  }
  if (best < 0) return -1;
  if (nd->loaded >= 0 && best != nd->loaded && nd->q[nd->loaded].n) {
    const task *other = fifo_front(&nd->q[best]);
    uint64_t since = other->queued > nd->sticky_since ? other->queued
                                                      : nd->sticky_since;
    if (c->now - since < c->m->reprogram_bound_ns) best = nd->loaded;
  }
  *out = fifo_pop(&nd->q[best]);
  return best;
}

/* An idle FPGA takes its next task, reprogramming first when the task
 * needs the other bitstream. */
static int fpga_kick(cluster *c, size_t i) {
  node *nd = &c->nodes[i];
  if (nd->state != FPGA_IDLE) return 0;
  int label = fpga_pick(c, nd, &nd->current);
  if (label < 0) return 0;
  nd->current_label = label;
  if (label != nd->loaded) {
    uint64_t r = sim_rng_between(&c->rng, c->m->reprogram_min_ns,
                                 c->m->reprogram_max_ns);
    nd->loaded = label;
    nd->sticky_since = c->now;
    nd->state = FPGA_REPROGRAM;
    c->res.reprograms++;
    c->res.reprogram_ns += r;
    return sim_events_push(&c->ev, c->now + r, EV_FPGA, i);
  }
  nd->state = FPGA_RUN;
  const app *a = &c->apps[c->containers[nd->current.container].app];
  return sim_events_push(&c->ev, c->now + a->spec->task_ns, EV_FPGA, i);
}

/* A container tops up its tasks at its node from the app's pool. */
static int container_fill(cluster *c, size_t ci) {
  container *ct = &c->containers[ci];
  app *a = &c->apps[ct->app];
  node *nd = &c->nodes[ct->node];
  while (ct->inflight < c->m->inflight && a->pool > 0) {
    task t = {.container = ci, .queued = c->now, .seq = c->task_seq++};
    if (fifo_push(&nd->q[a->spec->label], t) < 0) return -1;
    a->pool--;
    ct->inflight++;
  }
  return fpga_kick(c, ct->node);
}

static void app_finish(cluster *c, app *a) {
  for (size_t k = 0; k < a->n_held; k++)
    c->nodes[a->held[k]].counts[a->spec->label].leases--;
  a->n_held = 0;
  a->wanted = 0;
  a->finished = true;
  c->finished++;
  c->res.finished++;
  c->res.makespan_ns = c->now;
}

static int on_fpga(cluster *c, size_t i) {
  node *nd = &c->nodes[i];
  if (nd->state == FPGA_REPROGRAM) { /* loaded: now the task */
    nd->state = FPGA_RUN;
    const app *a = &c->apps[c->containers[nd->current.container].app];
    return sim_events_push(&c->ev, c->now + a->spec->task_ns, EV_FPGA, i);
  }
  container *ct = &c->containers[nd->current.container];
  app *a = &c->apps[ct->app];
  nd->state = FPGA_IDLE;
  c->res.busy_ns += a->spec->task_ns;
  ct->inflight--;
  a->done++;
  if (a->done == a->spec->tasks) app_finish(c, a);
  else if (container_fill(c, nd->current.container) < 0) return -1;
  return fpga_kick(c, i);
}

/* A heartbeat of node i: one scheduling opportunity. */
static int on_heartbeat(cluster *c, size_t i) {
  const sim_model *m = c->m;
  size_t n_pending = 0;
  for (size_t k = 0; k < c->mix->n_apps; k++) {
    app *a = &c->apps[k];
    if (!a->arrived) break; /* apps are in arrival order */
    if (a->finished || a->wanted == 0) continue;
    c->pending[n_pending] = k;
    c->sched_apps[n_pending] = (gam_sched_app){
        .id = k, .label = sim_label_name(a->spec->label),
        .wanted = a->wanted, .skipped = a->skipped,
        .nodes_held = a->held, .n_nodes_held = a->n_held};
    n_pending++;
  }
  if (n_pending > 0) {
    for (size_t k = 0; k < m->nodes; k++)
      c->sched_nodes[k] = (gam_sched_node){
          .id = c->nodes[k].id, .labels = both_labels,
          .n_labels = SIM_LABELS, .in_use = c->nodes[k].counts,
          .n_in_use = SIM_LABELS, .slots = m->slots, .available = true};
    size_t g = gam_policy_offer(&c->params, c->sched_nodes, m->nodes, i,
                                c->sched_apps, n_pending, c->granted,
                                n_pending, c->skipped);
    for (size_t k = 0; k < n_pending; k++)
      c->apps[c->pending[k]].skipped = c->skipped[k];
    for (size_t k = 0; k < g; k++) {
      app *a = &c->apps[c->pending[c->granted[k]]];
      size_t ci = c->n_containers++;
      c->containers[ci] = (container){.app = (size_t)(a - c->apps), .node = i};
      if (a->n_held == 0) a->first_lease_at = c->now; /* its first */
      a->held[a->n_held] = i;
      a->containers[a->n_held++] = ci;
      a->wanted--;
      c->nodes[i].counts[a->spec->label].leases++;
      if (container_fill(c, ci) < 0) return -1;
    }
  }
  return sim_events_push(&c->ev, c->now + m->heartbeat_ns, EV_HEARTBEAT, i);
}

/* static: Blaze's fixed partition, half the nodes per label (labels by
 * name, nodes by id: the split policy.c makes when both are pending). */
static int static_rules(cluster *c) {
  size_t n = c->m->nodes;
  c->rules = calloc(n, sizeof *c->rules);
  if (!c->rules) return -1;
  const char *sorted[SIM_LABELS] = {"km", "lr"};
  for (size_t r = 0; r < n; r++)
    c->rules[r] = (gam_static_rule){.label = sorted[r * SIM_LABELS / n],
                                    .node = c->nodes[r].id};
  c->params.rules = c->rules;
  c->params.n_rules = n;
  return 0;
}

static int cluster_init(cluster *c, const sim_model *m, gam_policy_kind kind,
                        const sim_mix *mix) {
  size_t n = m->nodes, na = mix->n_apps;
  *c = (cluster){.m = m, .mix = mix};
  c->params = (gam_policy_params){.kind = kind,
                                  .delay_max_skips = m->delay_max_skips};
  /* the same reprogram draws for every policy on this mix */
  c->rng = m->seed ^ (0x5eed0000ull + mix->index);
  c->nodes = calloc(n, sizeof *c->nodes);
  c->apps = calloc(na ? na : 1, sizeof *c->apps);
  c->containers = calloc(na * n + 1, sizeof *c->containers);
  c->sched_nodes = calloc(n, sizeof *c->sched_nodes);
  c->sched_apps = calloc(na + 1, sizeof *c->sched_apps);
  c->pending = calloc(na + 1, sizeof *c->pending);
  c->granted = calloc(na + 1, sizeof *c->granted);
  c->skipped = calloc(na + 1, sizeof *c->skipped);
  if (!c->nodes || !c->apps || !c->containers || !c->sched_nodes ||
      !c->sched_apps || !c->pending || !c->granted || !c->skipped)
    return -1;
  for (size_t i = 0; i < n; i++) {
    node *nd = &c->nodes[i];
    snprintf(nd->id, sizeof nd->id, "node%03zu", i);
    nd->loaded = -1;
    for (int l = 0; l < SIM_LABELS; l++)
      nd->counts[l].label = sim_label_name(l);
  }
  for (size_t k = 0; k < na; k++) {
    app *a = &c->apps[k];
    a->spec = &mix->apps[k];
    a->pool = a->spec->tasks;
    a->wanted = a->spec->wanted;
    a->held = calloc(n, sizeof *a->held);
    a->containers = calloc(n, sizeof *a->containers);
    if (!a->held || !a->containers) return -1;
  }
  if (kind == GAM_POLICY_STATIC && static_rules(c) < 0) return -1;
  for (size_t k = 0; k < na; k++)
    if (sim_events_push(&c->ev, mix->apps[k].arrival_ns, EV_ARRIVE, k) < 0)
      return -1;
  for (size_t i = 0; i < n; i++) /* staggered over one period */
    if (sim_events_push(&c->ev, m->heartbeat_ns * i / n, EV_HEARTBEAT, i) < 0)
      return -1;
  return 0;
}

static void cluster_free(cluster *c) {
  if (c->nodes)
    for (size_t i = 0; i < c->m->nodes; i++)
      for (int l = 0; l < SIM_LABELS; l++) free(c->nodes[i].q[l].v);
  if (c->apps)
    for (size_t k = 0; k < c->mix->n_apps; k++) {
      free(c->apps[k].held);
      free(c->apps[k].containers);
    }
  free(c->nodes);
  free(c->apps);
  free(c->containers);
  free(c->sched_nodes);
  free(c->sched_apps);
  free(c->pending);
  free(c->granted);
  free(c->skipped);
  free(c->rules);
  sim_events_free(&c->ev);
}

/* Past this a run is stuck (an app no node may take): the whole work done
 * serially, twenty times over, after the last arrival. */
static uint64_t time_limit(const sim_model *m, const sim_mix *mix) {
  uint64_t last = mix->n_apps ? mix->apps[mix->n_apps - 1].arrival_ns : 0;
  uint64_t per_app = m->heartbeat_ns + m->reprogram_max_ns;
  return last + 20 * (sim_mix_work_ns(mix) + mix->n_apps * per_app);
}

int sim_run(const sim_model *m, gam_policy_kind kind, const sim_mix *mix,
            sim_result *out) {
  cluster c;
  int rc = cluster_init(&c, m, kind, mix);
  uint64_t limit = time_limit(m, mix);
  sim_event e;
  while (rc == 0 && c.finished < mix->n_apps &&
         sim_events_pop(&c.ev, &e) == 0) {
    if (e.at > limit) {
      rc = -1;
      break;
    }
    c.now = e.at;
    switch (e.kind) {
      case EV_ARRIVE:
        c.apps[e.who].arrived = true;
        break;
      case EV_HEARTBEAT:
        rc = on_heartbeat(&c, e.who);
        break;
      case EV_FPGA:
        rc = on_fpga(&c, e.who);
        break;
    }
  }
  if (rc == 0 && c.finished < mix->n_apps) rc = -1;
  double wait = 0;
  for (size_t k = 0; k < mix->n_apps; k++)
    if (c.apps && c.apps[k].finished)
      wait += (double)(c.apps[k].first_lease_at - mix->apps[k].arrival_ns);
  c.res.mean_wait_s = c.res.finished ? wait / c.res.finished / 1e9 : 0;
  *out = c.res;
  cluster_free(&c);
  return rc;
}
