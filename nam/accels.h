/*
 * accels.h - the accelerators this ember-nam serves: the built-ins
 * (accelerators/registry.c) in their order, then the plugins loaded from
 * plugin_dir (plugins.h) in file name order. The daemon looks accelerators
 * up here, never in the built-in registry alone.
 *
 * One set per process: nam_accels_load() at start-up (engine_setup.c),
 * nam_accels_unload() after the engine is gone. Before the load, and after
 * the unload, the set is the built-ins. Threads: load and unload on the
 * loop thread while no other thread reads; the readers are any thread.
 */
#ifndef EMBER_NAM_ACCELS_H
#define EMBER_NAM_ACCELS_H

#include <stddef.h>

#include "accel.h"
#include "plugins.h"

/* Load the plugins of plugin_dir ("" or NULL: none). Returns 0 or
 * EMBER_ENOMEM. */
int nam_accels_load(const char *plugin_dir);
void nam_accels_unload(void);

/* The set as an array, for nam_engine_config.accelerators (NULL before the
 * load: the engine then serves the built-ins). */
const acc_descriptor *const *nam_accels_list(size_t *count);

/* As acc_registry_count/get, over the whole set. */
size_t nam_accels_count(void);
const acc_descriptor *nam_accels_get(size_t index);

/* The accelerator named name, or NULL. */
const acc_descriptor *nam_accel_find(const char *name);

/* Where acc comes from: "built-in" or the plugin's path. */
const char *nam_accel_origin(const acc_descriptor *acc);

/* The loader's counters (loaded, refused by reason), for the metrics. */
const nam_plugins *nam_accels_plugins(void);

#endif
