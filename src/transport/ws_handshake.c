/* The WebSocket opening handshake: see ws_handshake.h. */
#include "transport/ws_handshake.h"
#include "http/cors.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <string.h>
#include <strings.h>

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

int ws_header_has_token(const char *value, const char *token)
{
    size_t n = strlen(token);
    for (const char *p = value; p && *p;) {
        p += strspn(p, " \t,");
        size_t len = strcspn(p, ",");
        size_t trimmed = len;
        while (trimmed && (p[trimmed - 1] == ' ' || p[trimmed - 1] == '\t'))
            trimmed--;
        if (trimmed == n && strncasecmp(p, token, n) == 0)
            return 1;
        p += len;
    }
    return 0;
}

static int is_base64_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '+' || c == '/';
}

/* base64 of 16 bytes: 21 characters, one whose last 4 bits are 0 (the
 * 128th bit ends there), then "==". */
static int key_valid(const char *key)
{
    if (!key || strlen(key) != 24 || strcmp(key + 22, "==") != 0)
        return 0;
    for (int i = 0; i < 22; i++)
        if (!is_base64_char(key[i]))
            return 0;
    return strchr("AQgw", key[21]) != NULL;
}

void ws_handshake_accept(const char *key, char out[29])
{
    unsigned char text[24 + sizeof ws_guid - 1], digest[SHA_DIGEST_LENGTH];
    memcpy(text, key, 24);
    memcpy(text + 24, ws_guid, sizeof ws_guid - 1);
    SHA1(text, sizeof text, digest);
    EVP_EncodeBlock((unsigned char *)out, digest, SHA_DIGEST_LENGTH);
}

int ws_handshake_check(const struct evkeyvalq *headers, const struct ws_origins *origins,
                       struct ws_handshake *out, const char **why)
{
    struct evkeyvalq *h = (struct evkeyvalq *)headers;     /* evhttp_find_header is not const */
    const char *version = evhttp_find_header(h, "Sec-WebSocket-Version");
    if (!ws_header_has_token(evhttp_find_header(h, "Upgrade"), "websocket") ||
        !ws_header_has_token(evhttp_find_header(h, "Connection"), "upgrade") || !version ||
        strcmp(version, "13") != 0) {
        *why = "This is a WebSocket endpoint: send a version 13 upgrade (RFC 6455)";
        return 426;
    }
    if (!evhttp_find_header(h, "Host")) {
        *why = "A WebSocket handshake needs a Host header (RFC 6455 4.1)";
        return 400;
    }
    const char *key = evhttp_find_header(h, "Sec-WebSocket-Key");
    if (!key_valid(key)) {
        *why = "Sec-WebSocket-Key must be the base64 of 16 bytes (24 characters)";
        return 400;
    }
    const char *origin = evhttp_find_header(h, "Origin");
    if (origin && !origin_allowed(origin, evhttp_find_header(h, "Host"), origins->list, origins->n)) {
        *why = "Origin not allowed: start the server with --allow-origin ORIGIN";
        return 403;
    }
    out->meta = ws_header_has_token(evhttp_find_header(h, "Sec-WebSocket-Protocol"),
                                    WS_META_PROTOCOL);
    ws_handshake_accept(key, out->accept);
    return 0;
}
