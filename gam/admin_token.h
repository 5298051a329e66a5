/*
 * admin_token.h - the admin API's bearer token: loaded once from a file
 * that only its owner may read, and compared in constant time.
 *
 * Only a keyed BLAKE2b digest of the token is kept (libsodium), and a
 * presented token is compared digest to digest with sodium_memcmp, so the
 * time taken says nothing about the token, not even its length.
 */
#ifndef EMBER_GAM_ADMIN_TOKEN_H
#define EMBER_GAM_ADMIN_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

#define GAM_ADMIN_TOKEN_FILE_MAX 4096  /* bytes; a token is far shorter */
#define GAM_ADMIN_TOKEN_DIGEST 32

typedef struct gam_admin_token {
  unsigned char key[32];                        /* random, per load */
  unsigned char digest[GAM_ADMIN_TOKEN_DIGEST]; /* of the token under key */
} gam_admin_token;

/*
 * gam_admin_token_load - read the token in path: a regular file of mode
 * 0600 or stricter (no group or other bits), holding one token of visible
 * ASCII characters (surrounding spaces and line ends are trimmed).
 * Returns 0, or with one line in err:
 *   EMBER_EIO      the file cannot be opened or read
 *   EMBER_EDENIED  not a regular file, or group or others may access it
 *   EMBER_ECONFIG  empty, over GAM_ADMIN_TOKEN_FILE_MAX bytes, or with
 *                  spaces or control characters inside the token
 *   EMBER_EINTERNAL libsodium cannot start
 */
int gam_admin_token_load(const char *path, gam_admin_token *out, char *err,
                         size_t err_len);

/*
 * gam_admin_bearer - the token in an Authorization header value
 * ("Bearer TOKEN", the scheme case-insensitive, spaces around the token
 * allowed). True with *token and *len pointing into header; false when
 * header is NULL, another scheme, or empty.
 */
bool gam_admin_bearer(const char *header, const char **token, size_t *len);

/* gam_admin_token_matches - true when token (len bytes) is the loaded
 * token, in time that depends only on len. Thread-safe. */
bool gam_admin_token_matches(const gam_admin_token *t, const char *token,
                             size_t len);

#endif
