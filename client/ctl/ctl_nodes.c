/* ctl_nodes.c - emberctl status, nodes, node ID, label add/rm, drain and
 * undrain: one request each (status two), a table or the server's JSON. */
#include <stdlib.h>
#include <string.h>

#include "ctl.h"

static json_int_t int_at(const json_t *o, const char *key) {
  return json_integer_value(json_object_get(o, key));
}

static int finish_table(ctl_table *t) {
  int rc = ctl_table_print(t, stdout);
  ctl_table_free(t);
  return rc ? ctl_error("out of memory, or cannot write standard output")
            : CTL_OK;
}

/* ID STATE DRAINED LEASES LAST-HB LOAD FPGAS LABELS: the long lists last,
 * so that the short columns stay aligned on a narrow terminal. */
static int nodes_table(const json_t *nodes) {
  static const char *const header[] = {"ID",      "STATE", "DRAINED",
                                       "LEASES",  "LAST-HB", "LOAD",
                                       "FPGAS",   "LABELS"};
  ctl_table *t = ctl_table_new(8, header);
  if (!t) return ctl_error("out of memory");
  ctl_table_right(t, 3);
  size_t i;
  json_t *n;
  json_array_foreach(nodes, i, n) {
    char leases[24], hb[40], age[24], load[256], fpgas[256], labels[1024];
    snprintf(leases, sizeof leases, "%zu",
             json_array_size(json_object_get(n, "leases")));
    const json_t *ago = json_object_get(n, "last_heartbeat_ms_ago");
    if (json_is_integer(ago) && int_at(n, "heartbeats") > 0)
      snprintf(hb, sizeof hb, "%s ago",
               ctl_format_age(json_integer_value(ago), age, sizeof age));
    else
      snprintf(hb, sizeof hb, "never");
    fpgas[0] = '\0';
    size_t k, at = 0;
    json_t *f;
    json_array_foreach(json_object_get(n, "fpgas"), k, f) {
      int w = snprintf(fpgas + at, sizeof fpgas - at, "%s%s=%s", at ? "," : "",
                       ctl_str(f, "platform"), ctl_str(f, "bitstream"));
      if (w < 0 || (size_t)w >= sizeof fpgas - at) break;
      at += (size_t)w;
    }
    const char *row[] = {
        ctl_str(n, "id"), ctl_str(n, "state"),
        json_is_true(json_object_get(n, "drained")) ? "yes" : "no", leases, hb,
        ctl_format_load(json_object_get(n, "load"), load, sizeof load),
        fpgas[0] ? fpgas : "-",
        ctl_format_list(json_object_get(n, "labels"), ",", labels,
                        sizeof labels)};
    ctl_table_add(t, row);
  }
  return finish_table(t);
}

/* ---- status */

static int run_status(const ctl_options *o, int argc, char **argv) {
  json_t *s, *n;
  if (ctl_request(o, "GET", "/v1/status", &s)) return CTL_FAIL;
  if (o->json) {
    int rc = ctl_print_json(s);
    json_decref(s);
    return rc;
  }
  const json_t *gam = json_object_get(s, "gam");
  const json_t *nodes = json_object_get(s, "nodes");
  const json_t *apps = json_object_get(s, "apps");
  char up[24], labels[1024] = "";
  size_t at = 0;
  const char *key;
  json_t *v;
  json_object_foreach(json_object_get(s, "labels"), key, v) {
    int w = snprintf(labels + at, sizeof labels - at, "%s%s %" JSON_INTEGER_FORMAT,
                     at ? ", " : "", key, json_integer_value(v));
    if (w < 0 || (size_t)w >= sizeof labels - at) break;
    at += (size_t)w;
  }
  printf("gam:         %s (version %s, policy %s, up %s)\n", o->gam,
         ctl_str(gam, "version"), ctl_str(gam, "policy"),
         ctl_format_age(int_at(gam, "uptime_s") * 1000, up, sizeof up));
  printf("heartbeats:  %" JSON_INTEGER_FORMAT " (every %" JSON_INTEGER_FORMAT
         " ms, a node is lost after %" JSON_INTEGER_FORMAT " missed)\n",
         int_at(gam, "heartbeats"), int_at(gam, "heartbeat_interval_ms"),
         int_at(gam, "lost_after"));
  printf("nodes:       %" JSON_INTEGER_FORMAT " up, %" JSON_INTEGER_FORMAT
         " lost, %" JSON_INTEGER_FORMAT " drained (%" JSON_INTEGER_FORMAT
         " in all)\n", int_at(nodes, "up"), int_at(nodes, "lost"),
         int_at(nodes, "drained"), int_at(nodes, "total"));
  printf("apps:        %" JSON_INTEGER_FORMAT " running, %" JSON_INTEGER_FORMAT
         " pending\n", int_at(apps, "running"), int_at(apps, "pending"));
  printf("leases:      %" JSON_INTEGER_FORMAT "\n", int_at(s, "leases"));
  printf("labels up:   %s\n", at ? labels : "-");
  json_decref(s);
  if (ctl_request(o, "GET", "/v1/nodes", &n)) return CTL_FAIL;
  int rc = CTL_OK;
  if (json_array_size(json_object_get(n, "nodes")) > 0) {
    putchar('\n');
    rc = nodes_table(json_object_get(n, "nodes"));
  }
  json_decref(n);
  return rc;
}

