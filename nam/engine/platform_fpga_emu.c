/*
 * platform_fpga_emu.c - the fpga-emu platform: one emulated FPGA board
 * (fpga_emu_board.h) driven by the engine's pipeline. Results are computed
 * with the accelerators' CPU code from the host bytes; the board model
 * makes each stage last what the board would take:
 *
 *   stage-in   cache uploads: host->board DMA of each missing block. The
 *              board's memory is host memory (host_memory.c) accounted
 *              against the board: a read-only block is wrapped in place,
 *              out, state and scratch blocks get buffers that run_cpu
 *              writes; staged(): when the task's inputs are on the board
 *   execute    load the task's bitstream (reprogram if another one is
 *              loaded), draw the injected fault, run the CPU code on the
 *              board's copies, then hold the kernel until the timing model
 *              (a roofline over the task's declared cost) says
 *   stage-out  board->host DMA of the result message; out and state
 *              blocks stay on the board (read back only when asked)
 *
 * A task carries its clock (real or virtual, see fpga_emu_board.h) from
 * stage to stage in t->device_clock_ns.
 *
 * Virtual clock: nothing sleeps, so the pipeline's bound on tasks in
 * flight (p->workers) would not show in virtual time by itself - the
 * stage-in thread would run ahead. The platform models it: a task's input
 * DMA starts no earlier than the (virtual) completion of the task
 * p->workers places before it, and uploads are booked on the link at
 * staged() (the stage-in thread uploads one task's blocks at a time), so a
 * depth of 1 gives serial stages and more gives overlap, as in real time.
 * Completions are counted in order (the pipeline is FIFO); a task canceled
 * between stage-in and execute, or whose result came after its deadline,
 * is not seen and leaves the count one behind (slots then free a task
 * late: the model errs on the slow side).
 */
#include "engine_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ember/ember_errors.h"
#include "fpga_emu_board.h"
#include "host_memory.h"
#include "log.h"
#include "platform_kinds.h"

/* How fast the CPU code runs each accelerator here (ns per work unit,
 * an exponentially weighted moving average), for model_ns: in real-clock
 * mode execute lasts max(model, CPU time). */
typedef struct cpu_speed {
  const acc_descriptor *acc;
  double ns_per_unit;
} cpu_speed;

#define CPU_SPEED_WEIGHT 0.25 /* of the newest sample */

typedef struct fpga_impl {
  nam_fpga_board *board;
  int virtual_clock;
  pthread_mutex_t lock; /* everything below */
  cpu_speed speed[NAM_FPGA_MAX_BITSTREAMS];
  /* virtual clock: the pipeline's slots */
  uint64_t pending_in;  /* bytes uploaded for the task being staged */
  uint64_t *slot_free;  /* completion c's virtual end at [c % n_slots] */
  unsigned n_slots;
  uint64_t n_staged, n_done;
} fpga_impl;

/* A device copy: board memory accounted, bytes in host memory. */
typedef struct fpga_copy {
  fpga_impl *impl;
  size_t size;
  void *host;   /* host_memory.h's handle */
} fpga_copy;

static nam_fpga_board *board_of(const nam_platform *p) {
  return ((fpga_impl *)p->impl)->board;
}

/* ------------------------------------------------------------------------ */
/* Device memory for the block cache                                         */

static int new_copy(fpga_impl *impl, size_t size, const void *wrap,
                    void **handle) {
  fpga_copy *c = malloc(sizeof *c);
  if (!c) return EMBER_ENOMEM;
  int rc = nam_fpga_board_alloc(impl->board, size);
  if (rc == 0) {
    rc = wrap ? nam_host_wrap(NULL, wrap, size, &c->host)
              : nam_host_alloc(NULL, size, &c->host);
    if (rc) nam_fpga_board_free(impl->board, size);
  }
  if (rc) {
    free(c);
    return rc;
  }
  c->impl = impl;
  c->size = size;
  *handle = c;
  return 0;
}

static int fpga_alloc(void *ctx, size_t size, void **handle) {
  return new_copy(ctx, size, NULL, handle);
}

/* The host->board DMA: real clock, now (sleeping through it); virtual
 * clock, booked with the task's other uploads at staged(). */
