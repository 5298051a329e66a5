/*
 * engine_setup.h - from ember-nam's configuration to the engine's: the
 * scheduling keys, the accelerators (built-ins and plugin_dir's plugins,
 * accels.h), the OpenCL platform, the emulated FPGA boards.
 */
#ifndef EMBER_NAM_ENGINE_SETUP_H
#define EMBER_NAM_ENGINE_SETUP_H

#include "engine.h"
#include "nam_config.h"

/* What the engine config points into; lives as long as the engine. */
typedef struct nam_engine_setup {
  nam_engine_config engine;
  nam_fpga_emu_config *boards;
} nam_engine_setup;

/* nam_engine_setup_build - fill s from cfg (boards fpga0..N-1, seeds seed +
 * N); loads the plugins (refusals are logged, not errors); creates the
 * kernel cache directory when missing (a failure only means no cache:
 * logged). Returns 0, EMBER_ENOMEM or EMBER_ECONFIG (why in err). */
int nam_engine_setup_build(const struct nam_config *cfg, nam_engine_setup *s,
                           char *err, size_t err_len);
/* nam_engine_setup_free - after the engine is destroyed (unloads the
 * plugins). */
void nam_engine_setup_free(nam_engine_setup *s);

#endif
