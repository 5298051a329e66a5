/*
 * cluster.c - nodes from ember-gam: Acquire, wait for the Allocation, one
 * client per granted NAM presenting its lease, and a thread that reads the
 * GAM connection for LeaseEnded while the cluster lives (see ember.h).
 */

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "backend.h"
#include "clock.h"
#include "last_error.h"
#include "lease_proof.h"
#include "remote.h"
#include "struct_abi.h"

#define GAM_MAX_FRAME ((size_t)16 << 20)
/* Waiting for the Allocation: the app's wait plus this much for the GAM to
 * say it gave up; with wait_ms 0 the GAM's own timeout applies, bounded
 * here by NO_WAIT_BOUND_MS in case the GAM hangs. */
#define WAIT_SLACK_MS 10000
#define NO_WAIT_BOUND_MS (15 * 60 * 1000)

typedef struct member {
  char node[129];
  char address[300];
  uint64_t lease_id;
  ember_client *client;
  int ended;                /* under cluster->lock */
} member;

struct ember_cluster {
  char gam[280];
  int fd;
  int wake[2];              /* release wakes the reader through this pipe */
  pthread_t reader;
  int reader_running;
  proto_reader rd;          /* the reader thread's, once it runs */
  uint64_t app_id;
  /* the app's key pair: the public key goes in Acquire and so in every
   * lease; the secret key proves to the NAMs that the leases are ours */
  uint8_t pk[LEASE_APP_PK_BYTES], sk[LEASE_APP_SK_BYTES];
  member *members;
  size_t n;
  pthread_mutex_t lock;
};

static uint64_t now_ms(void) { return clock_now_ns() / 1000000u; }

static int send_frame(ember_cluster *cl, Ember__MsgType type,
                      const ProtobufCMessage *m) {
  proto_wbuf w = {0};
  int rc = proto_wbuf_append(&w, (uint8_t)type, m, GAM_MAX_FRAME);
  if (rc == 0 && proto_send(cl->fd, w.data, w.len, NULL, 0) != 0) {
    ember__client_set_error("GAM %s: %s", cl->gam, strerror(errno));
    rc = EMBER_ECONNLOST;
  }
  proto_wbuf_free(&w);
  return rc;
}

/* The next frame from the GAM by deadline_ms (now_ms() clock; 0: none),
 * unpacked; NULL and the error in *rc. */
static ProtobufCMessage *recv_frame(ember_cluster *cl, uint64_t deadline_ms,
                                    uint8_t *type, int *rc) {
  for (;;) {
    proto_frame f;
    int got = proto_reader_next(&cl->rd, &f);
    if (got < 0) {
      ember__client_set_error("GAM %s: frame over the limit", cl->gam);
      *rc = EMBER_EPROTO;
      return NULL;
    }
    if (got == 1) {
      ProtobufCMessage *m = proto_unpack(&f);
      if (!m) continue; /* unknown or malformed: not what we wait for */
      *type = f.type;
      return m;
    }
    int wait = -1;
    if (deadline_ms) {
      uint64_t now = now_ms();
      if (now >= deadline_ms) {
        ember__client_set_error("GAM %s: no answer in time", cl->gam);
        *rc = EMBER_ETIMEDOUT;
        return NULL;
      }
      wait = (int)(deadline_ms - now);
    }
    struct pollfd p = {.fd = cl->fd, .events = POLLIN};
    int pr = poll(&p, 1, wait);
    if (pr < 0 && errno != EINTR) {
      ember__client_set_error("GAM %s: %s", cl->gam, strerror(errno));
      *rc = EMBER_ECONNLOST;
      return NULL;
    }
    if (pr <= 0) continue;
    ssize_t n = proto_recv(cl->fd, &cl->rd);
    if (n == -EAGAIN || n == -EINTR) continue;
    if (n <= 0) {
      ember__client_set_error("GAM %s: connection closed", cl->gam);
      *rc = EMBER_ECONNLOST;
      return NULL;
    }
  }
}

/* An Error frame from the GAM as the call's result. */
static int gam_error(ember_cluster *cl, const Ember__Error *e) {
  ember__client_set_error("GAM %s: %s", cl->gam, e->message);
  return e->code < 0 ? e->code : EMBER_EPROTO;
}

static int greet(ember_cluster *cl, const char *app, int timeout_ms) {
  Ember__Hello h = EMBER__HELLO__INIT;
  h.protocol_version = PROTO_VERSION;
  h.client_name = (char *)app;
  int rc = send_frame(cl, EMBER__MSG_TYPE__MSG_HELLO, &h.base);
  if (rc) return rc;
  uint8_t type;
  ProtobufCMessage *m = recv_frame(cl, now_ms() + (uint64_t)timeout_ms, &type, &rc);
  if (!m) return rc;
  if (type == EMBER__MSG_TYPE__MSG_ERROR) {
    rc = gam_error(cl, (Ember__Error *)m);
  } else if (type != EMBER__MSG_TYPE__MSG_WELCOME) {
    ember__client_set_error("GAM %s: expected Welcome, got %s", cl->gam,
                     proto_type_name(type));
    rc = EMBER_EPROTO;
  }
  protobuf_c_message_free_unpacked(m, NULL);
  return rc;
}

