/* gam_link.c - the NAM's connection to ember-gam: register, heartbeats,
 * acks, reconnection with backoff (see gam_link.h). */
#include "gam_link.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ember/ember_errors.h"
#include "hostport.h"
#include "frame.h"
#include "lease_check.h"
#include "log.h"
#include "nam_config.h"
#include "node_auth.h"
#include "platform_kinds.h"
#include "server.h"
#include "stats.h"

#define BACKOFF_MIN_MS 200
#define BACKOFF_MAX_MS 10000
#define GREETING_TIMEOUT_MS 5000  /* connect + Welcome */
#define SILENT_INTERVALS 5        /* no frame for this many: the GAM is gone */
#define SILENT_MIN_MS 3000
#define SAMPLES_PER_INTERVAL 10
#define MAX_FRAME ((size_t)4 << 20)
#define MAX_WRITE_QUEUE ((size_t)1 << 20) /* unsent bytes before skipping */
#define MAX_LEASES 4096           /* lease ids in one heartbeat */
#define MAX_PLATFORMS 16

enum link_state {
  LINK_IDLE,        /* waiting for the retry timer */
  LINK_CONNECTING,  /* resolving or connecting */
  LINK_GREETING,    /* Hello sent, waiting for Welcome */
  LINK_REGISTERED,  /* Register sent, heartbeating */
  LINK_CLOSING,     /* the socket is closing; a retry follows */
};

/* Busy slots of one accelerator, summed over the samples. */
typedef struct acc_load {
  const acc_descriptor *acc;
  double busy_sum;
} acc_load;

struct nam_gam_link {
  uv_loop_t *loop;
  nam_server *srv;
  nam_engine *engine;
  char host[256], port[8];
  char gam[300];           /* HOST:PORT, for logs */
  char node[256];
  char address[300];
  char version[32];
  const nam_node_labels *labels;
  uint64_t interval_ms;
  lease_key key;           /* proves to the GAM this NAM is one of its own */
  uint8_t challenge[NODE_AUTH_CHALLENGE_BYTES]; /* this connection's */

  enum link_state state;
  int closed;              /* nam_gam_link_close was called */
  int handles_open;        /* freed when closed and this is 0 */
  int resolving;           /* a getaddrinfo request is out */
  uv_tcp_t tcp;
  int tcp_open;
  uv_connect_t connect_req;
  uv_getaddrinfo_t resolve_req;
  uv_timer_t retry, beat, deadline, sample;
  proto_reader rd;

  unsigned backoff_ms;     /* last backoff; 0 after a good connection */
  int attempts;            /* connection attempts so far */
  int outage_logged;       /* the current outage has been logged */
  int drained;
  int acked;               /* a HeartbeatAck came on this connection */
  int errors_logged;       /* Errors from the GAM logged on it */
  uint64_t seq;
  uint64_t last_rx_ms;     /* loop time of the last frame from the GAM */

  acc_load load[NAM_MAX_PAIRS];
  size_t n_load;
  uint64_t samples;
  uint64_t rng;
};

static void attempt(nam_gam_link *l);
static void drop(nam_gam_link *l, const char *why);

/* ---- life -------------------------------------------------------------- */

static void maybe_free(nam_gam_link *l) {
  if (!l->closed || l->handles_open > 0 || l->resolving) return;
  proto_reader_free(&l->rd);
  free(l);
}

static void on_handle_closed(uv_handle_t *h) {
  nam_gam_link *l = h->data;
  l->handles_open--;
  maybe_free(l);
}

static void close_handle(uv_handle_t *h) {
  if (!uv_is_closing(h)) uv_close(h, on_handle_closed);
}

static nam_stats *metrics(nam_gam_link *l) {
  return nam_server_metrics(l->srv);
}

/* xorshift64: jitter only, no need for more */
static unsigned jitter(nam_gam_link *l, unsigned below) {
  l->rng ^= l->rng << 13;
  l->rng ^= l->rng >> 7;
  l->rng ^= l->rng << 17;
  return below ? (unsigned)(l->rng % below) : 0;
}

