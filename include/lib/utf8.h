/* SPDX-License-Identifier: Apache-2.0 */
/* Strict UTF-8 validation (RFC 3629: no overlong forms, no surrogates,
 * nothing above U+10FFFF), whole or piece by piece. A WebSocket text frame
 * must hold valid UTF-8: the server's own frames choose text or binary by
 * it, and a client's invalid text frame is closed with 1007. */
#ifndef HTTPDCNODE_UTF8_H
#define HTTPDCNODE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Where a validation stopped: continuation bytes still due, and the range
 * the next one must be in. Zeroed: at the start of a text. */
struct utf8_state {
    uint8_t need, lo, hi;
};

/* Validates the next n bytes; 0 as soon as they cannot be UTF-8. */
int utf8_feed(struct utf8_state *st, const uint8_t *p, size_t n);

/* Whether the text has ended on a character boundary. */
static inline int utf8_complete(const struct utf8_state *st) { return st->need == 0; }

/* Whether p[0..n) is valid UTF-8 as a whole. */
int utf8_valid(const char *p, size_t n);

#endif
