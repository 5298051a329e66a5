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
  uint64_t seq = gam_writer_queued(c->w);
  core_unlock(c);
  if (rc == 0 && gam_writer_wait(c->w, seq) != 0) {
    /* the GAM stops now (server.c): the caller may try again later */
    char why[300] = "";
    gam_writer_failed(c->w, why, sizeof why);
    snprintf(err, err_len, "the change was not saved (%s); ember-gam is "
             "stopping, to restart from its database", why);
    rc = EMBER_ESHUTDOWN;
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
  if (clear) gam_writer_label_clear(c->w, n->id, label);
  else gam_writer_label_override(c->w, n->id, label, on);
  gam_writer_event(c->w, now, on ? "label_added" : "label_removed", n->id, 0,
                   label);
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
  gam_writer_node_set_drained(c->w, n->id, drained);
  gam_writer_event(c->w, now, drained ? "node_drained" : "node_undrained",
                   n->id, 0, "admin");
  n->drained = drained;
  log_notice("admin: node %s %s", n->id, drained ? "drained" : "undrained");
  core_sync_sched(c, n);
  if (drained) rc = core_end_node_leases(c, n, NULL, "drained");
out:
  return unlock_when_durable(c, rc, err, err_len);
}
