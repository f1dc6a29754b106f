/* SPDX-License-Identifier: Apache-2.0 */
/* Subscriber JWTs (auth_jwt.c), through the same entry as the older tokens
 * (auth_token_check: token=JWT in the query, Authorization: Bearer JWT).
 * Tokens are made here from JSON text with OpenSSL's one-shot HMAC() and a
 * base64url encoder of this file, not with the code under test; one comes
 * from PyJWT. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "auth/auth_jwt.h"
#include "auth/auth_token.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "key_fixture.h"
#define HS256 "{\"alg\":\"HS256\",\"typ\":\"JWT\"}"

/* Unpadded base64url of in[0..n) at out; returns the characters written. */
static size_t b64url(const unsigned char *in, size_t n, char *out)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0) |
                     (i + 2 < n ? in[i + 2] : 0);
        out[o++] = abc[v >> 18 & 63];
        out[o++] = abc[v >> 12 & 63];
        if (i + 1 < n)
            out[o++] = abc[v >> 6 & 63];
        if (i + 2 < n)
            out[o++] = abc[v & 63];
    }
    out[o] = '\0';
    return o;
}

/* header.claims.signature, signed with secret (NULL: no signature at all,
 * as alg "none" has). */
static char *make(const char *header, const char *claims, const char *secret, char *out)
{
    size_t n = b64url((const unsigned char *)header, strlen(header), out);
    out[n++] = '.';
    n += b64url((const unsigned char *)claims, strlen(claims), out + n);
    unsigned char mac[32];
    unsigned int len = 0;
    out[n++] = '.';
    out[n] = '\0';
    if (secret) {
        HMAC(EVP_sha256(), secret, (int)strlen(secret), (unsigned char *)out, n - 1, mac, &len);
        assert_int_equal(len, 32);
        b64url(mac, 32, out + n);
    }
    return out;
}

static struct auth_verdict via_query(uint32_t uid, const char *jwt)
{
    char *q = malloc(strlen(jwt) + 64);
    snprintf(q, strlen(jwt) + 64, "since=1&token=%s&x=y", jwt);
    struct auth_verdict v = auth_token_check(key, uid, q, NULL, NOW);
    free(q);
    return v;
}

static struct auth_verdict via_header(uint32_t uid, const char *jwt)
{
    char *h = malloc(strlen(jwt) + 16);
    snprintf(h, strlen(jwt) + 16, "Bearer %s ", jwt);
    struct auth_verdict v = auth_token_check(key, uid, NULL, h, NOW);
    free(h);
    return v;
}

/* The same verdict both ways; returns it. */
static struct auth_verdict both(uint32_t uid, const char *jwt)
{
    struct auth_verdict q = via_query(uid, jwt), h = via_header(uid, jwt);
    assert_int_equal(q.outcome, h.outcome);
    assert_int_equal(q.exp, h.exp);
    if (q.reason || h.reason)
        assert_string_equal(q.reason, h.reason);
    return q;
}

static void expect(uint32_t uid, const char *jwt, enum auth_outcome outcome, const char *reason)
{
    struct auth_verdict v = both(uid, jwt);
    if (v.outcome != outcome || (reason && (!v.reason || strcmp(v.reason, reason) != 0)))
        fail_msg("%s for uid %u: %d '%s', not %d '%s'", jwt, uid, (int)v.outcome,
                 v.reason ? v.reason : "", (int)outcome, reason ? reason : "");
}

static void pyjwt_token_opens_its_uid(void **state)
{
    (void)state;
    /* jwt.encode({"sub": "5", "exp": 1700000600}, b"s3cret", algorithm="HS256") */
    const char *t = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiI1IiwiZXhwIjoxNzAwMDAwNjAwfQ."
                    "XtgD_WeI6vV7QtR0BGi0LWw2ZQlJQGiQYdQJGohh5tQ";
    struct auth_verdict v = both(5, t);
    assert_int_equal(v.outcome, AUTH_OK);
    assert_int_equal(v.exp, EXP);
    assert_null(v.reason);
    char mine[256];
    assert_string_equal(make(HS256, "{\"sub\":\"5\",\"exp\":1700000600}", SECRET, mine), t);
}

