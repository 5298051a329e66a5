/*
 * fpga_emu_board.h - the model of one emulated FPGA board, the state behind
 * the fpga-emu platform (platform_fpga_emu.c). It knows nothing of the
 * engine: it models resources and time, the platform computes results with
 * the accelerators' CPU code.
 *
 * The board (modelled on Blaze's AlphaData ADM-PCIE-7V3, section 6.1) has:
 *   - device memory: bytes accounted by alloc/free, refused beyond its size
 *     (the engine's block cache keeps within it; this is a safety net);
 *   - one PCIe link, full duplex: host->board and board->host are separate
 *     resources, each serialised; bytes take bytes / (pcie_gbps * 1e9) s;
 *   - one kernel resource: at most one bitstream loaded (none at first);
 *     loading another occupies the kernel for reprogram_ms (Blaze 5.1: 1-2
 *     s); a kernel stage lasts its modelled time m, and in real-clock mode
 *     never less than the time c the CPU code took: max(m, c);
 *   - fault injection: each task draws once from a seeded PRNG
 *     (splitmix64): it fails with probability fail_rate, hangs with
 *     probability hang_rate (until aborted, or the board is destroyed).
 *
 * Time. Every operation takes a clock value (in) - when its input is ready
 * - and returns (out) when it ends; it starts at max(ready, the time its
 * resource is free), and its resource stays busy until it ends. A task
 * carries its clock from stage to stage (the platform keeps it in
 * nam_task.device_clock_ns), so task k+1's DMA overlaps task k's kernel
 * exactly as far as the resources allow.
 *   - real clock (virtual_clock = 0): clock values are CLOCK_MONOTONIC ns;
 *     a ready time of 0 means now. The calling thread sleeps until the
 *     operation's end (clock_nanosleep on the absolute end, so that sleep
 *     overshoot does not add up from one stage to the next). An operation
 *     never ends before its model says; it may end later (a late thread).
 *   - virtual clock (virtual_clock = 1): clock values are simulated ns from
 *     0 and nothing sleeps, so hours of board time run in seconds. A ready
 *     time of 0 means "as soon as the resource is free". The board's
 *     virtual now is the latest end seen. Virtual time advances only with
 *     work: a board idle in real time loses no virtual time.
 *
 * Threads: every function may be called from any thread (one mutex, never
 * held while sleeping or blocked).
 */
#ifndef EMBER_NAM_FPGA_EMU_BOARD_H
#define EMBER_NAM_FPGA_EMU_BOARD_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "accel.h"
#include "engine.h" /* nam_fpga_emu_config, nam_fpga_emu_config_defaults */

typedef struct nam_fpga_board nam_fpga_board;

/* The two directions of the PCIe link. */
enum nam_fpga_dir {
  NAM_FPGA_TO_BOARD,   /* host -> board (inputs) */
  NAM_FPGA_FROM_BOARD, /* board -> host (outputs) */
};

/* What a task's fault draw gave. */
enum nam_fpga_fault {
  NAM_FPGA_FAULT_NONE,
  NAM_FPGA_FAULT_FAIL, /* the task fails: the platform returns EPLATFORM */
  NAM_FPGA_FAULT_HANG, /* the task hangs: see nam_fpga_board_hang */
};

/* Counters since create; loaded, memory_used, hanging and virtual_ns are
 * snapshots. */
typedef struct nam_fpga_board_counters {
  char loaded[32];          /* the bitstream loaded, "" before the first */
  uint64_t reprograms;      /* bitstream loads (the first one included) */
  uint64_t tasks;           /* fault draws: one per task executed */
  uint64_t failures_injected, hangs_injected;
  uint64_t bytes_to, bytes_from; /* DMA host->board, board->host */
  uint64_t kernel_busy_ns;  /* kernel stages and reprograms */
  uint64_t virtual_ns;      /* virtual clock: the latest end seen; 0 in
                               real-clock mode */
  uint64_t memory_used;     /* bytes allocated now */
  unsigned hanging;         /* calls blocked in nam_fpga_board_hang now */
} nam_fpga_board_counters;

/*
 * nam_fpga_board_create - a board for cfg (copied). Checks the config:
 * memory > 0, pcie_gbps > 0, rates in [0, 1] with fail + hang <= 1, counts
 * within NAM_FPGA_MAX_BITSTREAMS, override rates >= 0 (0: keep the
 * accelerator's own). Returns 0 and *out (freed with destroy), EMBER_EINVAL
 * with the reason in err, or EMBER_ENOMEM.
 */
int nam_fpga_board_create(const nam_fpga_emu_config *cfg,
                          nam_fpga_board **out, char *err, size_t err_len);

/*
 * nam_fpga_board_destroy - free the board. Calls blocked in
 * nam_fpga_board_hang return EMBER_ESHUTDOWN first (destroy waits until
 * they have left); no other call may be in flight or follow. NULL: no-op.
 */
void nam_fpga_board_destroy(nam_fpga_board *b);

/* nam_fpga_board_config - the board's config (valid until destroy). */
const nam_fpga_emu_config *nam_fpga_board_config(const nam_fpga_board *b);

/* nam_fpga_board_can_load - 1 when acc_name is one of the board's
 * bitstreams, else 0. */
int nam_fpga_board_can_load(const nam_fpga_board *b, const char *acc_name);

