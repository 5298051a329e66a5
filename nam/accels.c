/* accels.c - the daemon's accelerators: built-ins and plugins (accels.h). */
#include "accels.h"

#include <stdlib.h>
#include <string.h>

#include "ember/ember_errors.h"

static struct {
  nam_plugins plugins;
  const acc_descriptor **list;  /* built-ins, then plugins; NULL: built-ins */
  size_t count;
} set;

int nam_accels_load(const char *plugin_dir) {
  nam_accels_unload();
  size_t nb = acc_registry_count();
  const acc_descriptor **b = malloc((nb ? nb : 1) * sizeof *b);
  if (!b) return EMBER_ENOMEM;
  for (size_t i = 0; i < nb; i++) b[i] = acc_registry_get(i);
  int rc = nam_plugins_load(plugin_dir, b, nb, &set.plugins);
  const acc_descriptor **all =
      rc ? NULL : realloc(b, (nb + set.plugins.count) * sizeof *all);
  if (!all) {
    free(b);
    nam_plugins_unload(&set.plugins);
    return EMBER_ENOMEM;
  }
  for (size_t i = 0; i < set.plugins.count; i++)
    all[nb + i] = set.plugins.items[i].acc;
  set.list = all;
  set.count = nb + set.plugins.count;
  return 0;
}

void nam_accels_unload(void) {
  nam_plugins_unload(&set.plugins);
  free(set.list);
  set.list = NULL;
  set.count = 0;
}

const acc_descriptor *const *nam_accels_list(size_t *count) {
  *count = set.count;
  return set.list;
}

size_t nam_accels_count(void) {
  return set.list ? set.count : acc_registry_count();
}

const acc_descriptor *nam_accels_get(size_t index) {
  if (!set.list) return acc_registry_get(index);
  return index < set.count ? set.list[index] : NULL;
}

const acc_descriptor *nam_accel_find(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0; i < nam_accels_count(); i++)
    if (strcmp(nam_accels_get(i)->name, name) == 0) return nam_accels_get(i);
  return NULL;
}

const char *nam_accel_origin(const acc_descriptor *acc) {
  for (size_t i = 0; i < set.plugins.count; i++)
    if (set.plugins.items[i].acc == acc) return set.plugins.items[i].path;
  return "built-in";
}

const nam_plugins *nam_accels_plugins(void) { return &set.plugins; }
