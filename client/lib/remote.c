/*
 * remote.c - the connection to a NAM: connect and greet (with a cluster
 * member's lease), reading (by a caller that waits for its reply, or by the
 * connection's reader thread) that hands what arrives to the owner's
 * events, serialized writes, requests and their replies, and reconnection
 * with backoff. What becomes of tasks is backend_remote.c's.
 */
#include "remote.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "clock.h"
#include "hostport.h"
#include "last_error.h"
#include "lease_proof.h"

#define BACKOFF_MIN_NS 50000000ull    /* 50 ms */
#define BACKOFF_MAX_NS 2000000000ull  /* 2 s */

int ember__remote_init(ember__remote *r, ember_client *c,
                       const ember__lease *lease,
                       const ember__remote_events *events) {
  r->client = c;
  r->events = events;
  r->fd = -1;
  r->max_frame =
      c->opts.max_frame ? c->opts.max_frame : PROTO_DEFAULT_MAX_FRAME;
  r->max_inflight = 64;
  r->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  pthread_mutex_init(&r->send_lock, NULL);
  pthread_mutex_init(&r->connect_lock, NULL);
  pthread_mutex_init(&r->request_lock, NULL);
  pthread_cond_init(&r->reply_cv, NULL);
  if (r->wake_fd < 0) {
    ember__client_set_error("eventfd: %s", strerror(errno));
    return EMBER_ENOMEM;
  }
  if (!lease) return 0;
  r->lease_body = malloc(lease->body_len ? lease->body_len : 1);
  r->lease_mac = malloc(lease->mac_len ? lease->mac_len : 1);
  if (!r->lease_body || !r->lease_mac) return EMBER_ENOMEM;
  memcpy(r->lease_body, lease->body, lease->body_len);
  memcpy(r->lease_mac, lease->mac, lease->mac_len);
  r->lease_body_len = lease->body_len;
  r->lease_mac_len = lease->mac_len;
  r->lease_id = lease->id;
  if (lease->sk) memcpy(r->lease_sk, lease->sk, sizeof r->lease_sk);
  return 0;
}

void ember__remote_destroy(ember__remote *r) {
  free(r->lease_body);
  free(r->lease_mac);
  sodium_memzero(r->lease_sk, sizeof r->lease_sk);
  if (r->wake_fd >= 0) close(r->wake_fd);
  pthread_cond_destroy(&r->reply_cv);
  pthread_mutex_destroy(&r->request_lock);
  pthread_mutex_destroy(&r->connect_lock);
  pthread_mutex_destroy(&r->send_lock);
}

/* ---- sockets ----------------------------------------------------------- */

static int open_socket(ember_client *c) {
  if (strncmp(c->address, "unix:", 5) == 0) {
    const char *path = c->address + 5;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
      ember__client_set_error("%s: path too long", c->address);
      return -1;
    }
    strcpy(sa.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
      ember__client_set_error("%s: %s", c->address, strerror(errno));
      if (fd >= 0) close(fd);
      return -1;
    }
    return fd;
  }
  char err[300];
  int fd = ember__remote_tcp_open(c->address + 4, c->opts.connect_timeout_ms, err,
                           sizeof err);
  if (fd < 0) ember__client_set_error("%s: %s", c->address, err);
  return fd;
}

int ember__remote_tcp_open(const char *address, int timeout_ms, char *err,
                    size_t err_len) {
  hostport hp;
  if (hostport_parse(address, 0, &hp, err, err_len) != 0) return -1;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  int gai = getaddrinfo(hp.host, hp.port, &hints, &res);
  if (gai != 0) {
    snprintf(err, err_len, "%s", gai_strerror(gai));
    return -1;
  }
  int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int ok = fd >= 0;
  if (ok && connect(fd, res->ai_addr, res->ai_addrlen) != 0) {
    ok = errno == EINPROGRESS;
    if (ok) {
      struct pollfd p = {.fd = fd, .events = POLLOUT};
      int e = 0;
      socklen_t elen = sizeof e;
      ok = poll(&p, 1, timeout_ms) == 1 &&
           getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &elen) == 0 && e == 0;
      if (!ok) errno = e ? e : ETIMEDOUT;
    }
  }
  freeaddrinfo(res);
  if (!ok) {
    snprintf(err, err_len, "%s", strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

/* The byte counters of ember_client_stats. */
static void count_received(ember_client *c, size_t n) {
  pthread_mutex_lock(&c->lock);
  c->stats.bytes_received += n;
  pthread_mutex_unlock(&c->lock);
}

static void count_sent(ember_client *c, size_t n, const int *fds,
                       size_t nfds) {
  uint64_t by_fd = 0;
  for (size_t i = 0; i < nfds; i++) {
    struct stat st;
    if (fstat(fds[i], &st) == 0 && st.st_size > 0) by_fd += (uint64_t)st.st_size;
  }
  pthread_mutex_lock(&c->lock);
  c->stats.bytes_sent += n;
  c->stats.bytes_sent_by_fd += by_fd;
  pthread_mutex_unlock(&c->lock);
}

/* Blocking read of one frame during the greeting, with a timeout. */
static int read_frame_sync(ember_client *c, int fd, proto_reader *rd,
                           proto_frame *f) {
  for (;;) {
    int rc = proto_reader_next(rd, f);
    if (rc != 0) return rc < 0 ? rc : 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, c->opts.connect_timeout_ms) != 1) {
      ember__client_set_error("%s: no Welcome from the NAM", c->address);
      return EMBER_ETIMEDOUT;
    }
    ssize_t n = proto_recv(fd, rd);
    if (n > 0) count_received(c, (size_t)n);
    if (n == -EAGAIN || n == -EINTR) continue;
    if (n <= 0) {
      ember__client_set_error("%s: connection closed during the greeting", c->address);
      return EMBER_ECONNECT;
    }
  }
}