const ctl_command ctl_cmd_status = {
    "status", "", "the cluster at a glance, then its nodes", 0, 0, run_status,
    "The GAM (version, policy, uptime, heartbeats), node counts by state,\n"
    "apps pending and running, leases and the labels offered, then the\n"
    "nodes table. Reads GET /v1/status and /v1/nodes; needs no token.\n"};

/* ---- nodes */

static int run_nodes(const ctl_options *o, int argc, char **argv) {
  json_t *n;
  if (ctl_request(o, "GET", "/v1/nodes", &n)) return CTL_FAIL;
  int rc = o->json ? ctl_print_json(n) : nodes_table(json_object_get(n, "nodes"));
  json_decref(n);
  return rc;
}

const ctl_command ctl_cmd_nodes = {
    "nodes", "", "every node: state, leases, load, labels", 0, 0,
    run_nodes,
    "One line per node, sorted by id. Reads GET /v1/nodes; needs no token.\n"};

/* ---- node ID */

static int node_detail(const json_t *n) {
  static const struct {
    const char *key, *title;
  } lists[] = {{"labels", "labels:"},       {"reported", "reported:"},
               {"added", "added:"},         {"removed", "removed:"},
               {"disabled", "disabled:"},   {"platforms", "platforms:"}};
  char buf[1024], age[24];
  printf("%-12s %s\n", "node:", ctl_str(n, "id"));
  printf("%-12s %s\n", "address:", ctl_str(n, "address"));
  printf("%-12s %s%s\n", "state:", ctl_str(n, "state"),
         json_is_true(json_object_get(n, "drained")) ? ", drained" : "");
  for (size_t i = 0; i < sizeof lists / sizeof *lists; i++)
    printf("%-12s %s\n", lists[i].title,
           ctl_format_list(json_object_get(n, lists[i].key), ", ", buf,
                           sizeof buf));
  if (int_at(n, "heartbeats") > 0)
    printf("%-12s %" JSON_INTEGER_FORMAT ", the last %s ago\n", "heartbeats:",
           int_at(n, "heartbeats"),
           ctl_format_age(int_at(n, "last_heartbeat_ms_ago"), age, sizeof age));
  else
    printf("%-12s none yet\n", "heartbeats:");

  size_t i;
  json_t *x;
  if (json_array_size(json_object_get(n, "fpgas")) > 0) {
    static const char *const header[] = {"FPGA", "BITSTREAM"};
    ctl_table *t = ctl_table_new(2, header);
    json_array_foreach(json_object_get(n, "fpgas"), i, x) {
      const char *row[] = {ctl_str(x, "platform"), ctl_str(x, "bitstream")};
      ctl_table_add(t, row);
    }
    putchar('\n');
    if (finish_table(t)) return CTL_FAIL;
  }
  if (json_array_size(json_object_get(n, "load")) > 0) {
    static const char *const header[] = {"ACCELERATOR", "QUEUED",
                                         "UTILIZATION"};
    ctl_table *t = ctl_table_new(3, header);
    ctl_table_right(t, 1);
    ctl_table_right(t, 2);
    json_array_foreach(json_object_get(n, "load"), i, x) {
      char queued[24], used[16];
      snprintf(used, sizeof used, "%.0f%%",
               100 * json_number_value(json_object_get(x, "utilization")));
      const char *row[] = {ctl_str(x, "accelerator"),
                           ctl_format_int(json_object_get(x, "queued"), queued,
                                          sizeof queued), used};
      ctl_table_add(t, row);
    }
    putchar('\n');
    if (finish_table(t)) return CTL_FAIL;
  }
  if (json_array_size(json_object_get(n, "leases")) > 0) {
    static const char *const header[] = {"LEASE", "APP", "NAME", "LABEL"};
    ctl_table *t = ctl_table_new(4, header);
    ctl_table_right(t, 0);
    ctl_table_right(t, 1);
    json_array_foreach(json_object_get(n, "leases"), i, x) {
      char id[24], app[24];
      const char *row[] = {
          ctl_format_int(json_object_get(x, "id"), id, sizeof id),
          ctl_format_int(json_object_get(x, "app_id"), app, sizeof app),
          ctl_str(x, "app"), ctl_str(x, "label")};
      ctl_table_add(t, row);
    }
    putchar('\n');
    if (finish_table(t)) return CTL_FAIL;
  }
  return CTL_OK;
}

