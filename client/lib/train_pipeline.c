/*
 * train_pipeline.c - ember_train's pipeline: micro-batches driven through
 * the stages as FPDeep drives samples, stage i working on one while stage
 * i+1 works on an earlier one, FP towards the loss and EB/PG back.
 *
 * Each stage runs one task at a time (its state block orders them), and
 * has up to two more queued behind it on the NAM when it can, so that no
 * round trip through this thread separates them (on a device platform the
 * NAM stages the next while the one ahead runs). A stage takes, in this
 * order:
 *   UPDATE    once the last BACKWARD of a mini-batch is in (FPDeep's
 *             update at the mini-batch's end, stage by stage);
 *   BACKWARD  of its oldest kept FORWARD, once the next stage's BACKWARD
 *             of that micro-batch made the error (the last stage: at once);
 *   FORWARD   of the next micro-batch, once the previous stage's FORWARD
 *             made its input, while a slot is free to keep it; with sync,
 *             only after the stage's UPDATE of the previous mini-batch, so
 *             every stage computes what one stage would (without, a
 *             stage's FORWARDs run ahead into the next mini-batch on
 *             weights one update old: FPDeep's pipeline).
 * Micro-batch g uses slot g % slots on every stage. Activations and
 * errors are out blocks of the stage that made them; between stages on
 * different clients (NAMs) they are read back and sent on by this thread.
 *
 * What is scheduled are units (train_internal.h): a plan stage that
 * begins or ends inside a convolutional or connected layer runs an ICP
 * or OCP slice of it as a unit of its own, one task at a time per plan
 * stage still (the best op among its units: UPDATE, then BACKWARD, then
 * FORWARD); on a device, which runs tasks in the order they came, another
 * unit's task queues behind the one running too (on 4 slowed boards the
 * bottleneck board then idles under 0.5% in steady state, 2% before).
 * The units form the chain above, with these links more: every slice of a
 * layer reads the layer's input (the output of the unit before its first
 * slice); a slice after the first adds to the previous one's
 * partial sums (ICP) or output (OCP). ICP: the last slice's BACKWARD (the
 * layer's output error) makes dz, which the other slices' BACKWARDs take;
 * the unit before the first slice takes the slices' input errors as its
 * output error in pieces, one block each (cnn.proto error_channels).
 * OCP: every slice's BACKWARD takes the layer's output error; the unit
 * before takes their parts of the input error as addends (cnn.proto
 * error_addends). That unit joins or sums them on its platform: on one
 * NAM they never cross this process.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelerators/cnn/cnn.pb-c.h"
#include "clock.h"
#include "last_error.h"
#include "train_internal.h"

enum op { OP_NONE, OP_FORWARD, OP_BACKWARD, OP_UPDATE, OP_INIT, OP_GET };

/* Tasks a plan stage may have on its NAM at once: the one running and two
 * queued behind it, so that the stage does not wait a round trip through
 * this thread between them, even after a short one (an UPDATE). */
enum { DEPTH = 3 };

/* A unit's place in the pass. */
typedef struct stage_run {
  ember_task *task[DEPTH];   /* in flight, oldest first */
  enum op op[DEPTH];
  size_t g[DEPTH];           /* their micro-batches */
  size_t n_flight;
  size_t fwd_sub, fwd_done, bwd_sub, bwd_done, upd_sub, upd_done;
} stage_run;

/* A micro-batch in flight (ring entry g % ring). */
typedef struct micro {
  ember_block *x, *y;        /* stage 0's input, the last stage's labels */
  ember_block **act;         /* act[i]: unit i's output (a slice: partial
                                sums, or the last one the layer's output),
                                unit i+1's input */
  ember_block **err;         /* err[i]: unit i's input error, for i-1 (a
                                slice: its channels', a piece for the
                                unit before the layer) */
  ember_block **dz;          /* dz[i]: a last slice's dz, for the others */
  ember_block **tmp;         /* tmp[i]: unit i's copy of an input made
                                elsewhere (a layer's input, dz) */
  ember_block *probs;        /* an evaluation's last micro-batch only */
  size_t valid;              /* samples that count (a padded tail: fewer) */
} micro;

