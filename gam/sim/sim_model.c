/*
 * sim_model.c - the model's default parameters, and where each comes from.
 *
 * The FPGA timing reproduces the emulated board's parameters
 * (nam/engine/fpga_emu_board.c, nam_fpga_emu_config_defaults) instead of
 * driving a nam_fpga_board: the board has one fixed reprogram time per
 * board, while this model draws each reprogram in [min, max], and the
 * simulator needs no thread, lock or engine to decide which task an FPGA
 * runs next. The figures are the board's:
 *   reprogram   1-2 s, drawn per reprogram (Blaze 5.1: "1~2 seconds"; the
 *               board's default 1500 ms is the middle)
 *   PCIe        6.0 GB/s host -> board (the board's effective Gen3 x8)
 * and the NAM's:
 *   sticky bound 3 s: an FPGA keeps its bitstream while it has tasks for it,
 *               until another accelerator's oldest task has waited this long
 *               since the last switch (ember-nam's reprogram_bound default,
 *               nam/engine/dispatch.c)
 * The apps are assumed, LR-like and KM-like (Blaze 6.6 gives no sizes):
 *   one task = one 256 MiB block through PCIe then the kernel; LR's kernel
 *   (a gradient pass, memory-bound) 40 ms a block, KM's (distances to k
 *   centres) 90 ms; 10 passes over the input; inputs of 1, 2, 4 and 8 GB
 *   asking for 1, 2, 3 and 4 containers (at most one per node).
 */
#include "sim.h"

void sim_model_defaults(sim_model *m) {
  *m = (sim_model){
      .nodes = 4,
      .slots = 4,
      .heartbeat_ns = 1 * SIM_S,
      .reprogram_min_ns = 1000 * SIM_MS,
      .reprogram_max_ns = 2000 * SIM_MS,
      .reprogram_bound_ns = 3 * SIM_S,
      .inflight = 2,
      .pcie_gbps = 6.0,
      .block_bytes = 256ull << 20,
      .kernel_ns = {[SIM_LR] = 40 * SIM_MS, [SIM_KM] = 90 * SIM_MS},
      .iterations = {[SIM_LR] = 10, [SIM_KM] = 10},
      .delay_max_skips = 80,
      .arrival_window = 0.5,
      .apps = 24,
      .seed = 1,
  };
}

const char *sim_label_name(int label) {
  return label == SIM_LR ? "lr" : label == SIM_KM ? "km" : "?";
}
