/*
 * conn_admit.c - who may connect. Every connection is counted for its peer
 * (a uid on the unix sockets, an address on TCP) and, until its Hello (and
 * a lease's LeaseProof) is through, as one of the server's startups.
 *
 * A new connection needs room under each limit: its peer's
 * (max_clients_per_uid, max_clients_per_address), its listener kind's
 * (max_clients_unix, max_clients_tcp), max_clients, and the startups'
 * budget (max_startups, as sshd's MaxStartups start:rate:full). Where a
 * limit is full and startups hold part of it, the oldest startup of the
 * peer that holds the most makes way (Error EBUSY) and the new one is
 * taken; only a limit full of clients through their Hello (or of startups
 * accepted in this turn of the loop, not read yet) refuses it.
 * Past start, a new connection makes such a startup go with a chance that
 * rises from rate percent to 100 at full (random early drop). So silent
 * connections never hold more than full slots, the rest stay for clients
 * that finished their Hello, and a client that says Hello at once is not
 * the one that goes: an attacker who reopens its dropped sockets drops its
 * own oldest ones.
 */
#include "server_internal.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ember/ember_errors.h"
#include "log.h"

/* ---- peers ---------------------------------------------------------------- */

void nam_peer_key_of(int fd, int is_unix, nam_peer_key *key, char *text,
                     size_t text_len) {
  memset(key, 0, sizeof *key);
  key->bytes[0] = '?';
  snprintf(text, text_len, "?");
  if (is_unix) {
    struct ucred cred;
    socklen_t clen = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) == 0) {
      key->bytes[0] = 'u';
      uint32_t uid = (uint32_t)cred.uid;
      memcpy(key->bytes + 1, &uid, sizeof uid);
      snprintf(text, text_len, "pid %d uid %u", (int)cred.pid, uid);
    }
    return;
  }
  struct sockaddr_storage ss;
  socklen_t alen = sizeof ss;
  if (getpeername(fd, (struct sockaddr *)&ss, &alen) != 0) return;
  char host[64] = "", port[16] = "";
  getnameinfo((struct sockaddr *)&ss, alen, host, sizeof host, port,
              sizeof port, NI_NUMERICHOST | NI_NUMERICSERV);
  snprintf(text, text_len, "%s:%s", host, port);
  if (ss.ss_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)&ss;
    key->bytes[0] = '4';
    memcpy(key->bytes + 1, &a->sin_addr, 4);
  } else if (ss.ss_family == AF_INET6) {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
      key->bytes[0] = '4';
      memcpy(key->bytes + 1, a->sin6_addr.s6_addr + 12, 4);
    } else {
      key->bytes[0] = '6';
      memcpy(key->bytes + 1, &a->sin6_addr, 16);
    }
  }
}

static void peer_name(const nam_peer_key *k, char *out, size_t len) {
  if (k->bytes[0] == 'u') {
    uint32_t uid;
    memcpy(&uid, k->bytes + 1, sizeof uid);
    snprintf(out, len, "uid %u", uid);
  } else if (k->bytes[0] == '4' || k->bytes[0] == '6') {
    char a[INET6_ADDRSTRLEN] = "?";
    inet_ntop(k->bytes[0] == '4' ? AF_INET : AF_INET6, k->bytes + 1, a,
              sizeof a);
    snprintf(out, len, "%s", a);
  } else {
    snprintf(out, len, "an unknown peer");
  }
}

/* FNV-1a from a random seed: a client cannot choose addresses that all
 * land in one chain. */
static size_t bucket_of(const nam_server *s, const nam_peer_key *k) {
  uint64_t h = 1469598103934665603ull ^ s->peer_seed;
  for (size_t i = 0; i < sizeof k->bytes; i++) {
    h ^= k->bytes[i];
    h *= 1099511628211ull;
  }
  return (size_t)(h % NAM_PEER_BUCKETS);
}

static nam_peer *peer_find(const nam_server *s, const nam_peer_key *k) {
  for (nam_peer *p = s->peers[bucket_of(s, k)]; p; p = p->next)
    if (memcmp(p->key.bytes, k->bytes, sizeof k->bytes) == 0) return p;
  return NULL;
}

