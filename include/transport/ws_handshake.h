/* SPDX-License-Identifier: Apache-2.0 */
/* The WebSocket opening handshake (RFC 6455 section 4.2), checked on the
 * request evhttp parsed: what to answer, and the Sec-WebSocket-Accept. */
#ifndef HTTPDCNODE_WS_HANDSHAKE_H
#define HTTPDCNODE_WS_HANDSHAKE_H

#include <stddef.h>

struct evkeyvalq;

/* The subprotocol whose frames carry ids: "id: EPOCH:SEQ\n\n" + payload. */
#define WS_META_PROTOCOL "ws+meta.httpdcnode"

/* Our answer to an offer of permessage-deflate we take (RFC 7692 7.1):
 * no context takeover either way, whatever the client offered, so that
 * neither side keeps a compression context from one message to the next. */
#define WS_DEFLATE_RESPONSE "permessage-deflate; server_no_context_takeover; client_no_context_takeover"

struct ws_handshake {
    int meta;                   /* the client asked for WS_META_PROTOCOL */
    int deflate;                /* permessage-deflate agreed (--ws-deflate, and offered) */
    char accept[29];            /* Sec-WebSocket-Accept, NUL-terminated */
};

/* Origins allowed besides the request's own host (--allow-origin; "*" any). */
struct ws_origins {
    const char (*list)[256];
    size_t n;
};

/* Whether the Sec-WebSocket-Extensions headers hold an offer of
 * permessage-deflate we can take: its parameters each at most once,
 * server_no_context_takeover, client_no_context_takeover,
 * client_max_window_bits[=8..15] and server_max_window_bits=15 (we
 * compress with a window of 15 bits: an offer asking for less is declined,
 * and the next one looked at). */
int ws_deflate_offered(const struct evkeyvalq *headers);

/* Checks the request's headers: 0 and *out filled when it may upgrade,
 * else the status to refuse it with: 426 (not a version-13 WebSocket
 * upgrade), 400 (no Host, or no valid Sec-WebSocket-Key), 403 (an Origin that is
 * neither the request's own host nor allowed). *why says what is wrong.
 * deflate: permessage-deflate may be agreed (--ws-deflate). */
int ws_handshake_check(const struct evkeyvalq *headers, const struct ws_origins *origins,
                       int deflate, struct ws_handshake *out, const char **why);

/* base64(SHA-1(key + the RFC's GUID)) into out[29]. */
void ws_handshake_accept(const char *key, char out[29]);

/* Whether a comma-separated header value holds token (case-insensitive). */
int ws_header_has_token(const char *value, const char *token);

#endif
