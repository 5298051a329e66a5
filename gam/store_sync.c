/*
 * store_sync.c - the store's flushing thread (store_sync.h): fdatasync of
 * the log for every commit made before the flush started, and passive
 * checkpoints through a connection of its own.
 */
#include "store_sync.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "ember/ember_errors.h"
#include "store_int.h"

/* With nothing asked, the thread still looks at the log this often, to
 * checkpoint it. */
#define GAM_SYNC_IDLE_MS 1000

struct gam_syncer {
  gam_store *store;
  sqlite3 *checkpointer;     /* NULL in memory */
  int wal_fd;                /* opened on the first flush */
  pthread_t thread;
  pthread_mutex_t lock;
  pthread_cond_t wake;       /* the thread waits here */
  pthread_cond_t flushed;    /* gam_syncer_wait() waits here */
  bool requested, stopping, failed;
  char why[256];
  _Atomic uint64_t durable;
  _Atomic uint64_t flushes, flush_ns, checkpoints;
  void (*on_durable)(void *user);
  void *user;
};

static void fail(gam_syncer *y, const char *what, int errnum) {
  pthread_mutex_lock(&y->lock);
  if (!y->failed)
    snprintf(y->why, sizeof y->why, "%s: %s", what, strerror(errnum));
  y->failed = true;
  pthread_cond_broadcast(&y->flushed);
  pthread_mutex_unlock(&y->lock);
}

/* The log and, once, its directory: a new file's name must be on disk as
 * well as its bytes. */
