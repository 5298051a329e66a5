/*
 * admin_http.h - ember-gam's HTTP admin API (libmicrohttpd on its own
 * thread, jansson bodies), loopback by default:
 *
 *   GET    /healthz                         200 {"status": "ok"}
 *   GET    /metrics                         Prometheus text 0.0.4
 *   GET    /v1/status                       core_admin.h "status"
 *   GET    /v1/nodes                        {"nodes": [...]}
 *   GET    /v1/nodes/{id}                   {"node": {...}}
 *   PUT    /v1/nodes/{id}/labels/{label}    {"node": {...}}
 *   DELETE /v1/nodes/{id}/labels/{label}    {"node": {...}}
 *   POST   /v1/nodes/{id}/drain             {"node": {...}}
 *   POST   /v1/nodes/{id}/undrain           {"node": {...}}
 *   GET    /v1/apps                         {"apps": [...]}
 *   GET    /v1/events?limit=N               {"events": [...]}
 *
 * Changes (PUT, DELETE, POST) need "Authorization: Bearer TOKEN", the
 * token read at start from a file that must be mode 0600 (or stricter).
 * Errors are JSON: {"error": {"code": "ENOTFOUND", "message": "..."}}
 * with 400 (bad request), 401 (no or wrong token, with WWW-Authenticate),
 * 403 (no token file configured: changes are off), 404 (no such path or
 * node), 405 (method not allowed, with Allow), 413 (body too big), 500
 * (the GAM failed, out of memory included), 503 (a change could not be
 * saved, the disk being full for one: the GAM stops and restarts from
 * its database).
 *
 * Details: HEAD answers as GET without the body. Path segments arrive
 * percent-decoded, except %00 and %2F (admin_routes.h). A node id is 1 to
 * 255 visible ASCII characters, a label what gam_label_valid accepts;
 * changes are checked for the token before their label. /v1/events takes
 * limit 1..10000 (default 100). The API takes no request bodies: up to
 * 4 KiB is read and ignored, a larger declared one is answered 413 at once
 * (the connection then closes), a larger chunked one 413 once read, and
 * past 64 KiB the connection is closed. /metrics is "text/plain;
 * version=0.0.4"; every other answer is one line of compact JSON with
 * Cache-Control: no-store. Route matching and the token live in
 * admin_routes.c and admin_token.c, pure and unit-tested.
 */
#ifndef EMBER_GAM_ADMIN_HTTP_H
#define EMBER_GAM_ADMIN_HTTP_H

#include <stddef.h>

#include "core_admin.h"

typedef struct gam_admin_http gam_admin_http;

/* How the server guards itself against slow or greedy clients. */
typedef struct gam_admin_http_options {
  const char *address;         /* "HOST:PORT" ("[IPV6]:PORT") */
  const char *token_file;      /* NULL or "": no token, changes answered 403 */
  unsigned timeout_s;          /* an idle connection is closed after this */
  unsigned max_connections;    /* at once; more are closed at once */
  unsigned max_per_ip;         /* at once from one address; 0 = no limit */
  unsigned threads;            /* serving threads (1 or more) */
} gam_admin_http_options;

/* Start serving on o->address with the token in o->token_file on a pool of
 * o->threads libmicrohttpd threads, which call the core_admin.h functions
 * (so one slow request or half-sent connection holds only its own slot).
 * 0, or with the reason in err: EMBER_ECONFIG (bad address, bad token file
 * content), EMBER_EDENIED (token file not regular or not 0600), EMBER_EIO
 * (cannot read the token file or listen), EMBER_ENOMEM. */
int gam_admin_http_start(gam_core *core, const gam_admin_http_options *o,
                         gam_admin_http **out, char *err, size_t err_len);
/* Stop the thread and free. NULL is a no-op. */
void gam_admin_http_stop(gam_admin_http *h);

#endif
