/*
 * fpga_emu_board.c - one emulated FPGA board: device memory, a full-duplex
 * PCIe link, one bitstream at a time, kernel timing, fault injection, on a
 * real or a virtual clock (see fpga_emu_board.h). Also the boards' default
 * config, with where each figure comes from.
 */
#include "fpga_emu_board.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "ember/ember_errors.h"
#include "errbuf.h"

/*
 * Defaults: the board of the Blaze paper's cluster (section 6.1), an
 * AlphaData ADM-PCIE-7V3 (Xilinx Virtex-7 XC7VX690T-2).
 *   memory     16 GiB: "16GB of on-board DDR3 memory" (6.1).
 *   pcie_gbps  6.0: the card sits in a PCIe Gen3 x8 slot, 8 GT/s x 8 lanes
 *              with 128b/130b coding = 7.88 GB/s raw per direction. DMA never
 *              gets all of it: TLP/DLLP headers cost ~10% at 256-byte
 *              payloads, and descriptor fetches and completions more;
 *              Gen3 x8 DMA engines typically measure 6-7 GB/s. 6.0 is an
 *              assumed effective figure - the paper gives none.
 *   memory_gbps 21.3: the card's two DDR3-1333 SODIMM channels, 64 bits
 *              each (2 x 10.67 GB/s peak); the roofline's memory bound.
 *   reprogram  1500 ms: "it typically takes 1~2 seconds to program an FPGA
 *              with a given bitstream" (5.1).
 *   faults     none; seed 1; real clock.
 */
#define FPGA_DEFAULT_MEMORY (16ull << 30)
#define FPGA_DEFAULT_PCIE_GBPS 6.0
#define FPGA_DEFAULT_MEMORY_GBPS 21.333
#define FPGA_DEFAULT_REPROGRAM_MS 1500

void nam_fpga_emu_config_defaults(nam_fpga_emu_config *c) {
  memset(c, 0, sizeof *c);
  c->memory = FPGA_DEFAULT_MEMORY;
  c->pcie_gbps = FPGA_DEFAULT_PCIE_GBPS;
  c->memory_gbps = FPGA_DEFAULT_MEMORY_GBPS;
  c->reprogram_ms = FPGA_DEFAULT_REPROGRAM_MS;
  c->fail_rate = 0;
  c->hang_rate = 0;
  c->seed = 1;
  c->virtual_clock = 0;
}

/* The board's three resources. */
enum { RES_TO_BOARD, RES_FROM_BOARD, RES_KERNEL, RES_COUNT };

/* A call blocked in nam_fpga_board_hang (lives on its stack). */
typedef struct hang_waiter {
  const void *key;
  const atomic_int *aborted;
  int released;
  struct hang_waiter *next;
} hang_waiter;

struct nam_fpga_board {
  nam_fpga_emu_config cfg;
  pthread_mutex_t lock;
  pthread_cond_t wake;           /* hang waiters and destroy */
  int loaded;                    /* index in cfg.bitstreams, -1: none */
  uint64_t free_at[RES_COUNT];   /* when each resource is next free */
  uint64_t rng;                  /* splitmix64 state */
  nam_fpga_board_counters n;     /* loaded[] is filled by get_counters */
  hang_waiter *waiters;
  int closing;
};

static uint64_t sat_add(uint64_t a, uint64_t b) {
  return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

static uint64_t max_u64(uint64_t a, uint64_t b) { return a > b ? a : b; }

/* ns rounded up to an integer, saturating (ns >= 0). */
static uint64_t ceil_ns(double ns) {
  if (!(ns > 0)) return 0;
  if (ns >= 18446744073709549568.0) return UINT64_MAX;
  uint64_t u = (uint64_t)ns;
  return (double)u < ns ? u + 1 : u;
}

static void sleep_until(uint64_t deadline_ns) {
  struct timespec ts = {.tv_sec = (time_t)(deadline_ns / 1000000000u),
                        .tv_nsec = (long)(deadline_ns % 1000000000u)};
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
  }
}

/* splitmix64 (Steele, Lea, Flood 2014): a 64-bit state, one output per
 * step; plenty for fault draws and trivially reproducible. */
