/*
 * store_writer.c - the store's writer thread (store_writer.h): changes are
 * copied into a list as they are queued, published in units, and
 * committed in batches, one transaction and one fsync per batch.
 */
#include "store_writer.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ember/ember_errors.h"

typedef enum op_kind {
  OP_NODE_REGISTER,
  OP_NODE_SET_STATE,
  OP_NODE_SET_DRAINED,
  OP_NODE_SET_REPORTED,
  OP_LABEL_OVERRIDE,
  OP_LABEL_CLEAR,
  OP_APP_INSERT,
  OP_APP_SET_STATE,
  OP_LEASE_INSERT,
  OP_LEASE_END,
  OP_EVENT,
  OP_READ_EVENTS,
} op_kind;

/* A read for a caller that waits (gam_writer_events). */
typedef struct read_req {
  unsigned limit;
  int (*fn)(void *user, const gam_store_event_row *row);
  void *user;
  int rc;
  bool done;
} read_req;

/* One change, with copies of its strings. */
typedef struct gam_op {
  struct gam_op *next;
  op_kind kind;
  uint64_t seq;            /* 0 for a read */
  char *str[3];
  char **list;
  size_t n_list;
  uint64_t num[4];
  int small;               /* a state, a count or a flag */
  read_req *read;
} gam_op;

struct gam_writer {
  gam_store *store;
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake;     /* the thread waits for work here */
  pthread_cond_t done;     /* waiters for a commit or a read */
  gam_op *build_head, *build_tail;  /* queued, not yet published */
  gam_op *queue_head, *queue_tail;  /* published: the thread's */
  bool stopping, failed;
  char why[320];
  _Atomic uint64_t queued, durable;
  gam_writer_stats stats;  /* under lock */
  void (*on_durable)(void *user);
  void *user;
};

static void op_free(gam_op *op) {
  for (int i = 0; i < 3; i++) free(op->str[i]);
  for (size_t i = 0; i < op->n_list; i++) free(op->list[i]);
  free(op->list);
  free(op);
}

static void fail_locked(gam_writer *w, const char *fmt, const char *detail) {
  if (!w->failed) snprintf(w->why, sizeof w->why, fmt, detail);
  w->failed = true;
  pthread_cond_broadcast(&w->done);
  if (w->on_durable) w->on_durable(w->user);
}

static void fail(gam_writer *w, const char *fmt, const char *detail) {
  pthread_mutex_lock(&w->lock);
  fail_locked(w, fmt, detail);
  pthread_mutex_unlock(&w->lock);
}

/* ------------------------------------------------------------ queueing */

/* A new change at the end of the unpublished list; its strings (NULL
 * stays NULL) are copied. NULL when memory ran out: then the writer has
 * failed, since a change it cannot keep must not be acknowledged. */
static gam_op *op_new(gam_writer *w, op_kind kind, const char *a,
                      const char *b, const char *c) {
  gam_op *op = calloc(1, sizeof *op);
  const char *src[3] = {a, b, c};
  bool ok = op != NULL;
  for (int i = 0; ok && i < 3; i++)
    if (src[i] && !(op->str[i] = strdup(src[i]))) ok = false;
  if (!ok) {
    if (op) op_free(op);
    fail(w, "%s", "out of memory queueing a change");
    return NULL;
  }
  op->kind = kind;
  op->seq = atomic_load(&w->queued) + 1;
  atomic_store(&w->queued, op->seq);
  if (w->build_tail) w->build_tail->next = op;
  else w->build_head = op;
  w->build_tail = op;
  return op;
}

void gam_writer_node_register(gam_writer *w, const char *id,
                              const char *address, uint64_t now_ms) {
  gam_op *op = op_new(w, OP_NODE_REGISTER, id, address, NULL);
  if (op) op->num[0] = now_ms;
}

void gam_writer_node_set_state(gam_writer *w, const char *id,
                               gam_node_state state, uint64_t now_ms) {
  gam_op *op = op_new(w, OP_NODE_SET_STATE, id, NULL, NULL);
  if (!op) return;
  op->small = (int)state;
  op->num[0] = now_ms;
}

