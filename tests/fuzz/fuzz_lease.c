/*
 * fuzz_lease.c - libFuzzer target for leases (proto/lease.c): what a NAM
 * does with the Lease in a TCP client's Hello, and with its key file.
 *
 * The first byte picks what the rest is:
 *   even: a packed Lease. It is checked with lease_verify under a fixed
 *         key as it came (it must fail unless its MAC is right), then
 *         with its body signed again under that key, so that the decoder
 *         behind the MAC is reached: a body that decodes must come back
 *         unless expired, with its required strings set; a lease that
 *         verified must stop verifying when one bit of its MAC or body
 *         flips. A body that verified is signed again (lease_sign) and
 *         must verify to the same fields.
 *   odd:  the text of a key file, written to a private 0600 file and read
 *         with lease_key_load: 0 only for 64 hex digits and line ends.
 *
 *   build-fuzz/tests/fuzz/fuzz_lease -max_total_time=60 tests/fuzz/corpus/lease
 */
#include <ctype.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "ember/ember_errors.h"
#include "lease.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const lease_key key = {{
    0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa,
    0xbb, 0xcc, 0xdd, 0xee, 0xff, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab,
    0xcd, 0xef, 0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10}};

/* "now" for every check: fixed, so that an input always does the same */
#define NOW_MS 1700000000000ull

static void check_why(int rc, const char *why) {
  if (rc == 0) return;
  if (rc != EMBER_ELEASE) abort();
  if (strcmp(why, "bad signature") != 0 && strcmp(why, "malformed") != 0 &&
      strcmp(why, "expired") != 0)
    abort();
}

static int verify(const Ember__Lease *l, Ember__LeaseBody **b) {
  char why[64] = "";
  int rc = lease_verify(&key, l, NOW_MS, b, why, sizeof why);
  check_why(rc, why);
  if ((rc == 0) != (*b != NULL)) abort();
  if (*b && (!(*b)->app || !(*b)->node || !(*b)->label ||
             (*b)->expires_unix_ms <= NOW_MS))
    abort();
  return rc;
}

static void flip_one(const Ember__Lease *good, int in_mac, size_t at) {
  ProtobufCBinaryData *f;
  Ember__Lease bad = *good;
  uint8_t *copy = malloc(in_mac ? good->mac.len : good->body.len);
  if (!copy) return;
  f = in_mac ? &bad.mac : &bad.body;
  if (f->len == 0) {
    free(copy);
    return;
  }
  memcpy(copy, f->data, f->len);
  copy[at % f->len] ^= (uint8_t)(1u << (at % 8));
  f->data = copy;
  Ember__LeaseBody *b = NULL;
  if (verify(&bad, &b) == 0) abort(); /* a forged lease was accepted */
  free(copy);
}

static void same_body(const Ember__LeaseBody *a, const Ember__LeaseBody *b) {
  if (a->lease_id != b->lease_id || a->app_id != b->app_id ||
      strcmp(a->app, b->app) != 0 || strcmp(a->node, b->node) != 0 ||
      strcmp(a->label, b->label) != 0 ||
      a->issued_unix_ms != b->issued_unix_ms ||
      a->expires_unix_ms != b->expires_unix_ms)
    abort();
}

static void lease_input(const uint8_t *data, size_t size) {
  Ember__LeaseBody *b = NULL;
  /* the bytes themselves as a Lease, as the Hello carries it */
  Ember__Lease *l = ember__lease__unpack(NULL, size, data);
  if (l) {
    verify(l, &b);
    if (b) ember__lease_body__free_unpacked(b, NULL);
    b = NULL;
  }
  /* the bytes as a body, signed: the checks after the MAC */
  Ember__Lease signed_ = EMBER__LEASE__INIT;
  uint8_t mac[crypto_auth_hmacsha256_BYTES];
  const uint8_t *body = l ? l->body.data : data;
  size_t body_len = l ? l->body.len : size;
  crypto_auth_hmacsha256(mac, body, body_len, key.bytes);
  signed_.body.data = (uint8_t *)body;
  signed_.body.len = body_len;
  signed_.mac.data = mac;
  signed_.mac.len = sizeof mac;
  if (verify(&signed_, &b) == 0) {
    flip_one(&signed_, 1, size);
    flip_one(&signed_, 0, size + 3);
    Ember__Lease again = EMBER__LEASE__INIT;
    if (lease_sign(&key, b, &again) == 0) {
      Ember__LeaseBody *b2 = NULL;
      if (verify(&again, &b2) != 0) abort();
      same_body(b, b2);
      ember__lease_body__free_unpacked(b2, NULL);
      lease_clear(&again);
    }
    ember__lease_body__free_unpacked(b, NULL);
  }
  /* no lease at all, and a MAC of the wrong length */
  if (verify(NULL, &b) == 0) abort();
  signed_.mac.len = sizeof mac - 1;
  if (verify(&signed_, &b) == 0) abort();
  if (l) ember__lease__free_unpacked(l, NULL);
}

static char key_path[64];

static void cleanup(void) {
  if (key_path[0]) {
    unlink(key_path);
    *strrchr(key_path, '/') = '\0';
    rmdir(key_path);
  }
}

static void key_file_input(const uint8_t *data, size_t size) {
  if (!key_path[0]) {
    char dir[] = "/tmp/fuzz_lease.XXXXXX";
    if (!mkdtemp(dir)) return;
    snprintf(key_path, sizeof key_path, "%s/key", dir);
    atexit(cleanup);
  }
  int fd = open(key_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  int ok = write(fd, data, size) == (ssize_t)size;
  close(fd);
  if (!ok) return;
  lease_key out;
  char err[256] = "";
  int rc = lease_key_load(key_path, &out, err, sizeof err);
  /* what the header promises: 64 hex digits, then only line ends (a file
   * longer than the loader's buffer, 129 bytes, is refused whole) */
  int want = size >= 64 && size < 129;
  for (size_t i = 0; i < size && want; i++)
    want = i < 64 ? isxdigit(data[i]) != 0 : (data[i] == '\r' || data[i] == '\n');
  if (rc == 0) {
    if (!want) abort();
    uint8_t hex[LEASE_KEY_BYTES];
    for (size_t i = 0; i < LEASE_KEY_BYTES; i++) {
      char two[3] = {(char)data[2 * i], (char)data[2 * i + 1], 0};
      hex[i] = (uint8_t)strtoul(two, NULL, 16);
    }
    if (memcmp(hex, out.bytes, sizeof hex) != 0) abort();
  } else {
    if (rc != EMBER_EFORMAT || err[0] == '\0') abort();
    if (want) abort();
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  if (data[0] & 1) key_file_input(data + 1, size - 1);
  else lease_input(data + 1, size - 1);
  return 0;
}
