/* ctl_apps.c - emberctl apps and events [N]: a table, or the server's
 * JSON. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

#define EVENTS_DEFAULT 20
#define EVENTS_MAX 10000  /* the API's bound */

static int finish_table(ctl_table *t) {
  int rc = ctl_table_print(t, stdout);
  ctl_table_free(t);
  return rc ? ctl_error("out of memory, or cannot write standard output")
            : CTL_OK;
}

static int run_apps(const ctl_options *o, int argc, char **argv) {
  json_t *a;
  if (ctl_request(o, "GET", "/v1/apps", &a)) return CTL_FAIL;
  if (o->json) {
    int rc = ctl_print_json(a);
    json_decref(a);
    return rc;
  }
  static const char *const header[] = {"ID",    "NAME",      "LABEL", "WANTED",
                                       "STATE", "CONNECTED", "NODES"};
  ctl_table *t = ctl_table_new(7, header);
  if (!t) {
    json_decref(a);
    return ctl_error("out of memory");
  }
  ctl_table_right(t, 0);
  ctl_table_right(t, 3);
  size_t i;
  json_t *app;
  json_array_foreach(json_object_get(a, "apps"), i, app) {
    char id[24], wanted[24], nodes[1024] = "";
    size_t k, at = 0;
    json_t *l;
    json_array_foreach(json_object_get(app, "leases"), k, l) {
      int w = snprintf(nodes + at, sizeof nodes - at, "%s%s", at ? "," : "",
                       ctl_str(l, "node"));
      if (w < 0 || (size_t)w >= sizeof nodes - at) break;
      at += (size_t)w;
    }
    const json_t *connected = json_object_get(app, "connected");
    const char *row[] = {
        ctl_format_int(json_object_get(app, "id"), id, sizeof id),
        ctl_str(app, "name"), ctl_str(app, "label"),
        ctl_format_int(json_object_get(app, "wanted"), wanted, sizeof wanted),
        ctl_str(app, "state"),
        json_is_boolean(connected) ? (json_is_true(connected) ? "yes" : "no")
                                   : "-",
        at ? nodes : "-"};
    ctl_table_add(t, row);
  }
  json_decref(a);
  return finish_table(t);
}

const ctl_command ctl_cmd_apps = {
    "apps", "", "apps: what they asked for, the nodes they hold",
    0, 0, run_apps,
    "Every app not ended: its label, nodes wanted, state (pending or\n"
    "running), opportunities skipped and its leases. Reads GET /v1/apps;\n"
    "needs no token.\n"};

static int run_events(const ctl_options *o, int argc, char **argv) {
  long limit = EVENTS_DEFAULT;
  if (argc > 1) {
    char *end;
    errno = 0;
    limit = strtol(argv[1], &end, 10);
    if (argv[1][0] < '0' || argv[1][0] > '9' || *end || errno || limit < 1 ||
        limit > EVENTS_MAX)
      return ctl_usage_error("events: N must be a whole number from 1 to %d",
                             EVENTS_MAX);
  }
  char path[64];
  snprintf(path, sizeof path, "/v1/events?limit=%ld", limit);
  json_t *e;
  if (ctl_request(o, "GET", path, &e)) return CTL_FAIL;
  if (o->json) {
    int rc = ctl_print_json(e);
    json_decref(e);
    return rc;
  }
  static const char *const header[] = {"ID",   "TIME", "KIND",
                                       "NODE", "APP",  "DETAIL"};
  ctl_table *t = ctl_table_new(6, header);
  if (!t) {
    json_decref(e);
    return ctl_error("out of memory");
  }
  ctl_table_right(t, 0);
  ctl_table_right(t, 4);
  size_t i;
  json_t *ev;
  json_array_foreach(json_object_get(e, "events"), i, ev) {
    char id[24], at[32], app[24];
    const json_t *app_id = json_object_get(ev, "app_id");
    const char *row[] = {
        ctl_format_int(json_object_get(ev, "id"), id, sizeof id),
        ctl_format_time(json_integer_value(json_object_get(ev, "at_ms")), at,
                        sizeof at),
        ctl_str(ev, "kind"), ctl_str(ev, "node"),
        json_integer_value(app_id) > 0 ? ctl_format_int(app_id, app, sizeof app)
                                       : "-",
        ctl_str(ev, "detail")};
    ctl_table_add(t, row);
  }
  json_decref(e);
  return finish_table(t);
}

const ctl_command ctl_cmd_events = {
    "events", "[N]", "the newest N events (default 20)",
    0, 1, run_events,
    "The GAM's event log, newest first: nodes registered and lost, labels\n"
    "changed, drains, leases granted and ended. N is 1 to 10000. Reads\n"
    "GET /v1/events?limit=N; needs no token.\n"};
