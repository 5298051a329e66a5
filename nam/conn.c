/*
 * conn.c - one client connection: reads frames, answers Hello, takes
 * blocks (sealed memfds over unix, inline bytes over TCP and for small
 * blocks over unix), queues tasks (the engine validates them), and sends
 * what the workers do not (conn_reply.c sends most results). Anything a
 * client sends that is wrong gets an Error frame; only a broken stream
 * closes the connection.
 */
#include "server_internal.h"

#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accels.h"
#include "block_cache.h"
#include "clock.h"
#include "ember/ember_errors.h"
#include "lease_check.h"
#include "lease_scope.h"
#include "listing.h"
#include "log.h"

#define REQUIRED_SEALS (F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE)
#define READS_PER_WAKEUP 16

static void on_poll(uv_poll_t *poll, int status, int events);
static void process_frames(nam_conn *c);
static int close_after_flush_pending(nam_conn *c);

/* ---- output ------------------------------------------------------------ */

static uint64_t now_ms(const nam_conn *c) { return uv_now(c->srv->loop); }

uint64_t nam_conn_queued(nam_conn *c) {
  pthread_mutex_lock(&c->send_mu);
  uint64_t queued = c->out.len - c->out.sent;
  pthread_mutex_unlock(&c->send_mu);
  return queued;
}

static void update_poll(nam_conn *c) {
  if (c->closing) return;
  /* nothing more is read once a fatal Error is queued: its bytes would
   * only pile up */
  int paused = c->inflight >= c->srv->limits.max_inflight || c->send_paused ||
               c->close_after_flush;
  int events = (paused ? 0 : UV_READABLE) |
               (nam_conn_queued(c) ? UV_WRITABLE : 0);
  if (events != c->poll_events) {
    /* a frame half read while we did not read is not the client's delay */
    if ((events & UV_READABLE) && !(c->poll_events & UV_READABLE) &&
        c->partial_ms)
      c->partial_ms = now_ms(c);
    c->poll_events = events;
    if (events)
      uv_poll_start(&c->poll, events, on_poll);
    else
      uv_poll_stop(&c->poll);
  }
}

/* Past max_send_queue a client's frames wait unread (nothing more of its
 * runs, its replies stop growing); conn_guard.c closes it if it stays. */
static void note_send_queue(nam_conn *c) {
  if (c->send_paused) return;
  uint64_t queued = nam_conn_queued(c);
  if (queued <= c->srv->limits.max_send_queue) return;
  c->send_paused = 1;
  c->over_ms = now_ms(c);
  log_notice("client %s: %llu reply bytes queued, over max_send_queue "
             "(%llu): its frames wait until it reads", c->peer,
             (unsigned long long)queued,
             (unsigned long long)c->srv->limits.max_send_queue);
}

/* Returns 1 when the queue drained under half the limit and the frames
 * that waited were handled (their replies may want sending). */
static int resume_if_drained(nam_conn *c) {
  if (!c->send_paused) return 0;
  uint64_t queued = nam_conn_queued(c), max = c->srv->limits.max_send_queue;
  /* send_stall_timeout counts only the time over the limit: a client that
   * reads, however slowly, is not stalled */
  if (queued > max && !c->over_ms) c->over_ms = now_ms(c);
  if (queued <= max) c->over_ms = 0;
  if (queued > max / 2) return 0;
  c->send_paused = 0;
  c->active_ms = now_ms(c);
  log_info("client %s reads again: its frames go on", c->peer);
  process_frames(c);
  return 1;
}

/* Send what the socket takes now: 0, or an errno that broke it. */
static int send_queued(nam_conn *c) {
  int err = 0;
  pthread_mutex_lock(&c->send_mu);
  if (c->out_broken) err = ENOMEM;
  while (!err && !c->closing && c->out.len > c->out.sent) {
    ssize_t n = send(c->fd, c->out.data + c->out.sent,
                     c->out.len - c->out.sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN) err = errno;
      break;
    }
    proto_wbuf_consume(&c->out, (size_t)n);
  }
  pthread_mutex_unlock(&c->send_mu);
  return err;
}

static void flush(nam_conn *c) {
  do {
    int err = c->closing ? 0 : send_queued(c);
    if (err) {
      nam_conn_close(c, strerror(err));
      return;
    }
    if (c->closing) return;
  } while (resume_if_drained(c));
  if (close_after_flush_pending(c)) return;
  update_poll(c);
}

/* Queue a frame the caller appends to out (under send_mu), or, when it
 * is over the frame limit (e.g. a large result), an Error that says so. */
static void send_queue(nam_conn *c, int (*append)(proto_wbuf *, void *),
                       void *arg, uint64_t task_id) {
  if (c->closing) return;
  pthread_mutex_lock(&c->send_mu);
  int rc = append(&c->out, arg);
  if (rc == EMBER_ETOOBIG) {
    Ember__Error e = EMBER__ERROR__INIT;
    e.code = rc;
    e.message = "reply over the frame limit";
    if (task_id) { e.has_task_id = 1; e.task_id = task_id; }
    rc = proto_wbuf_append(&c->out, EMBER__MSG_TYPE__MSG_ERROR,
                           &e.base, c->srv->limits.max_frame);
  }
  pthread_mutex_unlock(&c->send_mu);
  if (rc) nam_conn_close(c, "out of memory");
  else note_send_queue(c);
}

typedef struct msg_frame {
  nam_conn *c;
  uint8_t type;
  const ProtobufCMessage *m;
} msg_frame;

static int append_msg(proto_wbuf *w, void *arg) {
  msg_frame *f = arg;
  return proto_wbuf_append(w, f->type, f->m, f->c->srv->limits.max_frame);
}

static void send_msg(nam_conn *c, Ember__MsgType type, const ProtobufCMessage *m) {
  send_queue(c, append_msg, &(msg_frame){c, (uint8_t)type, m}, 0);
}

