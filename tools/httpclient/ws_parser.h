/* SPDX-License-Identifier: Apache-2.0 */
/* The client side of a WebSocket (RFC 6455) over the ws+meta.httpdcnode
 * subprotocol, incrementally, never buffering a data frame:
 *   - the handshake answer: "HTTP/1.x 101", Upgrade: websocket, Connection:
 *     upgrade, Sec-WebSocket-Accept for WS_KEY, Sec-WebSocket-Protocol:
 *     ws+meta.httpdcnode; another status is reported as such;
 *   - then the server's frames, their headers decoded and checked by wslay's
 *     frame API (lengths in their shortest form, control frames unfragmented
 *     and at most 125 bytes) and here (unmasked, RSV bits clear, known
 *     opcodes, continuations only inside a message, text valid UTF-8). Each
 *     data message starts with a prefix of header lines and a blank line:
 *     "id: EPOCH:SEQ" gives its id, "event: gap" makes it the server's gap
 *     frame (whatever JSON follows), "event: conn" an answer to this
 *     connection alone (no id), other lines are skipped; after the
 *     prefix a payload starting with "t=<ns>;" gives a stamp.
 *   - each ping is answered with a masked pong of the same payload, and the
 *     server's close with a masked close of the same code (or none), through
 *     the send callback.
 * One wslay frame context serves every connection of the process (4,256
 * bytes with Debian's wslay 1.1.1, mostly its 4 KB input buffer; one per
 * connection would be 19 times this client's ~250 bytes a connection): it
 * is given whole headers only (a header cut by a read's end waits in the
 * connection's carry) and counts their payloads without copying them
 * (server frames are unmasked, so wslay never looks at payload bytes; they
 * are read in place), so it is back at a frame boundary whenever a call
 * returns, and a connection keeps only the 48-byte struct ws_parser.
 * Every connection sends the same key (RFC 6455's example): it only proves
 * that the server speaks WebSocket, and the accept for it is a constant. */
#ifndef HTTPCLIENT_WS_PARSER_H
#define HTTPCLIENT_WS_PARSER_H

#include <stddef.h>
#include <stdint.h>

#include "stamp.h"

#define WS_KEY "dGhlIHNhbXBsZSBub25jZQ=="
#define WS_ACCEPT "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
#define WS_PROTOCOL "ws+meta.httpdcnode"
/* The request headers of the upgrade (each line ends in CRLF). */
#define WS_REQUEST_HEADERS \
    "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: " WS_KEY "\r\n" \
    "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: " WS_PROTOCOL "\r\n"
/* A close frame from the client: 2 header bytes, the mask, a 2-byte code. */
#define WS_CLOSE_FRAME_LEN 8
/* A server frame's header at most: 2 bytes and a 64-bit length. */
#define WS_HEADER_MAX 10

struct ws_message {
    int text;               /* opcode 1 (else 2, binary) */
    int gap;                /* "event: gap" in the prefix: a gap, not a message */
    int reply;              /* "event: conn": a {conn, Conn, Data} to this connection, no id */
    int other;              /* another event ("event: joined", ...): no message */
    int has_id;
    int bad_id;             /* neither a gap nor an "id:" line with EPOCH:SEQ */
    uint32_t epoch, seq;
    uint32_t topic;         /* a topic's id (t:N@...): N + 1; 0: the uid's */
    int has_ts;
    uint64_t ts;
    int has_n;              /* "n=N;" after the stamp */
    uint32_t n;
};

struct ws_callbacks {
    void (*on_message)(void *ctx, const struct ws_message *m);
    /* A masked frame to write to the server now: a pong, or the answer to
     * its close. May be NULL. */
    void (*send)(void *ctx, const uint8_t *frame, size_t len);
};

struct ws_handshake {
    uint16_t status;
    uint8_t state;
    uint8_t pos;
    uint8_t header;         /* the header whose value is being matched */
    uint8_t got;            /* headers with the wanted value */
};

/* 48 bytes a connection (the_state_is_small checks it). */
struct ws_parser {
    union {
        struct ws_handshake hs;     /* until the 101 */
        struct {
            struct stamp_scan ts;
            struct id_scan id;
            /* Payload bytes of the frame still to come; once closed, the
             * server's close code (1005: none given). */
            uint32_t remain;
        } fr;
    } u;
    /* A header the read's end cut; or the payload so far of a control frame
     * it cut: here if it has at most WS_HEADER_MAX bytes, else in a 125-byte
     * malloc'd buffer whose pointer is here (rare: this server's pings are
     * empty, its close carries 2 bytes). */
    uint8_t carry[WS_HEADER_MAX];
    uint8_t carry_len;
    uint8_t state;          /* WS_S_* in ws_parser.c: handshake, frames, closed, error */
    uint8_t head;           /* the current frame's first byte */
    uint8_t msg;            /* the message's opcode (0 between messages), and whether it is a gap */
    uint8_t meta;           /* where in the message's prefix: state << 4 | position */
    uint8_t utf8;
};

enum ws_result {
    WS_MORE = 0,    /* everything consumed, go on */
    WS_STATUS,      /* the answer was not 101: ws_parser_status() says what */
    WS_CLOSED,      /* the server sent a close frame, answered (bytes after it are ignored) */
    WS_ERROR        /* a malformed answer or frame, or no memory for wslay's context */
};

void ws_parser_init(struct ws_parser *p);
/* Frees what a cut control frame holds; p may be fed again after init. */
void ws_parser_release(struct ws_parser *p);
/* Feeds len bytes: the handshake answer, then frames. *upgraded_now is set
 * when the handshake completed within these bytes (it may be NULL). */
enum ws_result ws_parser_feed(struct ws_parser *p, const char *buf, size_t len,
                       const struct ws_callbacks *cb, void *ctx, int *upgraded_now);
int ws_parser_upgraded(const struct ws_parser *p);
/* Upgraded, and neither closed nor broken: a close of ours may go. */
int ws_parser_open(const struct ws_parser *p);
/* The status of a handshake answer that was not 101. */
unsigned ws_parser_status(const struct ws_parser *p);
/* The code of the server's close frame (1005: none), 0 before one came. */
unsigned ws_parser_close_code(const struct ws_parser *p);
/* A masked close frame with this code, into out[WS_CLOSE_FRAME_LEN] (each
 * frame gets another mask). Returns its length, 0 when wslay's context
 * could not be allocated. */
size_t ws_parser_close_frame(uint8_t out[WS_CLOSE_FRAME_LEN], uint16_t code);

#endif