typedef struct pass {
  train_run *r;
  const train_samples *s;
  const size_t *order;
  size_t n, M;               /* samples, micro-batches */
  int train;
  size_t ring;
  micro *m;
  stage_run *st;
  float *xbuf;
  uint8_t *ybuf;
  size_t *idx;
  train_pass *out;
  int failed;                /* an error is set; drain and stop */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  unsigned completions;      /* bumped by task callbacks */
} pass;

static void on_done(ember_task *t, void *user) {
  (void)t;
  pass *p = user;
  pthread_mutex_lock(&p->mu);
  p->completions++;
  pthread_cond_signal(&p->cv);
  pthread_mutex_unlock(&p->mu);
}

static const char *op_name(enum op op) {
  static const char *const names[] = {"-", "FORWARD", "BACKWARD", "UPDATE",
                                      "INIT", "GET_PARAMS"};
  return names[op];
}

static Ember__Cnn__Op proto_op(enum op op) {
  switch (op) {
  case OP_FORWARD: return EMBER__CNN__OP__FORWARD;
  case OP_BACKWARD: return EMBER__CNN__OP__BACKWARD;
  case OP_UPDATE: return EMBER__CNN__OP__UPDATE;
  case OP_INIT: return EMBER__CNN__OP__INIT;
  case OP_GET: return EMBER__CNN__OP__GET_PARAMS;
  default: return EMBER__CNN__OP__SET_PARAMS;
  }
}

/* "layers a..b", or "layer a in-ch [c0:c1)" (out-ch) for a slice (1-based
 * layers). */
static void unit_name(const train_stage *s, char *buf, size_t len) {
  if (s->slice)
    snprintf(buf, len, "layer %u %s-ch [%u:%u)", s->first + 1,
             s->ocp ? "out" : "in", s->c0, s->c1);
  else
    snprintf(buf, len, "layers %u..%u", s->first + 1, s->end);
}

/* Whether unit i's BACKWARD takes the next layer's slices' input errors
 * as its output error: in pieces (ICP slices, cnn.proto error_channels)
 * or as addends (OCP slices, error_addends). */
static int takes_pieces(const train_run *r, size_t i) {
  return i + 1 < r->n_stages && r->stages[i + 1].slice &&
         r->stages[i + 1].base == i + 1;
}

/* Submit op (OP_NONE: SET_PARAMS) on stage i; *task gets it. g: a
 * FORWARD's micro-batch in the pass (train: a training one, else an
 * evaluation), an UPDATE's mini-batch in the pass. */
static int submit(train_run *r, size_t i, enum op op, uint32_t slot,
                  size_t g, int train, ember_block *const *in, size_t n_in,
                  ember_block **outs, size_t n_out, ember_task_cb cb,
                  void *user, ember_task **task) {
  train_stage *s = &r->stages[i];
  Ember__Cnn__Params p = EMBER__CNN__PARAMS__INIT;
  p.op = proto_op(op);
  p.net.data = (uint8_t *)r->text;
  p.net.len = r->text_len;
  p.first = s->first;
  p.end = s->end;
  p.batch = r->micro;
  p.has_slots = p.has_slot = 1;
  p.slots = r->slots;
  p.slot = slot;
  if (s->slice) {
    p.has_channel_begin = p.has_channel_end = 1;
    p.channel_begin = s->c0;
    p.channel_end = s->c1;
    p.has_split_outputs = p.split_outputs = s->ocp;
  }
  uint32_t pieces[CNN_MAX_ERROR_PIECES];
  if (op == OP_BACKWARD && takes_pieces(r, i) && r->stages[i + 1].ocp) {
    p.has_error_addends = 1;
    p.error_addends = (uint32_t)(r->stages[i + 1].last - i);
  } else if (op == OP_BACKWARD && takes_pieces(r, i)) {
    for (size_t k = i + 1; k <= r->stages[i + 1].last; k++)
      pieces[p.n_error_channels++] = r->stages[k].c1 - r->stages[k].c0;
    p.error_channels = pieces;
  }
  if (op == OP_INIT) {
    p.has_seed = 1;
    p.seed = r->seed;
  }
  if (op == OP_FORWARD) { /* dropout's key (cnn.proto), or an evaluation */
    p.has_inference = 1;
    p.inference = !train;
    p.has_seed = p.has_step = p.has_sample_offset = 1;
    p.seed = r->seed;
    p.step = r->updates + g / r->per_batch;
    p.sample_offset = (uint32_t)(g % r->per_batch) * r->micro;
  }
  if (op == OP_UPDATE) {
    p.has_learning_rate = p.has_momentum = p.has_decay = 1;
    /* darknet numbers the update that ends mini-batch k from 1 */
    p.learning_rate = cnn_train_rate(r->schedule, r->lr, r->updates + g + 1);
    p.momentum = r->momentum;
    p.decay = r->decay;
    p.has_accumulated = 1;
    p.accumulated = r->per_batch;
  }
  size_t len = ember__cnn__params__get_packed_size(&p);
  uint8_t *buf = malloc(len);
  if (!buf) {
    ember__client_set_error("out of memory");
    return EMBER_ENOMEM;
  }
  ember__cnn__params__pack(&p, buf);
  ember_submit_options o = {.size = sizeof o, .platform = s->platform,
                            .callback = cb, .user = user,
                            .states = &s->state, .n_states = 1,
                            .outputs = outs, .n_outputs = n_out};
  int rc = ember_submit(s->client, "cnn", buf, len, in, n_in, &o, task);
  free(buf);
  if (rc) {
    char what[96];
    unit_name(s, what, sizeof what);
    ember__client_set_error("stage %zu (%s): cannot submit %s: %s",
                            s->plan_stage + 1, what, op_name(op),
                            ember_last_error());
  }
  return rc;
}

