/*
 * node_auth.h - a NAM proves to ember-gam that it holds the cluster key
 * (the lease key, proto/lease.h) before it may register a node: the GAM's
 * Welcome carries a fresh random challenge, and Register.auth is
 *
 *   HMAC-SHA256(cluster key, "ember-register" || challenge || node)
 *
 * The challenge is new on every connection, so a recorded Register cannot
 * be replayed, and the node name is inside the MAC, so a NAM's answer
 * cannot register another name.
 */
#ifndef EMBER_PROTO_NODE_AUTH_H
#define EMBER_PROTO_NODE_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "lease.h"

#define NODE_AUTH_CHALLENGE_BYTES 32
#define NODE_AUTH_MAC_BYTES 32

/* node_auth_challenge - fill out with random bytes. 0, or EMBER_EINTERNAL
 * when libsodium cannot start. */
int node_auth_challenge(uint8_t out[NODE_AUTH_CHALLENGE_BYTES]);

/* node_auth_mac - the Register.auth for node answering challenge. */
void node_auth_mac(const lease_key *key,
                   const uint8_t challenge[NODE_AUTH_CHALLENGE_BYTES],
                   const char *node, uint8_t mac[NODE_AUTH_MAC_BYTES]);

/* node_auth_verify - 0 when mac (mac_len bytes, from the wire) is the
 * right answer, else EMBER_EDENIED. Constant time. */
int node_auth_verify(const lease_key *key,
                     const uint8_t challenge[NODE_AUTH_CHALLENGE_BYTES],
                     const char *node, const uint8_t *mac, size_t mac_len);

#endif
