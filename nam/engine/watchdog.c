/*
 * watchdog.c - one thread per engine that catches hung device tasks: a
 * task still executing at its deadline (task_timeout_ms, or timeout_factor
 * times its expected time) is marked timed out and its platform asked to
 * abort it; the attempt then fails with ETIMEDOUT and the task is retried
 * elsewhere (completion.c). Devices that cannot be interrupted (OpenCL)
 * keep the task until the kernel returns; its late result is discarded.
 */
#include "engine_internal.h"

#include "clock.h"
#include "ember/ember_errors.h"

#define WATCHDOG_IDLE_NS 200000000u /* nothing running: look every 200 ms */

static void *watchdog_thread(void *arg) {
  nam_engine *e = arg;
  pthread_mutex_lock(&e->lock);
  while (e->watchdog_started == 1) {
    pthread_mutex_unlock(&e->lock);
    uint64_t now = clock_now_ns(), next = now + WATCHDOG_IDLE_NS;
    for (size_t i = 0; i < e->n_platforms; i++) {
      if (e->platforms[i].ops->run) continue;
      uint64_t d = nam_pipeline_check(&e->platforms[i], now);
      if (d && d < next) next = d;
    }
    pthread_mutex_lock(&e->lock);
    if (e->watchdog_started != 1) break;
    struct timespec at = clock_ts_at(next + 1000000u);
    pthread_cond_timedwait(&e->watchdog_wake, &e->lock, &at);
  }
  pthread_mutex_unlock(&e->lock);
  return NULL;
}

int nam_watchdog_start(nam_engine *e) {
  int device = 0;
  for (size_t i = 0; i < e->n_platforms; i++)
    if (!e->platforms[i].ops->run) device = 1;
  if (!device) return 0; /* cpu tasks are never abandoned */
  e->watchdog_started = 1;
  if (pthread_create(&e->watchdog, NULL, watchdog_thread, e) != 0) {
    e->watchdog_started = 0;
    return EMBER_ENOMEM;
  }
  return 0;
}

void nam_watchdog_stop(nam_engine *e) {
  pthread_mutex_lock(&e->lock);
  int running = e->watchdog_started;
  e->watchdog_started = 2;
  pthread_cond_broadcast(&e->watchdog_wake);
  pthread_mutex_unlock(&e->lock);
  if (running) pthread_join(e->watchdog, NULL);
}
