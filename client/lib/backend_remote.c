/*
 * backend_remote.c - the remote back end: a NAM over remote.c's
 * connection. Blocks go with the tasks that need them (a memfd over a unix
 * socket, the bytes over TCP); the caller of ember_run reads its own
 * result, other results come back on the connection's reader thread.
 * When the NAM cannot run a task, it falls back to the CPU in-process (the
 * embedded back end's submit), or, if it cannot run there either, waits
 * parked for a reconnect within the window and is sent again.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "backend.h"
#include "block_mem.h"
#include "clock.h"
#include "introspect.h"
#include "last_error.h"
#include "poll_score.h"
#include "remote.h"

/* A BlockOp waiting for its BlockReply. */
typedef struct nam_op {
  struct nam_op *next;
  uint64_t id;
  ember_block *block;
  ember__block_op_done *done;
  void *user;
} nam_op;

/* c->backend_data. Under c->lock unless said otherwise. */
typedef struct remote {
  ember__remote link;        /* first: the connection's events get it */
  int unix_socket;           /* blocks are memfds the NAM maps */
  unsigned inflight;
  unsigned async_inflight;   /* of them, not ember_run's: the reader reads */
  unsigned slot_waiters;     /* submitters waiting for a free slot */
  ember_task *sync_waiters;  /* ember_run callers waiting (wait_next) */
  uint64_t wait_avg_ns;      /* how long they waited for results lately */
  poll_score polling;        /* whether polling for them pays (plan_wait) */
  ember_task *inflight_tasks; /* uthash on task id; NULL when empty */
  uint64_t next_task_id;
  pthread_cond_t slot_cv;    /* in-flight count went down, or closing */
  /* the reconnect window: tasks that cannot run in-process wait here,
   * parked, while there is no connection */
  uint64_t window_ns;        /* 0: off */
  ember_task *parked_tasks;  /* uthash on task id, in park order */
  pthread_cond_t park_cv;    /* parked, connected, or closing */
  pthread_t resubmitter;     /* reconnects and sends the parked tasks */
  int resubmitter_running;
  nam_op *block_ops;         /* reads, syncs and restores */
  uint64_t next_op_id;
} remote;

static remote *remote_of(ember_client *c) { return c->backend_data; }

static void lost_task(ember_client *c, ember_task *t, int why,
                      const char *message);

/* ---- tasks in flight (client->lock held) -------------------------------- */

static int inflight_add(ember_client *c, ember_task *t) {
  remote *rb = remote_of(c);
  unsigned count = HASH_COUNT(rb->inflight_tasks);
  HASH_ADD(hh, rb->inflight_tasks, id, sizeof t->id, t);
  if (HASH_COUNT(rb->inflight_tasks) == count) return EMBER_ENOMEM;
  rb->inflight++;
  if (!t->sync) rb->async_inflight++;
  t->on_wire = 1;
  return 0;
}

static ember_task *inflight_take(ember_client *c, uint64_t id) {
  remote *rb = remote_of(c);
  ember_task *t = NULL;
  HASH_FIND(hh, rb->inflight_tasks, &id, sizeof id, t);
  if (!t) return NULL;
  HASH_DEL(rb->inflight_tasks, t);
  rb->inflight--;
  if (!t->sync) rb->async_inflight--;
  t->on_wire = 0;
  pthread_cond_broadcast(&rb->slot_cv);
  return t;
}

/* out and state blocks, and inputs that are a task's out blocks, live on
 * the NAM: a task that has them cannot fall back */
static int has_remote_blocks(const ember_task *t) {
  if (t->n_states || t->n_outputs) return 1;
  for (size_t i = 0; i < t->n_inputs; i++)
    if (t->inputs[i]->is_output) return 1;
  return 0;
}

/* the CPU in-process can run t (fallback allowed, no NAM-only blocks, no
 * platform kind it lacks, an accelerator it knows) */
static int can_fall_back(const ember_task *t) {
  /* the in-process engine has cpu platforms only */
  return !t->client->opts.no_fallback && t->acc &&
         !has_remote_blocks(t) &&
         (!t->platform_req[0] || strcmp(t->platform_req, "cpu") == 0);
}

/* The NAM cannot run t (why, message): the CPU in-process runs it, if
 * allowed and t's blocks are here. */
static void fall_back(ember_task *t, int why, const char *message) {
  ember_client *c = t->client;
  if (has_remote_blocks(t)) {
    /* its out or state blocks live on the NAM: the CPU here has no copy */
    char msg[600];
    snprintf(msg, sizeof msg, "the task's out or state blocks live on the "
             "NAM, which cannot run it (%s)", message ? message : "");
    c->task_done(t, EMBER_ESTATE, msg, NULL, 0, NULL, NULL);
    return;
  }
  if (c->opts.no_fallback) {
    c->task_done(t, why, message, NULL, 0, NULL, NULL);
    return;
  }
  t->info.fell_back = 1;
  ember__backend_embedded.submit(t);
}

