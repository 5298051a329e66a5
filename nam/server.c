/* server.c - listeners, accepting clients, and finished tasks coming back
 * from the engine's workers. */
#include "server_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"
#include "ember/ember_errors.h"
#include "hostport.h"
#include "log.h"

void nam_server_flush(nam_server *s) {
  pthread_mutex_lock(&s->done_lock);
  conn_task *list = s->done_head;
  s->done_head = s->done_tail = NULL;
  conn_block_op *ops = s->ops_head;
  s->ops_head = s->ops_tail = NULL;
  pthread_mutex_unlock(&s->done_lock);
  while (ops) {
    conn_block_op *op = ops;
    ops = op->done_next;
    nam_conn_block_op_done(op);
  }
  while (list) {
    conn_task *ct = list;
    list = ct->done_next;
    nam_conn_task_done(ct);
  }
  nam_server_check_idle(s);
}

void nam_server_forget_engine(nam_server *s) { s->engine = NULL; }

static void on_tasks_done(uv_async_t *async) { nam_server_flush(async->data); }

static void on_turn(uv_prepare_t *p) {
  nam_server *s = p->data;
  s->turn++;
}

/* An active idle handle makes the loop poll with a zero timeout: it spins
 * instead of sleeping until the window closes. The window is twice the
 * recent gap between the end of one such task and the next one's frame (a
 * moving average; the client's own work between its calls), at least
 * NAM_LOOP_SPIN_MIN_NS; gaps over NAM_LOOP_SPIN_MAX_NS are slept through.
 * A window that served a frame is a catch, one that closed empty a miss
 * (poll_score.h). */
static void on_spin(uv_idle_t *h) {
  nam_server *s = h->data;
  if (clock_now_ns() < s->spin_until_ns) {
    sched_yield(); /* a thread that could run here goes first */
    return;
  }
  uv_idle_stop(h);
  poll_score_missed(&s->polling);
}

void nam_server_spin(nam_server *s, uint64_t arrived_ns) {
  uint64_t now = clock_now_ns();
  if (s->spin_last_end_ns && arrived_ns - s->spin_last_end_ns < 10000000u)
    poll_average_add(&s->spin_gap_avg_ns, arrived_ns - s->spin_last_end_ns);
  s->spin_last_end_ns = now;
  if (uv_is_active((uv_handle_t *)&s->spin)) /* this frame came in one */
    poll_score_caught(&s->polling);
  else if (!poll_score_try(&s->polling, NAM_LOOP_SPIN_PROBE))
    return;
  uint64_t window = 2 * s->spin_gap_avg_ns;
  if (window > 2 * NAM_LOOP_SPIN_MAX_NS) return;
  if (window < NAM_LOOP_SPIN_MIN_NS) window = NAM_LOOP_SPIN_MIN_NS;
  if (window > NAM_LOOP_SPIN_MAX_NS) window = NAM_LOOP_SPIN_MAX_NS;
  s->spin_until_ns = now + window;
  uv_idle_start(&s->spin, on_spin);
}

int nam_server_create(uv_loop_t *loop, nam_engine *engine,
                      const nam_server_limits *limits, const char *name,
                      nam_server **out) {
  nam_server *s = calloc(1, sizeof *s);
  if (!s) return EMBER_ENOMEM;
  s->loop = loop;
  s->engine = engine;
  s->limits = *limits;
  snprintf(s->name, sizeof s->name, "%s", name);
  pthread_mutex_init(&s->done_lock, NULL);
  nam_stats_init(&s->metrics);
  uv_async_init(loop, &s->done_async, on_tasks_done);
  s->done_async.data = s;
  uv_timer_init(loop, &s->accept_timer);
  s->accept_timer.data = s;
  uv_prepare_init(loop, &s->turn_prepare);
  s->turn_prepare.data = s;
  uv_prepare_start(&s->turn_prepare, on_turn);
  uv_unref((uv_handle_t *)&s->turn_prepare); /* keeps no loop alive */
  uv_idle_init(loop, &s->spin);
  s->spin.data = s;
  s->polling.points = 1;
  s->spin_gap_avg_ns = NAM_LOOP_SPIN_MIN_NS;
  uv_unref((uv_handle_t *)&s->spin);
  nam_guard_start(s);
  *out = s;
  return 0;
}

