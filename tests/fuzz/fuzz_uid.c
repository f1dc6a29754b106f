/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: uid_parse (src/http/uid.c), the text after "/test/".
 * Checked against the rule it implements: a plain positive decimal
 * without leading zero, at most max. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/uid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What uid_parse must say, computed the slow, obvious way. */
static enum uid_result expected(const char *s, uint32_t max, uint64_t *value)
{
    size_t n = strlen(s);
    if (n == 0 || s[0] == '0' || strspn(s, "0123456789") != n || n > 19)
        return UID_INVALID;       /* 19 digits: the most uid_parse accepts as a number */
    *value = strtoull(s, NULL, 10);
    return *value > max ? UID_TOO_BIG : UID_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint32_t maxes[] = {1114112, 1, UINT32_MAX};
    char *s = malloc(size + 1);      /* exact size: ASan sees any overread */
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    for (size_t i = 0; i < sizeof maxes / sizeof maxes[0]; i++) {
        uint32_t out = 0;
        uint64_t want = 0;
        enum uid_result r = uid_parse(s, maxes[i], &out);
        enum uid_result e = expected(s, maxes[i], &want);
        /* 20-digit numbers below 2^64 may go either way; none is a uid. */
        if (r != e && !(e == UID_INVALID && strlen(s) == 20 && r == UID_TOO_BIG))
            abort();
        if (r == UID_OK && (out != want || out < 1))
            abort();
    }
    free(s);
    return 0;
}
