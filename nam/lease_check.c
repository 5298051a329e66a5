/* lease_check.c - TCP clients' leases: checked at Hello, dropped at expiry
 * or when the GAM ends them (see lease_check.h). */
#include "lease_check.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "lease.h"
#include "log.h"

/* How often connections are checked for an expired lease: a client keeps
 * its connection at most this long past its lease. */
#define EXPIRY_CHECK_MS 250
/* Ended lease ids remembered, so that their clients cannot come back (a
 * lease is refused anyway once it expires; this covers the time before). */
#define ENDED_REMEMBERED 1024

struct nam_lease_check {
  nam_server *srv;
  lease_key key;
  char node[256];
  nam_label_served_fn served;
  void *served_user;
  uv_timer_t expiry;
  uint64_t ended[ENDED_REMEMBERED]; /* a ring */
  size_t n_ended, next_ended;
};

static void on_expiry_check(uv_timer_t *t) {
  nam_lease_check *lc = t->data;
  nam_server_drop_expired(lc->srv, lease_now_unix_ms());
}

int nam_lease_check_start(nam_server *s, const char *key_path,
                          const char *node, nam_label_served_fn served,
                          void *served_user, char *err, size_t err_len) {
  nam_lease_check *lc = calloc(1, sizeof *lc);
  if (!lc) return EMBER_ENOMEM;
  int rc = lease_key_load(key_path, &lc->key, err, err_len);
  if (rc) {
    free(lc);
    return rc;
  }
  lc->srv = s;
  snprintf(lc->node, sizeof lc->node, "%s", node);
  lc->served = served;
  lc->served_user = served_user;
  uv_timer_init(nam_server_loop(s), &lc->expiry);
  lc->expiry.data = lc;
  uv_timer_start(&lc->expiry, on_expiry_check, EXPIRY_CHECK_MS,
                 EXPIRY_CHECK_MS);
  nam_server_set_lease_check(s, lc);
  return 0;
}

static void on_closed(uv_handle_t *h) {
  nam_lease_check *lc = h->data;
  /* the key stays in memory no longer than needed */
  memset(&lc->key, 0, sizeof lc->key);
  free(lc);
}

void nam_lease_check_close(nam_server *s) {
  nam_lease_check *lc = nam_server_lease_check(s);
  if (!lc) return;
  nam_server_set_lease_check(s, NULL);
  uv_close((uv_handle_t *)&lc->expiry, on_closed);
}

static int was_ended(const nam_lease_check *lc, uint64_t id) {
  for (size_t i = 0; i < lc->n_ended; i++)
    if (lc->ended[i] == id) return 1;
  return 0;
}

int nam_lease_admit(nam_server *s, nam_conn *c, const Ember__Hello *hello,
                    char *why, size_t why_len) {
  nam_lease_check *lc = nam_server_lease_check(s);
  if (!lc) return 0;
  if (!hello->lease) {
    snprintf(why, why_len, "lease: none (a TCP client needs a lease from the "
             "GAM)");
    return EMBER_ELEASE;
  }
  Ember__LeaseBody *body = NULL;
  char reason[128] = "";
  if (lease_verify(&lc->key, hello->lease, lease_now_unix_ms(), &body, reason,
                   sizeof reason) != 0) {
    snprintf(why, why_len, "lease: %s", reason);
    return EMBER_ELEASE;
  }
  int rc = EMBER_ELEASE;
  if (strcmp(body->node, lc->node) != 0) {
    snprintf(why, why_len, "lease: for node %s, this is %s", body->node,
             lc->node);
  } else if (!lc->served(lc->served_user, body->label)) {
    snprintf(why, why_len, "lease: label %s not served here", body->label);
  } else if (was_ended(lc, body->lease_id)) {
    snprintf(why, why_len, "lease: %" PRIu64 " ended", body->lease_id);
  } else {
    rc = 0;
    nam_conn_set_lease(c, body->lease_id, body->expires_unix_ms, body->label);
    log_info("client %s holds lease %" PRIu64 " (app %s, label %s)",
             nam_conn_peer(c), body->lease_id, body->app, body->label);
  }
  ember__lease_body__free_unpacked(body, NULL);
  return rc;
}

void nam_leases_end(nam_server *s, const uint64_t *ids, size_t n) {
  nam_lease_check *lc = nam_server_lease_check(s);
  for (size_t i = 0; i < n; i++) {
    if (lc && !was_ended(lc, ids[i])) {
      lc->ended[lc->next_ended] = ids[i];
      lc->next_ended = (lc->next_ended + 1) % ENDED_REMEMBERED;
      if (lc->n_ended < ENDED_REMEMBERED) lc->n_ended++;
    }
    nam_server_drop_lease(s, ids[i]);
  }
}
