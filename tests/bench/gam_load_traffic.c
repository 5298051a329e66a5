/*
 * gam_load_traffic.c - the simulated cluster of gam_load (gam_load.h): up
 * to tens of thousands of NAM connections and a trickle of apps, all on
 * one non-blocking epoll loop in one thread.
 *
 * NAMs connect at a bounded rate (no SYN flood), say Hello, Register, and
 * then heartbeat on a fixed schedule: NAM i sends at offset i/N of every
 * period, so the GAM sees a steady stream, never a burst per second. A
 * heartbeat's latency is its send -> HeartbeatAck round trip on the
 * monotonic clock, ending when the kernel received the ack (SO_TIMESTAMPNS)
 * so that this program's own lateness in reading it, on a machine it
 * shares with the GAM, is not counted; the time it read the ack is kept as
 * well. Acks come back in order on a connection, so each NAM
 * keeps a small ring of the sequence numbers it still waits for, and an
 * ack that skips one means that one is missing.
 *
 * Apps arrive at a fixed rate once every NAM is up: Hello, Acquire 1..3
 * nodes of one label, hold the Allocation for a while, Release, close.
 */
#include "gam_load.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"
#include "node_auth.h"

#define RING 16                   /* heartbeats a NAM waits acks for */
#define MAX_NODE_LABELS 5
#define MAX_LABELS 64
#define MAX_FRAME ((uint32_t)1 << 20)
#define READ_BUF ((size_t)64 << 10)
#define MAX_EVENTS 1024
#define APP_CONNECT_LIMIT_NS (10ull * 1000000000ull)
#define RELEASE_GRACE_NS (300ull * 1000000ull)  /* an Error to a Release */
#define NS 1000000000ull

enum { KIND_NAM = 1, KIND_APP = 2 };

typedef struct buf {
  uint8_t *data;
  size_t len, cap;
} buf;

typedef struct conn {
  int fd;
  uint32_t events;                /* what epoll watches */
  buf in, out;                    /* a partial frame; unsent bytes */
} conn;

enum nam_state { NAM_IDLE, NAM_CONNECTING, NAM_HELLO, NAM_REGISTERING,
                 NAM_UP, NAM_DEAD };

typedef struct nam {
  conn c;
  uint8_t state, n_labels, bitstream;
  uint8_t labels[MAX_NODE_LABELS];  /* indices into options.labels */
  uint8_t ring_head, ring_n;
  uint64_t next_seq;
  uint64_t reg_sent_ns;
  uint64_t ring_seq[RING], ring_ns[RING];
  uint8_t challenge[NODE_AUTH_CHALLENGE_BYTES]; /* from the Welcome */
} nam;

enum app_state { APP_FREE, APP_CONNECTING, APP_HELLO, APP_WAITING,
                 APP_HOLDING, APP_RELEASED };

typedef struct app {
  conn c;
  uint8_t state;
  unsigned label, count;
  uint64_t serial, app_id;
  uint64_t started_ns, acquired_ns;
  uint64_t at_ns;                 /* the next timed step */
} app;

typedef struct load {
  const load_options *o;
  const load_hooks *hooks;
  load_result *r;
  load_counters n;
  int ep;
  uint8_t *rbuf;
  uint64_t read_ns;        /* when the current read returned */
  nam *nams;
  unsigned nams_up, nams_settled, next_connect;
  uint64_t outstanding;           /* heartbeats not acked yet */
  unsigned offering[MAX_LABELS];  /* nodes up serving each label */
  app *apps;
  size_t n_apps;                  /* slots */
  unsigned apps_open;
  uint64_t app_serial;
  uint64_t rng;
  enum load_phase phase;
  uint64_t t0, period_ns, hb_slot;
  uint64_t steady_ns, drain_ns, next_app_ns, next_second_ns;
  lat_hist iv_hb, iv_lag, iv_alloc;
  unsigned errors_printed;
} load;

static volatile sig_atomic_t stop_requested;

void gam_load_stop(void) { stop_requested = 1; }

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * NS + (uint64_t)ts.tv_nsec;
}

/* A reply's latency from sent to its arrival; if the receive timestamp
 * is older than the send (TCP coalesced the reply into a segment that
 * arrived earlier, keeping that one's stamp), to when it was read. */
static uint64_t since(const load *L, uint64_t sent, uint64_t arrived) {
  if (arrived >= sent) return arrived - sent;
  return L->read_ns > sent ? L->read_ns - sent : 0;
}

static uint64_t rnd(load *L) {  /* xorshift64* */
  L->rng ^= L->rng >> 12;
  L->rng ^= L->rng << 25;
  L->rng ^= L->rng >> 27;
  return L->rng * 2685821657736338717ull;
}

static void note_error(load *L, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void note_error(load *L, const char *fmt, ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!L->r->first_error[0])
    snprintf(L->r->first_error, sizeof L->r->first_error, "%s", msg);
  if (L->errors_printed < 10) {
    fprintf(stderr, "gam_load: %s\n", msg);
    if (++L->errors_printed == 10)
      fprintf(stderr, "gam_load: (further errors are only counted)\n");
  }
}

