/* SPDX-License-Identifier: Apache-2.0 */
/* WebSockets not read while Erlang is behind: while more than
 * CLIENT_IN_PENDING_MAX (client_rate.h) of client messages wait for it,
 * a WebSocket that becomes readable is paused, not read (TCP pushes back
 * on its client); all are read again together once less than half waits,
 * looked at every WS_RESUME_MS. Each paused stream costs 8 bytes of one
 * list, only while paused. Which bits of the stream say it is paused is
 * ws_reader.c's business. Loop thread only. */
#ifndef HTTPDCNODE_WS_PAUSE_H
#define HTTPDCNODE_WS_PAUSE_H

#include <stdint.h>

struct stream;

#define WS_RESUME_MS 5

/* Given at startup: what to do for each paused stream once Erlang has
 * caught up (now_ms: client_rate_now_ms()). */
void ws_pause_init(void (*resume)(struct stream *s, uint32_t now_ms));

/* Whether Erlang is behind: a stream readable now is to be paused. */
int ws_pause_due(void);

/* Keeps s till Erlang catches up. -1 when that cannot be kept track of
 * (out of memory): s is read on. */
int ws_pause_add(struct stream *s);

/* A paused stream closes: off the list (linear, but only while paused). */
void ws_pause_drop(const struct stream *s);

/* At exit. */
void ws_pause_free(void);

#endif
