/*
 * admin_routes.h - the admin API's paths and methods as data: which route
 * a request path names, which methods it answers, and the node id and
 * label in it. Pure functions (no core, no HTTP), so that the unit tests
 * and the fuzzer drive them directly; admin_http.c does the rest.
 */
#ifndef EMBER_GAM_ADMIN_ROUTES_H
#define EMBER_GAM_ADMIN_ROUTES_H

#include <stdbool.h>
#include <stddef.h>

/* The longest node id or label a path may carry (labels are checked
 * further by gam_label_valid, which allows 64). */
#define GAM_ADMIN_SEGMENT_MAX 255

typedef enum gam_admin_route_id {
  GAM_ROUTE_HEALTHZ,
  GAM_ROUTE_METRICS,
  GAM_ROUTE_STATUS,
  GAM_ROUTE_NODES,
  GAM_ROUTE_NODE,
  GAM_ROUTE_NODE_LABEL,    /* PUT adds, DELETE removes */
  GAM_ROUTE_NODE_DRAIN,
  GAM_ROUTE_NODE_UNDRAIN,
  GAM_ROUTE_APPS,
  GAM_ROUTE_EVENTS,
} gam_admin_route_id;

/* Methods as bits, so that a route lists those it answers. */
enum {
  GAM_METHOD_OTHER = 0,
  GAM_METHOD_GET = 1u << 0,
  GAM_METHOD_HEAD = 1u << 1,
  GAM_METHOD_PUT = 1u << 2,
  GAM_METHOD_DELETE = 1u << 3,
  GAM_METHOD_POST = 1u << 4,
};
/* The methods that change state and so need the bearer token. */
#define GAM_METHODS_CHANGING (GAM_METHOD_PUT | GAM_METHOD_DELETE | GAM_METHOD_POST)

typedef struct gam_admin_route {
  gam_admin_route_id id;
  unsigned methods;     /* GAM_METHOD_* bits the route answers */
  const char *allow;    /* the same as an Allow header value */
  char node[GAM_ADMIN_SEGMENT_MAX + 1];   /* "" when the path has none */
  char label[GAM_ADMIN_SEGMENT_MAX + 1];  /* "" when the path has none */
} gam_admin_route;

/*
 * gam_admin_route_parse - match a (percent-decoded) path without its query.
 * 0 and *out filled; EMBER_ENOTFOUND for a path that names no route;
 * EMBER_EINVAL for a route whose node id is not 1..255 visible ASCII
 * characters or whose label is longer than 255 bytes (the reason in why,
 * one line, no bytes from the path other than visible ASCII).
 */
int gam_admin_route_parse(const char *path, gam_admin_route *out, char *why,
                          size_t why_len);

/* gam_admin_method - the GAM_METHOD_* bit of an HTTP method name (exact,
 * case-sensitive as RFC 9110 says), GAM_METHOD_OTHER when unknown. */
unsigned gam_admin_method(const char *method);

/* gam_admin_node_id_valid - 1..255 visible ASCII characters, no '/'. */
bool gam_admin_node_id_valid(const char *id);

/* gam_admin_events_limit - the ?limit= of GET /v1/events: NULL gives the
 * default (100); else a whole number from 1 to 10000. 0 or EMBER_EINVAL. */
#define GAM_ADMIN_EVENTS_DEFAULT 100u
#define GAM_ADMIN_EVENTS_MAX 10000u
int gam_admin_events_limit(const char *text, unsigned *out);

/* gam_admin_unescape - percent-decode s in place with libmicrohttpd's
 * MHD_http_unescape (the path and the query arguments, as libmicrohttpd
 * hands them over), except %00 and %2F, which
 * stay encoded: a NUL would cut the path short and a '/' would move
 * segments, so both are left for the route checks to refuse. Returns the
 * new length. */
size_t gam_admin_unescape(char *s);

/* gam_admin_printable - s for an error message: visible ASCII and spaces
 * kept, every other byte written as '?', cut to fit out (always
 * terminated). Returns out. */
const char *gam_admin_printable(const char *s, char *out, size_t out_len);

#endif
