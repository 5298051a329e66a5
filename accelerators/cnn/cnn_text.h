/*
 * cnn_text.h - text appended to a caller's buffer the way snprintf writes:
 * as much as fits, always NUL-terminated when len > 0, and the length the
 * whole text needs counted, for cnn_net_format and cnn_plan_format.
 */
#ifndef CNN_TEXT_H
#define CNN_TEXT_H

#include <stddef.h>

typedef struct cnn_text {
  char *buf;    /* may be NULL when len is 0 */
  size_t len;   /* the buffer's size */
  size_t need;  /* bytes of the whole text so far, without the NUL */
} cnn_text;

/* cnn_text_put - append printf(f, ...) to o. */
void cnn_text_put(cnn_text *o, const char *f, ...)
    __attribute__((format(printf, 2, 3)));

#endif
