/*
 * gam_hold_app.c - an app that holds nodes from ember-gam for a shell test
 * (test_emberctl.sh): `gam_hold_app GAM LABEL COUNT NAME` acquires COUNT
 * nodes offering LABEL through libember, prints each granted node on a
 * line and then "ready", and holds the leases until its standard input
 * ends; then it releases them and exits 0 (1 when acquiring failed).
 */
#include <stdio.h>
#include <stdlib.h>

#include "ember/ember.h"

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: gam_hold_app GAM LABEL COUNT NAME\n");
    return 2;
  }
  ember_cluster_options o = {
      .gam = argv[1],
      .label = argv[2],
      .count = (unsigned)atoi(argv[3]),
      .app_name = argv[4],
      .wait_ms = 10000,
  };
  ember_cluster *c;
  int rc = ember_cluster_acquire(&o, &c);
  if (rc != 0) {
    fprintf(stderr, "gam_hold_app: %s: %s\n", ember_strerror(rc),
            ember_last_error());
    return 1;
  }
  for (size_t i = 0; i < ember_cluster_size(c); i++)
    printf("%s\n", ember_cluster_node(c, i));
  printf("ready\n");
  fflush(stdout);
  while (getchar() != EOF) {
  }
  ember_cluster_release(c);
  return 0;
}