void nam_server_set_limits(nam_server *s, const nam_server_limits *limits) {
  s->limits = *limits;
  nam_guard_limits_changed(s);
}

void nam_server_get_stats(nam_server *s, nam_server_stats *out) {
  *out = s->stats;
  out->startups = s->n_startups;
  out->fds = s->fds_held;
  nam_server_memory(s, out);
}

nam_stats *nam_server_metrics(nam_server *s) { return &s->metrics; }

const char *nam_server_name(const nam_server *s) { return s->name; }

uv_loop_t *nam_server_loop(const nam_server *s) { return s->loop; }

unsigned nam_server_inflight(const nam_server *s, const acc_descriptor *acc) {
  for (size_t i = 0; i < NAM_MAX_PAIRS; i++)
    if (s->inflight_acc[i] == acc) return s->inflight_by_acc[i];
  return 0;
}

/* Tell a refused client why, as far as one send without waiting goes,
 * and close; a flood of refusals is logged once a second. */
static void refuse(nam_server *s, int fd, const char *peer, const char *why) {
  Ember__Error e = EMBER__ERROR__INIT;
  e.code = EMBER_EBUSY;
  e.message = (char *)why;
  proto_wbuf w = {0};
  if (proto_wbuf_append(&w, EMBER__MSG_TYPE__MSG_ERROR, &e.base,
                        s->limits.max_frame) == 0)
    (void)!send(fd, w.data, w.len, MSG_NOSIGNAL | MSG_DONTWAIT);
  proto_wbuf_free(&w);
  /* bytes left unread would turn the close into a reset that can cost the
   * client our Error */
  char sink[4096];
  (void)!recv(fd, sink, sizeof sink, MSG_DONTWAIT);
  close(fd);
  uint64_t now = uv_now(s->loop);
  if (s->refused_log_ms && now - s->refused_log_ms < 1000) {
    s->refused_quiet++;
    return;
  }
  log_warn("refusing client %s: %s (%u more refused since the last message)",
           peer, why, s->refused_quiet);
  s->refused_log_ms = now;
  s->refused_quiet = 0;
}

/* Connections waiting to be accepted (the kernel caps it at
 * net.core.somaxconn): deep enough that silent connections reopened by
 * the hundred leave room for a client that says Hello, which the NAM then
 * takes in turn while they make way. */
#define LISTEN_BACKLOG 4096

/* How long accepting pauses when the process is out of descriptors: the
 * listener stays readable, and trying again at once would spin (nginx
 * and libuv-based servers pause likewise). */
#define ACCEPT_PAUSE_MS 100

static void start_accepting(nam_server *s);

static void on_accept_timer(uv_timer_t *t) {
  nam_server *s = t->data;
  s->accept_paused = 0;
  start_accepting(s);
}

/* accept failed with errno err for lack of descriptors or memory: stop
 * polling the listeners for ACCEPT_PAUSE_MS (new clients wait in the
 * backlog meanwhile), and say so at most once a second. */
static void pause_accepting(nam_server *s, const listener *l, int err) {
  for (size_t i = 0; i < s->n_listeners; i++)
    uv_poll_stop(&s->listeners[i].poll);
  s->accept_paused = 1;
  uv_timer_start(&s->accept_timer, on_accept_timer, ACCEPT_PAUSE_MS, 0);
  uint64_t now = uv_now(s->loop);
  if (s->emfile_log_ms && now - s->emfile_log_ms < 1000) {
    s->emfile_quiet++;
    return;
  }
  log_warn("accept on %s: %s: not accepting for %d ms (%u more pauses "
           "since the last message; %u clients, %u of them without Hello)",
           l->is_unix ? l->path : "tcp", strerror(err), ACCEPT_PAUSE_MS,
           s->emfile_quiet, s->stats.clients, s->n_startups);
  s->emfile_log_ms = now;
  s->emfile_quiet = 0;
}

