/*
 * core_leases.c - granting leases at scheduling opportunities and ending
 * them. Every grant and end is in the store before it is acted on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core_internal.h"
#include "ember/ember_errors.h"
#include "log.h"

int core_in_use_add(gam_node *n, const char *label, int delta) {
  for (size_t i = 0; i < n->n_in_use; i++) {
    if (strcmp(n->in_use[i].label, label) != 0) continue;
    n->in_use[i].leases += (unsigned)delta;
    if (n->in_use[i].leases == 0) {
      free((char *)n->in_use[i].label);
      n->in_use[i] = n->in_use[--n->n_in_use];
    }
    return 0;
  }
  if (delta < 0) return 0;
  if (n->n_in_use == n->cap_in_use) {
    size_t cap = n->cap_in_use ? 2 * n->cap_in_use : 4;
    gam_label_count *in_use = realloc(n->in_use, cap * sizeof *in_use);
    if (!in_use) return EMBER_ENOMEM;
    n->in_use = in_use;
    n->cap_in_use = cap;
  }
  char *copy = strdup(label);
  if (!copy) return EMBER_ENOMEM;
  n->in_use[n->n_in_use].label = copy;
  n->in_use[n->n_in_use].leases = (unsigned)delta;
  n->n_in_use++;
  return 0;
}

/* An ended lease for node's next HeartbeatAck, with its expiry time. */
static int push_ended(gam_node *node, uint64_t id, uint64_t expires) {
  if (node->n_ended == node->cap_ended) {
    size_t c = node->cap_ended ? 2 * node->cap_ended : 8;
    uint64_t *ids = realloc(node->ended, c * sizeof *ids);
    if (!ids) return EMBER_ENOMEM;
    node->ended = ids;
    uint64_t *exp = realloc(node->ended_expires, c * sizeof *exp);
    if (!exp) return EMBER_ENOMEM;
    node->ended_expires = exp;
    node->cap_ended = c;
  }
  node->ended[node->n_ended] = id;
  node->ended_expires[node->n_ended++] = expires;
  return 0;
}

gam_lease *core_lease_new(gam_app *a, gam_node *node, const char *label) {
  if (a->n_leases == a->cap_leases) {
    size_t cap = a->cap_leases ? 2 * a->cap_leases : 4;
    gam_lease **leases = realloc(a->leases, cap * sizeof *leases);
    if (!leases) return NULL;
    a->leases = leases;
    a->cap_leases = cap;
  }
  gam_lease *l = calloc(1, sizeof *l);
  if (!l || !(l->label = strdup(label))) {
    free(l);
    return NULL;
  }
  l->app = a;
  l->node = node;
  return l;
}

int core_lease_grant(gam_core *c, gam_app *a, gam_node *node) {
  gam_lease *l = core_lease_new(a, node, a->label);
  if (!l) return EMBER_ENOMEM;
  l->issued_unix_ms = lease_now_unix_ms();
  l->expires_unix_ms = l->issued_unix_ms + c->opt.lease_ttl_ms;
  if (core_in_use_add(node, l->label, 1) != 0) {
    free(l->label);
    free(l);
    return EMBER_ENOMEM;
  }
  l->id = ++c->last_lease_id;
  gam_writer_lease_insert(c->w, l->id, a->id, node->id, l->label,
                          l->issued_unix_ms, l->expires_unix_ms);
  gam_writer_event(c->w, l->issued_unix_ms, "lease_granted", node->id, a->id,
                   l->label);
  a->leases[a->n_leases++] = l;
  node->n_leases++;
  core_sync_sched(c, node);
  c->n.leases_granted++;
  log_info("lease %llu: app %llu (%s) on %s for %s",
           (unsigned long long)l->id, (unsigned long long)a->id, a->name,
           node->id, l->label);
  return 0;
}