static void *reader_main(void *arg);

/* Answer a Welcome's challenge: our lease is ours (proto/lease_proof.h). */
static int prove_lease(ember__remote *r, int fd, const Ember__Welcome *w,
                       int proved) {
  ember_client *c = r->client;
  if (!r->lease_body || proved || w->challenge.len != LEASE_CHALLENGE_BYTES) {
    ember__client_set_error("%s: %s", c->address,
                            r->lease_body ? "a second or malformed challenge"
                                          : "challenged with no lease");
    return EMBER_EPROTO;
  }
  uint8_t sig[LEASE_PROOF_BYTES];
  lease_proof_sign(r->lease_sk, w->challenge.data, r->lease_id, sig);
  Ember__LeaseProof p = EMBER__LEASE_PROOF__INIT;
  p.signature.data = sig;
  p.signature.len = sizeof sig;
  proto_wbuf b = {0};
  int rc = proto_wbuf_append(&b, EMBER__MSG_TYPE__MSG_LEASE_PROOF, &p.base, 0);
  if (rc == 0 && proto_send(fd, b.data, b.len, NULL, 0) != 0) {
    ember__client_set_error("%s: %s", c->address, strerror(errno));
    rc = EMBER_ECONNECT;
  }
  if (rc == 0) count_sent(c, b.len, NULL, 0);
  proto_wbuf_free(&b);
  return rc;
}

