/* blocks.h - blocks.c's references, for the tasks that hold blocks. */
#ifndef EMBER_BLOCKS_H
#define EMBER_BLOCKS_H

#include "client.h"

void ember__block_ref(ember_block *b);
/* the last one lets the block go where it lives, then frees it */
void ember__block_unref(ember_block *b);
/* an out block's handle (no bytes until read) */
ember_block *ember__block_new_output(ember_client *c);

#endif