static void claims_and_headers_beyond_the_known_are_ignored(void **state)
{
    (void)state;
    char t[1024];
    expect(7, make("{\"alg\":\"HS256\"}", "{\"sub\":\"7\",\"exp\":1700000600}", SECRET, t),
           AUTH_OK, NULL);
    expect(7, make("{ \"kid\" : \"k1\", \"alg\" : \"HS256\", \"typ\" : \"jwt\" }",
                   "{\"iss\":\"app\",\"iat\":1699999999,\"topics\":[\"a\",\"b.*\"],"
                   "\"nbf\":1699999000,\"sub\":\"7\",\"exp\":1700000600,\"x\":{\"y\":[1,2.5]}}",
                   SECRET, t),
           AUTH_OK, NULL);
    /* the largest uid */
    expect(4294967295u, make(HS256, "{\"sub\":\"4294967295\",\"exp\":1700000600}", SECRET, t),
           AUTH_OK, NULL);
}

static void expired_and_not_yet_valid(void **state)
{
    (void)state;
    char t[512];
    expect(5, make(HS256, "{\"sub\":\"5\",\"exp\":1700000000}", SECRET, t), AUTH_EXPIRED,
           "Token expired: get a fresh one");
    expect(5, make(HS256, "{\"sub\":\"5\",\"exp\":-1}", SECRET, t), AUTH_EXPIRED, NULL);
    expect(5, make(HS256, "{\"sub\":\"5\",\"exp\":1700000001}", SECRET, t), AUTH_OK, NULL);
    expect(5, make(HS256, "{\"sub\":\"5\",\"exp\":1700000600,\"nbf\":1700000001}", SECRET, t),
           AUTH_EXPIRED, "Token not valid yet (its nbf is later): check the clocks");
    expect(5, make(HS256, "{\"sub\":\"5\",\"exp\":1700000600,\"nbf\":1700000000}", SECRET, t),
           AUTH_OK, NULL);
    /* forged and expired: bad, never expired */
    expect(5, make(HS256, "{\"sub\":\"5\",\"exp\":1}", "other", t), AUTH_BAD,
           "Token signature does not match");
}

static void forged_tokens(void **state)
{
    (void)state;
    char t[512], u[512];
    const char *claims = "{\"sub\":\"5\",\"exp\":1700000600}";
    expect(5, make(HS256, claims, "other", t), AUTH_BAD, "Token signature does not match");
    /* one character of the signature changed */
    make(HS256, claims, SECRET, t);
    char *last = t + strlen(t) - 1;
    *last = *last == 'A' ? 'B' : 'A';
    expect(5, t, AUTH_BAD, "Token signature does not match");
    /* the claims of another token under this one's signature */
    make(HS256, "{\"sub\":\"6\",\"exp\":1700000600}", SECRET, t);
    make(HS256, "{\"sub\":\"5\",\"exp\":1700000600}", SECRET, u);
    memcpy(strrchr(t, '.'), strrchr(u, '.'), strlen(strrchr(u, '.')) + 1);
    expect(5, t, AUTH_BAD, "Token signature does not match");
    expect(6, t, AUTH_BAD, "Token signature does not match");
}

/* alg none, another algorithm, and HS256 in another spelling: refused
 * before the signature is looked at, whatever it is. */
