/* lease_proof.c - app keys and the proofs that bind leases to them
 * (lease_proof.h). */
#include "lease_proof.h"

#include <string.h>

#include <sodium.h>

#include "ember/ember_errors.h"

static const char domain[] = "ember-lease-proof";

#define MSG_BYTES (sizeof domain - 1 + LEASE_CHALLENGE_BYTES + 8)

static void message(const uint8_t challenge[LEASE_CHALLENGE_BYTES],
                    uint64_t lease_id, uint8_t out[MSG_BYTES]) {
  memcpy(out, domain, sizeof domain - 1);
  memcpy(out + sizeof domain - 1, challenge, LEASE_CHALLENGE_BYTES);
  uint8_t *id = out + sizeof domain - 1 + LEASE_CHALLENGE_BYTES;
  for (int i = 0; i < 8; i++) id[i] = (uint8_t)(lease_id >> (8 * i));
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
  uint8_t msg[MSG_BYTES];
  message(challenge, lease_id, msg);
  crypto_sign_detached(sig, NULL, msg, sizeof msg, sk);
}

int lease_proof_verify(const uint8_t *pk, size_t pk_len,
                       const uint8_t challenge[LEASE_CHALLENGE_BYTES],
                       uint64_t lease_id, const uint8_t *sig, size_t sig_len) {
  if (!pk || pk_len != LEASE_APP_PK_BYTES || !sig ||
      sig_len != LEASE_PROOF_BYTES)
    return EMBER_ELEASE;
  uint8_t msg[MSG_BYTES];
  message(challenge, lease_id, msg);
  return crypto_sign_verify_detached(sig, msg, sizeof msg, pk) == 0
             ? 0 : EMBER_ELEASE;
}
