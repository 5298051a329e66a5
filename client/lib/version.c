/* version.c - ember_version(): the library's own version, which can be
 * newer than the headers a program was compiled with (EMBER_VERSION_STRING). */
#include "ember/ember.h"

const char *ember_version(void) { return EMBER_LIB_VERSION; }
