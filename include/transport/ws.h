/* SPDX-License-Identifier: Apache-2.0 */
/* GET /ws/N: WebSocket (RFC 6455, version 13). The handshake is checked
 * (ws_handshake.c), then the socket leaves evhttp at once, as for SSE: the
 * 101 head, a gap frame when the client missed more than is kept, and what
 * it missed (after ?since=EPOCH:SEQ, with the ws+meta.httpdcnode
 * subprotocol) are written by the stream itself; then every message as one
 * frame (framing.c). What the client sends is ws_reader.c's. */
#ifndef HTTPDCNODE_WS_H
#define HTTPDCNODE_WS_H

#include "core/client_rate.h"
#include "http/http_config.h"

#include <event2/event.h>
#include <stdint.h>

struct evhttp_request;

struct ws_config {
    struct http_origins origins;        /* --allow-origin (kept: it outlives the server) */
    int deflate;                        /* --ws-deflate */
    struct client_msg_config client;    /* what the clients' messages may be */
};

/* What WebSocket handshakes follow and client messages may be; registers
 * GET /ws/uid and the WebSocket's transport_ops (its client's frames,
 * read by ws_reader.c; a ping at each heartbeat). */
int ws_init(const struct ws_config *cfg);
void ws_free(void);

#endif