int ember__remote_connect(ember__remote *r) {
  ember_client *c = r->client;
  int fd = open_socket(c);
  if (fd < 0) return EMBER_ECONNECT;
  proto_reader rd;
  proto_reader_init(&rd, r->max_frame);
  proto_wbuf w = {0};
  Ember__Hello hello = EMBER__HELLO__INIT;
  Ember__Lease lease = EMBER__LEASE__INIT;
  hello.protocol_version = PROTO_VERSION;
  hello.client_name = c->client_name;
  if (r->lease_body) {
    lease.body.data = r->lease_body;
    lease.body.len = r->lease_body_len;
    lease.mac.data = r->lease_mac;
    lease.mac.len = r->lease_mac_len;
    hello.lease = &lease;
  }
  int rc = proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_HELLO, &hello.base, 0);
  if (rc == 0 && proto_send(fd, w.data, w.len, NULL, 0) != 0) {
    ember__client_set_error("%s: %s", c->address, strerror(errno));
    rc = EMBER_ECONNECT;
  }
  if (rc == 0) count_sent(c, w.len, NULL, 0);
  proto_wbuf_free(&w);
  proto_frame f;
  /* a NAM that checks leases challenges first: the second Welcome, after
   * our LeaseProof, admits us */
  for (int proved = 0, done = 0; rc == 0 && !done;) {
    rc = read_frame_sync(c, fd, &rd, &f);
    if (rc) break;
    ProtobufCMessage *m = proto_unpack(&f);
    done = 1;
    if (m && f.type == EMBER__MSG_TYPE__MSG_WELCOME &&
        ((Ember__Welcome *)m)->has_challenge) {
      rc = prove_lease(r, fd, (Ember__Welcome *)m, proved++);
      done = rc != 0;
    } else if (m && f.type == EMBER__MSG_TYPE__MSG_WELCOME) {
      Ember__Welcome *wm = (Ember__Welcome *)m;
      pthread_mutex_lock(&c->lock);
      if (wm->has_max_inflight && wm->max_inflight) r->max_inflight = wm->max_inflight;
      if (wm->has_max_frame && wm->max_frame < r->max_frame) r->max_frame = wm->max_frame;
      /* a NAM that does not say takes only memfds over its unix socket */
      r->unix_inline_max = 0;
      if (wm->has_unix_inline_max)
        r->unix_inline_max = wm->unix_inline_max < PROTO_UNIX_INLINE_MAX
                                 ? (size_t)wm->unix_inline_max
                                 : PROTO_UNIX_INLINE_MAX;
      pthread_mutex_unlock(&c->lock);
    } else if (m && f.type == EMBER__MSG_TYPE__MSG_ERROR) {
      Ember__Error *e = (Ember__Error *)m;
      ember__client_set_error("%s: %s", c->address, e->message);
      rc = e->code == EMBER_EVERSION || e->code == EMBER_ELEASE
               ? e->code : EMBER_ECONNECT;
    } else {
      ember__client_set_error("%s: expected Welcome, got %s", c->address,
                       proto_type_name(f.type));
      rc = EMBER_EPROTO;
    }
    if (m) protobuf_c_message_free_unpacked(m, NULL);
  }
  if (rc) {
    proto_reader_free(&rd);
    close(fd);
    return rc;
  }
  /* a previous reader, if any, has finished: collect it */
  if (r->reader_running) {
    pthread_join(r->reader, NULL);
    r->reader_running = 0;
    proto_reader_free(&r->rd);
  }
  r->rd = rd;
  pthread_mutex_lock(&c->lock);
  r->fd = fd;
  r->reading = 0;
  r->hangup = 0;
  r->gen++;
  r->backoff_ns = 0;
  r->down_since_ns = 0; /* the reconnect window ends here */
  if (r->gen > 1) c->stats.reconnects++;
  r->events->on_connected(r);
  pthread_mutex_unlock(&c->lock);
  if (pthread_create(&r->reader, NULL, reader_main, r) != 0) {
    pthread_mutex_lock(&c->lock);
    r->fd = -1;
    pthread_mutex_unlock(&c->lock);
    close(fd);
    proto_reader_free(&r->rd);
    return EMBER_ENOMEM;
  }
  r->reader_running = 1;
  return 0;
}

int ember__remote_ensure(ember__remote *r) {
  ember_client *c = r->client;
  pthread_mutex_lock(&c->lock);
  int up = r->fd >= 0;
  uint64_t now = clock_now_ns();
  int try_now = !up && !c->closing && !r->lease_ended &&
                now - r->last_attempt_ns >= r->backoff_ns;
  pthread_mutex_unlock(&c->lock);
  if (up) return 0;
  if (!try_now) return EMBER_ECONNECT;
  pthread_mutex_lock(&r->connect_lock);
  int rc = 0;
  pthread_mutex_lock(&c->lock);
  up = r->fd >= 0; /* another thread may have done it meanwhile */
  pthread_mutex_unlock(&c->lock);
  if (!up) {
    rc = ember__remote_connect(r);
    pthread_mutex_lock(&c->lock);
    r->last_attempt_ns = clock_now_ns();
    if (rc) {
      r->backoff_ns = r->backoff_ns ? r->backoff_ns * 2 : BACKOFF_MIN_NS;
      if (r->backoff_ns > BACKOFF_MAX_NS) r->backoff_ns = BACKOFF_MAX_NS;
    }
    pthread_mutex_unlock(&c->lock);
  }
  pthread_mutex_unlock(&r->connect_lock);
  return rc;
}

static void on_reply(ember__remote *r, uint8_t type, ProtobufCMessage *m) {
  ember_client *c = r->client;
  pthread_mutex_lock(&c->lock);
  if (r->reply.waiting && r->reply.type == type && !r->reply.msg) {
    r->reply.msg = m;
    m = NULL;
    pthread_cond_broadcast(&r->reply_cv);
  }
  pthread_mutex_unlock(&c->lock);
  if (m) protobuf_c_message_free_unpacked(m, NULL);
}

/* ---- reading ----------------------------------------------------------- */

/* client->lock held */
static int needs_reader(ember__remote *r) {
  return r->hangup || r->reply.waiting || r->events->needs_reader(r);
}

/* client->lock held: the reader thread has work (it reads wake_fd) */
static void wake_reader(ember__remote *r) {
  if (r->wake_pending) return;
  uint64_t one = 1;
  if (write(r->wake_fd, &one, sizeof one) == sizeof one) r->wake_pending = 1;
}

