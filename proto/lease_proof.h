/*
 * lease_proof.h - binding a lease to the app that holds it. libember makes
 * an Ed25519 key pair (libsodium crypto_sign) for each ember_cluster_acquire
 * and sends the public key in Acquire; the GAM puts it in every LeaseBody
 * it signs. A NAM that gets a lease in a Hello answers with a Welcome that
 * carries a random challenge, and the client must answer with a LeaseProof:
 * the signature under the app's secret key of
 *
 *   "ember-lease-proof" || challenge || lease id (8 bytes, little-endian)
 *
 * so a lease copied to another process, or read off the wire, is useless
 * without the key that never leaves the app.
 *
 * The same key proves to the GAM that a Release on a connection other than
 * the one whose Acquire made the app comes from the app (its connection
 * broke, and it gives its leases back within app_grace): Release.proof is
 * the signature of
 *
 *   "ember-release" || challenge || app id (8 bytes, little-endian)
 *
 * where challenge is the one in the GAM's Welcome on that connection.
 */
#ifndef EMBER_PROTO_LEASE_PROOF_H
#define EMBER_PROTO_LEASE_PROOF_H

#include <stddef.h>
#include <stdint.h>

#define LEASE_APP_PK_BYTES 32   /* crypto_sign_PUBLICKEYBYTES */
#define LEASE_APP_SK_BYTES 64   /* crypto_sign_SECRETKEYBYTES */
#define LEASE_PROOF_BYTES 64    /* crypto_sign_BYTES */
#define LEASE_CHALLENGE_BYTES 32

/* lease_app_keypair - a fresh key pair. 0, or EMBER_EINTERNAL when
 * libsodium cannot start. */
int lease_app_keypair(uint8_t pk[LEASE_APP_PK_BYTES],
                      uint8_t sk[LEASE_APP_SK_BYTES]);

/* lease_challenge - random bytes for a Welcome. 0 or EMBER_EINTERNAL. */
int lease_challenge(uint8_t out[LEASE_CHALLENGE_BYTES]);

/* lease_proof_sign - the LeaseProof signature for lease_id answering
 * challenge. */
void lease_proof_sign(const uint8_t sk[LEASE_APP_SK_BYTES],
                      const uint8_t challenge[LEASE_CHALLENGE_BYTES],
                      uint64_t lease_id, uint8_t sig[LEASE_PROOF_BYTES]);

/* lease_proof_verify - 0 when sig (from the wire, sig_len bytes) is the
 * right answer under pk (from the signed LeaseBody, pk_len bytes), else
 * EMBER_ELEASE. */
int lease_proof_verify(const uint8_t *pk, size_t pk_len,
                       const uint8_t challenge[LEASE_CHALLENGE_BYTES],
                       uint64_t lease_id, const uint8_t *sig, size_t sig_len);

/* lease_release_sign - the Release.proof for app_id on the GAM connection
 * whose Welcome carried challenge. */
void lease_release_sign(const uint8_t sk[LEASE_APP_SK_BYTES],
                        const uint8_t challenge[LEASE_CHALLENGE_BYTES],
                        uint64_t app_id, uint8_t sig[LEASE_PROOF_BYTES]);

/* lease_release_verify - 0 when sig (from the wire, sig_len bytes) is that
 * proof under pk (the app's key from its Acquire), else EMBER_EDENIED. */
int lease_release_verify(const uint8_t *pk, size_t pk_len,
                         const uint8_t challenge[LEASE_CHALLENGE_BYTES],
                         uint64_t app_id, const uint8_t *sig, size_t sig_len);

#endif
