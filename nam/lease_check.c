/* lease_check.c - TCP clients' leases: checked at Hello, dropped at expiry
 * or when the GAM ends them (see lease_check.h). */
#include "lease_check.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "lease.h"
#include "lease_proof.h"
#include "log.h"
#include "uthash.h"

/* How often connections are checked for an expired lease: a client keeps
 * its connection at most this long past its lease. */
#define EXPIRY_CHECK_MS 250
/* An ended lease is remembered until it would have expired (a lease is
 * refused anyway after that), so that its clients cannot come back. Past
 * this many at once (a GAM gone wrong) more are not remembered. */
#define ENDED_MAX ((unsigned)1 << 20)
/* How long an ended lease whose expiry the GAM did not say is remembered:
 * lease_ttl's upper bound. */
#define ENDED_DEFAULT_MS (UINT64_C(30) * 86400 * 1000)

typedef struct ended_lease {
  uint64_t id;
  uint64_t expires_unix_ms;
  UT_hash_handle hh;
} ended_lease;

struct nam_lease_check {
  nam_server *srv;
  lease_key key;
  char node[256];
  nam_label_served_fn served;
  void *served_user;
  uv_timer_t expiry;
  ended_lease *ended;      /* by id (uthash) */
  int ended_full_logged;
};

/* Ended leases past their expiry need no remembering. */
static void prune_ended(nam_lease_check *lc, uint64_t now) {
  ended_lease *e, *tmp;
  HASH_ITER(hh, lc->ended, e, tmp) {
    if (e->expires_unix_ms > now) continue;
    HASH_DEL(lc->ended, e);
    free(e);
  }
}

static void on_expiry_check(uv_timer_t *t) {
  nam_lease_check *lc = t->data;
  uint64_t now = lease_now_unix_ms();
  nam_server_drop_expired(lc->srv, now);
  prune_ended(lc, now);
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
  ended_lease *e, *tmp;
  HASH_ITER(hh, lc->ended, e, tmp) {
    HASH_DEL(lc->ended, e);
    free(e);
  }
  free(lc);
}

void nam_lease_check_close(nam_server *s) {
  nam_lease_check *lc = nam_server_lease_check(s);
  if (!lc) return;
  nam_server_set_lease_check(s, NULL);
  uv_close((uv_handle_t *)&lc->expiry, on_closed);
}

static int was_ended(const nam_lease_check *lc, uint64_t id) {
  ended_lease *e = NULL;
  HASH_FIND(hh, lc->ended, &id, sizeof id, e);
  return e != NULL;
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
  } else if (!body->has_app_key || body->app_key.len != LEASE_APP_PK_BYTES) {
    snprintf(why, why_len, "lease: %" PRIu64 " is bound to no app key",
             body->lease_id);
  } else if (nam_conn_set_lease(c, body->lease_id, body->expires_unix_ms,
                                body->label, body->app_key.data) != 0) {
    snprintf(why, why_len, "lease: no random bytes for a challenge");
  } else {
    rc = 0;
    log_info("client %s presents lease %" PRIu64 " (app %s, label %s); "
             "challenged for the app's key", nam_conn_peer(c),
             body->lease_id, body->app, body->label);
  }
  ember__lease_body__free_unpacked(body, NULL);
  return rc;
}

static void remember(nam_lease_check *lc, uint64_t id, uint64_t expires) {
  if (was_ended(lc, id)) return;
  if (HASH_COUNT(lc->ended) >= ENDED_MAX) {
    if (!lc->ended_full_logged++)
      log_warn("%u ended leases remembered: more are not (until some "
               "expire)", ENDED_MAX);
    return;
  }
  ended_lease *e = malloc(sizeof *e);
  if (!e) {
    log_warn("out of memory: ended lease %" PRIu64 " not remembered", id);
    return;
  }
  e->id = id;
  e->expires_unix_ms = expires;
  HASH_ADD(hh, lc->ended, id, sizeof e->id, e);
}

void nam_leases_end(nam_server *s, const uint64_t *ids,
                    const uint64_t *expires, size_t n_expires, size_t n) {
  nam_lease_check *lc = nam_server_lease_check(s);
  uint64_t now = lease_now_unix_ms();
  for (size_t i = 0; i < n; i++) {
    if (lc) {
      uint64_t until = i < n_expires ? expires[i] : now + ENDED_DEFAULT_MS;
      if (until > now) remember(lc, ids[i], until);
    }
    nam_server_drop_lease(s, ids[i]);
  }
}