static void on_accept(uv_poll_t *poll, int status, int events) {
  listener *l = poll->data;
  nam_server *s = l->srv;
  (void)status, (void)events;
  /* one listener's round drops at most a quarter of the startups (at
   * least one): the others' rounds in this turn find some to drop too */
  s->pass_drops = 0;
  for (int i = 0; i < 64 && !s->accept_paused; i++) {
    unsigned most = s->n_startups / 4 ? s->n_startups / 4 : 1;
    if (s->pass_drops >= most || nam_admit_wait(s, l->is_unix))
      return; /* the rest in the next turn */
    int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      int err = errno;
      if (err == EMFILE || err == ENFILE) {
        /* a connection that never said Hello gives its descriptor to the
         * one waiting; only when there is none does accepting pause */
        if (nam_admit_drop_startup(s, "the NAM is out of file descriptors"))
          continue;
        pause_accepting(s, l, err);
      } else if (err == ENOBUFS || err == ENOMEM) {
        pause_accepting(s, l, err);
      } else if (err != EAGAIN && err != EINTR && err != ECONNABORTED) {
        log_warn("accept on %s: %s", l->is_unix ? l->path : "tcp",
                 strerror(err));
      }
      return;
    }
    if (!l->is_unix) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    nam_peer_key key;
    char peer[96];
    nam_peer_key_of(fd, l->is_unix, &key, peer, sizeof peer);
    char why[200];
    enum nam_stats_refusal limit;
    if (nam_admit(s, l->is_unix, &key, why, sizeof why, &limit) != 0) {
      nam_stats_refused(&s->metrics, limit);
      refuse(s, fd, peer, why);
      continue;
    }
    nam_conn_open(s, fd, l->is_unix, peer);
  }
}

static void start_accepting(nam_server *s) {
  for (size_t i = 0; i < s->n_listeners; i++)
    uv_poll_start(&s->listeners[i].poll, UV_READABLE, on_accept);
}

static int listen_unix(nam_server *s, listener *l, const char *path,
                       unsigned mode, const char *group, char *err,
                       size_t err_len) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof sa.sun_path) {
    snprintf(err, err_len, "unix:%s: path too long", path);
    return EMBER_EINVAL;
  }
  strcpy(sa.sun_path, path);
  /* the default lives in /run/ember, which systemd's RuntimeDirectory=
   * makes; started by hand, make it ourselves (one level only) */
  char dir[sizeof sa.sun_path];
  snprintf(dir, sizeof dir, "%s", path);
  char *slash = strrchr(dir, '/');
  if (slash && slash != dir) {
    *slash = '\0';
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
      snprintf(err, err_len, "unix:%s: cannot create %s: %s", path, dir,
               strerror(errno));
      return EMBER_EIO;
    }
  }
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    snprintf(err, err_len, "socket: %s", strerror(errno));
    return EMBER_EIO;
  }
  /* replace a stale socket file, but never one a live NAM answers on */
  struct stat st;
  if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int live = probe >= 0 && connect(probe, (struct sockaddr *)&sa, sizeof sa) == 0;
    if (probe >= 0) close(probe);
    if (live) {
      snprintf(err, err_len, "unix:%s: another process is listening there", path);
      close(fd);
      return EMBER_EIO;
    }
    unlink(path);
  }
  if (bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 ||
      chmod(path, mode) != 0 || listen(fd, LISTEN_BACKLOG) != 0) {
    snprintf(err, err_len, "unix:%s: %s", path, strerror(errno));
    close(fd);
    return EMBER_EIO;
  }
  if (group && group[0]) {
    struct group *g = getgrnam(group);
    if (!g || chown(path, (uid_t)-1, g->gr_gid) != 0) {
      snprintf(err, err_len, "unix:%s: cannot give it to group '%s': %s", path,
               group, g ? strerror(errno) : "no such group");
      close(fd);
      unlink(path);
      return EMBER_EIO;
    }
  }
  l->fd = fd;
  l->is_unix = 1;
  snprintf(l->path, sizeof l->path, "%s", path);
  return 0;
}

