/*
 * core.c - the GAM core (core.h): nodes registering and heartbeating,
 * apps acquiring and releasing, liveness. Leases are in core_leases.c,
 * start-up in core_load.c, the admin views in core_json.c.
 */
#include "core_internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "clock.h"
#include "ember/ember_errors.h"
#include "errbuf.h"
#include "lease_proof.h"
#include "log.h"

static uint64_t now_ms(void) { return lease_now_unix_ms(); }

bool gam_label_valid(const char *label) {
  size_t n = strlen(label);
  if (n == 0 || n > 64) return false;
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)label[i];
    if (!isalnum(ch) && !strchr("_.@-", ch)) return false;
  }
  return true;
}

/* Node ids and app names: printable, no spaces, 1..128 bytes. */
static bool name_valid(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 128) return false;
  for (size_t i = 0; i < n; i++)
    if (!isgraph((unsigned char)s[i])) return false;
  return true;
}

void core_unlock(gam_core *c) {
  gam_writer_publish(c->w);
  pthread_mutex_unlock(&c->lock);
}

gam_node *core_find_node(gam_core *c, const char *id) {
  size_t lo = 0, hi = c->n_nodes;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    int cmp = strcmp(c->nodes[mid]->id, id);
    if (cmp == 0) return c->nodes[mid];
    if (cmp < 0) lo = mid + 1;
    else hi = mid;
  }
  return NULL;
}

gam_app *core_find_app(gam_core *c, uint64_t id) {
  for (gam_app *a = c->apps; a; a = a->next)
    if (a->id == id) return a;
  return NULL;
}

void core_sync_sched(gam_core *c, gam_node *node) {
  gam_sched_node *s = &c->sched[node->index];
  s->id = node->id;
  s->labels = (const char *const *)node->effective.items;
  s->n_labels = node->effective.n;
  s->in_use = node->in_use;
  s->n_in_use = node->n_in_use;
  s->slots = c->opt.slots_per_node;
  s->available = node->state == GAM_NODE_UP && !node->drained;
}

/* A new node, inserted in id order (binary search), with its policy
 * view. */
gam_node *core_node_new(gam_core *c, const char *id, const char *address) {
  if (c->n_nodes == c->cap_nodes) {
    size_t cap = c->cap_nodes ? 2 * c->cap_nodes : 16;
    gam_node **nodes = realloc(c->nodes, cap * sizeof *nodes);
    if (!nodes) return NULL;
    c->nodes = nodes;
    gam_sched_node *sched = realloc(c->sched, cap * sizeof *sched);
    if (!sched) return NULL;
    c->sched = sched;
    c->cap_nodes = cap;
  }
  gam_node *n = calloc(1, sizeof *n);
  if (!n || !(n->id = strdup(id)) || !(n->address = strdup(address))) {
    if (n) free(n->id);
    free(n);
    return NULL;
  }
  size_t at = 0, hi = c->n_nodes;
  while (at < hi) {
    size_t mid = at + (hi - at) / 2;
    if (strcmp(c->nodes[mid]->id, id) < 0) at = mid + 1;
    else hi = mid;
  }
  memmove(c->nodes + at + 1, c->nodes + at,
          (c->n_nodes - at) * sizeof *c->nodes);
  memmove(c->sched + at + 1, c->sched + at,
          (c->n_nodes - at) * sizeof *c->sched);
  c->nodes[at] = n;
  c->n_nodes++;
  /* only the nodes after it moved (a view holds no pointer into sched) */
  for (size_t i = at; i < c->n_nodes; i++) c->nodes[i]->index = i;
  core_sync_sched(c, n);
  return n;
}

static void node_free(gam_node *n) {
  strlist_clear(&n->reported);
  strlist_clear(&n->added);
  strlist_clear(&n->removed);
  strlist_clear(&n->disabled);
  strlist_clear(&n->effective);
  strlist_clear(&n->platforms);
  for (size_t i = 0; i < n->n_fpgas; i++) {
    free(n->fpgas[i].platform);
    free(n->fpgas[i].bitstream);
  }
  free(n->fpgas);
  for (size_t i = 0; i < n->n_load; i++) free(n->load[i].accelerator);
  free(n->load);
  for (size_t i = 0; i < n->n_in_use; i++) free((char *)n->in_use[i].label);
  free(n->in_use);
  free(n->ended);
  free(n->ended_expires);
  free(n->id);
  free(n->address);
  free(n);
}

