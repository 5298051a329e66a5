/* node_auth.c - a NAM's answer to the GAM's challenge (node_auth.h). */
#include "node_auth.h"

#include <string.h>

#include <sodium.h>

#include "ember/ember_errors.h"

/* Keeps these MACs apart from lease MACs made with the same key. */
static const char domain[] = "ember-register";

int node_auth_challenge(uint8_t out[NODE_AUTH_CHALLENGE_BYTES]) {
  /* the first call initialises libsodium; later ones return at once */
  if (sodium_init() < 0) return EMBER_EINTERNAL;
  randombytes_buf(out, NODE_AUTH_CHALLENGE_BYTES);
  return 0;
}

void node_auth_mac(const lease_key *key,
                   const uint8_t challenge[NODE_AUTH_CHALLENGE_BYTES],
                   const char *node, uint8_t mac[NODE_AUTH_MAC_BYTES]) {
  crypto_auth_hmacsha256_state st;
  crypto_auth_hmacsha256_init(&st, key->bytes, sizeof key->bytes);
  crypto_auth_hmacsha256_update(&st, (const uint8_t *)domain,
                                sizeof domain - 1);
  crypto_auth_hmacsha256_update(&st, challenge, NODE_AUTH_CHALLENGE_BYTES);
  crypto_auth_hmacsha256_update(&st, (const uint8_t *)node, strlen(node));
  crypto_auth_hmacsha256_final(&st, mac);
  sodium_memzero(&st, sizeof st);
}

int node_auth_verify(const lease_key *key,
                     const uint8_t challenge[NODE_AUTH_CHALLENGE_BYTES],
                     const char *node, const uint8_t *mac, size_t mac_len) {
  if (!mac || mac_len != NODE_AUTH_MAC_BYTES) return EMBER_EDENIED;
  uint8_t want[NODE_AUTH_MAC_BYTES];
  node_auth_mac(key, challenge, node, want);
  int ok = sodium_memcmp(want, mac, NODE_AUTH_MAC_BYTES) == 0;
  sodium_memzero(want, sizeof want);
  return ok ? 0 : EMBER_EDENIED;
}
