/*
 * server.c - ember-gam's protocol connections (server.h). The loop thread
 * owns every connection; the core's outbox (frames for apps, which an
 * admin's change on the HTTP thread may produce) and the writer's
 * "committed up to k" arrive through uv_async_t handles.
 */
#include "server_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember/ember_errors.h"
#include "gam_config.h"
#include "log.h"

/* Replies a peer may leave unread before the GAM stops reading it. */
#define SEND_QUEUE_FACTOR 4

typedef struct write_req {
  uv_write_t req;
  gam_conn *c;
  uint8_t *data;
} write_req;

static void read_resume(gam_conn *c);

/* What a write costs beyond its bytes: its request and the allocator's. */
#define WRITE_OVERHEAD (sizeof(write_req) + 64)

/* Memory c's peer holds in replies it has not taken: written and queued
 * (with each write's request), or held. */
static size_t conn_queued(const gam_conn *c) {
  return c->tcp.write_queue_size + c->held_bytes +
         c->writes * WRITE_OVERHEAD;
}

static size_t send_queue_max(const gam_server *s) {
  return SEND_QUEUE_FACTOR * s->opt.max_frame;
}

static void on_written(uv_write_t *req, int status) {
  write_req *w = (write_req *)req;
  gam_conn *c = w->c;
  free(w->data);
  free(w);
  c->writes--;
  /* a closing connection's writes end with UV_ECANCELED before its close
   * callback frees it: c is still there */
  if (status == 0 && c->paused && !c->closing &&
      conn_queued(c) <= send_queue_max(c->srv) / 2)
    read_resume(c);
}

static void write_now(gam_conn *c, uint8_t *data, size_t len) {
  write_req *w = malloc(sizeof *w);
  if (!w) {
    free(data);
    gam_conn_close(c, "out of memory");
    return;
  }
  w->c = c;
  w->data = data;
  uv_buf_t buf = uv_buf_init((char *)data, (unsigned)len);
  if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &buf, 1, on_written) != 0) {
    free(data);
    free(w);
    gam_conn_close(c, "write failed");
    return;
  }
  c->writes++;
}

static void wait_link(gam_conn *c) {
  gam_server *s = c->srv;
  c->wait_prev = NULL;
  c->wait_next = s->waiting;
  if (s->waiting) s->waiting->wait_prev = c;
  s->waiting = c;
}

static void wait_unlink(gam_conn *c) {
  gam_server *s = c->srv;
  if (c->wait_prev) c->wait_prev->wait_next = c->wait_next;
  else s->waiting = c->wait_next;
  if (c->wait_next) c->wait_next->wait_prev = c->wait_prev;
  c->wait_prev = c->wait_next = NULL;
}

/* Write data now, or hold it until change need is committed; a connection's
 * frames leave in the order they were made. */
static void conn_write(gam_conn *c, uint8_t *data, size_t len, uint64_t need) {
  gam_server *s = c->srv;
  if (!c->held && need <= gam_writer_durable(s->opt.writer)) {
    write_now(c, data, len);
    return;
  }
  held_frame *h = malloc(sizeof *h);
  if (!h) {
    free(data);
    gam_conn_close(c, "out of memory");
    return;
  }
  *h = (held_frame){.need = need, .data = data, .len = len};
  if (c->held_tail) c->held_tail->next = h;
  else {
    c->held = h;
    wait_link(c);
  }
  c->held_tail = h;
  c->held_bytes += len;
}

/* Frames whose changes are committed now leave. */
static void conn_release_held(gam_conn *c, uint64_t durable) {
  while (c->held && c->held->need <= durable && !c->closing) {
    held_frame *h = c->held;
    c->held = h->next;
    if (!c->held) c->held_tail = NULL;
    c->held_bytes -= h->len;
    write_now(c, h->data, h->len);
    free(h);
  }
  if (!c->held && !c->closing) wait_unlink(c);
}

static void conn_drop_held(gam_conn *c) {
  if (!c->held) return;
  while (c->held) {
    held_frame *h = c->held;
    c->held = h->next;
    free(h->data);
    free(h);
  }
  c->held_tail = NULL;
  c->held_bytes = 0;
  wait_unlink(c);
}

/* The change a reply made now acknowledges: the newest, when handling
 * the current frame changed something; otherwise none. */
