/* admin_http.c - ember-gam's HTTP admin API over libmicrohttpd
 * (admin_http.h): requests in, gam_core_* calls, JSON out. */
#include "admin_http.h"

#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>
#include <sodium.h>

#include "admin_routes.h"
#include "admin_token.h"
#include "ember/ember_errors.h"
#include "hostport.h"

#define JSON_TYPE "application/json"
#define METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define BODY_MAX 4096          /* the API takes no bodies; more is a 413 */
#define BODY_DRAIN_MAX 65536   /* a chunked body past this closes the link */

/* Kept ready so that running out of memory still gets a JSON answer. */
static const char oom_body[] =
    "{\"error\":{\"code\":\"ENOMEM\",\"message\":\"out of memory\"}}\n";

struct gam_admin_http {
  struct MHD_Daemon *daemon;
  gam_core *core;
  bool has_token;              /* false: changes are refused (403) */
  gam_admin_token token;
  struct MHD_Response *oom;    /* 500, shared by every request that needs it */
};

/* ---- responses ----------------------------------------------------------- */

static enum MHD_Result queue_oom(gam_admin_http *h,
                                 struct MHD_Connection *conn) {
  return MHD_queue_response(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, h->oom);
}

/* Queue r (taken) with its Content-Type and any extra header; on any
 * allocation failure the prepared 500 goes instead. */
static enum MHD_Result queue(gam_admin_http *h, struct MHD_Connection *conn,
                             unsigned status, struct MHD_Response *r,
                             const char *type, const char *extra_name,
                             const char *extra_value) {
  if (!r) return queue_oom(h, conn);
  if (MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type) != MHD_YES ||
      MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") !=
          MHD_YES ||
      (extra_name &&
       MHD_add_response_header(r, extra_name, extra_value) != MHD_YES)) {
    MHD_destroy_response(r);
    return queue_oom(h, conn);
  }
  enum MHD_Result ret = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return ret;
}

/* A JSON body (reference taken; NULL means building it failed) as one
 * compact line. */
static enum MHD_Result reply_json_with(gam_admin_http *h,
                                       struct MHD_Connection *conn,
                                       unsigned status, json_t *body,
                                       const char *extra_name,
                                       const char *extra_value) {
  if (!body) return queue_oom(h, conn);
  char *text = json_dumps(body, JSON_COMPACT);
  json_decref(body);
  if (!text) return queue_oom(h, conn);
  size_t n = strlen(text);
  char *line = realloc(text, n + 2);
  if (!line) {
    free(text);
    return queue_oom(h, conn);
  }
  line[n] = '\n';
  line[n + 1] = '\0';
  struct MHD_Response *r =
      MHD_create_response_from_buffer(n + 1, line, MHD_RESPMEM_MUST_FREE);
  if (!r) free(line);
  return queue(h, conn, status, r, JSON_TYPE, extra_name, extra_value);
}

static enum MHD_Result reply_json(gam_admin_http *h,
                                  struct MHD_Connection *conn, unsigned status,
                                  json_t *body) {
  return reply_json_with(h, conn, status, body, NULL, NULL);
}

static enum MHD_Result reply_error_with(gam_admin_http *h,
                                        struct MHD_Connection *conn,
                                        unsigned status, int code,
                                        const char *extra_name,
                                        const char *extra_value,
                                        const char *fmt, ...)
    __attribute__((format(printf, 7, 8)));

