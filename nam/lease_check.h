/*
 * lease_check.h - the NAM's side of leases (proto/lease.h): a TCP client
 * must present, in its Hello, a lease the GAM signed under the cluster key,
 * unexpired, for this node and for a label the node serves now, bound to
 * an app key; the Welcome then carries a challenge and the client must
 * prove with a LeaseProof that it holds the app's secret key
 * (proto/lease_proof.h) before the lease is its own. The connection
 * remembers its lease; when the lease expires, or the GAM says
 * it ended (HeartbeatAck.ended_leases), the client gets an Error ELEASE and
 * is disconnected, and an ended lease is refused if it comes back.
 * Unix-socket clients are trusted through the socket's group, as before.
 *
 * Threads: the loop thread only.
 */
#ifndef EMBER_NAM_LEASE_CHECK_H
#define EMBER_NAM_LEASE_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include "proto/ember.pb-c.h"
#include "server.h"

typedef struct nam_lease_check nam_lease_check;

/* Is label served by this node now (configured and not disabled)? */
typedef int (*nam_label_served_fn)(void *user, const char *label);

/*
 * nam_lease_check_start - load the cluster key from key_path and make s
 * check the leases of its TCP clients from now on (node: this node's name,
 * the one leases must name). Returns 0, or the error of lease_key_load
 * (EMBER_EIO, EMBER_EDENIED, EMBER_EFORMAT) or EMBER_ENOMEM, with the
 * reason in err.
 */
int nam_lease_check_start(nam_server *s, const char *key_path,
                          const char *node, nam_label_served_fn served,
                          void *served_user, char *err, size_t err_len);

/* nam_lease_check_close - stop checking; the handle is freed by the loop.
 * A server without lease checking: no-op. */
void nam_lease_check_close(nam_server *s);

/*
 * nam_lease_admit - conn.c, on a TCP client's Hello: 0 when s checks no
 * leases or hello carries a valid one (pending on c until its proof:
 * nam_conn_lease_challenge, nam_conn_lease_prove), else
 * EMBER_ELEASE with the message for the client in why ("lease: bad
 * signature", "lease: expired", "lease: for node X, this is Y", "lease:
 * label L not served here", ...).
 */
int nam_lease_admit(nam_server *s, nam_conn *c, const Ember__Hello *hello,
                    char *why, size_t why_len);

/* nam_leases_end - the GAM ended these leases: their clients get Error
 * ELEASE "lease N ended" and are disconnected, and the ids are refused
 * until they would have expired (expires[i], parallel to ids for the first
 * n_expires; past those, lease_ttl's upper bound), kept in a table pruned
 * as they expire. */
void nam_leases_end(nam_server *s, const uint64_t *ids,
                    const uint64_t *expires, size_t n_expires, size_t n);


#endif