static int listen_tcp(listener *l, const char *address, char *err,
                      size_t err_len) {
  hostport hp;
  char why[256];
  if (hostport_parse(address, 0, &hp, why, sizeof why) != 0) {
    snprintf(err, err_len, "tcp:%s: %s", address, why);
    return EMBER_EINVAL;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  int gai = getaddrinfo(hp.host, hp.port, &hints, &res);
  if (gai != 0) {
    snprintf(err, err_len, "tcp:%s: %s", address, gai_strerror(gai));
    return EMBER_EINVAL;
  }
  int fd = socket(res->ai_family, res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC,
                  0);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, res->ai_addr, res->ai_addrlen) != 0 ||
      listen(fd, LISTEN_BACKLOG) != 0) {
    snprintf(err, err_len, "tcp:%s: %s", address, strerror(errno));
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return EMBER_EIO;
  }
  freeaddrinfo(res);
  l->fd = fd;
  l->is_unix = 0;
  return 0;
}

int nam_server_listen(nam_server *s, const char *address, unsigned mode,
                      const char *group, char *err, size_t err_len) {
  if (s->n_listeners >= NAM_MAX_LISTENERS) {
    snprintf(err, err_len, "%s: too many listen addresses", address);
    return EMBER_EINVAL;
  }
  listener *l = &s->listeners[s->n_listeners];
  memset(l, 0, sizeof *l);
  l->srv = s;
  int rc;
  if (strncmp(address, "unix:", 5) == 0)
    rc = listen_unix(s, l, address + 5, mode, group, err, err_len);
  else if (strncmp(address, "tcp:", 4) == 0)
    rc = listen_tcp(l, address + 4, err, err_len);
  else {
    snprintf(err, err_len, "%s: expected unix:PATH or tcp:HOST:PORT", address);
    rc = EMBER_EINVAL;
  }
  if (rc) return rc;
  uv_poll_init(s->loop, &l->poll, l->fd);
  l->poll.data = l;
  if (!s->accept_paused) uv_poll_start(&l->poll, UV_READABLE, on_accept);
  s->n_listeners++;
  return 0;
}

static void close_listeners(nam_server *s) {
  uv_timer_stop(&s->accept_timer);
  for (size_t i = 0; i < s->n_listeners; i++) {
    listener *l = &s->listeners[i];
    uv_close((uv_handle_t *)&l->poll, NULL);
    close(l->fd);
    if (l->is_unix) unlink(l->path);
  }
  s->n_listeners = 0;
}

void nam_server_check_idle(nam_server *s) {
  if (s->draining && s->stats.inflight == 0 && s->on_idle) {
    void (*cb)(nam_server *, void *) = s->on_idle;
    s->on_idle = NULL;
    cb(s, s->on_idle_user);
  }
}

void nam_server_drain(nam_server *s, void (*on_idle)(nam_server *s, void *user),
                      void *user) {
  s->draining = 1;
  s->on_idle = on_idle;
  s->on_idle_user = user;
  close_listeners(s);
  nam_server_check_idle(s);
}

void nam_server_close(nam_server *s) {
  close_listeners(s);
  while (s->conns) nam_conn_close(s->conns, "server stopping");
  nam_guard_stop(s);
  uv_close((uv_handle_t *)&s->accept_timer, NULL);
  uv_close((uv_handle_t *)&s->turn_prepare, NULL);
  uv_close((uv_handle_t *)&s->spin, NULL);
  uv_close((uv_handle_t *)&s->done_async, NULL);
}

void nam_server_destroy(nam_server *s) {
  if (!s) return;
  nam_admit_free(s);
  pthread_mutex_destroy(&s->done_lock);
  nam_stats_destroy(&s->metrics);
  free(s);
}