/* A PutBlock for b into w; *fd_out: its memfd to pass, or -1. */
static int append_put(ember_block *b, proto_wbuf *w, int *fd_out) {
  Ember__PutBlock m = EMBER__PUT_BLOCK__INIT;
  m.block_id = b->id;
  m.size = b->size;
  if (b->flags) {
    m.has_flags = 1;
    m.flags = b->flags;
  }
  *fd_out = -1;
  ember_client *c = b->client;
  remote *rb = remote_of(c);
  pthread_mutex_lock(&c->lock);
  /* made inline-sized for a NAM that took it; this one does not */
  int rc = b->memfd < 0 && rb->unix_socket &&
                   b->size > rb->link.unix_inline_max
               ? ember__block_mem_add_memfd(b)
               : 0;
  pthread_mutex_unlock(&c->lock);
  if (rc) return rc;
  if (b->memfd >= 0) {
    m.has_transport = 1;
    m.transport = EMBER__PUT_BLOCK__TRANSPORT__FD;
    *fd_out = b->memfd;
  } else {
    const uint8_t *data = ember__block_bytes(b);
    m.has_data = 1;
    m.data.data = (uint8_t *)data;
    m.data.len = b->size;
  }
  return proto_wbuf_append(w, EMBER__MSG_TYPE__MSG_PUT_BLOCK, &m.base,
                           remote_of(b->client)->link.max_frame);
}

/* Send the task's blocks that this connection lacks, then the Submit. */
static int send_task(ember_client *c, ember_task *t, uint64_t gen) {
  ember__remote *r = &remote_of(c)->link;
  proto_wbuf w = {0};
  int fds[16];
  size_t nfds = 0;
  int rc = 0;
  pthread_mutex_lock(&r->send_lock);
  for (size_t i = 0; rc == 0 && i < t->n_inputs + t->n_states; i++) {
    ember_block *b = i < t->n_inputs ? t->inputs[i] : t->states[i - t->n_inputs];
    if (b->put_gen == gen) continue;
    if (b->is_output || (b->put_gen && (b->flags & EMBER_BLOCK_STATE))) {
      rc = EMBER_ESTATE; /* it lived on a connection that is gone */
      break;
    }
    int fd = -1;
    rc = append_put(b, &w, &fd);
    if (fd >= 0) fds[nfds++] = fd;
  }
  uint64_t state_ids[ACC_MAX_STATES], out_ids[ACC_MAX_OUTPUTS];
  for (size_t i = 0; i < t->n_states; i++) state_ids[i] = t->states[i]->id;
  for (size_t i = 0; i < t->n_outputs; i++) out_ids[i] = t->outputs[i]->id;
  Ember__Submit s = EMBER__SUBMIT__INIT;
  uint64_t ids[16];
  for (size_t i = 0; i < t->n_inputs; i++) ids[i] = t->inputs[i]->id;
  s.task_id = t->id;
  s.accelerator = t->accelerator;
  if (t->params_len) {
    s.has_params = 1;
    s.params.data = t->params;
    s.params.len = t->params_len;
  }
  s.n_input_blocks = t->n_inputs;
  s.input_blocks = ids;
  if (t->priority) {
    s.has_priority = 1;
    s.priority = t->priority;
  }
  if (t->platform_req[0]) s.platform = t->platform_req;
  if (t->platform_pref[0]) s.prefer_platform = t->platform_pref;
  s.n_state_blocks = t->n_states;
  s.state_blocks = state_ids;
  s.n_output_blocks = t->n_outputs;
  s.output_blocks = out_ids;
  if (rc == 0) rc = proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_SUBMIT, &s.base,
                                      r->max_frame);
  /* the blocks are on this connection once sent; mark them first: the
   * result may come back (and release the inputs) before the send returns.
   * A failed send shuts the connection down, so the marks then go stale. */
  if (rc == 0) {
    for (size_t i = 0; i < t->n_inputs; i++) t->inputs[i]->put_gen = gen;
    for (size_t i = 0; i < t->n_states; i++) t->states[i]->put_gen = gen;
    for (size_t i = 0; i < t->n_outputs; i++) t->outputs[i]->put_gen = gen;
    rc = ember__remote_send_locked(r, &w, fds, nfds);
  }
  pthread_mutex_unlock(&r->send_lock);
  proto_wbuf_free(&w);
  return rc;
}

