/* The client side of a WebSocket (RFC 6455) over the ws+meta.httpdcnode
 * subprotocol, incrementally, never buffering:
 *   - the handshake answer: "HTTP/1.x 101", Upgrade: websocket, Connection:
 *     upgrade, Sec-WebSocket-Accept for WS_KEY, Sec-WebSocket-Protocol:
 *     ws+meta.httpdcnode; another status is reported as such;
 *   - then the server's frames: unmasked, RSV bits clear, lengths in their
 *     shortest form, control frames unfragmented and at most 125 bytes,
 *     data messages fragmented or not, text ones valid UTF-8. Each data
 *     message starts with "id: EPOCH:SEQ\n" (other header lines are
 *     skipped) and a blank line; after that prefix a payload starting with
 *     "t=<ns>;" gives a stamp. Pings are not answered (the client only ever
 *     sends a close).
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

struct ws_message {
    int text;               /* opcode 1 (else 2, binary) */
    int has_id;
    int bad_id;             /* no "id:" line, or not EPOCH:SEQ */
    uint32_t epoch, seq;
    int has_ts;
    uint64_t ts;
};

struct ws_callbacks {
    void (*on_message)(void *ctx, const struct ws_message *m);
};

struct ws_handshake {
    uint16_t status;
    uint8_t state;
    uint8_t pos;
    uint8_t header;         /* the header whose value is being matched */
    uint8_t got;            /* headers with the wanted value */
};

struct ws_frames {
    struct stamp_scan ts;
    struct id_scan id;
    uint32_t remain;        /* payload bytes left in the frame */
    uint8_t state;
    uint8_t pos;            /* length bytes left, then close-code bytes read */
    uint8_t ext;            /* 2 or 8 length bytes after the first, or 0 */
    uint8_t head;           /* the frame's first byte */
    uint8_t msg;            /* the message's opcode, 0 between messages */
    uint8_t meta;           /* where in the message's id prefix */
    uint8_t mpos;           /* position in "id: " */
    uint8_t utf8;
};

struct ws_parser {
    uint8_t upgraded;       /* the handshake is done: frames follow */
    uint16_t close_code;    /* of the server's close frame (1005: none given) */
    union {
        struct ws_handshake hs;
        struct ws_frames fr;
    } u;
};

enum ws_result {
    WS_MORE = 0,    /* everything consumed, go on */
    WS_STATUS,      /* the answer was not 101: ws_parser_status() says what */
    WS_CLOSED,      /* the server sent a close frame (bytes after it are ignored) */
    WS_ERROR        /* a malformed answer or frame */
};

void ws_parser_init(struct ws_parser *p);
/* Feeds len bytes: the handshake answer, then frames. *upgraded_now is set
 * when the handshake completed within these bytes (it may be NULL). */
enum ws_result ws_parser_feed(struct ws_parser *p, const char *buf, size_t len,
                       const struct ws_callbacks *cb, void *ctx, int *upgraded_now);
/* The status of a handshake answer that was not 101. */
unsigned ws_parser_status(const struct ws_parser *p);
/* A masked close frame with this code, into out[WS_CLOSE_FRAME_LEN]. */
void ws_parser_close_frame(uint8_t out[WS_CLOSE_FRAME_LEN], uint16_t code, uint32_t mask);

#endif