/* A finished task's status, as the pass's error when it failed; its
 * platform time counted. */
static int finished(train_run *r, size_t i, enum op op, ember_task *t) {
  train_stage *s = &r->stages[i];
  int rc = ember_task_status(t);
  const ember_task_info *info = ember_task_get_info(t);
  if (info) s->exec_ns += info->exec_ns;
  s->tasks++;
  if (rc) {
    char what[96];
    unit_name(s, what, sizeof what);
    ember__client_set_error("stage %zu (%s) on %s: %s failed: %s: %s",
                            s->plan_stage + 1, what, s->platform,
                            op_name(op), ember_errname(rc),
                            ember_task_message(t));
  }
  return rc;
}

/* Run one task on every stage at once and wait for all (INIT, SET_PARAMS,
 * GET_PARAMS). in[i]: stage i's input or NULL; outs[i]: its out block. */
static int on_every_stage(train_run *r, enum op op, ember_block **in,
                          ember_block **outs) {
  ember_task **t = calloc(r->n_stages, sizeof *t);
  if (!t) {
    ember__client_set_error("out of memory");
    return EMBER_ENOMEM;
  }
  int rc = 0;
  for (size_t i = 0; i < r->n_stages && !rc; i++)
    rc = submit(r, i, op, 0, 0, 0, in ? &in[i] : NULL, in ? 1 : 0,
                outs ? &outs[i] : NULL, outs ? 1 : 0, NULL, NULL, &t[i]);
  for (size_t i = 0; i < r->n_stages; i++) {
    if (!t[i]) continue;
    ember_task_wait(t[i], -1);
    int trc = finished(r, i, op, t[i]);
    if (!rc) rc = trc;
    ember_task_free(t[i]);
  }
  free(t);
  return rc;
}

/* Where layer L's parameters start in the network's (cnn_net_params
 * floats, layer by layer, weights then biases). */
static uint64_t layer_params_at(const cnn_net *net, uint32_t L) {
  size_t n;
  const cnn_layer *layers = cnn_net_layers(net, &n);
  uint64_t at = 0;
  for (uint32_t k = 0; k < L && k < n; k++)
    at += cnn_layer_params(&layers[k]);
  return at;
}

/* A slice's parameters (ICP: its weights' sub-tensor out x (c1 - c0) x
 * kk, the last slice's biases; OCP: its rows and biases) between the
 * network's (net) and the slice's own (own): to_own copies net -> own,
 * else own -> net. */
