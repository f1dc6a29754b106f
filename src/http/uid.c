/* SPDX-License-Identifier: Apache-2.0 */
/* User id parsing: a plain positive decimal and nothing else. */
#include "http/uid.h"

enum uid_result uid_parse(const char *s, uint32_t max, uint32_t *out)
{
    uint64_t v = 0;
    const char *p = s;

    if (*p < '1' || *p > '9')          /* empty, sign, leading zero, junk */
        return UID_INVALID;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (v > (UINT64_MAX - 9) / 10)  /* too long to be a number we hold */
            return UID_INVALID;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (*p != '\0')
        return UID_INVALID;
    if (v > max)
        return UID_TOO_BIG;
    *out = (uint32_t)v;
    return UID_OK;
}
