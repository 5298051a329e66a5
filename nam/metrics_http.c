/* metrics_http.c - GET /metrics, /healthz and /readyz over libmicrohttpd
 * (metrics_http.h). */
#include "metrics_http.h"

#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "ember/ember_errors.h"
#include "hostport.h"
#include "nam_config.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define RENDER_WAIT_NS 1000000000L  /* then serve the last text */

struct nam_metrics_http {
  struct MHD_Daemon *daemon;
  uv_async_t async;            /* HTTP thread -> loop: render, please */
  nam_metrics_render_fn render;
  nam_metrics_ready_fn ready_fn;
  void *user;
  pthread_mutex_t lock;        /* guards everything below */
  pthread_cond_t rendered;
  char *text;                  /* the last rendering */
  size_t len;
  int ready;                   /* the last readiness, and why not */
  char why[160];
  uint64_t asked, answered;    /* request numbers: asked by HTTP, served */
  int stopping;
};

/* ---- loop thread ------------------------------------------------------- */

static void render_now(nam_metrics_http *m) {
  pthread_mutex_lock(&m->lock);
  uint64_t asked = m->asked;
  pthread_mutex_unlock(&m->lock);
  char *text = NULL;
  size_t len = 0;
  int rc = m->render(m->user, &text, &len);
  char why[sizeof m->why] = "";
  int ready = m->ready_fn(m->user, why, sizeof why);
  pthread_mutex_lock(&m->lock);
  m->ready = ready;
  memcpy(m->why, why, sizeof why);
  if (rc == 0) {
    char *old = m->text;
    m->text = text;
    m->len = len;
    text = old;
  }
  m->answered = asked;  /* on failure the last text stands */
  pthread_cond_broadcast(&m->rendered);
  pthread_mutex_unlock(&m->lock);
  free(text);
}

static void on_async(uv_async_t *async) { render_now(async->data); }

/* ---- HTTP thread -------------------------------------------------------- */

static enum MHD_Result reply_text(struct MHD_Connection *conn,
                                  unsigned status, const char *body) {
  struct MHD_Response *r = MHD_create_response_from_buffer(
      strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  enum MHD_Result ret = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return ret;
}

/* Ask the loop for a fresh snapshot and wait for it (bounded). Returns
 * whether it came, with m->lock held. */
static int fresh_snapshot_locked(nam_metrics_http *m) {
  struct timespec until;
  clock_gettime(CLOCK_MONOTONIC, &until);
  until.tv_nsec += RENDER_WAIT_NS % 1000000000L;
  until.tv_sec += RENDER_WAIT_NS / 1000000000L + until.tv_nsec / 1000000000L;
  until.tv_nsec %= 1000000000L;
  pthread_mutex_lock(&m->lock);
  uint64_t mine = ++m->asked;
  if (!m->stopping) {
    pthread_mutex_unlock(&m->lock);
    uv_async_send(&m->async);
    pthread_mutex_lock(&m->lock);
    while (m->answered < mine && !m->stopping &&
           pthread_cond_timedwait(&m->rendered, &m->lock, &until) == 0) {
    }
  }
  return m->answered >= mine;
}

static enum MHD_Result serve_metrics(nam_metrics_http *m,
                                     struct MHD_Connection *conn) {
  fresh_snapshot_locked(m);  /* if the loop is late, the last text serves */
  struct MHD_Response *r =
      MHD_create_response_from_buffer(m->len, m->text, MHD_RESPMEM_MUST_COPY);
  pthread_mutex_unlock(&m->lock);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
  enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return ret;
}

/* Ready only on the loop's own fresh word: a stuck loop is not ready. */
static enum MHD_Result serve_readyz(nam_metrics_http *m,
                                    struct MHD_Connection *conn) {
  char body[sizeof m->why + 32];
  int fresh = fresh_snapshot_locked(m);
  int ready = fresh && m->ready;
  if (ready)
    snprintf(body, sizeof body, "ready\n");
  else
    snprintf(body, sizeof body, "not ready: %s\n",
             !fresh ? (m->stopping ? "stopping" : "the event loop did not answer")
                    : m->why);
  pthread_mutex_unlock(&m->lock);
  struct MHD_Response *r = MHD_create_response_from_buffer(
      strlen(body), body, MHD_RESPMEM_MUST_COPY);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain");
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  enum MHD_Result ret = MHD_queue_response(
      conn, ready ? MHD_HTTP_OK : MHD_HTTP_SERVICE_UNAVAILABLE, r);
  MHD_destroy_response(r);
  return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
  nam_metrics_http *m = cls;
  int is_metrics = strcmp(url, "/metrics") == 0;
  int is_healthz = strcmp(url, "/healthz") == 0;
  int is_readyz = strcmp(url, "/readyz") == 0;
  if (!is_metrics && !is_healthz && !is_readyz)
    return reply_text(conn, MHD_HTTP_NOT_FOUND,
                      "not found: try /metrics, /healthz or /readyz\n");
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
      strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
    return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                      "method not allowed: GET or HEAD\n");
  if (is_healthz) return reply_text(conn, MHD_HTTP_OK, "ok\n");
  if (is_readyz) return serve_readyz(m, conn);
  return serve_metrics(m, conn);
}