static void only_hs256(void **state)
{
    (void)state;
    char t[512];
    const char *claims = "{\"sub\":\"5\",\"exp\":1700000600}";
    const char *headers[] = {
        "{\"alg\":\"none\"}", "{\"alg\":\"None\",\"typ\":\"JWT\"}", "{\"alg\":\"HS512\"}",
        "{\"alg\":\"HS384\"}", "{\"alg\":\"RS256\"}", "{\"alg\":\"ES256\"}",
        "{\"alg\":\"hs256\"}", "{\"alg\":\"HS256 \"}", "{\"alg\":[\"HS256\"]}", "{\"typ\":\"JWT\"}",
        "{\"alg\":null}",
    };
    for (size_t i = 0; i < sizeof headers / sizeof headers[0]; i++) {
        expect(5, make(headers[i], claims, NULL, t), AUTH_BAD, "Token algorithm must be HS256");
        /* signed with the secret all the same (the key confusion) */
        expect(5, make(headers[i], claims, SECRET, t), AUTH_BAD, "Token algorithm must be HS256");
    }
    /* HS256 with no signature */
    expect(5, make(HS256, claims, NULL, t), AUTH_BAD,
           "Malformed token: the JWT signature must be 43 base64url characters (HMAC-SHA256)");
    expect(5, make("{\"alg\":\"HS256\",\"typ\":\"JOSE+JSON\"}", claims, SECRET, t), AUTH_BAD,
           "Malformed token: the JWT typ must be JWT");
    expect(5, make("{\"alg\":\"HS256\",\"crit\":[\"exp\"]}", claims, SECRET, t), AUTH_BAD,
           "Token has critical header parameters (crit) this server does not know");
    expect(5, make("{\"alg\":\"HS256\",\"alg\":\"none\"}", claims, SECRET, t), AUTH_BAD,
           "Malformed token: the JWT header is not a JSON object");
}

static void sub_names_the_uid_exactly(void **state)
{
    (void)state;
    char t[512];
    const uint32_t others[] = {50, 55, 4, 6, 15, 51};
    make(HS256, "{\"sub\":\"5\",\"exp\":1700000600}", SECRET, t);
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++)
        expect(others[i], t, AUTH_BAD, "Token is for another uid");
    expect(5, make(HS256, "{\"sub\":\"05\",\"exp\":1700000600}", SECRET, t), AUTH_BAD,
           "Token is for another uid");
    expect(5, make(HS256, "{\"sub\":\"00000000005\",\"exp\":1700000600}", SECRET, t), AUTH_BAD,
           "Token is for another uid");
    expect(5, make(HS256, "{\"sub\":\"4294967301\",\"exp\":1700000600}", SECRET, t), AUTH_BAD,
           "Token is for another uid");
    const char *bad[] = {
        "{\"sub\":5,\"exp\":1700000600}", "{\"exp\":1700000600}",
        "{\"sub\":\"\",\"exp\":1700000600}", "{\"sub\":\"5 \",\"exp\":1700000600}",
        "{\"sub\":\"+5\",\"exp\":1700000600}", "{\"sub\":\"5.0\",\"exp\":1700000600}",
        "{\"sub\":null,\"exp\":1700000600}", "{\"sub\":[\"5\"],\"exp\":1700000600}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect(5, make(HS256, bad[i], SECRET, t), AUTH_BAD,
               "Malformed token: sub must be the uid as a decimal string");
    /* a second sub (the one a lax reader would take) is no way round it */
    expect(6, make(HS256, "{\"sub\":\"5\",\"exp\":1700000600,\"sub\":\"6\"}", SECRET, t),
           AUTH_BAD, "Malformed token: the JWT claims are not a JSON object");
}