static void slice_params(const train_run *r, const train_stage *t,
                         float *net, float *own, int to_own) {
  size_t n;
  const cnn_layer *l = &cnn_net_layers(r->net, &n)[t->first];
  if (t->ocp) { /* rows c0..c1-1 of the weights, then those biases */
    uint64_t row = l->weights / cnn_layer_outputs(l);
    uint64_t w = (t->c1 - t->c0) * row, b = t->c1 - t->c0;
    float *full = net + layer_params_at(r->net, t->first);
    float *fw = full + t->c0 * row, *fb = full + l->weights + t->c0;
    memcpy(to_own ? own : fw, to_own ? fw : own, w * sizeof *own);
    memcpy(to_own ? own + w : fb, to_own ? fb : own + w, b * sizeof *own);
    return;
  }
  uint64_t C = cnn_layer_channels(l), out = l->biases;
  uint64_t kk = l->weights / (out * C), w = (t->c1 - t->c0) * kk;
  float *full = net + layer_params_at(r->net, t->first);
  for (uint64_t o = 0; o < out; o++) {
    float *a = full + (o * C + t->c0) * kk, *b = own + o * w;
    if (to_own) memcpy(b, a, w * sizeof *a);
    else memcpy(a, b, w * sizeof *a);
  }
  if (t->slice_last) {
    if (to_own) memcpy(own + out * w, full + l->weights, out * sizeof *own);
    else memcpy(full + l->weights, own + out * w, out * sizeof *own);
  }
}

int ember__train_stages_init(train_run *r, const float *params) {
  if (!params) return on_every_stage(r, OP_INIT, NULL, NULL);
  ember_block **in = calloc(r->n_stages, sizeof *in);
  if (!in) {
    ember__client_set_error("out of memory");
    return EMBER_ENOMEM;
  }
  int rc = 0;
  for (size_t i = 0; i < r->n_stages && !rc; i++) {
    const train_stage *t = &r->stages[i];
    uint64_t n = t->layout.params;
    if (!t->slice) {
      rc = ember_block_create(t->client,
                              params + layer_params_at(r->net, t->first),
                              (size_t)n * sizeof *params, 0, &in[i]);
      continue;
    }
    float *own = malloc((size_t)n * sizeof *own);
    if (!own) {
      ember__client_set_error("out of memory");
      rc = EMBER_ENOMEM;
      break;
    }
    slice_params(r, t, (float *)params, own, 1);
    rc = ember_block_create(t->client, own, (size_t)n * sizeof *own, 0,
                            &in[i]);
    free(own);
  }
  if (!rc) rc = on_every_stage(r, OP_NONE, in, NULL);
  for (size_t i = 0; i < r->n_stages; i++) ember_block_release(in[i]);
  free(in);
  return rc;
}

int ember__train_stages_params(train_run *r, float *params) {
  ember_block **outs = calloc(r->n_stages, sizeof *outs);
  if (!outs) {
    ember__client_set_error("out of memory");
    return EMBER_ENOMEM;
  }
  int rc = on_every_stage(r, OP_GET, NULL, outs);
  for (size_t i = 0; i < r->n_stages && !rc; i++) {
    const train_stage *t = &r->stages[i];
    void *bytes;
    size_t size;
    rc = ember_block_read(outs[i], &bytes, &size, NULL);
    if (rc) break;
    if (size != t->layout.params * sizeof *params) {
      free(bytes);
      ember__client_set_error("GET_PARAMS gave %zu bytes, not %llu", size,
                              (unsigned long long)(t->layout.params * 4));
      rc = EMBER_EPROTO;
      break;
    }
    if (t->slice)
      slice_params(r, t, params, bytes, 0);
    else
      memcpy(params + layer_params_at(r->net, t->first), bytes, size);
    free(bytes);
  }
  for (size_t i = 0; i < r->n_stages; i++) ember_block_release(outs[i]);
  free(outs);
  return rc;
}

/* ---- the pass ------------------------------------------------------------ */

static micro *micro_of(pass *p, size_t g) { return &p->m[g % p->ring]; }

/* A block made on one client, wanted on another: read and sent on. */
static int move_block(ember_block **b, ember_client *to) {
  void *bytes;
  size_t size;
  int rc = ember_block_read(*b, &bytes, &size, NULL);
  if (rc) return rc;
  ember_block *moved = NULL;
  rc = ember_block_create(to, bytes, size, 0, &moved);
  free(bytes);
  if (rc) return rc;
  ember_block_release(*b);
  *b = moved;
  return 0;
}