/* Connect to each granted NAM with its lease. */
static int open_members(ember_cluster *cl, const Ember__Allocation *a,
                        const ember_cluster_options *o, const char *app) {
  cl->members = calloc(a->n_grants ? a->n_grants : 1, sizeof *cl->members);
  if (!cl->members) return EMBER_ENOMEM;
  ember_options copts;
  int rc0 = ember__struct_in(&copts, sizeof copts, o->client,
                             EMBER__OPTIONS_V0, "ember_options");
  if (rc0) return rc0;
  if (!copts.client_name) copts.client_name = app;
  for (size_t i = 0; i < a->n_grants; i++) {
    const Ember__NodeGrant *g = a->grants[i];
    member *mb = &cl->members[cl->n++];
    snprintf(mb->node, sizeof mb->node, "%s", g->node);
    /* the GAM hands out tcp:HOST:PORT; take HOST:PORT as well */
    snprintf(mb->address, sizeof mb->address, "%s%s",
             strncmp(g->address, "tcp:", 4) == 0 ? "" : "tcp:", g->address);
    mb->lease_id = g->lease_id;
    ember__lease lease = {.id = g->lease_id, .sk = cl->sk};
    if (g->lease) {
      lease.body = g->lease->body.data;
      lease.body_len = g->lease->body.len;
      lease.mac = g->lease->mac.data;
      lease.mac_len = g->lease->mac.len;
    }
    int rc = ember__client_open(mb->address, &copts, g->lease ? &lease : NULL,
                                &mb->client);
    if (rc) {
      char detail[512];
      snprintf(detail, sizeof detail, "%s", ember_last_error());
      ember__client_set_error("node %s (%s): %s", mb->node, mb->address, detail);
      return rc;
    }
  }
  return 0;
}

static int acquire(ember_cluster *cl, const ember_cluster_options *o,
                   const char *app) {
  Ember__Acquire q = EMBER__ACQUIRE__INIT;
  q.app = (char *)app;
  q.label = (char *)o->label;
  q.count = o->count ? o->count : 1;
  q.has_app_key = 1;
  q.app_key.data = cl->pk;
  q.app_key.len = sizeof cl->pk;
  if (o->wait_ms) {
    q.has_wait_ms = 1;
    q.wait_ms = o->wait_ms;
  }
  int rc = send_frame(cl, EMBER__MSG_TYPE__MSG_ACQUIRE, &q.base);
  if (rc) return rc;
  uint64_t deadline = now_ms() + (o->wait_ms ? (uint64_t)o->wait_ms + WAIT_SLACK_MS
                                             : NO_WAIT_BOUND_MS);
  for (;;) {
    uint8_t type;
    ProtobufCMessage *m = recv_frame(cl, deadline, &type, &rc);
    if (!m) return rc;
    if (type == EMBER__MSG_TYPE__MSG_ALLOCATION) {
      const Ember__Allocation *a = (Ember__Allocation *)m;
      cl->app_id = a->app_id;
      if (a->n_grants != q.count) {
        ember__client_set_error("GAM %s: %zu nodes granted, %u asked", cl->gam,
                         a->n_grants, q.count);
        rc = EMBER_EPROTO;
      } else {
        rc = open_members(cl, a, o, app);
      }
      protobuf_c_message_free_unpacked(m, NULL);
      return rc;
    }
    if (type == EMBER__MSG_TYPE__MSG_ERROR) {
      rc = gam_error(cl, (Ember__Error *)m);
      protobuf_c_message_free_unpacked(m, NULL);
      return rc;
    }
    protobuf_c_message_free_unpacked(m, NULL); /* nothing else matters yet */
  }
}

static void on_lease_ended(ember_cluster *cl, const Ember__LeaseEnded *e) {
  for (size_t i = 0; i < cl->n; i++) {
    member *mb = &cl->members[i];
    if (mb->lease_id != e->lease_id) continue;
    pthread_mutex_lock(&cl->lock);
    int was = mb->ended;
    mb->ended = 1;
    pthread_mutex_unlock(&cl->lock);
    if (!was) ember__client_lease_ended(mb->client);
  }
}

/* Reads LeaseEnded until release wakes it or the GAM goes away (the GAM
 * then ends the leases after its app_grace). */
static void *reader_main(void *arg) {
  ember_cluster *cl = arg;
  for (;;) {
    proto_frame f;
    int got;
    while ((got = proto_reader_next(&cl->rd, &f)) == 1) {
      ProtobufCMessage *m = proto_unpack(&f);
      if (!m) continue;
      if (f.type == EMBER__MSG_TYPE__MSG_LEASE_ENDED)
        on_lease_ended(cl, (Ember__LeaseEnded *)m);
      protobuf_c_message_free_unpacked(m, NULL);
    }
    if (got < 0) return NULL;
    struct pollfd p[2] = {{.fd = cl->fd, .events = POLLIN},
                          {.fd = cl->wake[0], .events = POLLIN}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return NULL;
    }
    if (p[1].revents) return NULL;
    ssize_t n = proto_recv(cl->fd, &cl->rd);
    if (n == -EAGAIN || n == -EINTR) continue;
    if (n <= 0) return NULL;
  }
}