static void task_send(ember_client *c, ember_task *t) {
  remote *rb = remote_of(c);
  ember__remote *r = &rb->link;
  pthread_mutex_lock(&c->lock);
  while (r->fd >= 0 && !c->closing && rb->inflight >= r->max_inflight) {
    rb->slot_waiters++; /* backpressure: someone must read the results */
    ember__remote_kick(r);
    pthread_cond_wait(&rb->slot_cv, &c->lock);
    rb->slot_waiters--;
  }
  if (r->fd < 0 || c->closing) {
    pthread_mutex_unlock(&c->lock);
    lost_task(c, t, EMBER_ECONNLOST, "connection to the NAM lost");
    return;
  }
  t->id = rb->next_task_id++;
  uint64_t gen = r->gen;
  int rc = inflight_add(c, t);
  pthread_mutex_unlock(&c->lock);
  if (rc) {
    c->task_done(t, rc, "out of memory", NULL, 0, NULL, NULL);
    return;
  }
  int rc2 = send_task(c, t, gen);
  pthread_mutex_lock(&c->lock);
  ember__remote_kick(r); /* its result needs a reader */
  pthread_mutex_unlock(&c->lock);
  if (rc2 == EMBER_ENOMEM || rc2 == EMBER_ESTATE) {
    pthread_mutex_lock(&c->lock);
    ember_task *mine = inflight_take(c, t->id);
    pthread_mutex_unlock(&c->lock);
    if (mine)
      c->task_done(t, rc2, rc2 == EMBER_ESTATE
                               ? "an out or state block lived on an earlier "
                                 "connection to the NAM: it is lost"
                               : "out of memory",
                   NULL, 0, NULL, NULL);
  }
  /* a send that failed shut the socket down: the reader hands every
   * in-flight task, this one included, to lost_task */
}

static void remote_submit(ember_task *t) {
  ember_client *c = t->client;
  if (ember__remote_ensure(&remote_of(c)->link) != 0) {
    lost_task(c, t, EMBER_ECONNECT, ember_last_error());
    return;
  }
  task_send(c, t);
}

/* ---- block ops: replies come to the reader ---------------------------- */

static void nam_op_done(nam_op *o, int status, const void *data, size_t size,
                        uint64_t version) {
  o->done(o->user, status, data, size, version);
  free(o);
}

static void on_block_reply(ember_client *c, const Ember__BlockReply *m) {
  remote *rb = remote_of(c);
  pthread_mutex_lock(&c->lock);
  nam_op **pp = &rb->block_ops, *o = NULL;
  while (*pp && (*pp)->id != m->request_id) pp = &(*pp)->next;
  if (*pp) {
    o = *pp;
    *pp = o->next;
  }
  pthread_mutex_unlock(&c->lock);
  if (!o) return; /* not ours: ignore */
  if (m->status == 0 && m->has_size && o->block->is_output)
    o->block->size = m->size;
  if (m->status) ember__client_set_error("%s", m->message ? m->message : "");
  nam_op_done(o, m->status, m->has_data ? m->data.data : NULL,
              m->has_data ? m->data.len : (m->has_size ? m->size : 0),
              m->has_version ? m->version : 0);
}

static void block_ops_fail_all(ember_client *c, int why) {
  remote *rb = remote_of(c);
  pthread_mutex_lock(&c->lock);
  nam_op *list = rb->block_ops;
  rb->block_ops = NULL;
  pthread_mutex_unlock(&c->lock);
  while (list) {
    nam_op *o = list;
    list = o->next;
    nam_op_done(o, why, NULL, 0, 0);
  }
}

/* The connection is gone (reader thread): every task still in flight falls
 * back. */
static void on_lost(ember__remote *link, const char *why) {
  ember_client *c = link->client;
  remote *rb = remote_of(c);
  pthread_mutex_lock(&c->lock);
  ember_task **orphans = NULL, *t, *next;
  size_t n = 0;
  if (rb->inflight) orphans = calloc(rb->inflight, sizeof *orphans);
  if (orphans)
    HASH_ITER(hh, rb->inflight_tasks, t, next) {
      HASH_DEL(rb->inflight_tasks, t);
      t->on_wire = 0;
      orphans[n++] = t;
    }
  rb->inflight = 0;
  rb->async_inflight = 0;
  int closing = c->closing;
  pthread_cond_broadcast(&rb->slot_cv);
  pthread_mutex_unlock(&c->lock);
  /* out and state blocks lived on that connection: their reads fail */
  block_ops_fail_all(c, closing ? EMBER_ECANCELED : EMBER_ESTATE);
  for (size_t i = 0; i < n; i++) {
    if (closing)
      c->task_done(orphans[i], EMBER_ECANCELED, "client closed", NULL, 0,
                   NULL, NULL);
    else
      lost_task(c, orphans[i], EMBER_ECONNLOST, why);
  }
  free(orphans);
}

