/* plugins.h - the accelerators of libember's in-process engine
 * (plugins.c): the built-ins and plugin_dir's plugins, as one set. */
#ifndef EMBER_PLUGINS_H
#define EMBER_PLUGINS_H

#include <stddef.h>

#include "accel.h"

/* a set NULL stands for the built-ins */
struct ember__accel_set;
/* the set of dir's plugins, loaded on first use ("" or NULL: *out NULL);
 * 0 or EMBER_ENOMEM */
int ember__plugins_get(const char *dir, const struct ember__accel_set **out);
/* "" or what was refused, and why, for ember_last_error */
void ember__plugins_report(const struct ember__accel_set *s, char *buf,
                           size_t len);
size_t ember__plugins_loaded(const struct ember__accel_set *s);
size_t ember__plugins_refused(const struct ember__accel_set *s);
/* the whole set for nam_engine_config (NULL: the built-ins) */
const acc_descriptor *const *ember__accels_list(const struct ember__accel_set *s,
                                                size_t *count);
size_t ember__accels_count(const struct ember__accel_set *s);
const acc_descriptor *ember__accels_get(const struct ember__accel_set *s,
                                        size_t index);
const acc_descriptor *ember__accel_find(const struct ember__accel_set *s,
                                        const char *name);
/* "built-in" or the plugin's path */
const char *ember__accel_origin(const struct ember__accel_set *s,
                                const acc_descriptor *acc);

#endif
