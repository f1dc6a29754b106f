/* SPDX-License-Identifier: Apache-2.0 */
/* Subscriber JWTs: HS256 under the token secret, checked in this order so
 * that unauthenticated bytes reach as little as possible: the shape and
 * the length, the header (only "alg": "HS256" is taken, so neither "none"
 * nor another algorithm's key handling is ever reached), the signature
 * (constant time), and only then the claims.
 *
 * JSON is jansson's (Debian's libjansson), duplicates refused so that no
 * two readers of one token can see different claims; base64 is OpenSSL's.
 * Debian 12's libjwt (1.10) was not used: it takes the algorithm from the
 * token, verifying with whichever one the token names, and reads integer
 * claims without looking at their type ("exp": "x" reads as 0). */
#include "auth/auth_jwt.h"
#include "lib/topic_name.h"

#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* base64url of the 32-byte HMAC-SHA256, unpadded */
#define SIG_CHARS 43
/* decoded header or claims: at most 3 bytes per 4 characters */
#define DECODED_MAX (AUTH_JWT_MAX / 4 * 3 + 3)

static const char TOO_LONG[] = "Malformed token: a JWT has at most " AUTH_JWT_MAX_TEXT
                               " characters";
static const char SHAPE[] = "Malformed token: a JWT is three base64url parts joined by dots";
static const char HEADER[] = "Malformed token: the JWT header is not a JSON object";
static const char ALG[] = "Token algorithm must be HS256";
static const char TYP[] = "Malformed token: the JWT typ must be JWT";
static const char CRIT[] = "Token has critical header parameters (crit) this server does not know";
static const char SIG[] = "Malformed token: the JWT signature must be 43 base64url characters "
                          "(HMAC-SHA256)";
static const char CLAIMS[] = "Malformed token: the JWT claims are not a JSON object";
static const char SUB[] = "Malformed token: sub must be the uid as a decimal string";
static const char EXP[] = "Malformed token: exp must be an integer (Unix seconds)";
static const char NBF[] = "Malformed token: nbf must be an integer (Unix seconds)";
static const char NOT_YET[] = "Token not valid yet (its nbf is later): check the clocks";
static const char TOPICS[] = "Malformed token: topics must be a list of topic names (1 to 64 of "
                             "A-Z a-z 0-9 _ - . : /) or of prefixes ending in *, at most "
                             "1024 bytes in all";

static struct auth_verdict refuse(enum auth_outcome outcome, const char *reason)
{
    return (struct auth_verdict){.outcome = outcome, .reason = reason};
}

static int is_b64url(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
           c == '-' || c == '_';
}

static int all_b64url(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!is_b64url(s[i]))
            return 0;
    return 1;
}

/* Unpadded base64url s[0..n) (alphabet already checked) into out
 * (DECODED_MAX bytes): its length, or -1 when n is no base64 length. */
