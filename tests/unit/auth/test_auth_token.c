/* SPDX-License-Identifier: Apache-2.0 */
/* Subscriber tokens: the pure check (auth_token.c) and the secret file
 * (auth_secret.c). Expected signatures come from OpenSSL's one-shot HMAC(),
 * not from the code under test, and one from `openssl dgst -hmac`. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "auth/auth_secret.h"
#include "auth/auth_token.h"

#include <ctype.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "key_fixture.h"

/* Reference signature of "uid:exp" under secret, lowercase hex. */
static void reference_sig(const char *secret, uint32_t uid, long long exp, char hex[65])
{
    char msg[48];
    int n = snprintf(msg, sizeof msg, "%u:%lld", uid, exp);
    unsigned char mac[32];
    unsigned int len = 0;
    HMAC(EVP_sha256(), secret, (int)strlen(secret), (unsigned char *)msg, (size_t)n, mac, &len);
    assert_int_equal(len, 32);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", mac[i]);
}

static char *query_for(uint32_t uid, long long exp, char buf[160])
{
    char sig[65];
    reference_sig(SECRET, uid, exp, sig);
    snprintf(buf, 160, "exp=%lld&sig=%s", exp, sig);
    return buf;
}

static char *bearer_for(uint32_t uid, long long exp, char buf[160])
{
    char sig[65];
    reference_sig(SECRET, uid, exp, sig);
    snprintf(buf, 160, "Bearer %u.%lld.%s", uid, exp, sig);
    return buf;
}

/* Fills a template: {E} the exp, {S} a valid signature of 5:{E}, {S63} its
 * first 63 digits. */
static void fill(const char *tpl, char *out, size_t size)
{
    char sig[65], exp[24];
    reference_sig(SECRET, 5, EXP, sig);
    snprintf(exp, sizeof exp, "%d", EXP);
    size_t n = 0;
    for (const char *p = tpl; *p && n + 70 < size;) {
        if (strncmp(p, "{E}", 3) == 0) {
            n += (size_t)snprintf(out + n, size - n, "%s", exp);
            p += 3;
        } else if (strncmp(p, "{S63}", 5) == 0) {
            n += (size_t)snprintf(out + n, size - n, "%.63s", sig);
            p += 5;
        } else if (strncmp(p, "{S}", 3) == 0) {
            n += (size_t)snprintf(out + n, size - n, "%s", sig);
            p += 3;
        } else {
            out[n++] = *p++;
        }
    }
    out[n] = '\0';
}

static enum auth_outcome check(uint32_t uid, const char *query, const char *authz)
{
    return auth_token_check(key, uid, query, authz, NOW).outcome;
}

static void signs_as_openssl_dgst_does(void **state)
{
    (void)state;
    /* printf '5:2000000000' | openssl dgst -sha256 -hmac s3cret */
    char hex[65];
    assert_int_equal(auth_token_sign(key, 5, 2000000000, hex), 0);
    assert_string_equal(hex, "dc7d5f9dd29d0dc49e296b4f93207895c485c4e57595453c4ac77f941ad45f63");
    char ref[65];
    reference_sig(SECRET, 123456, EXP, ref);
    assert_int_equal(auth_token_sign(key, 123456, EXP, hex), 0);
    assert_string_equal(hex, ref);
}

static void valid_token_in_query_or_header(void **state)
{
    (void)state;
    char q[160], h[160];
    assert_int_equal(check(5, query_for(5, EXP, q), NULL), AUTH_OK);
    assert_int_equal(check(5, NULL, bearer_for(5, EXP, h)), AUTH_OK);
    assert_null(auth_token_check(key, 5, q, NULL, NOW).reason);
    /* other parameters, in any order, are ignored */
    char sig[65], other[300];
    reference_sig(SECRET, 7, EXP, sig);
    snprintf(other, sizeof other, "nocache=1&sig=%s&x&&y=exp&exp=%d&z=", sig, EXP);
    assert_int_equal(check(7, other, NULL), AUTH_OK);
    /* the scheme is case-insensitive, blanks around the credentials too */
    fill("  bEaReR \t5.{E}.{S} \t", other, sizeof other);
    assert_int_equal(check(5, NULL, other), AUTH_OK);
}

