/*
 * core_load.c - the core's state rebuilt from the store at start-up.
 * Nodes keep their state and get lost_after heartbeats to come back;
 * running apps keep their leases (their connections are gone: they may
 * reconnect to release them); pending apps cannot be answered any more,
 * so they end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "core_internal.h"
#include "ember/ember_errors.h"
#include "log.h"

static int load_node(void *user, const gam_store_node_row *row) {
  gam_core *c = user;
  gam_node *n = core_node_new(c, row->id, row->address);
  if (!n) return EMBER_ENOMEM;
  n->state = row->state;
  n->drained = row->drained;
  n->registered_ms = row->registered_ms;
  n->last_seen_ms = row->last_seen_ms;
  n->last_seen_ns = clock_now_ns();
  return 0;
}

static int load_label(void *user, const gam_store_label_row *row) {
  gam_core *c = user;
  gam_node *n = core_find_node(c, row->node);
  if (!n) return 0;
  strlist *to = !row->admin ? &n->reported : row->on ? &n->added : &n->removed;
  return strlist_add(to, row->label) < 0 ? EMBER_ENOMEM : 0;
}

static int load_app(void *user, const gam_store_app_row *row) {
  gam_core *c = user;
  gam_app *a = calloc(1, sizeof *a);
  if (!a || !(a->name = strdup(row->name)) || !(a->label = strdup(row->label))) {
    if (a) core_app_free(a);
    return EMBER_ENOMEM;
  }
  a->id = row->id;
  a->wanted = row->wanted;
  a->state = row->state;
  a->created_ms = row->created_ms;
  /* its connection did not survive the restart: app_grace starts now */
  a->gone_ns = clock_now_ns();
  gam_app **tail = &c->apps;
  while (*tail) tail = &(*tail)->next;
  *tail = a;
  return 0;
}

static int load_lease(void *user, const gam_store_lease_row *row) {
  gam_core *c = user;
  gam_app *a = core_find_app(c, row->app_id);
  gam_node *n = core_find_node(c, row->node);
  if (!a || !n) return 0;
  gam_lease *l = core_lease_new(a, n, row->label);
  if (!l) return EMBER_ENOMEM;
  l->id = row->id;
  l->issued_unix_ms = row->issued_unix_ms;
  l->expires_unix_ms = row->expires_unix_ms;
  a->leases[a->n_leases++] = l;
  if (core_in_use_add(n, l->label, 1) != 0) return EMBER_ENOMEM;
  n->n_leases++;
  return 0;
}

int core_load(gam_core *c, char *err, size_t err_len) {
  gam_store_visitor v = {load_node, load_label, load_app, load_lease};
  int rc = gam_store_load(c->store, &v, c);
  if (rc == 0)
    rc = gam_store_last_ids(c->store, &c->last_app_id, &c->last_lease_id);
  if (rc) {
    snprintf(err, err_len, "loading the state: %s",
             rc == EMBER_ENOMEM ? "out of memory" : gam_store_error(c->store));
    return rc;
  }
  size_t leases = 0, apps = 0;
  for (size_t i = 0; i < c->n_nodes; i++) {
    /* no relabel here: leases are not ended at start-up, the next
     * heartbeat says what the node serves */
    gam_node *n = c->nodes[i];
    if (core_effective_labels(n, &n->effective) != 0) {
      snprintf(err, err_len, "loading the state: out of memory");
      return EMBER_ENOMEM;
    }
    core_sync_sched(c, n);
    leases += n->n_leases;
  }
  for (gam_app *a = c->apps, *next; a; a = next) {
    next = a->next;
    if (a->state == GAM_APP_PENDING) {
      core_app_end(c, a, "gam restarted before it was placed");
      continue;
    }
    apps++;
  }
  log_notice("state: %zu node(s), %zu app(s), %zu lease(s)", c->n_nodes, apps,
             leases);
  return 0;
}
