/* SPDX-License-Identifier: Apache-2.0 */
/* Message framings: see framing.h. */
#include "core/framing.h"
#include "core/history.h"

#include <assert.h>
#include <string.h>

#include <openssl/evp.h>

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

static size_t decimal(char *buf, uint32_t n)
{
    char tmp[10];
    size_t k = 0, len = 0;
    do {
        tmp[k++] = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    while (k)
        buf[len++] = tmp[--k];
    return len;
}

/* "id: EPOCH:SEQ\n" */
static size_t sse_id_line(char *buf, uint32_t seq)
{
    memcpy(buf, "id: ", 4);
    memcpy(buf + 4, history_epoch_hex(), 8);
    buf[12] = ':';
    size_t len = 13 + decimal(buf + 13, seq);
    buf[len++] = '\n';
    return len;
}

size_t framing_ws_header(char *out, uint8_t opcode, uint64_t len)
{
    out[0] = (char)(0x80 | opcode);                 /* FIN: never fragmented; RSV1 maybe */
    if (len < 126) {
        out[1] = (char)len;
        return 2;
    }
    if (len < 65536) {
        out[1] = 126;
        out[2] = (char)(len >> 8);
        out[3] = (char)len;
        return 4;
    }
    out[1] = 127;
    for (int i = 0; i < 8; i++)
        out[2 + i] = (char)(len >> (56 - 8 * i));
    return 10;
}

/* A message frame: the header, then for ws_meta "id: EPOCH:SEQ\n\n" (the
 * SSE id line and a blank line) ahead of the payload. Compressed
 * (deflated): RSV1, and the id as a stored deflate block (BFINAL 0, type
 * 00, LEN, NLEN: RFC 1951 3.2.4) ahead of the compressed payload, which
 * starts on a byte of its own: one deflate stream, the id kept as it is. */
static size_t ws_prefix(char *buf, int meta, uint32_t payload_len, uint32_t seq, int utf8,
                        int deflated)
{
    char id[FRAMING_PREFIX_MAX];
    size_t id_len = 0;
    if (meta) {
        size_t at = deflated ? 5 : 0;
        id_len = at + sse_id_line(id + at, seq);
        id[id_len++] = '\n';
        if (deflated) {
            uint16_t n = (uint16_t)(id_len - 5);
            id[0] = 0;
            id[1] = (char)(n & 0xff);
            id[2] = (char)(n >> 8);
            id[3] = (char)(~n & 0xff);
            id[4] = (char)((uint16_t)~n >> 8);
        }
    }
    uint8_t opcode = (uint8_t)((utf8 ? 1 : 2) | (deflated ? 0x40 : 0));
    size_t h = framing_ws_header(buf, opcode, (uint64_t)payload_len + id_len);
    memcpy(buf + h, id, id_len);
    return h + id_len;
}

int framing_checks_utf8(uint8_t kind) { return framing_is_websocket(kind); }

void framing_prefix_utf8(uint8_t kind, uint32_t payload_len, uint32_t seq, int utf8,
                         struct framing_prefix *out)
{
    if (framing_is_websocket(kind))
        out->len = (uint8_t)ws_prefix(out->bytes, framing_ws_meta(kind), payload_len, seq, utf8, 0);
    else
        framing_prefix(kind, payload_len, seq, out);
}

void framing_prefix_deflate(uint8_t kind, uint32_t deflated_len, uint32_t seq, int utf8,
                            struct framing_prefix *out)
{
    assert(framing_ws_deflate(kind));
    out->len = (uint8_t)ws_prefix(out->bytes, framing_ws_meta(kind), deflated_len, seq, utf8, 1);
}

void framing_prefix(uint8_t kind, uint32_t payload_len, uint32_t seq,
                    struct framing_prefix *out)
{
    switch (kind) {
    case FRAMING_CHUNKED:
        out->len = (uint8_t)chunk_size_line(out->bytes, payload_len);
        return;
    case FRAMING_RAW:
    case FRAMING_POLL:
        out->len = 0;
        return;
    case FRAMING_SSE:
        out->len = (uint8_t)sse_id_line(out->bytes, seq);
        return;
    case FRAMING_WS:
    case FRAMING_WS_META:
    case FRAMING_WS_DEFLATE:
    case FRAMING_WS_META_DEFLATE:
        break;                  /* framing_prefix_utf8 */
    }
    assert(!"unknown framing, or one that needs framing_prefix_utf8");
}

int framing_tells_gaps(uint8_t kind)
{
    return kind == FRAMING_SSE || kind == FRAMING_POLL || framing_ws_meta(kind);
}

int framing_encodes_body(uint8_t kind) { return kind == FRAMING_SSE; }

/* The length of the line break at p[0..left), 0 when none. */
static size_t line_break(const char *p, size_t left)
{
    if (*p == '\n')
        return 1;
    if (*p == '\r')
        return left > 1 && p[1] == '\n' ? 2 : 1;
    return 0;
}

/* A binary message cannot be data: lines (text/event-stream is UTF-8
 * only, a browser would replace its bytes, and the client must tell it
 * from text): it goes as one "event: base64" whose data is its base64,
 * lossless, as long-poll's "data_base64". The body is made once per
 * payload and batch, not per stream. */
static const char b64_event[] = "event: base64\n";
#define B64_EVENT_LEN (sizeof b64_event - 1)

static size_t base64_len(uint32_t len) { return ((size_t)len + 2) / 3 * 4; }

static size_t data_lines_len(const char *data, uint32_t len)
{
    size_t out = 6 + 2;                  /* "data: " ... "\n\n" */
    for (size_t i = 0; i < len;) {
        size_t br = line_break(data + i, len - i);
        if (br) {
            out += 7;                    /* "\ndata: " */
            i += br;
        } else {
            out++;
            i++;
        }
    }
    return out;
}

size_t framing_sse_data_len(const char *data, uint32_t len, int binary)
{
    if (binary)
        return 6 + base64_len(len) + 2;  /* "data: " BASE64 "\n\n" */
    return data_lines_len(data, len);
}

size_t framing_sse_body_len(const char *data, uint32_t len, int binary)
{
    return (binary ? B64_EVENT_LEN : 0) + framing_sse_data_len(data, len, binary);
}

static void data_lines(const char *data, uint32_t len, char *out)
{
    memcpy(out, "data: ", 6);
    out += 6;
    for (size_t i = 0; i < len;) {
        size_t br = line_break(data + i, len - i);
        if (br) {
            memcpy(out, "\ndata: ", 7);
            out += 7;
            i += br;
        } else {
            *out++ = data[i++];
        }
    }
    memcpy(out, "\n\n", 2);
}

/* EVP_EncodeBlock ends its output with a NUL: it lands on the first byte
 * of the closing "\n\n", written over it, so out needs no spare byte. */
static void base64_data(const char *data, uint32_t len, char *out)
{
    memcpy(out, "data: ", 6);
    out += 6;
    size_t n = (size_t)EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)data, (int)len);
    memcpy(out + n, "\n\n", 2);
}

void framing_sse_data(const char *data, uint32_t len, int binary, char *out)
{
    if (binary)
        base64_data(data, len, out);
    else
        data_lines(data, len, out);
}

void framing_sse_body(const char *data, uint32_t len, int binary, char *out)
{
    if (binary) {
        memcpy(out, b64_event, B64_EVENT_LEN);
        out += B64_EVENT_LEN;
    }
    framing_sse_data(data, len, binary, out);
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
