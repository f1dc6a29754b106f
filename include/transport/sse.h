/* SPDX-License-Identifier: Apache-2.0 */
/* GET /sse/N: Server-Sent Events (text/event-stream). The socket leaves
 * evhttp at once: the head, the retry advice, a gap event when the client
 * missed more than is kept, and what it missed (after the id it gives in
 * Last-Event-ID, or ?since=EPOCH:SEQ on a first connect) are written by
 * the stream itself; then every message as an event with its id. */
#ifndef HTTPDCNODE_SSE_H
#define HTTPDCNODE_SSE_H

#include <event2/event.h>
#include <stdint.h>

/* Registers GET /sse/uid (its start: -1, with nothing sent, when no
 * descriptor or memory is left, and the front door answers 503) and the
 * SSE heartbeat, a comment line. */
int sse_init(void);

#endif