/* ---------------------------------------------------------- buffers */

static int buf_append(buf *b, const uint8_t *p, size_t len) {
  if (b->len + len > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + len) cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d) return -1;
    b->data = d;
    b->cap = cap;
  }
  memcpy(b->data + b->len, p, len);
  b->len += len;
  return 0;
}

static void buf_consume(buf *b, size_t n) {
  memmove(b->data, b->data + n, b->len - n);
  b->len -= n;
}

static void buf_free(buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}

/* -------------------------------------------------------- connections */

static uint64_t key_of(int kind, size_t idx) {
  return (uint64_t)kind << 32 | (uint64_t)idx;
}

static int conn_watch(load *L, conn *c, uint64_t key, uint32_t events) {
  if (c->events == events) return 0;
  struct epoll_event ev = {.events = events, .data.u64 = key};
  if (epoll_ctl(L->ep, EPOLL_CTL_MOD, c->fd, &ev) != 0) return -1;
  c->events = events;
  return 0;
}

/* A non-blocking connect to the GAM, watched for writability. */
static int conn_open(load *L, conn *c, uint64_t key) {
  memset(c, 0, sizeof *c);
  c->fd = socket(L->o->gam.ss_family,
                 SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c->fd < 0) return -errno;
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(c->fd, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one);
  if (connect(c->fd, (const struct sockaddr *)&L->o->gam, L->o->gam_len) != 0 &&
      errno != EINPROGRESS) {
    int e = -errno;
    close(c->fd);
    c->fd = -1;
    return e;
  }
  c->events = EPOLLIN | EPOLLOUT;
  struct epoll_event ev = {.events = c->events, .data.u64 = key};
  if (epoll_ctl(L->ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
    int e = -errno;
    close(c->fd);
    c->fd = -1;
    return e;
  }
  return 0;
}

static void conn_close(conn *c) {
  if (c->fd >= 0) close(c->fd);  /* closing removes it from epoll */
  c->fd = -1;
  buf_free(&c->in);
  buf_free(&c->out);
}

/* 0 when the connect completed, else -errno. */
static int conn_connected(conn *c) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) return -errno;
  return -err;
}

static int conn_write(load *L, conn *c, uint64_t key, const uint8_t *p,
                      size_t len) {
  if (c->out.len == 0) {
    ssize_t w = send(c->fd, p, len, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
      w = 0;
    }
    p += w;
    len -= (size_t)w;
    if (len == 0) return 0;
  }
  if (buf_append(&c->out, p, len) != 0) return -1;
  return conn_watch(L, c, key, EPOLLIN | EPOLLOUT);
}

