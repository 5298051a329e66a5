/* ctl_commands.c - emberctl's commands: one request each, printed as a
 * table (or the server's JSON with --json). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

static void print_json(const json_t *j) {
  char *s = json_dumps(j, JSON_INDENT(2) | JSON_SORT_KEYS);
  if (s) puts(s);
  free(s);
}

/* "a,b,c" from a JSON array of strings. */
static char *joined(const json_t *arr) {
  size_t i, len = 0;
  json_t *v;
  char *out = calloc(1, 1);
  json_array_foreach(arr, i, v) {
    const char *s = json_string_value(v);
    if (!s || !out) continue;
    char *grown = realloc(out, len + strlen(s) + 2);
    if (!grown) break;
    out = grown;
    len += (size_t)sprintf(out + len, "%s%s", len ? "," : "", s);
  }
  return out;
}

static const char *str(const json_t *o, const char *key) {
  const char *s = json_string_value(json_object_get(o, key));
  return s ? s : "-";
}

static void num(char *buf, size_t len, const json_t *o, const char *key) {
  snprintf(buf, len, "%lld",
           (long long)json_integer_value(json_object_get(o, key)));
}

static void nodes_table(const json_t *nodes) {
  static const char *const header[] = {"NODE", "STATE", "DRAINED", "LEASES",
                                       "LAST-HB", "FPGAS", "LOAD", "LABELS"};
  ctl_table t;
  ctl_table_init(&t, 8, header);
  size_t i;
  json_t *n;
  json_array_foreach(nodes, i, n) {
    char leases[16], hb[32], fpgas[256] = "", load[256] = "";
    snprintf(leases, sizeof leases, "%zu",
             json_array_size(json_object_get(n, "leases")));
    snprintf(hb, sizeof hb, "%lldms ago",
             (long long)json_integer_value(
                 json_object_get(n, "last_heartbeat_ms_ago")));
    size_t k;
    json_t *x;
    json_array_foreach(json_object_get(n, "fpgas"), k, x) {
      size_t l = strlen(fpgas);
      snprintf(fpgas + l, sizeof fpgas - l, "%s%s=%s", l ? "," : "",
               str(x, "platform"), str(x, "bitstream"));
    }
    json_array_foreach(json_object_get(n, "load"), k, x) {
      size_t l = strlen(load);
      snprintf(load + l, sizeof load - l, "%s%s:%lldq/%.0f%%", l ? " " : "",
               str(x, "accelerator"),
               (long long)json_integer_value(json_object_get(x, "queued")),
               100 * json_real_value(json_object_get(x, "utilization")));
    }
    char *labels = joined(json_object_get(n, "labels"));
    const char *row[] = {str(n, "id"), str(n, "state"),
                         json_is_true(json_object_get(n, "drained")) ? "yes" : "no",
                         leases, hb, fpgas[0] ? fpgas : "-",
                         load[0] ? load : "-", labels && labels[0] ? labels : "-"};
    ctl_table_add(&t, row);
    free(labels);
  }
  ctl_table_print(&t);
  ctl_table_free(&t);
}

int ctl_status(const ctl_options *o) {
  json_t *s, *n;
  if (ctl_request(o, "GET", "/v1/status", &s)) return 1;
  if (o->json) {
    print_json(s);
    json_decref(s);
    return 0;
  }
  json_t *gam = json_object_get(s, "gam"), *nodes = json_object_get(s, "nodes"),
         *apps = json_object_get(s, "apps");
  printf("gam        %s, policy %s, up %llds, %lld heartbeats\n",
         str(gam, "version"), str(gam, "policy"),
         (long long)json_integer_value(json_object_get(gam, "uptime_s")),
         (long long)json_integer_value(json_object_get(gam, "heartbeats")));
  printf("nodes      %lld up, %lld lost, %lld drained (%lld in all)\n",
         (long long)json_integer_value(json_object_get(nodes, "up")),
         (long long)json_integer_value(json_object_get(nodes, "lost")),
         (long long)json_integer_value(json_object_get(nodes, "drained")),
         (long long)json_integer_value(json_object_get(nodes, "total")));
  printf("apps       %lld running, %lld pending; %lld leases\n",
         (long long)json_integer_value(json_object_get(apps, "running")),
         (long long)json_integer_value(json_object_get(apps, "pending")),
         (long long)json_integer_value(json_object_get(s, "leases")));
  printf("labels    ");
  const char *key;
  json_t *v;
  json_object_foreach(json_object_get(s, "labels"), key, v)
      printf(" %s(%lld)", key, (long long)json_integer_value(v));
  printf("\n\n");
  json_decref(s);
  if (ctl_request(o, "GET", "/v1/nodes", &n)) return 1;
  nodes_table(json_object_get(n, "nodes"));
  json_decref(n);
  return 0;
}

int ctl_nodes(const ctl_options *o) {
  json_t *n;
  if (ctl_request(o, "GET", "/v1/nodes", &n)) return 1;
  if (o->json) print_json(n);
  else nodes_table(json_object_get(n, "nodes"));
  json_decref(n);
  return 0;
}