static void upper_case_hex_is_accepted(void **state)
{
    (void)state;
    char q[160], h[160];
    query_for(9, EXP, q);
    bearer_for(9, EXP, h);
    for (char *p = strstr(q, "sig=") + 4; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    for (char *p = strrchr(h, '.') + 1; *p; p++)
        *p = (char)toupper((unsigned char)*p);
    assert_int_equal(check(9, q, NULL), AUTH_OK);
    assert_int_equal(check(9, NULL, h), AUTH_OK);
}

static void expired_token_is_refused_as_expired(void **state)
{
    (void)state;
    char q[160], h[160];
    /* valid while EXP is later than now: at EXP itself it is over */
    assert_int_equal(check(5, query_for(5, NOW, q), NULL), AUTH_EXPIRED);
    assert_int_equal(check(5, query_for(5, NOW - 1, q), NULL), AUTH_EXPIRED);
    assert_int_equal(check(5, NULL, bearer_for(5, NOW - 3600, h)), AUTH_EXPIRED);
    assert_int_equal(check(5, query_for(5, NOW + 1, q), NULL), AUTH_OK);
    assert_string_equal(auth_token_check(key, 5, query_for(5, 0, q), NULL, NOW).reason,
                        "Token expired: get a fresh one");
}

static void forged_token_is_bad(void **state)
{
    (void)state;
    char q[160], h[160], sig[65];
    query_for(5, EXP, q);
    char *last = q + strlen(q) - 1;
    *last = *last == '0' ? '1' : '0';               /* one hex digit changed */
    assert_int_equal(check(5, q, NULL), AUTH_BAD);
    /* signed with another secret */
    reference_sig("other", 5, EXP, sig);
    snprintf(q, sizeof q, "exp=%d&sig=%s", EXP, sig);
    assert_int_equal(check(5, q, NULL), AUTH_BAD);
    snprintf(h, sizeof h, "Bearer 5.%d.%s", EXP, sig);
    assert_int_equal(check(5, NULL, h), AUTH_BAD);
    /* a later exp under the old signature */
    reference_sig(SECRET, 5, EXP, sig);
    snprintf(q, sizeof q, "exp=%d&sig=%s", EXP + 1, sig);
    assert_int_equal(check(5, q, NULL), AUTH_BAD);
    /* a forged token with a past exp is bad, not expired */
    reference_sig("other", 5, NOW - 10, sig);
    snprintf(q, sizeof q, "exp=%d&sig=%s", NOW - 10, sig);
    assert_int_equal(check(5, q, NULL), AUTH_BAD);
}

static void token_for_one_uid_opens_no_other(void **state)
{
    (void)state;
    char q[160], h[160];
    query_for(5, EXP, q);
    bearer_for(5, EXP, h);
    const uint32_t others[] = {50, 55, 4, 6, 15, 51};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        assert_int_equal(check(others[i], q, NULL), AUTH_BAD);
        assert_int_equal(check(others[i], NULL, h), AUTH_BAD);
    }
    assert_string_equal(auth_token_check(key, 50, NULL, h, NOW).reason,
                        "Token is for another uid");
    /* the header's uid must be spelled as the path's: no leading zero */
    char sig[65], z[160];
    reference_sig(SECRET, 5, EXP, sig);
    snprintf(z, sizeof z, "Bearer 05.%d.%s", EXP, sig);
    assert_int_equal(check(5, NULL, z), AUTH_BAD);
}

static void no_token_is_missing(void **state)
{
    (void)state;
    assert_int_equal(check(5, NULL, NULL), AUTH_MISSING);
    assert_int_equal(check(5, "", NULL), AUTH_MISSING);
    assert_int_equal(check(5, "nocache=1&expiry=3&signature=x", NULL), AUTH_MISSING);
    /* another scheme is not a token, and there is none in the query */
    assert_int_equal(check(5, NULL, "Basic dXNlcjpwYXNz"), AUTH_MISSING);
    assert_int_equal(check(5, NULL, "Bearerish 5.1.2"), AUTH_MISSING);
    const char *r = auth_token_check(key, 5, NULL, NULL, NOW).reason;
    assert_non_null(r);
    assert_null(strchr(r, '\n'));
}