/* Returns code, so that a handler can say `return send_error(...)`. */
static int send_error(nam_conn *c, int code, uint64_t task_id,
                      uint64_t block_id, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int send_error(nam_conn *c, int code, uint64_t task_id,
                      uint64_t block_id, const char *fmt, ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  log_debug("client %s: %s: %s", c->peer, ember_errname(code), text);
  Ember__Error e = EMBER__ERROR__INIT;
  e.code = code;
  e.message = text;
  if (task_id) { e.has_task_id = 1; e.task_id = task_id; }
  if (block_id) { e.has_block_id = 1; e.block_id = block_id; }
  send_msg(c, EMBER__MSG_TYPE__MSG_ERROR, &e.base);
  return code;
}

void nam_conn_send(nam_conn *c, Ember__MsgType type, const ProtobufCMessage *m) {
  send_msg(c, type, m);
}

int nam_conn_error(nam_conn *c, int code, uint64_t task_id, uint64_t block_id,
                   const char *fmt, ...) {
  char text[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  return send_error(c, code, task_id, block_id, "%s", text);
}

static int close_after_flush_pending(nam_conn *c) {
  if (c->close_after_flush && nam_conn_queued(c) == 0) {
    nam_conn_close(c, "protocol error");
    return 1;
  }
  return 0;
}

static void fatal(nam_conn *c, int code, const char *fmt, const char *detail) {
  nam_stats_protocol_error(&c->srv->metrics);
  /* before the handshake, anyone's junk: counted, logged only for debug */
  LOG(c->admitted ? LOG_LVL_NOTICE : LOG_LVL_DEBUG, "client %s: %s", c->peer,
      detail);
  send_error(c, code, 0, 0, fmt, detail);
  c->close_after_flush = 1; /* say why, then close */
}

void nam_conn_refuse(nam_conn *c, int code, const char *detail) {
  if (c->closing) return;
  log_notice("client %s: %s", c->peer, detail);
  send_error(c, code, 0, 0, "%s", detail);
  c->close_after_flush = 1;
  flush(c);
}

void nam_conn_drop(nam_conn *c, int code, int level, const char *why) {
  if (c->closing) return;
  LOG(level, "client %s: %s", c->peer, why);
  send_error(c, code, 0, 0, "%s", why);
  /* one try: a client that does not read gets no more of our time */
  send_queued(c);
  nam_conn_close(c, why);
}

/* ---- connection life --------------------------------------------------- */

/* Fds a client's frames may have waiting (max_client_fds). */
static size_t fds_bound(const nam_conn *c) {
  unsigned b = c->srv->limits.max_client_fds;
  return b ? b : PROTO_MAX_FDS_PER_SEND;
}

/* The longest payload c may send now, checked at its length prefix
 * before any room is made for it: a Hello until c is through its
 * handshake; then max_frame as far as c's bytes allow: its blocks, its
 * out blocks, its tasks' reservations and the frame together within
 * max_block_bytes (a chunk's worth always goes, so that a client at its
 * limit can still release). */
static size_t read_limit(const nam_conn *c) {
  const nam_server_limits *l = &c->srv->limits;
  if (!c->admitted)
    return l->max_frame < PROTO_MAX_HELLO_FRAME ? l->max_frame
                                                : PROTO_MAX_HELLO_FRAME;
  uint64_t held = nam_conn_held(c);
  uint64_t room = held < l->max_block_bytes ? l->max_block_bytes - held : 0;
  if (room < PROTO_READ_CHUNK) room = PROTO_READ_CHUNK;
  return room < l->max_frame ? (size_t)room : l->max_frame;
}

/* The fds c's frames have waiting are counted in the server's fds_held
 * (with every client's socket) against max_fds: those that came past it
 * are closed at once, and the PutBlock that claims one is refused. */
static void count_fds(nam_conn *c) {
  nam_server *s = c->srv;
  size_t now = 0;
  for (size_t i = 0; i < c->reader.nfds; i++)
    if (c->reader.fds[i].fd >= 0) now++;
  size_t refused = 0;
  for (size_t i = c->reader.nfds; i-- > 0 && now > c->fds_counted &&
                                  s->limits.max_fds &&
                                  s->fds_held + (now - c->fds_counted) >
                                      s->limits.max_fds;) {
    if (c->reader.fds[i].fd < 0) continue;
    proto_reader_refuse_fd(&c->reader, i);
    now--;
    refused++;
  }
  s->fds_held = s->fds_held - (unsigned)c->fds_counted + (unsigned)now;
  c->fds_counted = now;
  if (!refused) return;
  uint64_t t = uv_now(s->loop);
  if (s->fds_log_ms && t - s->fds_log_ms < 1000) {
    s->fds_quiet += (unsigned)refused;
    return;
  }
  log_warn("client %s: %zu file descriptors refused: the clients hold %u, "
           "all that RLIMIT_NOFILE leaves them (%u more refused since the "
           "last message)", c->peer, refused, s->fds_held, s->fds_quiet);
  s->fds_log_ms = t;
  s->fds_quiet = 0;
}

static void set_read_limits(nam_conn *c) {
  c->reader.max_frame = read_limit(c);
  /* a message's fds may come before the last one's frames are done */
  c->reader.max_fds = fds_bound(c) + PROTO_MAX_FDS_PER_SEND;
}

void nam_conn_open(nam_server *s, int fd, int is_unix, const char *peer) {
  nam_conn *c = calloc(1, sizeof *c);
  if (!c) {
    close(fd);
    return;
  }
  c->srv = s;
  c->fd = fd;
  pthread_mutex_init(&c->send_mu, NULL);
  c->is_unix = is_unix;
  nam_peer_key key;
  char text[96];
  nam_peer_key_of(fd, is_unix, &key, text, sizeof text);
  if (nam_admit_open(s, c, &key) != 0) {
    log_warn("client %s: out of memory", peer);
    pthread_mutex_destroy(&c->send_mu);
    free(c);
    close(fd);
    return;
  }
  c->app = ++s->next_app;
  snprintf(c->peer, sizeof c->peer, "%s", peer);
  c->opened_ms = c->active_ms = uv_now(s->loop);
  proto_reader_init(&c->reader, s->limits.max_frame);
  set_read_limits(c);
  uv_poll_init(s->loop, &c->poll, fd);
  c->poll.data = c;
  c->next = s->conns;
  if (s->conns) s->conns->prev = c;
  s->conns = c;
  s->stats.clients++;
  s->fds_held++; /* its socket */
  if (is_unix) s->clients_unix++; else s->clients_tcp++;
  nam_stats_connection(&s->metrics, is_unix);
  /* info once its Hello is through: silent connections by the thousand
   * would fill the log */
  log_debug("client %s connected (%s)", peer, is_unix ? "unix" : "tcp");
  update_poll(c);
}

/* Through the handshake: a client from now on, with its frame limit. */
static void admitted(nam_conn *c, const char *name) {
  nam_admit_done(c);
  set_read_limits(c);
  log_info("client %s connected (%s)%s%s%s", c->peer,
           c->is_unix ? "unix" : "tcp", name && name[0] ? " as '" : "",
           name && name[0] ? name : "", name && name[0] ? "'" : "");
}

static void maybe_free(nam_conn *c) {
  if (!c->closing || !c->handle_closed || c->inflight > 0 || c->ops_pending > 0)
    return;
  proto_reader_free(&c->reader);
  proto_wbuf_free(&c->out);
  /* the worker that handed over its last task may still be unlocking */
  pthread_mutex_lock(&c->send_mu);
  pthread_mutex_unlock(&c->send_mu);
  pthread_mutex_destroy(&c->send_mu);
  free(c);
}

static void on_handle_closed(uv_handle_t *h) {
  nam_conn *c = h->data;
  c->handle_closed = 1;
  maybe_free(c);
}

void nam_conn_close(nam_conn *c, const char *why) {
  if (c->closing) return;
  nam_server *s = c->srv;
  pthread_mutex_lock(&c->send_mu); /* no worker sends from now on */
  c->closing = 1;
  pthread_mutex_unlock(&c->send_mu);
  LOG(c->admitted ? LOG_LVL_INFO : LOG_LVL_DEBUG,
      "client %s disconnected (%s), %u tasks in flight", c->peer, why,
      c->inflight);
  uv_close((uv_handle_t *)&c->poll, on_handle_closed);
  close(c->fd);
  c->fd = -1;
  if (c->prev) c->prev->next = c->next; else s->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  s->stats.clients--;
  if (c->is_unix) s->clients_unix--; else s->clients_tcp--;
  nam_admit_close(c);
  /* its buffer and the fds that came with it go now, not with its tasks */
  proto_reader_free(&c->reader);
  s->fds_held -= 1 + (unsigned)c->fds_counted;
  c->fds_counted = 0;
  /* the client is gone: its blocks go once their tasks are done */
  nam_blocks_clear(&c->blocks);
  if (s->engine)
    nam_block_cache_drop_app(nam_engine_block_cache(s->engine), c->app);
  for (conn_task *ct = c->tasks; ct; ct = ct->next) nam_task_cancel(ct->task);
}

void nam_conn_maybe_free(nam_conn *c) {
  if (c->closing)
    maybe_free(c);
  else
    flush(c);
}

/* ---- tasks ------------------------------------------------------------- */

/* Tasks in flight by accelerator: what the GAM link samples. */
static void count_inflight(nam_server *s, const acc_descriptor *acc, int delta) {
  for (size_t i = 0; i < NAM_MAX_PAIRS; i++) {
    if (!s->inflight_acc[i]) s->inflight_acc[i] = acc;
    if (s->inflight_acc[i] == acc) {
      s->inflight_by_acc[i] += (unsigned)delta;
      return;
    }
  }
}

/* Engine worker thread: reply, and hand the task to the loop. */
static void on_engine_done(nam_task *task, void *user) {
  conn_task *ct = user;
  nam_conn *c = ct->conn;
  nam_server *s = c->srv;
  /* counted before the client can see its result */
  nam_stats_task_done(&s->metrics, ct->acc, task, ct->received_ns);
  nam_reply_prepare(ct, task);
  /* the task reaches the loop's list before send_mu is free: a frame the
   * client sends once it has this result finds it there (on_poll) */
  pthread_mutex_lock(&c->send_mu);
  nam_reply_send_locked(ct);
  if (ct->replied) nam_stats_result_sent(&s->metrics);
  pthread_mutex_lock(&s->done_lock);
  ct->done_next = NULL;
  if (s->done_tail) s->done_tail->done_next = ct; else s->done_head = ct;
  s->done_tail = ct;
  pthread_mutex_unlock(&s->done_lock);
  pthread_mutex_unlock(&c->send_mu); /* c is not touched after this */
  uv_async_send(&s->done_async);
}

/* The rest of a Result the worker encoded, or the whole of one it left
 * to the loop (over its direct limit). */
static int append_result(proto_wbuf *w, void *arg) {
  conn_task *ct = arg;
  if (ct->reply.len)
    return proto_wbuf_append_raw(w, ct->reply.data, ct->reply.len);
  return nam_reply_encode(ct, ct->task, w, ct->conn->srv->limits.max_frame);
}

static void send_result(nam_conn *c, conn_task *ct) {
  if (ct->replied) return; /* the worker sent it (and counted it) */
  send_queue(c, append_result, ct, ct->id);
  nam_stats_result_sent(&c->srv->metrics);
}

void nam_conn_task_done(conn_task *ct) {
  nam_conn *c = ct->conn;
  nam_server *s = c->srv;
  if (ct->prev) ct->prev->next = ct->next; else c->tasks = ct->next;
  if (ct->next) ct->next->prev = ct->prev;
  c->inflight--;
  s->stats.inflight--;
  count_inflight(s, ct->acc, -1);
  if (!c->closing) send_result(c, ct);
  if (!c->closing && nam_task_status(ct->task) == 0)
    for (size_t i = 0; i < ct->n_outputs; i++) /* held from now on */
      c->out_bytes += nam_task_output_size(ct->task, i);
  nam_conn_unreserve_task(ct); /* and its scratch is freed */
  for (size_t i = 0; i < ct->n_pins; i++)
    if (ct->pins[i]) nam_block_unref(ct->pins[i]);
  nam_task_free(ct->task);
  free(ct->output.data);
  proto_wbuf_free(&ct->reply);
  free(ct);
  c->active_ms = now_ms(c);
  if (c->closing) {
    maybe_free(c);
    return;
  }
  /* a slot came free: frames that waited in the buffer go on */
  process_frames(c);
  if (!c->closing) flush(c);
}

/* An input: a block the client put (pinned by the task: *pin), or an out
 * block an earlier task made, which may live only on a device (data
 * NULL; the engine holds it). 0, EMBER_ENOTFOUND, EMBER_EBUSY (still being
 * made), EMBER_ESTATE (lost). */
static int input_of(nam_conn *c, uint64_t id, nam_block **pin,
                    acc_block *in) {
  nam_block *b = nam_blocks_find(&c->blocks, id);
  if (b) {
    *pin = b;
    in->data = b->data;
    in->size = b->size;
    return 0;
  }
  nam_block_cache *cache = nam_engine_block_cache(c->srv->engine);
  nam_block_hold *h = NULL;
  nam_block_info info;
  if (nam_block_cache_hold(cache, c->app, id, &h, &info)) return EMBER_ENOTFOUND;
  nam_block_cache_unhold(cache, h); /* the engine holds it from submit on */
  if (info.kind != NAM_BLOCK_OUT) return EMBER_ENOTFOUND;
  if (info.lost) return EMBER_ESTATE;
  if (info.pending) return EMBER_EBUSY;
  *pin = NULL;
  in->data = info.data;
  in->size = info.size;
  return 0;
}

/* A client that waits for one task at a time (an MCMC program's
 * likelihoods) while nobody else has one in flight gets it run by the loop
 * itself when it should take under 500 us: handing it to a worker and back
 * would cost two thread wake-ups, more than a small task. A newcomer's
 * frame waits that long at worst. With other tasks in flight the workers
 * run it: several clients' tasks then run side by side, not one after
 * another on the loop. */
#define INLINE_TASK_MAX_NS 500000u

static uint64_t inline_budget(nam_conn *c) {
  return c->inflight || c->srv->stats.inflight ? 0 : INLINE_TASK_MAX_NS;
}

/* Returns 0 when the task is queued, else the error sent back. */
static int handle_submit(nam_conn *c, const Ember__Submit *m) {
  nam_server *s = c->srv;
  if (m->task_id == 0)
    return send_error(c, EMBER_EINVAL, 0, 0, "task_id 0 is reserved");
  for (conn_task *o = c->tasks; o; o = o->next)
    if (o->id == m->task_id)
      return send_error(c, EMBER_EINVAL, m->task_id, 0,
                        "task %llu is already in flight",
                        (unsigned long long)m->task_id);
  if (s->draining)
    return send_error(c, EMBER_ESHUTDOWN, m->task_id, 0,
                      "the NAM is shutting down");
  const acc_descriptor *acc = nam_accel_find(m->accelerator);
  if (!acc) {
    char known[256] = "";
    for (size_t i = 0, used = 0; i < nam_accels_count() && used < sizeof known; i++) {
      int n = snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "",
                       nam_accels_get(i)->name);
      if (n > 0) used += (size_t)n;
    }
    return send_error(c, EMBER_ENOACCEL, m->task_id, 0,
                      "unknown accelerator '%s' (this NAM has: %s)",
                      m->accelerator, known);
  }
  /* a leased client runs only what its lease's label names */
  const char *lease_kind = NULL;
  char denied[200];
  if (nam_conn_lease_label(c) &&
      nam_lease_scope(nam_conn_lease_label(c), acc->name, m->platform,
                      &lease_kind, denied, sizeof denied) != 0)
    return send_error(c, EMBER_EDENIED, m->task_id, 0, "%s", denied);
  if (m->n_input_blocks > NAM_MAX_INPUTS || m->n_output_blocks > ACC_MAX_OUTPUTS ||
      m->n_state_blocks > ACC_MAX_STATES)
    return send_error(c, EMBER_EPARAM, m->task_id, 0,
                      "%zu input, %zu out and %zu state blocks, at most %d, "
                      "%d and %d", m->n_input_blocks, m->n_output_blocks,
                      m->n_state_blocks, NAM_MAX_INPUTS, ACC_MAX_OUTPUTS,
                      ACC_MAX_STATES);
  for (size_t i = 0; i < m->n_output_blocks + m->n_state_blocks; i++)
    if ((i < m->n_output_blocks ? m->output_blocks[i]
                                : m->state_blocks[i - m->n_output_blocks]) == 0)
      return send_error(c, EMBER_EINVAL, m->task_id, 0,
                        "block id 0 is reserved");
  /* the bytes a task makes the NAM hold are reserved once the engine has
   * its plan (nam_conn_reserve_task): this is only the quick refusal */
  if (m->n_output_blocks && nam_conn_held(c) >= s->limits.max_block_bytes)
    return send_error(c, EMBER_EBUSY, m->task_id, 0,
                      "this client's blocks, out blocks and tasks in flight "
                      "hold %llu bytes, the limit is max_block_bytes = "
                      "%llu: release some",
                      (unsigned long long)nam_conn_held(c),
                      (unsigned long long)s->limits.max_block_bytes);
  conn_task *ct = calloc(1, sizeof *ct);
  if (!ct) return send_error(c, EMBER_ENOMEM, m->task_id, 0, "out of memory");
  acc_block inputs[NAM_MAX_INPUTS];
  for (size_t i = 0; i < m->n_input_blocks; i++) {
    int rc = input_of(c, m->input_blocks[i], &ct->pins[i], &inputs[i]);
    if (rc) {
      free(ct);
      return send_error(c, rc, m->task_id, m->input_blocks[i],
                        "input %zu: block %llu %s", i,
                        (unsigned long long)m->input_blocks[i],
                        rc == EMBER_ESTATE ? "was lost with its platform"
                        : rc == EMBER_EBUSY ? "is the output of a task still "
                                              "running"
                                            : "not found");
    }
  }
  ct->conn = c;
  ct->id = m->task_id;
  ct->acc = acc;
  ct->received_ns = clock_now_ns();
  ct->reply_max = s->limits.max_frame;
  ct->n_pins = m->n_input_blocks;
  ct->n_outputs = m->n_output_blocks;
  for (size_t i = 0; i < ct->n_outputs; i++)
    ct->output_ids[i] = m->output_blocks[i];
  char why[600] = "";
  nam_task_spec spec = {
    .acc = acc, .params = m->has_params ? m->params.data : NULL,
    .params_len = m->has_params ? m->params.len : 0, .inputs = inputs,
    .n_inputs = m->n_input_blocks, .app = c->app,
    .block_ids = m->input_blocks,
    .priority = m->has_priority ? m->priority : 0,
    .platform_kind = lease_kind ? lease_kind
                     : m->platform && m->platform[0] ? m->platform : NULL,
    .prefer_kind = m->prefer_platform && m->prefer_platform[0]
                       ? m->prefer_platform : NULL,
    .output_ids = m->output_blocks, .n_outputs = m->n_output_blocks,
    .state_ids = m->state_blocks, .n_states = m->n_state_blocks,
    .done = on_engine_done, .user = ct, .err = why, .err_len = sizeof why,
    .admit = nam_conn_reserve_task, .inline_max_ns = inline_budget(c),
  };
  int ran_inline = 0;
  spec.ran_inline = &ran_inline;
  uint64_t arrived_ns = clock_now_ns();
  int rc = nam_engine_submit(s->engine, &spec, &ct->task);
  /* its client's next task is likely near (one run on a worker is not
   * over soon: polling then would take the worker's core) */
  if (rc == 0 && ran_inline) nam_server_spin(s, arrived_ns);
  if (rc) {
    char kinds[128];
    nam_kinds_available(s->engine, acc, kinds, sizeof kinds);
    if (rc == EMBER_ENOPLATFORM && spec.platform_kind)
      send_error(c, rc, m->task_id, 0,
                 "no platform of kind '%s' can run '%s' here (available: %s)",
                 spec.platform_kind, acc->name, kinds);
    else
      send_error(c, rc, m->task_id, 0, "%s", why[0] ? why : ember_strerror(rc));
    nam_conn_unreserve_task(ct); /* if it got as far */
    free(ct);
    return rc;
  }
  for (size_t i = 0; i < ct->n_pins; i++)
    if (ct->pins[i]) nam_block_ref(ct->pins[i]);
  ct->next = c->tasks;
  if (c->tasks) c->tasks->prev = ct;
  c->tasks = ct;
  c->inflight++;
  s->stats.inflight++;
  count_inflight(s, acc, +1);
  return 0;
}

static void handle_cancel(nam_conn *c, const Ember__Cancel *m) {
  for (conn_task *ct = c->tasks; ct; ct = ct->next)
    if (ct->id == m->task_id) {
      nam_task_cancel(ct->task);
      return;
    }
  /* already finished or never known: the result (if any) says so */
}

/* ---- blocks ------------------------------------------------------------ */

static int map_memfd(nam_conn *c, const Ember__PutBlock *m, int fd,
                     nam_block *b) {
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0) {
    send_error(c, EMBER_EBLOCK, 0, m->block_id,
               "block %llu: the fd is not a sealable memfd",
               (unsigned long long)m->block_id);
    return -1;
  }
  if ((seals & REQUIRED_SEALS) != REQUIRED_SEALS) {
    send_error(c, EMBER_EBLOCK, 0, m->block_id,
               "block %llu: memfd is not sealed (needs the write, grow, shrink "
               "and seal seals)", (unsigned long long)m->block_id);
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != m->size) {
    send_error(c, EMBER_EBLOCK, 0, m->block_id,
               "block %llu: memfd holds %lld bytes, PutBlock says %llu",
               (unsigned long long)m->block_id, (long long)st.st_size,
               (unsigned long long)m->size);
    return -1;
  }
  /* populate now: one walk over the pages instead of a fault per page */
  void *p = mmap(NULL, m->size, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    send_error(c, EMBER_EBLOCK, 0, m->block_id, "block %llu: mmap: %s",
               (unsigned long long)m->block_id, strerror(errno));
    return -1;
  }
  b->map = p;
  b->data = p;
  return 0;
}