/* One node's reply, as the API wraps it or not. */
static const json_t *node_of(const json_t *reply) {
  const json_t *inner = json_object_get(reply, "node");
  return inner ? inner : reply;
}

static void node_detail(const json_t *n) {
  static const char *const lists[] = {"labels", "reported", "added",
                                      "removed", "disabled", "platforms"};
  printf("node       %s (%s)\n", str(n, "id"), str(n, "address"));
  printf("state      %s%s\n", str(n, "state"),
         json_is_true(json_object_get(n, "drained")) ? ", drained" : "");
  for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
    char *s = joined(json_object_get(n, lists[i]));
    printf("%-10s %s\n", lists[i], s && s[0] ? s : "-");
    free(s);
  }
  char hb[32];
  num(hb, sizeof hb, n, "heartbeats");
  printf("heartbeats %s, the last %lld ms ago\n", hb,
         (long long)json_integer_value(json_object_get(n, "last_heartbeat_ms_ago")));
  size_t i;
  json_t *l;
  json_array_foreach(json_object_get(n, "leases"), i, l)
      printf("lease      %lld: app %lld (%s) on %s\n",
             (long long)json_integer_value(json_object_get(l, "id")),
             (long long)json_integer_value(json_object_get(l, "app_id")),
             str(l, "app"), str(l, "label"));
}

int ctl_node(const ctl_options *o, const char *id) {
  char path[512];
  json_t *n;
  snprintf(path, sizeof path, "/v1/nodes/%s", id);
  if (ctl_request(o, "GET", path, &n)) return 1;
  if (o->json) print_json(n);
  else node_detail(node_of(n));
  json_decref(n);
  return 0;
}

static int change(const ctl_options *o, const char *method, const char *path,
                  const char *done) {
  json_t *n;
  if (ctl_request(o, method, path, &n)) return 1;
  if (o->json) print_json(n);
  else printf("%s\n", done);
  json_decref(n);
  return 0;
}

int ctl_label(const ctl_options *o, int add, const char *node,
              const char *label) {
  char path[512], done[512];
  snprintf(path, sizeof path, "/v1/nodes/%s/labels/%s", node, label);
  snprintf(done, sizeof done, "%s: label %s %s", node, label,
           add ? "added" : "removed");
  return change(o, add ? "PUT" : "DELETE", path, done);
}

int ctl_drain(const ctl_options *o, int drain, const char *node) {
  char path[512], done[512];
  snprintf(path, sizeof path, "/v1/nodes/%s/%s", node,
           drain ? "drain" : "undrain");
  snprintf(done, sizeof done, "%s: %s", node, drain ? "drained" : "undrained");
  return change(o, "POST", path, done);
}

int ctl_apps(const ctl_options *o) {
  json_t *a;
  if (ctl_request(o, "GET", "/v1/apps", &a)) return 1;
  if (o->json) {
    print_json(a);
    json_decref(a);
    return 0;
  }
  static const char *const header[] = {"APP", "NAME", "LABEL", "WANTED",
                                       "STATE", "CONNECTED", "NODES"};
  ctl_table t;
  ctl_table_init(&t, 7, header);
  size_t i;
  json_t *app;
  json_array_foreach(json_object_get(a, "apps"), i, app) {
    char id[24], wanted[16], nodes[512] = "";
    num(id, sizeof id, app, "id");
    num(wanted, sizeof wanted, app, "wanted");
    size_t k;
    json_t *l;
    json_array_foreach(json_object_get(app, "leases"), k, l) {
      size_t len = strlen(nodes);
      snprintf(nodes + len, sizeof nodes - len, "%s%s", len ? "," : "",
               str(l, "node"));
    }
    const char *row[] = {id, str(app, "name"), str(app, "label"), wanted,
                         str(app, "state"),
                         json_is_true(json_object_get(app, "connected")) ? "yes" : "no",
                         nodes[0] ? nodes : "-"};
    ctl_table_add(&t, row);
  }
  ctl_table_print(&t);
  ctl_table_free(&t);
  json_decref(a);
  return 0;
}

int ctl_events(const ctl_options *o, const char *limit) {
  char path[128];
  json_t *e;
  snprintf(path, sizeof path, "/v1/events?limit=%s", limit ? limit : "20");
  if (ctl_request(o, "GET", path, &e)) return 1;
  if (o->json) {
    print_json(e);
    json_decref(e);
    return 0;
  }
  static const char *const header[] = {"ID", "AT_MS", "KIND", "NODE", "APP",
                                       "DETAIL"};
  ctl_table t;
  ctl_table_init(&t, 6, header);
  size_t i;
  json_t *ev;
  json_array_foreach(json_object_get(e, "events"), i, ev) {
    char id[24], at[24], app[24];
    num(id, sizeof id, ev, "id");
    num(at, sizeof at, ev, "at_ms");
    num(app, sizeof app, ev, "app_id");
    const char *row[] = {id, at, str(ev, "kind"), str(ev, "node"),
                         strcmp(app, "0") ? app : "-", str(ev, "detail")};
    ctl_table_add(&t, row);
  }
  ctl_table_print(&t);
  ctl_table_free(&t);
  json_decref(e);
  return 0;
}