static void count_end(gam_core *c, const char *reason) {
  if (strcmp(reason, "released") == 0 || strcmp(reason, "disconnected") == 0 ||
      strcmp(reason, "wait over") == 0 || strcmp(reason, "app gone") == 0)
    c->n.ended_released++;
  else if (strcmp(reason, "node lost") == 0) c->n.ended_lost++;
  else if (strcmp(reason, "drained") == 0) c->n.ended_drained++;
  else if (strcmp(reason, "expired") == 0) c->n.ended_expired++;
  else c->n.ended_label++;
}

int core_lease_end(gam_core *c, gam_lease *l, const char *reason) {
  uint64_t now = lease_now_unix_ms();
  gam_app *a = l->app;
  gam_node *node = l->node;
  gam_writer_lease_end(c->w, l->id, reason, now);
  gam_writer_event(c->w, now, "lease_ended", node->id, a->id, reason);
  core_in_use_add(node, l->label, -1);
  node->n_leases--;
  core_sync_sched(c, node);
  push_ended(node, l->id, l->expires_unix_ms);
  /* the app hears of every end, whatever the reason (a Release proven by
   * its key on another connection included); a pending app has not been
   * told of its leases yet */
  if (a->connected && a->state != GAM_APP_PENDING) {
    Ember__LeaseEnded m = EMBER__LEASE_ENDED__INIT;
    m.lease_id = l->id;
    m.node = node->id;
    m.reason = (char *)reason;
    core_queue(c, a->id, EMBER__MSG_TYPE__MSG_LEASE_ENDED, &m.base);
  }
  log_info("lease %llu (app %llu on %s) ended: %s", (unsigned long long)l->id,
           (unsigned long long)a->id, node->id, reason);
  count_end(c, reason);
  for (size_t i = 0; i < a->n_leases; i++)
    if (a->leases[i] == l) {
      a->leases[i] = a->leases[--a->n_leases];
      break;
    }
  free(l->label);
  free(l);
  return 0;
}

int core_end_node_leases(gam_core *c, gam_node *node, const char *label,
                         const char *reason) {
  for (gam_app *a = c->apps; a; a = a->next)
    for (size_t i = 0; i < a->n_leases;) {
      gam_lease *l = a->leases[i];
      if (l->node == node && (!label || strcmp(l->label, label) == 0)) {
        int rc = core_lease_end(c, l, reason);
        if (rc) return rc;
        continue;
      }
      i++;
    }
  return 0;
}

int core_app_end(gam_core *c, gam_app *a, const char *reason) {
  uint64_t now = lease_now_unix_ms();
  while (a->n_leases) {
    int rc = core_lease_end(c, a->leases[0], reason);
    if (rc) return rc;
  }
  gam_writer_app_set_state(c->w, a->id, GAM_APP_ENDED, now);
  gam_writer_event(c->w, now, "app_ended", NULL, a->id, reason);
  log_info("app %llu (%s) ended: %s", (unsigned long long)a->id, a->name,
           reason);
  for (gam_app **p = &c->apps; *p; p = &(*p)->next)
    if (*p == a) {
      *p = a->next;
      break;
    }
  core_app_free(a);
  return 0;
}