void gam_writer_node_set_drained(gam_writer *w, const char *id,
                                 bool drained) {
  gam_op *op = op_new(w, OP_NODE_SET_DRAINED, id, NULL, NULL);
  if (op) op->small = drained;
}

void gam_writer_node_set_reported(gam_writer *w, const char *id,
                                  const char *const *labels, size_t n) {
  gam_op *op = op_new(w, OP_NODE_SET_REPORTED, id, NULL, NULL);
  if (!op || n == 0) return;
  if (!(op->list = calloc(n, sizeof *op->list))) {
    fail(w, "%s", "out of memory queueing a change");
    return;
  }
  for (; op->n_list < n; op->n_list++)
    if (!(op->list[op->n_list] = strdup(labels[op->n_list]))) {
      fail(w, "%s", "out of memory queueing a change");
      return;
    }
}

void gam_writer_label_override(gam_writer *w, const char *node,
                               const char *label, bool on) {
  gam_op *op = op_new(w, OP_LABEL_OVERRIDE, node, label, NULL);
  if (op) op->small = on;
}

void gam_writer_label_clear(gam_writer *w, const char *node,
                            const char *label) {
  op_new(w, OP_LABEL_CLEAR, node, label, NULL);
}

void gam_writer_app_insert(gam_writer *w, uint64_t id, const char *name,
                           const char *label, unsigned wanted,
                           uint64_t now_ms) {
  gam_op *op = op_new(w, OP_APP_INSERT, name, label, NULL);
  if (!op) return;
  op->num[0] = id;
  op->num[1] = now_ms;
  op->small = (int)wanted;
}

void gam_writer_app_set_state(gam_writer *w, uint64_t id,
                              gam_app_state state, uint64_t now_ms) {
  gam_op *op = op_new(w, OP_APP_SET_STATE, NULL, NULL, NULL);
  if (!op) return;
  op->num[0] = id;
  op->num[1] = now_ms;
  op->small = (int)state;
}

void gam_writer_lease_insert(gam_writer *w, uint64_t id, uint64_t app_id,
                             const char *node, const char *label,
                             uint64_t issued_unix_ms,
                             uint64_t expires_unix_ms) {
  gam_op *op = op_new(w, OP_LEASE_INSERT, node, label, NULL);
  if (!op) return;
  op->num[0] = id;
  op->num[1] = app_id;
  op->num[2] = issued_unix_ms;
  op->num[3] = expires_unix_ms;
}

void gam_writer_lease_end(gam_writer *w, uint64_t id, const char *reason,
                          uint64_t now_ms) {
  gam_op *op = op_new(w, OP_LEASE_END, reason, NULL, NULL);
  if (!op) return;
  op->num[0] = id;
  op->num[1] = now_ms;
}

void gam_writer_event(gam_writer *w, uint64_t now_ms, const char *kind,
                      const char *node, uint64_t app_id, const char *detail) {
  gam_op *op = op_new(w, OP_EVENT, kind, node, detail);
  if (!op) return;
  op->num[0] = now_ms;
  op->num[1] = app_id;
}

static void append_locked(gam_writer *w, gam_op *head, gam_op *tail) {
  if (w->queue_tail) w->queue_tail->next = head;
  else w->queue_head = head;
  w->queue_tail = tail;
  pthread_cond_signal(&w->wake);
}

void gam_writer_publish(gam_writer *w) {
  if (!w->build_head) return;
  pthread_mutex_lock(&w->lock);
  append_locked(w, w->build_head, w->build_tail);
  pthread_mutex_unlock(&w->lock);
  w->build_head = w->build_tail = NULL;
}

/* ------------------------------------------------------------ the thread */

