/* frame.c - framing, limits and fd passing for ember's wire protocol. */
#include "frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ember/ember_errors.h"

#define READ_CHUNK PROTO_READ_CHUNK

static const struct {
  const char *name;
  const ProtobufCMessageDescriptor *descriptor;
} message_types[] = {
  [EMBER__MSG_TYPE__MSG_HELLO] = {"Hello", &ember__hello__descriptor},
  [EMBER__MSG_TYPE__MSG_WELCOME] = {"Welcome", &ember__welcome__descriptor},
  [EMBER__MSG_TYPE__MSG_ERROR] = {"Error", &ember__error__descriptor},
  [EMBER__MSG_TYPE__MSG_LIST_ACCELERATORS] =
      {"ListAccelerators", &ember__list_accelerators__descriptor},
  [EMBER__MSG_TYPE__MSG_ACCELERATOR_LIST] =
      {"AcceleratorList", &ember__accelerator_list__descriptor},
  [EMBER__MSG_TYPE__MSG_PUT_BLOCK] = {"PutBlock", &ember__put_block__descriptor},
  [EMBER__MSG_TYPE__MSG_RELEASE_BLOCK] =
      {"ReleaseBlock", &ember__release_block__descriptor},
  [EMBER__MSG_TYPE__MSG_SUBMIT] = {"Submit", &ember__submit__descriptor},
  [EMBER__MSG_TYPE__MSG_CANCEL] = {"Cancel", &ember__cancel__descriptor},
  [EMBER__MSG_TYPE__MSG_RESULT] = {"Result", &ember__result__descriptor},
  [EMBER__MSG_TYPE__MSG_STATS_REQUEST] =
      {"StatsRequest", &ember__stats_request__descriptor},
  [EMBER__MSG_TYPE__MSG_STATS] = {"Stats", &ember__stats__descriptor},
  [EMBER__MSG_TYPE__MSG_REGISTER] = {"Register", &ember__register__descriptor},
  [EMBER__MSG_TYPE__MSG_HEARTBEAT] =
      {"Heartbeat", &ember__heartbeat__descriptor},
  [EMBER__MSG_TYPE__MSG_HEARTBEAT_ACK] =
      {"HeartbeatAck", &ember__heartbeat_ack__descriptor},
  [EMBER__MSG_TYPE__MSG_ACQUIRE] = {"Acquire", &ember__acquire__descriptor},
  [EMBER__MSG_TYPE__MSG_ALLOCATION] =
      {"Allocation", &ember__allocation__descriptor},
  [EMBER__MSG_TYPE__MSG_RELEASE] = {"Release", &ember__release__descriptor},
  [EMBER__MSG_TYPE__MSG_LEASE_ENDED] =
      {"LeaseEnded", &ember__lease_ended__descriptor},
  [EMBER__MSG_TYPE__MSG_BLOCK_OP] = {"BlockOp", &ember__block_op__descriptor},
  [EMBER__MSG_TYPE__MSG_BLOCK_REPLY] =
      {"BlockReply", &ember__block_reply__descriptor},
  [EMBER__MSG_TYPE__MSG_LEASE_PROOF] =
      {"LeaseProof", &ember__lease_proof__descriptor},
};

#define N_TYPES (sizeof message_types / sizeof message_types[0])

const ProtobufCMessageDescriptor *proto_descriptor(uint8_t type) {
  return type < N_TYPES ? message_types[type].descriptor : NULL;
}

const char *proto_type_name(uint8_t type) {
  return type < N_TYPES && message_types[type].name ? message_types[type].name
                                                    : "unknown";
}

void proto_reader_init(proto_reader *r, size_t max_frame) {
  memset(r, 0, sizeof *r);
  r->max_frame = max_frame ? max_frame : PROTO_DEFAULT_MAX_FRAME;
}

/* Buffers up to READ_CHUNK come from malloc; larger ones (a large frame)
 * are mappings of their own, so that giving one back returns its pages
 * to the system at once, whatever the allocator would keep. */
static void buf_free(uint8_t *buf, size_t cap) {
  if (cap > READ_CHUNK)
    munmap(buf, cap);
  else
    free(buf);
}

