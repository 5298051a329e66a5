/*
 * backend.h - where a client's blocks live and its tasks run: one const
 * table of functions per back end (backend_embedded.c: the in-process
 * engine; backend_remote.c: a NAM over remote.c's connection), picked once
 * from the address by client.c. The front end calls the back end only
 * through c->backend; a back end reports finished tasks through
 * c->task_done, never into the front end's files.
 */
#ifndef EMBER_BACKEND_H
#define EMBER_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "client.h"

/* A cluster member's lease (cluster.c): presented in every Hello to a TCP
 * NAM, and proved ours with the app's secret key when the NAM challenges. */
typedef struct ember__lease {
  const uint8_t *body, *mac;
  size_t body_len, mac_len;
  uint64_t id;
  const uint8_t *sk;         /* the app's Ed25519 secret key, 64 bytes */
} ember__lease;

enum ember__block_op {
  EMBER__BLOCK_READ,
  EMBER__BLOCK_SYNC,
  EMBER__BLOCK_RESTORE,
};

/* An op on a block is over: its status, and the bytes or size and version
 * it gave (valid during the call only). */
typedef void ember__block_op_done(void *user, int status, const void *data,
                                  size_t size, uint64_t version);

typedef struct ember__backend_ops {
  const char *name;
  /* c is set up but for c->backend_data (lease: NULL or a cluster
   * member's): make it. 0 or an error, with close called either way. */
  int (*open)(ember_client *c, const ember__lease *lease);
  /* c->closing is set: every task still running ends (EMBER_ECANCELED);
   * free backend_data */
  void (*close)(ember_client *c);
  int (*connected)(ember_client *c);
  /* the cluster's lease ended: no more reconnecting */
  void (*lease_ended)(ember_client *c);

  /* b's bytes (b->data), a copy of init unless it is NULL */
  int (*alloc_block)(ember_block *b, const void *init);
  /* b is written: make it read-only and ready for tasks */
  int (*seal_block)(ember_block *b);
  /* read, sync or restore a state or out block where it lives: done is
   * called once, maybe before this returns, unless this fails */
  int (*block_op)(ember_block *b, enum ember__block_op op,
                  ember__block_op_done *done, void *user);
  /* b's last reference is gone: let it go where it lives (the front end
   * then frees b->data, if still set) */
  void (*release_block)(ember_block *b);

  /* run t: c->task_done reports it, maybe before this returns */
  void (*submit)(ember_task *t);
  /* NULL, or: ember_run's caller waits for t (t->sync) and may lend its
   * thread to get the result; returns once t is settled */
  void (*wait_sync)(ember_task *t);
  /* 0, or EMBER_ENOTFOUND if it cannot be stopped any more */
  int (*cancel)(ember_task *t);
  /* t is being freed: what the back end kept for it */
  void (*task_free)(ember_task *t);

  /* what accelerators and platforms are there (introspect.h's builders) */
  int (*list_accelerators)(ember_client *c, ember_listing **out);
} ember__backend_ops;

extern const ember__backend_ops ember__backend_embedded;
extern const ember__backend_ops ember__backend_remote;

#endif