/* ---- life -------------------------------------------------------------- */

/* Our own listening socket, so that a failure says why. */
static int listen_on(const char *address, int *family, char *err,
                     size_t err_len) {
  hostport a;
  char why[256];
  if (hostport_parse(address, 0, &a, why, sizeof why) != 0) {
    snprintf(err, err_len, "metrics_listen %s: %s", address, why);
    return EMBER_ECONFIG;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  int gai = getaddrinfo(a.host, a.port, &hints, &res);
  if (gai != 0) {
    snprintf(err, err_len, "metrics_listen %s: %s", address, gai_strerror(gai));
    return EMBER_ECONFIG;
  }
  /* non-blocking: the pool's threads all wait on it */
  int fd = socket(res->ai_family,
                  res->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, res->ai_addr, res->ai_addrlen) != 0 ||
      listen(fd, SOMAXCONN) != 0) {
    snprintf(err, err_len, "metrics_listen %s: %s", address, strerror(errno));
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return EMBER_EIO;
  }
  *family = res->ai_family;
  freeaddrinfo(res);
  return fd;
}

int nam_metrics_http_start(uv_loop_t *loop, const nam_metrics_http_options *o,
                           nam_metrics_http **out, char *err, size_t err_len) {
  const char *address = o->address;
  int family = AF_INET;
  int fd = listen_on(address, &family, err, err_len);
  if (fd < 0) return fd;
  nam_metrics_http *m = calloc(1, sizeof *m);
  if (!m) {
    close(fd);
    snprintf(err, err_len, "metrics_listen %s: out of memory", address);
    return EMBER_ENOMEM;
  }
  m->render = o->render;
  m->ready_fn = o->ready;
  m->user = o->user;
  pthread_mutex_init(&m->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&m->rendered, &ca);
  pthread_condattr_destroy(&ca);
  uv_async_init(loop, &m->async, on_async);
  m->async.data = m;
  render_now(m);  /* something to serve even before the loop runs */

  /* A pool of polling threads: a request waiting for the loop holds only
   * its thread, a half-sent one only a slot until the timeout. */
  unsigned threads = o->threads ? o->threads : 1;
  unsigned max_conn = o->max_connections < threads ? threads : o->max_connections;
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
                   (family == AF_INET6 ? MHD_USE_IPv6 : 0);
  m->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, m,
                               MHD_OPTION_LISTEN_SOCKET, fd,
                               MHD_OPTION_THREAD_POOL_SIZE, threads,
                               MHD_OPTION_CONNECTION_LIMIT, max_conn,
                               MHD_OPTION_PER_IP_CONNECTION_LIMIT, o->max_per_ip,
                               MHD_OPTION_CONNECTION_TIMEOUT,
                               o->timeout_s ? o->timeout_s : 1u,
                               MHD_OPTION_END);
  if (!m->daemon) {
    snprintf(err, err_len, "metrics_listen %s: cannot start the HTTP server",
             address);
    close(fd);
    m->stopping = 1;
    nam_metrics_http_close(m);  /* the caller runs the loop, then destroys */
    *out = m;
    return EMBER_EIO;
  }
  *out = m;
  return 0;
}

void nam_metrics_http_close(nam_metrics_http *m) {
  if (!m) return;
  pthread_mutex_lock(&m->lock);
  m->stopping = 1;  /* a request waiting for the loop takes the last text */
  pthread_cond_broadcast(&m->rendered);
  pthread_mutex_unlock(&m->lock);
  if (m->daemon) MHD_stop_daemon(m->daemon);
  m->daemon = NULL;
  if (!uv_is_closing((uv_handle_t *)&m->async))
    uv_close((uv_handle_t *)&m->async, NULL);
}

void nam_metrics_http_destroy(nam_metrics_http *m) {
  if (!m) return;
  pthread_cond_destroy(&m->rendered);
  pthread_mutex_destroy(&m->lock);
  free(m->text);
  free(m);
}