void core_app_free(gam_app *a) {
  for (size_t i = 0; i < a->n_leases; i++) {
    free(a->leases[i]->label);
    free(a->leases[i]);
  }
  free(a->leases);
  free(a->name);
  free(a->label);
  free(a);
}

int core_queue(gam_core *c, uint64_t app_id, uint8_t type,
               const ProtobufCMessage *msg) {
  gam_outbox_item *it = calloc(1, sizeof *it);
  size_t len = protobuf_c_message_get_packed_size(msg);
  if (!it || !(it->payload = malloc(len ? len : 1))) {
    free(it);
    return EMBER_ENOMEM;
  }
  protobuf_c_message_pack(msg, it->payload);
  it->len = len;
  it->app_id = app_id;
  it->type = type;
  if (c->out_tail) c->out_tail->next = it;
  else c->out_head = it;
  c->out_tail = it;
  if (c->wake) c->wake(c->wake_user);
  return 0;
}

/* ---------------------------------------------------------------- labels */

int core_effective_labels(const gam_node *node, strlist *out) {
  strlist eff = {0};
  int rc = 0;
  for (size_t i = 0; i < node->reported.n && rc >= 0; i++)
    rc = strlist_add(&eff, node->reported.items[i]);
  for (size_t i = 0; i < node->added.n && rc >= 0; i++)
    rc = strlist_add(&eff, node->added.items[i]);
  if (rc < 0) {
    strlist_clear(&eff);
    return EMBER_ENOMEM;
  }
  for (size_t i = 0; i < node->removed.n; i++)
    strlist_remove(&eff, node->removed.items[i]);
  for (size_t i = 0; i < node->disabled.n; i++)
    strlist_remove(&eff, node->disabled.items[i]);
  *out = eff;
  return 0;
}

int core_node_relabel(gam_core *c, gam_node *node) {
  strlist eff;
  int rc = core_effective_labels(node, &eff);
  if (rc) return rc;
  /* leases on a label the node no longer offers end now */
  for (size_t i = 0; i < node->n_in_use; i++) {
    const char *label = node->in_use[i].label;
    if (strlist_has(&eff, label)) continue;
    const char *why = strlist_has(&node->disabled, label)
                          ? "accelerator disabled" : "label removed";
    char *copy = strdup(label);
    if (!copy) break;
    rc = core_end_node_leases(c, node, copy, why);
    free(copy);
    if (rc) break;
    i = (size_t)-1;  /* in_use changed: start over */
  }
  strlist_clear(&node->effective);
  node->effective = eff;
  core_sync_sched(c, node);
  return rc;
}

/* ----------------------------------------------------------- register */

int gam_core_register(gam_core *c, const Ember__Register *m, char *err,
                      size_t err_len) {
  if (!name_valid(m->node))
    return errbuf_printf(
        err, err_len, EMBER_EINVAL,
        "node names are 1..128 printable characters without spaces");
  if (strlen(m->address) > 300)
    return errbuf_printf(err, err_len, EMBER_EINVAL, "address too long");
  for (size_t i = 0; i < m->n_labels; i++)
    if (!gam_label_valid(m->labels[i]))
      return errbuf_printf(err, err_len, EMBER_EINVAL,
                           "label '%.80s' is not valid", m->labels[i]);
  pthread_mutex_lock(&c->lock);
  int rc = 0;
  uint64_t now = now_ms();
  gam_node *node = core_find_node(c, m->node);
  bool fresh = !node;
  gam_writer_node_register(c->w, m->node, m->address, now);
  gam_writer_node_set_reported(c->w, m->node, (const char *const *)m->labels,
                               m->n_labels);
  gam_writer_event(c->w, now, "node_registered", m->node, 0, m->address);
  if (fresh && !(node = core_node_new(c, m->node, m->address))) {
    rc = errbuf_printf(err, err_len, EMBER_ENOMEM, "out of memory");
    goto out;
  }
  if (!fresh && strcmp(node->address, m->address) != 0) {
    char *addr = strdup(m->address);
    if (addr) {
      free(node->address);
      node->address = addr;
    }
  }
  if (node->state == GAM_NODE_LOST)
    log_notice("node %s is back", node->id);
  node->state = GAM_NODE_UP;
  node->registered_ms = now;
  node->last_seen_ms = now;
  node->last_seen_ns = clock_now_ns();
  strlist_assign(&node->reported, m->labels, m->n_labels);
  strlist_assign(&node->platforms, m->platforms, m->n_platforms);
  rc = core_node_relabel(c, node);
  c->n.registrations++;
  log_info("node %s registered (%s, %zu labels)", node->id, node->address,
           node->effective.n);
out:
  core_unlock(c);
  return rc;
}

