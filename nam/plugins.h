/*
 * plugins.h - the daemon's side of the plugin loader: load plugin_dir's
 * plugins with the library's checks (accelerators/plugin_loader.h) and log
 * what was loaded and every refusal (warning, with the path and the
 * reason); the counters by reason stay in nam_plugins for the metrics.
 * Threads: the loop thread, at start-up.
 */
#ifndef EMBER_NAM_PLUGINS_H
#define EMBER_NAM_PLUGINS_H

#include <stddef.h>

#include "accel.h"
#include "plugin_loader.h"

typedef acc_plugins nam_plugins;

/*
 * nam_plugins_load - acc_plugins_load, logged. A missing directory loads
 * nothing and is not an error (logged at info). Returns 0 or EMBER_ENOMEM
 * (p then holds what was loaded so far).
 */
int nam_plugins_load(const char *dir, const acc_descriptor *const *builtins,
                     size_t n_builtins, nam_plugins *p);

/* nam_plugins_unload - acc_plugins_unload. NULL is a no-op. */
void nam_plugins_unload(nam_plugins *p);

#endif