/* The next wait: doubling from BACKOFF_MIN_MS to BACKOFF_MAX_MS, each wait
 * drawn from its upper half so that NAMs restarted together spread out. */
static unsigned next_backoff(nam_gam_link *l) {
  l->backoff_ms = l->backoff_ms ? l->backoff_ms * 2 : BACKOFF_MIN_MS;
  if (l->backoff_ms > BACKOFF_MAX_MS) l->backoff_ms = BACKOFF_MAX_MS;
  return l->backoff_ms / 2 + jitter(l, l->backoff_ms / 2 + 1);
}

static void on_retry(uv_timer_t *t) { attempt(t->data); }

static void on_tcp_closed(uv_handle_t *h) {
  nam_gam_link *l = h->data;
  l->tcp_open = 0;
  l->handles_open--;
  if (l->closed) {
    maybe_free(l);
    return;
  }
  l->state = LINK_IDLE;
  unsigned wait = next_backoff(l);
  log_debug("GAM %s: next attempt in %u ms", l->gam, wait);
  uv_timer_start(&l->retry, on_retry, wait, 0);
}

/* The connection failed or broke: close it, then retry after a backoff. */
static void drop(nam_gam_link *l, const char *why) {
  if (l->state == LINK_IDLE || l->state == LINK_CLOSING) return;
  int was_registered = l->acked;
  metrics(l)->gam_connected = 0;
  l->acked = 0;
  if (!l->outage_logged) {
    l->outage_logged = 1;
    if (was_registered)
      log_warn("lost the GAM at %s: %s; serving local clients, retrying "
               "with backoff", l->gam, why);
    else
      log_warn("cannot reach the GAM at %s: %s; serving local clients, "
               "retrying with backoff", l->gam, why);
  } else {
    log_debug("GAM %s: %s; retrying", l->gam, why);
  }
  uv_timer_stop(&l->beat);
  uv_timer_stop(&l->deadline);
  l->state = LINK_CLOSING;
  if (l->tcp_open) {
    uv_close((uv_handle_t *)&l->tcp, on_tcp_closed);
  } else {
    l->state = LINK_IDLE;
    uv_timer_start(&l->retry, on_retry, next_backoff(l), 0);
  }
}

/* ---- sending ----------------------------------------------------------- */

typedef struct write_req {
  uv_write_t req;
  uint8_t *data;
} write_req;

static void on_written(uv_write_t *req, int status) {
  write_req *w = (write_req *)req;
  nam_gam_link *l = req->data;
  free(w->data);
  free(w);
  if (status < 0 && status != UV_ECANCELED && !l->closed)
    drop(l, uv_strerror(status));
}

/* Queue one frame; the buffer is handed to libuv until written. */
static int send_msg(nam_gam_link *l, Ember__MsgType type,
                    const ProtobufCMessage *m) {
  proto_wbuf wb = {0};
  int rc = proto_wbuf_append(&wb, (uint8_t)type, m, MAX_FRAME);
  if (rc) {
    proto_wbuf_free(&wb);
    return rc;
  }
  write_req *w = malloc(sizeof *w);
  if (!w) {
    proto_wbuf_free(&wb);
    return EMBER_ENOMEM;
  }
  w->data = wb.data; /* taken over from the wbuf */
  w->req.data = l;
  uv_buf_t buf = uv_buf_init((char *)wb.data, (unsigned)wb.len);
  rc = uv_write(&w->req, (uv_stream_t *)&l->tcp, &buf, 1, on_written);
  if (rc) {
    free(w->data);
    free(w);
    drop(l, uv_strerror(rc));
    return EMBER_ECONNLOST;
  }
  return 0;
}

/* ---- what the node reports --------------------------------------------- */

