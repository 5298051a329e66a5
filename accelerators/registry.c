/* registry.c - the built-in accelerators. */
#include "accel.h"

#include <string.h>

#include "sw/sw.h"

static const acc_descriptor *const builtin[] = {
  &acc_sw_descriptor,
};

size_t acc_registry_count(void) {
  return sizeof builtin / sizeof builtin[0];
}

const acc_descriptor *acc_registry_get(size_t index) {
  return index < acc_registry_count() ? builtin[index] : NULL;
}

const acc_descriptor *acc_registry_find(const char *name) {
  if (!name) return NULL;
  for (size_t i = 0; i < acc_registry_count(); i++)
    if (strcmp(builtin[i]->name, name) == 0) return builtin[i];
  return NULL;
}
