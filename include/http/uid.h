/* SPDX-License-Identifier: Apache-2.0 */
/* Parsing of the user id in a request path such as /test/123. */
#ifndef HTTPDCNODE_UID_H
#define HTTPDCNODE_UID_H

#include <stddef.h>
#include <stdint.h>

enum uid_result { UID_OK = 0, UID_INVALID, UID_TOO_BIG };

/* s is the text after "/test/": a plain positive decimal, no sign, no junk.
 * UID_TOO_BIG when it is a valid number above max (out holds max+1 then is unset). */
enum uid_result uid_parse(const char *s, uint32_t max, uint32_t *out);

#endif