static uint64_t reply_need(gam_conn *c) {
  uint64_t seq = gam_core_last_change(c->srv->core);
  return seq > c->srv->frame_seq ? seq : 0;
}

/* Frame header + payload in one buffer, written (or held) asynchronously. */
static void send_packed(gam_conn *c, uint8_t type, const uint8_t *payload,
                        size_t len, uint64_t need) {
  if (c->closing) return;
  uint8_t *data = malloc(PROTO_HEADER_SIZE + len);
  if (!data) {
    gam_conn_close(c, "out of memory");
    return;
  }
  proto_header_write(data, (uint32_t)len, type);
  if (len) memcpy(data + PROTO_HEADER_SIZE, payload, len);
  conn_write(c, data, PROTO_HEADER_SIZE + len, need);
}

static void send_msg_after(gam_conn *c, uint8_t type,
                           const ProtobufCMessage *m, uint64_t need) {
  size_t len = protobuf_c_message_get_packed_size(m);
  uint8_t stack[512];
  uint8_t *buf = len <= sizeof stack ? stack : malloc(len);
  if (!buf) {
    gam_conn_close(c, "out of memory");
    return;
  }
  protobuf_c_message_pack(m, buf);
  send_packed(c, type, buf, len, need);
  if (buf != stack) free(buf);
}

static void send_msg(gam_conn *c, uint8_t type, const ProtobufCMessage *m) {
  send_msg_after(c, type, m, reply_need(c));
}

