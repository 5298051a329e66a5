/* admin_token.c - the admin API's bearer token file and check
 * (admin_token.h). */
#include "admin_token.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "ember/ember_errors.h"

static bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static bool is_visible(char c) {
  return (unsigned char)c > ' ' && (unsigned char)c < 0x7f;
}

/* Read the whole file (at most max bytes) into buf; the checks on the
 * file are made on the descriptor that is read, not on the path. */
static int read_token_file(const char *path, char *buf, size_t max,
                           size_t *len, char *err, size_t err_len) {
  /* O_NONBLOCK: a FIFO planted at the path must not hang the start */
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) {
    snprintf(err, err_len, "admin token file %s: %s", path, strerror(errno));
    return EMBER_EIO;
  }
  struct stat st;
  int rc = 0;
  if (fstat(fd, &st) != 0) {
    snprintf(err, err_len, "admin token file %s: %s", path, strerror(errno));
    rc = EMBER_EIO;
  } else if (!S_ISREG(st.st_mode)) {
    snprintf(err, err_len, "admin token file %s is not a regular file", path);
    rc = EMBER_EDENIED;
  } else if (st.st_mode & (S_IRWXG | S_IRWXO)) {
    snprintf(err, err_len,
             "admin token file %s has mode %04o: group and others must have "
             "no access (chmod 600 %s)", path,
             (unsigned)(st.st_mode & 07777), path);
    rc = EMBER_EDENIED;
  } else if (st.st_size > (off_t)max) {
    snprintf(err, err_len, "admin token file %s is %lld bytes, more than %zu",
             path, (long long)st.st_size, max);
    rc = EMBER_ECONFIG;
  }
  size_t n = 0;
  while (rc == 0) {
    ssize_t got = read(fd, buf + n, max + 1 - n);  /* +1: notice growth */
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      snprintf(err, err_len, "admin token file %s: %s", path, strerror(errno));
      rc = EMBER_EIO;
    } else if (got == 0) {
      break;
    } else if ((n += (size_t)got) > max) {
      snprintf(err, err_len, "admin token file %s is more than %zu bytes",
               path, max);
      rc = EMBER_ECONFIG;
    }
  }
  close(fd);
  *len = n;
  return rc;
}

/* The token digest under the per-load key. */
static void digest_of(const gam_admin_token *t, const char *token, size_t len,
                      unsigned char out[GAM_ADMIN_TOKEN_DIGEST]) {
  crypto_generichash(out, GAM_ADMIN_TOKEN_DIGEST, (const unsigned char *)token,
                     len, t->key, sizeof t->key);
}

int gam_admin_token_load(const char *path, gam_admin_token *out, char *err,
                         size_t err_len) {
  if (sodium_init() < 0) {
    snprintf(err, err_len, "admin token: libsodium cannot start");
    return EMBER_EINTERNAL;
  }
  char buf[GAM_ADMIN_TOKEN_FILE_MAX + 1];
  size_t n = 0;
  int rc = read_token_file(path, buf, GAM_ADMIN_TOKEN_FILE_MAX, &n, err,
                           err_len);
  const char *start = buf, *end = buf + n;
  while (rc == 0 && start < end && is_space(*start)) start++;
  while (rc == 0 && end > start && is_space(end[-1])) end--;
  if (rc == 0 && start == end) {
    snprintf(err, err_len, "admin token file %s is empty", path);
    rc = EMBER_ECONFIG;
  }
  for (const char *p = start; rc == 0 && p < end; p++)
    if (!is_visible(*p)) {
      snprintf(err, err_len,
               "admin token file %s: the token has a space or a control "
               "character inside (one line of visible characters expected)",
               path);
      rc = EMBER_ECONFIG;
    }
  if (rc == 0) {
    randombytes_buf(out->key, sizeof out->key);
    digest_of(out, start, (size_t)(end - start), out->digest);
  }
  sodium_memzero(buf, sizeof buf);
  return rc;
}

bool gam_admin_bearer(const char *header, const char **token, size_t *len) {
  if (!header) return false;
  while (*header == ' ' || *header == '\t') header++;
  if (strncasecmp(header, "Bearer", 6) != 0 ||
      (header[6] != ' ' && header[6] != '\t'))
    return false;
  const char *p = header + 6;
  while (*p == ' ' || *p == '\t') p++;
  size_t n = strlen(p);
  while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t')) n--;
  if (n == 0) return false;
  *token = p;
  *len = n;
  return true;
}

bool gam_admin_token_matches(const gam_admin_token *t, const char *token,
                             size_t len) {
  unsigned char d[GAM_ADMIN_TOKEN_DIGEST];
  digest_of(t, token, len, d);
  return sodium_memcmp(d, t->digest, sizeof d) == 0;
}