/* A buffer of cap bytes holding the first keep bytes of buf (old_cap
 * bytes); buf is given back unless this fails (NULL). */
static uint8_t *buf_resize(uint8_t *buf, size_t old_cap, size_t cap,
                           size_t keep) {
  if (old_cap > READ_CHUNK && cap > READ_CHUNK) {
    void *p = mremap(buf, old_cap, cap, MREMAP_MAYMOVE);
    return p == MAP_FAILED ? NULL : p;
  }
  if (old_cap <= READ_CHUNK && cap <= READ_CHUNK) return realloc(buf, cap);
  uint8_t *p;
  if (cap > READ_CHUNK) {
    void *m = mmap(NULL, cap, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    p = m == MAP_FAILED ? NULL : m;
  } else {
    p = malloc(cap);
  }
  if (!p) return NULL;
  if (keep) memcpy(p, buf, keep);
  buf_free(buf, old_cap);
  return p;
}

void proto_reader_free(proto_reader *r) {
  if (r->buf) buf_free(r->buf, r->cap);
  for (size_t i = 0; i < r->nfds; i++)
    if (r->fds[i].fd >= 0) close(r->fds[i].fd);
  memset(r, 0, sizeof *r);
}

static uint32_t read_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
         (uint32_t)p[3] << 24;
}

/* The buffer without a large frame: a chunk, or less when no frame can be
 * longer (before a handshake). */
static size_t base_cap(const proto_reader *r) {
  return r->max_frame < READ_CHUNK - PROTO_HEADER_SIZE
             ? PROTO_HEADER_SIZE + r->max_frame : READ_CHUNK;
}

static void compact(proto_reader *r) {
  if (r->start == 0) return;
  memmove(r->buf, r->buf + r->start, r->end - r->start);
  r->end -= r->start;
  r->start = 0;
}

/* Make room for at least want more bytes after end. Growth is bounded by
 * the frame limit: callers only ask for what a checked header announced. */
static int reserve(proto_reader *r, size_t want) {
  if (r->start > 0 && r->start == r->end) r->start = r->end = 0;
  if (r->cap - r->end >= want) return 0;
  compact(r);
  if (r->cap - r->end >= want) return 0;
  size_t need = r->end + want;
  size_t cap = r->cap ? r->cap : base_cap(r);
  while (cap < need) cap *= 2;
  uint8_t *buf = r->buf ? buf_resize(r->buf, r->cap, cap, r->end)
                        : cap > READ_CHUNK ? buf_resize(NULL, 0, cap, 0)
                                           : malloc(cap);
  if (!buf) return EMBER_ENOMEM;
  r->buf = buf;
  r->cap = cap;
  return 0;
}

int proto_reader_head(const proto_reader *r, size_t *len, uint8_t *type) {
  if (r->end - r->start < PROTO_HEADER_SIZE) return 0;
  if (len) *len = read_le32(r->buf + r->start);
  if (type) *type = r->buf[r->start + 4];
  return 1;
}

size_t proto_reader_held(const proto_reader *r) {
  return r->cap > READ_CHUNK ? r->cap - READ_CHUNK : 0;
}

void proto_reader_shrink(proto_reader *r) {
  size_t base = base_cap(r);
  if (r->cap <= base) return;
  size_t need = r->end - r->start, len;
  if (proto_reader_head(r, &len, NULL) && PROTO_HEADER_SIZE + len > need)
    need = PROTO_HEADER_SIZE + len; /* a large frame on its way: keep room */
  if (need > base) return;
  compact(r);
  uint8_t *buf = buf_resize(r->buf, r->cap, base, r->end);
  if (!buf) return; /* keep the larger one; the next shrink tries again */
  r->buf = buf;
  r->cap = base;
}

uint8_t *proto_reader_space(proto_reader *r, size_t *avail, int *err) {
  size_t want = base_cap(r);
  size_t have = r->end - r->start;
  /* when a header is complete, make room for the whole (checked) frame:
   * from then on it is taken, whatever max_frame becomes */
  if (have >= PROTO_HEADER_SIZE) {
    size_t len = read_le32(r->buf + r->start);
    if ((len <= r->max_frame || r->taken) && PROTO_HEADER_SIZE + len > have) {
      r->taken = 1;
      if (PROTO_HEADER_SIZE + len - have > want)
        want = PROTO_HEADER_SIZE + len - have;
    }
  }
  int rc = reserve(r, want);
  if (rc) {
    if (err) *err = rc;
    return NULL;
  }
  *avail = r->cap - r->end;
  return r->buf + r->end;
}