static void on_result(ember_client *c, const Ember__Result *m) {
  pthread_mutex_lock(&c->lock);
  ember_task *t = inflight_take(c, m->task_id);
  pthread_mutex_unlock(&c->lock);
  if (!t) return; /* canceled and already completed */
  ember_task_info info = {0};
  if (m->times) {
    info.queue_ns = m->times->queue_ns;
    info.exec_ns = m->times->exec_ns;
    info.server_ns = m->times->total_ns;
    info.stage_in_ns = m->times->stage_in_ns;
    info.stage_out_ns = m->times->stage_out_ns;
    info.attempts = m->times->attempts;
  }
  info.platform_kind = m->platform_kind;
  /* every platform that could run it failed: the CPU code still can,
   * unless the app required a device */
  if (m->status == EMBER_EPLATFORM && !t->platform_req[0] &&
      !has_remote_blocks(t)) {
    fall_back(t, m->status, m->message);
    return;
  }
  for (size_t i = 0; m->status == 0 && i < m->n_outputs; i++)
    for (size_t k = 0; k < t->n_outputs; k++)
      if (t->outputs[k]->id == m->outputs[i]->block_id)
        t->outputs[k]->size = m->outputs[i]->size;
  uint8_t *out = NULL;
  if (m->has_output && m->output.len) {
    out = malloc(m->output.len);
    if (!out) {
      fall_back(t, EMBER_ENOMEM, "out of memory for the result");
      return;
    }
    memcpy(out, m->output.data, m->output.len);
  }
  c->task_done(t, m->status, m->message, out,
               m->has_output ? m->output.len : 0, m->platform, &info);
}

static void on_error(ember_client *c, Ember__Error *e) {
  if (!e->has_task_id) {
    /* about a block or the connection: the task that needs it will say */
    ember__client_set_error("NAM: %s", e->message);
    return;
  }
  pthread_mutex_lock(&c->lock);
  ember_task *t = inflight_take(c, e->task_id);
  pthread_mutex_unlock(&c->lock);
  if (!t) return;
  /* the NAM cannot run it now: the CPU can (but a platform kind the app
   * required and the NAM lacks is the app's error, with the NAM's list) */
  if ((e->code == EMBER_ENOPLATFORM && t->platform_req[0]) ||
      has_remote_blocks(t)) /* its blocks are on the NAM: no fallback */
    c->task_done(t, e->code, e->message, NULL, 0, NULL, NULL);
  else if (e->code == EMBER_ENOPLATFORM || e->code == EMBER_ESHUTDOWN ||
      e->code == EMBER_EBUSY)
    fall_back(t, e->code, e->message);
  else
    c->task_done(t, e->code, e->message, NULL, 0, NULL, NULL);
}

/* ---- the reconnect window ---------------------------------------------- */

static void *resubmitter_main(void *arg);

/* client->lock held */
static void park(ember_client *c, ember_task *t) {
  remote *rb = remote_of(c);
  if (!t->id) t->id = rb->next_task_id++; /* never sent: no id yet */
  t->parked = 1;
  HASH_ADD(hh, rb->parked_tasks, id, sizeof t->id, t);
  if (!rb->resubmitter_running &&
      pthread_create(&rb->resubmitter, NULL, resubmitter_main, c) == 0)
    rb->resubmitter_running = 1;
  pthread_cond_broadcast(&rb->park_cv);
}

/* t cannot reach the NAM (why, message): it falls back to the CPU
 * in-process if it can, else waits parked for a reconnect within the
 * window, else fails. */
static void lost_task(ember_client *c, ember_task *t, int why,
                      const char *message) {
  remote *rb = remote_of(c);
  ember__remote *r = &rb->link;
  pthread_mutex_lock(&c->lock);
  int closing = c->closing;
  int waits = !closing && rb->window_ns && !r->lease_ended &&
              !can_fall_back(t) && !has_remote_blocks(t);
  if (waits && !r->down_since_ns) r->down_since_ns = clock_now_ns();
  uint64_t down_ns = clock_now_ns() - r->down_since_ns;
  int in_window = waits && down_ns < rb->window_ns;
  if (in_window) park(c, t);
  /* park may fail to start the thread: then nothing would send it again */
  int parked = in_window && rb->resubmitter_running;
  if (in_window && !parked) {
    HASH_DEL(rb->parked_tasks, t);
    t->parked = 0;
  }
  unsigned long long window_ms = rb->window_ns / 1000000u;
  pthread_mutex_unlock(&c->lock);
  if (parked) return;
  if (closing) {
    c->task_done(t, EMBER_ECANCELED, "client closed", NULL, 0, NULL, NULL);
  } else if (in_window) {
    c->task_done(t, EMBER_ENOMEM, "cannot start the thread that waits for "
                 "the NAM", NULL, 0, NULL, NULL);
  } else if (waits) {
    char msg[600];
    snprintf(msg, sizeof msg, "no NAM at %s for %llu ms, over the reconnect "
             "window of %llu ms (%s)", c->address,
             (unsigned long long)(down_ns / 1000000u), window_ms,
             message && message[0] ? message : ember_strerror(why));
    c->task_done(t, EMBER_ECONNLOST, msg, NULL, 0, NULL, NULL);
  } else {
    fall_back(t, why, message); /* as without a window */
  }
}

