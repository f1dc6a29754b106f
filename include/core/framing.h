/* SPDX-License-Identifier: Apache-2.0 */
/* How a message of a uid is put on the wire for one kind of stream, on
 * the per-message path (batch.c, replay): the prefix and body of each
 * framing, direct calls, no table. Everything else a transport writes is
 * its own file's, through its table (core/transport_ops.h): its head, a
 * {conn, Conn, Data} reply, the replay's encoders and the goodbye of a
 * stream ended on purpose (obs/end_reason.h). A new transport that frames
 * messages in a batch adds its kind below and its prefix here; one that
 * answers at once (deliver, as a long-poll) adds only its kind; either,
 * when its client has message ids, says so in framing_tells_gaps.
 *
 *   chunked  HTTP/1.1: "%x\r\n" size line, payload, "\r\n"
 *   raw      HTTP/1.0: the payload as it is
 *   sse      Server-Sent Events: "id: EPOCH:SEQ\n", the payload as data:
 *            lines (framing_sse_body, made once per payload), a blank line;
 *            a binary message (cmd.h) as "event: base64" and its base64
 *   poll     a long-poll: its one answer is made by poll.c, not framed
 *   ws       WebSocket (RFC 6455): one unmasked frame per message, binary
 *            for a binary message (cmd.h), else text; the 2-10 byte
 *            frame header is the prefix
 *   ws_meta  the same, each frame's payload led by "id: EPOCH:SEQ\n\n"
 *            (subprotocol ws+meta.httpdcnode)
 *   ws_deflate, ws_meta_deflate  the same with permessage-deflate (RFC
 *            7692, no context takeover): a payload worth it is compressed
 *            once per batch (batch.c, lib/deflate_msg.h) and its frame has
 *            RSV1; ws_meta's id goes ahead of it as a stored deflate block,
 *            so the compressed bytes are the same for every uid.
 *            framing_prefix_utf8 makes their uncompressed frames (replays),
 *            framing_prefix_deflate the compressed ones. */
#ifndef HTTPDCNODE_FRAMING_H
#define HTTPDCNODE_FRAMING_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* A stream's framing goes by its value in a hot upgrade's stream record
 * (stream.c): renumbering these is a new version of that record. */
enum framing_kind {
    FRAMING_CHUNKED = 0,
    FRAMING_RAW,
    FRAMING_SSE,
    FRAMING_POLL,
    FRAMING_WS,
    FRAMING_WS_META,
    FRAMING_WS_DEFLATE,
    FRAMING_WS_META_DEFLATE,
    FRAMING_KINDS
};

static inline int framing_is_websocket(uint8_t kind)
{
    return kind >= FRAMING_WS && kind <= FRAMING_WS_META_DEFLATE;
}
/* Frames led by the message's id (ws+meta.httpdcnode). */
static inline int framing_ws_meta(uint8_t kind)
{
    return kind == FRAMING_WS_META || kind == FRAMING_WS_META_DEFLATE;
}
/* permessage-deflate negotiated. */
static inline int framing_ws_deflate(uint8_t kind)
{
    return kind == FRAMING_WS_DEFLATE || kind == FRAMING_WS_META_DEFLATE;
}

/* Bytes of a message's prefix at most: a 10-byte WebSocket frame header,
 * a stored deflate block's 5-byte header and "id: ffffffff:4294967295\n\n". */
#define FRAMING_PREFIX_MAX 40
/* iovecs one framed message takes at most. */
#define FRAMING_IOV_MAX 3

/* A message's prefix, made once per delivery (the payload is not copied). */
struct framing_prefix {
    char bytes[FRAMING_PREFIX_MAX];
    uint8_t len;
};

/* The prefix of the message seq (the uid's id) of payload_len bytes, for a
 * framing that does not look at the payload's text (framing_checks_utf8). */
void framing_prefix(uint8_t kind, uint32_t payload_len, uint32_t seq,
                    struct framing_prefix *out);
/* Whether a framing's prefix depends on the message being text or binary
 * (WebSocket: a text or a binary frame); if so it is made by
 * framing_prefix_utf8, told so (utf8: text, valid UTF-8; 0: binary). */
int framing_checks_utf8(uint8_t kind);
void framing_prefix_utf8(uint8_t kind, uint32_t payload_len, uint32_t seq, int utf8,
                         struct framing_prefix *out);
/* The prefix of a compressed message (framing_ws_deflate: RSV1 set) whose
 * payload, deflate_msg's output, is deflated_len bytes. */
void framing_prefix_deflate(uint8_t kind, uint32_t deflated_len, uint32_t seq, int utf8,
                            struct framing_prefix *out);
/* A WebSocket frame header (FIN set, unmasked) for a payload of len
 * bytes: 2, 4 or 10 bytes written to out, its length returned. opcode may
 * carry RSV1 (0x40: a compressed message). */
size_t framing_ws_header(char *out, uint8_t opcode, uint64_t len);
/* Whether a framing's client has message ids, so can be told a gap. */
int framing_tells_gaps(uint8_t kind);
/* Whether a framing carries its payload re-encoded (framing_sse_body). */
int framing_encodes_body(uint8_t kind);
/* Fills iov[FRAMING_IOV_MAX] with the framed message (data: the payload,
 * or its encoding when framing_encodes_body); returns the iovec count and
 * adds the framed size to *bytes. */
int framing_iov(uint8_t kind, const struct framing_prefix *prefix, const char *data,
                uint32_t len, struct iovec *iov, size_t *bytes);
/* The SSE body of a text payload (valid UTF-8: cmd.h): each of its lines
 * as "data: LINE\n" (a line ends at \n, \r\n or \r), then "\n"; a
 * binary one instead as "event: base64\ndata: BASE64\n\n", whatever its
 * bytes (text/event-stream is UTF-8 only, and the client must get bytes).
 * framing_sse_body_len says exactly how long it is; framing_sse_body
 * writes it to out. */
size_t framing_sse_body_len(const char *data, uint32_t len, int binary);
void framing_sse_body(const char *data, uint32_t len, int binary, char *out);
/* The same without its event line (a binary one's "event: base64\n"),
 * for an event of another name. */
size_t framing_sse_data_len(const char *data, uint32_t len, int binary);
void framing_sse_data(const char *data, uint32_t len, int binary, char *out);

#endif