static int conn_flush(load *L, conn *c, uint64_t key) {
  while (c->out.len) {
    ssize_t w = send(c->fd, c->out.data, c->out.len, MSG_NOSIGNAL);
    if (w < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    buf_consume(&c->out, (size_t)w);
  }
  return conn_watch(L, c, key, EPOLLIN);
}

/* Frame header + packed message, written (or queued) at once. */
static int conn_send(load *L, conn *c, uint64_t key, uint8_t type,
                     const ProtobufCMessage *m) {
  size_t len = protobuf_c_message_get_packed_size(m);
  uint8_t stack[2048];
  uint8_t *p = PROTO_HEADER_SIZE + len <= sizeof stack
                   ? stack : malloc(PROTO_HEADER_SIZE + len);
  if (!p) return -1;
  proto_header_write(p, (uint32_t)len, type);
  protobuf_c_message_pack(m, p + PROTO_HEADER_SIZE);
  int rc = conn_write(L, c, key, p, PROTO_HEADER_SIZE + len);
  if (p != stack) free(p);
  return rc;
}

static int send_hello(load *L, conn *c, uint64_t key) {
  Ember__Hello h = EMBER__HELLO__INIT;
  h.protocol_version = PROTO_VERSION;
  h.client_name = "gam_load";
  return conn_send(L, c, key, EMBER__MSG_TYPE__MSG_HELLO, &h.base);
}

static const char *error_text(const uint8_t *p, size_t len, int *code) {
  static char text[200];
  Ember__Error *e = ember__error__unpack(NULL, len, p);
  if (!e) {
    *code = 0;
    return "(undecodable Error)";
  }
  *code = e->code;
  snprintf(text, sizeof text, "%s", e->message);
  ember__error__free_unpacked(e, NULL);
  return text;
}

/* ---------------------------------------------------------------- NAMs */

static void node_name(unsigned i, char *out, size_t len) {
  snprintf(out, len, "lg-%05u", i);
}

static void ring_pop(load *L, nam *m) {
  m->ring_head = (uint8_t)((m->ring_head + 1) % RING);
  m->ring_n--;
  L->outstanding--;
}

static void nam_dead(load *L, nam *m) {
  if (m->state == NAM_UP) {
    L->nams_up--;
    for (unsigned i = 0; i < m->n_labels; i++) L->offering[m->labels[i]]--;
  } else if (m->state != NAM_DEAD) {
    L->nams_settled++;
  }
  L->n.hb_missing += m->ring_n;
  L->outstanding -= m->ring_n;
  m->ring_n = 0;
  m->state = NAM_DEAD;
  conn_close(&m->c);
}

static int nam_register(load *L, unsigned i) {
  nam *m = &L->nams[i];
  char name[32], address[64];
  node_name(i, name, sizeof name);
  snprintf(address, sizeof address, "tcp:10.%u.%u.%u:7071", (i >> 16) & 255,
           (i >> 8) & 255, i & 255);
  char *labels[MAX_NODE_LABELS];
  for (unsigned k = 0; k < m->n_labels; k++)
    labels[k] = (char *)L->o->labels[m->labels[k]];
  char *platforms[] = {"cpu", "fpga0"};
  Ember__Register reg = EMBER__REGISTER__INIT;
  reg.node = name;
  reg.address = address;
  reg.labels = labels;
  reg.n_labels = m->n_labels;
  reg.platforms = platforms;
  reg.n_platforms = 2;
  reg.version = "gam_load";
  uint8_t auth[NODE_AUTH_MAC_BYTES];
  node_auth_mac(&L->o->key, m->challenge, name, auth);
  reg.has_auth = 1;
  reg.auth.data = auth;
  reg.auth.len = sizeof auth;
  m->reg_sent_ns = now_ns();
  return conn_send(L, &m->c, key_of(KIND_NAM, i), EMBER__MSG_TYPE__MSG_REGISTER,
                   &reg.base);
}

/* One heartbeat with what a NAM reports: its labels, a load entry per
 * label (figures that change), its FPGA and what it has loaded (which
 * changes now and then), its platforms. */
static void nam_heartbeat(load *L, unsigned i, uint64_t due) {
  nam *m = &L->nams[i];
  if (m->ring_n == RING) {  /* RING periods without an ack: give up on one */
    L->n.hb_missing++;
    ring_pop(L, m);
  }
  char name[32];
  node_name(i, name, sizeof name);
  char *labels[MAX_NODE_LABELS];
  Ember__AcceleratorLoad loads[MAX_NODE_LABELS];
  Ember__AcceleratorLoad *load_ptrs[MAX_NODE_LABELS];
  for (unsigned k = 0; k < m->n_labels; k++) {
    labels[k] = (char *)L->o->labels[m->labels[k]];
    ember__accelerator_load__init(&loads[k]);
    loads[k].accelerator = labels[k];
    loads[k].has_queued = 1;
    loads[k].queued = (uint32_t)(rnd(L) % 4);
    loads[k].has_utilization = 1;
    loads[k].utilization = (double)(rnd(L) % 1000) / 1000.0;
    load_ptrs[k] = &loads[k];
  }
  if (rnd(L) % 100 == 0)  /* an FPGA is reprogrammed once in a while */
    m->bitstream = (uint8_t)(rnd(L) % m->n_labels);
  Ember__FpgaState fpga = EMBER__FPGA_STATE__INIT;
  fpga.platform = "fpga0";
  fpga.bitstream = labels[m->bitstream];
  Ember__FpgaState *fpgas[] = {&fpga};
  char *platforms[] = {"cpu", "fpga0"};
  Ember__Heartbeat hb = EMBER__HEARTBEAT__INIT;
  hb.node = name;
  hb.seq = m->next_seq++;
  hb.labels = labels;
  hb.n_labels = m->n_labels;
  hb.load = load_ptrs;
  hb.n_load = m->n_labels;
  hb.fpgas = fpgas;
  hb.n_fpgas = 1;
  hb.platforms = platforms;
  hb.n_platforms = 2;
  uint64_t t = now_ns();
  if (conn_send(L, &m->c, key_of(KIND_NAM, i), EMBER__MSG_TYPE__MSG_HEARTBEAT,
                &hb.base) != 0) {
    note_error(L, "%s: heartbeat send failed: %s", name, strerror(errno));
    L->n.disconnects++;
    nam_dead(L, m);
    return;
  }
  unsigned slot = (m->ring_head + m->ring_n) % RING;
  m->ring_seq[slot] = hb.seq;
  m->ring_ns[slot] = t;
  m->ring_n++;
  L->outstanding++;
  L->n.hb_sent++;
  uint64_t lag = t > due ? t - due : 0;
  lh_add(&L->iv_lag, lag);
  if (L->phase == LOAD_STEADY) lh_add(&L->r->lag_steady, lag);
}

static void nam_ack(load *L, nam *m, const Ember__HeartbeatAck *a,
                    uint64_t now) {
  L->n.ended_in_acks += a->n_ended_leases;
  while (m->ring_n) {
    unsigned i = m->ring_head;
    if (m->ring_seq[i] == a->seq) {
      uint64_t sent = m->ring_ns[i];
      ring_pop(L, m);
      uint64_t lat = since(L, sent, now);
      lh_add(&L->iv_hb, lat);
      if (L->steady_ns && sent >= L->steady_ns) {
        lh_add(&L->r->hb_steady, lat);
        lh_add(&L->r->hb_steady_read, L->read_ns - sent);
      } else {
        lh_add(&L->r->hb_ramp, lat);
      }
      L->n.hb_acked++;
      return;
    }
    if (m->ring_seq[i] > a->seq) break;
    L->n.hb_missing++;  /* acks come in order: that one never will */
    ring_pop(L, m);
  }
  L->n.hb_unexpected_acks++;
  note_error(L, "ack for seq %llu that was not awaited",
             (unsigned long long)a->seq);
}

/* 0 to go on, -1 to close the connection. */
static int nam_frame(load *L, unsigned i, uint8_t type, const uint8_t *p,
                     size_t len, uint64_t now) {
  nam *m = &L->nams[i];
  char name[32];
  node_name(i, name, sizeof name);
  if (type == EMBER__MSG_TYPE__MSG_ERROR) {
    int code;
    const char *text = error_text(p, len, &code);
    if (m->state == NAM_UP) {
      L->n.nam_errors++;
      note_error(L, "%s: Error %d: %s", name, code, text);
      return 0;
    }
    L->n.register_errors++;
    note_error(L, "%s: registering: Error %d: %s", name, code, text);
    return -1;
  }
  if (m->state == NAM_HELLO && type == EMBER__MSG_TYPE__MSG_WELCOME) {
    Ember__Welcome *w = ember__welcome__unpack(NULL, len, p);
    int ok = w && w->has_challenge && w->challenge.len == sizeof m->challenge;
    if (ok) memcpy(m->challenge, w->challenge.data, sizeof m->challenge);
    if (w) ember__welcome__free_unpacked(w, NULL);
    if (!ok) {
      L->n.register_errors++;
      note_error(L, "%s: Welcome without a challenge", name);
      return -1;
    }
    m->state = NAM_REGISTERING;
    return nam_register(L, i);
  }
  if (type != EMBER__MSG_TYPE__MSG_HEARTBEAT_ACK ||
      (m->state != NAM_REGISTERING && m->state != NAM_UP)) {
    L->n.bad_frames++;
    note_error(L, "%s: unexpected %s", name, proto_type_name(type));
    return -1;
  }
  Ember__HeartbeatAck *a = ember__heartbeat_ack__unpack(NULL, len, p);
  if (!a) {
    L->n.bad_frames++;
    note_error(L, "%s: undecodable HeartbeatAck", name);
    return -1;
  }
  if (m->state == NAM_REGISTERING) {
    if (a->seq != 0) {
      L->n.register_errors++;
      note_error(L, "%s: Register acknowledged with seq %llu", name,
                 (unsigned long long)a->seq);
      ember__heartbeat_ack__free_unpacked(a, NULL);
      return -1;
    } else {
      m->state = NAM_UP;
      m->next_seq = 1;
      L->nams_up++;
      L->nams_settled++;
      L->n.registered++;
      for (unsigned k = 0; k < m->n_labels; k++) L->offering[m->labels[k]]++;
      lh_add(&L->r->reg, since(L, m->reg_sent_ns, now));
    }
  } else {
    nam_ack(L, m, a, now);
  }
  ember__heartbeat_ack__free_unpacked(a, NULL);
  return 0;
}

static void nam_start(load *L, unsigned i) {
  nam *m = &L->nams[i];
  int rc = conn_open(L, &m->c, key_of(KIND_NAM, i));
  L->n.connects++;
  if (rc) {
    L->n.connect_failures++;
    note_error(L, "connect: %s", strerror(-rc));
    m->state = NAM_DEAD;
    L->nams_settled++;
    return;
  }
  m->state = NAM_CONNECTING;
}

/* ---------------------------------------------------------------- apps */

static app *app_slot(load *L, size_t *idx) {
  for (size_t i = 0; i < L->n_apps; i++)
    if (L->apps[i].state == APP_FREE) {
      *idx = i;
      return &L->apps[i];
    }
  app *grown = realloc(L->apps, (L->n_apps + 8) * sizeof *grown);
  if (!grown) return NULL;
  memset(grown + L->n_apps, 0, 8 * sizeof *grown);
  for (size_t i = L->n_apps; i < L->n_apps + 8; i++) grown[i].c.fd = -1;
  L->apps = grown;
  *idx = L->n_apps;
  L->n_apps += 8;
  return &L->apps[*idx];
}

static void app_close(load *L, app *a) {
  conn_close(&a->c);
  a->state = APP_FREE;
  L->apps_open--;
}

static void app_start(load *L, uint64_t now) {
  unsigned candidates[MAX_LABELS], n = 0;
  for (unsigned k = 0; k < L->o->n_labels; k++)
    if (L->offering[k]) candidates[n++] = k;
  if (n == 0) return;
  size_t idx;
  app *a = app_slot(L, &idx);
  if (!a) return;
  memset(a, 0, sizeof *a);
  a->label = candidates[rnd(L) % n];
  a->count = 1 + (unsigned)(rnd(L) % 3);
  if (a->count > L->offering[a->label]) a->count = L->offering[a->label];
  a->serial = ++L->app_serial;
  a->started_ns = now;
  a->at_ns = now + APP_CONNECT_LIMIT_NS;
  L->n.apps_started++;
  int rc = conn_open(L, &a->c, key_of(KIND_APP, idx));
  if (rc) {
    L->n.app_connect_failures++;
    note_error(L, "app connect: %s", strerror(-rc));
    return;
  }
  a->state = APP_CONNECTING;
  L->apps_open++;
}

static int app_acquire(load *L, size_t idx, uint64_t now) {
  app *a = &L->apps[idx];
  char name[32];
  snprintf(name, sizeof name, "lg-app-%llu", (unsigned long long)a->serial);
  Ember__Acquire q = EMBER__ACQUIRE__INIT;
  q.app = name;
  q.label = (char *)L->o->labels[a->label];
  q.count = a->count;
  q.has_wait_ms = 1;
  q.wait_ms = L->o->app_wait_ms;
  static uint8_t app_key[32]; /* a public key: never used at a NAM here */
  q.has_app_key = 1;
  q.app_key.data = app_key;
  q.app_key.len = sizeof app_key;
  a->state = APP_WAITING;
  a->acquired_ns = now;
  a->at_ns = now + (uint64_t)L->o->app_wait_ms * 1000000u + 5 * NS;
  L->n.acquires++;
  return conn_send(L, &a->c, key_of(KIND_APP, idx), EMBER__MSG_TYPE__MSG_ACQUIRE,
                   &q.base);
}

/* Each grant names one of our nodes, serving the label, once. */
static void app_check(load *L, app *a, const Ember__Allocation *al) {
  if (al->n_grants != a->count) {
    L->n.bad_grants++;
    note_error(L, "app %llu: %zu grants for %u nodes asked",
               (unsigned long long)al->app_id, al->n_grants, a->count);
  }
  for (size_t g = 0; g < al->n_grants; g++) {
    const Ember__NodeGrant *ng = al->grants[g];
    unsigned i;
    int ok = sscanf(ng->node, "lg-%u", &i) == 1 && i < L->o->nams &&
             ng->lease && ng->lease->body.len && ng->lease->mac.len == 32;
    if (ok) {
      const nam *m = &L->nams[i];
      int serves = 0;
      for (unsigned k = 0; k < m->n_labels; k++)
        serves |= m->labels[k] == a->label;
      ok = serves;
    }
    for (size_t h = 0; ok && h < g; h++)
      ok = strcmp(al->grants[h]->node, ng->node) != 0;
    if (!ok) {
      L->n.bad_grants++;
      note_error(L, "app %llu: bad grant on '%s' for %s",
                 (unsigned long long)al->app_id, ng->node,
                 L->o->labels[a->label]);
    }
  }
}

static int app_frame(load *L, size_t idx, uint8_t type, const uint8_t *p,
                     size_t len, uint64_t now) {
  app *a = &L->apps[idx];
  if (type == EMBER__MSG_TYPE__MSG_ERROR) {
    int code;
    const char *text = error_text(p, len, &code);
    if (a->state == APP_WAITING || a->state == APP_HELLO) {
      L->n.acquire_errors++;
      note_error(L, "app (%s x%u): Error %d: %s", L->o->labels[a->label],
                 a->count, code, text);
      return -1;
    }
    L->n.app_errors++;
    note_error(L, "app %llu: Error %d: %s", (unsigned long long)a->app_id,
               code, text);
    return 0;
  }
  if (type == EMBER__MSG_TYPE__MSG_LEASE_ENDED) {
    L->n.lease_ended_msgs++;
    return 0;
  }
  if (a->state == APP_HELLO && type == EMBER__MSG_TYPE__MSG_WELCOME)
    return app_acquire(L, idx, now);
  if (a->state == APP_WAITING && type == EMBER__MSG_TYPE__MSG_ALLOCATION) {
    Ember__Allocation *al = ember__allocation__unpack(NULL, len, p);
    if (!al) {
      L->n.bad_frames++;
      note_error(L, "undecodable Allocation");
      return -1;
    }
    uint64_t lat = since(L, a->acquired_ns, now);
    lh_add(&L->iv_alloc, lat);
    lh_add(&L->r->alloc, lat);
    L->n.allocations++;
    L->n.grants += al->n_grants;
    app_check(L, a, al);
    a->app_id = al->app_id;
    ember__allocation__free_unpacked(al, NULL);
    double hold = L->o->hold_min_s + (L->o->hold_max_s - L->o->hold_min_s) *
                                         (double)(rnd(L) % 1000) / 1000.0;
    a->state = APP_HOLDING;
    a->at_ns = L->phase == LOAD_DRAIN ? now : now + (uint64_t)(hold * 1e9);
    return 0;
  }
  L->n.bad_frames++;
  note_error(L, "app: unexpected %s", proto_type_name(type));
  return -1;
}

/* The timed steps of every open app. */
static void apps_due(load *L, uint64_t now) {
  for (size_t i = 0; i < L->n_apps; i++) {
    app *a = &L->apps[i];
    if (a->state == APP_FREE || now < a->at_ns) continue;
    switch (a->state) {
    case APP_CONNECTING:
    case APP_HELLO:
      L->n.app_connect_failures++;
      note_error(L, "app: no Welcome within %llu s",
                 APP_CONNECT_LIMIT_NS / NS);
      app_close(L, a);
      break;
    case APP_WAITING:
      L->n.acquire_timeouts++;
      note_error(L, "app (%s x%u): no Allocation after %.1f s",
                 L->o->labels[a->label], a->count,
                 (double)(now - a->acquired_ns) / 1e9);
      app_close(L, a);
      break;
    case APP_HOLDING: {
      Ember__Release rel = EMBER__RELEASE__INIT;
      rel.app_id = a->app_id;
      L->n.releases++;
      if (conn_send(L, &a->c, key_of(KIND_APP, i), EMBER__MSG_TYPE__MSG_RELEASE,
                    &rel.base) != 0) {
        L->n.disconnects++;
        note_error(L, "app %llu: Release send failed",
                   (unsigned long long)a->app_id);
        app_close(L, a);
        break;
      }
      a->state = APP_RELEASED;
      a->at_ns = now + RELEASE_GRACE_NS;
      break;
    }
    case APP_RELEASED:
      app_close(L, a);
      break;
    default:
      break;
    }
  }
}

/* ------------------------------------------------------------ reading */

/* Frames in p[0, len): handled in order; *used says how many bytes they
 * took. -1 when the connection must close. */
static int parse_frames(load *L, int kind, size_t idx, const uint8_t *p,
                        size_t len, size_t *used, uint64_t now) {
  size_t off = 0;
  int rc = 0;
  while (rc == 0 && len - off >= PROTO_HEADER_SIZE) {
    uint32_t flen = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 |
                    (uint32_t)p[off + 2] << 16 | (uint32_t)p[off + 3] << 24;
    if (flen > MAX_FRAME) {
      L->n.bad_frames++;
      note_error(L, "frame of %u bytes", flen);
      rc = -1;
      break;
    }
    if (len - off - PROTO_HEADER_SIZE < flen) break;
    const uint8_t *payload = p + off + PROTO_HEADER_SIZE;
    uint8_t type = p[off + 4];
    off += PROTO_HEADER_SIZE + flen;
    rc = kind == KIND_NAM
             ? nam_frame(L, (unsigned)idx, type, payload, flen, now)
             : app_frame(L, idx, type, payload, flen, now);
  }
  *used = off;
  return rc;
}

/* When the kernel received the data just read, on the monotonic clock:
 * the receive timestamp is on the realtime clock, so it is moved by the
 * two clocks' difference now; read_ns when there is none. */
static uint64_t arrival_ns(struct msghdr *mh, uint64_t read_ns) {
  for (struct cmsghdr *cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm)) {
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_TIMESTAMPNS)
      continue;
    struct timespec stamp, real;
    memcpy(&stamp, CMSG_DATA(cm), sizeof stamp);
    clock_gettime(CLOCK_REALTIME, &real);
    int64_t ago = ((int64_t)real.tv_sec - (int64_t)stamp.tv_sec) * (int64_t)NS +
                  ((int64_t)real.tv_nsec - (int64_t)stamp.tv_nsec);
    if (ago <= 0) return read_ns;
    return (uint64_t)ago < read_ns ? read_ns - (uint64_t)ago : read_ns;
  }
  return read_ns;
}

