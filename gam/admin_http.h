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
 * with 400 (bad request), 401 (no or wrong token), 404 (no such path or
 * node), 405 (method not allowed, with Allow), 413 (body too big).
 */
#ifndef EMBER_GAM_ADMIN_HTTP_H
#define EMBER_GAM_ADMIN_HTTP_H

#include <stddef.h>

#include "core_admin.h"

typedef struct gam_admin_http gam_admin_http;

/* Start serving on "HOST:PORT" with the token in token_file. 0, or
 * EMBER_ECONFIG / EMBER_EDENIED / EMBER_EIO with the reason in err. */
int gam_admin_http_start(gam_core *core, const char *address,
                         const char *token_file, gam_admin_http **out,
                         char *err, size_t err_len);
/* Stop the thread and free. NULL is a no-op. */
void gam_admin_http_stop(gam_admin_http *h);

#endif