void proto_reader_commit(proto_reader *r, size_t n) { r->end += n; }

int proto_reader_feed(proto_reader *r, const void *data, size_t len) {
  const uint8_t *p = data;
  while (len > 0) {
    size_t avail;
    int err = 0;
    uint8_t *dst = proto_reader_space(r, &avail, &err);
    if (!dst) return err;
    size_t n = len < avail ? len : avail;
    memcpy(dst, p, n);
    proto_reader_commit(r, n);
    p += n;
    len -= n;
  }
  return 0;
}

int proto_reader_next(proto_reader *r, proto_frame *out) {
  size_t have = r->end - r->start;
  if (have < PROTO_HEADER_SIZE) return 0;
  const uint8_t *h = r->buf + r->start;
  size_t len = read_le32(h);
  if (len > r->max_frame && !r->taken) return EMBER_ETOOBIG;
  if (have - PROTO_HEADER_SIZE < len) return 0;
  out->type = h[4];
  out->payload = h + PROTO_HEADER_SIZE;
  out->len = len;
  out->offset = r->offset;
  r->start += PROTO_HEADER_SIZE + len;
  r->offset += PROTO_HEADER_SIZE + len;
  r->taken = 0;
  return 1;
}

static size_t max_fds(const proto_reader *r) {
  return r->max_fds && r->max_fds < PROTO_MAX_PENDING_FDS
             ? r->max_fds : PROTO_MAX_PENDING_FDS;
}

static void remove_fd(proto_reader *r, size_t i) {
  memmove(r->fds + i, r->fds + i + 1, (r->nfds - i - 1) * sizeof r->fds[0]);
  r->nfds--;
}

int proto_reader_push_fd(proto_reader *r, int fd) {
  if (r->nfds >= max_fds(r)) return EMBER_ETOOBIG;
  r->fds[r->nfds++] = (proto_fd){.fd = fd, .from = 0, .to = UINT64_MAX};
  return 0;
}

int proto_reader_pop_fd(proto_reader *r) {
  if (r->nfds == 0) return -1;
  int fd = r->fds[0].fd;
  remove_fd(r, 0);
  return fd;
}

int proto_reader_take_fd(proto_reader *r, uint64_t at) {
  if (r->nfds == 0 || r->fds[0].from > at) return -1;
  return proto_reader_pop_fd(r);
}

void proto_reader_refuse_fd(proto_reader *r, size_t i) {
  if (i >= r->nfds || r->fds[i].fd < 0) return;
  close(r->fds[i].fd);
  r->fds[i].fd = PROTO_FD_REFUSED;
}

size_t proto_reader_drop_fds(proto_reader *r, int all) {
  size_t closed = 0;
  for (size_t i = 0; i < r->nfds;) {
    if (all || r->fds[i].to <= r->offset) {
      if (r->fds[i].fd >= 0) {
        close(r->fds[i].fd);
        closed++;
      }
      remove_fd(r, i);
    } else {
      i++;
    }
  }
  return closed;
}

ssize_t proto_recv(int sock, proto_reader *r) {
  size_t avail;
  int err = 0;
  uint8_t *dst = proto_reader_space(r, &avail, &err);
  if (!dst) return -ENOMEM;
  union {
    char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS_PER_SEND)];
    struct cmsghdr align;
  } ctrl;
  struct iovec iov = {.iov_base = dst, .iov_len = avail};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1,
                       .msg_control = ctrl.buf,
                       .msg_controllen = sizeof ctrl.buf};
  ssize_t n;
  do {
    n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return -errno;
  /* where these bytes lie in the stream; a read that did not fill the room
   * ended where a message did (the kernel stops only there, or after the
   * message that carried fds), one that filled it may have stopped inside
   * one, whose end a later read bounds */
  uint64_t from = r->offset + (r->end - r->start), to = from + (uint64_t)n;
  int full = (size_t)n == avail;
  ssize_t rc = (msg.msg_flags & MSG_CTRUNC) ? -EPROTO : 0;
  size_t before = r->nfds;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    size_t nfds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < nfds; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (rc == 0 && r->nfds < max_fds(r))
        r->fds[r->nfds++] = (proto_fd){.fd = fd, .from = from,
                                       .to = full ? UINT64_MAX : to};
      else {
        close(fd);
        if (rc == 0) rc = -ETOOMANYREFS;
      }
    }
  }
  if (rc) { /* none of this read's fds stays, nor its bytes */
    while (r->nfds > before) close(r->fds[--r->nfds].fd);
    return rc;
  }
  if (!full)
    for (size_t i = 0; i < before; i++)
      if (r->fds[i].to == UINT64_MAX && r->fds[i].from < from)
        r->fds[i].to = to;
  proto_reader_commit(r, (size_t)n);
  return n;
}