static int unpark(ember_client *c, ember_task *t) {
  remote *rb = remote_of(c);
  pthread_mutex_lock(&c->lock);
  int was = t->parked;
  if (was) {
    HASH_DEL(rb->parked_tasks, t);
    t->parked = 0;
  }
  pthread_mutex_unlock(&c->lock);
  return was;
}

/* Every parked task, in park order, out of the table (client->lock held);
 * NULL and *n 0 when none or out of memory (they stay parked then). */
static ember_task **take_parked(ember_client *c, size_t *n) {
  remote *rb = remote_of(c);
  *n = HASH_COUNT(rb->parked_tasks);
  ember_task **all = *n ? calloc(*n, sizeof *all) : NULL;
  if (!all) {
    *n = 0;
    return NULL;
  }
  ember_task *t, *next;
  size_t i = 0;
  HASH_ITER(hh, rb->parked_tasks, t, next) {
    HASH_DEL(rb->parked_tasks, t);
    t->parked = 0;
    all[i++] = t;
  }
  return all;
}

/* Wait on park_cv until the monotonic time until_ns at the latest. */
static void wait_until(ember_client *c, uint64_t until_ns) {
  remote *rb = remote_of(c);
  uint64_t now = clock_now_ns();
  if (until_ns <= now) return;
  uint64_t left = until_ns - now;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t nsec = (uint64_t)ts.tv_nsec + left % 1000000000u;
  ts.tv_sec += (time_t)(left / 1000000000u + nsec / 1000000000u);
  ts.tv_nsec = (long)(nsec % 1000000000u);
  pthread_cond_timedwait(&rb->park_cv, &c->lock, &ts);
}

/* One thread per client, started at the first park: it reconnects with the
 * backoff of ember__remote_ensure, sends the parked tasks again (their input
 * blocks go with them: the new NAM has none), and fails them when the window
 * is over. */
static void *resubmitter_main(void *arg) {
  ember_client *c = arg;
  remote *rb = remote_of(c);
  ember__remote *r = &rb->link;
  pthread_mutex_lock(&c->lock);
  while (!c->closing) {
    if (!rb->parked_tasks) {
      pthread_cond_wait(&rb->park_cv, &c->lock);
      continue;
    }
    size_t n = 0;
    ember_task **all = NULL;
    uint64_t now = clock_now_ns();
    if (r->fd >= 0 || r->lease_ended ||
        now - r->down_since_ns >= rb->window_ns) {
      int resend = r->fd >= 0;
      int lease_ended = r->lease_ended;
      char why[sizeof r->down_why];
      snprintf(why, sizeof why, "%s", r->down_why);
      all = take_parked(c, &n);
      if (resend) c->stats.tasks_resubmitted += n;
      pthread_mutex_unlock(&c->lock);
      for (size_t i = 0; i < n; i++) {
        if (resend)
          task_send(c, all[i]); /* lost again: parked again */
        else if (lease_ended)
          fall_back(all[i], EMBER_ECONNLOST, "the lease ended");
        else
          lost_task(c, all[i], EMBER_ECONNLOST, why);
      }
      free(all);
      pthread_mutex_lock(&c->lock);
      if (!all) wait_until(c, now + 1000000u); /* out of memory: retry */
      continue;
    }
    uint64_t next = r->last_attempt_ns + r->backoff_ns;
    if (now < next) {
      uint64_t end = r->down_since_ns + rb->window_ns;
      wait_until(c, next < end ? next : end);
      continue;
    }
    pthread_mutex_unlock(&c->lock);
    if (ember__remote_ensure(r) != 0) {
      pthread_mutex_lock(&c->lock);
      snprintf(r->down_why, sizeof r->down_why, "%s", ember_last_error());
      continue;
    }
    pthread_mutex_lock(&c->lock);
  }
  size_t n;
  ember_task **all = take_parked(c, &n);
  pthread_mutex_unlock(&c->lock);
  for (size_t i = 0; i < n; i++)
    c->task_done(all[i], EMBER_ECANCELED, "client closed", NULL, 0, NULL,
                 NULL);
  free(all);
  return NULL;
}

static void stop_resubmitter(ember_client *c) {
  remote *rb = remote_of(c);
  pthread_mutex_lock(&c->lock);
  int running = rb->resubmitter_running;
  pthread_cond_broadcast(&rb->park_cv);
  pthread_mutex_unlock(&c->lock);
  if (running) pthread_join(rb->resubmitter, NULL);
  rb->resubmitter_running = 0;
}