static int open_wal(gam_syncer *y) {
  char wal[4096];
  snprintf(wal, sizeof wal, "%s-wal", y->store->path);
  y->wal_fd = open(wal, O_RDONLY | O_CLOEXEC);
  if (y->wal_fd < 0) return errno;
  char dir_buf[4096];
  snprintf(dir_buf, sizeof dir_buf, "%s", y->store->path);
  int dir = open(dirname(dir_buf), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return errno;
  int rc = fsync(dir) == 0 ? 0 : errno;
  close(dir);
  return rc;
}

static void flush(gam_syncer *y) {
  /* Every commit counted by now has been written to the log. */
  uint64_t target = atomic_load(&y->store->commit_seq);
  if (target <= atomic_load(&y->durable) || y->failed) return;
  uint64_t t0 = clock_now_ns();
  int rc = y->wal_fd < 0 ? open_wal(y) : 0;
  if (rc) {
    fail(y, "opening the log", rc);
  } else if (fdatasync(y->wal_fd) != 0) {
    fail(y, "flushing the log", errno);
  } else {
    atomic_fetch_add(&y->flushes, 1);
    atomic_fetch_add(&y->flush_ns, clock_now_ns() - t0);
    pthread_mutex_lock(&y->lock);
    atomic_store(&y->durable, target);
    pthread_cond_broadcast(&y->flushed);
    pthread_mutex_unlock(&y->lock);
  }
  pthread_mutex_lock(&y->lock);
  if (y->on_durable) y->on_durable(y->user);
  pthread_mutex_unlock(&y->lock);
}

static void checkpoint(gam_syncer *y) {
  if (!y->checkpointer || y->failed ||
      atomic_load(&y->store->wal_pages) < GAM_SYNC_CHECKPOINT_PAGES)
    return;
  int log_pages = 0, done = 0;
  /* Passive: copies what no reader still needs, never blocks the writer.
   * A busy result only means a later try. */
  int rc = sqlite3_wal_checkpoint_v2(y->checkpointer, NULL,
                                     SQLITE_CHECKPOINT_PASSIVE, &log_pages,
                                     &done);
  if (rc == SQLITE_OK && log_pages >= 0) atomic_fetch_add(&y->checkpoints, 1);
}

static void deadline_after(struct timespec *ts, uint64_t ms) {
  clock_gettime(CLOCK_MONOTONIC, ts);
  ts->tv_sec += (time_t)(ms / 1000);
  ts->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

static void *run(void *arg) {
  gam_syncer *y = arg;
  pthread_mutex_lock(&y->lock);
  for (;;) {
    if (!y->requested && !y->stopping) {
      struct timespec ts;
      deadline_after(&ts, GAM_SYNC_IDLE_MS);
      pthread_cond_timedwait(&y->wake, &y->lock, &ts);
    }
    bool stop = y->stopping;
    y->requested = false;
    pthread_mutex_unlock(&y->lock);
    flush(y);
    checkpoint(y);
    pthread_mutex_lock(&y->lock);
    if (stop) break;
  }
  pthread_mutex_unlock(&y->lock);
  return NULL;
}

int gam_syncer_start(gam_store *s, gam_syncer **out, char *err,
                     size_t err_len) {
  *out = NULL;
  gam_syncer *y = calloc(1, sizeof *y);
  if (!y) {
    snprintf(err, err_len, "out of memory");
    return EMBER_ENOMEM;
  }
  y->store = s;
  y->wal_fd = -1;
  y->requested = true;  /* what start-up committed */
  if (s->path) {
    int rc = sqlite3_open_v2(s->path, &y->checkpointer,
                             SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL);
    /* A connection learns the file is in WAL mode on its first read;
     * until then a checkpoint through it does nothing. */
    if (rc == SQLITE_OK)
      rc = sqlite3_exec(y->checkpointer, "SELECT count(*) FROM sqlite_schema",
                        NULL, NULL, NULL);
    if (rc != SQLITE_OK) {
      snprintf(err, err_len, "%s: checkpoint connection: %s", s->path,
               y->checkpointer ? sqlite3_errmsg(y->checkpointer)
                               : "out of memory");
      sqlite3_close(y->checkpointer);
      free(y);
      return EMBER_EIO;
    }
  }
  pthread_mutex_init(&y->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&y->wake, &ca);
  pthread_condattr_destroy(&ca);
  pthread_cond_init(&y->flushed, NULL);
  if (pthread_create(&y->thread, NULL, run, y) != 0) {
    snprintf(err, err_len, "cannot start the log flushing thread");
    sqlite3_close(y->checkpointer);
    pthread_mutex_destroy(&y->lock);
    pthread_cond_destroy(&y->wake);
    pthread_cond_destroy(&y->flushed);
    free(y);
    return EMBER_ENOMEM;
  }
  *out = y;
  return 0;
}

void gam_syncer_stop(gam_syncer *y) {
  if (!y) return;
  pthread_mutex_lock(&y->lock);
  y->stopping = true;
  pthread_cond_signal(&y->wake);
  pthread_mutex_unlock(&y->lock);
  pthread_join(y->thread, NULL);
  if (y->wal_fd >= 0) close(y->wal_fd);
  sqlite3_close(y->checkpointer);
  pthread_mutex_destroy(&y->lock);
  pthread_cond_destroy(&y->wake);
  pthread_cond_destroy(&y->flushed);
  free(y);
}

void gam_syncer_set_notify(gam_syncer *y, void (*on_durable)(void *user),
                           void *user) {
  if (!y) return;
  pthread_mutex_lock(&y->lock);
  y->on_durable = on_durable;
  y->user = user;
  pthread_mutex_unlock(&y->lock);
}

void gam_syncer_request(gam_syncer *y) {
  if (!y) return;
  pthread_mutex_lock(&y->lock);
  if (!y->requested) {
    y->requested = true;
    pthread_cond_signal(&y->wake);
  }
  pthread_mutex_unlock(&y->lock);
}

uint64_t gam_syncer_durable(gam_syncer *y) {
  return y ? atomic_load(&y->durable) : UINT64_MAX;
}

int gam_syncer_wait(gam_syncer *y, uint64_t seq) {
  if (!y) return 0;
  gam_syncer_request(y);
  pthread_mutex_lock(&y->lock);
  while (atomic_load(&y->durable) < seq && !y->failed)
    pthread_cond_wait(&y->flushed, &y->lock);
  int rc = atomic_load(&y->durable) >= seq ? 0 : EMBER_EIO;
  pthread_mutex_unlock(&y->lock);
  return rc;
}

bool gam_syncer_failed(gam_syncer *y, char *why, size_t why_len) {
  if (!y) return false;
  pthread_mutex_lock(&y->lock);
  bool failed = y->failed;
  if (failed && why && why_len) snprintf(why, why_len, "%s", y->why);
  pthread_mutex_unlock(&y->lock);
  return failed;
}

void gam_syncer_stats(gam_syncer *y, uint64_t *flushes, uint64_t *flush_ns,
                      uint64_t *checkpoints) {
  *flushes = y ? atomic_load(&y->flushes) : 0;
  *flush_ns = y ? atomic_load(&y->flush_ns) : 0;
  *checkpoints = y ? atomic_load(&y->checkpoints) : 0;
}