/* The block cache's reference: dropped on release, disconnect or when the
 * cache frees the entry. */
static void cache_released(void *user, const void *data, size_t size) {
  (void)data, (void)size;
  nam_block_unref(user);
}

/* Put a new block into the engine's cache, in this client's namespace,
 * so that its device copies can outlive one task. */
static int cache_block(nam_conn *c, nam_block *b) {
  unsigned flags = b->flags & (EMBER_BLOCK_CACHE | EMBER_BLOCK_BROADCAST |
                              EMBER_BLOCK_STATE);
  nam_block_ref(b);
  int rc = nam_block_cache_put(nam_engine_block_cache(c->srv->engine), c->app,
                               b->id, flags, b->data, b->size, cache_released,
                               b);
  if (rc) nam_block_unref(b);
  return rc;
}

/* Returns 1 if m was adopted by the block (inline bytes), else 0. at: the
 * frame's offset in the stream (its memfd came with bytes up to there). */
static int handle_put_block(nam_conn *c, Ember__PutBlock *m, uint64_t at) {
  nam_server *s = c->srv;
  int fd = -1;
  if (m->transport == EMBER__PUT_BLOCK__TRANSPORT__FD) {
    if (!c->is_unix) {
      send_error(c, EMBER_EBLOCK, 0, m->block_id,
                 "block %llu: fd transport needs a unix socket",
                 (unsigned long long)m->block_id);
      return 0;
    }
    fd = proto_reader_take_fd(&c->reader, at);
    count_fds(c);
    if (fd == PROTO_FD_REFUSED) {
      send_error(c, EMBER_EBUSY, 0, m->block_id,
                 "block %llu: its memfd was refused: the NAM's clients hold "
                 "all the file descriptors RLIMIT_NOFILE leaves them; try "
                 "again later", (unsigned long long)m->block_id);
      return 0;
    }
    if (fd < 0) {
      fatal(c, EMBER_EPROTO, "%s", "PutBlock with fd transport but no fd came with it");
      return 0;
    }
  } else if (c->is_unix && m->size > PROTO_UNIX_INLINE_MAX) {
    send_error(c, EMBER_EBLOCK, 0, m->block_id,
               "block %llu: over a unix socket blocks over %u bytes travel "
               "as sealed memfds", (unsigned long long)m->block_id,
               PROTO_UNIX_INLINE_MAX);
    return 0;
  }
  int adopted = 0, room;
  nam_block *b = NULL;
  char why[400];
  if (m->block_id == 0 || m->size == 0) {
    send_error(c, EMBER_EBLOCK, 0, m->block_id,
               m->block_id == 0 ? "block id 0 is reserved" : "block %llu is empty",
               (unsigned long long)m->block_id);
  } else if (nam_blocks_find(&c->blocks, m->block_id)) {
    send_error(c, EMBER_EINVAL, 0, m->block_id, "block %llu already exists",
               (unsigned long long)m->block_id);
  } else if ((room = nam_conn_block_room(c, m->size,
                                     (m->flags & EMBER_BLOCK_STATE) != 0,
                                     fd < 0, why, sizeof why)) != 0) {
    send_error(c, room, 0, m->block_id, "block %llu: %s",
               (unsigned long long)m->block_id, why);
  } else if (fd < 0 && (!m->has_data || m->data.len != m->size)) {
    send_error(c, EMBER_EBLOCK, 0, m->block_id,
               "block %llu: %zu inline bytes, PutBlock says %llu",
               (unsigned long long)m->block_id, m->has_data ? m->data.len : 0,
               (unsigned long long)m->size);
  } else if (!(b = calloc(1, sizeof *b))) {
    send_error(c, EMBER_ENOMEM, 0, m->block_id, "out of memory");
  } else {
    b->id = m->block_id;
    b->size = m->size;
    b->flags = m->flags;
    int ok = 1, crc = 0;
    if (fd >= 0) {
      ok = map_memfd(c, m, fd, b) == 0;
    } else {
      b->inline_msg = m;
      b->data = m->data.data;
      adopted = 1;
    }
    if (ok && nam_blocks_insert(&c->blocks, b) != 0) {
      send_error(c, EMBER_ENOMEM, 0, m->block_id, "out of memory");
      ok = 0;
    } else if (ok && (crc = cache_block(c, b)) != 0) {
      nam_blocks_release(&c->blocks, b->id); /* frees b (and m if adopted) */
      b = NULL;
      if (crc == EMBER_EINVAL) /* an out block of a task has the id */
        send_error(c, EMBER_EINVAL, 0, m->block_id, "block %llu already "
                   "exists", (unsigned long long)m->block_id);
      else
        send_error(c, EMBER_ENOMEM, 0, m->block_id, "out of memory");
    }
    if (ok && b && (b->flags & EMBER_BLOCK_STATE))
      c->state_bytes += b->size; /* its working copy, counted now */
    if (ok && b)
      nam_stats_block_received(&s->metrics, fd >= 0 ? NAM_TRANSPORT_FD
                                                    : NAM_TRANSPORT_INLINE,
                               b->size);
    if (!ok) {
      if (b->map) munmap(b->map, b->size);
      free(b);
      adopted = 0;
    }
  }
  if (fd >= 0) close(fd); /* the mapping, if any, keeps the pages */
  return adopted;
}