/* ---- the table --------------------------------------------------------- */

static void on_message(ember__remote *link, uint8_t type, ProtobufCMessage *m) {
  ember_client *c = link->client;
  if (type == EMBER__MSG_TYPE__MSG_RESULT)
    on_result(c, (const Ember__Result *)m);
  else if (type == EMBER__MSG_TYPE__MSG_ERROR)
    on_error(c, (Ember__Error *)m);
  else if (type == EMBER__MSG_TYPE__MSG_BLOCK_REPLY)
    on_block_reply(c, (const Ember__BlockReply *)m);
}

/* client->lock held */
static void on_connected(ember__remote *link) {
  pthread_cond_broadcast(&((remote *)link)->park_cv); /* parked tasks can go */
}

/* client->lock held: replies that no ember_run caller will read */
static int needs_reader(ember__remote *link) {
  remote *rb = (remote *)link;
  return rb->async_inflight || rb->block_ops || rb->slot_waiters;
}

/* client->lock held: an ember_run caller whose task is on the wire reads */
static int offer_read(ember__remote *link) {
  remote *rb = (remote *)link;
  for (ember_task *t = rb->sync_waiters; t; t = t->wait_next) {
    if (!t->on_wire) continue;
    pthread_mutex_lock(&t->mu);
    t->read_offer = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    return 1;
  }
  return 0;
}

static const ember__remote_events events = {
  .on_message = on_message,
  .on_connected = on_connected,
  .on_lost = on_lost,
  .needs_reader = needs_reader,
  .offer_read = offer_read,
};

/* client->lock held: t's caller waits (sync_waiters) or stops waiting */
static void enlist_waiter(remote *rb, ember_task *t) {
  t->wait_next = rb->sync_waiters;
  rb->sync_waiters = t;
}

static void delist_waiter(remote *rb, ember_task *t) {
  ember_task **pp = &rb->sync_waiters;
  while (*pp && *pp != t) pp = &(*pp)->wait_next;
  if (*pp) *pp = t->wait_next;
}

/* How an ember_run caller waits for its result: a thread woken from sleep
 * starts tens of us late on a busy or virtual machine, more than a small
 * task takes, so it polls instead for the part of the wait when the result
 * should come. From the recent waits (a moving average): one up to
 * SPIN_WINDOW_NS is polled for from the start, for twice its length; a
 * longer one is slept through (ppoll) but for its last SPIN_WINDOW_NS / 2,
 * then polled for up to SPIN_WINDOW_NS; one over SPIN_MAX_WAIT_NS is slept
 * through. Polling stops while it does not pay (poll_score.h: a result that
 * came during the first sleep says the guess missed, not the polling). */
#define SPIN_WINDOW_NS 60000u
#define SPIN_MIN_NS 10000u
#define SPIN_MAX_WAIT_NS 2000000u
#define SPIN_PROBE_EVERY 32

/* client->lock held; 0: sleep until it comes */
static int plan_wait(remote *rb, ember__remote_wait *w) {
  *w = (ember__remote_wait){0};
  if (!poll_score_try(&rb->polling, SPIN_PROBE_EVERY)) return 0;
  uint64_t avg = rb->wait_avg_ns;
  if (avg > SPIN_MAX_WAIT_NS) return 0;
  if (avg <= SPIN_WINDOW_NS) {
    w->spin_ns = 2 * avg < SPIN_MIN_NS ? SPIN_MIN_NS : 2 * avg;
  } else {
    w->sleep_ns = avg - SPIN_WINDOW_NS / 2;
    w->spin_ns = SPIN_WINDOW_NS;
  }
  return 1;
}

static void learn_wait(remote *rb, const ember__remote_wait *w,
                       uint64_t waited_ns) {
  /* one wait far longer than the rest (the NAM busy with another client
   * a moment) counts as 4 times the average at most, or it would make the
   * next ones sleep too long */
  uint64_t cap = 4 * rb->wait_avg_ns + SPIN_MIN_NS;
  poll_average_add(&rb->wait_avg_ns, waited_ns < cap ? waited_ns : cap);
  if (!w || w->outcome == EMBER__WAIT_EARLY) return;
  if (w->outcome == EMBER__WAIT_CAUGHT)
    poll_score_caught(&rb->polling);
  else
    poll_score_missed(&rb->polling);
}

/* ember_run's wait: while t is on the wire and nobody reads, this thread
 * reads (every result it finds goes where it belongs) until t's has come;
 * otherwise it sleeps until t settles or a reader hands it the reading. */