void ember__remote_kick(ember__remote *r) {
  if (r->reading || r->fd < 0) return;
  if (r->events->offer_read(r)) return;
  if (needs_reader(r)) wake_reader(r);
}

void ember__remote_hangup(ember__remote *r) {
  if (r->fd < 0) return;
  shutdown(r->fd, SHUT_RDWR);
  r->hangup = 1;
  ember__remote_kick(r);
}

int ember__remote_lead(ember__remote *r) {
  if (r->reading || r->fd < 0) return 0;
  r->reading = 1;
  return 1;
}

void ember__remote_unlead(ember__remote *r) {
  r->reading = 0;
  ember__remote_kick(r);
}

/* The reader saw the connection end (why): nobody reads it any more, the
 * reader thread leaves, and the owner hears of it. */
static void connection_lost(ember__remote *r, int fd, const char *why) {
  ember_client *c = r->client;
  pthread_mutex_lock(&c->lock);
  r->fd = -1;
  r->reading = 0;
  r->hangup = 0;
  if (!r->down_since_ns) r->down_since_ns = clock_now_ns();
  snprintf(r->down_why, sizeof r->down_why, "%s", why);
  if (r->reply.waiting) {
    r->reply.error = EMBER_ECONNLOST;
    pthread_cond_broadcast(&r->reply_cv);
  }
  wake_reader(r);
  pthread_mutex_unlock(&c->lock);
  /* writers hold send_lock while they use the fd: wait them out */
  pthread_mutex_lock(&r->send_lock);
  close(fd);
  pthread_mutex_unlock(&r->send_lock);
  r->events->on_lost(r, why);
}

/* w's sleep, then its spin, saying in w->outcome when bytes came */
static void wait_briefly(int fd, ember__remote_wait *w) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  w->outcome = EMBER__WAIT_EARLY;
  if (w->sleep_ns) {
    struct timespec ts = {.tv_sec = (time_t)(w->sleep_ns / 1000000000u),
                          .tv_nsec = (long)(w->sleep_ns % 1000000000u)};
    if (ppoll(&p, 1, &ts, NULL) == 1) return;
  }
  w->outcome = EMBER__WAIT_CAUGHT;
  uint64_t until = clock_now_ns() + w->spin_ns;
  while (clock_now_ns() < until) {
    if (poll(&p, 1, 0) == 1) return;
    sched_yield(); /* a thread that could run here goes first */
  }
  w->outcome = EMBER__WAIT_LATE;
}

int ember__remote_read(ember__remote *r, ember__remote_wait *w) {
  ember_client *c = r->client;
  pthread_mutex_lock(&c->lock);
  int fd = r->fd; /* only the reader closes it: steady while we read */
  pthread_mutex_unlock(&c->lock);
  char why[160] = "the NAM closed the connection";
  ssize_t n;
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (w) wait_briefly(fd, w); /* the reply is near: waking costs more */
  do {
    poll(&p, 1, -1);
    n = proto_recv(fd, &r->rd);
  } while (n == -EAGAIN || n == -EINTR);
  if (n > 0) count_received(c, (size_t)n);
  if (n < 0)
    snprintf(why, sizeof why, "connection to the NAM: %s", strerror((int)-n));
  proto_frame f;
  int rc;
  while ((rc = proto_reader_next(&r->rd, &f)) == 1) {
    ProtobufCMessage *m = proto_unpack(&f);
    if (!m) continue; /* unknown or malformed: nothing to complete */
    switch (f.type) {
    case EMBER__MSG_TYPE__MSG_RESULT:
    case EMBER__MSG_TYPE__MSG_ERROR:
    case EMBER__MSG_TYPE__MSG_BLOCK_REPLY:
      r->events->on_message(r, f.type, m);
      break;
    default:
      on_reply(r, f.type, m);
      m = NULL;
    }
    if (m) protobuf_c_message_free_unpacked(m, NULL);
  }
  if (rc < 0) snprintf(why, sizeof why, "frame from the NAM over the limit");
  if (n > 0 && rc >= 0) return 0;
  connection_lost(r, fd, why);
  return -1;
}

/* One per connection. While the owner needs a reader and nobody reads, it
 * reads; otherwise it sleeps in poll until it is woken (wake_fd) or the
 * NAM hangs up (POLLRDHUP: the replies that callers read themselves do
 * not wake it). It leaves when the connection ends. */