static void exp_and_nbf_are_integers(void **state)
{
    (void)state;
    char t[512];
    const char *no_exp[] = {
        "{\"sub\":\"5\"}", "{\"sub\":\"5\",\"exp\":\"1700000600\"}",
        "{\"sub\":\"5\",\"exp\":1700000600.0}", "{\"sub\":\"5\",\"exp\":1.7000006e9}",
        "{\"sub\":\"5\",\"exp\":null}", "{\"sub\":\"5\",\"exp\":true}",
    };
    for (size_t i = 0; i < sizeof no_exp / sizeof no_exp[0]; i++)
        expect(5, make(HS256, no_exp[i], SECRET, t), AUTH_BAD,
               "Malformed token: exp must be an integer (Unix seconds)");
    expect(5, make(HS256, "{\"sub\":\"5\",\"exp\":1700000600,\"nbf\":\"0\"}", SECRET, t),
           AUTH_BAD, "Malformed token: nbf must be an integer (Unix seconds)");
    /* larger than any integer jansson holds */
    expect(5, make(HS256, "{\"sub\":\"5\",\"exp\":99999999999999999999999}", SECRET, t),
           AUTH_BAD, "Malformed token: the JWT claims are not a JSON object");
}

static void malformed_shapes(void **state)
{
    (void)state;
    char t[512], q[600];
    const char *shape = "Malformed token: a JWT is three base64url parts joined by dots";
    make(HS256, "{\"sub\":\"5\",\"exp\":1700000600}", SECRET, t);
    const char *cases[] = {"a", "a.b", ".b.c", "a..c", "eyJ.eyJ.x.y", "e+J.eyJ.abc",
                           "eyJ.ey=J.abc", "eyJ.eyJ.ab c", "eyJ.eyJ.abc%20"};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect(5, cases[i], AUTH_BAD, shape);
    /* a valid token with a fourth part, or padding */
    snprintf(q, sizeof q, "%s.x", t);
    expect(5, q, AUTH_BAD, shape);
    snprintf(q, sizeof q, "%s=", t);
    expect(5, q, AUTH_BAD, shape);
    /* base64url that is not JSON, or not an object */
    expect(5, make("[\"HS256\"]", "{}", SECRET, t), AUTH_BAD,
           "Malformed token: the JWT header is not a JSON object");
    expect(5, make("{\"alg\":\"HS256\"", "{}", SECRET, t), AUTH_BAD,
           "Malformed token: the JWT header is not a JSON object");
    expect(5, make(HS256, "[1]", SECRET, t), AUTH_BAD,
           "Malformed token: the JWT claims are not a JSON object");
    expect(5, make(HS256, "{\"sub\":\"5\",\"exp\":1700000600", SECRET, t), AUTH_BAD,
           "Malformed token: the JWT claims are not a JSON object");
    expect(5, make(HS256, "{\"sub\":\"5\\u0000\",\"exp\":1700000600}", SECRET, t), AUTH_BAD,
           "Malformed token: the JWT claims are not a JSON object");
    /* an impossible base64 length (4n + 1) */
    expect(5, "eyJhb.eyJ.XtgD_WeI6vV7QtR0BGi0LWw2ZQlJQGiQYdQJGohh5tQ", AUTH_BAD,
           "Malformed token: the JWT header is not a JSON object");
}

static void length_is_bounded(void **state)
{
    (void)state;
    /* a padding claim brings the token to exactly AUTH_JWT_MAX, then one more */
    char *claims = malloc(AUTH_JWT_MAX);
    char *t = malloc(2 * AUTH_JWT_MAX);
    size_t fixed = strlen(make(HS256, "{\"sub\":\"5\",\"exp\":1700000600,\"p\":\"\"}", SECRET, t));
    size_t pad = (AUTH_JWT_MAX - fixed) / 4 * 3;       /* 3 bytes of JSON: 4 characters */
    snprintf(claims, AUTH_JWT_MAX, "{\"sub\":\"5\",\"exp\":1700000600,\"p\":\"%0*d\"}",
             (int)pad, 0);
    size_t n = strlen(make(HS256, claims, SECRET, t));
    assert_true(n <= AUTH_JWT_MAX && n > AUTH_JWT_MAX - 4);
    expect(5, t, AUTH_OK, NULL);
    snprintf(claims, AUTH_JWT_MAX, "{\"sub\":\"5\",\"exp\":1700000600,\"p\":\"%0*d\"}",
             (int)pad + 3, 0);
    assert_true(strlen(make(HS256, claims, SECRET, t)) > AUTH_JWT_MAX);
    expect(5, t, AUTH_BAD, "Malformed token: a JWT has at most " AUTH_JWT_MAX_TEXT " characters");
    free(claims);
    free(t);
}

