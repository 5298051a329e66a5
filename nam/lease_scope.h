/*
 * lease_scope.h - what a lease lets its holder run. A lease is for one
 * label; a label that names an accelerator ("sw") authorises that
 * accelerator on any platform, "ACC@KIND" ("sw@fpga-emu") that accelerator
 * on platforms of that kind only, and any other label (an admin's
 * "big-memory") names no accelerator and authorises none: the GAM's labels
 * are only names, so a lease is never wider than its label says.
 */
#ifndef EMBER_NAM_LEASE_SCOPE_H
#define EMBER_NAM_LEASE_SCOPE_H

#include <stddef.h>

/*
 * nam_lease_scope - may the holder of a lease for label submit a task of
 * accelerator, with platform the kind it requires ("" or NULL: any)? 0 and
 * in *kind the kind the task must run on (a pointer into label; NULL: any),
 * or EMBER_EDENIED with the reason for the client in why.
 */
int nam_lease_scope(const char *label, const char *accelerator,
                    const char *platform, const char **kind, char *why,
                    size_t why_len);

#endif
