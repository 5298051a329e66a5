/*
 * plugins.h - accelerators loaded from shared objects in plugin_dir.
 *
 * nam_plugins_load() opens every "NAME.so" in the directory, in name order,
 * and keeps each one that passes all the checks below; every refusal is
 * logged (warning, with the path and the reason) and counted by reason:
 *   unsafe      the directory or the file can be changed by someone other
 *               than root or the daemon's user: owner neither of them,
 *               group- or world-writable, a symbolic link, not a regular
 *               file (checked with fstat on the opened descriptors, and the
 *               file that is loaded is the one checked: /proc/self/fd/N).
 *               A refused directory counts once and loads nothing.
 *   dlopen      dlopen failed (not a shared object, a missing library or
 *               symbol)
 *   symbol      no ACC_PLUGIN_SYMBOL, or it returned NULL
 *   abi         abi_version is not ACC_ABI_VERSION
 *   incomplete  no valid name (1 to 63 letters, digits, '_', '.', '-') or
 *               a mandatory function missing (validate, run_cpu, release,
 *               work)
 *   clash       the name is a built-in's or an earlier plugin's
 * Objects are opened RTLD_NOW | RTLD_LOCAL; a loaded one is never unmapped
 * (RTLD_NODELETE) and its file stays open (the loader knows it by the name
 * /proc/self/fd/N, which no other file may take): its descriptor stays
 * valid for the process's life, even after nam_plugins_unload. Load once
 * per process.
 *
 * Plugins run in the daemon's process: see accel.h for what that means.
 * Threads: the loop thread, at start-up.
 */
#ifndef EMBER_NAM_PLUGINS_H
#define EMBER_NAM_PLUGINS_H

#include <stddef.h>
#include <stdint.h>

#include "accel.h"

#define NAM_PLUGIN_REFUSALS(X)                                               \
  X(UNSAFE, "unsafe")                                                        \
  X(DLOPEN, "dlopen")                                                        \
  X(SYMBOL, "symbol")                                                        \
  X(ABI, "abi")                                                              \
  X(INCOMPLETE, "incomplete")                                                \
  X(CLASH, "clash")

enum nam_plugin_refusal {
#define X(id, text) NAM_PLUGIN_##id,
  NAM_PLUGIN_REFUSALS(X)
#undef X
  NAM_PLUGIN_N_REFUSALS
};

typedef struct nam_plugin {
  char *path;                /* dir/NAME.so */
  void *handle;              /* dlopen's */
  const acc_descriptor *acc;
} nam_plugin;

typedef struct nam_plugins {
  nam_plugin *items;
  size_t count;
  uint64_t refused[NAM_PLUGIN_N_REFUSALS];
} nam_plugins;

/*
 * nam_plugins_load - load the plugins of dir into p (zeroed by the call).
 * Names already taken are builtins[0 .. n_builtins). A missing directory
 * loads nothing and is not an error (logged at info). Returns 0 or
 * EMBER_ENOMEM (p then holds what was loaded so far).
 */
int nam_plugins_load(const char *dir, const acc_descriptor *const *builtins,
                     size_t n_builtins, nam_plugins *p);

/* nam_plugins_unload - dlclose and free the list; p is zeroed. NULL is a
 * no-op. */
void nam_plugins_unload(nam_plugins *p);

/* The reason's label ("unsafe"), as in the log and the metrics. */
const char *nam_plugin_refusal_name(enum nam_plugin_refusal r);

#endif