static void query_forms(void **state)
{
    (void)state;
    char t[512], q[1100], h[600];
    make(HS256, "{\"sub\":\"5\",\"exp\":1700000600}", SECRET, t);
    const char *twice = "Malformed token: token=JWT once, without exp and sig";
    snprintf(q, sizeof q, "token=%s&token=%s", t, t);
    assert_string_equal(auth_token_check(key, 5, q, NULL, NOW).reason, twice);
    snprintf(q, sizeof q, "token=%s&exp=1700000600", t);
    assert_string_equal(auth_token_check(key, 5, q, NULL, NOW).reason, twice);
    snprintf(q, sizeof q, "sig=x&token=%s", t);
    assert_string_equal(auth_token_check(key, 5, q, NULL, NOW).reason, twice);
    assert_int_equal(auth_token_check(key, 5, "token=", NULL, NOW).outcome, AUTH_BAD);
    assert_int_equal(auth_token_check(key, 5, "token", NULL, NOW).outcome, AUTH_BAD);
    /* a parameter whose name only starts with token is another one */
    snprintf(q, sizeof q, "tokens=%s", t);
    assert_int_equal(auth_token_check(key, 5, q, NULL, NOW).outcome, AUTH_MISSING);
    /* the header wins over the query */
    snprintf(q, sizeof q, "token=%s", t);
    snprintf(h, sizeof h, "Bearer %s", make(HS256, "{\"sub\":\"5\",\"exp\":1}", SECRET, t));
    assert_int_equal(auth_token_check(key, 5, q, h, NOW).outcome, AUTH_EXPIRED);
    assert_int_equal(auth_token_check(key, 5, q, "Basic dXNlcjpwYXNz", NOW).outcome, AUTH_OK);
    assert_string_equal(auth_token_check(key, 5, NULL, "Bearer  ", NOW).reason,
                        "Malformed token: expected Authorization: Bearer JWT (or UID.EXP.HMAC)");
}

/* Direct calls, as the fuzz harness makes them: a length, no terminator. */
static void checks_only_len_bytes(void **state)
{
    (void)state;
    char t[512];
    size_t n = strlen(make(HS256, "{\"sub\":\"5\",\"exp\":1700000600}", SECRET, t));
    memcpy(t + n, "XYZ", 4);
    assert_int_equal(auth_jwt_check(key, 5, t, n, NOW).outcome, AUTH_OK);
    assert_int_equal(auth_jwt_check(key, 5, t, n + 3, NOW).outcome, AUTH_BAD);
    assert_int_equal(auth_jwt_check(key, 5, t, n - 1, NOW).outcome, AUTH_BAD);
    assert_int_equal(auth_jwt_check(key, 5, t, 0, NOW).outcome, AUTH_BAD);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pyjwt_token_opens_its_uid),
        cmocka_unit_test(claims_and_headers_beyond_the_known_are_ignored),
        cmocka_unit_test(expired_and_not_yet_valid),
        cmocka_unit_test(forged_tokens),
        cmocka_unit_test(only_hs256),
        cmocka_unit_test(sub_names_the_uid_exactly),
        cmocka_unit_test(exp_and_nbf_are_integers),
        cmocka_unit_test(malformed_shapes),
        cmocka_unit_test(length_is_bounded),
        cmocka_unit_test(query_forms),
        cmocka_unit_test(checks_only_len_bytes),
    };
    return cmocka_run_group_tests_name("auth_jwt", tests, setup, teardown);
}
