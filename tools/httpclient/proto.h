/* SPDX-License-Identifier: Apache-2.0 */
/* What each --proto does with the bytes of a connection: the chunked
 * stream through resp_parser; Server-Sent Events through resp_parser's head
 * and sse_parser; WebSocket through ws_parser; long-poll answers through
 * resp_parser's head and poll_parser. Their events go to the handlers
 * proto_init was given (conn.c's: conn_welcome, conn_message...). */
#ifndef HTTPCLIENT_PROTO_H
#define HTTPCLIENT_PROTO_H

#include <stddef.h>

#include "conn-t.h"
#include "options.h"

enum feed_result {
    FEED_MORE = 0,      /* go on reading */
    FEED_STATUS,        /* the answer's status was not the one wanted */
    FEED_ENDED,         /* the server ended the stream (last chunk, close frame, EOF) */
    FEED_ERROR,         /* malformed */
    FEED_ANSWER,        /* poll: an answer is complete, the loop goes on */
    FEED_RETRY          /* poll: the connection closed before any byte of the answer */
};

/* What the parsers tell of a connection. */
struct proto_events {
    void (*welcome)(struct conn *c);
    void (*message)(struct conn *c, const struct msg_info *m);
    void (*gap)(struct conn *c);
    void (*pong)(struct conn *c);                       /* ws: a ping was answered */
    void (*reply)(struct conn *c, int has_ts, uint64_t ts); /* ws: an "event: conn" frame */
    void (*answer)(struct conn *c, int gap);            /* poll: an answer ended */
};

/* Before any connection: the --proto whose bytes are parsed, and where
 * their events go (ev is kept). */
void proto_init(enum client_proto proto, const struct proto_events *ev);
/* A request was sent on c: its answer starts. */
void proto_start(struct conn *c);
/* c's socket closes: what its parser holds is freed. */
void proto_end(struct conn *c);
enum feed_result proto_feed(struct conn *c, const char *buf, size_t len);
/* The peer closed c. */
enum feed_result proto_eof(struct conn *c);

#endif
