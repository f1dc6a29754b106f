/* SPDX-License-Identifier: Apache-2.0 */
/* What each WebSocket client sent in the current second of the monotonic
 * clock (bytes, frames, pings), against which ws_reader.c judges a flood.
 * A side table, so that an idle stream costs nothing: an entry (24 bytes)
 * only for a stream that sent in this second, at most twice as many
 * entries as such streams (256 at least). Loop thread only. */
#ifndef HTTPDCNODE_WS_BUDGET_H
#define HTTPDCNODE_WS_BUDGET_H

#include <stdint.h>

struct stream;

struct ws_budget {
    const struct stream *s;
    uint32_t second;
    uint32_t bytes;
    uint16_t frames;
    uint16_t pings;
};

/* s's entry for second now (clock seconds, never 0), made if need be;
 * NULL when out of memory or the table is too crowded to count s. */
struct ws_budget *ws_budget_of(const struct stream *s, uint32_t now);

/* The stream closes: its entry is no one's (a new stream at the same
 * address starts afresh). */
void ws_budget_forget(const struct stream *s);

/* At exit. */
void ws_budget_free(void);

#endif