/* One read; -1 when the connection is over (closed or failed). */
static int conn_read(load *L, conn *c, int kind, size_t idx) {
  char control[CMSG_SPACE(sizeof(struct timespec)) * 2];
  struct iovec iov = {.iov_base = L->rbuf, .iov_len = READ_BUF};
  struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1,
                      .msg_control = control, .msg_controllen = sizeof control};
  ssize_t n = recvmsg(c->fd, &mh, 0);
  L->read_ns = now_ns();
  uint64_t now = n > 0 ? arrival_ns(&mh, L->read_ns) : L->read_ns;
  if (n < 0) {
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    L->n.disconnects++;
    note_error(L, "read: %s", strerror(errno));
    return -1;
  }
  if (n == 0) {
    L->n.disconnects++;
    note_error(L, "%s connection closed by the GAM",
               kind == KIND_NAM ? "a NAM" : "an app");
    return -1;
  }
  size_t used = 0;
  if (c->in.len == 0) {
    if (parse_frames(L, kind, idx, L->rbuf, (size_t)n, &used, now) != 0)
      return -1;
    if (used < (size_t)n && buf_append(&c->in, L->rbuf + used, (size_t)n - used))
      return -1;
    return 0;
  }
  if (buf_append(&c->in, L->rbuf, (size_t)n) != 0) return -1;
  /* the handlers may queue output on c, never touch c->in */
  if (parse_frames(L, kind, idx, c->in.data, c->in.len, &used, now) != 0)
    return -1;
  buf_consume(&c->in, used);
  return 0;
}

