/*
 * train_pipeline.c - ember_train's pipeline: micro-batches driven through
 * the stages as FPDeep drives samples, stage i working on one while stage
 * i+1 works on an earlier one, FP towards the loss and EB/PG back.
 *
 * Each stage runs one task at a time (its state block orders them); a
 * stage that is free takes, in this order:
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
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelerators/cnn/cnn.pb-c.h"
#include "client_internal.h"
#include "train_internal.h"

enum op { OP_NONE, OP_FORWARD, OP_BACKWARD, OP_UPDATE, OP_INIT, OP_GET };

/* A stage's place in the pass. */
typedef struct stage_run {
  ember_task *task;          /* in flight, or NULL */
  enum op op;
  size_t g;                  /* the micro-batch of task */
  size_t fwd_sub, fwd_done, bwd_sub, bwd_done, upd_done;
} stage_run;

/* A micro-batch in flight (ring entry g % ring). */
typedef struct micro {
  ember_block *x, *y;        /* stage 0's input, the last stage's labels */
  ember_block **act;         /* act[i]: stage i's output, stage i+1's input */
  ember_block **err;         /* err[i]: stage i's input error, for i-1 */
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

/* Submit op (OP_NONE: SET_PARAMS) on stage i; *task gets it. */
static int submit(train_run *r, size_t i, enum op op, uint32_t slot,
                  ember_block *const *in, size_t n_in, ember_block **outs,
                  size_t n_out, ember_task_cb cb, void *user,
                  ember_task **task) {
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
  if (op == OP_INIT) {
    p.has_seed = 1;
    p.seed = r->seed;
  }
  if (op == OP_UPDATE) {
    p.has_learning_rate = p.has_momentum = p.has_decay = 1;
    p.learning_rate = r->lr;
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
  if (rc)
    ember__client_set_error("stage %zu (layers %u..%u): cannot submit %s: "
                            "%s", i + 1, s->first + 1, s->end, op_name(op),
                            ember_last_error());
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
  if (rc)
    ember__client_set_error("stage %zu (layers %u..%u) on %s: %s failed: "
                            "%s: %s", i + 1, s->first + 1, s->end,
                            s->platform, op_name(op), ember_errname(rc),
                            ember_task_message(t));
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
    rc = submit(r, i, op, 0, in ? &in[i] : NULL, in ? 1 : 0,
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

int ember__train_stages_init(train_run *r, const float *params) {
  if (!params) return on_every_stage(r, OP_INIT, NULL, NULL);
  ember_block **in = calloc(r->n_stages, sizeof *in);
  if (!in) {
    ember__client_set_error("out of memory");
    return EMBER_ENOMEM;
  }
  int rc = 0;
  const float *at = params;
  for (size_t i = 0; i < r->n_stages && !rc; i++) {
    uint64_t n = r->stages[i].layout.params;
    rc = ember_block_create(r->stages[i].client, at, (size_t)n * sizeof *at,
                            0, &in[i]);
    at += n;
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
  float *at = params;
  for (size_t i = 0; i < r->n_stages && !rc; i++) {
    void *bytes;
    size_t size;
    rc = ember_block_read(outs[i], &bytes, &size, NULL);
    if (rc) break;
    memcpy(at, bytes, size);
    at += size / sizeof *at;
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

/* Stage 0's input and the last stage's labels of micro-batch g. */
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

/* What stage i may start now; OP_NONE: nothing. */
static enum op next_op(pass *p, size_t i) {
  train_run *r = p->r;
  stage_run *s = &p->st[i];
  size_t N = r->n_stages, K = r->per_batch;
  if (p->train && s->bwd_done >= (s->upd_done + 1) * K) return OP_UPDATE;
  if (p->train && s->bwd_sub < s->fwd_done &&
      (i == N - 1 || p->st[i + 1].bwd_done > s->bwd_sub))
    return OP_BACKWARD;
  size_t g = s->fwd_sub;
  if (g >= p->M) return OP_NONE;
  if (i > 0 && p->st[i - 1].fwd_done <= g) return OP_NONE;
  /* a micro-batch stays in the ring until stage 0's BACKWARD (training)
   * or the last stage's FORWARD (evaluation) is done with it */
  size_t retired = p->train ? p->st[0].bwd_done : p->st[N - 1].fwd_done;
  if (i == 0 && g >= retired + p->ring) return OP_NONE;
  if (p->train && g - s->bwd_done >= r->slots) return OP_NONE;
  if (p->train && r->sync && g / K > s->upd_done) return OP_NONE;
  return OP_FORWARD;
}

static int start(pass *p, size_t i, enum op op) {
  train_run *r = p->r;
  stage_run *s = &p->st[i];
  size_t N = r->n_stages;
  size_t g = op == OP_FORWARD ? s->fwd_sub : op == OP_BACKWARD ? s->bwd_sub
                                                               : 0;
  micro *m = micro_of(p, g);
  ember_block *in[2] = {NULL, NULL};
  size_t n_in = 0;
  ember_block **out = NULL;
  int rc = 0;
  if (op == OP_FORWARD) {
    if (i == 0) rc = make_inputs(p, g);
    in[n_in++] = i == 0 ? m->x : m->act[i - 1];
    if (i == N - 1) in[n_in++] = m->y;
    if (i < N - 1) out = &m->act[i];
    else if (!p->train && m->valid < r->micro) out = &m->probs;
  } else if (op == OP_BACKWARD) {
    if (i < N - 1) in[n_in++] = m->err[i + 1];
    if (i > 0) out = &m->err[i];
  }
  if (rc) return rc;
  rc = submit(r, i, op, (uint32_t)(g % r->slots), in, n_in, out,
              out ? 1 : 0, on_done, p, &s->task);
  if (rc) return rc;
  s->op = op;
  s->g = g;
  if (op == OP_FORWARD) s->fwd_sub++;
  if (op == OP_BACKWARD) s->bwd_sub++;
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

static void release(ember_block **b) {
  ember_block_release(*b);
  *b = NULL;
}

/* Stage i's task is done: account for it, pass its blocks on. */
static int complete(pass *p, size_t i, train_pass_progress progress,
                    void *user) {
  train_run *r = p->r;
  stage_run *s = &p->st[i];
  size_t N = r->n_stages;
  micro *m = micro_of(p, s->g);
  int rc = finished(r, i, s->op, s->task);
  if (!rc && s->op == OP_FORWARD) {
    if (i == 0) release(&m->x);
    else release(&m->act[i - 1]);
    if (i == N - 1) {
      /* the padded tail's labels are in ybuf still: it is the last
       * micro-batch made */
      rc = count_result(p, s->g, s->task);
      release(&m->y);
      release(&m->probs);
      if (progress && ((s->g + 1) % r->per_batch == 0 || s->g + 1 == p->M))
        progress(p->out->samples, p->n, user);
    } else if (r->stages[i + 1].client != r->stages[i].client) {
      rc = move_block(&m->act[i], r->stages[i + 1].client);
    }
    s->fwd_done++;
  } else if (!rc && s->op == OP_BACKWARD) {
    if (i < N - 1) release(&m->err[i + 1]);
    if (i > 0 && r->stages[i - 1].client != r->stages[i].client)
      rc = move_block(&m->err[i], r->stages[i - 1].client);
    s->bwd_done++;
  } else if (!rc && s->op == OP_UPDATE) {
    s->upd_done++;
  }
  ember_task_free(s->task);
  s->task = NULL;
  s->op = OP_NONE;
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
    if (!p->m[k].act || !p->m[k].err) return -1;
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
    }
    free(m->act);
    free(m->err);
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
  uint64_t t0 = ember__client_now_ns();
  int rc = 0;
  unsigned seen = 0;
  for (;;) {
    /* start what can start, unless draining after a failure */
    size_t busy = 0;
    for (size_t i = 0; i < N; i++) {
      if (!rc && !p.st[i].task) {
        enum op op = next_op(&p, i);
        if (op != OP_NONE) rc = start(&p, i, op);
      }
      busy += p.st[i].task != NULL;
    }
    if (!busy) break;
    pthread_mutex_lock(&p.mu);
    while (p.completions == seen) pthread_cond_wait(&p.cv, &p.mu);
    seen = p.completions;
    pthread_mutex_unlock(&p.mu);
    for (size_t i = 0; i < N; i++)
      if (p.st[i].task && ember_task_done(p.st[i].task)) {
        ember_task_wait(p.st[i].task, -1); /* its callback has returned */
        int crc = complete(&p, i, progress, user);
        if (!rc) rc = crc;
      }
  }
  out->wall_ns = ember__client_now_ns() - t0;
  if (!rc && p.st[N - 1].fwd_done != p.M) {
    ember__client_set_error("the pipeline stopped after %zu of %zu "
                            "micro-batches", p.st[N - 1].fwd_done, p.M);
    rc = EMBER_EINTERNAL;
  }
  pass_free(&p);
  return rc;
}
