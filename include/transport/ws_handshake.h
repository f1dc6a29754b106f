/* The WebSocket opening handshake (RFC 6455 section 4.2), checked on the
 * request evhttp parsed: what to answer, and the Sec-WebSocket-Accept. */
#ifndef HTTPDCNODE_WS_HANDSHAKE_H
#define HTTPDCNODE_WS_HANDSHAKE_H

#include <stddef.h>

struct evkeyvalq;

/* The subprotocol whose frames carry ids: "id: EPOCH:SEQ\n\n" + payload. */
#define WS_META_PROTOCOL "ws+meta.httpdcnode"

struct ws_handshake {
    int meta;                   /* the client asked for WS_META_PROTOCOL */
    char accept[29];            /* Sec-WebSocket-Accept, NUL-terminated */
};

/* Origins allowed besides the request's own host (--allow-origin; "*" any). */
struct ws_origins {
    const char (*list)[256];
    size_t n;
};

/* Checks the request's headers: 0 and *out filled when it may upgrade,
 * else the status to refuse it with: 426 (not a version-13 WebSocket
 * upgrade), 400 (no Host, or no valid Sec-WebSocket-Key), 403 (an Origin that is
 * neither the request's own host nor allowed). *why says what is wrong. */
int ws_handshake_check(const struct evkeyvalq *headers, const struct ws_origins *origins,
                       struct ws_handshake *out, const char **why);

/* base64(SHA-1(key + the RFC's GUID)) into out[29]. */
void ws_handshake_accept(const char *key, char out[29]);

/* Whether a comma-separated header value holds token (case-insensitive). */
int ws_header_has_token(const char *value, const char *token);

#endif
