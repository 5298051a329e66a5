/*
 * store_sync.h - group commit for the GAM's store: the log is flushed to
 * disk on a thread of its own, so the loop thread never waits on the disk.
 *
 * A commit returns once SQLite has written it to the log (WAL,
 * synchronous=NORMAL): from then on it survives a crash of the GAM
 * (kill -9), but a power cut could still lose it. Each commit counts one
 * in the store's commit sequence (gam_store_commit_seq). The syncer
 * flushes the log (fdatasync) whenever commits are waiting, one flush for
 * every commit made before it started, and then says how far the durable
 * sequence has come. A reply that acknowledges commit k is held back until
 * gam_syncer_durable() >= k, which is what synchronous=FULL gave, without
 * one flush per commit on the loop thread.
 *
 * The syncer also checkpoints the log into the database file (passive,
 * through a connection of its own) once it holds GAM_SYNC_CHECKPOINT_PAGES
 * pages, since the store leaves SQLite's automatic checkpoint off.
 *
 * A store with no file (in memory) never counts a commit: everything is
 * durable at once. A NULL syncer is treated the same way.
 *
 * If a flush fails, what the kernel kept is unknown (the pages may be
 * marked clean and lost): the syncer stops advancing, gam_syncer_failed()
 * is true with the reason, and the daemon must stop rather than
 * acknowledge anything more.
 */
#ifndef EMBER_GAM_STORE_SYNC_H
#define EMBER_GAM_STORE_SYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

#define GAM_SYNC_CHECKPOINT_PAGES 1000

typedef struct gam_syncer gam_syncer;

/* Start the flushing thread for s (which must outlive it); its first
 * flush covers what was committed before. */
int gam_syncer_start(gam_store *s, gam_syncer **out, char *err,
                     size_t err_len);
/* on_durable (NULL: none) is called on the syncer's thread after each
 * flush and after a failure, with its lock held: it must only wake the
 * caller's thread (uv_async_send). Once this returns, the previous
 * callback is no longer running or going to run. */
void gam_syncer_set_notify(gam_syncer *y, void (*on_durable)(void *user),
                           void *user);
/* Flush what has been committed and stop the thread. NULL is a no-op. */
void gam_syncer_stop(gam_syncer *y);

/* Commits are waiting: flush them soon. Cheap; any thread. */
void gam_syncer_request(gam_syncer *y);
/* Every commit up to this sequence is on disk (UINT64_MAX for NULL). */
uint64_t gam_syncer_durable(gam_syncer *y);
/* Block until commit seq is on disk (or the syncer failed: then
 * EMBER_EIO). For threads that may wait: the admin API. */
int gam_syncer_wait(gam_syncer *y, uint64_t seq);
/* True once a flush failed; why (may be NULL) gets the reason. */
bool gam_syncer_failed(gam_syncer *y, char *why, size_t why_len);

/* Flushes done, and their total time (for /metrics). */
void gam_syncer_stats(gam_syncer *y, uint64_t *flushes, uint64_t *flush_ns,
                      uint64_t *checkpoints);

#endif
