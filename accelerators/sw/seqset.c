/* seqset.c - the sequence-set block layout (see seqset.h). */
#include "seqset.h"

#include <stdarg.h>
#include <stdio.h>

#include "ember/ember_errors.h"
#include "sw_internal.h"

static void put_u32(uint8_t *p, uint32_t v) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
  v = __builtin_bswap32(v);
#endif
  memcpy(p, &v, sizeof v);
}

const char *acc_sw_residue_text(unsigned char c, char *buf, size_t len) {
  if (c >= 0x21 && c <= 0x7e)
    snprintf(buf, len, "'%c' (0x%02x)", c, c);
  else
    snprintf(buf, len, "0x%02x", c);
  return buf;
}

size_t acc_seqset_bytes(const size_t *lengths, size_t count) {
  if (count >= UINT32_MAX) return 0;
  uint64_t residues = 0;
  for (size_t i = 0; i < count; i++) {
    if (lengths[i] > UINT32_MAX) return 0;
    residues += lengths[i];
    if (residues > UINT32_MAX) return 0;
  }
  uint64_t total = ACC_SEQSET_HEADER + 4 * ((uint64_t)count + 1) + residues;
  if (total > SIZE_MAX) return 0;
  return (size_t)total;
}

int acc_seqset_write(uint8_t *dst, size_t dst_size,
                     const char *const *residues, const size_t *lengths,
                     size_t count) {
  size_t need = acc_seqset_bytes(lengths, count);
  if (need == 0 || dst == NULL || dst_size != need) return EMBER_EINVAL;
  put_u32(dst, ACC_SEQSET_MAGIC);
  put_u32(dst + 4, (uint32_t)count);
  uint8_t *offsets = dst + ACC_SEQSET_HEADER;
  uint8_t *area = offsets + 4 * (count + 1);
  uint32_t at = 0;
  for (size_t i = 0; i < count; i++) {
    put_u32(offsets + 4 * i, at);
    if (lengths[i]) memcpy(area + at, residues[i], lengths[i]);
    at += (uint32_t)lengths[i];
  }
  put_u32(offsets + 4 * count, at);
  return 0;
}

int acc_seqset_view(const acc_block *b, acc_seqset *out, char *err,
                    size_t err_len) {
  if (!b || !out || (!b->data && b->size)) {
    return errbuf_printf(err, err_len, EMBER_EFORMAT, "no block");
  }
  if (b->size < ACC_SEQSET_HEADER) {
    return errbuf_printf(
        err, err_len, EMBER_EFORMAT,
        "truncated: %zu bytes, a sequence set needs at least 12", b->size);
  }
  uint32_t magic = acc_seqset_u32(b->data);
  if (magic != ACC_SEQSET_MAGIC) {
    return errbuf_printf(
        err, err_len, EMBER_EFORMAT,
        "not a sequence set: magic 0x%08x, expected 0x%08x (ESQ1)", magic,
        ACC_SEQSET_MAGIC);
  }
  uint32_t count = acc_seqset_u32(b->data + 4);
  /* count + 1 offsets must fit in what follows the header */
  uint64_t table = 4 * ((uint64_t)count + 1);
  uint64_t avail = b->size - ACC_SEQSET_HEADER;
  if (table > avail) {
    return errbuf_printf(err, err_len, EMBER_EFORMAT,
                         "truncated: count %u needs a %llu-byte offset table, "
                         "only %llu bytes follow the header",
                         count, (unsigned long long)table,
                         (unsigned long long)avail);
  }
  const uint8_t *offsets = b->data + ACC_SEQSET_HEADER;
  uint64_t area = avail - table;
  uint32_t prev = acc_seqset_u32(offsets);
  if (prev != 0) {
    return errbuf_printf(err, err_len, EMBER_EFORMAT,
                         "offsets[0] is %u, must be 0", prev);
  }
  for (uint32_t i = 1; i <= count; i++) {
    uint32_t o = acc_seqset_u32(offsets + 4 * (size_t)i);
    if (o < prev) {
      return errbuf_printf(err, err_len, EMBER_EFORMAT,
                           "offsets decrease at sequence %u: %u after %u", i, o,
                           prev);
    }
    if (o > area) {
      return errbuf_printf(
          err, err_len, EMBER_EFORMAT,
          "offset of sequence %u ends at %u, beyond the %llu-byte "
          "residue area",
          i - 1, o, (unsigned long long)area);
    }
    prev = o;
  }
  if (prev != area) {
    return errbuf_printf(
        err, err_len, EMBER_EFORMAT,
        "size mismatch: residues end at %u but the block holds %llu "
        "residue bytes",
        prev, (unsigned long long)area);
  }
  out->count = count;
  out->offsets = offsets;
  out->residues = offsets + table;
  return 0;
}
