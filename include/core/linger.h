/* SPDX-License-Identifier: Apache-2.0 */
/* Closing a socket its client may still be writing to. close() with
 * unread input makes the kernel reset the connection at once and throw
 * away what it had not sent yet: a goodbye just written (a WebSocket's
 * close frame, an SSE end event, a last chunk) would be lost exactly when
 * the server ends a client that keeps sending (a flood, a client past its
 * rate). So the socket is shut for writing (what was written, then FIN, go
 * out), and what comes in is read and thrown away until the client closes,
 * LINGER_MS pass or LINGER_BYTES came; then it is closed (nginx's
 * lingering close). Bounded : LINGER_MAX sockets at once (their records
 * LINGER_MAX x ~160 B, made at the first use); past that a socket is closed
 * at once, counted (linger_full; lingering: how many now). Loop thread only. */
#ifndef HTTPDCNODE_LINGER_H
#define HTTPDCNODE_LINGER_H

#include <stdint.h>

struct event_base;

#define LINGER_MS 2000
#define LINGER_BYTES (256u << 10)
#define LINGER_MAX 256

void linger_configure(struct event_base *base);
/* Takes fd: closed once its client is done (above) when client_may_send
 * (a WebSocket: its client sends when it likes) or input is unread now;
 * else at once (a FIN, all written still delivered). */
void linger_close(int fd, int client_may_send);
/* Closes every lingering socket now (the loop's end). */
void linger_close_all(void);

#endif