static void on_event(load *L, const struct epoll_event *ev) {
  int kind = (int)(ev->data.u64 >> 32);
  size_t idx = (size_t)(ev->data.u64 & 0xffffffffu);
  conn *c;
  int connecting;
  if (kind == KIND_NAM) {
    c = &L->nams[idx].c;
    connecting = L->nams[idx].state == NAM_CONNECTING;
  } else {
    c = &L->apps[idx].c;
    connecting = L->apps[idx].state == APP_CONNECTING;
  }
  if (c->fd < 0) return;  /* closed earlier in this batch */
  int bad = 0;
  if (connecting) {
    if (!(ev->events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) return;
    int rc = conn_connected(c);
    if (rc) {
      note_error(L, "connect: %s", strerror(-rc));
      if (kind == KIND_NAM) {
        L->n.connect_failures++;
        L->nams_settled++;
        L->nams[idx].state = NAM_DEAD;
        conn_close(c);
      } else {
        L->n.app_connect_failures++;
        app_close(L, &L->apps[idx]);
      }
      return;
    }
    if (kind == KIND_NAM) L->nams[idx].state = NAM_HELLO;
    else L->apps[idx].state = APP_HELLO;
    bad = conn_watch(L, c, ev->data.u64, EPOLLIN) != 0 ||
          send_hello(L, c, ev->data.u64) != 0;
  } else {
    if (ev->events & EPOLLOUT) bad = conn_flush(L, c, ev->data.u64) != 0;
    if (!bad && (ev->events & (EPOLLIN | EPOLLERR | EPOLLHUP)))
      bad = conn_read(L, c, kind, idx) != 0;
  }
  if (!bad) return;
  if (kind == KIND_NAM) nam_dead(L, &L->nams[idx]);
  else app_close(L, &L->apps[idx]);
}

/* --------------------------------------------------------------- time */

static uint64_t hb_due(const load *L, uint64_t slot) {
  uint64_t n = L->o->nams;
  return L->t0 + (slot / n) * L->period_ns + (slot % n) * L->period_ns / n;
}

static void second_tick(load *L, uint64_t now) {
  load_interval iv = {
    .phase = L->phase,
    .t_s = (double)(now - L->t0) / 1e9,
    .nams_up = L->nams_up,
    .apps_open = L->apps_open,
    .total = &L->n,
    .hb = &L->iv_hb,
    .lag = &L->iv_lag,
    .alloc = &L->iv_alloc,
  };
  if (L->hooks->second) L->hooks->second(L->hooks->user, &iv);
  memset(&L->iv_hb, 0, sizeof L->iv_hb);
  memset(&L->iv_lag, 0, sizeof L->iv_lag);
  memset(&L->iv_alloc, 0, sizeof L->iv_alloc);
}

static void enter(load *L, enum load_phase p, uint64_t now) {
  L->phase = p;
  if (p == LOAD_STEADY) {
    L->steady_ns = now;
    L->r->at_steady = L->n;
    L->r->ramp_s = (double)(now - L->t0) / 1e9;
    if (L->o->apps_per_s > 0)
      L->next_app_ns = now + (uint64_t)(1e9 / L->o->apps_per_s);
  } else if (p == LOAD_DRAIN) {
    L->drain_ns = now;
    L->r->at_drain = L->n;
    L->r->steady_s = (double)(now - L->steady_ns) / 1e9;
    for (size_t i = 0; i < L->n_apps; i++)
      if (L->apps[i].state == APP_HOLDING) L->apps[i].at_ns = now;
  }
  if (L->hooks->phase) L->hooks->phase(L->hooks->user, p, (double)(now - L->t0) / 1e9);
}

/* Everything due by now; returns when the next thing is due. */
static uint64_t run_due(load *L, uint64_t now) {
  const load_options *o = L->o;
  uint64_t next = now + NS;
#define SOON(t) do { if ((t) < next) next = (t); } while (0)
  if (L->phase == LOAD_RAMP) {
    while (L->next_connect < o->nams &&
           L->t0 + (uint64_t)L->next_connect * NS / o->connect_per_s <= now)
      nam_start(L, L->next_connect++);
    if (L->next_connect < o->nams)
      SOON(L->t0 + (uint64_t)L->next_connect * NS / o->connect_per_s);
    if (L->nams_settled == o->nams ||
        now - L->t0 >= (uint64_t)(o->ramp_timeout_s * 1e9)) {
      if (L->nams_settled < o->nams)
        note_error(L, "ramp: %u of %u NAMs registered after %.0f s, going on",
                   L->nams_up, o->nams, o->ramp_timeout_s);
      enter(L, LOAD_STEADY, now);
    }
  }
  if (L->phase == LOAD_STEADY &&
      (stop_requested || now - L->steady_ns >= (uint64_t)(o->duration_s * 1e9)))
    enter(L, LOAD_DRAIN, now);
  if (L->phase != LOAD_DRAIN) {
    uint64_t due;
    while ((due = hb_due(L, L->hb_slot)) <= now) {
      unsigned i = (unsigned)(L->hb_slot % o->nams);
      if (L->nams[i].state == NAM_UP) nam_heartbeat(L, i, due);
      L->hb_slot++;
    }
    SOON(due);
  }
  if (L->phase == LOAD_STEADY && o->apps_per_s > 0) {
    while (L->next_app_ns <= now) {
      app_start(L, now);
      L->next_app_ns += (uint64_t)(1e9 / o->apps_per_s);
    }
    SOON(L->next_app_ns);
  }
  apps_due(L, now);
  for (size_t i = 0; i < L->n_apps; i++)
    if (L->apps[i].state != APP_FREE) SOON(L->apps[i].at_ns);
  if (now >= L->next_second_ns) {
    second_tick(L, now);
    L->next_second_ns += NS;
  }
  SOON(L->next_second_ns);
#undef SOON
  return next;
}

static int drained(const load *L, uint64_t now) {
  uint64_t limit = 5 * NS + (uint64_t)L->o->app_wait_ms * 1000000u;
  if (now - L->drain_ns >= limit) return 1;
  return L->outstanding == 0 && L->apps_open == 0;
}

/* ---------------------------------------------------------------- run */

int gam_load_run(const load_options *o, const load_hooks *hooks,
                 load_result *out) {
  memset(out, 0, sizeof *out);
  if (o->nams == 0 || o->rate <= 0 || o->connect_per_s == 0 ||
      o->n_labels == 0 || o->n_labels > MAX_LABELS) {
    snprintf(out->first_error, sizeof out->first_error, "bad options");
    return -1;
  }
  load L = {.o = o, .hooks = hooks, .r = out, .rng = o->seed | 1};
  L.ep = epoll_create1(EPOLL_CLOEXEC);
  L.rbuf = malloc(READ_BUF);
  L.nams = calloc(o->nams, sizeof *L.nams);
  if (L.ep < 0 || !L.rbuf || !L.nams) {
    snprintf(out->first_error, sizeof out->first_error, "out of memory");
    free(L.rbuf);
    free(L.nams);
    if (L.ep >= 0) close(L.ep);
    return -1;
  }
  /* every node serves 3..5 distinct labels, one of them on its FPGA */
  for (unsigned i = 0; i < o->nams; i++) {
    nam *m = &L.nams[i];
    m->c.fd = -1;
    unsigned want = 3 + (unsigned)(rnd(&L) % 3);
    if (want > o->n_labels) want = (unsigned)o->n_labels;
    while (m->n_labels < want) {
      uint8_t k = (uint8_t)(rnd(&L) % o->n_labels), dup = 0;
      for (unsigned j = 0; j < m->n_labels; j++) dup |= m->labels[j] == k;
      if (!dup) m->labels[m->n_labels++] = k;
    }
    m->bitstream = (uint8_t)(rnd(&L) % m->n_labels);
  }
  L.period_ns = (uint64_t)(1e9 / o->rate);
  L.t0 = now_ns();
  L.next_second_ns = L.t0 + NS;
  L.phase = LOAD_RAMP;
  if (hooks->phase) hooks->phase(hooks->user, LOAD_RAMP, 0);

  struct epoll_event events[MAX_EVENTS];
  for (;;) {
    uint64_t now = now_ns();
    uint64_t next = run_due(&L, now);
    if (L.phase == LOAD_DRAIN && drained(&L, now_ns())) break;
    now = now_ns();
    uint64_t wait = next > now ? next - now : 0;
    if (L.phase == LOAD_DRAIN && wait > NS / 10) wait = NS / 10;
    struct timespec ts = {(time_t)(wait / NS), (long)(wait % NS)};
    int n = epoll_pwait2(L.ep, events, MAX_EVENTS, &ts, NULL);
    if (n < 0 && errno != EINTR) {
      note_error(&L, "epoll_pwait2: %s", strerror(errno));
      break;
    }
    for (int k = 0; k < n; k++) on_event(&L, &events[k]);
  }
  if (L.phase != LOAD_DRAIN) enter(&L, LOAD_DRAIN, now_ns());
  second_tick(&L, now_ns());

  L.n.hb_missing += L.outstanding;
  for (size_t i = 0; i < L.n_apps; i++)
    if (L.apps[i].state != APP_FREE) {
      if (L.apps[i].state == APP_WAITING) L.n.acquire_timeouts++;
      app_close(&L, &L.apps[i]);
    }
  for (unsigned i = 0; i < o->nams; i++) conn_close(&L.nams[i].c);
  out->total = L.n;
  out->nams_up = L.nams_up;
  free(L.apps);
  free(L.nams);
  free(L.rbuf);
  close(L.ep);
  return 0;
}
