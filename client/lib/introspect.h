/* introspect.h - ember_listing's builders (introspect.c), for the back
 * ends: from the in-process engine, or from a NAM's AcceleratorList. */
#ifndef EMBER_INTROSPECT_H
#define EMBER_INTROSPECT_H

#include "client.h"

struct nam_engine;
struct Ember__AcceleratorList;

/* 0, or EMBER_ENOMEM; *out is then the caller's (ember_listing_free) */
int ember__listing_from_engine(const ember_client *c, struct nam_engine *e,
                               ember_listing **out);
int ember__listing_from_reply(const struct Ember__AcceleratorList *m,
                              ember_listing **out);

#endif