static void send_error(gam_conn *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void send_error(gam_conn *c, int code, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  Ember__Error e = EMBER__ERROR__INIT;
  e.code = code;
  e.message = msg;
  send_msg(c, EMBER__MSG_TYPE__MSG_ERROR, &e.base);
}

size_t gam_conn_frame_limit(const gam_conn *c) {
  return c->greeted ? c->srv->opt.max_frame : GAM_HELLO_MAX;
}

/* ------------------------------------------------------------ handling */

static void handle_hello(gam_conn *c, const Ember__Hello *m) {
  if (m->protocol_version != PROTO_VERSION) {
    send_error(c, EMBER_EVERSION, "protocol version %u, this GAM speaks %u",
               m->protocol_version, PROTO_VERSION);
    gam_conn_close(c, "protocol version mismatch");
    return;
  }
  Ember__Welcome w = EMBER__WELCOME__INIT;
  w.protocol_version = PROTO_VERSION;
  w.server_name = "ember-gam";
  w.has_max_frame = 1;
  w.max_frame = c->srv->opt.max_frame;
  if (node_auth_challenge(c->challenge) != 0) {
    send_error(c, EMBER_EINTERNAL, "no random bytes for a challenge");
    gam_conn_close(c, "libsodium failed");
    return;
  }
  w.has_challenge = 1;
  w.challenge.data = c->challenge;
  w.challenge.len = sizeof c->challenge;
  send_msg(c, EMBER__MSG_TYPE__MSG_WELCOME, &w.base);
  c->greeted = true;
  gam_guard_greeted(c);
}

/* The live NAM connection other than c that registered node, or NULL. A
 * connection silent past nam_silent_ms is closed here: its NAM is gone
 * (half-open) and the name is free again. */
static gam_conn *node_holder(gam_conn *c, const char *node) {
  gam_server *s = c->srv;
  for (gam_conn *o = s->conns; o; o = o->next) {
    if (o == c || o->closing || o->role != ROLE_NAM ||
        strcmp(o->node, node) != 0)
      continue;
    if (uv_now(s->loop) - o->last_frame_ms <= s->opt.nam_silent_ms) return o;
    log_warn("node %s: connection from %s silent for %llu ms, dropped for "
             "a new registration from %s", node, o->peer,
             (unsigned long long)(uv_now(s->loop) - o->last_frame_ms),
             c->peer);
    gam_conn_close(o, "silent; its node registered again");
    return NULL;
  }
  return NULL;
}

/* Refuse a registration: logged, told, closed. */
static void refuse_register(gam_conn *c, int code, const char *node,
                            const char *why) {
  log_warn("register of node '%.128s' from %s refused: %s", node, c->peer,
           why);
  send_error(c, code, "register: %s", why);
  gam_conn_close(c, "register refused");
}

static void handle_register(gam_conn *c, const Ember__Register *m) {
  char err[256];
  if (c->role == ROLE_APP) {
    send_error(c, EMBER_EPROTO, "an app connection cannot register a node");
    return;
  }
  if (node_auth_verify(c->srv->opt.key, c->challenge, m->node,
                       m->has_auth ? m->auth.data : NULL,
                       m->has_auth ? m->auth.len : 0) != 0) {
    refuse_register(c, EMBER_EDENIED, m->node,
                    m->has_auth ? "bad auth (not the cluster key)"
                                : "no auth (a NAM needs the cluster key)");
    return;
  }
  if (c->role == ROLE_NAM && strcmp(c->node, m->node) != 0) {
    refuse_register(c, EMBER_EPROTO, m->node,
                    "this connection registered another node");
    return;
  }
  gam_conn *holder = node_holder(c, m->node);
  if (holder) {
    snprintf(err, sizeof err, "node %.128s is registered by a live "
             "connection (from %s)", m->node, holder->peer);
    refuse_register(c, EMBER_EBUSY, m->node, err);
    return;
  }
  int rc = gam_core_register(c->srv->core, m, err, sizeof err);
  if (rc) {
    send_error(c, rc, "register: %s", err);
    return;
  }
  c->role = ROLE_NAM;
  snprintf(c->node, sizeof c->node, "%s", m->node);
  /* a HeartbeatAck with seq 0 acknowledges the registration */
  Ember__HeartbeatAck ack = EMBER__HEARTBEAT_ACK__INIT;
  ack.seq = 0;
  ack.has_interval_ms = 1;
  ack.interval_ms = (uint32_t)c->srv->opt.heartbeat_interval_ms;
  send_msg(c, EMBER__MSG_TYPE__MSG_HEARTBEAT_ACK, &ack.base);
}

static void handle_heartbeat(gam_conn *c, const Ember__Heartbeat *m) {
  char err[256];
  if (c->role != ROLE_NAM || strcmp(c->node, m->node) != 0) {
    send_error(c, EMBER_EPROTO, "heartbeat for '%.128s' before it registered "
               "on this connection", m->node);
    return;
  }
  Ember__HeartbeatAck ack;
  uint64_t need = 0;
  int rc = gam_core_heartbeat(c->srv->core, m, &ack, &need, err, sizeof err);
  if (rc) {
    send_error(c, rc, "heartbeat: %s", err);
    return;
  }
  send_msg_after(c, EMBER__MSG_TYPE__MSG_HEARTBEAT_ACK, &ack.base, need);
  gam_core_ack_clear(&ack);
}

static void handle_acquire(gam_conn *c, const Ember__Acquire *m) {
  char err[256];
  if (c->role == ROLE_NAM || (c->role == ROLE_APP && c->app_id)) {
    send_error(c, EMBER_EPROTO, "one Acquire per app connection");
    return;
  }
  uint64_t id = 0;
  int rc = gam_core_acquire(c->srv->core, m, &id, err, sizeof err);
  if (rc) {
    send_error(c, rc, "acquire: %s", err);
    return;
  }
  c->role = ROLE_APP;
  c->app_id = id;
}

static void handle_release(gam_conn *c, const Ember__Release *m) {
  char err[256];
  if (c->role == ROLE_NAM) {
    send_error(c, EMBER_EPROTO, "a NAM connection cannot release leases");
    return;
  }
  gam_requester who = {.app_id = c->app_id, .challenge = c->challenge};
  int rc = gam_core_release(c->srv->core, &who, m, err, sizeof err);
  if (rc) send_error(c, rc, "release: %s", err);
  else if (m->n_lease_ids == 0 && m->app_id == c->app_id)
    c->app_id = 0;  /* ended: the connection may acquire again */
}

static void handle_frame(gam_conn *c, const proto_frame *f) {
  if (!c->greeted && f->type != EMBER__MSG_TYPE__MSG_HELLO) {
    send_error(c, EMBER_EPROTO, "the first message must be Hello");
    gam_conn_close(c, "no Hello");
    return;
  }
  c->srv->frame_seq = gam_core_last_change(c->srv->core);
  c->last_frame_ms = c->active_ms = uv_now(c->srv->loop);
  ProtobufCMessage *m = proto_unpack(f);
  if (!m) {
    if (!proto_descriptor(f->type))
      send_error(c, EMBER_EPROTO, "unknown message type %u", f->type);
    else
      send_error(c, EMBER_EFORMAT, "malformed %s message",
                 proto_type_name(f->type));
    if (!c->greeted) gam_conn_close(c, "no Hello");
    return;
  }
  switch (f->type) {
  case EMBER__MSG_TYPE__MSG_HELLO:
    if (c->greeted) send_error(c, EMBER_EPROTO, "Hello sent twice");
    else handle_hello(c, (Ember__Hello *)m);
    break;
  case EMBER__MSG_TYPE__MSG_REGISTER:
    handle_register(c, (Ember__Register *)m);
    break;
  case EMBER__MSG_TYPE__MSG_HEARTBEAT:
    handle_heartbeat(c, (Ember__Heartbeat *)m);
    break;
  case EMBER__MSG_TYPE__MSG_ACQUIRE:
    handle_acquire(c, (Ember__Acquire *)m);
    break;
  case EMBER__MSG_TYPE__MSG_RELEASE:
    handle_release(c, (Ember__Release *)m);
    break;
  default:
    send_error(c, EMBER_EPROTO, "%s is not a message the GAM takes",
               proto_type_name(f->type));
  }
  protobuf_c_message_free_unpacked(m, NULL);
}

/* ------------------------------------------------------------ plumbing */

static void frame_free(gam_conn *c) {
  if (!c->frame) return;
  free(c->frame);
  c->srv->read_buffered -= c->frame_size;
  atomic_store(&c->srv->stats->read_buffered, c->srv->read_buffered);
  c->frame = NULL;
  c->frame_len = c->frame_size = 0;
}

static void on_conn_closed(uv_handle_t *h) { free(h->data); }

void gam_conn_close(gam_conn *c, const char *why) {
  if (c->closing) return;
  c->closing = true;
  gam_server *s = c->srv;
  log_debug("%s: closed (%s)", c->peer, why);
  if (c->role == ROLE_APP && c->app_id)
    gam_core_app_disconnected(s->core, c->app_id);
  conn_drop_held(c);
  frame_free(c);
  gam_guard_forget(c);
  if (c->prev) c->prev->next = c->next;
  else s->conns = c->next;
  if (c->next) c->next->prev = c->prev;
  s->n_conns--;
  atomic_store(&s->stats->open, s->n_conns);
  uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
}

void gam_conn_drop(gam_conn *c, gam_closing reason, int code,
                   const char *message) {
  if (c->closing) return;
  gam_guard_note_close(c->srv, reason);
  send_error(c, code, "%s", message);
  gam_conn_close(c, message);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  gam_conn *c = h->data;
  if (c->frame) {  /* the rest of this frame, nothing past it */
    *buf = uv_buf_init((char *)c->frame + c->frame_len,
                       (unsigned)(c->frame_size - c->frame_len));
    return;
  }
  /* the header's first bytes, if any, go first, then what comes */
  uint8_t *shared = c->srv->read_buf;
  memcpy(shared, c->head, c->head_len);
  *buf = uv_buf_init((char *)shared + c->head_len,
                     (unsigned)(sizeof c->srv->read_buf - c->head_len));
}

/* Stop reading c while its peer leaves its replies unread. */
static void read_pause(gam_conn *c) {
  if (c->paused || c->closing) return;
  uv_read_stop((uv_stream_t *)&c->tcp);
  c->paused = true;
  c->paused_ms = uv_now(c->srv->loop);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf);

static void read_resume(gam_conn *c) {
  if (!c->paused || c->closing) return;
  c->paused = false;
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
    gam_conn_close(c, "cannot read");
}

static void too_big(gam_conn *c, size_t len) {
  char msg[160];
  snprintf(msg, sizeof msg, "a frame of %zu bytes is over the %zu-byte "
           "limit%s", len, gam_conn_frame_limit(c),
           c->greeted ? "" : " before Hello");
  gam_conn_drop(c, GAM_CLOSED_TOO_BIG, EMBER_ETOOBIG, msg);
}

/* The bytes read_buf[0, len) after a read that did not land in c->frame:
 * whole frames are handled from there; a frame's beginning stays with c,
 * its header in c->head or, once that is whole, in a buffer of exactly
 * its size. */
static void take_shared(gam_conn *c, size_t len) {
  gam_server *s = c->srv;
  proto_reader view = {.buf = s->read_buf, .cap = sizeof s->read_buf,
                       .end = len};
  bool handled = false;
  proto_frame f;
  int rc = 0;
  while (!c->closing) {
    view.max_frame = gam_conn_frame_limit(c);  /* Hello changes it */
    if ((rc = proto_reader_next(&view, &f)) != 1) break;
    handled = true;
    handle_frame(c, &f);
  }
  if (c->closing) return;
  const uint8_t *rest = view.buf + view.start;
  size_t left = view.end - view.start;
  c->head_len = 0;
  if (rc == EMBER_ETOOBIG) {
    too_big(c, (size_t)rest[0] | (size_t)rest[1] << 8 |
                   (size_t)rest[2] << 16 | (size_t)rest[3] << 24);
    return;
  }
  if (left == 0) {
    c->partial_ms = 0;
    return;
  }
  if (handled || !c->partial_ms) c->partial_ms = uv_now(s->loop);
  if (left < PROTO_HEADER_SIZE) {
    memcpy(c->head, rest, left);
    c->head_len = left;
    return;
  }
  /* a header within the limit (proto_reader_next checked it): a buffer
   * for the whole frame, counted before it is taken */
  size_t size = PROTO_HEADER_SIZE + ((size_t)rest[0] | (size_t)rest[1] << 8 |
                                     (size_t)rest[2] << 16 |
                                     (size_t)rest[3] << 24);
  if (s->read_buffered + size > s->opt.max_read_buffers) {
    char msg[160];
    snprintf(msg, sizeof msg, "the GAM holds max_read_buffers (%llu bytes) "
             "of partial frames already: try again",
             (unsigned long long)s->opt.max_read_buffers);
    gam_conn_drop(c, GAM_CLOSED_BUFFERS_FULL, EMBER_EBUSY, msg);
    return;
  }
  c->frame = malloc(size);
  if (!c->frame) {
    gam_conn_close(c, "out of memory");
    return;
  }
  s->read_buffered += size;
  atomic_store(&s->stats->read_buffered, s->read_buffered);
  c->frame_size = size;
  c->frame_len = left;
  memcpy(c->frame, rest, left);
}

static void on_read(uv_stream_t *st, ssize_t nread, const uv_buf_t *buf) {
  gam_conn *c = st->data;
  if (nread < 0) {
    gam_conn_close(c, nread == UV_EOF ? "peer closed"
                                      : uv_strerror((int)nread));
    return;
  }
  if (nread == 0 || c->closing) return;
  if (c->frame && (uint8_t *)buf->base == c->frame + c->frame_len) {
    c->frame_len += (size_t)nread;
    if (c->frame_len < c->frame_size) return;
    /* whole: handled from the buffer, which then goes */
    uint8_t *frame = c->frame;
    size_t size = c->frame_size;
    c->frame = NULL;
    c->frame_len = c->frame_size = 0;
    c->partial_ms = 0;
    proto_frame f = {.type = frame[4], .payload = frame + PROTO_HEADER_SIZE,
                     .len = size - PROTO_HEADER_SIZE};
    handle_frame(c, &f);
    free(frame);
    c->srv->read_buffered -= size;
    atomic_store(&c->srv->stats->read_buffered, c->srv->read_buffered);
  } else {
    take_shared(c, c->head_len + (size_t)nread);
  }
  if (!c->closing && conn_queued(c) > send_queue_max(c->srv)) read_pause(c);
}

static void on_connection(uv_stream_t *listener, int status) {
  gam_server *s = listener->data;
  if (status < 0) {
    gam_guard_accept_failed(s, status);
    return;
  }
  gam_conn *c = calloc(1, sizeof *c);
  if (!c) {
    gam_guard_accept_failed(s, UV_ENOMEM);
    return;
  }
  c->srv = s;
  uv_tcp_init(s->loop, &c->tcp);
  c->tcp.data = c;
  if (uv_accept(listener, (uv_stream_t *)&c->tcp) != 0) {
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
    return;
  }
  struct sockaddr_storage ss;
  int len = sizeof ss;
  char host[48] = "?";
  memset(&ss, 0, sizeof ss);
  if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &len) == 0)
    uv_ip_name((struct sockaddr *)&ss, host, sizeof host);
  snprintf(c->peer, sizeof c->peer, "%s", host);
  c->opened_ms = c->last_frame_ms = c->active_ms = uv_now(s->loop);
  if (gam_guard_admit(s, c, &ss) != 0) {  /* refused: told, counted */
    uv_close((uv_handle_t *)&c->tcp, on_conn_closed);
    return;
  }
  c->next = s->conns;
  if (s->conns) s->conns->prev = c;
  s->conns = c;
  s->n_conns++;
  atomic_store(&s->stats->open, s->n_conns);
  uv_tcp_nodelay(&c->tcp, 1);
  if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0)
    gam_conn_close(c, "cannot read");
}

