/* registry.c - the built-in accelerators. */
#include "accel.h"

#include <string.h>

/* The built-ins, one line each: X(name) for the descriptor
 * acc_<name>_descriptor, built by ember_add_accelerator(<name> ...) in
 * accelerators/<name>/CMakeLists.txt (which checks that the line is here).
 * The order is the listing's. */
#define ACC_BUILTINS(X) \
  X(sw) \
  X(plf) \
  X(cnn)

#define DECLARE(name) extern const acc_descriptor acc_##name##_descriptor;
ACC_BUILTINS(DECLARE)
#undef DECLARE

#define ENTRY(name) &acc_##name##_descriptor,
static const acc_descriptor *const builtin[] = {ACC_BUILTINS(ENTRY)};
#undef ENTRY

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
