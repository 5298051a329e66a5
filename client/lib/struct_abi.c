/* struct_abi.c - the size fields of ember.h's public structs: a program
 * built against older headers passes smaller structs, and the library must
 * neither read nor write past what the program allocated. */
#include "struct_abi.h"

#include "last_error.h"

#include <string.h>

int ember__struct_in(void *dst, size_t dst_size, const void *src,
                     size_t v0_size, const char *what) {
  memset(dst, 0, dst_size);
  if (src) {
    size_t size;
    memcpy(&size, src, sizeof size);
    if (size == 0) size = v0_size;
    if (size < sizeof size) {
      ember__client_set_error("%s: size %zu is too small", what, size);
      return EMBER_EINVAL;
    }
    memcpy(dst, src, size < dst_size ? size : dst_size);
  }
  memcpy(dst, &dst_size, sizeof dst_size);
  return 0;
}

void ember__struct_out(void *dst, const void *src, size_t src_size,
                       size_t v0_size) {
  size_t size;
  memcpy(&size, dst, sizeof size);
  if (size == 0) size = v0_size;
  if (size < sizeof size) return; /* nothing we may write, not even size */
  size_t n = size < src_size ? size : src_size;
  memcpy(dst, src, n);
  memcpy(dst, &n, sizeof n);
}