/* ---------------------------------------------------------- heartbeat */

static void set_fpgas(gam_node *n, const Ember__Heartbeat *m) {
  for (size_t i = 0; i < n->n_fpgas; i++) {
    free(n->fpgas[i].platform);
    free(n->fpgas[i].bitstream);
  }
  free(n->fpgas);
  n->n_fpgas = 0;
  n->fpgas = m->n_fpgas ? calloc(m->n_fpgas, sizeof *n->fpgas) : NULL;
  if (!n->fpgas) return;
  for (size_t i = 0; i < m->n_fpgas; i++) {
    n->fpgas[i].platform = strdup(m->fpgas[i]->platform);
    n->fpgas[i].bitstream =
        strdup(m->fpgas[i]->bitstream ? m->fpgas[i]->bitstream : "");
    n->n_fpgas++;
  }
}

static void set_load(gam_node *n, const Ember__Heartbeat *m) {
  if (n->n_load == m->n_load) {
    /* the usual case: same accelerators, new figures, no allocation */
    bool same = true;
    for (size_t i = 0; i < m->n_load && same; i++)
      same = n->load[i].accelerator &&
             strcmp(n->load[i].accelerator, m->load[i]->accelerator) == 0;
    if (same) {
      for (size_t i = 0; i < m->n_load; i++) {
        n->load[i].queued = m->load[i]->queued;
        n->load[i].utilization = m->load[i]->utilization;
      }
      return;
    }
  }
  for (size_t i = 0; i < n->n_load; i++) free(n->load[i].accelerator);
  free(n->load);
  n->n_load = 0;
  n->load = m->n_load ? calloc(m->n_load, sizeof *n->load) : NULL;
  if (!n->load) return;
  for (size_t i = 0; i < m->n_load; i++) {
    n->load[i].accelerator = strdup(m->load[i]->accelerator);
    n->load[i].queued = m->load[i]->queued;
    n->load[i].utilization = m->load[i]->utilization;
    n->n_load++;
  }
}

static bool fpgas_same(const gam_node *n, const Ember__Heartbeat *m) {
  if (n->n_fpgas != m->n_fpgas) return false;
  for (size_t i = 0; i < m->n_fpgas; i++) {
    const char *b = m->fpgas[i]->bitstream ? m->fpgas[i]->bitstream : "";
    if (!n->fpgas[i].platform || strcmp(n->fpgas[i].platform,
                                        m->fpgas[i]->platform) != 0 ||
        !n->fpgas[i].bitstream || strcmp(n->fpgas[i].bitstream, b) != 0)
      return false;
  }
  return true;
}

static void note_hb_time(gam_core *c, uint64_t ns) {
  static const uint64_t bounds[] = GAM_HB_BUCKETS_US;
  for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++)
    if (ns <= bounds[i] * 1000u) c->n.hb_buckets[i]++;
  c->n.hb_sum_ns += ns;
  c->n.hb_count++;
}