/* ---- frames ------------------------------------------------------------ */

/* Welcome: the limits, and a lease's challenge while its proof is due. */
static void send_welcome(nam_conn *c) {
  Ember__Welcome w = EMBER__WELCOME__INIT;
  w.protocol_version = PROTO_VERSION;
  w.server_name = c->srv->name;
  w.has_max_frame = w.has_max_inflight = w.has_max_block_bytes = 1;
  w.max_frame = c->srv->limits.max_frame;
  w.max_inflight = c->srv->limits.max_inflight;
  w.max_block_bytes = c->srv->limits.max_block_bytes;
  if (c->is_unix) {
    w.has_unix_inline_max = 1;
    w.unix_inline_max = PROTO_UNIX_INLINE_MAX;
  }
  const uint8_t *challenge = nam_conn_lease_challenge(c);
  if (challenge) {
    w.has_challenge = 1;
    w.challenge.data = (uint8_t *)challenge;
    w.challenge.len = 32;
  }
  send_msg(c, EMBER__MSG_TYPE__MSG_WELCOME, &w.base);
}

static void handle_hello(nam_conn *c, const Ember__Hello *m) {
  if (m->protocol_version != PROTO_VERSION) {
    char detail[128];
    snprintf(detail, sizeof detail,
             "protocol version %u is not supported (this NAM speaks %u)",
             m->protocol_version, PROTO_VERSION);
    fatal(c, EMBER_EVERSION, "%s", detail);
    return;
  }
  char why[256];
  if (!c->is_unix && nam_lease_admit(c->srv, c, m, why, sizeof why) != 0) {
    nam_stats_lease_refused(&c->srv->metrics);
    log_notice("client %s refused: %s", c->peer, why);
    send_error(c, EMBER_ELEASE, 0, 0, "%s", why);
    c->close_after_flush = 1;
    return;
  }
  c->greeted = 1;
  send_welcome(c);
  if (!nam_conn_lease_challenge(c)) admitted(c, m->client_name);
}

