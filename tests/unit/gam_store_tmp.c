/* gam_store_tmp.c - the GAM store tests' temporary databases
 * (gam_store_tmp.h). */
#include "gam_store_tmp.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

void rm_db_files(const char *db) {
  static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
  char p[320];
  for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
    snprintf(p, sizeof p, "%s%s", db, suffix[i]);
    unlink(p);
  }
}

int tmp_setup(void **state) {
  tmp *t = calloc(1, sizeof *t);
  if (!t) return -1;
  const char *base = getenv("TMPDIR");
  snprintf(t->dir, sizeof t->dir, "%s/ember-store-XXXXXX",
           base && *base ? base : "/tmp");
  if (!mkdtemp(t->dir)) {
    free(t);
    return -1;
  }
  snprintf(t->db, sizeof t->db, "%s/gam.db", t->dir);
  *state = t;
  return 0;
}

int tmp_teardown(void **state) {
  tmp *t = *state;
  rm_db_files(t->db);
  rmdir(t->dir);
  free(t);
  return 0;
}

gam_store *open_ok(const char *path) {
  gam_store *s = NULL;
  char err[256];
  int rc = gam_store_open(path, &s, err, sizeof err);
  if (rc) print_error("gam_store_open(%s): %d %s\n", path, rc, err);
  assert_int_equal(rc, 0);
  assert_non_null(s);
  return s;
}
