/*
 * plugin_loader.h - accelerators loaded from shared objects in a plugin
 * directory, with the safety checks. A library: it never logs and never
 * exits; it records what it loaded and what it refused (with the path and
 * the reason) for its caller to report: ember-nam logs and counts them
 * (nam/plugins.c), libember reports them through ember_last_error()
 * (client/lib/plugins.c).
 *
 * acc_plugins_load() opens every "NAME.so" in the directory, in name order,
 * and keeps each one that passes all the checks below; every refusal is
 * recorded and counted by reason:
 *   unsafe      the directory or the file can be changed by someone other
 *               than root or the process's user: owner neither of them,
 *               group- or world-writable, a symbolic link, not a regular
 *               file (checked with fstat on the opened descriptors, and the
 *               file that is loaded is the one checked: /proc/self/fd/N).
 *               A refused directory counts once and loads nothing.
 *   dlopen      dlopen failed (not a shared object, a missing library or
 *               symbol)
 *   symbol      no ACC_PLUGIN_SYMBOL, or it returned NULL
 *   abi         abi_version is not ACC_ABI_OLDEST .. ACC_ABI_VERSION
 *   incomplete  no valid name (1 to 63 letters, digits, '_', '.', '-') or
 *               a mandatory function missing (validate, run_cpu, release,
 *               work)
 *   clash       the name is a built-in's or an earlier plugin's
 * Objects are opened RTLD_NOW | RTLD_LOCAL; a loaded one is never unmapped
 * (RTLD_NODELETE) and its file stays open (the loader knows it by the name
 * /proc/self/fd/N, which no other file may take): its descriptor stays
 * valid for the process's life, even after acc_plugins_unload. Load a
 * directory once per process: every load keeps one descriptor per plugin.
 *
 * Plugins run in the loading process: see accel.h for what that means.
 * Threads: one load or unload at a time per acc_plugins; the loaded
 * descriptors may be used from any thread.
 */
#ifndef EMBER_ACC_PLUGIN_LOADER_H
#define EMBER_ACC_PLUGIN_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include "accel.h"

#define ACC_PLUGIN_REFUSALS(X)                                               \
  X(UNSAFE, "unsafe")                                                        \
  X(DLOPEN, "dlopen")                                                        \
  X(SYMBOL, "symbol")                                                        \
  X(ABI, "abi")                                                              \
  X(INCOMPLETE, "incomplete")                                                \
  X(CLASH, "clash")

enum acc_plugin_refusal {
#define X(id, text) ACC_REFUSAL_##id,
  ACC_PLUGIN_REFUSALS(X)
#undef X
  ACC_PLUGIN_N_REFUSALS
};

typedef struct acc_plugin {
  char *path;                /* dir/NAME.so */
  void *handle;              /* dlopen's */
  const acc_descriptor *acc;
} acc_plugin;

typedef struct acc_plugin_refused {
  char *path;                /* dir/NAME.so, or dir itself */
  enum acc_plugin_refusal reason;
  char *why;                 /* the detail, e.g. "writable by its group
                                (mode 0664)" */
} acc_plugin_refused;

typedef struct acc_plugins {
  acc_plugin *items;
  size_t count;
  acc_plugin_refused *refusals; /* in the order they happened */
  size_t n_refusals;
  uint64_t refused[ACC_PLUGIN_N_REFUSALS]; /* by reason */
  int dir_missing;           /* the directory does not exist (not an
                                error: nothing is loaded) */
  char error[256];           /* "" or why the directory could not be read
                                (not a refusal: nothing was loaded) */
} acc_plugins;

/*
 * acc_plugins_load - load the plugins of dir into p (zeroed by the call).
 * Names already taken are builtins[0 .. n_builtins). NULL or "" loads
 * nothing. Returns 0 or EMBER_ENOMEM (p then holds what was loaded and
 * refused so far); refusals, a missing directory and an unreadable one are
 * not errors: they are in p.
 */
int acc_plugins_load(const char *dir, const acc_descriptor *const *builtins,
                     size_t n_builtins, acc_plugins *p);

/* acc_plugins_unload - dlclose and free the lists; p is zeroed. NULL is a
 * no-op. */
void acc_plugins_unload(acc_plugins *p);

/* The reason's label ("unsafe"), as in logs and metrics. */
const char *acc_plugin_refusal_name(enum acc_plugin_refusal r);

#endif