/* The answer to a lease's challenge; a good one gets the Welcome again. */
static void handle_lease_proof(nam_conn *c, const Ember__LeaseProof *m) {
  if (!nam_conn_lease_challenge(c)) {
    nam_stats_protocol_error(&c->srv->metrics);
    send_error(c, EMBER_EPROTO, 0, 0, "LeaseProof without a lease's challenge");
    return;
  }
  if (nam_conn_lease_prove(c, m) != 0) {
    nam_stats_lease_refused(&c->srv->metrics);
    log_notice("client %s refused: its LeaseProof does not match the "
               "lease's app key", c->peer);
    fatal(c, EMBER_ELEASE, "%s", "lease: the proof does not match the "
          "lease's app key (a lease works only for the app it was granted "
          "to)");
    return;
  }
  log_info("client %s holds lease for label %s", c->peer,
           nam_conn_lease_label(c));
  admitted(c, NULL);
  send_welcome(c);
}

static void handle_list(nam_conn *c) {
  nam_listing *l = malloc(sizeof *l); /* large: not on the loop's stack */
  if (!l) {
    send_error(c, EMBER_ENOMEM, 0, 0, "out of memory");
    return;
  }
  nam_listing_build(c->srv->engine, l);
  send_msg(c, EMBER__MSG_TYPE__MSG_ACCELERATOR_LIST, &l->msg.base);
  free(l);
}

