/* hello_ember.c - a program built the way a user builds one against the
 * installed libember (pkg-config or find_package), run by
 * test_installed.sh: it aligns one pair in embedded mode and checks the
 * library is the one its headers describe. */
#include <ember/ember.h>

#include <stdio.h>
#include <string.h>

int main(void) {
  if (strcmp(ember_version(), EMBER_VERSION_STRING) != 0) {
    fprintf(stderr, "library %s, headers %s\n", ember_version(),
            EMBER_VERSION_STRING);
    return 1;
  }
  ember_client *c;
  ember_options opts = {.size = sizeof opts, .client_name = "hello"};
  int rc = ember_connect("embedded", &opts, &c);
  if (rc) {
    fprintf(stderr, "connect: %s: %s\n", ember_strerror(rc), ember_last_error());
    return 1;
  }
  ember_seq q = {"ACGTTGCA", 8}, r = {"TTACGTTGCATT", 12};
  ember_sw_result res;
  ember_sw_report rep = {.size = sizeof rep};
  rc = ember_sw_align(c, NULL, &q, &r, 1, &res, &rep, NULL, NULL);
  /* a bad residue is an error with a clear message, not a crash */
  ember_seq bad = {"AC#T", 4};
  ember_sw_result ignored;
  int rc_bad = ember_sw_align(c, NULL, &bad, &r, 1, &ignored, NULL, NULL, NULL);
  ember_close(c);
  if (rc) {
    fprintf(stderr, "align: %s: %s\n", ember_strerror(rc), ember_last_error());
    return 1;
  }
  /* 8 matches at +3 each, query 0-7 against reference 2-9 */
  if (res.score != 24 || res.query_start != 0 || res.query_end != 7 ||
      res.ref_start != 2 || res.ref_end != 9 || rep.tasks != 1) {
    fprintf(stderr, "unexpected result: score %d q %d-%d r %d-%d tasks %zu\n",
            res.score, res.query_start, res.query_end, res.ref_start,
            res.ref_end, rep.tasks);
    return 1;
  }
  if (rc_bad != EMBER_EPARAM) {
    fprintf(stderr, "bad residue: %d, expected EMBER_EPARAM\n", rc_bad);
    return 1;
  }
  printf("libember %s: score %d at query %d-%d, reference %d-%d\n",
         ember_version(), res.score, res.query_start, res.query_end,
         res.ref_start, res.ref_end);
  return 0;
}