static void remote_wait_sync(ember_task *t) {
  ember_client *c = t->client;
  remote *rb = remote_of(c);
  ember__remote *r = &rb->link;
  pthread_mutex_lock(&c->lock);
  for (;;) {
    if (t->on_wire && ember__remote_lead(r)) {
      int lost = 0;
      ember__remote_wait plan;
      ember__remote_wait *w = plan_wait(rb, &plan) ? &plan : NULL;
      uint64_t since = clock_now_ns();
      for (int first = 1; !lost && t->on_wire; first = 0) {
        pthread_mutex_unlock(&c->lock);
        lost = ember__remote_read(r, first ? w : NULL);
        pthread_mutex_lock(&c->lock);
      }
      if (!lost) {
        learn_wait(rb, w, clock_now_ns() - since);
        ember__remote_unlead(r);
      }
      continue;
    }
    enlist_waiter(rb, t);
    pthread_mutex_unlock(&c->lock);
    pthread_mutex_lock(&t->mu);
    while (!t->settled && !t->read_offer) pthread_cond_wait(&t->cv, &t->mu);
    t->read_offer = 0;
    int settled = t->settled;
    pthread_mutex_unlock(&t->mu);
    pthread_mutex_lock(&c->lock);
    delist_waiter(rb, t);
    if (settled) break;
  }
  pthread_mutex_unlock(&c->lock);
}

static int remote_open(ember_client *c, const ember__lease *lease) {
  remote *rb = calloc(1, sizeof *rb);
  if (!rb) return EMBER_ENOMEM;
  c->backend_data = rb;
  rb->unix_socket = strncmp(c->address, "unix:", 5) == 0;
  rb->next_task_id = 1;
  rb->polling.points = 1;
  long ms = c->opts.reconnect_window_ms; /* client.c resolved it */
  rb->window_ns = ms > 0 ? (uint64_t)ms * 1000000u : 0;
  pthread_cond_init(&rb->slot_cv, NULL);
  pthread_cond_init(&rb->park_cv, NULL);
  ember__remote *r = &rb->link;
  int rc = ember__remote_init(r, c, lease, &events);
  if (rc) return rc;
  pthread_mutex_lock(&r->connect_lock);
  rc = ember__remote_connect(r);
  pthread_mutex_unlock(&r->connect_lock);
  /* unreachable is fine: tasks fall back (or wait out the reconnect
   * window) until the NAM is back */
  if (rc == EMBER_ECONNECT && !c->opts.no_fallback) {
    r->down_since_ns = clock_now_ns();
    snprintf(r->down_why, sizeof r->down_why, "%s", ember_last_error());
    rc = 0;
  }
  return rc;
}

/* Parked and in-flight tasks end as EMBER_ECANCELED, then the fallback's. */
static void remote_close(ember_client *c) {
  remote *rb = remote_of(c);
  if (rb) {
    pthread_mutex_lock(&c->lock);
    pthread_cond_broadcast(&rb->slot_cv); /* a resubmit waiting for a slot */
    pthread_mutex_unlock(&c->lock);
    stop_resubmitter(c);
    ember__remote_shutdown(&rb->link);
  }
  ember__backend_embedded.close(c);
  if (!rb) return;
  HASH_CLEAR(hh, rb->inflight_tasks); /* empty by now: frees the table */
  ember__remote_destroy(&rb->link);
  pthread_cond_destroy(&rb->slot_cv);
  pthread_cond_destroy(&rb->park_cv);
  free(rb);
  c->backend_data = NULL;
}

static int remote_connected(ember_client *c) {
  pthread_mutex_lock(&c->lock);
  int up = remote_of(c)->link.fd >= 0;
  pthread_mutex_unlock(&c->lock);
  return up;
}

static void remote_lease_ended(ember_client *c) {
  remote *rb = remote_of(c);
  pthread_mutex_lock(&c->lock);
  rb->link.lease_ended = 1;
  pthread_cond_broadcast(&rb->park_cv); /* parked tasks fall back now */
  /* the reader sees the end of the stream and hands the tasks in flight
   * to the fallback */
  if (rb->link.fd >= 0) shutdown(rb->link.fd, SHUT_RDWR);
  pthread_mutex_unlock(&c->lock);
}

/* Over a unix socket the NAM maps the block's memfd: no copy. A small
 * block goes inline instead when the NAM takes it (its Welcome says up to
 * what size): making, sealing, passing and mapping a memfd costs more
 * than copying a few KiB. */
static int remote_alloc_block(ember_block *b, const void *init) {
  remote *rb = remote_of(b->client);
  pthread_mutex_lock(&b->client->lock);
  int as_memfd = rb->unix_socket && b->size > rb->link.unix_inline_max;
  pthread_mutex_unlock(&b->client->lock);
  return as_memfd ? ember__block_mem_memfd(b, init)
                  : ember__block_mem_malloc(b, init);
}

static int remote_seal_block(ember_block *b) {
  return ember__block_mem_seal(b);
}