int gam_core_heartbeat(gam_core *c, const Ember__Heartbeat *m,
                       Ember__HeartbeatAck *ack, uint64_t *ack_needs,
                       char *err, size_t err_len) {
  uint64_t t0 = clock_now_ns();
  *ack_needs = 0;
  ember__heartbeat_ack__init(ack);
  ack->seq = m->seq;
  for (size_t i = 0; i < m->n_labels; i++)
    if (!gam_label_valid(m->labels[i]))
      return errbuf_printf(err, err_len, EMBER_EINVAL,
                           "label '%.80s' is not valid", m->labels[i]);
  pthread_mutex_lock(&c->lock);
  int rc = 0;
  gam_node *node = core_find_node(c, m->node);
  if (!node) {
    rc = errbuf_printf(err, err_len, EMBER_ENOTFOUND,
                       "node '%.128s' has not registered", m->node);
    goto out;
  }
  uint64_t now = now_ms();
  bool relabel = false;
  if (node->state == GAM_NODE_LOST) {
    gam_writer_node_set_state(c->w, node->id, GAM_NODE_UP, now);
    log_notice("node %s is back", node->id);
    node->state = GAM_NODE_UP;
    relabel = true;
  }
  if (!strlist_equal_to(&node->reported, m->labels, m->n_labels)) {
    gam_writer_node_set_reported(c->w, node->id,
                                 (const char *const *)m->labels, m->n_labels);
    strlist_assign(&node->reported, m->labels, m->n_labels);
    relabel = true;
  }
  if (!strlist_equal_to(&node->disabled, m->disabled, m->n_disabled)) {
    for (size_t i = 0; i < m->n_disabled; i++)
      if (!strlist_has(&node->disabled, m->disabled[i]))
        log_warn("node %s disabled %.80s", node->id, m->disabled[i]);
    strlist_assign(&node->disabled, m->disabled, m->n_disabled);
    relabel = true;
  }
  if (!strlist_equal_to(&node->platforms, m->platforms, m->n_platforms))
    strlist_assign(&node->platforms, m->platforms, m->n_platforms);
  if (!fpgas_same(node, m)) set_fpgas(node, m);
  set_load(node, m);
  node->last_seen_ms = now;
  node->last_seen_ns = t0;
  node->heartbeats++;
  c->n.heartbeats++;
  if (relabel) rc = core_node_relabel(c, node);
  uint64_t before = gam_writer_queued(c->w);
  if (rc == 0) core_place_on(c, node);
  /* the leases that ended on this node since its last ack */
  ack->interval_ms = (uint32_t)c->opt.heartbeat_interval_ms;
  ack->has_interval_ms = 1;
  ack->drained = node->drained;
  ack->has_drained = 1;
  if (node->n_ended) {
    ack->ended_leases = node->ended;
    ack->n_ended_leases = node->n_ended;
    ack->ended_expires_unix_ms = node->ended_expires;
    ack->n_ended_expires_unix_ms = node->n_ended;
    node->ended = node->ended_expires = NULL;
    node->n_ended = node->cap_ended = 0;
  }
  /* what changed before the placement: the node itself, or leases ended
   * (queued earlier, perhaps by an admin) that this ack reports */
  if (relabel || ack->n_ended_leases || ack->drained) *ack_needs = before;
out:
  note_hb_time(c, clock_now_ns() - t0);
  core_unlock(c);
  return rc;
}

void gam_core_ack_clear(Ember__HeartbeatAck *ack) {
  free(ack->ended_leases);
  free(ack->ended_expires_unix_ms);
  ack->ended_leases = ack->ended_expires_unix_ms = NULL;
  ack->n_ended_leases = ack->n_ended_expires_unix_ms = 0;
}

/* ------------------------------------------------------------ acquire */

/* Nodes offering label, counted up to enough: an Acquire only needs to
 * know whether its count is there, and walking every node for a label
 * most of them serve stalls the loop (10,000 nodes: ~3 ms). */
static unsigned nodes_offering(gam_core *c, const char *label,
                               unsigned enough) {
  unsigned n = 0;
  for (size_t i = 0; i < c->n_nodes && n < enough; i++)
    if (c->sched[i].available && strlist_has(&c->nodes[i]->effective, label))
      n++;
  return n;
}

