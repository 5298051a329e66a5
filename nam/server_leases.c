/* server_leases.c - the leases that TCP clients' connections hold: what
 * lease_check.c and the GAM link see of them (server.h). */
#include "server_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "lease_proof.h"

void nam_server_set_lease_check(nam_server *s, struct nam_lease_check *lc) {
  s->leases = lc;
}

struct nam_lease_check *nam_server_lease_check(const nam_server *s) {
  return s->leases;
}

int nam_conn_set_lease(nam_conn *c, uint64_t lease_id,
                       uint64_t expires_unix_ms, const char *label,
                       const uint8_t app_key[32]) {
  if (lease_challenge(c->lease_challenge) != 0) return EMBER_EINTERNAL;
  c->lease_proof_due = 1;
  c->lease_id = lease_id;
  c->lease_expires_unix_ms = expires_unix_ms;
  snprintf(c->lease_label, sizeof c->lease_label, "%s", label);
  memcpy(c->lease_app_key, app_key, sizeof c->lease_app_key);
  return 0;
}

const uint8_t *nam_conn_lease_challenge(const nam_conn *c) {
  return c->lease_proof_due ? c->lease_challenge : NULL;
}

int nam_conn_lease_prove(nam_conn *c, const Ember__LeaseProof *p) {
  if (!c->lease_proof_due ||
      lease_proof_verify(c->lease_app_key, sizeof c->lease_app_key,
                         c->lease_challenge, c->lease_id, p->signature.data,
                         p->signature.len) != 0)
    return EMBER_ELEASE;
  c->lease_proof_due = 0;
  c->has_lease = 1;
  return 0;
}

const char *nam_conn_lease_label(const nam_conn *c) {
  return c->has_lease ? c->lease_label : NULL;
}

const char *nam_conn_peer(const nam_conn *c) { return c->peer; }

size_t nam_server_leases_in_use(const nam_server *s, uint64_t *ids,
                                size_t max) {
  size_t n = 0;
  for (nam_conn *c = s->conns; c && n < max; c = c->next)
    if (c->has_lease && !c->closing) {
      int seen = 0; /* one app may hold several connections on a lease */
      for (size_t i = 0; i < n; i++) seen |= ids[i] == c->lease_id;
      if (!seen) ids[n++] = c->lease_id;
    }
  return n;
}

/* c's lease is over: tell it why and close it. */
static void drop(nam_conn *c, const char *how) {
  char detail[96];
  snprintf(detail, sizeof detail, "lease %" PRIu64 " %s", c->lease_id, how);
  c->has_lease = c->lease_proof_due = 0;
  nam_conn_refuse(c, EMBER_ELEASE, detail);
}

void nam_server_drop_lease(nam_server *s, uint64_t lease_id) {
  nam_conn *next;
  for (nam_conn *c = s->conns; c; c = next) {
    next = c->next; /* refusing may close c */
    if ((c->has_lease || c->lease_proof_due) && !c->closing &&
        c->lease_id == lease_id)
      drop(c, "ended");
  }
}

void nam_server_drop_expired(nam_server *s, uint64_t now_unix_ms) {
  nam_conn *next;
  for (nam_conn *c = s->conns; c; c = next) {
    next = c->next;
    if ((c->has_lease || c->lease_proof_due) && !c->closing &&
        now_unix_ms >= c->lease_expires_unix_ms)
      drop(c, "expired");
  }
}