static enum MHD_Result reply_error_with(gam_admin_http *h,
                                        struct MHD_Connection *conn,
                                        unsigned status, int code,
                                        const char *extra_name,
                                        const char *extra_value,
                                        const char *fmt, ...) {
  char raw[512], message[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(raw, sizeof raw, fmt, ap);
  va_end(ap);
  /* bytes from the request or the core may not be UTF-8: keep JSON valid */
  gam_admin_printable(raw, message, sizeof message);
  json_t *body = json_pack("{s:{s:s,s:s}}", "error", "code", ember_errname(code),
                           "message", message);
  return reply_json_with(h, conn, status, body, extra_name, extra_value);
}

#define reply_error(h, conn, status, code, ...) \
  reply_error_with(h, conn, status, code, NULL, NULL, __VA_ARGS__)

/* The HTTP status for an error the core returns. */
static unsigned status_of(int code) {
  switch (code) {
  case EMBER_EINVAL:
  case EMBER_EPARAM:
  case EMBER_EFORMAT: return MHD_HTTP_BAD_REQUEST;
  case EMBER_EDENIED: return MHD_HTTP_FORBIDDEN;
  case EMBER_ENOTFOUND: return MHD_HTTP_NOT_FOUND;
  case EMBER_ETOOBIG: return MHD_HTTP_CONTENT_TOO_LARGE;
  case EMBER_EBUSY:
  case EMBER_ESHUTDOWN: return MHD_HTTP_SERVICE_UNAVAILABLE;
  default: return MHD_HTTP_INTERNAL_SERVER_ERROR;
  }
}

static enum MHD_Result reply_core_error(gam_admin_http *h,
                                        struct MHD_Connection *conn, int code,
                                        const char *err) {
  return reply_error(h, conn, status_of(code), code, "%s",
                     err[0] ? err : ember_strerror(code));
}

/* A json_t* getter's answer: NULL is a failure inside the GAM. */
static enum MHD_Result reply_built(gam_admin_http *h,
                                   struct MHD_Connection *conn, json_t *body) {
  if (!body)
    return reply_error(h, conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
                       EMBER_EINTERNAL, "the GAM could not build the reply "
                       "(out of memory or a store failure)");
  return reply_json(h, conn, MHD_HTTP_OK, body);
}

/* ---- routes ------------------------------------------------------------- */

static enum MHD_Result serve_metrics(gam_admin_http *h,
                                     struct MHD_Connection *conn) {
  char *text = NULL;
  size_t len = 0;
  int rc = gam_core_metrics_text(h->core, &text, &len);
  if (rc != 0 || !text) {
    free(text);
    return reply_error(h, conn, MHD_HTTP_INTERNAL_SERVER_ERROR,
                       rc ? rc : EMBER_EINTERNAL, "cannot render the metrics");
  }
  struct MHD_Response *r =
      MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
  if (!r) free(text);
  return queue(h, conn, MHD_HTTP_OK, r, METRICS_TYPE, NULL, NULL);
}

/* The API answers {"node": {...}} around the core's node object (taken). */
static json_t *wrapped_node(json_t *node) {
  if (!node || json_object_get(node, "node")) return node;  /* already */
  return json_pack("{s:o}", "node", node);  /* o: steals, even on failure */
}

static enum MHD_Result serve_node(gam_admin_http *h,
                                  struct MHD_Connection *conn,
                                  const char *id) {
  char err[256] = "";
  json_t *node = NULL;
  int rc = gam_core_node_json(h->core, id, &node, err, sizeof err);
  if (rc != 0) {
    json_decref(node);
    return reply_core_error(h, conn, rc, err);
  }
  return reply_built(h, conn, wrapped_node(node));
}

/* After a change: the node as it is now. */
static enum MHD_Result serve_change(gam_admin_http *h,
                                    struct MHD_Connection *conn,
                                    const gam_admin_route *r, unsigned method) {
  char err[256] = "";
  int rc;
  if (r->id == GAM_ROUTE_NODE_LABEL) {
    if (!gam_label_valid(r->label)) {
      char shown[80];
      return reply_error(h, conn, MHD_HTTP_BAD_REQUEST, EMBER_EINVAL,
                         "bad label '%s': 1 to 64 characters of A-Z a-z 0-9 "
                         "_ . @ -", gam_admin_printable(r->label, shown,
                                                        sizeof shown));
    }
    rc = method == GAM_METHOD_PUT
             ? gam_core_label_add(h->core, r->node, r->label, err, sizeof err)
             : gam_core_label_remove(h->core, r->node, r->label, err,
                                     sizeof err);
  } else {
    rc = gam_core_set_drained(h->core, r->node, r->id == GAM_ROUTE_NODE_DRAIN,
                              err, sizeof err);
  }
  if (rc != 0) return reply_core_error(h, conn, rc, err);
  json_t *node = NULL;
  rc = gam_core_node_json(h->core, r->node, &node, err, sizeof err);
  if (rc != 0) {
    json_decref(node);
    return reply_core_error(h, conn, rc, err);
  }
  return reply_built(h, conn, wrapped_node(node));
}

static enum MHD_Result serve_events(gam_admin_http *h,
                                    struct MHD_Connection *conn) {
  const char *text =
      MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "limit");
  unsigned limit;
  if (gam_admin_events_limit(text, &limit) != 0) {
    char shown[40];
    return reply_error(h, conn, MHD_HTTP_BAD_REQUEST, EMBER_EINVAL,
                       "limit '%s' is not a whole number from 1 to %u",
                       gam_admin_printable(text, shown, sizeof shown),
                       GAM_ADMIN_EVENTS_MAX);
  }
  return reply_built(h, conn, gam_core_events_json(h->core, limit));
}

/* Why a change is refused: 403 when no token file was configured, else
 * 401 for no token or a wrong one. */