static int b64url_decode(const char *s, size_t n, unsigned char out[DECODED_MAX])
{
    char std[AUTH_JWT_MAX + 3];
    if (n % 4 == 1 || n > AUTH_JWT_MAX)
        return -1;
    for (size_t i = 0; i < n; i++)
        std[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
    size_t pad = (4 - n % 4) % 4;
    memset(std + n, '=', pad);
    int len = EVP_DecodeBlock(out, (const unsigned char *)std, (int)(n + pad));
    return len < 0 ? -1 : len - (int)pad;
}

/* The JSON object that the base64url part s[0..n) encodes, or NULL. */
static json_t *decode_object(const char *s, size_t n)
{
    unsigned char buf[DECODED_MAX];
    int len = b64url_decode(s, n, buf);
    if (len <= 0)
        return NULL;
    json_t *j = json_loadb((const char *)buf, (size_t)len, JSON_REJECT_DUPLICATES, NULL);
    if (j && !json_is_object(j)) {
        json_decref(j);
        return NULL;
    }
    return j;
}

static const char *check_header(const char *s, size_t n)
{
    json_t *h = decode_object(s, n);
    if (!h)
        return HEADER;
    const char *alg = json_string_value(json_object_get(h, "alg"));
    json_t *typ = json_object_get(h, "typ");
    const char *err = NULL;
    if (!alg || strcmp(alg, "HS256") != 0)
        err = ALG;
    else if (typ && (!json_is_string(typ) || strcasecmp(json_string_value(typ), "JWT") != 0))
        err = TYP;
    else if (json_object_get(h, "crit"))
        err = CRIT;                     /* RFC 7515 4.1.11: we understand none */
    json_decref(h);
    return err;
}

/* HMAC-SHA256 of the signing input, as unpadded base64url, against sig. */
static const char *check_signature(struct auth_key *key, const char *input, size_t n,
                                   const char *sig, size_t sig_len)
{
    if (sig_len != SIG_CHARS)
        return SIG;
    unsigned char mac[AUTH_MAC_BYTES];
    unsigned char b64[4 * ((AUTH_MAC_BYTES + 2) / 3) + 1];
    if (auth_key_mac(key, input, n, mac) != 0)
        return AUTH_REASON_MAC_FAILED;
    EVP_EncodeBlock(b64, mac, AUTH_MAC_BYTES);          /* 43 characters and one '=' */
    for (int i = 0; i < SIG_CHARS; i++)
        b64[i] = b64[i] == '+' ? '-' : b64[i] == '/' ? '_' : b64[i];
    return CRYPTO_memcmp(b64, sig, SIG_CHARS) == 0 ? NULL : AUTH_REASON_FORGED;
}

/* "sub" names uid exactly: decimal, no sign, no leading zero. */
static const char *check_sub(json_t *claims, uint32_t uid)
{
    json_t *sub = json_object_get(claims, "sub");
    if (!json_is_string(sub))
        return SUB;
    const char *s = json_string_value(sub);
    size_t n = json_string_length(sub);
    if (n == 0 || n > 10)
        return n == 0 ? SUB : AUTH_REASON_OTHER_UID;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return SUB;
    char want[12];
    int len = snprintf(want, sizeof want, "%u", uid);
    return (size_t)len == n && memcmp(s, want, n) == 0 ? NULL : AUTH_REASON_OTHER_UID;
}

/* The "topics" claim, if any, into v: a list of topic names, or of
 * prefixes of them ending in '*' ("*" alone: every topic). NULL when it is
 * absent or good, else why not. */
static const char *check_topics(json_t *claims, struct auth_verdict *v)
{
    json_t *topics = json_object_get(claims, "topics"), *t;
    size_t i, n = 0;
    if (!topics)
        return NULL;
    if (!json_is_array(topics))
        return TOPICS;
    json_array_foreach(topics, i, t) {
        const char *name = json_string_value(t);
        size_t len = name ? json_string_length(t) : 0;
        int prefix = len && name[len - 1] == '*';
        if (!name || (!prefix && !topic_name_ok(name, len)) ||
            (prefix && len > 1 && !topic_name_ok(name, len - 1)) ||
            n + len + (n ? 1 : 0) > AUTH_TOPICS_MAX)
            return TOPICS;
        if (n)
            v->topics[n++] = ',';
        memcpy(v->topics + n, name, len);
        n += len;
    }
    v->topics[n] = '\0';
    v->has_topics = 1;
    return NULL;
}

/* The claims, once the signature holds. Claims not named here are ignored:
 * a claim that narrows what the token opens (topics) is checked here too. */
static struct auth_verdict check_claims(json_t *claims, uint32_t uid, int64_t now)
{
    const char *err = check_sub(claims, uid);
    if (err)
        return refuse(AUTH_BAD, err);
    json_t *exp = json_object_get(claims, "exp");
    json_t *nbf = json_object_get(claims, "nbf");
    if (!json_is_integer(exp))
        return refuse(AUTH_BAD, EXP);
    if (nbf && !json_is_integer(nbf))
        return refuse(AUTH_BAD, NBF);
    int64_t e = (int64_t)json_integer_value(exp);
    if (e <= now)
        return refuse(AUTH_EXPIRED, AUTH_REASON_EXPIRED);
    if (nbf && (int64_t)json_integer_value(nbf) > now)
        return refuse(AUTH_EXPIRED, NOT_YET);
    struct auth_verdict v = {.outcome = AUTH_OK, .exp = e};
    if ((err = check_topics(claims, &v)) != NULL)
        return refuse(AUTH_BAD, err);
    return v;
}

struct auth_verdict auth_jwt_check(struct auth_key *key, uint32_t uid, const char *token,
                                   size_t len, int64_t now)
{
    if (len > AUTH_JWT_MAX)
        return refuse(AUTH_BAD, TOO_LONG);
    const char *dot1 = memchr(token, '.', len);
    const char *dot2 = dot1 ? memchr(dot1 + 1, '.', len - (size_t)(dot1 + 1 - token)) : NULL;
    if (!dot2)
        return refuse(AUTH_BAD, SHAPE);
    size_t head_len = (size_t)(dot1 - token), body_len = (size_t)(dot2 - dot1 - 1);
    const char *sig = dot2 + 1;
    size_t sig_len = len - (size_t)(sig - token);
    if (head_len == 0 || body_len == 0 || !all_b64url(token, head_len) ||
        !all_b64url(dot1 + 1, body_len) || !all_b64url(sig, sig_len))
        return refuse(AUTH_BAD, SHAPE);     /* a third dot lands here too */
    const char *err = check_header(token, head_len);
    if (!err)
        err = check_signature(key, token, (size_t)(dot2 - token), sig, sig_len);
    if (err)
        return refuse(AUTH_BAD, err);
    json_t *claims = decode_object(dot1 + 1, body_len);
    if (!claims)
        return refuse(AUTH_BAD, CLAIMS);
    struct auth_verdict v = check_claims(claims, uid, now);
    json_decref(claims);
    return v;
}