static void on_outbox(uv_async_t *a) {
  gam_server *s = a->data;
  gam_outbox_item *items = gam_core_take_outbox(s->core);
  /* every item was queued after the change it tells of */
  uint64_t need = gam_core_last_change(s->core);
  for (gam_outbox_item *it = items; it; it = it->next)
    for (gam_conn *c = s->conns; c; c = c->next)
      if (c->role == ROLE_APP && c->app_id == it->app_id) {
        send_packed(c, it->type, it->payload, it->len, need);
        break;
      }
  gam_outbox_free(items);
}

static void wake(void *user) { uv_async_send(user); }

#define STORE_FAILED_GRACE_MS 500

static void exit_failed(uv_timer_t *t) { _exit(EXIT_FAILURE); }

static void on_durable(uv_async_t *a) {
  gam_server *s = a->data;
  char why[300];
  if (gam_writer_failed(s->opt.writer, why, sizeof why)) {
    /* What failed to commit must not be acknowledged, and memory no
     * longer matches the disk: only a restart from what is on disk is
     * safe (systemd restarts the GAM). */
    if (uv_timer_get_repeat(&s->tick) == 0) return;  /* already stopping */
    log_err("%s; stopping without acknowledging anything more", why);
    /* after a moment for the admin API to answer 503 to the changes that
     * failed; the tick (leases, lost nodes) stops meanwhile */
    uv_timer_start(&s->tick, exit_failed, STORE_FAILED_GRACE_MS, 0);
    return;
  }
  uint64_t durable = gam_writer_durable(s->opt.writer);
  for (gam_conn *c = s->waiting, *next; c; c = next) {
    next = c->wait_next;
    conn_release_held(c, durable);
  }
}

