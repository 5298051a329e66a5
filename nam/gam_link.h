/*
 * gam_link.h - the NAM's connection to ember-gam, on the daemon's loop.
 *
 * It connects over TCP, greets (Hello/Welcome), sends Register {node,
 * address, labels, platforms, version, auth: its answer under the cluster
 * key to the Welcome's challenge (proto/node_auth.h)}, then a Heartbeat every interval:
 * the labels served now, what the engine has disabled ("ACC@KIND", and
 * "ACC" when no platform is left for it), per-accelerator queue length and
 * utilization, the bitstream of each FPGA, the leases its clients hold and
 * its platforms. From each HeartbeatAck it adopts the GAM's interval,
 * disconnects the clients of ended leases and notes a drain.
 *
 * Utilization of an accelerator is sampled ten times an interval: the
 * execution slots busy with it (a cpu platform's workers, one per device;
 * an FPGA's slot belongs to its loaded bitstream, other slots are shared
 * in the ratio of the accelerators' running tasks) over the slots that can
 * run it, averaged over the interval.
 *
 * When the GAM cannot be reached or the connection breaks (or stays silent
 * for five intervals), the link says so once in the log and retries with
 * exponential backoff and jitter (200 ms doubling to 10 s), registering
 * again each time; the NAM serves its local clients meanwhile. Nothing here
 * blocks the loop.
 *
 * Threads: the loop thread only.
 */
#ifndef EMBER_NAM_GAM_LINK_H
#define EMBER_NAM_GAM_LINK_H

#include <stdint.h>

#include <uv.h>

#include "engine.h"
#include "lease.h"
#include "node_labels.h"
#include "server.h"

typedef struct nam_gam_link nam_gam_link;

typedef struct nam_gam_link_config {
  const char *gam;        /* HOST:PORT (or tcp:HOST:PORT) of ember-gam */
  const char *node;       /* this node's name at the GAM */
  const char *address;    /* tcp:HOST:PORT apps reach it at; "" none */
  const nam_node_labels *labels; /* configured labels; must outlive the link */
  uint64_t interval_ms;   /* heartbeat interval until the GAM says */
  const char *version;    /* the NAM's version */
  const lease_key *key;   /* the cluster key (copied); required */
} nam_gam_link_config;

/*
 * nam_gam_link_start - start connecting (the first attempt runs on the
 * loop, at once). server and engine must outlive the link (close it first).
 * Returns 0 and *out, EMBER_ECONFIG for a gam that is not HOST:PORT (the
 * reason in err), or EMBER_ENOMEM.
 */
int nam_gam_link_start(uv_loop_t *loop, nam_server *server, nam_engine *engine,
                       const nam_gam_link_config *cfg, nam_gam_link **out,
                       char *err, size_t err_len);

/* nam_gam_link_close - disconnect and stop; the link frees itself once the
 * loop has run its close callbacks. NULL: no-op. */
void nam_gam_link_close(nam_gam_link *link);

#endif