int gam_core_acquire(gam_core *c, const Ember__Acquire *m, uint64_t *app_id,
                     char *err, size_t err_len) {
  if (!name_valid(m->app))
    return errbuf_printf(
        err, err_len, EMBER_EINVAL,
        "app names are 1..128 printable characters without spaces");
  if (!gam_label_valid(m->label))
    return errbuf_printf(err, err_len, EMBER_EINVAL,
                         "label '%.80s' is not valid", m->label);
  if (m->count == 0 || m->count > 4096)
    return errbuf_printf(err, err_len, EMBER_EINVAL, "count must be 1..4096");
  if (!m->has_app_key || m->app_key.len != 32)
    return errbuf_printf(
        err, err_len, EMBER_EINVAL,
        "app_key must be the app's 32-byte Ed25519 public key (protocol 3)");
  pthread_mutex_lock(&c->lock);
  int rc = 0;
  unsigned offering = nodes_offering(c, m->label, m->count);
  if (offering == 0) {
    rc = errbuf_printf(err, err_len, EMBER_ENOTFOUND,
                       "no node offers label '%s'", m->label);
    goto out;
  }
  if (m->count > offering) {
    rc = errbuf_printf(err, err_len, EMBER_EINVAL,
                       "%u nodes asked for, %u offer label '%s'", m->count,
                       offering, m->label);
    goto out;
  }
  gam_app *a = calloc(1, sizeof *a);
  if (!a || !(a->name = strdup(m->app)) || !(a->label = strdup(m->label))) {
    if (a) core_app_free(a);
    rc = errbuf_printf(err, err_len, EMBER_ENOMEM, "out of memory");
    goto out;
  }
  a->wanted = m->count;
  a->state = GAM_APP_PENDING;
  a->connected = true;
  memcpy(a->key, m->app_key.data, sizeof a->key);
  a->has_key = true;
  a->created_ms = now_ms();
  uint64_t wait = m->wait_ms ? m->wait_ms : c->opt.acquire_timeout_ms;
  a->deadline_ns = clock_now_ns() + wait * 1000000u;
  char detail[160];
  snprintf(detail, sizeof detail, "%s wants %u x %s", a->name, a->wanted,
           a->label);
  a->id = ++c->last_app_id;
  gam_writer_app_insert(c->w, a->id, a->name, a->label, a->wanted,
                        a->created_ms);
  gam_writer_event(c->w, a->created_ms, "app_pending", NULL, a->id, detail);
  gam_app **tail = &c->apps;
  while (*tail) tail = &(*tail)->next;
  *tail = a;
  *app_id = a->id;
  c->n.acquires++;
  log_info("app %llu (%s) asks for %u node(s) with %s",
           (unsigned long long)a->id, a->name, a->wanted, a->label);
out:
  core_unlock(c);
  return rc;
}

/* May this connection act on app_id? Its own app, or one whose key signs
 * m->proof over the connection's challenge. Anything else is the same
 * refusal whether the app exists or not, and costs the same signature
 * check: a stranger learns nothing about other apps. */
static bool release_allowed(gam_core *c, const gam_app *a,
                            const gam_requester *who,
                            const Ember__Release *m) {
  if (m->app_id != 0 && m->app_id == who->app_id) return true;
  if (!m->has_proof || !who->challenge) return false;
  const uint8_t *pk = a && a->has_key ? a->key : c->decoy_key;
  bool proved = lease_release_verify(pk, sizeof c->decoy_key, who->challenge,
                                     m->app_id, m->proof.data,
                                     m->proof.len) == 0;
  return proved && a && a->has_key;
}