static int dma_to_board(fpga_impl *impl, size_t size) {
  if (!impl->virtual_clock)
    return nam_fpga_board_dma(impl->board, NAM_FPGA_TO_BOARD, size, NULL);
  pthread_mutex_lock(&impl->lock);
  impl->pending_in += size;
  pthread_mutex_unlock(&impl->lock);
  return 0;
}

static int fpga_upload(void *handle, const void *data, size_t size) {
  fpga_copy *c = handle;
  int rc = nam_host_upload(c->host, data, size);
  return rc ? rc : dma_to_board(c->impl, size);
}

/* A read-only block: the board computes on the host bytes themselves; only
 * the DMA's time is modelled. */
static int fpga_wrap(void *ctx, const void *data, size_t size, void **handle) {
  int rc = new_copy(ctx, size, data, handle);
  if (rc == 0 && (rc = dma_to_board(ctx, size)) != 0) {
    fpga_copy *c = *handle;
    nam_host_free(c->host);
    nam_fpga_board_free(c->impl->board, c->size);
    free(c);
  }
  return rc;
}

/* board->host DMA of an out or state block (virtual clock: counted, not
 * booked on a task's clock). */
static int fpga_read(void *handle, void *dst, size_t size) {
  fpga_copy *c = handle;
  uint64_t clock = 0;
  int rc = nam_fpga_board_dma(c->impl->board, NAM_FPGA_FROM_BOARD, size,
                              c->impl->virtual_clock ? &clock : NULL);
  return rc ? rc : nam_host_read(c->host, dst, size);
}

/* Within the board's memory: nothing crosses PCIe. */
static int fpga_device_copy(void *dst, void *src, size_t size) {
  return nam_host_copy(((fpga_copy *)dst)->host, ((fpga_copy *)src)->host,
                       size);
}

static void *fpga_host_ptr(void *handle) {
  return nam_host_ptr(((fpga_copy *)handle)->host);
}

static void fpga_free(void *handle) {
  fpga_copy *c = handle;
  if (!c) return;
  nam_host_free(c->host);
  nam_fpga_board_free(c->impl->board, c->size);
  free(c);
}

static const nam_block_cache_ops fpga_cache_ops = {
  .alloc = fpga_alloc,
  .upload = fpga_upload,
  .free = fpga_free,
  .read = fpga_read,
  .wrap = fpga_wrap,
  .host_ptr = fpga_host_ptr,
  .copy = fpga_device_copy,
};

/* ------------------------------------------------------------------------ */
/* CPU speed per accelerator                                                 */

static void note_cpu_speed(fpga_impl *impl, const acc_descriptor *acc,
                           uint64_t work, uint64_t ns) {
  if (!work) return;
  double sample = (double)ns / (double)work;
  pthread_mutex_lock(&impl->lock);
  for (unsigned i = 0; i < NAM_FPGA_MAX_BITSTREAMS; i++) {
    cpu_speed *s = &impl->speed[i];
    if (s->acc && s->acc != acc) continue;
    if (!s->acc) {
      s->acc = acc;
      s->ns_per_unit = sample;
    } else {
      s->ns_per_unit += CPU_SPEED_WEIGHT * (sample - s->ns_per_unit);
    }
    break;
  }
  pthread_mutex_unlock(&impl->lock);
}

/* Expected CPU time of work units of acc, 0: not measured yet. */
static uint64_t cpu_estimate(fpga_impl *impl, const acc_descriptor *acc,
                             uint64_t work) {
  double per = 0;
  pthread_mutex_lock(&impl->lock);
  for (unsigned i = 0; i < NAM_FPGA_MAX_BITSTREAMS; i++)
    if (impl->speed[i].acc == acc) {
      per = impl->speed[i].ns_per_unit;
      break;
    }
  pthread_mutex_unlock(&impl->lock);
  double ns = per * (double)work;
  return ns >= 1.8e19 ? UINT64_MAX : (uint64_t)ns;
}

/* Virtual clock: a task left the pipeline at virtual time end. */
static void slot_done(fpga_impl *impl, uint64_t end) {
  if (!impl->virtual_clock) return;
  pthread_mutex_lock(&impl->lock);
  impl->slot_free[impl->n_done++ % impl->n_slots] = end;
  pthread_mutex_unlock(&impl->lock);
}

