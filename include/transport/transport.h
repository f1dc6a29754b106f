/* SPDX-License-Identifier: Apache-2.0 */
/* The one way a transport opens a stream. Loop thread only.
 *
 *   transport_reserve   the stream's own descriptor of the socket
 *                       (socket_export_reserve), then stream_open: in the
 *                       uid table, WELCOMING
 *   transport_open      that, then the request is let go (http_guard),
 *                       the socket leaves evhttp (socket_export), the
 *                       stream imports it, writes its head and replays
 *                       what the client missed: SSE, WebSocket, long-poll
 * The chunked transport reserves, then lets evhttp send its head and
 * welcome before the socket leaves evhttp (chunked.c). */
#ifndef HTTPDCNODE_TRANSPORT_H
#define HTTPDCNODE_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

struct evhttp_request;
struct stream;
struct timeval;

/* The new stream of uid with that framing (req kept in it: for one whose
 * head evhttp sends), or NULL, with nothing sent, when no descriptor or
 * memory is left (the front door answers 503). */
struct stream *transport_reserve(struct evhttp_request *req, uint32_t uid, uint8_t framing,
                                 int keep_req);

/* How a stream that leaves evhttp at once starts. */
struct transport_opening {
    uint8_t framing;
    const char *head;            /* its first bytes (the HTTP head), written by the stream */
    size_t head_len;
    uint8_t replay;              /* 0: no stream_replay after the head */
    const char *since;           /* replay after this id (NULL: none asked) */
    uint32_t budget;             /* bytes of messages the replay may take (UINT32_MAX: all) */
    const struct timeval *idle;  /* NULL: none; else the framing's transport_ops idle */
    /* NULL, or what follows the head before the replay (SSE's conn id);
     * -1 when the stream ended. */
    int (*after_head)(struct stream *s);
};

/* -1, with nothing sent, when no descriptor or memory is left (503); 0
 * once the request is the stream's (whether the stream lived on or not). */
int transport_open(struct evhttp_request *req, uint32_t uid, const struct transport_opening *o);

#endif
