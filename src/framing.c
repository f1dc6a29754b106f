/* Message framings: see framing.h. */
#include "framing.h"

#include <assert.h>

static size_t chunk_size_line(char *buf, uint32_t n)
{
    static const char hex[] = "0123456789abcdef";
    char tmp[8];
    size_t k = 0, len = 0;
    do {
        tmp[k++] = hex[n & 15];
        n >>= 4;
    } while (n);
    while (k)
        buf[len++] = tmp[--k];
    buf[len++] = '\r';
    buf[len++] = '\n';
    return len;
}

void framing_prefix(uint8_t kind, uint32_t payload_len, struct framing_prefix *out)
{
    switch (kind) {
    case FRAMING_CHUNKED:
        out->len = (uint8_t)chunk_size_line(out->bytes, payload_len);
        return;
    case FRAMING_RAW:
        out->len = 0;
        return;
    }
    assert(!"unknown framing");
}

int framing_iov(uint8_t kind, const struct framing_prefix *prefix, const char *data,
                uint32_t len, struct iovec *iov, size_t *bytes)
{
    static const char crlf[] = "\r\n";
    int k = 0;
    if (prefix->len)
        iov[k++] = (struct iovec){(void *)prefix->bytes, prefix->len};
    iov[k++] = (struct iovec){(void *)data, len};
    *bytes += prefix->len + len;
    if (kind == FRAMING_CHUNKED) {
        iov[k++] = (struct iovec){(void *)crlf, 2};
        *bytes += 2;
    }
    return k;
}

struct iovec framing_terminator(uint8_t kind)
{
    static const char last_chunk[] = "0\r\n\r\n";
    if (kind == FRAMING_CHUNKED)
        return (struct iovec){(void *)last_chunk, sizeof last_chunk - 1};
    return (struct iovec){NULL, 0};
}
