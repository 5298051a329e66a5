/*
 * server_guard.c - who may hold a connection to ember-gam's protocol port,
 * and for how long (server.h):
 *   - at accept: max_connections, max_connections_per_address,
 *     max_startups_per_address, and max_startups (sshd's MaxStartups:
 *     random early drop of connections that have not said Hello, past
 *     START, certain at FULL), where the one dropped is the oldest
 *     unfinished handshake of an address that holds more of them than the
 *     newcomer's does, if there is one: an address opening many cannot
 *     crowd out one that opens a few;
 *   - afterwards, one timer walking every connection: handshake_timeout,
 *     frame_timeout (a frame begun and not finished, replies left unread),
 *     idle_timeout (nothing held, nothing sent).
 * Refusals and closes are counted (conn_stats.h) and told in one log line
 * per interval, however many there were.
 */
#include "server_internal.h"

#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "ember/ember_errors.h"
#include "log.h"

/* uthash on peer addresses with a keyed hash (SipHash, libsodium's
 * crypto_shorthash, under gam_server.peer_key): the addresses are chosen
 * by the peers, and an attacker who could choose colliding ones would turn
 * lookups into walks. The macro needs a gam_server *s where it is used. */
static unsigned peer_hash(const uint8_t *hash_key, const void *key,
                          size_t len) {
  uint8_t h[crypto_shorthash_BYTES];
  crypto_shorthash(h, key, len, hash_key);
  unsigned v;
  memcpy(&v, h, sizeof v);
  return v;
}

#undef HASH_FUNCTION
#define HASH_FUNCTION(keyptr, keylen, hashv) \
  ((hashv) = peer_hash(s->peer_key, (keyptr), (keylen)))

/* Told once per interval at most. */
#define TELL_INTERVAL_MS 10000

static const char *const refusal_text[GAM_REFUSED_N] = {
  [GAM_REFUSED_MAX_CONNECTIONS] = "max_connections",
  [GAM_REFUSED_PER_ADDRESS] = "max_connections_per_address",
  [GAM_REFUSED_STARTUPS_PER_ADDRESS] = "max_startups_per_address",
  [GAM_REFUSED_STARTUPS] = "max_startups",
  [GAM_REFUSED_NO_MEMORY] = "out of memory",
};

static const char *const closing_text[GAM_CLOSED_N] = {
  [GAM_CLOSED_HANDSHAKE_TIMEOUT] = "handshake_timeout",
  [GAM_CLOSED_FRAME_TIMEOUT] = "frame_timeout",
  [GAM_CLOSED_IDLE_TIMEOUT] = "idle_timeout",
  [GAM_CLOSED_SEND_STALL] = "replies unread",
  [GAM_CLOSED_EVICTED] = "max_startups (an older handshake dropped)",
  [GAM_CLOSED_TOO_BIG] = "frame over the limit",
  [GAM_CLOSED_BUFFERS_FULL] = "max_read_buffers",
};

/* One line for everything refused and closed since the last one, if the
 * interval has passed; force: whatever is untold, now. */
static void tell(gam_server *s, bool force) {
  uint64_t now = uv_now(s->loop);
  if (!force && s->told_ms && now - s->told_ms < TELL_INTERVAL_MS) return;
  char line[1024];
  size_t n = 0;
  uint64_t refused = 0, closed = 0;
  for (int i = 0; i < GAM_REFUSED_N; i++) refused += s->untold_refused[i];
  for (int i = 0; i < GAM_CLOSED_N; i++) closed += s->untold_closed[i];
  if (refused + closed == 0) return;
  line[0] = '\0';
  for (int i = 0; i < GAM_REFUSED_N && n < sizeof line; i++)
    if (s->untold_refused[i])
      n += (size_t)snprintf(line + n, sizeof line - n, "%s%llu refused (%s)",
                            n ? ", " : "",
                            (unsigned long long)s->untold_refused[i],
                            refusal_text[i]);
  for (int i = 0; i < GAM_CLOSED_N && n < sizeof line; i++)
    if (s->untold_closed[i])
      n += (size_t)snprintf(line + n, sizeof line - n, "%s%llu closed (%s)",
                            n ? ", " : "",
                            (unsigned long long)s->untold_closed[i],
                            closing_text[i]);
  log_warn("connections%s%s: %s", s->told_ms ? " in the last " : "",
           s->told_ms ? "interval" : "", line);
  memset(s->untold_refused, 0, sizeof s->untold_refused);
  memset(s->untold_closed, 0, sizeof s->untold_closed);
  s->told_ms = now;
}