int gam_core_release(gam_core *c, const gam_requester *who,
                     const Ember__Release *m, char *err, size_t err_len) {
  pthread_mutex_lock(&c->lock);
  int rc = 0;
  gam_app *a = core_find_app(c, m->app_id);
  if (!release_allowed(c, a, who, m)) {
    rc = errbuf_printf(err, err_len, EMBER_EDENIED,
                       "app %llu is not this connection's (another app's "
                       "Release needs the proof of its key)",
                       (unsigned long long)m->app_id);
    goto out;
  }
  if (!a) {  /* this connection's own app, ended meanwhile */
    rc = errbuf_printf(err, err_len, EMBER_ENOTFOUND, "app %llu has ended",
                       (unsigned long long)m->app_id);
    goto out;
  }
  if (m->n_lease_ids == 0) {
    rc = core_app_end(c, a, "released");
    goto out;
  }
  /* every id is checked before any lease ends: all or none */
  for (size_t i = 0; i < m->n_lease_ids; i++) {
    bool held = false;
    for (size_t j = 0; j < a->n_leases && !held; j++)
      held = a->leases[j]->id == m->lease_ids[i];
    if (!held) {
      rc = errbuf_printf(
          err, err_len, EMBER_ENOTFOUND, "app %llu holds no lease %llu",
          (unsigned long long)a->id, (unsigned long long)m->lease_ids[i]);
      goto out;
    }
  }
  for (size_t i = 0; i < m->n_lease_ids && rc == 0; i++)
    for (size_t j = 0; j < a->n_leases; j++)  /* a repeated id: gone */
      if (a->leases[j]->id == m->lease_ids[i]) {
        rc = core_lease_end(c, a->leases[j], "released");
        break;
      }
out:
  core_unlock(c);
  return rc;
}

bool gam_core_app_live(gam_core *c, uint64_t app_id) {
  pthread_mutex_lock(&c->lock);
  bool live = core_find_app(c, app_id) != NULL;
  core_unlock(c);
  return live;
}

void gam_core_app_disconnected(gam_core *c, uint64_t app_id) {
  pthread_mutex_lock(&c->lock);
  gam_app *a = core_find_app(c, app_id);
  if (a) {
    a->connected = false;
    a->gone_ns = clock_now_ns();
    if (a->state == GAM_APP_PENDING) core_app_end(c, a, "disconnected");
  }
  core_unlock(c);
}

/* --------------------------------------------------------------- tick */

static void lose_node(gam_core *c, gam_node *node) {
  uint64_t now = now_ms();
  gam_writer_node_set_state(c->w, node->id, GAM_NODE_LOST, now);
  gam_writer_event(c->w, now, "node_lost", node->id, 0, "missed heartbeats");
  log_warn("node %s lost: no heartbeat for %llu ms", node->id,
           (unsigned long long)(clock_now_ns() - node->last_seen_ns) / 1000000u);
  node->state = GAM_NODE_LOST;
  c->n.nodes_lost++;
  core_end_node_leases(c, node, NULL, "node lost");
  core_sync_sched(c, node);
}

static void expire_waits(gam_core *c, uint64_t now_ns) {
  for (gam_app *a = c->apps, *next; a; a = next) {
    next = a->next;
    if (a->state != GAM_APP_PENDING || now_ns < a->deadline_ns) continue;
    if (a->n_leases > 0) {
      log_notice("app %llu: wait over, placed on %zu of %u node(s)",
                 (unsigned long long)a->id, a->n_leases, a->wanted);
      core_send_allocation(c, a);
      continue;
    }
    Ember__Error e = EMBER__ERROR__INIT;
    e.code = EMBER_ETIMEDOUT;
    char msg[160];
    snprintf(msg, sizeof msg, "no node with label '%s' could be placed in time",
             a->label);
    e.message = msg;
    core_queue(c, a->id, EMBER__MSG_TYPE__MSG_ERROR, &e.base);
    core_app_end(c, a, "wait over");
  }
}

static void expire_leases(gam_core *c) {
  uint64_t now = now_ms();
  for (gam_app *a = c->apps; a; a = a->next)
    for (size_t i = 0; i < a->n_leases;) {
      if (a->leases[i]->expires_unix_ms <= now &&
          core_lease_end(c, a->leases[i], "expired") == 0)
        continue;  /* the array shrank */
      i++;
    }
}

/* Apps whose connection has been gone past app_grace: their leases end
 * (the NAMs hear of it in their next HeartbeatAck). */
static void end_gone_apps(gam_core *c, uint64_t now_ns) {
  uint64_t grace = c->opt.app_grace_ms * 1000000u;
  for (gam_app *a = c->apps, *next; a; a = next) {
    next = a->next;
    if (a->connected || a->state == GAM_APP_PENDING ||
        now_ns - a->gone_ns < grace)
      continue;
    log_notice("app %llu (%s): no connection for %llu ms, its %zu lease(s) "
               "end", (unsigned long long)a->id, a->name,
               (unsigned long long)((now_ns - a->gone_ns) / 1000000u),
               a->n_leases);
    core_app_end(c, a, "app gone");
  }
}