/* 0, or the store's code for a change it refused. */
static int run_op(gam_store *s, const gam_op *op) {
  const uint64_t *n = op->num;
  switch (op->kind) {
  case OP_NODE_REGISTER:
    return gam_store_node_register(s, op->str[0], op->str[1], n[0]);
  case OP_NODE_SET_STATE:
    return gam_store_node_set_state(s, op->str[0], (gam_node_state)op->small,
                                    n[0]);
  case OP_NODE_SET_DRAINED:
    return gam_store_node_set_drained(s, op->str[0], op->small != 0);
  case OP_NODE_SET_REPORTED:
    return gam_store_node_set_reported(s, op->str[0],
                                       (const char *const *)op->list,
                                       op->n_list);
  case OP_LABEL_OVERRIDE:
    return gam_store_label_override(s, op->str[0], op->str[1],
                                    op->small != 0);
  case OP_LABEL_CLEAR:
    return gam_store_label_clear(s, op->str[0], op->str[1]);
  case OP_APP_INSERT:
    return gam_store_app_insert(s, n[0], op->str[0], op->str[1],
                                (unsigned)op->small, n[1]);
  case OP_APP_SET_STATE:
    return gam_store_app_set_state(s, n[0], (gam_app_state)op->small, n[1]);
  case OP_LEASE_INSERT:
    return gam_store_lease_insert(s, n[0], n[1], op->str[0], op->str[1], n[2],
                                  n[3]);
  case OP_LEASE_END:
    return gam_store_lease_end(s, n[0], op->str[0], n[1]);
  case OP_EVENT:
    return gam_store_event(s, n[0], op->str[0], op->str[1], n[1], op->str[2]);
  case OP_READ_EVENTS:
    break;
  }
  return 0;
}

/* A refusal (the change is wrong) skips that change; anything else (the
 * disk, memory) means the transaction cannot be trusted. */
static bool refusal(int rc) {
  return rc == EMBER_EINVAL || rc == EMBER_ENOTFOUND;
}

static void commit_batch(gam_writer *w, gam_op *batch) {
  gam_store *s = w->store;
  uint64_t last = 0, changes = 0, refused = 0, t0 = clock_now_ns();
  bool writes = false, broken = false;
  for (gam_op *op = batch; op; op = op->next)
    if (op->kind != OP_READ_EVENTS) writes = true;
  pthread_mutex_lock(&w->lock);
  bool failed = w->failed;
  pthread_mutex_unlock(&w->lock);
  if (writes && !failed) {
    broken = gam_store_begin(s) != 0;
    for (gam_op *op = batch; op && !broken; op = op->next) {
      if (op->kind == OP_READ_EVENTS) continue;
      int rc = run_op(s, op);
      if (rc && !refusal(rc)) broken = true;
      else if (rc) refused++;
      else changes++;
      last = op->seq;
    }
    if (!broken && gam_store_commit(s) != 0) broken = true;
    if (broken) {
      char why[sizeof w->why - 64];
      snprintf(why, sizeof why, "%s", gam_store_error(s));
      gam_store_rollback(s);
      fail(w, "state store: committing failed: %s", why);
    }
  }
  uint64_t ns = clock_now_ns() - t0;
  for (gam_op *op = batch; op; op = op->next)
    if (op->kind == OP_READ_EVENTS)
      op->read->rc = broken || failed
                         ? EMBER_EIO
                         : gam_store_events(s, op->read->limit, op->read->fn,
                                            op->read->user);
  pthread_mutex_lock(&w->lock);
  if (writes && !broken && !failed) {
    atomic_store(&w->durable, last);
    w->stats.changes += changes;
    w->stats.refused += refused;
    w->stats.commits++;
    w->stats.commit_ns += ns;
  }
  for (gam_op *op = batch; op; op = op->next)
    if (op->kind == OP_READ_EVENTS) op->read->done = true;
  pthread_cond_broadcast(&w->done);
  if (writes && w->on_durable) w->on_durable(w->user);
  pthread_mutex_unlock(&w->lock);
  while (batch) {
    gam_op *next = batch->next;
    op_free(batch);
    batch = next;
  }
}

