/*
 * fuzz_hostport.c - the HOST:PORT parser (common/hostport.c) on arbitrary
 * bytes, cut at the first NUL, with and without port 0 allowed. Checks what
 * it promises: an accepted address has a host that fits, a port whose
 * digits and number agree and lie in the range; a refusal gives a reason.
 *   build-fuzz/tests/fuzz/fuzz_hostport -max_total_time=60 \
 *     tests/fuzz/corpus/hostport
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hostport.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) return 0;
  memcpy(s, data, size);
  s[size] = '\0';
  for (unsigned flags = 0; flags <= HOSTPORT_ANY_PORT; flags++) {
    hostport a;
    char why[128] = "";
    if (hostport_parse(s, flags, &a, why, sizeof why) != 0) {
      if (!why[0]) abort();
      continue;
    }
    if (!a.host[0] || strlen(a.host) >= sizeof a.host) abort();
    if (atoi(a.port) != a.port_num || a.port_num > 65535) abort();
    if (a.port_num == 0 && !(flags & HOSTPORT_ANY_PORT)) abort();
  }
  free(s);
  return 0;
}
