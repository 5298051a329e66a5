/* core_json.c - the admin API's views of the core (core_admin.h). */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "core_internal.h"
#include "ember/ember_errors.h"
#include "policy.h"

static json_t *strings(const strlist *l) {
  json_t *a = json_array();
  for (size_t i = 0; a && i < l->n; i++)
    json_array_append_new(a, json_string(l->items[i]));
  return a;
}

static json_t *node_json(gam_core *c, const gam_node *n) {
  json_t *o = json_object();
  if (!o) return NULL;
  json_object_set_new(o, "id", json_string(n->id));
  json_object_set_new(o, "address", json_string(n->address));
  json_object_set_new(o, "state",
                      json_string(n->state == GAM_NODE_UP ? "up" : "lost"));
  json_object_set_new(o, "drained", json_boolean(n->drained));
  json_object_set_new(o, "labels", strings(&n->effective));
  json_object_set_new(o, "reported", strings(&n->reported));
  json_object_set_new(o, "added", strings(&n->added));
  json_object_set_new(o, "removed", strings(&n->removed));
  json_object_set_new(o, "disabled", strings(&n->disabled));
  json_object_set_new(o, "platforms", strings(&n->platforms));
  json_t *fpgas = json_array();
  for (size_t i = 0; fpgas && i < n->n_fpgas; i++)
    json_array_append_new(fpgas, json_pack("{s:s?, s:s?}", "platform",
                                           n->fpgas[i].platform, "bitstream",
                                           n->fpgas[i].bitstream));
  json_object_set_new(o, "fpgas", fpgas);
  json_t *load = json_array();
  for (size_t i = 0; load && i < n->n_load; i++)
    json_array_append_new(load, json_pack("{s:s?, s:I, s:f}", "accelerator",
                                          n->load[i].accelerator, "queued",
                                          (json_int_t)n->load[i].queued,
                                          "utilization",
                                          n->load[i].utilization));
  json_object_set_new(o, "load", load);
  json_t *leases = json_array();
  for (gam_app *a = c->apps; leases && a; a = a->next)
    for (size_t i = 0; i < a->n_leases; i++)
      if (a->leases[i]->node == n)
        json_array_append_new(
            leases, json_pack("{s:I, s:I, s:s, s:s}", "id",
                              (json_int_t)a->leases[i]->id, "app_id",
                              (json_int_t)a->id, "app", a->name, "label",
                              a->leases[i]->label));
  json_object_set_new(o, "leases", leases);
  json_object_set_new(o, "heartbeats", json_integer((json_int_t)n->heartbeats));
  json_object_set_new(
      o, "last_heartbeat_ms_ago",
      json_integer((json_int_t)((clock_now_ns() - n->last_seen_ns) / 1000000u)));
  return o;
}

json_t *gam_core_nodes_json(gam_core *c) {
  pthread_mutex_lock(&c->lock);
  json_t *arr = json_array();
  for (size_t i = 0; arr && i < c->n_nodes; i++)
    json_array_append_new(arr, node_json(c, c->nodes[i]));
  core_unlock(c);
  return arr ? json_pack("{s:o}", "nodes", arr) : NULL;
}

int gam_core_node_json(gam_core *c, const char *id, json_t **out, char *err,
                       size_t err_len) {
  pthread_mutex_lock(&c->lock);
  gam_node *n = core_find_node(c, id);
  *out = n ? node_json(c, n) : NULL;
  core_unlock(c);
  if (!n) {
    snprintf(err, err_len, "no node '%.128s'", id);
    return EMBER_ENOTFOUND;
  }
  return *out ? 0 : EMBER_ENOMEM;
}

json_t *gam_core_apps_json(gam_core *c) {
  pthread_mutex_lock(&c->lock);
  json_t *arr = json_array();
  for (gam_app *a = c->apps; arr && a; a = a->next) {
    json_t *leases = json_array();
    for (size_t i = 0; leases && i < a->n_leases; i++)
      json_array_append_new(
          leases, json_pack("{s:I, s:s, s:I}", "id",
                            (json_int_t)a->leases[i]->id, "node",
                            a->leases[i]->node->id, "expires_unix_ms",
                            (json_int_t)a->leases[i]->expires_unix_ms));
    json_array_append_new(
        arr, json_pack("{s:I, s:s, s:s, s:I, s:s, s:I, s:b, s:o}", "id",
                       (json_int_t)a->id, "name", a->name, "label", a->label,
                       "wanted", (json_int_t)a->wanted, "state",
                       a->state == GAM_APP_PENDING ? "pending" : "running",
                       "skipped", (json_int_t)a->skipped, "connected",
                       a->connected, "leases", leases));
  }
  core_unlock(c);
  return arr ? json_pack("{s:o}", "apps", arr) : NULL;
}

json_t *gam_core_status_json(gam_core *c) {
  pthread_mutex_lock(&c->lock);
  size_t up = 0, lost = 0, drained = 0, pending = 0, running = 0, leases = 0;
  json_t *labels = json_object();
  for (size_t i = 0; i < c->n_nodes; i++) {
    gam_node *n = c->nodes[i];
    if (n->state == GAM_NODE_UP) up++;
    else lost++;
    if (n->drained) drained++;
    leases += n->n_leases;
    if (n->state != GAM_NODE_UP || !labels) continue;
    for (size_t j = 0; j < n->effective.n; j++) {
      json_t *v = json_object_get(labels, n->effective.items[j]);
      json_object_set_new(labels, n->effective.items[j],
                          json_integer(v ? json_integer_value(v) + 1 : 1));
    }
  }
  for (gam_app *a = c->apps; a; a = a->next) {
    if (a->state == GAM_APP_PENDING) pending++;
    else running++;
  }
  json_t *o = json_pack(
      "{s:{s:s, s:s, s:I, s:I, s:I, s:I}, s:{s:I, s:I, s:I, s:I},"
      " s:{s:I, s:I}, s:I, s:o}",
      "gam", "version", c->version, "policy",
      gam_policy_name(c->opt.policy.kind), "uptime_s",
      (json_int_t)((clock_now_ns() - c->started_ns) / 1000000000u),
      "heartbeats", (json_int_t)c->n.heartbeats, "heartbeat_interval_ms",
      (json_int_t)c->opt.heartbeat_interval_ms, "lost_after",
      (json_int_t)c->opt.lost_after, "nodes", "total", (json_int_t)c->n_nodes,
      "up", (json_int_t)up, "lost", (json_int_t)lost, "drained",
      (json_int_t)drained, "apps", "pending", (json_int_t)pending, "running",
      (json_int_t)running, "leases", (json_int_t)leases, "labels",
      labels ? labels : json_object());
  core_unlock(c);
  return o;
}

static int add_event(void *user, const gam_store_event_row *row) {
  json_array_append_new(
      user, json_pack("{s:I, s:I, s:s, s:s?, s:I, s:s?}", "id",
                      (json_int_t)row->id, "at_ms", (json_int_t)row->at_ms,
                      "kind", row->kind, "node", row->node, "app_id",
                      (json_int_t)row->app_id, "detail", row->detail));
  return 0;
}

json_t *gam_core_events_json(gam_core *c, unsigned limit) {
  json_t *arr = json_array();
  if (!arr) return NULL;
  /* the store is the writer's: it reads there, without the core lock */
  int rc = gam_writer_events(c->w, limit, add_event, arr);
  if (rc) {
    json_decref(arr);
    return NULL;
  }
  return json_pack("{s:o}", "events", arr);
}