static void *reader_main(void *arg) {
  ember__remote *r = arg;
  ember_client *c = r->client;
  pthread_mutex_lock(&c->lock);
  uint64_t gen = r->gen;
  int fd = r->fd;
  while (r->gen == gen && r->fd >= 0) {
    if (!r->reading && needs_reader(r)) {
      r->reading = 1;
      int lost;
      do {
        pthread_mutex_unlock(&c->lock);
        lost = ember__remote_read(r, NULL);
        pthread_mutex_lock(&c->lock);
      } while (!lost && needs_reader(r));
      if (!lost) ember__remote_unlead(r);
      continue;
    }
    /* someone reads, or nothing awaits a reply: sleep */
    int hung_up_here = 0;
    struct pollfd p[2] = {{.fd = r->wake_fd, .events = POLLIN},
                          {.fd = fd, .events = POLLRDHUP}};
    int watch_end = !r->reading; /* a reader sees the end itself */
    pthread_mutex_unlock(&c->lock);
    poll(p, watch_end ? 2 : 1, -1);
    uint64_t v;
    if (p[0].revents & POLLIN) (void)!read(r->wake_fd, &v, sizeof v);
    hung_up_here = watch_end && (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR));
    pthread_mutex_lock(&c->lock);
    if (p[0].revents & POLLIN) r->wake_pending = 0;
    if (hung_up_here && r->gen == gen && r->fd >= 0) r->hangup = 1;
  }
  pthread_mutex_unlock(&c->lock);
  return NULL;
}

void ember__remote_shutdown(ember__remote *r) {
  ember_client *c = r->client;
  pthread_mutex_lock(&c->lock);
  ember__remote_hangup(r);
  pthread_mutex_unlock(&c->lock);
  if (r->reader_running) {
    pthread_join(r->reader, NULL);
    r->reader_running = 0;
    proto_reader_free(&r->rd);
  }
}

int ember__remote_send_locked(ember__remote *r, const proto_wbuf *w, const int *fds,
                       size_t nfds) {
  ember_client *c = r->client;
  pthread_mutex_lock(&c->lock);
  int fd = r->fd;
  pthread_mutex_unlock(&c->lock);
  int rc = fd < 0 ? -ENOTCONN : proto_send(fd, w->data, w->len, fds, nfds);
  if (rc == 0) count_sent(c, w->len, fds, nfds);
  if (rc != 0 && fd >= 0) { /* whoever reads next cleans up */
    pthread_mutex_lock(&c->lock);
    if (r->fd == fd) ember__remote_hangup(r);
    pthread_mutex_unlock(&c->lock);
  }
  return rc == 0 ? 0 : EMBER_ECONNLOST;
}

int ember__remote_send(ember__remote *r, const proto_wbuf *w, const int *fds,
                size_t nfds) {
  pthread_mutex_lock(&r->send_lock);
  int rc = ember__remote_send_locked(r, w, fds, nfds);
  pthread_mutex_unlock(&r->send_lock);
  return rc;
}

int ember__remote_send_msg(ember__remote *r, uint8_t type, const ProtobufCMessage *m) {
  proto_wbuf w = {0};
  int rc = proto_wbuf_append(&w, type, m, r->max_frame);
  if (rc == 0) rc = ember__remote_send(r, &w, NULL, 0);
  proto_wbuf_free(&w);
  return rc;
}

int ember__remote_request(ember__remote *r, uint8_t type, const ProtobufCMessage *m,
                   uint8_t reply_type, ProtobufCMessage **reply) {
  ember_client *c = r->client;
  *reply = NULL;
  int rc = ember__remote_ensure(r);
  if (rc) return rc;
  pthread_mutex_lock(&r->request_lock);
  pthread_mutex_lock(&c->lock);
  r->reply = (ember__remote_reply){.waiting = 1, .type = reply_type};
  pthread_mutex_unlock(&c->lock);
  rc = ember__remote_send_msg(r, type, m);
  pthread_mutex_lock(&c->lock);
  ember__remote_kick(r); /* the reader thread reads the reply */
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 10;
  while (rc == 0 && !r->reply.msg && !r->reply.error && r->fd >= 0) {
    if (pthread_cond_timedwait(&r->reply_cv, &c->lock, &deadline) == ETIMEDOUT) {
      rc = EMBER_ETIMEDOUT;
      ember__client_set_error("%s: no reply from the NAM", c->address);
    }
  }
  if (rc == 0 && !r->reply.msg) rc = r->reply.error ? r->reply.error : EMBER_ECONNLOST;
  *reply = r->reply.msg;
  r->reply = (ember__remote_reply){0};
  pthread_mutex_unlock(&c->lock);
  pthread_mutex_unlock(&r->request_lock);
  return rc;
}

