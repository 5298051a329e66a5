/*
 * seqset.h - the byte layout of a block holding a set of sequences.
 *
 * The "sw" accelerator takes two such blocks (queries, references); the
 * client builds them, the daemons pass them through untouched, and the
 * accelerator reads them in place. All integers are little-endian uint32:
 *
 *   magic    0x31515345 ("ESQ1" in memory order)
 *   count    number of sequences
 *   offsets  count + 1 byte offsets into the residue area; offsets[0] is 0,
 *            they never decrease, offsets[count] is the residue area's size
 *   residues the residue bytes, sequence i being
 *            residues[offsets[i] .. offsets[i+1])
 *
 * A block is exactly 8 + 4 * (count + 1) + offsets[count] bytes. Blocks may
 * arrive unaligned (inline in a TCP frame): every field is read with memcpy.
 */
#ifndef EMBER_ACC_SEQSET_H
#define EMBER_ACC_SEQSET_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../accel.h"

#define ACC_SEQSET_MAGIC 0x31515345u
#define ACC_SEQSET_HEADER 8u           /* magic + count */

/* A checked view of a block; it points into the block and owns nothing. */
typedef struct acc_seqset {
  uint32_t count;
  const uint8_t *offsets;   /* count + 1 little-endian uint32, unaligned */
  const uint8_t *residues;
} acc_seqset;

/* acc_seqset_bytes: the size of a block holding count sequences of the given
 * lengths, or 0 when it would not fit the layout (more than UINT32_MAX - 1
 * sequences or residues) or size_t. lengths may be NULL when count is 0. */
size_t acc_seqset_bytes(const size_t *lengths, size_t count);

/* acc_seqset_write: lay out count sequences (residues[i], lengths[i] bytes)
 * into dst. Returns 0, or EMBER_EINVAL when the set does not fit the layout
 * or dst_size differs from acc_seqset_bytes() (dst is then left untouched). */
int acc_seqset_write(uint8_t *dst, size_t dst_size,
                     const char *const *residues, const size_t *lengths,
                     size_t count);

/* acc_seqset_view: check a block's layout (magic, count against the size,
 * every offset) before anything is read through it, and fill *out.
 * Returns 0, or EMBER_EFORMAT with the reason in err ("offsets decrease at
 * sequence 17: 40 after 52"). b->data may be unaligned. Thread-safe. */
int acc_seqset_view(const acc_block *b, acc_seqset *out, char *err,
                    size_t err_len);

static inline uint32_t acc_seqset_u32(const uint8_t *p) {
  uint32_t v;
  memcpy(&v, p, sizeof v);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap32(v);
#endif
  return v;
}

/* acc_seqset_get: sequence i (i < s->count) of a checked view. */
static inline void acc_seqset_get(const acc_seqset *s, uint32_t i,
                                  const uint8_t **residues, size_t *len) {
  uint32_t a = acc_seqset_u32(s->offsets + 4 * (size_t)i);
  uint32_t b = acc_seqset_u32(s->offsets + 4 * ((size_t)i + 1));
  *residues = s->residues + a;
  *len = b - a;
}

#endif
