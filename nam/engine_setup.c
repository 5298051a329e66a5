/* engine_setup.c - ember-nam's configuration as the engine's (see .h). */
#include "engine_setup.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "accel.h"
#include "accels.h"
#include "ember/ember_errors.h"
#include "log.h"

static void engine_event(void *user, int level, const char *msg) {
  (void)user;
  LOG(level, "%s", msg);
}

/* mkdir -p: the kernel cache's parent may be missing outside systemd
 * (which makes /var/cache/ember through CacheDirectory=). */
static void make_dirs(const char *path) {
  char buf[4096];
  snprintf(buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/') continue;
    *p = '\0';
    mkdir(buf, 0755);
    *p = '/';
  }
  if (mkdir(buf, 0755) != 0 && errno != EEXIST)
    log_warn("kernel cache %s: %s (kernels are built at every start)", path,
             strerror(errno));
}

/* add_bitstream - name to the board's list, once; false when it is full. */
static bool add_bitstream(nam_fpga_emu_config *b, const char *name) {
  for (unsigned i = 0; i < b->n_bitstreams; i++)
    if (strcmp(b->bitstreams[i], name) == 0) return true;
  if (b->n_bitstreams >= NAM_FPGA_MAX_BITSTREAMS) return false;
  snprintf(b->bitstreams[b->n_bitstreams++], sizeof b->bitstreams[0], "%s",
           name);
  return true;
}

/* The boards' bitstreams: the configured names, where the word "builtin"
 * stands for every built-in accelerator that has an FPGA model (sw, plf,
 * cnn), so that a board serves all of them unless told otherwise. */
static int fill_bitstreams(const struct nam_config *cfg,
                           nam_fpga_emu_config *b, char *err, size_t err_len) {
  for (size_t i = 0; i < cfg->fpga_bitstreams.count; i++) {
    const char *item = cfg->fpga_bitstreams.items[i];
    bool ok = true;
    if (strcmp(item, "builtin") == 0) {
      for (size_t k = 0; k < acc_registry_count(); k++) {
        const acc_descriptor *d = acc_registry_get(k);
        if (d->fpga) ok = ok && add_bitstream(b, d->name);
      }
    } else {
      ok = add_bitstream(b, item);
    }
    if (!ok) {
      snprintf(err, err_len, "fpga-emu.bitstreams: more than %d accelerators",
               NAM_FPGA_MAX_BITSTREAMS);
      return EMBER_ECONFIG;
    }
  }
  return 0;
}

static int fill_board(const struct nam_config *cfg, unsigned index,
                      nam_fpga_emu_config *b, char *err, size_t err_len) {
  nam_fpga_emu_config_defaults(b);
  snprintf(b->name, sizeof b->name, "fpga%u", index);
  b->memory = cfg->fpga_memory;
  b->pcie_gbps = cfg->fpga_pcie_mbps / 1000.0;
  b->memory_gbps = cfg->fpga_memory_mbps / 1000.0;
  b->reprogram_ms = cfg->fpga_reprogram_ms;
  if (fill_bitstreams(cfg, b, err, err_len)) return EMBER_ECONFIG;
  for (size_t i = 0; i < cfg->fpga_timing.count &&
                     i < NAM_FPGA_MAX_BITSTREAMS; i++) {
    nam_fpga_timing *t = &b->timing[b->n_timing];
    if (nam_timing_parse(cfg->fpga_timing.items[i], t->accelerator,
                         sizeof t->accelerator, &t->units_per_cycle,
                         &t->clock_mhz, err, err_len))
      return EMBER_ECONFIG;
    b->n_timing++;
  }
  if (nam_rate_parse(cfg->fpga_fail_rate, &b->fail_rate, err, err_len) ||
      nam_rate_parse(cfg->fpga_hang_rate, &b->hang_rate, err, err_len))
    return EMBER_ECONFIG;
  b->seed = (uint64_t)cfg->fpga_seed + index;
  b->virtual_clock = cfg->fpga_clock;
  return 0;
}

int nam_engine_setup_build(const struct nam_config *cfg, nam_engine_setup *s,
                           char *err, size_t err_len) {
  memset(s, 0, sizeof *s);
  nam_engine_config *e = &s->engine;
  e->cpu_workers = (unsigned)cfg->cpu_workers;
  e->queue_capacity = (unsigned)cfg->queue_capacity;
  e->scheduler = cfg->scheduler;
  e->pipeline_depth = (unsigned)cfg->pipeline_depth;
  e->sticky_off = !cfg->sticky;
  e->reprogram_bound_ms = cfg->reprogram_bound_ms;
  e->fail_threshold = (unsigned)cfg->fail_threshold;
  e->probe_ms = cfg->probe_interval_ms;
  e->task_timeout_ms = cfg->task_timeout_ms;
  e->timeout_factor = (unsigned)cfg->timeout_factor;
  e->accel_cache_set = 1;
  e->accel_cache_bytes = cfg->accelerator_cache;
  e->opencl.enabled = cfg->opencl_enabled;
  e->opencl.max_memory = cfg->opencl_max_memory;
  if (cfg->opencl_enabled && cfg->opencl_cache_dir[0]) {
    make_dirs(cfg->opencl_cache_dir);
    e->opencl.cache_dir = cfg->opencl_cache_dir;
  }
  e->event = engine_event;
  /* built-ins and plugins: the engine gets one queue for each */
  if (nam_accels_load(cfg->plugin_dir) != 0) return EMBER_ENOMEM;
  e->accelerators = nam_accels_list(&e->n_accelerators);
  if (cfg->fpga_boards > 0) {
    s->boards = calloc((size_t)cfg->fpga_boards, sizeof *s->boards);
    if (!s->boards) return EMBER_ENOMEM;
    for (int i = 0; i < cfg->fpga_boards; i++)
      if (fill_board(cfg, (unsigned)i, &s->boards[i], err, err_len)) {
        nam_engine_setup_free(s);
        return EMBER_ECONFIG;
      }
    e->fpga = s->boards;
    e->n_fpga = (unsigned)cfg->fpga_boards;
  }
  return 0;
}

void nam_engine_setup_free(nam_engine_setup *s) {
  nam_accels_unload();
  free(s->boards);
  memset(s, 0, sizeof *s);
}