/* A copy of block b on client to. */
static int copy_block(ember_block *b, ember_client *to, ember_block **out) {
  void *bytes;
  size_t size;
  int rc = ember_block_read(b, &bytes, &size, NULL);
  if (rc) return rc;
  rc = ember_block_create(to, bytes, size, 0, out);
  free(bytes);
  return rc;
}

static void release(ember_block **b) {
  ember_block_release(*b);
  *b = NULL;
}

/* Unit 0's input and the last unit's labels of micro-batch g. */
static int make_inputs(pass *p, size_t g) {
  train_run *r = p->r;
  micro *m = micro_of(p, g);
  size_t at = g * r->micro;
  m->valid = at + r->micro <= p->n ? r->micro : p->n - at;
  for (size_t k = 0; k < r->micro; k++) {
    size_t j = at + (k < m->valid ? k : m->valid - 1); /* a tail: padded */
    p->idx[k] = p->order ? p->order[j] : j;
  }
  ember__train_samples_gather(p->s, p->idx, r->micro, p->xbuf, p->ybuf);
  train_stage *first = &r->stages[0], *last = &r->stages[r->n_stages - 1];
  int rc = ember_block_create(first->client, p->xbuf,
                              (size_t)r->micro * p->s->elems * sizeof(float),
                              0, &m->x);
  if (!rc)
    rc = ember_block_create(last->client, p->ybuf, r->micro, 0, &m->y);
  return rc;
}

/* The input of unit i's layer when it is a slice (the output of the unit
 * before its first slice), else of unit i: where it is. */
static ember_block **layer_input(pass *p, micro *m, size_t i) {
  const train_stage *t = &p->r->stages[i];
  size_t b = t->slice ? t->base : i;
  return b == 0 ? &m->x : &m->act[b - 1];
}

/* Whether unit i's BACKWARD of micro-batch g has its input. */
static int bwd_ready(pass *p, size_t i, size_t g) {
  train_run *r = p->r;
  const train_stage *t = &r->stages[i];
  if (i == r->n_stages - 1) return 1;
  if (t->ocp) return p->st[t->last + 1].bwd_done > g; /* the layer's
                                                        output error */
  if (t->slice && !t->slice_last) return p->st[t->last].bwd_done > g;
  const train_stage *n = &r->stages[i + 1];
  size_t e = n->slice ? n->last : i + 1;
  for (size_t k = i + 1; k <= e; k++)
    if (p->st[k].bwd_done <= g) return 0;
  return 1;
}

/* An op's precedence on a plan stage: UPDATE, BACKWARD, FORWARD, none. */
static int rank_of(enum op op) {
  return op == OP_UPDATE ? 0 : op == OP_BACKWARD ? 1 : op == OP_FORWARD ? 2
                                                                       : 3;
}

/* What unit i may submit now; OP_NONE: nothing. Its own ops are ordered
 * by what it submitted (its state block runs them in that order), what it
 * takes from other units by what they completed (their out blocks). */
static enum op next_op(pass *p, size_t i) {
  train_run *r = p->r;
  stage_run *s = &p->st[i];
  size_t N = r->n_stages, K = r->per_batch;
  if (p->train && s->bwd_sub >= (s->upd_sub + 1) * K) return OP_UPDATE;
  if (p->train && s->bwd_sub < s->fwd_sub && bwd_ready(p, i, s->bwd_sub))
    return OP_BACKWARD;
  size_t g = s->fwd_sub;
  if (g >= p->M) return OP_NONE;
  if (i > 0 && p->st[i - 1].fwd_done <= g) return OP_NONE;
  /* a micro-batch stays in the ring until every unit's BACKWARD
   * (training) or the last unit's FORWARD (evaluation) is done with it */
  if (i == 0) {
    size_t retired = p->st[N - 1].fwd_done;
    if (p->train) {
      retired = p->st[0].bwd_done;
      for (size_t k = 1; k < N; k++)
        if (p->st[k].bwd_done < retired) retired = p->st[k].bwd_done;
    }
    if (g >= retired + p->ring) return OP_NONE;
  }
  if (p->train && g - s->bwd_sub >= r->slots) return OP_NONE;
  if (p->train && r->sync && g / K > s->upd_sub) return OP_NONE;
  return OP_FORWARD;
}

