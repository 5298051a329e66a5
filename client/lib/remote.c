/*
 * remote.c - the connection to a NAM: connect and greet, one reader thread
 * that completes tasks as results arrive, serialized writes, reconnection
 * with backoff, and handing in-flight tasks to the CPU fallback when the
 * connection dies - or, for tasks that cannot run in-process, keeping them
 * parked and sending them again once the NAM is back (the reconnect
 * window).
 */
#include "client_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "hostport.h"
#include "lease_proof.h"

#define BACKOFF_MIN_NS 50000000ull    /* 50 ms */
#define BACKOFF_MAX_NS 2000000000ull  /* 2 s */

/* ---- in-flight map (client->lock held) --------------------------------- */

int ember__inflight_add(ember_client *c, ember_task *t) {
  unsigned count = HASH_COUNT(c->inflight_tasks);
  HASH_ADD(hh, c->inflight_tasks, id, sizeof t->id, t);
  if (HASH_COUNT(c->inflight_tasks) == count) return EMBER_ENOMEM;
  c->inflight++;
  return 0;
}

ember_task *ember__inflight_take(ember_client *c, uint64_t id) {
  ember_task *t = NULL;
  HASH_FIND(hh, c->inflight_tasks, &id, sizeof id, t);
  if (!t) return NULL;
  HASH_DEL(c->inflight_tasks, t);
  c->inflight--;
  pthread_cond_broadcast(&c->slot_cv);
  return t;
}

/* ---- sockets ----------------------------------------------------------- */