static void handle_stats(nam_conn *c) {
  nam_engine_counters ec;
  nam_server_stats ss;
  nam_engine_get_counters(c->srv->engine, &ec);
  nam_server_get_stats(c->srv, &ss);
  Ember__Stats st = EMBER__STATS__INIT;
  st.has_tasks_submitted = st.has_tasks_completed = st.has_tasks_failed = 1;
  st.has_tasks_canceled = st.has_clients = st.has_block_bytes = 1;
  st.tasks_submitted = ec.submitted;
  st.tasks_completed = ec.completed;
  st.tasks_failed = ec.failed;
  st.tasks_canceled = ec.canceled;
  st.clients = ss.clients;
  st.block_bytes = ss.block_bytes;
  st.has_out_bytes = st.has_reserved_bytes = st.has_buffer_bytes = 1;
  st.has_held_bytes = st.has_max_memory = st.has_state_bytes = 1;
  st.state_bytes = ss.state_bytes;
  st.out_bytes = ss.out_bytes;
  st.reserved_bytes = ss.reserved_bytes;
  st.buffer_bytes = ss.buffer_bytes;
  st.held_bytes = ss.held_bytes;
  st.max_memory = ss.max_memory;
  send_msg(c, EMBER__MSG_TYPE__MSG_STATS, &st.base);
}