/* GET or change /v1/nodes/NODE[/...]; prints the node as the reply has it. */
static int node_request(const ctl_options *o, const char *method,
                        const char *node, const char *what, const char *label,
                        json_t **out) {
  char *path = ctl_path("/v1/nodes", node, what, label, (char *)NULL);
  if (!path) return ctl_error("out of memory");
  int rc = ctl_request(o, method, path, out);
  free(path);
  return rc;
}

static int run_node(const ctl_options *o, int argc, char **argv) {
  json_t *n;
  if (node_request(o, "GET", argv[1], NULL, NULL, &n)) return CTL_FAIL;
  int rc = o->json ? ctl_print_json(n) : node_detail(json_object_get(n, "node"));
  json_decref(n);
  return rc;
}

const ctl_command ctl_cmd_node = {
    "node", "ID", "one node: labels and their origin, load, leases",
    1, 1, run_node,
    "Everything the GAM knows of node ID: address, state, labels (reported\n"
    "by its NAM, added or removed by an admin, disabled after failures),\n"
    "platforms, FPGA bitstreams, load and leases. Reads GET /v1/nodes/ID;\n"
    "needs no token. Exit 1 when there is no such node.\n"};

/* ---- changes: the node as it is afterwards */

static int after_change(const ctl_options *o, json_t *reply, const char *done) {
  int rc = CTL_OK;
  if (o->json) {
    rc = ctl_print_json(reply);
  } else {
    const json_t *n = json_object_get(reply, "node");
    char labels[1024];
    printf("%s: %s; labels: %s%s\n", ctl_str(n, "id"), done,
           ctl_format_list(json_object_get(n, "labels"), ", ", labels,
                           sizeof labels),
           json_is_true(json_object_get(n, "drained")) ? " (drained)" : "");
  }
  json_decref(reply);
  return rc;
}

static int run_label(const ctl_options *o, int argc, char **argv) {
  bool add = strcmp(argv[1], "add") == 0;
  if (!add && strcmp(argv[1], "rm") != 0)
    return ctl_usage_error("label: '%s' is not add or rm", argv[1]);
  json_t *n;
  if (node_request(o, add ? "PUT" : "DELETE", argv[2], "labels", argv[3], &n))
    return CTL_FAIL;
  char done[160];
  snprintf(done, sizeof done, "label %.64s %s", argv[3],
           add ? "added" : "removed (its leases here ended)");
  return after_change(o, n, done);
}

const ctl_command ctl_cmd_label = {
    "label", "add|rm NODE LABEL",
    "offer LABEL on NODE, or stop (ending its leases)",
    3, 3, run_label,
    "add: NODE offers LABEL whatever its NAM reports; rm: it stops offering\n"
    "LABEL and the leases that use it there end (their apps are told).\n"
    "LABEL is 1 to 64 characters of A-Z a-z 0-9 _ . @ -. PUT or DELETE\n"
    "/v1/nodes/NODE/labels/LABEL with the bearer token (--token-file).\n"};

static int run_drain(const ctl_options *o, int argc, char **argv) {
  bool drain = strcmp(argv[0], "drain") == 0;
  json_t *n;
  if (node_request(o, "POST", argv[1], drain ? "drain" : "undrain", NULL, &n))
    return CTL_FAIL;
  return after_change(o, n, drain ? "drained: no new leases, its leases ended"
                                  : "undrained: it takes leases again");
}

const ctl_command ctl_cmd_drain = {
    "drain", "NODE", "no new leases for NODE; the ones it has end", 1, 1,
    run_drain,
    "NODE gets no new leases and the ones it holds end (their apps are\n"
    "told); undrain lets it take leases again. POST /v1/nodes/NODE/drain\n"
    "with the bearer token (--token-file).\n"};
const ctl_command ctl_cmd_undrain = {
    "undrain", "NODE", "let NODE take leases again", 1, 1, run_drain,
    "NODE, drained before, takes leases again. POST\n"
    "/v1/nodes/NODE/undrain with the bearer token (--token-file).\n"};