void gam_core_tick(gam_core *c) {
  pthread_mutex_lock(&c->lock);
  uint64_t now = clock_now_ns();
  uint64_t limit = c->opt.lost_after * c->opt.heartbeat_interval_ms * 1000000u;
  for (size_t i = 0; i < c->n_nodes; i++) {
    gam_node *node = c->nodes[i];
    if (node->state == GAM_NODE_UP && now - node->last_seen_ns > limit)
      lose_node(c, node);
  }
  expire_waits(c, now);
  end_gone_apps(c, now);
  expire_leases(c);
  core_unlock(c);
}

/* ------------------------------------------------------------- outbox */

gam_outbox_item *gam_core_take_outbox(gam_core *c) {
  pthread_mutex_lock(&c->lock);
  gam_outbox_item *items = c->out_head;
  c->out_head = c->out_tail = NULL;
  core_unlock(c);
  return items;
}

void gam_outbox_free(gam_outbox_item *items) {
  while (items) {
    gam_outbox_item *next = items->next;
    free(items->payload);
    free(items);
    items = next;
  }
}

/* ------------------------------------------------------------ life */

int gam_core_create(const gam_core_options *o, gam_store *store,
                    gam_core **out, char *err, size_t err_len) {
  gam_core *c = calloc(1, sizeof *c);
  if (!c) return errbuf_printf(err, err_len, EMBER_ENOMEM, "out of memory");
  pthread_mutex_init(&c->lock, NULL);
  c->opt = *o;
  c->store = store;
  c->w = o->writer;
  c->started_ns = clock_now_ns();
  /* a key no app has, checked against when a Release names an app that
   * is not there (release_allowed) */
  uint8_t decoy_sk[LEASE_APP_SK_BYTES];
  if (lease_app_keypair(c->decoy_key, decoy_sk) != 0) {
    gam_core_destroy(c);
    return errbuf_printf(err, err_len, EMBER_EINTERNAL,
                         "libsodium failed to start");
  }
  sodium_memzero(decoy_sk, sizeof decoy_sk);
  c->version = strdup(o->version ? o->version : "");
  if (o->policy.n_rules) {
    c->rules = calloc(o->policy.n_rules, sizeof *c->rules);
    for (size_t i = 0; c->rules && i < o->policy.n_rules; i++) {
      c->rules[i].label = strdup(o->policy.rules[i].label);
      c->rules[i].node = strdup(o->policy.rules[i].node);
      c->n_rules++;
    }
  }
  c->opt.policy.rules = c->rules;
  c->opt.policy.n_rules = c->n_rules;
  c->opt.version = c->version;
  if (!c->version || c->n_rules != o->policy.n_rules) {
    gam_core_destroy(c);
    return errbuf_printf(err, err_len, EMBER_ENOMEM, "out of memory");
  }
  int rc = core_load(c, err, err_len);
  if (rc) {
    gam_core_destroy(c);
    return rc;
  }
  gam_writer_publish(c->w);  /* what the load changed (pending apps end) */
  *out = c;
  return 0;
}

void gam_core_set_wake(gam_core *c, void (*wake)(void *user), void *user) {
  pthread_mutex_lock(&c->lock);
  c->wake = wake;
  c->wake_user = user;
  core_unlock(c);
}

uint64_t gam_core_last_change(gam_core *c) {
  return gam_writer_queued(c->w);
}

void gam_core_destroy(gam_core *c) {
  if (!c) return;
  for (size_t i = 0; i < c->n_nodes; i++) node_free(c->nodes[i]);
  free(c->nodes);
  free(c->sched);
  while (c->apps) {
    gam_app *next = c->apps->next;
    core_app_free(c->apps);
    c->apps = next;
  }
  gam_outbox_free(c->out_head);
  for (size_t i = 0; i < c->n_rules; i++) {
    free((char *)c->rules[i].label);
    free((char *)c->rules[i].node);
  }
  free(c->rules);
  free(c->version);
  pthread_mutex_destroy(&c->lock);
  free(c);
}