static void malformed_query_is_bad(void **state)
{
    (void)state;
    const char *tpls[] = {
        "exp={E}", "sig={S}", "exp={E}&sig={S}&exp={E}", "exp={E}&sig={S}&sig={S}",
        "exp={E}&exp={E}&sig={S}", "exp&sig={S}", "exp=&sig={S}", "exp={E}&sig=",
        "exp={E}&sig", "exp=-{E}&sig={S}", "exp=+{E}&sig={S}", "exp=0{E}&sig={S}",
        "exp={E}.0&sig={S}", "exp={E} &sig={S}", "exp={E}&sig={S}0", "exp={E}&sig={S63}",
        "exp={E}&sig=g{S63}", "exp={E}&sig=%20{S}", "exp={E}&sig={S}%00",
        "exp=%31{E}&sig={S}", "exp=1234567890123456789&sig={S}",
        "exp=99999999999999999999&sig={S}",
    };
    char q[300];
    for (size_t i = 0; i < sizeof tpls / sizeof tpls[0]; i++) {
        fill(tpls[i], q, sizeof q);
        enum auth_outcome o = check(5, q, NULL);
        if (o != AUTH_BAD)
            fail_msg("query '%s' gave %d, not AUTH_BAD", q, (int)o);
    }
    fill("exp={E}&sig={S}&exp={E}", q, sizeof q);
    assert_string_equal(auth_token_check(key, 5, q, NULL, NOW).reason,
                        "Malformed token: exp and sig go together, once each");
}

static void malformed_header_is_bad(void **state)
{
    (void)state;
    const char *tpls[] = {
        "Bearer", "Bearer ", "Bearer 5.{E}", "Bearer 5.{E}.{S}.x", "Bearer x.{E}.{S}",
        "Bearer .{E}.{S}", "Bearer 5..{S}", "Bearer 5.{E}.", "Bearer 5.{E}.{S63}",
        "Bearer 5.0{E}.{S}", "Bearer 5.{E}.{S} extra", "Bearer -5.{E}.{S}",
        "Bearer +5.{E}.{S}", "Bearer exp={E}&sig={S}",
    };
    char h[300];
    for (size_t i = 0; i < sizeof tpls / sizeof tpls[0]; i++) {
        fill(tpls[i], h, sizeof h);
        enum auth_outcome o = check(5, NULL, h);
        if (o != AUTH_BAD)
            fail_msg("header '%s' gave %d, not AUTH_BAD", h, (int)o);
    }
}

static void header_wins_over_query(void **state)
{
    (void)state;
    char q[160], h[160], bad_sig[65], forged[160];
    query_for(5, EXP, q);
    bearer_for(5, EXP, h);
    reference_sig("other", 5, EXP, bad_sig);
    /* valid header, forged query: the header is used */
    snprintf(forged, sizeof forged, "exp=%d&sig=%s", EXP, bad_sig);
    assert_int_equal(check(5, forged, h), AUTH_OK);
    /* forged header, valid query: the header is used, and refused */
    snprintf(forged, sizeof forged, "Bearer 5.%d.%s", EXP, bad_sig);
    assert_int_equal(check(5, q, forged), AUTH_BAD);
    /* expired header, valid query: expired */
    char old[160];
    assert_int_equal(check(5, q, bearer_for(5, NOW - 1, old)), AUTH_EXPIRED);
    /* a header of another scheme leaves the query in charge */
    assert_int_equal(check(5, q, "Basic dXNlcjpwYXNz"), AUTH_OK);
    snprintf(forged, sizeof forged, "exp=%d&sig=%s", EXP, bad_sig);
    assert_int_equal(check(5, forged, "Basic dXNlcjpwYXNz"), AUTH_BAD);
}

/* The key's context is re-initialised per check: results do not depend on
 * what was checked before. */
static void checks_do_not_leak_into_each_other(void **state)
{
    (void)state;
    char q[160], h[160];
    for (int i = 0; i < 200; i++) {
        uint32_t uid = (uint32_t)(i % 13) + 1;
        assert_int_equal(check(uid, query_for(uid, EXP + i, q), NULL), AUTH_OK);
        assert_int_equal(check(uid + 1, q, NULL), AUTH_BAD);
        assert_int_equal(check(uid, NULL, bearer_for(uid, NOW - i, h)), AUTH_EXPIRED);
    }
}

static void key_needs_a_secret(void **state)
{
    (void)state;
    assert_null(auth_key_new("", 0));
}

