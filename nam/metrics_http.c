/* metrics_http.c - GET /metrics over libmicrohttpd (metrics_http.h). */
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
  void *user;
  pthread_mutex_t lock;        /* guards everything below */
  pthread_cond_t rendered;
  char *text;                  /* the last rendering */
  size_t len;
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
  pthread_mutex_lock(&m->lock);
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

/* Ask the loop for a fresh rendering, wait for it (bounded), copy it. */
static struct MHD_Response *fresh_response(nam_metrics_http *m) {
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
  struct MHD_Response *r =
      MHD_create_response_from_buffer(m->len, m->text, MHD_RESPMEM_MUST_COPY);
  pthread_mutex_unlock(&m->lock);
  return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
  nam_metrics_http *m = cls;
  if (strcmp(url, "/metrics") != 0)
    return reply_text(conn, MHD_HTTP_NOT_FOUND, "not found: try /metrics\n");
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 &&
      strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
    return reply_text(conn, MHD_HTTP_METHOD_NOT_ALLOWED,
                      "method not allowed: GET or HEAD\n");
  struct MHD_Response *r = fresh_response(m);
  if (!r) return MHD_NO;
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
  enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);
  MHD_destroy_response(r);
  return ret;
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
  int fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC, 0);
  int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 16) != 0) {
    snprintf(err, err_len, "metrics_listen %s: %s", address, strerror(errno));
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return EMBER_EIO;
  }
  *family = res->ai_family;
  freeaddrinfo(res);
  return fd;
}

int nam_metrics_http_start(uv_loop_t *loop, const char *address,
                           nam_metrics_render_fn render, void *user,
                           nam_metrics_http **out, char *err, size_t err_len) {
  int family = AF_INET;
  int fd = listen_on(address, &family, err, err_len);
  if (fd < 0) return fd;
  nam_metrics_http *m = calloc(1, sizeof *m);
  if (!m) {
    close(fd);
    snprintf(err, err_len, "metrics_listen %s: out of memory", address);
    return EMBER_ENOMEM;
  }
  m->render = render;
  m->user = user;
  pthread_mutex_init(&m->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&m->rendered, &ca);
  pthread_condattr_destroy(&ca);
  uv_async_init(loop, &m->async, on_async);
  m->async.data = m;
  render_now(m);  /* something to serve even before the loop runs */

  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
                   (family == AF_INET6 ? MHD_USE_IPv6 : 0);
  m->daemon = MHD_start_daemon(flags, 0, NULL, NULL, on_request, m,
                               MHD_OPTION_LISTEN_SOCKET, fd,
                               MHD_OPTION_CONNECTION_LIMIT, 32u,
                               MHD_OPTION_CONNECTION_TIMEOUT, 10u,
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