static void handle_frame(nam_conn *c, const proto_frame *f) {
  nam_stats_frame(&c->srv->metrics, f->type);
  if (!proto_descriptor(f->type)) {
    nam_stats_protocol_error(&c->srv->metrics);
    send_error(c, EMBER_EPROTO, 0, 0, "unknown message type %u (%zu bytes skipped)",
               f->type, f->len);
    return;
  }
  ProtobufCMessage *m = proto_unpack(f);
  if (!m) {
    nam_stats_protocol_error(&c->srv->metrics);
    send_error(c, EMBER_EPROTO, 0, 0, "malformed %s message (%zu bytes)",
               proto_type_name(f->type), f->len);
    if (!c->greeted) c->close_after_flush = 1;
    return;
  }
  if (!c->greeted && f->type != EMBER__MSG_TYPE__MSG_HELLO) {
    fatal(c, EMBER_EPROTO, "%s", "the first message must be Hello");
    protobuf_c_message_free_unpacked(m, NULL);
    return;
  }
  if (nam_conn_lease_challenge(c) &&
      f->type != EMBER__MSG_TYPE__MSG_LEASE_PROOF) {
    fatal(c, EMBER_ELEASE, "%s", "lease: LeaseProof must follow the Welcome");
    protobuf_c_message_free_unpacked(m, NULL);
    return;
  }
  int adopted = 0;
  switch (f->type) {
  case EMBER__MSG_TYPE__MSG_HELLO:
    if (c->greeted) {
      nam_stats_protocol_error(&c->srv->metrics);
      send_error(c, EMBER_EPROTO, 0, 0, "Hello sent twice");
    } else {
      handle_hello(c, (Ember__Hello *)m);
    }
    break;
  case EMBER__MSG_TYPE__MSG_LEASE_PROOF:
    handle_lease_proof(c, (Ember__LeaseProof *)m);
    break;
  case EMBER__MSG_TYPE__MSG_LIST_ACCELERATORS: handle_list(c); break;
  case EMBER__MSG_TYPE__MSG_PUT_BLOCK:
    adopted = handle_put_block(c, (Ember__PutBlock *)m, f->offset);
    break;
  case EMBER__MSG_TYPE__MSG_RELEASE_BLOCK: {
    uint64_t id = ((Ember__ReleaseBlock *)m)->block_id;
    nam_block_cache *cache = nam_engine_block_cache(c->srv->engine);
    const nam_block *rb = nam_blocks_find(&c->blocks, id);
    if (rb && (rb->flags & EMBER_BLOCK_STATE))
      c->state_bytes -= rb->size < c->state_bytes ? rb->size : c->state_bytes;
    int put = nam_blocks_release(&c->blocks, id) == 0;
    /* out blocks were never put: they live in the cache only */
    nam_block_hold *h = NULL;
    nam_block_info info;
    if (!put && nam_block_cache_hold(cache, c->app, id, &h, &info) == 0) {
      if (info.kind == NAM_BLOCK_OUT && !info.pending && !info.lost)
        c->out_bytes -= info.size < c->out_bytes ? info.size : c->out_bytes;
      nam_block_cache_unhold(cache, h);
    }
    if (nam_block_cache_drop(cache, c->app, id) != 0 && !put)
      send_error(c, EMBER_ENOTFOUND, 0, id, "block %llu not found",
                 (unsigned long long)id);
    break;
  }
  case EMBER__MSG_TYPE__MSG_SUBMIT: {
    const Ember__Submit *sm = (Ember__Submit *)m;
    int rc = handle_submit(c, sm);
    if (rc)
      nam_stats_task_rejected(&c->srv->metrics,
                              nam_accel_find(sm->accelerator), rc);
    break;
  }
  case EMBER__MSG_TYPE__MSG_CANCEL: handle_cancel(c, (Ember__Cancel *)m); break;
  case EMBER__MSG_TYPE__MSG_STATS_REQUEST: handle_stats(c); break;
  case EMBER__MSG_TYPE__MSG_BLOCK_OP:
    nam_conn_block_op(c, (Ember__BlockOp *)m);
    break;
  default:
    nam_stats_protocol_error(&c->srv->metrics);
    send_error(c, EMBER_EPROTO, 0, 0, "%s is not a message a client sends",
               proto_type_name(f->type));
  }
  if (!adopted) protobuf_c_message_free_unpacked(m, NULL);
}

