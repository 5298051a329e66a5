/* lease.c - signing and checking leases (lease.h). */
#include "lease.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "ember/ember_errors.h"
#include "errbuf.h"

/* Whether [s, end) holds only line ends: counted to end, not to a NUL,
 * so that "KEY\n\0junk" is refused as well as "KEY\njunk". */
static int only_line_ends(const char *s, const char *end) {
  for (; s < end; s++)
    if (*s != '\r' && *s != '\n') return 0;
  return 1;
}

int lease_key_load(const char *path, lease_key *out, char *err,
                   size_t err_len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return errbuf_printf(err, err_len, EMBER_EIO, "%s: %s", path,
                         strerror(errno));
  struct stat st;
  char text[130];
  ssize_t n = -1;
  if (fstat(fd, &st) == 0) n = read(fd, text, sizeof text - 1);
  int saved = errno;
  close(fd);
  if (n < 0)
    return errbuf_printf(err, err_len, EMBER_EIO, "%s: %s", path,
                         strerror(saved));
  if (st.st_mode & 077)
    return errbuf_printf(err, err_len, EMBER_EDENIED, "%s: %s", path,
                         "group or others may read it (chmod 600)");
  text[n] = '\0';
  size_t bin_len = 0;
  const char *end = NULL;
  /* the buffer full: the file may go on past what was read (64 digits
   * and 64 line ends fit) */
  if ((size_t)n == sizeof text - 1 ||
      sodium_hex2bin(out->bytes, sizeof out->bytes, text, (size_t)n, NULL,
                     &bin_len, &end) != 0 ||
      bin_len != LEASE_KEY_BYTES || !only_line_ends(end, text + n))
    return errbuf_printf(err, err_len, EMBER_EFORMAT, "%s: %s", path,
                         "expected 64 hex digits");
  return 0;
}

int lease_key_create(const char *path, char *err, size_t err_len) {
  if (sodium_init() < 0)
    return errbuf_printf(err, err_len, EMBER_EINTERNAL, "%s: %s", path,
                         "libsodium failed to initialise");
  uint8_t key[LEASE_KEY_BYTES];
  char hex[2 * LEASE_KEY_BYTES + 2];
  randombytes_buf(key, sizeof key);
  sodium_bin2hex(hex, sizeof hex, key, sizeof key);
  sodium_memzero(key, sizeof key);
  strcat(hex, "\n");
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0)
    return errbuf_printf(err, err_len, EMBER_EIO, "%s: %s", path,
                         strerror(errno));
  size_t len = strlen(hex);
  int ok = write(fd, hex, len) == (ssize_t)len;
  int saved = errno;
  if (close(fd) != 0) ok = 0;
  sodium_memzero(hex, sizeof hex);
  if (!ok)
    return errbuf_printf(err, err_len, EMBER_EIO, "%s: %s", path,
                         strerror(saved));
  return 0;
}

int lease_sign(const lease_key *key, const Ember__LeaseBody *body,
               Ember__Lease *out) {
  ember__lease__init(out);
  size_t len = ember__lease_body__get_packed_size(body);
  uint8_t *packed = malloc(len ? len : 1);
  uint8_t *mac = malloc(crypto_auth_hmacsha256_BYTES);
  if (!packed || !mac) {
    free(packed);
    free(mac);
    return EMBER_ENOMEM;
  }
  ember__lease_body__pack(body, packed);
  crypto_auth_hmacsha256(mac, packed, len, key->bytes);
  out->body.data = packed;
  out->body.len = len;
  out->mac.data = mac;
  out->mac.len = crypto_auth_hmacsha256_BYTES;
  return 0;
}

void lease_clear(Ember__Lease *lease) {
  free(lease->body.data);
  free(lease->mac.data);
  lease->body.data = lease->mac.data = NULL;
  lease->body.len = lease->mac.len = 0;
}

int lease_verify(const lease_key *key, const Ember__Lease *lease,
                 uint64_t now_unix_ms, Ember__LeaseBody **body_out, char *why,
                 size_t why_len) {
  *body_out = NULL;
  if (!lease || lease->mac.len != crypto_auth_hmacsha256_BYTES ||
      crypto_auth_hmacsha256_verify(lease->mac.data, lease->body.data,
                                    lease->body.len, key->bytes) != 0)
    return errbuf_printf(why, why_len, EMBER_ELEASE, "bad signature");
  Ember__LeaseBody *b =
      ember__lease_body__unpack(NULL, lease->body.len, lease->body.data);
  if (!b) return errbuf_printf(why, why_len, EMBER_ELEASE, "malformed");
  if (b->expires_unix_ms <= now_unix_ms) {
    ember__lease_body__free_unpacked(b, NULL);
    return errbuf_printf(why, why_len, EMBER_ELEASE, "expired");
  }
  *body_out = b;
  return 0;
}

uint64_t lease_now_unix_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}