void gam_guard_note_close(gam_server *s, gam_closing reason) {
  atomic_fetch_add(&s->stats->closed[reason], 1);
  s->untold_closed[reason]++;
  tell(s, false);
}

static void note_refusal(gam_server *s, gam_refusal reason) {
  atomic_fetch_add(&s->stats->refused[reason], 1);
  s->untold_refused[reason]++;
  tell(s, false);
}

void gam_guard_accept_failed(gam_server *s, int uv_err) {
  uint64_t now = uv_now(s->loop);
  s->accept_untold++;
  if (s->accept_told_ms && now - s->accept_told_ms < TELL_INTERVAL_MS) return;
  log_warn("accept: %s (%llu time%s%s)", uv_strerror(uv_err),
           (unsigned long long)s->accept_untold,
           s->accept_untold == 1 ? "" : "s",
           s->accept_told_ms ? " in the last interval" : "");
  s->accept_untold = 0;
  s->accept_told_ms = now;
}

/* ---- addresses ---------------------------------------------------------- */

static void address_key(const struct sockaddr_storage *ss, uint8_t out[16]) {
  memset(out, 0, 16);
  if (ss->ss_family == AF_INET6) {
    memcpy(out, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
  } else if (ss->ss_family == AF_INET) {
    out[10] = out[11] = 0xff;  /* ::ffff:a.b.c.d */
    memcpy(out + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
  }
}

static void startups_link(gam_server *s, gam_conn *c) {
  c->su_next = NULL;
  c->su_prev = s->startups_tail;
  if (s->startups_tail) s->startups_tail->su_next = c;
  else s->startups = c;
  s->startups_tail = c;
  s->n_startups++;
  c->from->startups++;
  atomic_store(&s->stats->startups, s->n_startups);
}

static void startups_unlink(gam_server *s, gam_conn *c) {
  if (c->su_prev) c->su_prev->su_next = c->su_next;
  else s->startups = c->su_next;
  if (c->su_next) c->su_next->su_prev = c->su_prev;
  else s->startups_tail = c->su_prev;
  c->su_prev = c->su_next = NULL;
  s->n_startups--;
  c->from->startups--;
  atomic_store(&s->stats->startups, s->n_startups);
}

/* Random early drop past START: true with RATE% at START, rising linearly
 * to 100% at FULL (sshd's MaxStartups). */
static bool early_drop(const gam_server *s) {
  unsigned n = s->n_startups, start = s->startups_start,
           full = s->startups_full;
  if (n < start) return false;
  if (n >= full) return true;
  uint64_t span = full - start;
  uint64_t p = (uint64_t)s->opt.startups_rate * span +
               (uint64_t)(100 - s->opt.startups_rate) * (n - start);
  uint64_t draw = randombytes_uniform((uint32_t)(100 * span));
  return draw < p;
}

/* The oldest handshake from an address that holds more of them than the
 * newcomer's does (held), or NULL: an address with none pending always
 * gets in at the expense of the stalest handshake (a real client's lasts
 * a round trip), and one holding many never pushes out those of an
 * address holding fewer. A walk of at most FULL, from the oldest, which
 * under attack are the attacker's. */
static gam_conn *drop_candidate(gam_server *s, unsigned held) {
  for (gam_conn *o = s->startups; o; o = o->su_next)
    if (o->from->startups > held) return o;
  return NULL;
}

/* Tell a refused peer why, if its socket takes it at once (no memory is
 * kept for it), before the caller closes it. */
static void tell_refused(gam_conn *c, const char *why) {
  Ember__Error e = EMBER__ERROR__INIT;
  e.code = EMBER_EBUSY;
  e.message = (char *)why;
  uint8_t frame[256];
  size_t len = protobuf_c_message_get_packed_size(&e.base);
  if (len > sizeof frame - PROTO_HEADER_SIZE) return;
  frame[0] = (uint8_t)len;
  frame[1] = (uint8_t)(len >> 8);
  frame[2] = frame[3] = 0;
  frame[4] = EMBER__MSG_TYPE__MSG_ERROR;
  protobuf_c_message_pack(&e.base, frame + PROTO_HEADER_SIZE);
  uv_buf_t b = uv_buf_init((char *)frame, (unsigned)(PROTO_HEADER_SIZE + len));
  (void)uv_try_write((uv_stream_t *)&c->tcp, &b, 1);
}

static int refuse(gam_server *s, gam_conn *c, gam_refusal reason,
                  const char *why) {
  note_refusal(s, reason);
  log_debug("%s: refused (%s)", c->peer, refusal_text[reason]);
  tell_refused(c, why);
  return -1;
}

int gam_guard_admit(gam_server *s, gam_conn *c,
                    const struct sockaddr_storage *ss) {
  uint8_t key[16];
  address_key(ss, key);
  gam_peer *p = NULL;
  HASH_FIND(hh, s->peers, key, sizeof key, p);
  unsigned conns = p ? p->conns : 0, startups = p ? p->startups : 0;
  if (s->opt.max_per_address && conns >= s->opt.max_per_address)
    return refuse(s, c, GAM_REFUSED_PER_ADDRESS,
                  "too many connections from your address "
                  "(max_connections_per_address)");
  if (s->opt.startups_per_address && startups >= s->opt.startups_per_address)
    return refuse(s, c, GAM_REFUSED_STARTUPS_PER_ADDRESS,
                  "too many connections from your address before Hello "
                  "(max_startups_per_address)");
  /* all connections taken, or random early drop past START: one goes,
   * the newcomer unless an address holding more handshakes has one */
  bool full = s->n_conns >= s->opt.max_connections;
  if (full || early_drop(s)) {
    gam_conn *victim = drop_candidate(s, startups);
    if (!victim && full)
      return refuse(s, c, GAM_REFUSED_MAX_CONNECTIONS,
                    "the GAM has max_connections connections");
    if (!victim)
      return refuse(s, c, GAM_REFUSED_STARTUPS,
                    "too many connections before Hello (max_startups)");
    gam_conn_drop(victim, GAM_CLOSED_EVICTED, EMBER_EBUSY,
                  "dropped for a newer connection: your address has too many "
                  "without Hello");
  }
  if (!p) {
    p = calloc(1, sizeof *p);
    if (p) {
      memcpy(p->addr, key, sizeof key);
      HASH_ADD(hh, s->peers, addr, sizeof p->addr, p);
      if (!p->hh.tbl) {  /* uthash could not grow: not added */
        free(p);
        p = NULL;
      }
    }
    if (!p) return refuse(s, c, GAM_REFUSED_NO_MEMORY, "out of memory");
  }
  c->from = p;
  p->conns++;
  startups_link(s, c);
  return 0;
}

void gam_guard_greeted(gam_conn *c) { startups_unlink(c->srv, c); }

void gam_guard_forget(gam_conn *c) {
  gam_server *s = c->srv;
  gam_peer *p = c->from;
  if (!p) return;
  if (!c->greeted) startups_unlink(s, c);
  c->from = NULL;
  if (--p->conns == 0) {
    HASH_DEL(s->peers, p);
    free(p);
  }
}

/* ---- timeouts ----------------------------------------------------------- */

/* How long c may go without a frame before idle_timeout closes it; 0:
 * never. */
static uint64_t idle_limit(gam_conn *c) {
  const gam_server_options *o = &c->srv->opt;
  if (!o->idle_ms || c->held || c->frame || c->head_len) return 0;
  switch (c->role) {
  case ROLE_NAM:  /* its heartbeats, or it is lost anyway */
    return o->idle_ms > o->nam_silent_ms ? o->idle_ms : o->nam_silent_ms;
  case ROLE_APP:
    if (c->app_id) return 0;  /* waiting for, or holding, leases */
    return o->idle_ms;
  default:
    return o->idle_ms;
  }
}

static void check(gam_conn *c, uint64_t now) {
  const gam_server_options *o = &c->srv->opt;
  char why[200];
  if (!c->greeted) {
    if (now - c->opened_ms < o->handshake_ms) return;
    snprintf(why, sizeof why, "no Hello within handshake_timeout (%llu ms)",
             (unsigned long long)o->handshake_ms);
    gam_conn_drop(c, GAM_CLOSED_HANDSHAKE_TIMEOUT, EMBER_ETIMEDOUT, why);
  } else if (c->partial_ms && !c->paused && now - c->partial_ms >= o->frame_ms) {
    snprintf(why, sizeof why, "a frame not complete within frame_timeout "
             "(%llu ms; %zu bytes of it came)", (unsigned long long)o->frame_ms,
             c->frame ? c->frame_len : c->head_len);
    gam_conn_drop(c, GAM_CLOSED_FRAME_TIMEOUT, EMBER_ETIMEDOUT, why);
  } else if (c->paused && now - c->paused_ms >= o->frame_ms) {
    /* no Error: it would only join what the peer does not read */
    gam_guard_note_close(c->srv, GAM_CLOSED_SEND_STALL);
    gam_conn_close(c, "its replies unread for frame_timeout");
  } else if (!c->paused) {
    uint64_t limit = idle_limit(c);
    if (!limit || now - c->active_ms < limit) return;
    if (c->role == ROLE_APP && c->app_id &&
        gam_core_app_live(c->srv->core, c->app_id)) {
      c->active_ms = now;  /* still held: look again after another while */
      return;
    }
    snprintf(why, sizeof why, "idle for idle_timeout (%llu ms) holding "
             "nothing", (unsigned long long)limit);
    gam_conn_drop(c, GAM_CLOSED_IDLE_TIMEOUT, EMBER_ETIMEDOUT, why);
  }
}

static void on_guard(uv_timer_t *t) {
  gam_server *s = t->data;
  uint64_t now = uv_now(s->loop);
  for (gam_conn *c = s->conns, *next; c; c = next) {
    next = c->next;  /* a closed one leaves the list */
    check(c, now);
  }
  tell(s, false);
}

/* A quarter of the shortest timeout, 50 ms to 1 s: a connection goes at
 * most that much past its time. */
static uint64_t period_of(const gam_server_options *o) {
  uint64_t p = o->handshake_ms < o->frame_ms ? o->handshake_ms : o->frame_ms;
  if (o->idle_ms && o->idle_ms < p) p = o->idle_ms;
  p /= 4;
  return p < 50 ? 50 : p > 1000 ? 1000 : p;
}

void gam_guard_start(gam_server *s) {
  randombytes_buf(s->peer_key, sizeof s->peer_key);
  /* the handshake budget never takes more than half the connections */
  unsigned half = s->opt.max_connections / 2 ? s->opt.max_connections / 2 : 1;
  s->startups_full = s->opt.startups_full < half ? s->opt.startups_full : half;
  s->startups_start = s->opt.startups_start < s->startups_full
                          ? s->opt.startups_start : s->startups_full;
  uv_timer_init(s->loop, &s->guard);
  s->guard.data = s;
  uint64_t p = period_of(&s->opt);
  uv_timer_start(&s->guard, on_guard, p, p);
}

void gam_guard_close(gam_server *s) {
  tell(s, true);
  uv_close((uv_handle_t *)&s->guard, NULL);
}