static int pair_of(const nam_platform_status *p, const char *acc) {
  for (unsigned k = 0; k < p->n_pairs; k++)
    if (strcmp(p->pairs[k].accelerator, acc) == 0) return (int)k;
  return -1;
}

/* A platform's execution slots: a cpu platform's workers; one on a device
 * (it executes one task at a time; its pipeline only overlaps copies). */
static unsigned slots_of(const nam_platform_status *p) {
  return platform_kind_is_device(p->kind) ? 1 : p->workers;
}

/* One sample: for each accelerator, the slots busy with it now. A slot of
 * an FPGA belongs to its loaded bitstream; the others are shared between
 * the accelerators in the ratio of their running tasks (in flight at the
 * server minus queued in the engine). */
static void on_sample(uv_timer_t *t) {
  nam_gam_link *l = t->data;
  nam_platform_status ps[MAX_PLATFORMS];
  size_t np = nam_engine_platforms(l->engine, ps, MAX_PLATFORMS);
  double running[NAM_MAX_PAIRS], total = 0;
  for (size_t i = 0; i < l->n_load; i++) {
    unsigned inflight = nam_server_inflight(l->srv, l->load[i].acc);
    unsigned queued = nam_engine_queue_length(l->engine, l->load[i].acc);
    running[i] = inflight > queued ? inflight - queued : 0;
    total += running[i];
  }
  for (size_t i = 0; i < l->n_load; i++) {
    const char *name = l->load[i].acc->name;
    double busy = 0;
    for (size_t p = 0; p < np; p++) {
      if (pair_of(&ps[p], name) < 0) continue;
      unsigned slots = slots_of(&ps[p]);
      double used = ps[p].running < slots ? ps[p].running : slots;
      double share = ps[p].loaded[0] ? strcmp(ps[p].loaded, name) == 0
                                     : total > 0 ? running[i] / total : 0;
      busy += used * share;
    }
    l->load[i].busy_sum += busy;
  }
  l->samples++;
}

static uint64_t sample_period(uint64_t interval_ms) {
  uint64_t p = interval_ms / SAMPLES_PER_INTERVAL;
  return p < 10 ? 10 : p;
}

/* Slots that can run acc now: on ready platforms, with the pair ready. */
static unsigned slots_for(const nam_platform_status *ps, size_t np,
                          const char *acc) {
  unsigned slots = 0;
  for (size_t i = 0; i < np; i++) {
    int k = pair_of(&ps[i], acc);
    if (k >= 0 && strcmp(ps[i].state, "ready") == 0 &&
        strcmp(ps[i].pairs[k].state, "ready") == 0)
      slots += slots_of(&ps[i]);
  }
  return slots;
}

/* Storage the Register and Heartbeat messages point into. */
typedef struct report {
  nam_platform_status ps[MAX_PLATFORMS];
  size_t np;
  nam_disabled disabled;
  char *labels[NAM_MAX_LABELS];
  size_t n_labels;
  char *disabled_p[NAM_MAX_DISABLED];
  char *platforms[MAX_PLATFORMS];
  Ember__AcceleratorLoad load[NAM_MAX_PAIRS], *load_p[NAM_MAX_PAIRS];
  Ember__FpgaState fpga[MAX_PLATFORMS], *fpga_p[MAX_PLATFORMS];
  size_t n_fpga;
  uint64_t leases[MAX_LEASES];
} report;

static void fill_platforms(nam_gam_link *l, report *r) {
  r->np = nam_engine_platforms(l->engine, r->ps, MAX_PLATFORMS);
  for (size_t i = 0; i < r->np; i++) r->platforms[i] = r->ps[i].name;
}

