/* SPDX-License-Identifier: Apache-2.0 */
/* Client bytes in flight: what clients sent that the server holds until it
 * is whole (HTTP requests being read, their bodies above all; WebSocket
 * messages in flight), all connections together, under one bound
 * (--max-input-total). Past it the holders holding the most are shed, the
 * largest first, until the rest fit: a client sending much is shed before
 * one sending little. How a holder is shed is its kind's business
 * (http_guard.c, ws_reader.c). Loop thread only.
 *
 * A holder costs 4 bytes in its owner's record and, while it holds
 * something, a 24-byte entry of a side table (which only grows, to the
 * most holders there ever were at once). */
#ifndef HTTPDCNODE_INFLIGHT_H
#define HTTPDCNODE_INFLIGHT_H

#include <stdint.h>

enum inflight_kind { INFLIGHT_HTTP, INFLIGHT_WS, INFLIGHT_KINDS };

/* In the owner's record; zeroed: holds nothing. */
struct inflight {
    uint32_t at;            /* its entry + 1, 0: none */
};

/* Sheds the holder of owner: it is doomed (its bytes no longer count
 * against the bound) and must drop its bytes (inflight_drop), now or
 * soon after (a connection that cannot be freed inside the callback
 * that is running: http_guard.c frees it after). */
typedef void (*inflight_shed_fn)(void *owner);

/* The bound (0: none, the default) and how each kind is shed. */
void inflight_configure(uint64_t max_total);
void inflight_on_shed(enum inflight_kind kind, inflight_shed_fn shed);

/* h, of owner and kind, holds n bytes more. When that takes the bytes not
 * doomed past the bound, the largest holders are shed until they fit
 * again: -1 when h is one of them (the caller ends it; nothing else is
 * done for it), else 0. Out of memory for the table, h is refused (-1). */
int inflight_add(struct inflight *h, void *owner, enum inflight_kind kind, uint32_t n);

/* h holds nothing any more (nothing happens when it held nothing). */
void inflight_drop(struct inflight *h);

/* The bytes h holds (0: none). */
uint32_t inflight_bytes(const struct inflight *h);

/* The owner of a doomed holder of kind, its bytes dropped; NULL when
 * none is left. */
void *inflight_take_doomed(enum inflight_kind kind);

/* At exit. */
void inflight_free(void);

#endif
