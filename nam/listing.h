/* listing.h - the AcceleratorList reply: the engine's platforms and
 * accelerators as protocol messages (ListAccelerators). */
#ifndef EMBER_NAM_LISTING_H
#define EMBER_NAM_LISTING_H

#include "engine.h"
#include "proto/ember.pb-c.h"

#define NAM_LIST_MAX 16

/* Storage for one reply; the message points into it. */
typedef struct nam_listing {
  nam_platform_status status[NAM_LIST_MAX];
  Ember__PlatformInfo pi[NAM_LIST_MAX], *pip[NAM_LIST_MAX];
  Ember__PairInfo pairs[NAM_LIST_MAX][NAM_MAX_PAIRS];
  Ember__PairInfo *pairp[NAM_LIST_MAX][NAM_MAX_PAIRS];
  Ember__AcceleratorInfo ai[NAM_LIST_MAX], *aip[NAM_LIST_MAX];
  char plat_names[NAM_LIST_MAX][256];
  char *plat_lists[NAM_LIST_MAX][1];
  Ember__AcceleratorList msg;
} nam_listing;

/* nam_listing_build - snapshot engine into l->msg. */
void nam_listing_build(nam_engine *engine, nam_listing *l);

/* nam_kinds_available - "cpu, fpga-emu, opencl": the platform kinds that
 * can run acc (for error messages). */
void nam_kinds_available(nam_engine *engine, const acc_descriptor *acc,
                         char *buf, size_t len);

#endif
