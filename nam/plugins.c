/* plugins.c - the plugin loader, logged (see plugins.h). */
#include "plugins.h"

#include "log.h"

int nam_plugins_load(const char *dir, const acc_descriptor *const *builtins,
                     size_t n_builtins, nam_plugins *p) {
  int rc = acc_plugins_load(dir, builtins, n_builtins, p);
  if (p->dir_missing)
    log_info("plugin_dir %s does not exist: no plugins", dir);
  if (p->error[0]) log_err("plugin_dir %s: %s", dir, p->error);
  for (size_t i = 0; i < p->n_refusals; i++) {
    const acc_plugin_refused *r = &p->refusals[i];
    log_warn("plugin %s refused (%s): %s", r->path,
             acc_plugin_refusal_name(r->reason), r->why);
  }
  for (size_t i = 0; i < p->count; i++)
    log_notice("plugin %s: accelerator %s version %u loaded",
               p->items[i].path, p->items[i].acc->name,
               p->items[i].acc->version);
  return rc;
}

void nam_plugins_unload(nam_plugins *p) { acc_plugins_unload(p); }