static void *writer_main(void *arg) {
  gam_writer *w = arg;
  pthread_mutex_lock(&w->lock);
  for (;;) {
    while (!w->queue_head && !w->stopping)
      pthread_cond_wait(&w->wake, &w->lock);
    if (!w->queue_head) break;  /* stopping, nothing left */
    gam_op *batch = w->queue_head;
    w->queue_head = w->queue_tail = NULL;
    pthread_mutex_unlock(&w->lock);
    commit_batch(w, batch);
    pthread_mutex_lock(&w->lock);
  }
  pthread_mutex_unlock(&w->lock);
  return NULL;
}

/* ------------------------------------------------------------ life */

int gam_writer_start(gam_store *s, gam_writer **out, char *err,
                     size_t err_len) {
  *out = NULL;
  gam_writer *w = calloc(1, sizeof *w);
  if (!w) {
    snprintf(err, err_len, "out of memory");
    return EMBER_ENOMEM;
  }
  w->store = s;
  pthread_mutex_init(&w->lock, NULL);
  pthread_cond_init(&w->wake, NULL);
  pthread_cond_init(&w->done, NULL);
  if (pthread_create(&w->thread, NULL, writer_main, w) != 0) {
    snprintf(err, err_len, "cannot start the store's writer thread");
    pthread_mutex_destroy(&w->lock);
    pthread_cond_destroy(&w->wake);
    pthread_cond_destroy(&w->done);
    free(w);
    return EMBER_ENOMEM;
  }
  *out = w;
  return 0;
}

void gam_writer_stop(gam_writer *w) {
  if (!w) return;
  gam_writer_publish(w);
  pthread_mutex_lock(&w->lock);
  w->stopping = true;
  pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->lock);
  pthread_join(w->thread, NULL);
  pthread_mutex_destroy(&w->lock);
  pthread_cond_destroy(&w->wake);
  pthread_cond_destroy(&w->done);
  free(w);
}

void gam_writer_set_notify(gam_writer *w, void (*on_durable)(void *user),
                           void *user) {
  pthread_mutex_lock(&w->lock);
  w->on_durable = on_durable;
  w->user = user;
  pthread_mutex_unlock(&w->lock);
}

uint64_t gam_writer_queued(gam_writer *w) { return atomic_load(&w->queued); }

uint64_t gam_writer_durable(gam_writer *w) { return atomic_load(&w->durable); }

int gam_writer_wait(gam_writer *w, uint64_t seq) {
  pthread_mutex_lock(&w->lock);
  while (atomic_load(&w->durable) < seq && !w->failed)
    pthread_cond_wait(&w->done, &w->lock);
  int rc = atomic_load(&w->durable) >= seq ? 0 : EMBER_EIO;
  pthread_mutex_unlock(&w->lock);
  return rc;
}

bool gam_writer_failed(gam_writer *w, char *why, size_t why_len) {
  pthread_mutex_lock(&w->lock);
  bool failed = w->failed;
  if (failed && why && why_len) snprintf(why, why_len, "%s", w->why);
  pthread_mutex_unlock(&w->lock);
  return failed;
}

void gam_writer_get_stats(gam_writer *w, gam_writer_stats *out) {
  pthread_mutex_lock(&w->lock);
  *out = w->stats;
  pthread_mutex_unlock(&w->lock);
}

int gam_writer_events(gam_writer *w, unsigned limit,
                      int (*fn)(void *user, const gam_store_event_row *row),
                      void *user) {
  read_req req = {.limit = limit, .fn = fn, .user = user};
  gam_op *op = calloc(1, sizeof *op);
  if (!op) return EMBER_ENOMEM;
  op->kind = OP_READ_EVENTS;
  op->read = &req;
  pthread_mutex_lock(&w->lock);
  append_locked(w, op, op);
  while (!req.done) pthread_cond_wait(&w->done, &w->lock);
  pthread_mutex_unlock(&w->lock);
  return req.rc;
}