static void send_register(nam_gam_link *l) {
  report *r = calloc(1, sizeof *r);
  if (!r) {
    drop(l, "out of memory");
    return;
  }
  fill_platforms(l, r);
  for (size_t i = 0; i < l->labels->n; i++)
    r->labels[i] = (char *)l->labels->items[i];
  Ember__Register m = EMBER__REGISTER__INIT;
  m.node = l->node;
  m.address = l->address;
  m.n_labels = l->labels->n;
  m.labels = r->labels;
  m.n_platforms = r->np;
  m.platforms = r->platforms;
  m.version = l->version;
  uint8_t auth[NODE_AUTH_MAC_BYTES];
  node_auth_mac(&l->key, l->challenge, l->node, auth);
  m.has_auth = 1;
  m.auth.data = auth;
  m.auth.len = sizeof auth;
  send_msg(l, EMBER__MSG_TYPE__MSG_REGISTER, &m.base);
  free(r);
}

static void send_heartbeat(nam_gam_link *l) {
  if (uv_stream_get_write_queue_size((uv_stream_t *)&l->tcp) > MAX_WRITE_QUEUE) {
    log_debug("GAM %s: not reading our heartbeats; skipping one", l->gam);
    return;
  }
  report *r = calloc(1, sizeof *r);
  if (!r) return; /* the next beat will try again */
  fill_platforms(l, r);
  nam_disabled_now(l->engine, &r->disabled);
  Ember__Heartbeat m = EMBER__HEARTBEAT__INIT;
  m.node = l->node;
  m.seq = ++l->seq;
  for (size_t i = 0; i < l->labels->n; i++)
    if (nam_label_served(l->labels, &r->disabled, l->labels->items[i]))
      r->labels[r->n_labels++] = (char *)l->labels->items[i];
  m.n_labels = r->n_labels;
  m.labels = r->labels;
  for (size_t i = 0; i < r->disabled.n; i++)
    r->disabled_p[i] = r->disabled.items[i];
  m.n_disabled = r->disabled.n;
  m.disabled = r->disabled_p;
  for (size_t i = 0; i < l->n_load; i++) {
    Ember__AcceleratorLoad *a = &r->load[i];
    ember__accelerator_load__init(a);
    a->accelerator = (char *)l->load[i].acc->name;
    a->has_queued = a->has_utilization = 1;
    a->queued = nam_engine_queue_length(l->engine, l->load[i].acc);
    unsigned slots = slots_for(r->ps, r->np, l->load[i].acc->name);
    double busy = l->samples ? l->load[i].busy_sum / (double)l->samples : 0;
    double u = slots ? busy / slots : (busy > 0 ? 1 : 0);
    a->utilization = u > 1 ? 1 : u;
    l->load[i].busy_sum = 0;
    r->load_p[i] = a;
  }
  l->samples = 0;
  m.n_load = l->n_load;
  m.load = r->load_p;
  for (size_t i = 0; i < r->np; i++) {
    if (!platform_kind_has_bitstream(r->ps[i].kind)) continue;
    Ember__FpgaState *f = &r->fpga[r->n_fpga];
    ember__fpga_state__init(f);
    f->platform = r->ps[i].name;
    f->bitstream = r->ps[i].loaded;
    r->fpga_p[r->n_fpga++] = f;
  }
  m.n_fpgas = r->n_fpga;
  m.fpgas = r->fpga_p;
  m.n_leases_in_use = nam_server_leases_in_use(l->srv, r->leases, MAX_LEASES);
  m.leases_in_use = r->leases;
  m.n_platforms = r->np;
  m.platforms = r->platforms;
  if (send_msg(l, EMBER__MSG_TYPE__MSG_HEARTBEAT, &m.base) == 0)
    metrics(l)->gam_heartbeats_sent++;
  free(r);
}

/* ---- the heartbeat timer ----------------------------------------------- */

static uint64_t silent_limit(const nam_gam_link *l) {
  uint64_t limit = l->interval_ms * SILENT_INTERVALS;
  return limit < SILENT_MIN_MS ? SILENT_MIN_MS : limit;
}

