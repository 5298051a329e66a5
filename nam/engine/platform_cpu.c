/*
 * platform_cpu.c - the cpu platform: worker threads (one per core by
 * default) that run the accelerators' CPU implementations.
 */
#include "engine_internal.h"

#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"
#include "host_memory.h"
#include "platform_kinds.h"

typedef struct cpu_impl {
  pthread_t *threads;
  unsigned started;
} cpu_impl;

void nam_whole_task_run(nam_platform *p, nam_task *t) {
  acc_output out = {0};
  char err[256] = "";
  int rc = nam_task_bind(p, t, err, sizeof err);
  if (rc == 0) {
    nam_task_io io;
    nam_task_io_view(p, t, &io);
    rc = p->ops->run(p, t, &io, &out, err, sizeof err);
    nam_task_unbind(p, t, rc == 0 ? NAM_RUN_OK : NAM_RUN_FAILED);
  }
  nam_task_complete(p, t, rc, err, &out);
}

static void *cpu_worker(void *arg) {
  nam_platform *p = arg;
  nam_task *t;
  while ((t = nam_dispatch_next(p))) nam_whole_task_run(p, t);
  return NULL;
}

static int cpu_start(nam_platform *p) {
  cpu_impl *impl = calloc(1, sizeof *impl);
  if (!impl) return EMBER_ENOMEM;
  impl->threads = calloc(p->workers, sizeof *impl->threads);
  if (!impl->threads) {
    free(impl);
    return EMBER_ENOMEM;
  }
  p->impl = impl;
  for (unsigned i = 0; i < p->workers; i++) {
    if (pthread_create(&impl->threads[i], NULL, cpu_worker, p) != 0)
      return EMBER_ENOMEM; /* stop() joins those that started */
    impl->started++;
  }
  return 0;
}

static void cpu_stop(nam_platform *p) {
  cpu_impl *impl = p->impl;
  if (!impl) return;
  for (unsigned i = 0; i < impl->started; i++)
    pthread_join(impl->threads[i], NULL);
  free(impl->threads);
  free(impl);
  p->impl = NULL;
}

static int cpu_supports(const nam_platform *p, const acc_descriptor *acc) {
  return acc->run_cpu != NULL;
}

static int cpu_run(nam_platform *p, nam_task *t, const nam_task_io *io,
                   acc_output *out, char *err, size_t err_len) {
  acc_run_ctx ctx;
  nam_task_run_ctx(t, io, &ctx);
  return t->acc->run_cpu(t->prepared, io->inputs, t->n_inputs, &ctx, out, err,
                         err_len);
}

const nam_platform_ops nam_platform_cpu_ops = {
  .kind = platform_kinds[PLATFORM_KIND_CPU].name,
  .start = cpu_start,
  .stop = cpu_stop,
  .supports = cpu_supports,
  .run = cpu_run,
  .cache_ops = &nam_host_memory_ops, /* copies are host memory */
};