static enum MHD_Result refuse_unauthorized(gam_admin_http *h,
                                           struct MHD_Connection *conn) {
  if (!h->has_token)
    return reply_error(h, conn, MHD_HTTP_FORBIDDEN, EMBER_EDENIED,
                       "changes are disabled: the GAM has no admin token file");
  const char *header = MHD_lookup_connection_value(
      conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  const char *token;
  size_t len;
  if (!gam_admin_bearer(header, &token, &len))
    return reply_error_with(h, conn, MHD_HTTP_UNAUTHORIZED, EMBER_EDENIED,
                            MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                            "Bearer realm=\"ember-gam\"",
                            "changes need 'Authorization: Bearer TOKEN' "
                            "(the token in the GAM's admin token file)");
  return reply_error_with(h, conn, MHD_HTTP_UNAUTHORIZED, EMBER_EDENIED,
                          MHD_HTTP_HEADER_WWW_AUTHENTICATE,
                          "Bearer realm=\"ember-gam\", error=\"invalid_token\"",
                          "wrong admin token");
}

static bool authorized(gam_admin_http *h, struct MHD_Connection *conn) {
  if (!h->has_token) return false;
  const char *header = MHD_lookup_connection_value(
      conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
  const char *token;
  size_t len;
  return gam_admin_bearer(header, &token, &len) &&
         gam_admin_token_matches(&h->token, token, len);
}

static enum MHD_Result dispatch(gam_admin_http *h, struct MHD_Connection *conn,
                                const char *url, const char *method_name) {
  gam_admin_route r;
  char why[160];
  int rc = gam_admin_route_parse(url, &r, why, sizeof why);
  if (rc != 0) return reply_error(h, conn, status_of(rc), rc, "%s", why);
  unsigned method = gam_admin_method(method_name);
  if (!(method & r.methods)) {
    char shown[24];
    return reply_error_with(h, conn, MHD_HTTP_METHOD_NOT_ALLOWED, EMBER_EINVAL,
                            MHD_HTTP_HEADER_ALLOW, r.allow,
                            "method %s not allowed here (allowed: %s)",
                            gam_admin_printable(method_name, shown,
                                                sizeof shown), r.allow);
  }
  if ((method & GAM_METHODS_CHANGING) && !authorized(h, conn))
    return refuse_unauthorized(h, conn);
  switch (r.id) {
  case GAM_ROUTE_HEALTHZ:
    return reply_json(h, conn, MHD_HTTP_OK, json_pack("{s:s}", "status", "ok"));
  case GAM_ROUTE_METRICS: return serve_metrics(h, conn);
  case GAM_ROUTE_STATUS:
    return reply_built(h, conn, gam_core_status_json(h->core));
  case GAM_ROUTE_NODES:
    return reply_built(h, conn, gam_core_nodes_json(h->core));
  case GAM_ROUTE_NODE: return serve_node(h, conn, r.node);
  case GAM_ROUTE_NODE_LABEL:
  case GAM_ROUTE_NODE_DRAIN:
  case GAM_ROUTE_NODE_UNDRAIN: return serve_change(h, conn, &r, method);
  case GAM_ROUTE_APPS: return reply_built(h, conn, gam_core_apps_json(h->core));
  case GAM_ROUTE_EVENTS: return serve_events(h, conn);
  }
  return reply_error(h, conn, MHD_HTTP_NOT_FOUND, EMBER_ENOTFOUND, "no route");
}

/* Is a Content-Length over the limit? (MHD has already checked its form.) */
static bool content_length_over(const char *text, unsigned long long max) {
  unsigned long long v = 0;
  for (; *text >= '0' && *text <= '9'; text++) {
    v = v * 10 + (unsigned long long)(*text - '0');
    if (v > max) return true;
  }
  return false;
}

/* Called with the headers, then once per piece of body, then at the end.
 * *con_cls holds 1 + the body bytes seen so far (no allocation per
 * request); the answer comes at the end, or at once for a body declared
 * too big (MHD then closes the connection rather than reading it). */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
  gam_admin_http *h = cls;
  uintptr_t seen = (uintptr_t)*con_cls;
  if (seen == 0) {
    *con_cls = (void *)(uintptr_t)1;
    const char *cl = MHD_lookup_connection_value(
        conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && content_length_over(cl, BODY_MAX))
      return reply_error(h, conn, MHD_HTTP_CONTENT_TOO_LARGE, EMBER_ETOOBIG,
                         "the admin API takes no request body (at most %d "
                         "bytes are read)", BODY_MAX);
    return MHD_YES;
  }
  size_t body = seen - 1;
  if (*upload_data_size != 0) {
    if (*upload_data_size > BODY_DRAIN_MAX - body) return MHD_NO;
    body += *upload_data_size;
    *upload_data_size = 0;  /* read and dropped */
    *con_cls = (void *)(uintptr_t)(body + 1);
    return MHD_YES;
  }
  if (body > BODY_MAX)
    return reply_error(h, conn, MHD_HTTP_CONTENT_TOO_LARGE, EMBER_ETOOBIG,
                       "the admin API takes no request body (at most %d "
                       "bytes are read)", BODY_MAX);
  return dispatch(h, conn, url, method);
}

/* MHD's unescape hook: ours keeps %00 and %2F (admin_routes.h). */
static size_t unescape(void *cls, struct MHD_Connection *conn, char *s) {
  return gam_admin_unescape(s);
}

/* ---- life --------------------------------------------------------------- */

/* Our own listening socket, so that a failure says why. Returns the fd or
 * a negative EMBER_E*. */
static int listen_on(const char *address, int *family, char *err,
                     size_t err_len) {
  hostport hp;
  char why[128];
  if (hostport_parse(address, 0, &hp, why, sizeof why) != 0) {
    snprintf(err, err_len, "admin_listen %s: %s", address, why);
    return EMBER_ECONFIG;
  }
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *res = NULL;
  int gai = getaddrinfo(hp.host, hp.port, &hints, &res);
  if (gai != 0) {
    snprintf(err, err_len, "admin_listen %s: %s", address, gai_strerror(gai));
    return EMBER_ECONFIG;
  }
  /* non-blocking: the pool's threads all wait on it */
  int fd = socket(res->ai_family,
                  res->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  int one = 1;
  if (fd < 0 ||
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      bind(fd, res->ai_addr, res->ai_addrlen) != 0 ||
      listen(fd, SOMAXCONN) != 0) {
    snprintf(err, err_len, "admin_listen %s: %s", address, strerror(errno));
    if (fd >= 0) close(fd);
    freeaddrinfo(res);
    return EMBER_EIO;
  }
  *family = res->ai_family;
  freeaddrinfo(res);
  return fd;
}

int gam_admin_http_start(gam_core *core, const gam_admin_http_options *o,
                         gam_admin_http **out, char *err, size_t err_len) {
  const char *address = o->address, *token_file = o->token_file;
  gam_admin_http *h = calloc(1, sizeof *h);
  if (!h) {
    snprintf(err, err_len, "admin API: out of memory");
    return EMBER_ENOMEM;
  }
  h->core = core;
  if (token_file && token_file[0]) {
    int rc = gam_admin_token_load(token_file, &h->token, err, err_len);
    if (rc != 0) {
      free(h);
      return rc;
    }
    h->has_token = true;
  }
  h->oom = MHD_create_response_from_buffer(sizeof oom_body - 1,
                                           (void *)oom_body,
                                           MHD_RESPMEM_PERSISTENT);
  if (!h->oom ||
      MHD_add_response_header(h->oom, MHD_HTTP_HEADER_CONTENT_TYPE,
                              JSON_TYPE) != MHD_YES) {
    snprintf(err, err_len, "admin API: out of memory");
    gam_admin_http_stop(h);
    return EMBER_ENOMEM;
  }
  int family = AF_INET;
  int fd = listen_on(address, &family, err, err_len);
  if (fd < 0) {
    gam_admin_http_stop(h);
    return fd;
  }
  /* A pool of polling threads: a half-sent request costs a slot until the
   * timeout, never a thread, and a slow answer holds only its thread. */
  unsigned threads = o->threads ? o->threads : 1;
  unsigned max_conn = o->max_connections < threads ? threads : o->max_connections;
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO |
                   (family == AF_INET6 ? MHD_USE_IPv6 : 0);
  h->daemon = MHD_start_daemon(
      flags, 0, NULL, NULL, on_request, h, MHD_OPTION_LISTEN_SOCKET, fd,
      MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
      MHD_OPTION_THREAD_POOL_SIZE, threads,
      MHD_OPTION_CONNECTION_LIMIT, max_conn,
      MHD_OPTION_PER_IP_CONNECTION_LIMIT, o->max_per_ip,
      MHD_OPTION_CONNECTION_TIMEOUT, o->timeout_s ? o->timeout_s : 1u,
      MHD_OPTION_END);
  if (!h->daemon) {
    snprintf(err, err_len, "admin_listen %s: cannot start the HTTP server",
             address);
    close(fd);
    gam_admin_http_stop(h);
    return EMBER_EIO;
  }
  *out = h;
  return 0;
}

void gam_admin_http_stop(gam_admin_http *h) {
  if (!h) return;
  if (h->daemon) MHD_stop_daemon(h->daemon);  /* joins the thread */
  if (h->oom) MHD_destroy_response(h->oom);
  sodium_memzero(&h->token, sizeof h->token);
  free(h);
}
