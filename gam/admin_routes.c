/* admin_routes.c - the admin API's route table and path matching
 * (admin_routes.h). */
#include "admin_routes.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "ember/ember_errors.h"

/* One line per route; "{node}" and "{label}" capture a whole segment. */
static const struct {
  const char *pattern;
  gam_admin_route_id id;
  unsigned methods;
  const char *allow;
} routes[] = {
    {"/healthz", GAM_ROUTE_HEALTHZ, GAM_METHOD_GET | GAM_METHOD_HEAD, "GET, HEAD"},
    {"/metrics", GAM_ROUTE_METRICS, GAM_METHOD_GET | GAM_METHOD_HEAD, "GET, HEAD"},
    {"/v1/status", GAM_ROUTE_STATUS, GAM_METHOD_GET | GAM_METHOD_HEAD, "GET, HEAD"},
    {"/v1/nodes", GAM_ROUTE_NODES, GAM_METHOD_GET | GAM_METHOD_HEAD, "GET, HEAD"},
    {"/v1/nodes/{node}", GAM_ROUTE_NODE, GAM_METHOD_GET | GAM_METHOD_HEAD,
     "GET, HEAD"},
    {"/v1/nodes/{node}/labels/{label}", GAM_ROUTE_NODE_LABEL,
     GAM_METHOD_PUT | GAM_METHOD_DELETE, "PUT, DELETE"},
    {"/v1/nodes/{node}/drain", GAM_ROUTE_NODE_DRAIN, GAM_METHOD_POST, "POST"},
    {"/v1/nodes/{node}/undrain", GAM_ROUTE_NODE_UNDRAIN, GAM_METHOD_POST, "POST"},
    {"/v1/apps", GAM_ROUTE_APPS, GAM_METHOD_GET | GAM_METHOD_HEAD, "GET, HEAD"},
    {"/v1/events", GAM_ROUTE_EVENTS, GAM_METHOD_GET | GAM_METHOD_HEAD, "GET, HEAD"},
};
#define N_ROUTES (sizeof routes / sizeof *routes)

typedef struct capture {
  const char *at;
  size_t len;
} capture;

static size_t segment_length(const char *s) {
  const char *slash = strchr(s, '/');
  return slash ? (size_t)(slash - s) : strlen(s);
}

/* Does path have the pattern's shape? Captures point into path; an empty
 * capture does not match (so "/v1/nodes/" is no route). */
static bool shape_matches(const char *pat, const char *path, capture *node,
                          capture *label) {
  while (*pat == '/' && *path == '/') {
    pat++;
    path++;
    size_t pn = segment_length(pat), sn = segment_length(path);
    capture *into = NULL;
    if (pn == 6 && memcmp(pat, "{node}", 6) == 0) into = node;
    if (pn == 7 && memcmp(pat, "{label}", 7) == 0) into = label;
    if (into) {
      if (sn == 0) return false;
      into->at = path;
      into->len = sn;
    } else if (pn != sn || memcmp(pat, path, pn) != 0) {
      return false;
    }
    pat += pn;
    path += sn;
  }
  return *pat == '\0' && *path == '\0';
}

static int invalid(char *why, size_t why_len, const char *what) {
  if (why && why_len) snprintf(why, why_len, "%s", what);
  return EMBER_EINVAL;
}

int gam_admin_route_parse(const char *path, gam_admin_route *out, char *why,
                          size_t why_len) {
  for (size_t i = 0; i < N_ROUTES; i++) {
    capture node = {NULL, 0}, label = {NULL, 0};
    if (!shape_matches(routes[i].pattern, path, &node, &label)) continue;
    if (node.len > GAM_ADMIN_SEGMENT_MAX)
      return invalid(why, why_len, "node id is longer than 255 characters");
    if (label.len > GAM_ADMIN_SEGMENT_MAX)
      return invalid(why, why_len, "label is longer than 255 characters");
    out->id = routes[i].id;
    out->methods = routes[i].methods;
    out->allow = routes[i].allow;
    memcpy(out->node, node.at ? node.at : "", node.len);
    out->node[node.len] = '\0';
    memcpy(out->label, label.at ? label.at : "", label.len);
    out->label[label.len] = '\0';
    if (node.at && !gam_admin_node_id_valid(out->node))
      return invalid(why, why_len,
                     "node id must be visible ASCII characters (no spaces)");
    return 0;
  }
  if (why && why_len)
    snprintf(why, why_len, "no such path (try /v1/status, /v1/nodes, "
             "/v1/apps, /v1/events, /healthz or /metrics)");
  return EMBER_ENOTFOUND;
}

unsigned gam_admin_method(const char *method) {
  static const struct {
    const char *name;
    unsigned bit;
  } methods[] = {{"GET", GAM_METHOD_GET},       {"HEAD", GAM_METHOD_HEAD},
                 {"PUT", GAM_METHOD_PUT},       {"DELETE", GAM_METHOD_DELETE},
                 {"POST", GAM_METHOD_POST}};
  for (size_t i = 0; i < sizeof methods / sizeof *methods; i++)
    if (strcmp(method, methods[i].name) == 0) return methods[i].bit;
  return GAM_METHOD_OTHER;
}

bool gam_admin_node_id_valid(const char *id) {
  size_t n = 0;
  for (; id[n]; n++)
    if ((unsigned char)id[n] <= ' ' || (unsigned char)id[n] >= 0x7f ||
        id[n] == '/' || n >= GAM_ADMIN_SEGMENT_MAX)
      return false;
  return n > 0;
}

int gam_admin_events_limit(const char *text, unsigned *out) {
  if (!text) {
    *out = GAM_ADMIN_EVENTS_DEFAULT;
    return 0;
  }
  unsigned long v = 0;
  size_t i = 0;
  for (; text[i]; i++) {
    if (text[i] < '0' || text[i] > '9' || i >= 6) return EMBER_EINVAL;
    v = v * 10 + (unsigned long)(text[i] - '0');
  }
  if (i == 0 || v < 1 || v > GAM_ADMIN_EVENTS_MAX) return EMBER_EINVAL;
  *out = (unsigned)v;
  return 0;
}

const char *gam_admin_printable(const char *s, char *out, size_t out_len) {
  if (!out_len) return out;
  size_t o = 0;
  for (; s && *s && o + 1 < out_len; s++)
    out[o++] = ((unsigned char)*s >= ' ' && (unsigned char)*s < 0x7f) ? *s : '?';
  out[o] = '\0';
  return out;
}

/* The next "%00", "%2F" or "%2f" in s, or its end. */
static char *next_kept(char *s) {
  for (; *s; s++)
    if (s[0] == '%' && ((s[1] == '0' && s[2] == '0') ||
                        (s[1] == '2' && (s[2] == 'F' || s[2] == 'f'))))
      return s;
  return s;
}

size_t gam_admin_unescape(char *s) {
  /* libmicrohttpd decodes the pieces between the escapes kept encoded */
  char *out = s, *in = s;
  for (;;) {
    char *stop = next_kept(in);
    char kept = *stop;
    *stop = '\0';
    size_t n = MHD_http_unescape(in);  /* in place, never longer */
    memmove(out, in, n);
    out += n;
    *stop = kept;
    if (!kept) break;
    memmove(out, stop, 3);
    out += 3;
    in = stop + 3;
  }
  *out = '\0';
  return (size_t)(out - s);
}