/* --- the secret file ------------------------------------------------------ */

static char *temp_file(const char *bytes, size_t n, mode_t mode)
{
    static char path[64];
    snprintf(path, sizeof path, "/tmp/test_auth.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, bytes, n), (ssize_t)n);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
    return path;
}

static int read_secret(const char *bytes, size_t n, mode_t mode, unsigned char *out,
                       size_t *len)
{
    char *path = temp_file(bytes, n, mode);
    int r = auth_secret_read(path, out, len);
    unlink(path);
    return r;
}

static void secret_file_loses_one_trailing_newline(void **state)
{
    (void)state;
    unsigned char out[AUTH_SECRET_MAX];
    size_t len = 0;
    assert_int_equal(read_secret("abc\n", 4, 0600, out, &len), 0);
    assert_int_equal(len, 3);
    assert_memory_equal(out, "abc", 3);
    assert_int_equal(read_secret("abc\n\n", 5, 0400, out, &len), 0);
    assert_int_equal(len, 4);
    assert_memory_equal(out, "abc\n", 4);
    assert_int_equal(read_secret("a\0b \r", 5, 0600, out, &len), 0);
    assert_int_equal(len, 5);
    assert_memory_equal(out, "a\0b \r", 5);
}

static void secret_file_refused_when_others_may_access_it(void **state)
{
    (void)state;
    unsigned char out[AUTH_SECRET_MAX];
    size_t len = 0;
    const mode_t modes[] = {0644, 0640, 0604, 0610, 0601, 0620, 0602, 0660, 0777};
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++)
        if (read_secret("abc", 3, modes[i], out, &len) != -1)
            fail_msg("mode %04o was accepted", (unsigned)modes[i]);
    assert_int_equal(read_secret("abc", 3, 0700, out, &len), 0);
}

static void secret_file_refused_when_empty_missing_or_huge(void **state)
{
    (void)state;
    unsigned char out[AUTH_SECRET_MAX];
    size_t len = 0;
    assert_int_equal(read_secret("", 0, 0600, out, &len), -1);
    assert_int_equal(read_secret("\n", 1, 0600, out, &len), -1);
    assert_int_equal(auth_secret_read("/nonexistent/secret", out, &len), -1);
    assert_int_equal(auth_secret_read("/tmp", out, &len), -1);
    char *big = malloc(AUTH_SECRET_MAX + 2);
    memset(big, 'x', AUTH_SECRET_MAX + 2);
    assert_int_equal(read_secret(big, AUTH_SECRET_MAX + 1, 0600, out, &len), -1);
    assert_int_equal(read_secret(big, AUTH_SECRET_MAX, 0600, out, &len), 0);
    assert_int_equal(len, AUTH_SECRET_MAX);
    big[AUTH_SECRET_MAX] = '\n';
    assert_int_equal(read_secret(big, AUTH_SECRET_MAX + 1, 0600, out, &len), 0);
    assert_int_equal(len, AUTH_SECRET_MAX);
    free(big);
}

int main(void)
{
    const struct CMUnitTest token[] = {
        cmocka_unit_test(signs_as_openssl_dgst_does),
        cmocka_unit_test(valid_token_in_query_or_header),
        cmocka_unit_test(upper_case_hex_is_accepted),
        cmocka_unit_test(expired_token_is_refused_as_expired),
        cmocka_unit_test(forged_token_is_bad),
        cmocka_unit_test(token_for_one_uid_opens_no_other),
        cmocka_unit_test(no_token_is_missing),
        cmocka_unit_test(malformed_query_is_bad),
        cmocka_unit_test(malformed_header_is_bad),
        cmocka_unit_test(header_wins_over_query),
        cmocka_unit_test(checks_do_not_leak_into_each_other),
        cmocka_unit_test(key_needs_a_secret),
    };
    const struct CMUnitTest secret[] = {
        cmocka_unit_test(secret_file_loses_one_trailing_newline),
        cmocka_unit_test(secret_file_refused_when_others_may_access_it),
        cmocka_unit_test(secret_file_refused_when_empty_missing_or_huge),
    };
    int failed = cmocka_run_group_tests_name("auth_token", token, setup, teardown);
    return failed + cmocka_run_group_tests_name("auth_secret", secret, NULL, NULL);
}
