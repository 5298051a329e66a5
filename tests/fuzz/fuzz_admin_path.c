/*
 * fuzz_admin_path.c - ember-gam's admin API request pieces on arbitrary
 * bytes (gam/admin_routes.c, gam/admin_token.c): the input, cut at its
 * first NUL, is unescaped as libmicrohttpd's hook does and matched against
 * the routes, and is also read as an events limit, an Authorization header
 * and an error-message string. Checks what each promises: captures fit and
 * are NUL-free, node ids are visible ASCII, reasons are printable.
 *   build-fuzz/tests/fuzz/fuzz_admin_path -max_total_time=60 \
 *     tests/fuzz/corpus/admin_path
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "admin_routes.h"
#include "admin_token.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_printable(const char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < ' ' || (unsigned char)*s >= 0x7f) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *s = malloc(size + 1);
  if (!s) return 0;
  memcpy(s, data, size);
  s[size] = '\0';
  size_t len = strlen(s);

  char *path = strdup(s);
  if (path) {
    size_t n = gam_admin_unescape(path);
    if (n != strlen(path) || n > len) abort();
    gam_admin_route r;
    char why[160] = "";
    int rc = gam_admin_route_parse(path, &r, why, sizeof why);
    if (rc == 0) {
      if (strlen(r.node) > GAM_ADMIN_SEGMENT_MAX ||
          strlen(r.label) > GAM_ADMIN_SEGMENT_MAX || !r.allow || !r.methods)
        abort();
      if (r.node[0] && !gam_admin_node_id_valid(r.node)) abort();
      if (strchr(r.node, '/') || strchr(r.label, '/')) abort();
    } else {
      check_printable(why);
    }
    free(path);
  }

  unsigned limit;
  if (gam_admin_events_limit(s, &limit) == 0 &&
      (limit < 1 || limit > GAM_ADMIN_EVENTS_MAX))
    abort();

  const char *token;
  size_t token_len;
  if (gam_admin_bearer(s, &token, &token_len) &&
      (token_len == 0 || token < s || token + token_len > s + len))
    abort();

  char shown[64];
  check_printable(gam_admin_printable(s, shown, sizeof shown));
  (void)gam_admin_method(s);
  free(s);
  return 0;
}
