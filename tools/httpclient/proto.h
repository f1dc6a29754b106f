/* What each --proto does with the bytes of a connection: the chunked
 * stream through resp_parser; Server-Sent Events through resp_parser's head
 * and sse_parser; WebSocket through ws_parser; long-poll answers through
 * resp_parser's head and poll_parser. Their events go to conn.c
 * (conn_welcome, conn_message, conn_gap, conn_answer). */
#ifndef HTTPCLIENT_PROTO_H
#define HTTPCLIENT_PROTO_H

#include <stddef.h>

#include "conn.h"

enum feed_result {
    FEED_MORE = 0,      /* go on reading */
    FEED_STATUS,        /* the answer's status was not the one wanted */
    FEED_ENDED,         /* the server ended the stream (last chunk, close frame, EOF) */
    FEED_ERROR,         /* malformed */
    FEED_ANSWER,        /* poll: an answer is complete, the loop goes on */
    FEED_RETRY          /* poll: the connection closed before any byte of the answer */
};

/* A request was sent on c: its answer starts. */
void transport_start(struct conn *c);
/* c's socket closes: what its parser holds is freed. */
void transport_end(struct conn *c);
enum feed_result transport_feed(struct conn *c, const char *buf, size_t len);
/* The peer closed c. */
enum feed_result transport_eof(struct conn *c);

#endif