static int open_socket(ember_client *c) {
  if (c->mode == MODE_UNIX) {
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
static int prove_lease(ember_client *c, int fd, const Ember__Welcome *w,
                       int proved) {
  if (!c->lease_body || proved || w->challenge.len != LEASE_CHALLENGE_BYTES) {
    ember__client_set_error("%s: %s", c->address,
                            c->lease_body ? "a second or malformed challenge"
                                          : "challenged with no lease");
    return EMBER_EPROTO;
  }
  uint8_t sig[LEASE_PROOF_BYTES];
  lease_proof_sign(c->lease_sk, w->challenge.data, c->lease_id, sig);
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

int ember__remote_connect(ember_client *c) {
  int fd = open_socket(c);
  if (fd < 0) return EMBER_ECONNECT;
  proto_reader rd;
  proto_reader_init(&rd, c->max_frame);
  proto_wbuf w = {0};
  Ember__Hello hello = EMBER__HELLO__INIT;
  Ember__Lease lease = EMBER__LEASE__INIT;
  hello.protocol_version = PROTO_VERSION;
  hello.client_name = c->client_name;
  if (c->lease_body) {
    lease.body.data = c->lease_body;
    lease.body.len = c->lease_body_len;
    lease.mac.data = c->lease_mac;
    lease.mac.len = c->lease_mac_len;
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
      rc = prove_lease(c, fd, (Ember__Welcome *)m, proved++);
      done = rc != 0;
    } else if (m && f.type == EMBER__MSG_TYPE__MSG_WELCOME) {
      Ember__Welcome *wm = (Ember__Welcome *)m;
      pthread_mutex_lock(&c->lock);
      if (wm->has_max_inflight && wm->max_inflight) c->max_inflight = wm->max_inflight;
      if (wm->has_max_frame && wm->max_frame < c->max_frame) c->max_frame = wm->max_frame;
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
  if (c->reader_running) {
    pthread_join(c->reader, NULL);
    c->reader_running = 0;
    proto_reader_free(&c->rd);
  }
  c->rd = rd;
  pthread_mutex_lock(&c->lock);
  c->fd = fd;
  c->gen++;
  c->backoff_ns = 0;
  c->down_since_ns = 0; /* the reconnect window ends here */
  pthread_cond_broadcast(&c->park_cv); /* parked tasks can go */
  if (c->gen > 1) c->stats.reconnects++;
  pthread_mutex_unlock(&c->lock);
  if (pthread_create(&c->reader, NULL, reader_main, c) != 0) {
    pthread_mutex_lock(&c->lock);
    c->fd = -1;
    pthread_mutex_unlock(&c->lock);
    close(fd);
    proto_reader_free(&c->rd);
    return EMBER_ENOMEM;
  }
  c->reader_running = 1;
  return 0;
}

int ember__remote_ensure(ember_client *c) {
  pthread_mutex_lock(&c->lock);
  int up = c->fd >= 0;
  uint64_t now = ember__client_now_ns();
  int try_now = !up && !c->closing && !c->lease_ended &&
                now - c->last_attempt_ns >= c->backoff_ns;
  pthread_mutex_unlock(&c->lock);
  if (up) return 0;
  if (!try_now) return EMBER_ECONNECT;
  pthread_mutex_lock(&c->connect_lock);
  int rc = 0;
  pthread_mutex_lock(&c->lock);
  up = c->fd >= 0; /* another thread may have done it meanwhile */
  pthread_mutex_unlock(&c->lock);
  if (!up) {
    rc = ember__remote_connect(c);
    pthread_mutex_lock(&c->lock);
    c->last_attempt_ns = ember__client_now_ns();
    if (rc) {
      c->backoff_ns = c->backoff_ns ? c->backoff_ns * 2 : BACKOFF_MIN_NS;
      if (c->backoff_ns > BACKOFF_MAX_NS) c->backoff_ns = BACKOFF_MAX_NS;
    }
    pthread_mutex_unlock(&c->lock);
  }
  pthread_mutex_unlock(&c->connect_lock);
  return rc;
}

/* The connection is gone: every task still in flight falls back. */
static void connection_lost(ember_client *c, const char *why) {
  pthread_mutex_lock(&c->lock);
  if (c->fd >= 0) {
    /* the reader owns closing; writers only shut it down */
    shutdown(c->fd, SHUT_RDWR);
  }
  ember_task **orphans = NULL, *t, *next;
  size_t n = 0;
  if (c->inflight) orphans = calloc(c->inflight, sizeof *orphans);
  if (orphans)
    HASH_ITER(hh, c->inflight_tasks, t, next) {
      HASH_DEL(c->inflight_tasks, t);
      orphans[n++] = t;
    }
  c->inflight = 0;
  if (c->reply.waiting) {
    c->reply.error = EMBER_ECONNLOST;
    pthread_cond_broadcast(&c->reply_cv);
  }
  int closing = c->closing;
  pthread_cond_broadcast(&c->slot_cv);
  pthread_mutex_unlock(&c->lock);
  /* out and state blocks lived on that connection: their reads fail */
  ember__block_ops_fail_all(c, closing ? EMBER_ECANCELED : EMBER_ESTATE);
  for (size_t i = 0; i < n; i++) {
    if (closing)
      ember__task_complete(orphans[i], EMBER_ECANCELED, "client closed", NULL, 0, NULL, NULL);
    else
      ember__remote_lost_task(c, orphans[i], EMBER_ECONNLOST, why);
  }
  free(orphans);
}

static void on_result(ember_client *c, Ember__Result *r) {
  pthread_mutex_lock(&c->lock);
  ember_task *t = ember__inflight_take(c, r->task_id);
  pthread_mutex_unlock(&c->lock);
  if (!t) return; /* canceled and already completed */
  ember_task_info info = {0};
  if (r->times) {
    info.queue_ns = r->times->queue_ns;
    info.exec_ns = r->times->exec_ns;
    info.server_ns = r->times->total_ns;
    info.stage_in_ns = r->times->stage_in_ns;
    info.stage_out_ns = r->times->stage_out_ns;
    info.attempts = r->times->attempts;
  }
  info.platform_kind = r->platform_kind;
  /* every platform that could run it failed: the CPU code still can,
   * unless the app required a device */
  if (r->status == EMBER_EPLATFORM && !t->platform_req[0] &&
      !ember__task_has_remote_blocks(t)) {
    ember__task_fallback(t, r->status, r->message);
    return;
  }
  for (size_t i = 0; r->status == 0 && i < r->n_outputs; i++)
    for (size_t k = 0; k < t->n_outputs; k++)
      if (t->outputs[k]->id == r->outputs[i]->block_id)
        t->outputs[k]->size = r->outputs[i]->size;
  uint8_t *out = NULL;
  if (r->has_output && r->output.len) {
    out = malloc(r->output.len);
    if (!out) {
      ember__task_fallback(t, EMBER_ENOMEM, "out of memory for the result");
      return;
    }
    memcpy(out, r->output.data, r->output.len);
  }
  ember__task_complete(t, r->status, r->message, out, r->has_output ? r->output.len : 0,
                r->platform, &info);
}

static void on_error(ember_client *c, Ember__Error *e) {
  if (!e->has_task_id) {
    /* about a block or the connection: the task that needs it will say */
    ember__client_set_error("NAM: %s", e->message);
    return;
  }
  pthread_mutex_lock(&c->lock);
  ember_task *t = ember__inflight_take(c, e->task_id);
  pthread_mutex_unlock(&c->lock);
  if (!t) return;
  /* the NAM cannot run it now: the CPU can (but a platform kind the app
   * required and the NAM lacks is the app's error, with the NAM's list) */
  if ((e->code == EMBER_ENOPLATFORM && t->platform_req[0]) ||
      ember__task_has_remote_blocks(t)) /* its blocks are on the NAM: no fallback */
    ember__task_complete(t, e->code, e->message, NULL, 0, NULL, NULL);
  else if (e->code == EMBER_ENOPLATFORM || e->code == EMBER_ESHUTDOWN ||
      e->code == EMBER_EBUSY)
    ember__task_fallback(t, e->code, e->message);
  else
    ember__task_complete(t, e->code, e->message, NULL, 0, NULL, NULL);
}

static void on_reply(ember_client *c, uint8_t type, ProtobufCMessage *m) {
  pthread_mutex_lock(&c->lock);
  if (c->reply.waiting && c->reply.type == type && !c->reply.msg) {
    c->reply.msg = m;
    m = NULL;
    pthread_cond_broadcast(&c->reply_cv);
  }
  pthread_mutex_unlock(&c->lock);
  if (m) protobuf_c_message_free_unpacked(m, NULL);
}

static void *reader_main(void *arg) {
  ember_client *c = arg;
  int fd = c->fd;
  const char *why = "the NAM closed the connection";
  char whybuf[160];
  for (;;) {
    proto_frame f;
    int rc;
    while ((rc = proto_reader_next(&c->rd, &f)) == 1) {
      ProtobufCMessage *m = proto_unpack(&f);
      if (!m) continue; /* unknown or malformed: nothing to complete */
      switch (f.type) {
      case EMBER__MSG_TYPE__MSG_RESULT:
        on_result(c, (Ember__Result *)m);
        break;
      case EMBER__MSG_TYPE__MSG_ERROR:
        on_error(c, (Ember__Error *)m);
        break;
      case EMBER__MSG_TYPE__MSG_BLOCK_REPLY:
        ember__block_op_reply(c, (Ember__BlockReply *)m);
        break;
      default:
        on_reply(c, f.type, m);
        m = NULL;
      }
      if (m) protobuf_c_message_free_unpacked(m, NULL);
    }
    if (rc < 0) {
      why = "frame from the NAM over the limit";
      break;
    }
    ssize_t n;
    do {
      struct pollfd p = {.fd = fd, .events = POLLIN};
      poll(&p, 1, -1);
      n = proto_recv(fd, &c->rd);
    } while (n == -EAGAIN || n == -EINTR);
    if (n > 0) count_received(c, (size_t)n);
    if (n <= 0) {
      if (n < 0) {
        snprintf(whybuf, sizeof whybuf, "connection to the NAM: %s",
                 strerror((int)-n));
        why = whybuf;
      }
      break;
    }
  }
  pthread_mutex_lock(&c->lock);
  c->fd = -1;
  if (!c->down_since_ns) c->down_since_ns = ember__client_now_ns();
  snprintf(c->down_why, sizeof c->down_why, "%s", why);
  pthread_mutex_unlock(&c->lock);
  /* writers hold send_lock while they use the fd: wait them out */
  pthread_mutex_lock(&c->send_lock);
  close(fd);
  pthread_mutex_unlock(&c->send_lock);
  connection_lost(c, why);
  return NULL;
}

void ember__remote_shutdown(ember_client *c) {
  pthread_mutex_lock(&c->lock);
  if (c->fd >= 0) shutdown(c->fd, SHUT_RDWR);
  pthread_mutex_unlock(&c->lock);
  if (c->reader_running) {
    pthread_join(c->reader, NULL);
    c->reader_running = 0;
    proto_reader_free(&c->rd);
  }
}

int ember__remote_send_locked(ember_client *c, const proto_wbuf *w, const int *fds,
                       size_t nfds) {
  pthread_mutex_lock(&c->lock);
  int fd = c->fd;
  pthread_mutex_unlock(&c->lock);
  int rc = fd < 0 ? -ENOTCONN : proto_send(fd, w->data, w->len, fds, nfds);
  if (rc == 0) count_sent(c, w->len, fds, nfds);
  if (rc != 0 && fd >= 0) shutdown(fd, SHUT_RDWR); /* the reader cleans up */
  return rc == 0 ? 0 : EMBER_ECONNLOST;
}

int ember__remote_send(ember_client *c, const proto_wbuf *w, const int *fds,
                size_t nfds) {
  pthread_mutex_lock(&c->send_lock);
  int rc = ember__remote_send_locked(c, w, fds, nfds);
  pthread_mutex_unlock(&c->send_lock);
  return rc;
}

int ember__remote_send_msg(ember_client *c, uint8_t type, const ProtobufCMessage *m) {
  proto_wbuf w = {0};
  int rc = proto_wbuf_append(&w, type, m, c->max_frame);
  if (rc == 0) rc = ember__remote_send(c, &w, NULL, 0);
  proto_wbuf_free(&w);
  return rc;
}

int ember__remote_request(ember_client *c, uint8_t type, const ProtobufCMessage *m,
                   uint8_t reply_type, ProtobufCMessage **reply) {
  *reply = NULL;
  int rc = ember__remote_ensure(c);
  if (rc) return rc;
  pthread_mutex_lock(&c->request_lock);
  pthread_mutex_lock(&c->lock);
  c->reply = (pending_reply){.waiting = 1, .type = reply_type};
  pthread_mutex_unlock(&c->lock);
  rc = ember__remote_send_msg(c, type, m);
  pthread_mutex_lock(&c->lock);
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += 10;
  while (rc == 0 && !c->reply.msg && !c->reply.error && c->fd >= 0) {
    if (pthread_cond_timedwait(&c->reply_cv, &c->lock, &deadline) == ETIMEDOUT) {
      rc = EMBER_ETIMEDOUT;
      ember__client_set_error("%s: no reply from the NAM", c->address);
    }
  }
  if (rc == 0 && !c->reply.msg) rc = c->reply.error ? c->reply.error : EMBER_ECONNLOST;
  *reply = c->reply.msg;
  c->reply = (pending_reply){0};
  pthread_mutex_unlock(&c->lock);
  pthread_mutex_unlock(&c->request_lock);
  return rc;
}

/* ---- the reconnect window ---------------------------------------------- */

static void *resubmitter_main(void *arg);

/* client->lock held */
static void park(ember_client *c, ember_task *t) {
  if (!t->id) t->id = c->next_task_id++; /* never sent: no id yet */
  t->parked = 1;
  HASH_ADD(hh, c->parked_tasks, id, sizeof t->id, t);
  if (!c->resubmitter_running &&
      pthread_create(&c->resubmitter, NULL, resubmitter_main, c) == 0)
    c->resubmitter_running = 1;
  pthread_cond_broadcast(&c->park_cv);
}

void ember__remote_lost_task(ember_client *c, ember_task *t, int why,
                             const char *message) {
  pthread_mutex_lock(&c->lock);
  int closing = c->closing;
  int waits = !closing && c->window_ns && !c->lease_ended &&
              !ember__task_can_fall_back(t) &&
              !ember__task_has_remote_blocks(t);
  if (waits && !c->down_since_ns) c->down_since_ns = ember__client_now_ns();
  uint64_t down_ns = ember__client_now_ns() - c->down_since_ns;
  int in_window = waits && down_ns < c->window_ns;
  if (in_window) park(c, t);
  /* park may fail to start the thread: then nothing would send it again */
  int parked = in_window && c->resubmitter_running;
  if (in_window && !parked) {
    HASH_DEL(c->parked_tasks, t);
    t->parked = 0;
  }
  unsigned long long window_ms = c->window_ns / 1000000u;
  pthread_mutex_unlock(&c->lock);
  if (parked) return;
  if (closing) {
    ember__task_complete(t, EMBER_ECANCELED, "client closed", NULL, 0, NULL, NULL);
  } else if (in_window) {
    ember__task_complete(t, EMBER_ENOMEM, "cannot start the thread that "
                         "waits for the NAM", NULL, 0, NULL, NULL);
  } else if (waits) {
    char msg[600];
    snprintf(msg, sizeof msg, "no NAM at %s for %llu ms, over the reconnect "
             "window of %llu ms (%s)", c->address,
             (unsigned long long)(down_ns / 1000000u), window_ms,
             message && message[0] ? message : ember_strerror(why));
    ember__task_complete(t, EMBER_ECONNLOST, msg, NULL, 0, NULL, NULL);
  } else {
    ember__task_fallback(t, why, message); /* as without a window */
  }
}

int ember__remote_unpark(ember_client *c, ember_task *t) {
  pthread_mutex_lock(&c->lock);
  int was = t->parked;
  if (was) {
    HASH_DEL(c->parked_tasks, t);
    t->parked = 0;
  }
  pthread_mutex_unlock(&c->lock);
  return was;
}

/* Every parked task, in park order, out of the table (client->lock held);
 * NULL and *n 0 when none or out of memory (they stay parked then). */
static ember_task **take_parked(ember_client *c, size_t *n) {
  *n = HASH_COUNT(c->parked_tasks);
  ember_task **all = *n ? calloc(*n, sizeof *all) : NULL;
  if (!all) {
    *n = 0;
    return NULL;
  }
  ember_task *t, *next;
  size_t i = 0;
  HASH_ITER(hh, c->parked_tasks, t, next) {
    HASH_DEL(c->parked_tasks, t);
    t->parked = 0;
    all[i++] = t;
  }
  return all;
}

/* Wait on park_cv until the monotonic time until_ns at the latest. */
static void wait_until(ember_client *c, uint64_t until_ns) {
  uint64_t now = ember__client_now_ns();
  if (until_ns <= now) return;
  uint64_t left = until_ns - now;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t nsec = (uint64_t)ts.tv_nsec + left % 1000000000u;
  ts.tv_sec += (time_t)(left / 1000000000u + nsec / 1000000000u);
  ts.tv_nsec = (long)(nsec % 1000000000u);
  pthread_cond_timedwait(&c->park_cv, &c->lock, &ts);
}

/* One thread per client, started at the first park: it reconnects with the
 * backoff of ember__remote_ensure, sends the parked tasks again (their input
 * blocks go with them: the new NAM has none), and fails them when the window
 * is over. */
static void *resubmitter_main(void *arg) {
  ember_client *c = arg;
  pthread_mutex_lock(&c->lock);
  while (!c->closing) {
    if (!c->parked_tasks) {
      pthread_cond_wait(&c->park_cv, &c->lock);
      continue;
    }
    size_t n = 0;
    ember_task **all = NULL;
    uint64_t now = ember__client_now_ns();
    if (c->fd >= 0 || c->lease_ended ||
        now - c->down_since_ns >= c->window_ns) {
      int resend = c->fd >= 0;
      int lease_ended = c->lease_ended;
      char why[sizeof c->down_why];
      snprintf(why, sizeof why, "%s", c->down_why);
      all = take_parked(c, &n);
      if (resend) c->stats.tasks_resubmitted += n;
      pthread_mutex_unlock(&c->lock);
      for (size_t i = 0; i < n; i++) {
        if (resend)
          ember__task_send(c, all[i]); /* lost again: parked again */
        else if (lease_ended)
          ember__task_fallback(all[i], EMBER_ECONNLOST, "the lease ended");
        else
          ember__remote_lost_task(c, all[i], EMBER_ECONNLOST, why);
      }
      free(all);
      pthread_mutex_lock(&c->lock);
      if (!all) wait_until(c, now + 1000000u); /* out of memory: retry */
      continue;
    }
    uint64_t next = c->last_attempt_ns + c->backoff_ns;
    if (now < next) {
      uint64_t end = c->down_since_ns + c->window_ns;
      wait_until(c, next < end ? next : end);
      continue;
    }
    pthread_mutex_unlock(&c->lock);
    if (ember__remote_ensure(c) != 0) {
      pthread_mutex_lock(&c->lock);
      snprintf(c->down_why, sizeof c->down_why, "%s", ember_last_error());
      continue;
    }
    pthread_mutex_lock(&c->lock);
  }
  size_t n;
  ember_task **all = take_parked(c, &n);
  pthread_mutex_unlock(&c->lock);
  for (size_t i = 0; i < n; i++)
    ember__task_complete(all[i], EMBER_ECANCELED, "client closed", NULL, 0, NULL, NULL);
  free(all);
  return NULL;
}

void ember__remote_stop_resubmitter(ember_client *c) {
  pthread_mutex_lock(&c->lock);
  int running = c->resubmitter_running;
  pthread_cond_broadcast(&c->park_cv);
  pthread_mutex_unlock(&c->lock);
  if (running) pthread_join(c->resubmitter, NULL);
  c->resubmitter_running = 0;
}
