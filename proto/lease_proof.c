/* lease_proof.c - app keys and the proofs that bind leases to them
 * (lease_proof.h). */
#include "lease_proof.h"

#include <string.h>

#include <sodium.h>

#include "ember/ember_errors.h"

/* What each proof signs starts with its own domain: a LeaseProof's
 * signature is never a Release's, or the other way round. */
static const char lease_domain[] = "ember-lease-proof";
static const char release_domain[] = "ember-release";

#define MSG_MAX (sizeof lease_domain - 1 + LEASE_CHALLENGE_BYTES + 8)

/* domain || challenge || id (8 bytes, little-endian); its length. */
static size_t message(const char *domain,
                      const uint8_t challenge[LEASE_CHALLENGE_BYTES],
                      uint64_t id, uint8_t out[MSG_MAX]) {
  size_t d = strlen(domain);
  memcpy(out, domain, d);
  memcpy(out + d, challenge, LEASE_CHALLENGE_BYTES);
  uint8_t *p = out + d + LEASE_CHALLENGE_BYTES;
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(id >> (8 * i));
  return d + LEASE_CHALLENGE_BYTES + 8;
}

static void sign(const char *domain, const uint8_t sk[LEASE_APP_SK_BYTES],
                 const uint8_t challenge[LEASE_CHALLENGE_BYTES], uint64_t id,
                 uint8_t sig[LEASE_PROOF_BYTES]) {
  uint8_t msg[MSG_MAX];
  size_t n = message(domain, challenge, id, msg);
  crypto_sign_detached(sig, NULL, msg, n, sk);
}

static int verify(const char *domain, const uint8_t *pk, size_t pk_len,
                  const uint8_t challenge[LEASE_CHALLENGE_BYTES], uint64_t id,
                  const uint8_t *sig, size_t sig_len) {
  if (!pk || pk_len != LEASE_APP_PK_BYTES || !sig ||
      sig_len != LEASE_PROOF_BYTES)
    return -1;
  uint8_t msg[MSG_MAX];
  size_t n = message(domain, challenge, id, msg);
  return crypto_sign_verify_detached(sig, msg, n, pk) == 0 ? 0 : -1;
}

int lease_app_keypair(uint8_t pk[LEASE_APP_PK_BYTES],
                      uint8_t sk[LEASE_APP_SK_BYTES]) {
  if (sodium_init() < 0) return EMBER_EINTERNAL;
  crypto_sign_keypair(pk, sk);
  return 0;
}

int lease_challenge(uint8_t out[LEASE_CHALLENGE_BYTES]) {
  if (sodium_init() < 0) return EMBER_EINTERNAL;
  randombytes_buf(out, LEASE_CHALLENGE_BYTES);
  return 0;
}

void lease_proof_sign(const uint8_t sk[LEASE_APP_SK_BYTES],
                      const uint8_t challenge[LEASE_CHALLENGE_BYTES],
                      uint64_t lease_id, uint8_t sig[LEASE_PROOF_BYTES]) {
  sign(lease_domain, sk, challenge, lease_id, sig);
}

int lease_proof_verify(const uint8_t *pk, size_t pk_len,
                       const uint8_t challenge[LEASE_CHALLENGE_BYTES],
                       uint64_t lease_id, const uint8_t *sig, size_t sig_len) {
  return verify(lease_domain, pk, pk_len, challenge, lease_id, sig, sig_len)
             ? EMBER_ELEASE : 0;
}

void lease_release_sign(const uint8_t sk[LEASE_APP_SK_BYTES],
                        const uint8_t challenge[LEASE_CHALLENGE_BYTES],
                        uint64_t app_id, uint8_t sig[LEASE_PROOF_BYTES]) {
  sign(release_domain, sk, challenge, app_id, sig);
}

int lease_release_verify(const uint8_t *pk, size_t pk_len,
                         const uint8_t challenge[LEASE_CHALLENGE_BYTES],
                         uint64_t app_id, const uint8_t *sig, size_t sig_len) {
  return verify(release_domain, pk, pk_len, challenge, app_id, sig, sig_len)
             ? EMBER_EDENIED : 0;
}
