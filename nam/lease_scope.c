/* lease_scope.c - the accelerators and platform kinds a lease's label
 * names (lease_scope.h). */
#include "lease_scope.h"

#include <stdio.h>
#include <string.h>

#include "accels.h"
#include "ember/ember_errors.h"
#include "platform_kinds.h"

int nam_lease_scope(const char *label, const char *accelerator,
                    const char *platform, const char **kind, char *why,
                    size_t why_len) {
  *kind = NULL;
  const char *at = strchr(label, '@');
  size_t acc_len = at ? (size_t)(at - label) : strlen(label);
  char acc[72];
  snprintf(acc, sizeof acc, "%.*s", (int)(acc_len < 71 ? acc_len : 71), label);
  const char *label_kind = at ? at + 1 : NULL;
  if (!nam_accel_find(acc) ||
      (label_kind && platform_kind_find(label_kind) < 0)) {
    snprintf(why, why_len, "lease for label '%s' names no accelerator "
             "(ACC or ACC@KIND): it authorises none", label);
    return EMBER_EDENIED;
  }
  if (strcmp(acc, accelerator) != 0) {
    snprintf(why, why_len, "lease for label '%s' authorises '%s' only, not "
             "'%s'", label, acc, accelerator);
    return EMBER_EDENIED;
  }
  if (label_kind && platform && platform[0] &&
      strcmp(platform, label_kind) != 0) {
    snprintf(why, why_len, "lease for label '%s' authorises platform kind "
             "'%s' only, not '%s'", label, label_kind, platform);
    return EMBER_EDENIED;
  }
  *kind = label_kind;
  return 0;
}
