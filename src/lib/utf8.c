/* SPDX-License-Identifier: Apache-2.0 */
/* UTF-8 validation: see utf8.h. */
#include "lib/utf8.h"

#include <string.h>

/* Bytes from i on that are ASCII, eight at a time (messages are mostly
 * ASCII: JSON). */
static size_t skip_ascii(const uint8_t *p, size_t i, size_t n)
{
    uint64_t w;
    while (i + 8 <= n) {
        memcpy(&w, p + i, 8);
        if (w & 0x8080808080808080ull)
            break;
        i += 8;
    }
    return i;
}

int utf8_feed(struct utf8_state *st, const uint8_t *p, size_t n)
{
    uint8_t need = st->need, lo = st->lo, hi = st->hi;
    for (size_t i = 0; i < n; i++) {
        unsigned c = p[i];
        if (need) {
            if (c < lo || c > hi)
                return 0;
            need--;
            lo = 0x80;
            hi = 0xBF;
            continue;
        }
        if (c < 0x80) {
            i = skip_ascii(p, i + 1, n) - 1;
            continue;
        }
        /* The first continuation byte's range rules out overlong forms
         * (E0, F0), surrogates (ED) and code points past U+10FFFF (F4). */
        if (c < 0xC2)
            return 0;
        if (c < 0xE0) {
            need = 1;
            lo = 0x80;
            hi = 0xBF;
        } else if (c < 0xF0) {
            need = 2;
            lo = c == 0xE0 ? 0xA0 : 0x80;
            hi = c == 0xED ? 0x9F : 0xBF;
        } else if (c < 0xF5) {
            need = 3;
            lo = c == 0xF0 ? 0x90 : 0x80;
            hi = c == 0xF4 ? 0x8F : 0xBF;
        } else {
            return 0;
        }
    }
    st->need = need;
    st->lo = lo;
    st->hi = hi;
    return 1;
}

int utf8_valid(const char *p, size_t n)
{
    struct utf8_state st = {0};
    return utf8_feed(&st, (const uint8_t *)p, n) && utf8_complete(&st);
}