ProtobufCMessage *proto_unpack(const proto_frame *f) {
  const ProtobufCMessageDescriptor *d = proto_descriptor(f->type);
  if (!d) return NULL;
  return protobuf_c_message_unpack(d, NULL, f->len, f->payload);
}

void proto_header_write(uint8_t *h, uint32_t len, uint8_t type) {
  h[0] = (uint8_t)len; /* little-endian, whatever the host */
  h[1] = (uint8_t)(len >> 8);
  h[2] = (uint8_t)(len >> 16);
  h[3] = (uint8_t)(len >> 24);
  h[4] = type;
}

/* Room for need bytes in all. */
static int wbuf_reserve(proto_wbuf *w, size_t need) {
  if (need <= w->cap) return 0;
  size_t cap = w->cap ? w->cap : 4096;
  while (cap < need) cap *= 2;
  uint8_t *data = realloc(w->data, cap);
  if (!data) return EMBER_ENOMEM;
  w->data = data;
  w->cap = cap;
  return 0;
}

int proto_wbuf_append_raw(proto_wbuf *w, const void *data, size_t len) {
  if (wbuf_reserve(w, w->len + len)) return EMBER_ENOMEM;
  memcpy(w->data + w->len, data, len);
  w->len += len;
  return 0;
}

int proto_wbuf_append(proto_wbuf *w, uint8_t type, const ProtobufCMessage *msg,
                      size_t max_frame) {
  size_t len = protobuf_c_message_get_packed_size(msg);
  if (len > (max_frame ? max_frame : PROTO_DEFAULT_MAX_FRAME) ||
      len > UINT32_MAX)
    return EMBER_ETOOBIG;
  size_t need = w->len + PROTO_HEADER_SIZE + len;
  if (wbuf_reserve(w, need)) return EMBER_ENOMEM;
  uint8_t *h = w->data + w->len;
  proto_header_write(h, (uint32_t)len, type);
  protobuf_c_message_pack(msg, h + PROTO_HEADER_SIZE);
  w->len = need;
  return 0;
}

void proto_wbuf_consume(proto_wbuf *w, size_t n) {
  w->sent += n;
  if (w->sent >= w->len) {
    w->sent = w->len = 0;
    /* give back memory after a burst of large frames */
    if (w->cap > ((size_t)1 << 20)) {
      free(w->data);
      w->data = NULL;
      w->cap = 0;
    }
  }
}

void proto_wbuf_free(proto_wbuf *w) {
  free(w->data);
  memset(w, 0, sizeof *w);
}

int proto_send(int sock, const void *data, size_t len, const int *fds,
               size_t nfds) {
  const uint8_t *p = data;
  if (nfds > PROTO_MAX_FDS_PER_SEND || (nfds > 0 && len == 0)) return -EINVAL;
  union {
    char buf[CMSG_SPACE(sizeof(int) * PROTO_MAX_FDS_PER_SEND)];
    struct cmsghdr align;
  } ctrl;
  while (len > 0) {
    struct iovec iov = {.iov_base = (void *)p, .iov_len = len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (nfds > 0) {
      memset(ctrl.buf, 0, sizeof ctrl.buf);
      msg.msg_control = ctrl.buf;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
      struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
      memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    nfds = 0; /* fds went with the first byte */
    p += n;
    len -= (size_t)n;
  }
  return 0;
}
