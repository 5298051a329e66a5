/*
 * core_admin.c - what admins change (core_admin.h): labels and draining.
 * The store is updated first; leases a change ends are told to their apps.
 */
#include <stdio.h>
#include <string.h>

#include "core_internal.h"
#include "ember/ember_errors.h"
#include "log.h"

static gam_node *find_or_say(gam_core *c, const char *id, char *err,
                             size_t err_len) {
  gam_node *n = core_find_node(c, id);
  if (!n && err_len) snprintf(err, err_len, "no node '%.128s'", id);
  return n;
}

/* An admin's change is answered once its commit is on disk; the core
 * lock is not held meanwhile. */
static int unlock_when_durable(gam_core *c, int rc, char *err,
                               size_t err_len) {
  uint64_t seq = gam_store_commit_seq(c->store);
  pthread_mutex_unlock(&c->lock);
  if (rc == 0 && gam_syncer_wait(c->opt.syncer, seq) != 0) {
    snprintf(err, err_len, "state store: flushing the log failed");
    rc = EMBER_EIO;
  }
  return rc;
}

static int change_label(gam_core *c, const char *node_id, const char *label,
                        bool on, char *err, size_t err_len) {
  if (!gam_label_valid(label)) {
    snprintf(err, err_len, "label '%.80s' is not valid: 1..64 characters of "
             "[A-Za-z0-9_.@-]", label);
    return EMBER_EINVAL;
  }
  pthread_mutex_lock(&c->lock);
  int rc = 0;
  gam_node *n = find_or_say(c, node_id, err, err_len);
  if (!n) {
    rc = EMBER_ENOTFOUND;
    goto out;
  }
  uint64_t now = lease_now_unix_ms();
  /* an override that says what the NAM reports anyway is dropped */
  bool reported = strlist_has(&n->reported, label);
  bool clear = on == reported;
  if (gam_store_begin(c->store) != 0 ||
      (clear ? gam_store_label_clear(c->store, n->id, label)
             : gam_store_label_override(c->store, n->id, label, on)) != 0 ||
      gam_store_event(c->store, now, on ? "label_added" : "label_removed",
                      n->id, 0, label) != 0 ||
      gam_store_commit(c->store) != 0) {
    gam_store_rollback(c->store);
    rc = core_store_failed(c, "label", err, err_len);
    goto out;
  }
  strlist_remove(on ? &n->removed : &n->added, label);
  if (!clear && strlist_add(on ? &n->added : &n->removed, label) < 0) {
    rc = EMBER_ENOMEM;
    goto out;
  }
  log_notice("admin: label %s %s node %s", label, on ? "added to" : "removed from",
             n->id);
  rc = core_node_relabel(c, n);
out:
  return unlock_when_durable(c, rc, err, err_len);
}

int gam_core_label_add(gam_core *c, const char *node, const char *label,
                       char *err, size_t err_len) {
  return change_label(c, node, label, true, err, err_len);
}

int gam_core_label_remove(gam_core *c, const char *node, const char *label,
                          char *err, size_t err_len) {
  return change_label(c, node, label, false, err, err_len);
}

int gam_core_set_drained(gam_core *c, const char *node_id, bool drained,
                         char *err, size_t err_len) {
  pthread_mutex_lock(&c->lock);
  int rc = 0;
  gam_node *n = find_or_say(c, node_id, err, err_len);
  if (!n) {
    rc = EMBER_ENOTFOUND;
    goto out;
  }
  if (n->drained == drained) goto out;
  uint64_t now = lease_now_unix_ms();
  if (gam_store_begin(c->store) != 0 ||
      gam_store_node_set_drained(c->store, n->id, drained) != 0 ||
      gam_store_event(c->store, now, drained ? "node_drained" : "node_undrained",
                      n->id, 0, "admin") != 0 ||
      gam_store_commit(c->store) != 0) {
    gam_store_rollback(c->store);
    rc = core_store_failed(c, "drain", err, err_len);
    goto out;
  }
  n->drained = drained;
  log_notice("admin: node %s %s", n->id, drained ? "drained" : "undrained");
  core_sync_sched(c, n);
  if (drained) rc = core_end_node_leases(c, n, NULL, "drained");
out:
  return unlock_when_durable(c, rc, err, err_len);
}
