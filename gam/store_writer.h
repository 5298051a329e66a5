/*
 * store_writer.h - the GAM's changes to its store, committed on a thread
 * of its own so that the loop thread never waits for the disk.
 *
 * The core keeps the state in memory and queues each change here (same
 * arguments as the store.h call it stands for); gam_writer_publish() hands
 * what was queued to the writer thread as one unit. The thread takes all
 * that is waiting, runs it in one transaction and commits (synchronous
 * FULL: one fsync for the batch), then moves the durable mark to the last
 * change in it. Every change has a number (gam_writer_queued() is the
 * newest); a reply that acknowledges change k is held until
 * gam_writer_durable() >= k, so nothing acknowledged is ever lost, to
 * kill -9 or to a power cut, while heartbeats that changed nothing are
 * answered at once.
 *
 * The core numbers apps and leases itself (starting past
 * gam_store_last_ids), so no reply waits for an id from SQLite.
 *
 * A change the store refuses (a bug: the core checks first) is counted
 * and its reason kept; the rest of the batch commits. A commit that fails
 * (disk full, I/O error) is fatal: gam_writer_failed() is true, nothing
 * more becomes durable, and the daemon must stop rather than acknowledge
 * anything more; it restarts from what is on disk.
 *
 * Threads: the queueing calls and publish are made by one thread at a
 * time (the core's lock); durable, queued, wait, failed, stats and
 * events from any thread.
 */
#ifndef EMBER_GAM_STORE_WRITER_H
#define EMBER_GAM_STORE_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store.h"

typedef struct gam_writer gam_writer;

/* Start the writer thread on s, which it uses alone from now on (s must
 * outlive it). */
int gam_writer_start(gam_store *s, gam_writer **out, char *err,
                     size_t err_len);
/* Commit what was published and stop the thread. NULL is a no-op. */
void gam_writer_stop(gam_writer *w);
/* on_durable (NULL: none) is called on the writer thread after each
 * commit and after a failure, with the writer's lock held: it must only
 * wake the caller's thread (uv_async_send). Once this returns, the old
 * callback is not running and will not run. */
void gam_writer_set_notify(gam_writer *w, void (*on_durable)(void *user),
                           void *user);

/* ---- changes (see store.h for each) */
void gam_writer_node_register(gam_writer *w, const char *id,
                              const char *address, uint64_t now_ms);
void gam_writer_node_set_state(gam_writer *w, const char *id,
                               gam_node_state state, uint64_t now_ms);
void gam_writer_node_set_drained(gam_writer *w, const char *id,
                                 bool drained);
void gam_writer_node_set_reported(gam_writer *w, const char *id,
                                  const char *const *labels, size_t n);
void gam_writer_label_override(gam_writer *w, const char *node,
                               const char *label, bool on);
void gam_writer_label_clear(gam_writer *w, const char *node,
                            const char *label);
void gam_writer_app_insert(gam_writer *w, uint64_t id, const char *name,
                           const char *label, unsigned wanted,
                           uint64_t now_ms);
void gam_writer_app_set_state(gam_writer *w, uint64_t id,
                              gam_app_state state, uint64_t now_ms);
void gam_writer_lease_insert(gam_writer *w, uint64_t id, uint64_t app_id,
                             const char *node, const char *label,
                             uint64_t issued_unix_ms,
                             uint64_t expires_unix_ms);
void gam_writer_lease_end(gam_writer *w, uint64_t id, const char *reason,
                          uint64_t now_ms);
void gam_writer_event(gam_writer *w, uint64_t now_ms, const char *kind,
                      const char *node, uint64_t app_id, const char *detail);

/* Hand everything queued since the last publish to the thread, to be
 * committed together. Cheap when nothing was queued. */
void gam_writer_publish(gam_writer *w);

/* The number of the newest change queued (0: none yet). */
uint64_t gam_writer_queued(gam_writer *w);
/* Every change up to this number is committed. */
uint64_t gam_writer_durable(gam_writer *w);
/* Block until change seq is committed: 0, or EMBER_EIO once the writer
 * failed. Publish first. For threads that may wait (the admin API). */
int gam_writer_wait(gam_writer *w, uint64_t seq);
/* True once a commit failed; why (may be NULL) gets the reason. */
bool gam_writer_failed(gam_writer *w, char *why, size_t why_len);

typedef struct gam_writer_stats {
  uint64_t changes;     /* committed */
  uint64_t commits;     /* transactions (each one fsync) */
  uint64_t commit_ns;   /* time in them */
  uint64_t refused;     /* changes the store refused */
} gam_writer_stats;
void gam_writer_get_stats(gam_writer *w, gam_writer_stats *out);

/* The newest limit events, as gam_store_events, read on the writer
 * thread after what is already published; blocks the caller until done.
 * Never call it holding a lock the loop thread needs. */
int gam_writer_events(gam_writer *w, unsigned limit,
                      int (*fn)(void *user, const gam_store_event_row *row),
                      void *user);

#endif