/* frame_timeout runs from the first byte of a frame to its last. */
static void note_partial(nam_conn *c, int handled) {
  if (c->reader.end == c->reader.start)
    c->partial_ms = 0;
  else if (handled || !c->partial_ms)
    c->partial_ms = now_ms(c);
}

/* Why the frame at the front is refused at its length prefix. */
static void refuse_long_frame(nam_conn *c) {
  const nam_server_limits *l = &c->srv->limits;
  size_t len = 0;
  uint8_t type = 0;
  proto_reader_head(&c->reader, &len, &type);
  char detail[400];
  int known = proto_descriptor(type) != NULL;
  if (!c->admitted)
    snprintf(detail, sizeof detail, "a %s%sframe of %zu bytes before the "
             "handshake is done is over the limit (a Hello is at most %zu "
             "bytes): closing the connection",
             known ? proto_type_name(type) : "", known ? " " : "", len,
             c->reader.max_frame);
  else if (len > l->max_frame)
    snprintf(detail, sizeof detail,
             "frame over the limit (%zu bytes): closing the connection",
             l->max_frame);
  else
    snprintf(detail, sizeof detail, "a %s frame of %zu bytes would take "
             "this client's bytes (blocks %llu, out blocks %llu, tasks in "
             "flight %llu) over max_block_bytes (%llu): closing the "
             "connection", proto_type_name(type), len,
             (unsigned long long)c->blocks.bytes,
             (unsigned long long)c->out_bytes,
             (unsigned long long)c->task_bytes,
             (unsigned long long)l->max_block_bytes);
  fatal(c, EMBER_ETOOBIG, "%s", detail);
}

static void process_frames(nam_conn *c) {
  proto_frame f;
  int rc, handled = 0;
  /* without the engine (shutting down) frames wait; the sockets close */
  while (!c->closing && !c->close_after_flush && c->srv->engine &&
         c->inflight < c->srv->limits.max_inflight && !c->send_paused) {
    set_read_limits(c); /* a Hello, a block, a release changed them */
    if ((rc = proto_reader_next(&c->reader, &f)) == 0) break;
    if (rc < 0) {
      refuse_long_frame(c);
      return;
    }
    handle_frame(c, &f);
    handled = 1;
  }
  if (c->closing) return;
  note_partial(c, handled);
  /* fds that came with bytes now all taken and that no PutBlock claimed
   * were never asked for */
  size_t dropped = proto_reader_drop_fds(&c->reader, 0);
  count_fds(c);
  if (dropped)
    log_debug("client %s: %zu file descriptors no PutBlock asked for: "
              "closed", c->peer, dropped);
  proto_reader_shrink(&c->reader); /* after a large frame */
}

/* After a read: fds before the handshake, or more than max_client_fds
 * waiting for frames not yet complete, close the connection. */
static int fds_ok(nam_conn *c) {
  size_t n = c->reader.nfds;
  if (n == 0) return 1;
  char detail[200];
  if (!c->admitted) {
    snprintf(detail, sizeof detail, "%zu file descriptors before the "
             "handshake is done: closing the connection", n);
  } else if (n > fds_bound(c)) {
    snprintf(detail, sizeof detail, "%zu file descriptors wait for frames "
             "not yet complete, over max_client_fds (%zu): closing the "
             "connection", n, fds_bound(c));
    nam_stats_dropped(&c->srv->metrics, NAM_DROPPED_MAX_CLIENT_FDS);
  } else {
    return 1;
  }
  proto_reader_drop_fds(&c->reader, 1);
  count_fds(c);
  fatal(c, EMBER_EPROTO, "%s", detail);
  return 0;
}

static void on_readable(nam_conn *c) {
  for (int i = 0; i < READS_PER_WAKEUP && !c->closing; i++) {
    set_read_limits(c);
    ssize_t n = proto_recv(c->fd, &c->reader);
    if (n == -EAGAIN) break;
    if (n == 0) {
      nam_conn_close(c, "end of stream");
      return;
    }
    if (n < 0) {
      if (n == -EPROTO)
        fatal(c, EMBER_EPROTO, "%s", "file descriptors truncated (more than "
              "16 in one message, or the NAM is out of descriptors)");
      else if (n == -ETOOMANYREFS)
        fatal(c, EMBER_EPROTO, "%s", "more file descriptors than "
              "max_client_fds wait for frames not yet complete");
      else
        nam_conn_close(c, strerror((int)-n));
      break;
    }
    c->active_ms = now_ms(c);
    count_fds(c);
    if (!c->admitted && !fds_ok(c)) break;
    process_frames(c);
    if (!c->closing && !c->close_after_flush && !fds_ok(c)) break;
    if (c->inflight >= c->srv->limits.max_inflight || c->close_after_flush ||
        c->send_paused)
      break; /* backpressure: leave the rest in the socket */
  }
  if (!c->closing) flush(c);
}

static void on_poll(uv_poll_t *poll, int status, int events) {
  nam_conn *c = poll->data;
  if (c->closing) return;
  if (status < 0) {
    /* libuv reports any POLLERR as UV_EBADF: the socket knows the reason */
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err == 0)
      err = recv(c->fd, &(char){0}, 1, MSG_PEEK | MSG_DONTWAIT) < 0 ? errno : 0;
    nam_conn_close(c, err && err != EAGAIN ? strerror(err)
                                           : uv_strerror(status));
    return;
  }
  if (events & UV_READABLE) {
    /* what the client sends may follow a result a worker sent it: that
     * task's bookkeeping (memory, counts, in flight) comes first */
    pthread_mutex_lock(&c->send_mu);
    pthread_mutex_unlock(&c->send_mu);
    nam_server_flush(c->srv);
    if (c->closing) return;
    on_readable(c);
  }
  if (!c->closing && (events & UV_WRITABLE)) flush(c);
}
