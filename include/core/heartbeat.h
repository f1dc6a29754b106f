/* SPDX-License-Identifier: Apache-2.0 */
/* Every --heartbeat seconds, one walk over the open streams: an SSE stream
 * gets a comment line and a WebSocket a ping (it is closed when it answers
 * neither of two), so that proxies that cut idle connections keep them. */
#ifndef HTTPDCNODE_HEARTBEAT_H
#define HTTPDCNODE_HEARTBEAT_H

#include <event2/event.h>
#include <stdint.h>

/* seconds 0: none. */
int heartbeat_start(struct event_base *base, uint32_t seconds);
void heartbeat_stop(void);

#endif