static int start(pass *p, size_t i, enum op op) {
  train_run *r = p->r;
  stage_run *s = &p->st[i];
  train_stage *t = &r->stages[i];
  size_t N = r->n_stages;
  size_t g = op == OP_FORWARD ? s->fwd_sub : op == OP_BACKWARD ? s->bwd_sub
                                                               : 0;
  micro *m = micro_of(p, g);
  ember_block *in[CNN_MAX_ERROR_PIECES + 2] = {NULL};
  size_t n_in = 0;
  ember_block **out = NULL;
  size_t n_out = 0;
  int rc = 0;
  if (op == OP_FORWARD) {
    if (i == 0) rc = make_inputs(p, g);
    ember_block **x = layer_input(p, m, i);
    if (!rc && t->slice && i > t->base &&
        r->stages[t->base].client != t->client) {
      rc = copy_block(*x, t->client, &m->tmp[i]);
      x = &m->tmp[i];
    }
    in[n_in++] = *x;
    if (t->slice && i > t->base) in[n_in++] = m->act[i - 1];
    if (i == N - 1) in[n_in++] = m->y;
    if (i < N - 1) out = &m->act[i];
    else if (!p->train && m->valid < r->micro) out = &m->probs;
    n_out = out ? 1 : 0;
  } else if (op == OP_BACKWARD) {
    if (t->ocp) { /* every slice reads the layer's output error */
      ember_block *dy = m->err[t->last + 1];
      if (r->stages[t->last].client != t->client) {
        rc = copy_block(dy, t->client, &m->tmp[i]);
        dy = m->tmp[i];
      }
      in[n_in++] = dy;
    } else if (t->slice && !t->slice_last) {
      ember_block *dz = m->dz[t->last];
      if (r->stages[t->last].client != t->client) {
        rc = copy_block(dz, t->client, &m->tmp[i]);
        dz = m->tmp[i];
      }
      in[n_in++] = dz;
    } else if (takes_pieces(r, i)) {
      for (size_t k = i + 1; k <= r->stages[i + 1].last; k++)
        in[n_in++] = m->err[k];
    } else if (i < N - 1) {
      in[n_in++] = m->err[i + 1];
    }
    /* out 0, the input error: a whole unit's for the unit before it
     * (none before the first layer), a slice's a piece (ICP) or an addend
     * (OCP) of it (none in the first layer, but the last ICP slice's
     * always: its dz is out 1) */
    n_out = t->slice_last && !t->ocp ? 2 : t->slice ? t->first > 0 : i > 0;
  }
  if (rc) return rc;
  ember_block *outs[2] = {NULL, NULL};
  rc = submit(r, i, op, (uint32_t)(g % r->slots),
              op == OP_UPDATE ? s->upd_sub : g, p->train, in, n_in,
              n_out ? outs : NULL, n_out, on_done, p,
              &s->task[s->n_flight]);
  if (rc) return rc;
  if (op == OP_FORWARD && out) *out = outs[0];
  if (op == OP_BACKWARD && n_out > 0) m->err[i] = outs[0];
  if (op == OP_BACKWARD && n_out > 1) m->dz[i] = outs[1];
  s->op[s->n_flight] = op;
  s->g[s->n_flight] = g;
  s->n_flight++;
  if (op == OP_FORWARD) s->fwd_sub++;
  if (op == OP_BACKWARD) s->bwd_sub++;
  if (op == OP_UPDATE) s->upd_sub++;
  return 0;
}
/* The last stage's FORWARD of g: its loss and right answers. */
static int count_result(pass *p, size_t g, ember_task *t) {
  micro *m = micro_of(p, g);
  size_t size;
  const void *bytes = ember_task_output(t, &size);
  Ember__Cnn__Result *res = ember__cnn__result__unpack(NULL, size, bytes);
  if (!res) {
    ember__client_set_error("the last stage's FORWARD gave no result");
    return EMBER_EPROTO;
  }
  p->out->loss_sum += res->loss;
  p->out->micro_batches++;
  p->out->samples += m->valid;
  if (!m->probs) p->out->correct += res->correct;
  ember__cnn__result__free_unpacked(res, NULL);
  if (!m->probs) return 0;
  /* a padded tail: count the real samples only, from the probabilities */
  void *probs;
  int rc = ember_block_read(m->probs, &probs, &size, NULL);
  if (rc) return rc;
  uint32_t classes = cnn_net_classes(p->r->net);
  const float *pr = probs;
  for (size_t k = 0; k < m->valid && (k + 1) * classes * 4 <= size; k++) {
    uint32_t best = 0;
    for (uint32_t c = 1; c < classes; c++)
      if (pr[k * classes + c] > pr[k * classes + best]) best = c;
    p->out->correct += best == p->ybuf[k] ? 1 : 0;
  }
  free(probs);
  return 0;
}

