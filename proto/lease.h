/*
 * lease.h - leases: the GAM's signed grant of a node's label to an app.
 *
 * A lease is a packed LeaseBody and an HMAC-SHA256 of those exact bytes
 * under the cluster key, which the GAM and every NAM share (libsodium's
 * crypto_auth_hmacsha256). The NAM checks the MAC before it decodes the
 * body, so a forged or altered lease is never parsed.
 *
 * The body names the app's public key (proto/lease_proof.h): a NAM admits
 * a lease only from the holder of the matching secret key. The same key
 * proves a NAM to the GAM (proto/node_auth.h).
 *
 * The cluster key file holds 64 hex digits (32 bytes) and a newline; it
 * must not be readable by group or others.
 */
#ifndef EMBER_PROTO_LEASE_H
#define EMBER_PROTO_LEASE_H

#include <stddef.h>
#include <stdint.h>

#include "proto/ember.pb-c.h"

#define LEASE_KEY_BYTES 32

typedef struct lease_key {
  uint8_t bytes[LEASE_KEY_BYTES];
} lease_key;

/* lease_key_load - read the key file. EMBER_EIO (cannot read),
 * EMBER_EDENIED (group/other may read it) or EMBER_EFORMAT (not 64 hex
 * digits), with the reason in err. */
int lease_key_load(const char *path, lease_key *out, char *err, size_t err_len);

/* lease_key_create - write a fresh random key to path (mode 0600, refusing
 * to overwrite). For setup scripts and tests. */
int lease_key_create(const char *path, char *err, size_t err_len);

/* lease_sign - pack body and sign it. out's body and mac are malloc'd:
 * free them with lease_clear. 0 or EMBER_ENOMEM. */
int lease_sign(const lease_key *key, const Ember__LeaseBody *body,
               Ember__Lease *out);
void lease_clear(Ember__Lease *lease);

/* lease_verify - check the MAC, decode the body and check it has not
 * expired at now_unix_ms. 0 and the body in *body_out (free with
 * ember__lease_body__free_unpacked(b, NULL)), or EMBER_ELEASE with the
 * reason ("bad signature", "expired", "malformed") in why. */
int lease_verify(const lease_key *key, const Ember__Lease *lease,
                 uint64_t now_unix_ms, Ember__LeaseBody **body_out, char *why,
                 size_t why_len);

/* Wall-clock milliseconds since the epoch: leases cross machines. */
uint64_t lease_now_unix_ms(void);

#endif