static void on_beat(uv_timer_t *t) {
  nam_gam_link *l = t->data;
  if (l->state != LINK_REGISTERED) return;
  uint64_t quiet = uv_now(l->loop) - l->last_rx_ms;
  if (quiet > silent_limit(l)) {
    char why[96];
    snprintf(why, sizeof why, "no answer for %" PRIu64 " ms", quiet);
    drop(l, why);
    return;
  }
  send_heartbeat(l);
}

static void set_interval(nam_gam_link *l, uint64_t ms) {
  l->interval_ms = ms;
  uv_timer_start(&l->beat, on_beat, ms, ms);
  uint64_t p = sample_period(ms);
  uv_timer_start(&l->sample, on_sample, p, p);
}

/* ---- receiving --------------------------------------------------------- */

static void on_welcome(nam_gam_link *l, const Ember__Welcome *w) {
  if (!w->has_challenge || w->challenge.len != sizeof l->challenge) {
    drop(l, "the GAM's Welcome has no challenge (an older GAM?)");
    return;
  }
  memcpy(l->challenge, w->challenge.data, sizeof l->challenge);
  uv_timer_stop(&l->deadline);
  l->state = LINK_REGISTERED;
  send_register(l);
  if (l->state != LINK_REGISTERED) return;
  send_heartbeat(l); /* the GAM learns the node's state at once */
  uv_timer_start(&l->beat, on_beat, l->interval_ms, l->interval_ms);
}

static void on_ack(nam_gam_link *l, const Ember__HeartbeatAck *a) {
  if (!l->acked) { /* the registration went through */
    l->acked = 1;
    l->outage_logged = 0;
    metrics(l)->gam_connected = 1;
    log_notice("registered with the GAM at %s as %s (%zu labels, address %s)",
               l->gam, l->node, l->labels->n,
               l->address[0] ? l->address : "none");
  }
  l->backoff_ms = 0; /* a working connection: the next outage starts low */
  if (a->has_interval_ms && a->interval_ms > 0 &&
      a->interval_ms != l->interval_ms) {
    log_info("GAM %s: heartbeat interval %u ms", l->gam, a->interval_ms);
    set_interval(l, a->interval_ms);
  }
  if (a->n_ended_leases) {
    log_info("GAM %s: %zu lease(s) ended", l->gam, a->n_ended_leases);
    nam_leases_end(l->srv, a->ended_leases, a->ended_expires_unix_ms,
                   a->n_ended_expires_unix_ms, a->n_ended_leases);
  }
  int drained = a->has_drained && a->drained;
  if (drained != l->drained) {
    l->drained = drained;
    log_notice(drained ? "the GAM drained this node: no new leases"
                       : "the GAM undrained this node");
  }
}

static void handle_frame(nam_gam_link *l, const proto_frame *f) {
  ProtobufCMessage *m = proto_unpack(f);
  if (!m) {
    log_warn("GAM %s: malformed or unknown frame (type %u, %zu bytes) "
             "ignored", l->gam, f->type, f->len);
    return;
  }
  switch (f->type) {
  case EMBER__MSG_TYPE__MSG_WELCOME:
    if (l->state == LINK_GREETING) on_welcome(l, (Ember__Welcome *)m);
    break;
  case EMBER__MSG_TYPE__MSG_HEARTBEAT_ACK:
    on_ack(l, (Ember__HeartbeatAck *)m);
    break;
  case EMBER__MSG_TYPE__MSG_ERROR: {
    const Ember__Error *e = (Ember__Error *)m;
    char why[300];
    snprintf(why, sizeof why, "the GAM says %s: %s", ember_errname(e->code),
             e->message);
    if (l->state == LINK_GREETING || !l->acked) {
      drop(l, why); /* greeting or Register refused: try again later */
    } else if (l->errors_logged++ == 0) {
      log_warn("GAM %s: %s", l->gam, why);
    } else {
      log_debug("GAM %s: %s", l->gam, why);
    }
    break;
  }
  default:
    log_debug("GAM %s: %s ignored", l->gam, proto_type_name(f->type));
  }
  protobuf_c_message_free_unpacked(m, NULL);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  nam_gam_link *l = h->data;
  size_t avail = 0;
  int err = 0;
  uint8_t *p = proto_reader_space(&l->rd, &avail, &err);
  *buf = uv_buf_init((char *)p, p ? (unsigned)(avail > (1u << 30) ? 1u << 30 : avail) : 0);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  nam_gam_link *l = s->data;
  if (n == 0) return;
  if (n < 0) {
    drop(l, n == UV_EOF ? "the GAM closed the connection" : uv_strerror((int)n));
    return;
  }
  proto_reader_commit(&l->rd, (size_t)n);
  l->last_rx_ms = uv_now(l->loop);
  proto_frame f;
  int rc;
  while ((l->state == LINK_GREETING || l->state == LINK_REGISTERED) &&
         (rc = proto_reader_next(&l->rd, &f)) != 0) {
    if (rc < 0) {
      drop(l, "frame from the GAM over the limit");
      return;
    }
    handle_frame(l, &f);
  }
}

