/*
 * platform_kinds.h - the kinds of platform a NAM runs tasks on, described
 * once. The NAM daemon, the engine and libember use this table instead of
 * comparing kind names; a new kind is one PLATFORM_KINDS line (and its
 * back end in nam/engine/).
 *
 *   device     not the host CPU: its workers are a pipeline's depth, one
 *              task executes at a time; the NAM offers ACC@KIND labels for
 *              it (the host's kind is implied by a plain ACC label)
 *   bitstream  holds one bitstream at a time and reprograms to change it:
 *              reprogram counters, the loaded bitstream in heartbeats
 *
 * The order is the order of ember_platform_names (ember.h): never reorder,
 * append. Header only: no symbols, so libember exports nothing from here.
 */
#ifndef EMBER_PLATFORM_KINDS_H
#define EMBER_PLATFORM_KINDS_H

#include <string.h>

/* X(ID, name, device, bitstream) */
#define PLATFORM_KINDS(X)            \
  X(CPU, "cpu", 0, 0)                \
  X(OPENCL, "opencl", 1, 0)          \
  X(FPGA_EMU, "fpga-emu", 1, 1)

enum {
#define PLATFORM_KIND_ENUM(id, name, device, bitstream) PLATFORM_KIND_##id,
  PLATFORM_KINDS(PLATFORM_KIND_ENUM)
#undef PLATFORM_KIND_ENUM
  PLATFORM_KIND_COUNT
};

typedef struct platform_kind_info {
  char name[12];  /* an array, so platform_kinds[K].name is a constant */
  unsigned char device, bitstream;
} platform_kind_info;

static const platform_kind_info platform_kinds[PLATFORM_KIND_COUNT] = {
#define PLATFORM_KIND_ROW(id, n, d, b) [PLATFORM_KIND_##id] = {n, d, b},
    PLATFORM_KINDS(PLATFORM_KIND_ROW)
#undef PLATFORM_KIND_ROW
};

/* The kind called name (PLATFORM_KIND_*), or -1. */
static inline int platform_kind_find(const char *name) {
  for (int k = 0; k < PLATFORM_KIND_COUNT; k++)
    if (strcmp(platform_kinds[k].name, name) == 0) return k;
  return -1;
}

/* Whether the kind called name is a device / holds a bitstream (see the
 * top of this file); 0 for a name that is no kind. */
static inline int platform_kind_is_device(const char *name) {
  int k = platform_kind_find(name);
  return k >= 0 && platform_kinds[k].device;
}

static inline int platform_kind_has_bitstream(const char *name) {
  int k = platform_kind_find(name);
  return k >= 0 && platform_kinds[k].bitstream;
}

#endif