static uint64_t splitmix64(uint64_t *state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int find_bitstream(const nam_fpga_emu_config *c, const char *name) {
  if (!name) return -1;
  for (unsigned i = 0; i < c->n_bitstreams; i++)
    if (strcmp(c->bitstreams[i], name) == 0) return (int)i;
  return -1;
}

static int valid_rate(double r) { return r >= 0 && r <= 1; }

static int check_config(const nam_fpga_emu_config *c, char *err,
                        size_t err_len) {
  if (c->memory == 0) {
    return errbuf_printf(err, err_len, EMBER_EINVAL, "memory must be above 0");
  }
  if (!(c->pcie_gbps > 0)) {
    return errbuf_printf(err, err_len, EMBER_EINVAL,
                         "pcie_gbps must be above 0");
  }
  if (!valid_rate(c->fail_rate) || !valid_rate(c->hang_rate) ||
      c->fail_rate + c->hang_rate > 1) {
    return errbuf_printf(err, err_len, EMBER_EINVAL,
                         "fail_rate and hang_rate must be in [0, 1], their sum "
                         "at most 1 (got %g and %g)",
                         c->fail_rate, c->hang_rate);
  }
  if (c->n_bitstreams > NAM_FPGA_MAX_BITSTREAMS ||
      c->n_timing > NAM_FPGA_MAX_BITSTREAMS) {
    return errbuf_printf(err, err_len, EMBER_EINVAL,
                         "at most %d bitstreams and timings",
                         NAM_FPGA_MAX_BITSTREAMS);
  }
  for (unsigned i = 0; i < c->n_bitstreams; i++) {
    size_t len = strnlen(c->bitstreams[i], sizeof c->bitstreams[i]);
    if (len == 0 || len == sizeof c->bitstreams[i]) {
      return errbuf_printf(err, err_len, EMBER_EINVAL,
                           "bitstream %u: empty or unterminated name", i);
    }
  }
  for (unsigned i = 0; i < c->n_timing; i++) {
    const nam_fpga_timing *t = &c->timing[i];
    size_t len = strnlen(t->accelerator, sizeof t->accelerator);
    if (len == 0 || len == sizeof t->accelerator) {
      return errbuf_printf(err, err_len, EMBER_EINVAL,
                           "timing %u: empty or unterminated accelerator", i);
    }
    if (!(t->units_per_cycle >= 0) || !(t->clock_mhz >= 0)) {
      return errbuf_printf(err, err_len, EMBER_EINVAL,
                           "timing of %s: rates must not be negative",
                           t->accelerator);
    }
  }
  if (strnlen(c->name, sizeof c->name) == sizeof c->name) {
    return errbuf_printf(err, err_len, EMBER_EINVAL, "unterminated board name");
  }
  return 0;
}

int nam_fpga_board_create(const nam_fpga_emu_config *cfg,
                          nam_fpga_board **out, char *err, size_t err_len) {
  if (!cfg || !out) {
    return errbuf_printf(err, err_len, EMBER_EINVAL, "no config");
  }
  int rc = check_config(cfg, err, err_len);
  if (rc) return rc;
  nam_fpga_board *b = calloc(1, sizeof *b);
  if (!b) {
    return errbuf_printf(err, err_len, EMBER_ENOMEM, "out of memory");
  }
  b->cfg = *cfg;
  b->loaded = -1;
  b->rng = cfg->seed;
  if (pthread_mutex_init(&b->lock, NULL) != 0) {
    free(b);
    return errbuf_printf(err, err_len, EMBER_ENOMEM, "out of memory");
  }
  if (pthread_cond_init(&b->wake, NULL) != 0) {
    pthread_mutex_destroy(&b->lock);
    free(b);
    return errbuf_printf(err, err_len, EMBER_ENOMEM, "out of memory");
  }
  *out = b;
  return 0;
}

void nam_fpga_board_destroy(nam_fpga_board *b) {
  if (!b) return;
  pthread_mutex_lock(&b->lock);
  b->closing = 1;
  pthread_cond_broadcast(&b->wake);
  while (b->n.hanging) pthread_cond_wait(&b->wake, &b->lock);
  pthread_mutex_unlock(&b->lock);
  pthread_cond_destroy(&b->wake);
  pthread_mutex_destroy(&b->lock);
  free(b);
}

const nam_fpga_emu_config *nam_fpga_board_config(const nam_fpga_board *b) {
  return &b->cfg;
}

int nam_fpga_board_can_load(const nam_fpga_board *b, const char *acc_name) {
  return find_bitstream(&b->cfg, acc_name) >= 0;
}

uint64_t nam_fpga_board_model_ns(const nam_fpga_board *b,
                                 const acc_descriptor *acc, uint64_t work) {
  if (!acc || !acc->fpga) return 0;
  double upc = acc->fpga->units_per_cycle, mhz = acc->fpga->clock_mhz;
  for (unsigned i = 0; i < b->cfg.n_timing; i++) {
    const nam_fpga_timing *t = &b->cfg.timing[i];
    if (strcmp(t->accelerator, acc->name) != 0) continue;
    if (t->units_per_cycle > 0) upc = t->units_per_cycle;
    if (t->clock_mhz > 0) mhz = t->clock_mhz;
  }
  uint64_t run = 0;
  if (upc > 0 && mhz > 0) /* work / (upc * mhz * 1e6) s, in ns */
    run = ceil_ns((double)work * 1e3 / (upc * mhz));
  return sat_add(acc->fpga->fixed_ns, run);
}

uint64_t nam_fpga_board_roofline_ns(const nam_fpga_board *b,
                                    const acc_descriptor *acc,
                                    const acc_cost *cost) {
  if (!acc || !acc->fpga) return 0;
  uint64_t compute = nam_fpga_board_model_ns(b, acc, cost->ops);
  double gbps = b->cfg.memory_gbps > 0 ? b->cfg.memory_gbps
                                       : FPGA_DEFAULT_MEMORY_GBPS;
  double eff = acc->fpga->memory_efficiency;
  if (eff > 0 && eff < 1) gbps *= eff;
  uint64_t bytes = cost->bytes_read + cost->bytes_written;
  uint64_t memory = sat_add(acc->fpga->fixed_ns, ceil_ns((double)bytes / gbps));
  return compute > memory ? compute : memory;
}

uint64_t nam_fpga_board_dma_ns(const nam_fpga_board *b, uint64_t bytes) {
  /* bytes / (gbps * 1e9) s = bytes / gbps ns */
  return ceil_ns((double)bytes / b->cfg.pcie_gbps);
}

uint64_t nam_fpga_board_reprogram_ns(nam_fpga_board *b, const char *acc_name) {
  pthread_mutex_lock(&b->lock);
  int loaded = b->loaded;
  pthread_mutex_unlock(&b->lock);
  if (loaded >= 0 && find_bitstream(&b->cfg, acc_name) == loaded) return 0;
  return b->cfg.reprogram_ms * 1000000u;
}

int nam_fpga_board_alloc(nam_fpga_board *b, uint64_t size) {
  int rc = 0;
  pthread_mutex_lock(&b->lock);
  if (size > b->cfg.memory - b->n.memory_used)
    rc = EMBER_ENOMEM;
  else
    b->n.memory_used += size;
  pthread_mutex_unlock(&b->lock);
  return rc;
}

void nam_fpga_board_free(nam_fpga_board *b, uint64_t size) {
  pthread_mutex_lock(&b->lock);
  b->n.memory_used -= size < b->n.memory_used ? size : b->n.memory_used;
  pthread_mutex_unlock(&b->lock);
}

/* Occupy resource r for dur from max(ready, when it is free); returns the
 * end. Real clock: a ready time of 0 is now. Called with the lock held. */
static uint64_t reserve(nam_fpga_board *b, int r, uint64_t ready,
                        uint64_t dur) {
  if (!b->cfg.virtual_clock && ready == 0) ready = clock_now_ns();
  uint64_t end = sat_add(max_u64(ready, b->free_at[r]), dur);
  b->free_at[r] = end;
  if (b->cfg.virtual_clock && end > b->n.virtual_ns) b->n.virtual_ns = end;
  return end;
}

int nam_fpga_board_dma(nam_fpga_board *b, enum nam_fpga_dir dir,
                       uint64_t bytes, uint64_t *clock) {
  if (dir != NAM_FPGA_TO_BOARD && dir != NAM_FPGA_FROM_BOARD)
    return EMBER_EINVAL;
  uint64_t dur = nam_fpga_board_dma_ns(b, bytes);
  pthread_mutex_lock(&b->lock);
  int r = dir == NAM_FPGA_TO_BOARD ? RES_TO_BOARD : RES_FROM_BOARD;
  uint64_t end = reserve(b, r, clock ? *clock : 0, dur);
  if (dir == NAM_FPGA_TO_BOARD)
    b->n.bytes_to += bytes;
  else
    b->n.bytes_from += bytes;
  pthread_mutex_unlock(&b->lock);
  if (!b->cfg.virtual_clock) sleep_until(end);
  if (clock) *clock = end;
  return 0;
}

int nam_fpga_board_load(nam_fpga_board *b, const char *acc_name,
                        uint64_t *clock) {
  int idx = find_bitstream(&b->cfg, acc_name);
  if (idx < 0) return EMBER_ENOTFOUND;
  uint64_t dur = b->cfg.reprogram_ms * 1000000u;
  pthread_mutex_lock(&b->lock);
  if (b->loaded == idx) {
    pthread_mutex_unlock(&b->lock);
    return 0;
  }
  b->loaded = idx;
  b->n.reprograms++;
  b->n.kernel_busy_ns += dur;
  uint64_t end = reserve(b, RES_KERNEL, clock ? *clock : 0, dur);
  pthread_mutex_unlock(&b->lock);
  if (!b->cfg.virtual_clock) sleep_until(end);
  if (clock) *clock = end;
  return 0;
}

void nam_fpga_board_kernel(nam_fpga_board *b, uint64_t model_ns,
                           uint64_t cpu_ns, uint64_t *clock) {
  pthread_mutex_lock(&b->lock);
  uint64_t end = reserve(b, RES_KERNEL, clock ? *clock : 0, model_ns);
  if (!b->cfg.virtual_clock) {
    /* the result exists only now: the stage cannot end before */
    uint64_t now = clock_now_ns();
    if (end < now) end = b->free_at[RES_KERNEL] = now;
  }
  b->n.kernel_busy_ns +=
      b->cfg.virtual_clock ? model_ns : max_u64(model_ns, cpu_ns);
  pthread_mutex_unlock(&b->lock);
  if (!b->cfg.virtual_clock) sleep_until(end);
  if (clock) *clock = end;
}

int nam_fpga_board_set_fault_rates(nam_fpga_board *b, double fail_rate,
                                   double hang_rate) {
  if (!valid_rate(fail_rate) || !valid_rate(hang_rate) ||
      fail_rate + hang_rate > 1)
    return EMBER_EINVAL;
  pthread_mutex_lock(&b->lock);
  b->cfg.fail_rate = fail_rate;
  b->cfg.hang_rate = hang_rate;
  pthread_mutex_unlock(&b->lock);
  return 0;
}

enum nam_fpga_fault nam_fpga_board_draw_fault(nam_fpga_board *b) {
  pthread_mutex_lock(&b->lock);
  /* 53 random bits: a double uniform in [0, 1) */
  double u = (double)(splitmix64(&b->rng) >> 11) * 0x1.0p-53;
  enum nam_fpga_fault f = NAM_FPGA_FAULT_NONE;
  if (u < b->cfg.fail_rate) {
    f = NAM_FPGA_FAULT_FAIL;
    b->n.failures_injected++;
  } else if (u < b->cfg.fail_rate + b->cfg.hang_rate) {
    f = NAM_FPGA_FAULT_HANG;
    b->n.hangs_injected++;
  }
  b->n.tasks++;
  pthread_mutex_unlock(&b->lock);
  return f;
}

int nam_fpga_board_hang(nam_fpga_board *b, const void *key,
                        const atomic_int *aborted) {
  hang_waiter w = {.key = key, .aborted = aborted};
  int rc;
  pthread_mutex_lock(&b->lock);
  w.next = b->waiters;
  b->waiters = &w;
  b->n.hanging++;
  for (;;) {
    if (b->closing) {
      rc = EMBER_ESHUTDOWN;
      break;
    }
    if (w.released || (w.aborted && atomic_load(w.aborted))) {
      rc = EMBER_ETIMEDOUT;
      break;
    }
    pthread_cond_wait(&b->wake, &b->lock);
  }
  for (hang_waiter **pp = &b->waiters; *pp; pp = &(*pp)->next)
    if (*pp == &w) {
      *pp = w.next;
      break;
    }
  b->n.hanging--;
  if (b->closing) pthread_cond_broadcast(&b->wake); /* destroy waits */
  pthread_mutex_unlock(&b->lock);
  return rc;
}

void nam_fpga_board_abort(nam_fpga_board *b, const void *key) {
  pthread_mutex_lock(&b->lock);
  for (hang_waiter *w = b->waiters; w; w = w->next)
    if (w->key == key) w->released = 1;
  pthread_cond_broadcast(&b->wake);
  pthread_mutex_unlock(&b->lock);
}

void nam_fpga_board_get_counters(nam_fpga_board *b,
                                 nam_fpga_board_counters *out) {
  pthread_mutex_lock(&b->lock);
  *out = b->n;
  if (b->loaded >= 0)
    snprintf(out->loaded, sizeof out->loaded, "%s",
             b->cfg.bitstreams[b->loaded]);
  else
    out->loaded[0] = '\0';
  pthread_mutex_unlock(&b->lock);
}
