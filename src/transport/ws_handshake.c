/* SPDX-License-Identifier: Apache-2.0 */
/* The WebSocket opening handshake: see ws_handshake.h. */
#include "transport/ws_handshake.h"
#include "http/cors.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

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

/* ---------------------------------------------------------------- permessage-deflate */

/* p[0..n) with blanks trimmed both ends. */
static void trim(const char **p, size_t *n)
{
    while (*n && (**p == ' ' || **p == '\t')) {
        (*p)++;
        (*n)--;
    }
    while (*n && ((*p)[*n - 1] == ' ' || (*p)[*n - 1] == '\t'))
        (*n)--;
}

/* Where the next sep is in p[0..n), outside a quoted string; n if none. */
static size_t until(const char *p, size_t n, char sep)
{
    int quoted = 0;
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '"')
            quoted = !quoted;
        else if (p[i] == sep && !quoted)
            return i;
    }
    return n;
}

static int is(const char *p, size_t n, const char *word)
{
    return n == strlen(word) && strncasecmp(p, word, n) == 0;
}

/* A window size value, maybe quoted: 8..15, digits only; -1 otherwise. */
static int window_bits(const char *v, size_t n)
{
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        v++;
        n -= 2;
    }
    if (n == 1 && v[0] >= '8' && v[0] <= '9')
        return v[0] - '0';
    if (n == 2 && v[0] == '1' && v[1] >= '0' && v[1] <= '5')
        return 10 + v[1] - '0';
    return -1;
}

/* One offer (between commas): permessage-deflate with parameters we take. */
static int offer_ok(const char *p, size_t n)
{
    size_t k = until(p, n, ';');
    const char *name = p;
    size_t name_len = k;
    trim(&name, &name_len);
    if (!is(name, name_len, "permessage-deflate"))
        return 0;
    unsigned seen = 0;
    while (k < n) {
        p += k + 1;
        n -= k + 1;
        k = until(p, n, ';');
        const char *key = p, *value = NULL;
        size_t key_len = k, value_len = 0, eq = until(p, k, '=');
        if (eq < k) {
            key_len = eq;
            value = p + eq + 1;
            value_len = k - eq - 1;
            trim(&value, &value_len);
        }
        trim(&key, &key_len);
        unsigned bit;
        if (is(key, key_len, "server_no_context_takeover") && !value)
            bit = 1;
        else if (is(key, key_len, "client_no_context_takeover") && !value)
            bit = 2;
        else if (is(key, key_len, "server_max_window_bits") && value &&
                 window_bits(value, value_len) == 15)
            bit = 4;
        else if (is(key, key_len, "client_max_window_bits") &&
                 (!value || window_bits(value, value_len) > 0))
            bit = 8;
        else
            return 0;                   /* unknown, a bad value, or a window we do not use */
        if (seen & bit)
            return 0;                   /* named twice */
        seen |= bit;
    }
    return 1;
}

int ws_deflate_offered(const struct evkeyvalq *headers)
{
    const struct evkeyval *h;
    TAILQ_FOREACH(h, headers, next) {
        if (strcasecmp(h->key, "Sec-WebSocket-Extensions") != 0)
            continue;
        const char *p = h->value;
        size_t n = strlen(p);
        for (;;) {
            size_t k = until(p, n, ',');
            if (offer_ok(p, k))
                return 1;
            if (k == n)
                break;
            p += k + 1;
            n -= k + 1;
        }
    }
    return 0;
}

/* ---------------------------------------------------------------- the handshake */

int ws_handshake_check(const struct evkeyvalq *headers, const struct ws_origins *origins,
                       int deflate, struct ws_handshake *out, const char **why)
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
    out->deflate = deflate && ws_deflate_offered(headers);
    ws_handshake_accept(key, out->accept);
    return 0;
}