/* Unit i's oldest task is done: account for it, pass its blocks on. */
static int complete(pass *p, size_t i, train_pass_progress progress,
                    void *user) {
  train_run *r = p->r;
  stage_run *s = &p->st[i];
  const train_stage *t = &r->stages[i];
  size_t N = r->n_stages;
  enum op op = s->op[0];
  size_t g = s->g[0];
  micro *m = micro_of(p, g);
  int rc = finished(r, i, op, s->task[0]);
  if (!rc && op == OP_FORWARD) {
    /* the layer's input: read by every slice, the last one last */
    if (!t->slice || t->slice_last) release(layer_input(p, m, i));
    if (t->slice && i > t->base) release(&m->act[i - 1]); /* partial sums */
    release(&m->tmp[i]);
    if (i == N - 1) {
      /* the padded tail's labels are in ybuf still: it is the last
       * micro-batch made */
      rc = count_result(p, g, s->task[0]);
      release(&m->y);
      release(&m->probs);
      if (progress && ((g + 1) % r->per_batch == 0 || g + 1 == p->M))
        progress(p->out->samples, p->n, user);
    } else if (r->stages[i + 1].client != t->client) {
      rc = move_block(&m->act[i], r->stages[i + 1].client);
    }
    s->fwd_done++;
  } else if (!rc && op == OP_BACKWARD) {
    if (takes_pieces(r, i)) { /* the slices' errors, and their dz */
      for (size_t k = i + 1; k <= r->stages[i + 1].last; k++)
        release(&m->err[k]);
      release(&m->dz[r->stages[i + 1].last]); /* ICP only */
    } else if (i < N - 1 && !r->stages[i + 1].slice && !t->ocp) {
      release(&m->err[i + 1]);
    }
    release(&m->tmp[i]);
    s->bwd_done++;
    int all = 1; /* every slice of the layer is done with g */
    for (size_t k = t->base; t->slice && k <= t->last; k++)
      all &= p->st[k].bwd_done > g;
    if (t->ocp && all) /* the layer's output error, taken by every slice */
      release(&m->err[t->last + 1]);
    if (t->slice && t->first == 0) {
      /* slices of the first layer: no unit takes their errors; an ICP
       * layer's dz goes when all are done with it */
      release(&m->err[i]);
      if (all) release(&m->dz[t->last]);
    } else if (i > 0) { /* to the unit before the layer */
      size_t to = t->slice ? t->base - 1 : i - 1;
      if (r->stages[to].client != t->client)
        rc = move_block(&m->err[i], r->stages[to].client);
    }
  } else if (!rc && op == OP_UPDATE) {
    s->upd_done++;
  }
  ember_task_free(s->task[0]);
  s->n_flight--;
  for (size_t k = 0; k < s->n_flight; k++) {
    s->task[k] = s->task[k + 1];
    s->op[k] = s->op[k + 1];
    s->g[k] = s->g[k + 1];
  }
  s->task[s->n_flight] = NULL;
  return rc;
}

static int pass_alloc(pass *p) {
  train_run *r = p->r;
  size_t N = r->n_stages;
  p->m = calloc(p->ring, sizeof *p->m);
  p->st = calloc(N, sizeof *p->st);
  p->xbuf = malloc((size_t)r->micro * p->s->elems * sizeof *p->xbuf);
  p->ybuf = malloc(r->micro);
  p->idx = malloc(r->micro * sizeof *p->idx);
  if (!p->m || !p->st || !p->xbuf || !p->ybuf || !p->idx) return -1;
  for (size_t k = 0; k < p->ring; k++) {
    p->m[k].act = calloc(N, sizeof *p->m[k].act);
    p->m[k].err = calloc(N, sizeof *p->m[k].err);
    p->m[k].dz = calloc(N, sizeof *p->m[k].dz);
    p->m[k].tmp = calloc(N, sizeof *p->m[k].tmp);
    if (!p->m[k].act || !p->m[k].err || !p->m[k].dz || !p->m[k].tmp)
      return -1;
  }
  return 0;
}