static const Ember__BlockOp__Op wire_op[] = {
  [EMBER__BLOCK_READ] = EMBER__BLOCK_OP__OP__READ,
  [EMBER__BLOCK_SYNC] = EMBER__BLOCK_OP__OP__SYNC,
  [EMBER__BLOCK_RESTORE] = EMBER__BLOCK_OP__OP__RESTORE,
};

/* A BlockOp to the NAM that has the block; the reply comes to the reader. */
static int remote_block_op(ember_block *b, enum ember__block_op op,
                           ember__block_op_done *done, void *user) {
  ember_client *c = b->client;
  remote *rb = remote_of(c);
  nam_op *o = calloc(1, sizeof *o);
  if (!o) return EMBER_ENOMEM;
  *o = (nam_op){.block = b, .done = done, .user = user};
  pthread_mutex_lock(&c->lock);
  int here = b->put_gen && b->put_gen == rb->link.gen && rb->link.fd >= 0;
  if (here) {
    o->id = ++rb->next_op_id;
    o->next = rb->block_ops;
    rb->block_ops = o;
  }
  pthread_mutex_unlock(&c->lock);
  if (!here) {
    free(o);
    ember__client_set_error("block %llu lived on a NAM connection that is gone",
                            (unsigned long long)b->id);
    return EMBER_ESTATE;
  }
  Ember__BlockOp m = EMBER__BLOCK_OP__INIT;
  m.request_id = o->id;
  m.block_id = b->id;
  m.op = wire_op[op];
  /* a send that failed shut the socket down: the reader fails every op */
  (void)ember__remote_send_msg(&rb->link, EMBER__MSG_TYPE__MSG_BLOCK_OP,
                               &m.base);
  pthread_mutex_lock(&c->lock);
  ember__remote_kick(&rb->link); /* the reader thread reads the reply */
  pthread_mutex_unlock(&c->lock);
  return 0;
}

/* The NAM that has b lets it go. */
static void remote_release_block(ember_block *b) {
  ember_client *c = b->client;
  remote *rb = remote_of(c);
  pthread_mutex_lock(&c->lock);
  int tell_nam = b->put_gen && b->put_gen == rb->link.gen && rb->link.fd >= 0;
  pthread_mutex_unlock(&c->lock);
  if (!tell_nam) return;
  Ember__ReleaseBlock m = EMBER__RELEASE_BLOCK__INIT;
  m.block_id = b->id;
  ember__remote_send_msg(&rb->link, EMBER__MSG_TYPE__MSG_RELEASE_BLOCK,
                         &m.base);
}

static int remote_cancel(ember_task *t) {
  ember_client *c = t->client;
  pthread_mutex_lock(&t->mu);
  int local = t->local != NULL;
  pthread_mutex_unlock(&t->mu);
  if (local) return ember__backend_embedded.cancel(t); /* fell back */
  if (unpark(c, t)) { /* waiting for a reconnect */
    c->task_done(t, EMBER_ECANCELED, "canceled", NULL, 0, NULL, NULL);
    return 0;
  }
  Ember__Cancel m = EMBER__CANCEL__INIT;
  m.task_id = t->id;
  return ember__remote_send_msg(&remote_of(c)->link,
                                EMBER__MSG_TYPE__MSG_CANCEL, &m.base);
}

/* What a fallback left. */
static void remote_task_free(ember_task *t) {
  ember__backend_embedded.task_free(t);
}

static int remote_list(ember_client *c, ember_listing **out) {
  Ember__ListAccelerators req = EMBER__LIST_ACCELERATORS__INIT;
  ProtobufCMessage *reply = NULL;
  int rc = ember__remote_request(&remote_of(c)->link,
                                 EMBER__MSG_TYPE__MSG_LIST_ACCELERATORS,
                                 &req.base,
                                 EMBER__MSG_TYPE__MSG_ACCELERATOR_LIST, &reply);
  if (rc) {
    if (rc == EMBER_ECONNLOST || rc == EMBER_ECONNECT) {
      if (!ember_last_error()[0])
        ember__client_set_error("%s: cannot reach the NAM", c->address);
      rc = EMBER_ECONNECT;
    }
    return rc;
  }
  rc = ember__listing_from_reply((Ember__AcceleratorList *)reply, out);
  protobuf_c_message_free_unpacked(reply, NULL);
  return rc;
}

const ember__backend_ops ember__backend_remote = {
  .name = "remote",
  .open = remote_open,
  .close = remote_close,
  .connected = remote_connected,
  .lease_ended = remote_lease_ended,
  .alloc_block = remote_alloc_block,
  .seal_block = remote_seal_block,
  .block_op = remote_block_op,
  .release_block = remote_release_block,
  .submit = remote_submit,
  .wait_sync = remote_wait_sync,
  .cancel = remote_cancel,
  .task_free = remote_task_free,
  .list_accelerators = remote_list,
};