/*
 * nam_fpga_board_model_ns - the modelled kernel time of work units of acc
 * on this board: fixed_ns + work / (units_per_cycle * clock_mhz * 1e6) s,
 * from acc->fpga with the board's timing overrides for acc->name; rounded
 * up, saturating. 0 when acc has no FPGA model.
 */
uint64_t nam_fpga_board_model_ns(const nam_fpga_board *b,
                                 const acc_descriptor *acc, uint64_t work);

/*
 * nam_fpga_board_roofline_ns - the kernel time of a task of declared cost
 * on this board (accel.h's roofline): fixed_ns + max(bytes / memory_gbps,
 * ops / (units_per_cycle * clock_mhz * 1e6)) s, i.e. the larger of
 * model_ns(ops) and fixed_ns + the memory time of bytes read and written.
 * 0 when acc has no FPGA model.
 */
uint64_t nam_fpga_board_roofline_ns(const nam_fpga_board *b,
                                    const acc_descriptor *acc,
                                    const acc_cost *cost);

/* nam_fpga_board_dma_ns - the modelled time of a bytes-long transfer in
 * one direction, rounded up. */
uint64_t nam_fpga_board_dma_ns(const nam_fpga_board *b, uint64_t bytes);

/* nam_fpga_board_reprogram_ns - what loading acc_name would cost now:
 * reprogram_ms in ns, or 0 when it is the bitstream loaded. */
uint64_t nam_fpga_board_reprogram_ns(nam_fpga_board *b, const char *acc_name);

/*
 * nam_fpga_board_alloc - account size bytes of device memory. Returns 0,
 * or EMBER_ENOMEM when that would exceed the board's memory (nothing
 * accounted then). nam_fpga_board_free gives size bytes back.
 */
int nam_fpga_board_alloc(nam_fpga_board *b, uint64_t size);
void nam_fpga_board_free(nam_fpga_board *b, uint64_t size);

/*
 * nam_fpga_board_dma - transfer bytes in direction dir. *clock in: when the
 * data is ready (see Time above; clock NULL reads as 0); out: when the
 * transfer ends. Real clock: sleeps until then. Counts the bytes. Returns
 * 0, or EMBER_EINVAL for an unknown direction.
 */
int nam_fpga_board_dma(nam_fpga_board *b, enum nam_fpga_dir dir,
                       uint64_t bytes, uint64_t *clock);

/*
 * nam_fpga_board_load - make acc_name the loaded bitstream. When another one
 * (or none) is loaded, the kernel resource reprograms for reprogram_ms,
 * starting at max(*clock, kernel free), and the reprogram is counted; real
 * clock: sleeps until it ends. *clock in: when the task is ready; out: when
 * the bitstream is loaded (unchanged when it already was). Returns 0, or
 * EMBER_ENOTFOUND when acc_name is not one of the board's bitstreams.
 */
int nam_fpga_board_load(nam_fpga_board *b, const char *acc_name,
                        uint64_t *clock);

/*
 * nam_fpga_board_kernel - one kernel stage of modelled length model_ns,
 * whose CPU computation took cpu_ns (measured by the caller, just before).
 * Starts at max(*clock, kernel free). Real clock: ends at max(start +
 * model_ns, now), sleeping until then - the stage lasts max(m, c) and never
 * less than the model; virtual clock: ends at start + model_ns (cpu_ns is
 * ignored). *clock in: when the task is ready (after its load); out: when
 * the stage ends. Adds the stage to kernel_busy_ns.
 */
void nam_fpga_board_kernel(nam_fpga_board *b, uint64_t model_ns,
                           uint64_t cpu_ns, uint64_t *clock);

/*
 * nam_fpga_board_draw_fault - a task's one draw (counts the task, and the
 * fault injected). Deterministic: the n-th draw of a board depends only on
 * its seed and n.
 */
enum nam_fpga_fault nam_fpga_board_draw_fault(nam_fpga_board *b);

/*
 * nam_fpga_board_hang - block as a hung kernel does, until
 * nam_fpga_board_abort(b, key) is called, or *aborted reads nonzero (may be
 * NULL; whoever sets it must then call nam_fpga_board_abort, with any key,
 * to wake the waiter), or the board is destroyed. Returns EMBER_ETIMEDOUT
 * when aborted, EMBER_ESHUTDOWN when the board is being destroyed. An abort
 * that came before the hang began is not remembered: use aborted for that.
 */
int nam_fpga_board_hang(nam_fpga_board *b, const void *key,
                        const atomic_int *aborted);

/* nam_fpga_board_abort - release the hang(s) waiting with key, and make
 * every waiter check its aborted flag. No hang waiting: nothing happens. */
void nam_fpga_board_abort(nam_fpga_board *b, const void *key);

/* nam_fpga_board_set_fault_rates - change the fault injection of a running
 * board (a config reload): later draws use the new rates. Returns 0, or
 * EMBER_EINVAL (nothing changed) unless both are in [0, 1] and their sum at
 * most 1. */
int nam_fpga_board_set_fault_rates(nam_fpga_board *b, double fail_rate,
                                   double hang_rate);

/* nam_fpga_board_get_counters - a consistent snapshot. */
void nam_fpga_board_get_counters(nam_fpga_board *b,
                                 nam_fpga_board_counters *out);

#endif