static void pass_free(pass *p) {
  for (size_t k = 0; p->m && k < p->ring; k++) {
    micro *m = &p->m[k];
    release(&m->x);
    release(&m->y);
    release(&m->probs);
    for (size_t i = 0; i < p->r->n_stages; i++) {
      if (m->act) release(&m->act[i]);
      if (m->err) release(&m->err[i]);
      if (m->dz) release(&m->dz[i]);
      if (m->tmp) release(&m->tmp[i]);
    }
    free(m->act);
    free(m->err);
    free(m->dz);
    free(m->tmp);
  }
  free(p->m);
  free(p->st);
  free(p->xbuf);
  free(p->ybuf);
  free(p->idx);
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
}

int ember__train_pass_run(train_run *r, const train_samples *s,
                          const size_t *order,
                   size_t n, int train, train_pass *out,
                   train_pass_progress progress, void *user) {
  memset(out, 0, sizeof *out);
  size_t N = r->n_stages;
  pass p = {.r = r, .s = s, .order = order, .n = n, .train = train,
            .out = out, .ring = r->slots};
  p.M = train ? n / r->micro : (n + r->micro - 1) / r->micro;
  if (!train && p.ring < 2 * N) p.ring = 2 * N;
  pthread_mutex_init(&p.mu, NULL);
  pthread_cond_init(&p.cv, NULL);
  if (pass_alloc(&p)) {
    pass_free(&p);
    ember__client_set_error("out of memory");
    return EMBER_ENOMEM;
  }
  for (size_t i = 0; i < N; i++) r->stages[i].exec_ns = 0;
  uint64_t t0 = clock_now_ns();
  int rc = 0;
  unsigned seen = 0;
  for (;;) {
    /* submit what can go, unless draining after a failure: on each plan
     * stage, its units' best op (UPDATE, BACKWARD of the unit nearest the
     * loss, FORWARD of the unit nearest the input) when the stage is
     * free, or queued behind its tasks when its platform runs tasks in
     * order (a device) or they are the same unit's (its state block
     * orders them; another unit's task could run beside them on the cpu
     * platform, two cores for one stage) */
    size_t busy = 0;
    for (size_t a = 0, b; a < N && !rc; a = b) {
      size_t flying = 0, owner = N;
      for (b = a; b < N && r->stages[b].plan_stage ==
                               r->stages[a].plan_stage; b++)
        if (p.st[b].n_flight) {
          flying += p.st[b].n_flight;
          owner = b;
        }
      while (flying < DEPTH && !rc) {
        size_t best = N;
        enum op best_op = OP_NONE;
        for (size_t i = a; i < b; i++) {
          enum op op = next_op(&p, i);
          /* ties: BACKWARD nearest the loss, FORWARD nearest the input */
          if (rank_of(op) < rank_of(best_op) ||
              (op == OP_BACKWARD && best_op == OP_BACKWARD)) {
            best = i;
            best_op = op;
          }
        }
        if (best == N ||
            (owner != N && best != owner && !r->stages[a].in_order))
          break;
        rc = start(&p, best, best_op);
        if (!rc) {
          flying++;
          owner = best;
        }
      }
    }
    for (size_t i = 0; i < N; i++) busy += p.st[i].n_flight;
    if (!busy) break;
    pthread_mutex_lock(&p.mu);
    while (p.completions == seen) pthread_cond_wait(&p.cv, &p.mu);
    seen = p.completions;
    pthread_mutex_unlock(&p.mu);
    for (size_t i = 0; i < N; i++)
      while (p.st[i].n_flight && ember_task_done(p.st[i].task[0])) {
        ember_task_wait(p.st[i].task[0], -1); /* its callback has returned */
        int crc = complete(&p, i, progress, user);
        if (!rc) rc = crc;
      }
  }
  out->wall_ns = clock_now_ns() - t0;
  if (!rc && p.st[N - 1].fwd_done != p.M) {
    ember__client_set_error("the pipeline stopped after %zu of %zu "
                            "micro-batches", p.st[N - 1].fwd_done, p.M);
    rc = EMBER_EINTERNAL;
  }
  pass_free(&p);
  return rc;
}
