/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: subscriber tokens (src/auth/auth_token.c, auth_jwt.c).
 * The first byte picks what the rest is:
 *   0  a JWT, given by length (auth_jwt_check), its last byte before a
 *      guard page;
 *   1  a query string, 2  an Authorization header (auth_token_check);
 *   3  a header and claims in JSON, split at the first newline: the
 *      harness encodes and signs them, so that the claims are reached.
 * Checked: a verdict says why exactly when it refuses, in one line, and an
 * accepted token's claims (read again with jansson) name uid 5 with an exp
 * after now. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auth/auth_jwt.h"
#include "auth/auth_token.h"
#include "guarded.h"

#include <openssl/evp.h>

#define NOW 1700000000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct auth_key *key;

static void check_verdict(struct auth_verdict v)
{
    if ((v.outcome == AUTH_OK) != (v.reason == NULL))
        abort();
    if (v.reason && strchr(v.reason, '\n'))
        abort();
    if (v.outcome == AUTH_OK && v.exp <= NOW)
        abort();
}

/* Unpadded base64url of in[0..n) into out (4 * n / 3 + 4 bytes). */
static size_t b64url(const unsigned char *in, size_t n, char *out)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i += 48) {       /* EVP_EncodeBlock pads each call */
        size_t k = n - i < 48 ? n - i : 48;
        int w = EVP_EncodeBlock((unsigned char *)out + o, in + i, (int)k);
        o += (size_t)w;
    }
    while (o > 0 && out[o - 1] == '=')
        o--;
    for (size_t i = 0; i < o; i++)
        out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
    return o;
}

/* An accepted token's claims, read on their own. */
static void check_claims(const char *claims, size_t n)
{
    json_t *j = json_loadb(claims, n, JSON_REJECT_DUPLICATES, NULL);
    const char *sub = json_string_value(json_object_get(j, "sub"));
    json_t *exp = json_object_get(j, "exp");
    if (!sub || strcmp(sub, "5") != 0 || !json_is_integer(exp) || json_integer_value(exp) <= NOW)
        abort();
    json_decref(j);
}

static void signed_json(const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    if (!nl)
        return;
    size_t hn = (size_t)(nl - data), cn = size - hn - 1;
    char *t = malloc(2 * (hn + cn) + 128);
    if (!t)
        abort();
    size_t n = b64url(data, hn, t);
    t[n++] = '.';
    n += b64url(nl + 1, cn, t + n);
    unsigned char mac[AUTH_MAC_BYTES];
    if (auth_key_mac(key, t, n, mac) != 0)
        abort();
    t[n++] = '.';
    n += b64url(mac, sizeof mac, t + n);
    struct auth_verdict v = auth_jwt_check(key, 5, guarded_copy((const uint8_t *)t, n), n, NOW);
    check_verdict(v);
    if (v.outcome == AUTH_OK)
        check_claims((const char *)nl + 1, cn);
    free(t);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!key && !(key = auth_key_new("s3cret", 6)))
        abort();
    if (size == 0)
        return 0;
    uint8_t mode = data[0] % 4;
    data++;
    size--;
    if (mode == 0) {
        check_verdict(auth_jwt_check(key, 5, guarded_copy(data, size), size, NOW));
    } else if (mode == 3) {
        signed_json(data, size);
    } else {
        char *s = malloc(size + 1);      /* exact size: ASan sees any overread */
        if (!s)
            abort();
        memcpy(s, data, size);
        s[size] = '\0';
        check_verdict(auth_token_check(key, 5, mode == 1 ? s : NULL, mode == 2 ? s : NULL, NOW));
        free(s);
    }
    return 0;
}
