/* SPDX-License-Identifier: Apache-2.0 */
/* Signed subscriber tokens: finding the token in a request, checking it. */
#include "auth/auth_token.h"
#include "auth/auth_jwt.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define MAC_BYTES AUTH_MAC_BYTES
#define SIG_HEX (2 * MAC_BYTES)
/* 18 digits cannot overflow int64_t; Unix seconds need 10 until 2286. */
#define EXP_DIGITS_MAX 18

/* The token's parts, pointing into the request: a JWT (jwt set), or the
 * older form's three parts, uid NULL when it came from the query (the path
 * names the uid). */
struct token_text {
    const char *jwt, *uid, *exp, *sig;
    size_t jwt_len, uid_len, exp_len, sig_len;
};

static const char NO_TOKEN[] = "No token: add token=JWT (or exp=EXP&sig=HMAC) to the query, "
                               "or send Authorization: Bearer JWT";
static const char BAD_PAIR[] = "Malformed token: exp and sig go together, once each";
static const char BAD_JWT_PARAM[] = "Malformed token: token=JWT once, without exp and sig";
static const char BAD_BEARER[] = "Malformed token: expected Authorization: Bearer JWT "
                                 "(or UID.EXP.HMAC)";
static const char BAD_EXP[] = "Malformed token: exp must be Unix seconds in plain decimal";
static const char BAD_SIG[] = "Malformed token: sig must be 64 hex digits (HMAC-SHA256)";
static const char OTHER_UID[] = AUTH_REASON_OTHER_UID;
static const char FORGED[] = AUTH_REASON_FORGED;
static const char EXPIRED[] = AUTH_REASON_EXPIRED;
static const char MAC_FAILED[] = AUTH_REASON_MAC_FAILED;

int auth_token_sign(struct auth_key *key, uint32_t uid, int64_t exp, char hex[SIG_HEX + 1])
{
    char msg[48];
    int len = snprintf(msg, sizeof msg, "%u:%lld", uid, (long long)exp);
    unsigned char mac[MAC_BYTES];
    if (auth_key_mac(key, msg, (size_t)len, mac) != 0)
        return -1;
    for (int i = 0; i < MAC_BYTES; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    return 0;
}

/* --- finding the token ---------------------------------------------------- */

/* Takes one query parameter name ("exp", "sig", "token") into *val; others
 * are ignored. -1 when it comes a second time. */
static int take_param(const char *p, size_t n, const char *name, const char **val,
                      size_t *val_len)
{
    const char *eq = memchr(p, '=', n);
    size_t name_len = eq ? (size_t)(eq - p) : n;
    if (name_len != strlen(name) || memcmp(p, name, name_len) != 0)
        return 0;
    if (*val)
        return -1;
    *val = eq ? eq + 1 : p + n;        /* "exp" without '=' is an empty value */
    *val_len = eq ? n - name_len - 1 : 0;
    return 0;
}

/* The raw query, split on '&' (no percent-decoding: a token never needs it). */
static const char *token_from_query(const char *query, struct token_text *t)
{
    for (const char *p = query; p && *p;) {
        const char *amp = strchr(p, '&');
        size_t n = amp ? (size_t)(amp - p) : strlen(p);
        if (take_param(p, n, "token", &t->jwt, &t->jwt_len) != 0)
            return BAD_JWT_PARAM;
        if (take_param(p, n, "exp", &t->exp, &t->exp_len) != 0 ||
            take_param(p, n, "sig", &t->sig, &t->sig_len) != 0)
            return BAD_PAIR;
        p += n + (amp != NULL);
    }
    if (t->jwt)
        return t->exp || t->sig ? BAD_JWT_PARAM : NULL;
    if (!t->exp && !t->sig)
        return NO_TOKEN;
    return t->exp && t->sig ? NULL : BAD_PAIR;
}

static int is_space(char c) { return c == ' ' || c == '\t'; }

/* The credentials of "Bearer CRED", or NULL for another scheme. */
static const char *bearer_credentials(const char *h)
{
    while (is_space(*h))
        h++;
    if (strncasecmp(h, "Bearer", 6) != 0 || (h[6] != '\0' && !is_space(h[6])))
        return NULL;
    h += 6;
    while (is_space(*h))
        h++;
    return h;
}

/* A JWT, or "UID.EXP.HEX" (told apart by the uid's digits: a JWT's header
 * is base64url of '{', "ey..."); trailing blanks allowed. */
static const char *token_from_bearer(const char *cred, struct token_text *t)
{
    size_t n = strlen(cred);
    while (n > 0 && is_space(cred[n - 1]))
        n--;
    if (n == 0)
        return BAD_BEARER;
    if (cred[0] < '0' || cred[0] > '9') {
        *t = (struct token_text){.jwt = cred, .jwt_len = n};
        return NULL;
    }
    const char *dot1 = memchr(cred, '.', n);
    const char *dot2 = dot1 ? memchr(dot1 + 1, '.', n - (size_t)(dot1 + 1 - cred)) : NULL;
    if (!dot2 || memchr(dot2 + 1, '.', n - (size_t)(dot2 + 1 - cred)))
        return BAD_BEARER;
    *t = (struct token_text){.uid = cred, .uid_len = (size_t)(dot1 - cred),
                             .exp = dot1 + 1, .exp_len = (size_t)(dot2 - dot1 - 1),
                             .sig = dot2 + 1, .sig_len = n - (size_t)(dot2 + 1 - cred)};
    return NULL;
}

/* --- checking it ---------------------------------------------------------- */

static int all_digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9')
            return 0;
    return n > 0;
}