static uint64_t work_of(const nam_task *t) { return t->work; }

/* ------------------------------------------------------------------------ */
/* The platform                                                              */

static int fpga_start(nam_platform *p) {
  const nam_fpga_emu_config *cfg = p->arg;
  if (!cfg) return EMBER_EINVAL;
  fpga_impl *impl = calloc(1, sizeof *impl);
  if (!impl) return EMBER_ENOMEM;
  impl->virtual_clock = cfg->virtual_clock;
  impl->n_slots = p->workers ? p->workers : 1;
  impl->slot_free = calloc(impl->n_slots, sizeof *impl->slot_free);
  if (!impl->slot_free || pthread_mutex_init(&impl->lock, NULL) != 0) {
    free(impl->slot_free);
    free(impl);
    return EMBER_ENOMEM;
  }
  char err[200] = "";
  int rc = nam_fpga_board_create(cfg, &impl->board, err, sizeof err);
  if (rc) {
    nam_engine_event(p->engine, LOG_LVL_ERR, "fpga-emu %s: %s", p->name, err);
    pthread_mutex_destroy(&impl->lock);
    free(impl->slot_free);
    free(impl);
    return rc;
  }
  p->impl = impl;
  p->cache_budget = cfg->memory;
  snprintf(p->device, sizeof p->device,
           "emulated FPGA, %.3g GiB, %.1f GB/s PCIe%s",
           (double)cfg->memory / (double)(1ull << 30), cfg->pcie_gbps,
           cfg->virtual_clock ? ", virtual clock" : "");
  return 0;
}

static void fpga_stop(nam_platform *p) {
  fpga_impl *impl = p->impl;
  if (!impl) return;
  nam_fpga_board_destroy(impl->board);
  pthread_mutex_destroy(&impl->lock);
  free(impl->slot_free);
  free(impl);
  p->impl = NULL;
}

static int fpga_supports(const nam_platform *p, const acc_descriptor *acc) {
  return p->impl && acc->fpga && acc->run_cpu &&
         nam_fpga_board_can_load(board_of(p), acc->name);
}

/* When t's inputs are on the board. Virtual clock: its uploads go over
 * the link now, after the task p->workers places before it completed. */
static void fpga_staged(nam_platform *p, nam_task *t) {
  fpga_impl *impl = p->impl;
  if (!impl->virtual_clock) {
    t->device_clock_ns = clock_now_ns();
    return;
  }
  pthread_mutex_lock(&impl->lock);
  uint64_t bytes = impl->pending_in;
  uint64_t clock = impl->slot_free[impl->n_staged++ % impl->n_slots];
  impl->pending_in = 0;
  pthread_mutex_unlock(&impl->lock);
  nam_fpga_board_dma(impl->board, NAM_FPGA_TO_BOARD, bytes, &clock);
  t->device_clock_ns = clock;
}

static int fpga_execute(nam_platform *p, nam_task *t, const nam_task_io *io,
                        acc_output *out, char *err, size_t err_len) {
  fpga_impl *impl = p->impl;
  nam_fpga_board *b = impl->board;
  uint64_t clock = t->device_clock_ns;

  int rc = nam_fpga_board_load(b, t->acc->name, &clock);
  if (rc) {
    snprintf(err, err_len, "%s has no bitstream for %s", p->name,
             t->acc->name);
    rc = EMBER_EPLATFORM;
    goto failed;
  }
  switch (nam_fpga_board_draw_fault(b)) {
  case NAM_FPGA_FAULT_FAIL:
    snprintf(err, err_len, "injected fault on %s", p->name);
    rc = EMBER_EPLATFORM;
    goto failed;
  case NAM_FPGA_FAULT_HANG:
    rc = nam_fpga_board_hang(b, t, &t->timed_out);
    if (rc == EMBER_ESHUTDOWN)
      snprintf(err, err_len, "%s shut down with a hung task", p->name);
    else
      snprintf(err, err_len, "injected hang on %s, aborted", p->name);
    goto failed;
  case NAM_FPGA_FAULT_NONE:
    break;
  }

  acc_run_ctx ctx;
  nam_task_run_ctx(t, io, &ctx);
  uint64_t c0 = clock_now_ns();
  rc = t->acc->run_cpu(t->prepared, io->inputs, t->n_inputs, &ctx, out, err,
                       err_len);
  uint64_t cpu_ns = clock_now_ns() - c0;
  if (rc) {
    free(out->data);
    out->data = NULL;
    out->size = 0;
    goto failed;
  }
  uint64_t work = work_of(t);
  note_cpu_speed(impl, t->acc, work, cpu_ns);
  nam_fpga_board_kernel(b, nam_fpga_board_roofline_ns(b, t->acc, &t->plan.cost),
                        cpu_ns, &clock);
  t->device_clock_ns = clock;
  return 0;

failed: /* no stage-out follows */
  slot_done(impl, clock);
  return rc;
}