/* ---- connecting -------------------------------------------------------- */

static void on_connected(uv_connect_t *req, int status) {
  nam_gam_link *l = req->data;
  if (status == UV_ECANCELED || l->closed || l->state != LINK_CONNECTING)
    return;
  if (status < 0) {
    drop(l, uv_strerror(status));
    return;
  }
  uv_tcp_nodelay(&l->tcp, 1);
  /* a fresh reader: nothing from the last connection carries over */
  proto_reader_free(&l->rd);
  proto_reader_init(&l->rd, MAX_FRAME);
  l->state = LINK_GREETING;
  l->acked = 0;
  l->errors_logged = 0;
  l->last_rx_ms = uv_now(l->loop);
  int rc = uv_read_start((uv_stream_t *)&l->tcp, on_alloc, on_read);
  if (rc) {
    drop(l, uv_strerror(rc));
    return;
  }
  char name[300];
  snprintf(name, sizeof name, "ember-nam %s", l->node);
  Ember__Hello h = EMBER__HELLO__INIT;
  h.protocol_version = PROTO_VERSION;
  h.client_name = name;
  send_msg(l, EMBER__MSG_TYPE__MSG_HELLO, &h.base);
}

static void connect_to(nam_gam_link *l, const struct sockaddr *sa) {
  int rc = uv_tcp_init(l->loop, &l->tcp);
  if (rc) {
    drop(l, uv_strerror(rc));
    return;
  }
  l->tcp.data = l;
  l->tcp_open = 1;
  l->handles_open++;
  l->connect_req.data = l;
  rc = uv_tcp_connect(&l->connect_req, &l->tcp, sa, on_connected);
  if (rc) drop(l, uv_strerror(rc));
}

static void on_resolved(uv_getaddrinfo_t *req, int status,
                        struct addrinfo *res) {
  nam_gam_link *l = req->data;
  l->resolving = 0;
  if (l->closed) {
    uv_freeaddrinfo(res);
    maybe_free(l);
    return;
  }
  if (l->state != LINK_CONNECTING) {
    /* this attempt was given up (timed out) meanwhile */
  } else if (status < 0 || !res) {
    drop(l, uv_strerror(status));
  } else {
    connect_to(l, res->ai_addr);
  }
  uv_freeaddrinfo(res);
}

static void on_deadline(uv_timer_t *t) {
  nam_gam_link *l = t->data;
  if (l->resolving) uv_cancel((uv_req_t *)&l->resolve_req);
  drop(l, l->state == LINK_GREETING ? "no Welcome in time"
                                    : "connecting timed out");
}