/* Plain decimal, no sign, no leading zero: the one spelling that was signed. */
static int parse_exp(const char *s, size_t n, int64_t *out)
{
    if (!all_digits(s, n) || n > EXP_DIGITS_MAX || (s[0] == '0' && n > 1))
        return -1;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (s[i] - '0');
    *out = v;
    return 0;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int parse_sig(const char *s, size_t n, unsigned char out[MAC_BYTES])
{
    if (n != SIG_HEX)
        return -1;
    for (size_t i = 0; i < MAC_BYTES; i++) {
        int hi = hex_value(s[2 * i]), lo = hex_value(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        out[i] = (unsigned char)(hi << 4 | lo);
    }
    return 0;
}

static struct auth_verdict refuse(enum auth_outcome outcome, const char *reason)
{
    return (struct auth_verdict){.outcome = outcome, .reason = reason};
}

static struct auth_verdict check_token(struct auth_key *key, uint32_t uid,
                                       const struct token_text *t, int64_t now)
{
    char msg[48];
    int uid_len = snprintf(msg, sizeof msg, "%u", uid);
    if (t->uid && !all_digits(t->uid, t->uid_len))
        return refuse(AUTH_BAD, BAD_BEARER);
    if (t->uid && (t->uid_len != (size_t)uid_len || memcmp(t->uid, msg, t->uid_len) != 0))
        return refuse(AUTH_BAD, OTHER_UID);
    int64_t exp;
    if (parse_exp(t->exp, t->exp_len, &exp) != 0)
        return refuse(AUTH_BAD, BAD_EXP);
    unsigned char given[MAC_BYTES], expected[MAC_BYTES];
    if (parse_sig(t->sig, t->sig_len, given) != 0)
        return refuse(AUTH_BAD, BAD_SIG);
    /* The message is "N:EXP" with EXP exactly as received (validated above). */
    int len = snprintf(msg, sizeof msg, "%u:%.*s", uid, (int)t->exp_len, t->exp);
    if (auth_key_mac(key, msg, (size_t)len, expected) != 0)
        return refuse(AUTH_BAD, MAC_FAILED);
    if (CRYPTO_memcmp(given, expected, MAC_BYTES) != 0)
        return refuse(AUTH_BAD, FORGED);
    /* Expiry only after the signature: a forged token is "bad", never "expired". */
    if (exp <= now)
        return refuse(AUTH_EXPIRED, EXPIRED);
    return (struct auth_verdict){.outcome = AUTH_OK, .exp = exp};
}

struct auth_verdict auth_token_check(struct auth_key *key, uint32_t uid, const char *query,
                                     const char *authorization, int64_t now)
{
    struct token_text t = {0};
    const char *cred = authorization ? bearer_credentials(authorization) : NULL;
    const char *err = cred ? token_from_bearer(cred, &t) : token_from_query(query, &t);
    if (err)
        return refuse(err == NO_TOKEN ? AUTH_MISSING : AUTH_BAD, err);
    return t.jwt ? auth_jwt_check(key, uid, t.jwt, t.jwt_len, now) : check_token(key, uid, &t, now);
}
