/* How a message is put on the wire for one kind of stream. Each stream
 * names its framing; adding a transport's framing touches framing.c only.
 *
 *   chunked  HTTP/1.1: "%x\r\n" size line, payload, "\r\n"; ends with
 *            the terminating chunk "0\r\n\r\n"
 *   raw      HTTP/1.0: the payload as it is; the end is the close */
#ifndef HTTPDCNODE_FRAMING_H
#define HTTPDCNODE_FRAMING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

enum framing_kind {
    FRAMING_CHUNKED = 0,
    FRAMING_RAW,
};

/* Bytes of a message's prefix at most ("ffffffff\r\n"). */
#define FRAMING_PREFIX_MAX 10
/* iovecs one framed message takes at most. */
#define FRAMING_IOV_MAX 3

/* A message's prefix, made once per delivery (the payload is not copied). */
struct framing_prefix {
    char bytes[FRAMING_PREFIX_MAX];
    uint8_t len;
};

void framing_prefix(uint8_t kind, uint32_t payload_len, struct framing_prefix *out);
/* Fills iov[FRAMING_IOV_MAX] with the framed message; returns the iovec
 * count and adds the framed size to *bytes. */
int framing_iov(uint8_t kind, const struct framing_prefix *prefix, const char *data,
                uint32_t len, struct iovec *iov, size_t *bytes);
/* What ends a stream of this framing (may be empty). */
struct iovec framing_terminator(uint8_t kind);

#endif
