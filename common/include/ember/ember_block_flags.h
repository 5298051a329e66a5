/*
 * ember_block_flags.h - what a block is and how long its copies stay: the
 * flags of ember_block_alloc/ember_block_create, the wire's PutBlock.flags
 * and the NAM's block cache. Values are never renumbered.
 */
#ifndef EMBER_BLOCK_FLAGS_H
#define EMBER_BLOCK_FLAGS_H

#define EMBER_BLOCK_CACHE     0x1u  /* keep on the platform after its task */
#define EMBER_BLOCK_BROADCAST 0x2u  /* keep for the client's lifetime */
#define EMBER_BLOCK_STATE     0x4u  /* app-owned state: tasks that name it as
                                       state update it in place on the one
                                       platform that holds it; the bytes
                                       given are its first version */

#endif