/* "tcp:HOST:PORT" or "HOST:PORT" -> HOST:PORT */
static const char *gam_hostport(const char *gam) {
  return strncmp(gam, "tcp:", 4) == 0 ? gam + 4 : gam;
}

int ember_cluster_acquire(const ember_cluster_options *opts,
                          ember_cluster **out) {
  *out = NULL;
  ember_cluster_options full;
  int rc0 = ember__struct_in(&full, sizeof full, opts,
                             EMBER__CLUSTER_OPTIONS_V0, "ember_cluster_options");
  if (rc0) return rc0;
  const ember_cluster_options *o = opts ? &full : NULL;
  ember__client_set_error("%s", "");
  const char *gam = o && o->gam ? o->gam : getenv("EMBER_GAM");
  if (!o || !gam || !gam[0] || !o->label || !o->label[0]) {
    ember__client_set_error("ember_cluster_acquire: %s",
                     !o || !o->label || !o->label[0]
                         ? "no label" : "no GAM address (gam or $EMBER_GAM)");
    return EMBER_EINVAL;
  }
  const char *app = o->app_name ? o->app_name : "libember";
  int timeout_ms = o->client && o->client->connect_timeout_ms
                       ? o->client->connect_timeout_ms : 2000;
  ember_cluster *cl = calloc(1, sizeof *cl);
  if (!cl) return EMBER_ENOMEM;
  snprintf(cl->gam, sizeof cl->gam, "%s", gam_hostport(gam));
  cl->wake[0] = cl->wake[1] = -1;
  pthread_mutex_init(&cl->lock, NULL);
  proto_reader_init(&cl->rd, GAM_MAX_FRAME);
  char err[300];
  cl->fd = ember__remote_tcp_open(cl->gam, timeout_ms, err, sizeof err);
  int rc = 0;
  if (cl->fd < 0) {
    ember__client_set_error("GAM %s: %s", cl->gam, err);
    rc = EMBER_ECONNECT;
  }
  if (rc == 0 && lease_app_keypair(cl->pk, cl->sk) != 0) {
    ember__client_set_error("%s", "libsodium failed to initialise");
    rc = EMBER_EINTERNAL;
  }
  if (rc == 0) rc = greet(cl, app, timeout_ms);
  if (rc == 0) rc = acquire(cl, o, app);
  if (rc == 0 && pipe2(cl->wake, O_CLOEXEC) != 0) rc = EMBER_ENOMEM;
  if (rc == 0) {
    if (pthread_create(&cl->reader, NULL, reader_main, cl) != 0)
      rc = EMBER_ENOMEM;
    else
      cl->reader_running = 1;
  }
  if (rc) {
    char detail[512];
    snprintf(detail, sizeof detail, "%s", ember_last_error());
    ember_cluster_release(cl); /* gives back what was granted, if anything */
    ember__client_set_error("%s", detail);
    return rc;
  }
  *out = cl;
  return 0;
}

size_t ember_cluster_size(const ember_cluster *cl) { return cl->n; }

ember_client *ember_cluster_client(ember_cluster *cl, size_t i) {
  return i < cl->n ? cl->members[i].client : NULL;
}

const char *ember_cluster_node(const ember_cluster *cl, size_t i) {
  return i < cl->n ? cl->members[i].node : NULL;
}

uint64_t ember_cluster_lease_id(const ember_cluster *cl, size_t i) {
  return i < cl->n ? cl->members[i].lease_id : 0;
}

int ember_cluster_ended(ember_cluster *cl, size_t i) {
  if (i >= cl->n) return 0;
  pthread_mutex_lock(&cl->lock);
  int ended = cl->members[i].ended;
  pthread_mutex_unlock(&cl->lock);
  return ended;
}

uint64_t ember_cluster_app_id(const ember_cluster *cl) { return cl->app_id; }

void ember_cluster_release(ember_cluster *cl) {
  if (!cl) return;
  if (cl->fd >= 0 && cl->app_id) {
    /* no lease ids: all of them, and the app ends; nothing to wait for */
    Ember__Release r = EMBER__RELEASE__INIT;
    r.app_id = cl->app_id;
    send_frame(cl, EMBER__MSG_TYPE__MSG_RELEASE, &r.base);
  }
  if (cl->reader_running) {
    ssize_t w = write(cl->wake[1], "x", 1);
    (void)w;
    pthread_join(cl->reader, NULL);
  }
  if (cl->fd >= 0) close(cl->fd);
  if (cl->wake[0] >= 0) close(cl->wake[0]);
  if (cl->wake[1] >= 0) close(cl->wake[1]);
  for (size_t i = 0; i < cl->n; i++) ember_close(cl->members[i].client);
  free(cl->members);
  proto_reader_free(&cl->rd);
  pthread_mutex_destroy(&cl->lock);
  sodium_memzero(cl->sk, sizeof cl->sk);
  free(cl);
}
