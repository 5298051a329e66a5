/* plugins.c - the accelerators of libember's in-process engine: the
 * built-ins, then the plugins of the client's plugin_dir, loaded with the
 * same checks as ember-nam's (accelerators/plugin_loader.h).
 *
 * Each directory is loaded once per process and kept for its life: the
 * loader pins every plugin it accepts (RTLD_NODELETE, its file kept open),
 * so loading again for every client would only pile up descriptors. The
 * sets are reachable from `sets` until exit. */
#include "plugins.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ember/ember.h"
#include "last_error.h"
#include "plugin_loader.h"

struct ember__accel_set {
  char *dir;
  acc_plugins plugins;
  const acc_descriptor **list; /* built-ins, then plugins */
  size_t count;
  struct ember__accel_set *next;
};

static pthread_mutex_t sets_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ember__accel_set *sets;

static void set_free(struct ember__accel_set *s) {
  acc_plugins_unload(&s->plugins);
  free(s->list);
  free(s->dir);
  free(s);
}

static int set_load(const char *dir, struct ember__accel_set **out) {
  struct ember__accel_set *s = calloc(1, sizeof *s);
  size_t nb = acc_registry_count();
  if (!s || !(s->dir = strdup(dir)) ||
      !(s->list = malloc((nb ? nb : 1) * sizeof *s->list))) {
    if (s) free(s->dir);
    free(s);
    return EMBER_ENOMEM;
  }
  for (size_t i = 0; i < nb; i++) s->list[i] = acc_registry_get(i);
  int rc = acc_plugins_load(dir, s->list, nb, &s->plugins);
  const acc_descriptor **all =
      rc ? NULL : realloc(s->list, (nb + s->plugins.count) * sizeof *all);
  if (!all) {
    set_free(s);
    return EMBER_ENOMEM;
  }
  for (size_t i = 0; i < s->plugins.count; i++)
    all[nb + i] = s->plugins.items[i].acc;
  s->list = all;
  s->count = nb + s->plugins.count;
  *out = s;
  return 0;
}

int ember__plugins_get(const char *dir, const struct ember__accel_set **out) {
  *out = NULL;
  if (!dir || !dir[0]) return 0;
  pthread_mutex_lock(&sets_lock);
  struct ember__accel_set *s = sets;
  while (s && strcmp(s->dir, dir) != 0) s = s->next;
  int rc = 0;
  if (!s && (rc = set_load(dir, &s)) == 0) {
    s->next = sets;
    sets = s;
  }
  pthread_mutex_unlock(&sets_lock);
  if (rc) {
    ember__client_set_error("plugin_dir %s: out of memory", dir);
    return rc;
  }
  *out = s;
  return 0;
}

void ember__plugins_report(const struct ember__accel_set *s, char *buf,
                           size_t len) {
  buf[0] = '\0';
  if (!s) return;
  size_t used = 0;
#define PUT(...)                                                             \
  do {                                                                       \
    int n_ = snprintf(buf + used, len - used, __VA_ARGS__);                  \
    if (n_ > 0) used += (size_t)n_;                                          \
    if (used >= len) return;                                                 \
  } while (0)
  if (s->plugins.dir_missing)
    PUT("plugin_dir %s does not exist: no plugins", s->dir);
  if (s->plugins.error[0])
    PUT("plugin_dir %s: %s", s->dir, s->plugins.error);
  for (size_t i = 0; i < s->plugins.n_refusals; i++) {
    const acc_plugin_refused *r = &s->plugins.refusals[i];
    PUT("%splugin %s refused (%s): %s", used ? "; " : "", r->path,
        acc_plugin_refusal_name(r->reason), r->why);
  }
#undef PUT
}

size_t ember__plugins_loaded(const struct ember__accel_set *s) {
  return s ? s->plugins.count : 0;
}

size_t ember__plugins_refused(const struct ember__accel_set *s) {
  return s ? s->plugins.n_refusals : 0;
}

const acc_descriptor *const *ember__accels_list(const struct ember__accel_set *s,
                                                size_t *count) {
  *count = s ? s->count : 0;
  return s ? s->list : NULL;
}

size_t ember__accels_count(const struct ember__accel_set *s) {
  return s ? s->count : acc_registry_count();
}

const acc_descriptor *ember__accels_get(const struct ember__accel_set *s,
                                        size_t index) {
  if (!s) return acc_registry_get(index);
  return index < s->count ? s->list[index] : NULL;
}

const acc_descriptor *ember__accel_find(const struct ember__accel_set *s,
                                        const char *name) {
  if (!name) return NULL;
  for (size_t i = 0; i < ember__accels_count(s); i++)
    if (strcmp(ember__accels_get(s, i)->name, name) == 0)
      return ember__accels_get(s, i);
  return NULL;
}

const char *ember__accel_origin(const struct ember__accel_set *s,
                                const acc_descriptor *acc) {
  for (size_t i = 0; s && i < s->plugins.count; i++)
    if (s->plugins.items[i].acc == acc) return s->plugins.items[i].path;
  return "built-in";
}