static int fpga_stage_out(nam_platform *p, nam_task *t,
                          const acc_output *out, char *err, size_t err_len) {
  uint64_t clock = t->device_clock_ns;
  int rc = nam_fpga_board_dma(board_of(p), NAM_FPGA_FROM_BOARD,
                              out ? out->size : 0, &clock);
  slot_done(p->impl, clock);
  if (rc) {
    snprintf(err, err_len, "%s: output DMA: %s", p->name, ember_strerror(rc));
    return rc;
  }
  t->device_clock_ns = clock;
  return 0;
}

static void fpga_abort(nam_platform *p, nam_task *t) {
  nam_fpga_board_abort(board_of(p), t);
}

/*
 * The expected real time of execute (the engine sets deadlines and weighs
 * platforms with it; the DMA stages are not part of execute, so they are
 * not counted). Real clock: max(kernel model, the CPU code's measured
 * time) - what the kernel stage lasts - plus the reprogram when t's
 * bitstream is not the one loaded now (a task ahead in the pipeline may
 * still change that). Virtual clock: nothing sleeps, execute lasts the CPU
 * time: its estimate, 0 (unknown) before the first measurement.
 */
static uint64_t fpga_model_ns(const nam_platform *p, const nam_task *t) {
  fpga_impl *impl = p->impl;
  uint64_t work = work_of(t);
  uint64_t cpu = cpu_estimate(impl, t->acc, work);
  if (nam_fpga_board_config(impl->board)->virtual_clock) return cpu;
  uint64_t model = nam_fpga_board_roofline_ns(impl->board, t->acc,
                                              &t->plan.cost);
  uint64_t run = model > cpu ? model : cpu;
  uint64_t reprogram = nam_fpga_board_reprogram_ns(impl->board, t->acc->name);
  return run > UINT64_MAX - reprogram ? UINT64_MAX : run + reprogram;
}

static void fpga_describe(const nam_platform *p, nam_platform_status *s) {
  if (!p->impl) return;
  nam_fpga_board_counters c;
  nam_fpga_board_get_counters(board_of(p), &c);
  snprintf(s->loaded, sizeof s->loaded, "%s", c.loaded);
  s->reprograms = c.reprograms;
  s->virtual_ns = c.virtual_ns;
}

int nam_engine_set_fault_rates(nam_engine *e, double fail_rate,
                               double hang_rate) {
  /* the platforms are fixed once the engine runs: no engine lock needed */
  for (size_t i = 0; i < e->n_platforms; i++) {
    nam_platform *p = &e->platforms[i];
    if (p->ops != &nam_platform_fpga_emu_ops || !p->impl) continue;
    int rc = nam_fpga_board_set_fault_rates(board_of(p), fail_rate, hang_rate);
    if (rc) return rc;
  }
  return 0;
}

const nam_platform_ops nam_platform_fpga_emu_ops = {
  .kind = platform_kinds[PLATFORM_KIND_FPGA_EMU].name,
  .start = fpga_start,
  .stop = fpga_stop,
  .supports = fpga_supports,
  .reprogrammable = 1,
  .run = NULL,
  .cache_ops = &fpga_cache_ops,
  .staged = fpga_staged,
  .execute = fpga_execute,
  .stage_out = fpga_stage_out,
  .abort = fpga_abort,
  .model_ns = fpga_model_ns,
  .describe = fpga_describe,
};