int core_send_allocation(gam_core *c, gam_app *a) {
  Ember__Allocation m = EMBER__ALLOCATION__INIT;
  m.app_id = a->id;
  Ember__NodeGrant *grants = calloc(a->n_leases ? a->n_leases : 1,
                                    sizeof *grants);
  Ember__NodeGrant **ptrs = calloc(a->n_leases ? a->n_leases : 1,
                                   sizeof *ptrs);
  Ember__Lease *leases = calloc(a->n_leases ? a->n_leases : 1,
                                sizeof *leases);
  int rc = (grants && ptrs && leases) ? 0 : EMBER_ENOMEM;
  size_t signed_n = 0;
  for (size_t i = 0; i < a->n_leases && rc == 0; i++, signed_n++) {
    gam_lease *l = a->leases[i];
    Ember__LeaseBody body = EMBER__LEASE_BODY__INIT;
    body.lease_id = l->id;
    body.app_id = a->id;
    body.app = a->name;
    body.node = l->node->id;
    body.label = l->label;
    body.issued_unix_ms = l->issued_unix_ms;
    body.expires_unix_ms = l->expires_unix_ms;
    /* apps loaded from the store have no key: their leases cannot be
     * used at a NAM, which needs the app's proof */
    body.has_app_key = a->has_key;
    body.app_key.data = a->key;
    body.app_key.len = sizeof a->key;
    rc = lease_sign(&c->opt.key, &body, &leases[i]);
    if (rc) break;
    ember__node_grant__init(&grants[i]);
    grants[i].node = l->node->id;
    grants[i].address = l->node->address;
    grants[i].lease = &leases[i];
    grants[i].lease_id = l->id;
    ptrs[i] = &grants[i];
  }
  if (rc == 0) {
    m.grants = ptrs;
    m.n_grants = a->n_leases;
    uint64_t now = lease_now_unix_ms();
    gam_writer_app_set_state(c->w, a->id, GAM_APP_RUNNING, now);
    rc = core_queue(c, a->id, EMBER__MSG_TYPE__MSG_ALLOCATION, &m.base);
  }
  if (rc == 0) {
    a->state = GAM_APP_RUNNING;
    c->n.allocations++;
    log_info("app %llu (%s) placed on %zu node(s)", (unsigned long long)a->id,
             a->name, a->n_leases);
  }
  for (size_t i = 0; i < signed_n; i++) lease_clear(&leases[i]);
  free(leases);
  free(ptrs);
  free(grants);
  return rc;
}

/* Node `node` just heartbeated: offer it to the pending apps. */
void core_place_on(gam_core *c, gam_node *node) {
  size_t n_pending = 0;
  for (gam_app *a = c->apps; a; a = a->next)
    if (a->state == GAM_APP_PENDING) n_pending++;
  if (n_pending == 0 || !c->sched[node->index].available) return;

  gam_app **apps = calloc(n_pending, sizeof *apps);
  gam_sched_app *view = calloc(n_pending, sizeof *view);
  size_t *held = NULL, total_held = 0;
  size_t *granted = calloc(n_pending, sizeof *granted);
  unsigned *skipped = calloc(n_pending, sizeof *skipped);
  size_t k = 0;
  for (gam_app *a = c->apps; a; a = a->next)
    if (a->state == GAM_APP_PENDING) total_held += a->n_leases;
  held = calloc(total_held ? total_held : 1, sizeof *held);
  if (!apps || !view || !granted || !skipped || !held) goto out;
  size_t h = 0;
  for (gam_app *a = c->apps; a; a = a->next) {
    if (a->state != GAM_APP_PENDING) continue;
    apps[k] = a;
    view[k].id = a->id;
    view[k].label = a->label;
    view[k].wanted = a->wanted - (unsigned)a->n_leases;
    view[k].skipped = a->skipped;
    view[k].nodes_held = held + h;
    for (size_t i = 0; i < a->n_leases; i++) held[h++] = a->leases[i]->node->index;
    view[k].n_nodes_held = a->n_leases;
    k++;
  }
  size_t n_granted =
      gam_policy_offer(&c->opt.policy, c->sched, c->n_nodes, node->index, view,
                       n_pending, granted, n_pending, skipped);
  for (size_t i = 0; i < n_pending; i++) {
    if (skipped[i] > apps[i]->skipped) c->n.skips++;
    apps[i]->skipped = skipped[i];
  }
  for (size_t i = 0; i < n_granted; i++) {
    gam_app *a = apps[granted[i]];
    if (core_lease_grant(c, a, node) != 0) break;
    a->skipped = 0;
    if (a->n_leases == a->wanted) core_send_allocation(c, a);
  }
out:
  free(apps);
  free(view);
  free(held);
  free(granted);
  free(skipped);
}