static void on_tick(uv_timer_t *t) {
  gam_server *s = t->data;
  gam_core_tick(s->core);
}

int gam_server_start(uv_loop_t *loop, gam_core *core,
                     const gam_server_options *o, gam_server **out,
                     char *err, size_t err_len) {
  struct sockaddr_storage addr;
  int rc = gam_hostport_parse(o->listen, &addr, err, err_len);
  if (rc) return rc;
  if (!o->stats) {
    snprintf(err, err_len, "no connection statistics");
    return EMBER_EINVAL;
  }
  gam_server *s = calloc(1, sizeof *s);
  if (!s) return EMBER_ENOMEM;
  s->loop = loop;
  s->core = core;
  s->opt = *o;
  s->stats = o->stats;
  uv_tcp_init(loop, &s->listener);
  s->listener.data = s;
  uv_async_init(loop, &s->outbox, on_outbox);
  s->outbox.data = s;
  uv_async_init(loop, &s->durable, on_durable);
  s->durable.data = s;
  uv_timer_init(loop, &s->tick);
  s->tick.data = s;
  gam_guard_start(s);
  *out = s;
  int uv = uv_tcp_bind(&s->listener, (struct sockaddr *)&addr, 0);
  if (uv == 0) uv = uv_listen((uv_stream_t *)&s->listener, 4096, on_connection);
  if (uv != 0) {
    snprintf(err, err_len, "listen %s: %s", o->listen, uv_strerror(uv));
    return EMBER_EIO;
  }
  gam_core_set_wake(core, wake, &s->outbox);
  gam_writer_set_notify(o->writer, wake, &s->durable);
  uv_timer_start(&s->tick, on_tick, o->tick_ms, o->tick_ms);
  return 0;
}

void gam_server_close(gam_server *s) {
  if (!s) return;
  gam_core_set_wake(s->core, NULL, NULL);
  gam_writer_set_notify(s->opt.writer, NULL, NULL);
  while (s->conns) gam_conn_close(s->conns, "shutting down");
  gam_guard_close(s);
  uv_close((uv_handle_t *)&s->listener, NULL);
  uv_close((uv_handle_t *)&s->outbox, NULL);
  uv_close((uv_handle_t *)&s->durable, NULL);
  uv_close((uv_handle_t *)&s->tick, NULL);
}

void gam_server_destroy(gam_server *s) { free(s); }