static void seed(nam_server *s) {
  uint64_t v[2];
  if (getrandom(v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    v[0] = (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    v[1] = (uint64_t)ts.tv_sec * 0x9e3779b97f4a7c15ull;
  }
  s->peer_seed = v[0];
  s->rng = v[1] | 1;
}

/* xorshift64*: percent draws for the random early drop */
static unsigned draw_percent(nam_server *s) {
  s->rng ^= s->rng >> 12;
  s->rng ^= s->rng << 25;
  s->rng ^= s->rng >> 27;
  return (unsigned)((s->rng * 2685821657736338717ull) >> 32) % 100;
}

int nam_admit_open(nam_server *s, nam_conn *c, const nam_peer_key *key) {
  if (!s->peer_seed) seed(s);
  nam_peer *p = peer_find(s, key);
  if (!p) {
    p = calloc(1, sizeof *p);
    if (!p) return EMBER_ENOMEM;
    p->key = *key;
    peer_name(key, p->name, sizeof p->name);
    size_t b = bucket_of(s, key);
    p->next = s->peers[b];
    s->peers[b] = p;
  }
  p->conns++;
  p->startups++;
  c->peer_of = p;
  c->opened_turn = s->turn;
  c->sprev = s->startups_tail;
  c->snext = NULL;
  if (s->startups_tail) s->startups_tail->snext = c; else s->startups_head = c;
  s->startups_tail = c;
  s->n_startups++;
  return 0;
}

static void leave_startups(nam_conn *c) {
  nam_server *s = c->srv;
  if (c->admitted) return;
  c->admitted = 1;
  if (c->sprev) c->sprev->snext = c->snext; else s->startups_head = c->snext;
  if (c->snext) c->snext->sprev = c->sprev; else s->startups_tail = c->sprev;
  c->sprev = c->snext = NULL;
  s->n_startups--;
  if (c->peer_of) c->peer_of->startups--;
}

void nam_admit_done(nam_conn *c) { leave_startups(c); }

void nam_admit_close(nam_conn *c) {
  nam_server *s = c->srv;
  leave_startups(c);
  nam_peer *p = c->peer_of;
  c->peer_of = NULL;
  if (!p || --p->conns > 0) return;
  nam_peer **pp = &s->peers[bucket_of(s, &p->key)];
  while (*pp != p) pp = &(*pp)->next;
  *pp = p->next;
  free(p);
}

void nam_admit_free(nam_server *s) {
  for (size_t b = 0; b < NAM_PEER_BUCKETS; b++)
    while (s->peers[b]) {
      nam_peer *p = s->peers[b];
      s->peers[b] = p->next;
      free(p);
    }
}

/* ---- making way ------------------------------------------------------------ */

enum { ANY_KIND = -1 };

/* A startup that has had a whole turn of the loop to be read: one whose
 * Hello came with its connect is through it by then. */
static int had_its_turn(const nam_server *s, const nam_conn *c) {
  return c->opened_turn + 1 < s->turn;
}

/* The oldest startup of the peer that holds the most startups, among
 * those of one kind (unix 1, tcp 0, ANY_KIND) or of one peer (only), that
 * had its turn; NULL if none. */
static nam_conn *victim(const nam_server *s, int kind, const nam_peer *only) {
  const nam_peer *most = only;
  if (!most)
    for (nam_conn *c = s->startups_head; c; c = c->snext)
      if ((kind == ANY_KIND || c->is_unix == kind) && c->peer_of &&
          had_its_turn(s, c) &&
          (!most || c->peer_of->startups > most->startups))
        most = c->peer_of;
  if (!most) return NULL;
  for (nam_conn *c = s->startups_head; c; c = c->snext)
    if (c->peer_of == most && had_its_turn(s, c)) return c;
  return NULL;
}

/* Drop v for the reason why: its Error says so; logged once a second. */
static void make_way(nam_server *s, nam_conn *v, enum nam_stats_drop stat,
                     const char *why) {
  char text[300];
  snprintf(text, sizeof text, "%s: this connection, the oldest without a "
           "Hello of the peer that holds the most (%s, %u), makes way",
           why, v->peer_of ? v->peer_of->name : "?",
           v->peer_of ? v->peer_of->startups : 0);
  nam_stats_dropped(&s->metrics, stat);
  s->pass_drops++;
  uint64_t now = uv_now(s->loop);
  if (!s->dropped_log_ms || now - s->dropped_log_ms >= 1000) {
    log_warn("dropping client %s: %s (%u more dropped since the last "
             "message)", v->peer, text, s->dropped_quiet);
    s->dropped_log_ms = now;
    s->dropped_quiet = 0;
  } else {
    s->dropped_quiet++;
  }
  nam_conn_drop(v, EMBER_EBUSY, LOG_LVL_DEBUG, text);
}

int nam_admit_drop_startup(nam_server *s, const char *why) {
  nam_conn *v = victim(s, ANY_KIND, NULL);
  if (!v) return 0;
  make_way(s, v, NAM_DROPPED_NOFILE, why);
  return 1;
}

/* A limit is full: 0 once a startup among kind/only made way, else -1. */
static int room_by_dropping(nam_server *s, int kind, const nam_peer *only,
                            enum nam_stats_drop stat, const char *why) {
  nam_conn *v = victim(s, kind, only);
  if (!v) return -1;
  make_way(s, v, stat, why);
  return 0;
}

/* A startup of this kind, of any age: one that will be able to make way
 * once it had its turn. */
static int has_startup(const nam_server *s, int kind) {
  for (nam_conn *c = s->startups_head; c; c = c->snext)
    if (kind == ANY_KIND || c->is_unix == kind) return 1;
  return 0;
}

/* A limit of everyone's is full and only startups that have not had their
 * turn could make way. */
static int must_wait(const nam_server *s, int full, int kind) {
  return full && !victim(s, kind, NULL) && has_startup(s, kind);
}

int nam_admit_wait(const nam_server *s, int is_unix) {
  const nam_server_limits *l = &s->limits;
  return must_wait(s, l->max_fds && s->fds_held >= l->max_fds, ANY_KIND) ||
         must_wait(s, is_unix ? s->clients_unix >= l->max_clients_unix
                              : s->clients_tcp >= l->max_clients_tcp,
                   is_unix) ||
         must_wait(s, s->stats.clients >= l->max_clients, ANY_KIND) ||
         must_wait(s, l->startups_full && s->n_startups >= l->startups_full,
                   ANY_KIND);
}

int nam_admit(nam_server *s, int is_unix, const nam_peer_key *key, char *why,
              size_t why_len, enum nam_stats_refusal *limit) {
  const nam_server_limits *l = &s->limits;
  char name[64];
  peer_name(key, name, sizeof name);
  const nam_peer *p = peer_find(s, key);
  /* per peer: its own startups make way first */
  unsigned per_peer = is_unix ? l->max_clients_per_uid
                              : l->max_clients_per_address;
  if (per_peer && p && p->conns >= per_peer) {
    snprintf(why, why_len, "too many clients from %s (%s %u)", name,
             is_unix ? "max_clients_per_uid" : "max_clients_per_address",
             per_peer);
    if (room_by_dropping(s, ANY_KIND, p, NAM_DROPPED_MAX_STARTUPS, why) != 0) {
      *limit = is_unix ? NAM_REFUSED_PER_UID : NAM_REFUSED_PER_ADDRESS;
      return -1;
    }
  }
  /* the descriptors RLIMIT_NOFILE leaves for clients */
  if (l->max_fds && s->fds_held >= l->max_fds) {
    snprintf(why, why_len, "the NAM is out of file descriptors (its "
             "clients hold %u, all that RLIMIT_NOFILE leaves them)",
             s->fds_held);
    if (room_by_dropping(s, ANY_KIND, NULL, NAM_DROPPED_NOFILE, why) != 0) {
      *limit = NAM_REFUSED_NOFILE;
      return -1;
    }
  }
  /* the listener kind's limit, then all of them together */
  if (is_unix ? s->clients_unix >= l->max_clients_unix
              : s->clients_tcp >= l->max_clients_tcp) {
    snprintf(why, why_len, is_unix ? "too many clients on unix socket (%u)"
                                   : "too many clients on tcp listener (%u)",
             is_unix ? l->max_clients_unix : l->max_clients_tcp);
    if (room_by_dropping(s, is_unix, NULL, NAM_DROPPED_MAX_STARTUPS, why) != 0) {
      *limit = is_unix ? NAM_REFUSED_MAX_CLIENTS_UNIX
                       : NAM_REFUSED_MAX_CLIENTS_TCP;
      return -1;
    }
  }
  if (s->stats.clients >= l->max_clients) {
    snprintf(why, why_len, "too many clients (max_clients %u)",
             l->max_clients);
    if (room_by_dropping(s, ANY_KIND, NULL, NAM_DROPPED_MAX_STARTUPS,
                         why) != 0) {
      *limit = NAM_REFUSED_MAX_CLIENTS;
      return -1;
    }
  }
  /* the startups' budget: past start a chance of making way, at full one */
  if (l->startups_full && s->n_startups >= l->startups_start) {
    unsigned start = l->startups_start, full = l->startups_full;
    unsigned chance = 100;
    if (s->n_startups < full && full > start)
      chance = l->startups_rate +
               (100 - l->startups_rate) * (s->n_startups - start) /
                   (full - start);
    if (s->n_startups >= full || draw_percent(s) < chance) {
      char text[160];
      snprintf(text, sizeof text, "%u connections without Hello "
               "(max_startups %u:%u:%u)", s->n_startups, start,
               l->startups_rate, full);
      (void)room_by_dropping(s, ANY_KIND, NULL, NAM_DROPPED_MAX_STARTUPS,
                             text);
    }
  }
  return 0;
}
