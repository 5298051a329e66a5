/*
 * gam_store_tmp.h - what the GAM store's unit tests share: a temporary
 * directory per test holding gam.db (cmocka setup and teardown), removing
 * a database's files, and opening a store that must open.
 */
#ifndef EMBER_TEST_GAM_STORE_TMP_H
#define EMBER_TEST_GAM_STORE_TMP_H

#include "store.h"

typedef struct tmp {
  char dir[256];
  char db[300];   /* dir/gam.db */
} tmp;

/* cmocka group-test setup and teardown: *state is a tmp. */
int tmp_setup(void **state);
int tmp_teardown(void **state);
/* Remove db and its -wal, -shm and -journal files. */
void rm_db_files(const char *db);
/* gam_store_open that fails the test when it fails. */
gam_store *open_ok(const char *path);

#endif