static void attempt(nam_gam_link *l) {
  if (l->closed || l->state != LINK_IDLE) return;
  if (l->resolving) { /* the last attempt's resolver has not returned */
    uv_timer_start(&l->retry, on_retry, BACKOFF_MIN_MS, 0);
    return;
  }
  if (l->attempts++ > 0) metrics(l)->gam_reconnects++;
  l->state = LINK_CONNECTING;
  uv_timer_start(&l->deadline, on_deadline, GREETING_TIMEOUT_MS, 0);
  /* an address needs no resolver thread */
  struct sockaddr_storage ss;
  int port = atoi(l->port);
  if (uv_ip4_addr(l->host, port, (struct sockaddr_in *)&ss) == 0 ||
      uv_ip6_addr(l->host, port, (struct sockaddr_in6 *)&ss) == 0) {
    connect_to(l, (struct sockaddr *)&ss);
    return;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICSERV};
  l->resolve_req.data = l;
  int rc = uv_getaddrinfo(l->loop, &l->resolve_req, on_resolved, l->host,
                          l->port, &hints);
  if (rc)
    drop(l, uv_strerror(rc));
  else
    l->resolving = 1;
}

/* ---- start and close --------------------------------------------------- */

static void init_timer(nam_gam_link *l, uv_timer_t *t) {
  uv_timer_init(l->loop, t);
  t->data = l;
  l->handles_open++;
}

int nam_gam_link_start(uv_loop_t *loop, nam_server *server, nam_engine *engine,
                       const nam_gam_link_config *cfg, nam_gam_link **out,
                       char *err, size_t err_len) {
  const char *hp = strncmp(cfg->gam, "tcp:", 4) == 0 ? cfg->gam + 4 : cfg->gam;
  hostport a;
  if (hostport_parse(hp, 0, &a, err, err_len) != 0) return EMBER_ECONFIG;
  nam_gam_link *l = calloc(1, sizeof *l);
  if (!l) return EMBER_ENOMEM;
  l->loop = loop;
  l->srv = server;
  l->engine = engine;
  snprintf(l->host, sizeof l->host, "%s", a.host);
  snprintf(l->port, sizeof l->port, "%s", a.port);
  snprintf(l->gam, sizeof l->gam, "%s", hp);
  snprintf(l->node, sizeof l->node, "%s", cfg->node);
  l->key = *cfg->key;
  snprintf(l->address, sizeof l->address, "%s", cfg->address ? cfg->address : "");
  snprintf(l->version, sizeof l->version, "%s", cfg->version ? cfg->version : "");
  l->labels = cfg->labels;
  l->interval_ms = cfg->interval_ms ? cfg->interval_ms : 1000;
  l->rng = (uint64_t)getpid() * 0x9E3779B97F4A7C15ull ^ uv_hrtime();
  if (!l->rng) l->rng = 1;
  proto_reader_init(&l->rd, MAX_FRAME);
  const acc_descriptor *accs[NAM_MAX_PAIRS];
  l->n_load = nam_engine_accelerators(engine, accs, NAM_MAX_PAIRS);
  for (size_t i = 0; i < l->n_load; i++) l->load[i].acc = accs[i];
  init_timer(l, &l->retry);
  init_timer(l, &l->beat);
  init_timer(l, &l->deadline);
  init_timer(l, &l->sample);
  uint64_t p = sample_period(l->interval_ms);
  uv_timer_start(&l->sample, on_sample, p, p);
  metrics(l)->gam_configured = 1;
  l->state = LINK_IDLE;
  uv_timer_start(&l->retry, on_retry, 0, 0);
  *out = l;
  return 0;
}

void nam_gam_link_close(nam_gam_link *l) {
  if (!l || l->closed) return;
  l->closed = 1;
  metrics(l)->gam_connected = 0;
  if (l->resolving) uv_cancel((uv_req_t *)&l->resolve_req);
  if (l->tcp_open && !uv_is_closing((uv_handle_t *)&l->tcp))
    uv_close((uv_handle_t *)&l->tcp, on_tcp_closed);
  close_handle((uv_handle_t *)&l->retry);
  close_handle((uv_handle_t *)&l->beat);
  close_handle((uv_handle_t *)&l->deadline);
  close_handle((uv_handle_t *)&l->sample);
}
