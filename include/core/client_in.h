/* SPDX-License-Identifier: Apache-2.0 */
/* A client message up to Erlang's --inbox process, whichever way it came
 * (a WebSocket's frames, ws_reader.c; POST /send/N, client_post.c): the
 * one admission both take, after their own checks. Loop thread only. */
#ifndef HTTPDCNODE_CLIENT_IN_H
#define HTTPDCNODE_CLIENT_IN_H

#include <stdint.h>

struct stream;

enum client_in {
    CLIENT_IN_QUEUED = 0,   /* for Erlang (counted: client_in) */
    CLIENT_IN_RATE,         /* past --client-rate: nothing taken, the caller refuses */
    CLIENT_IN_FULL,         /* the outbox was full: lost (counted: client_in_dropped) */
    CLIENT_IN_NO_MEMORY,    /* from had no connection id and none could be made */
};

/* --client-rate, at startup. */
void client_in_configure(uint32_t rate);

/* uid's message (binary or text, cmd.h): from the connection from (its
 * own stream, or the one it names; its id goes with it and its bucket is
 * taken from), else (NULL, id 0) from the bucket *tokens, *at_ms (8 bytes
 * of the caller's, client_rate.h); now_ms: client_rate_now_ms(), which a
 * WebSocket's read takes once for all its messages. The uid's presence is
 * told first (presence_known), so the masters know it before its message. */
/* The admission alone (the rate), for a message the stream itself takes
 * (a topic's join or leave): CLIENT_IN_QUEUED when it may go on. */
enum client_in client_in_charge(const struct stream *from, uint32_t *tokens, uint32_t *at_ms,
                                uint32_t now_ms);

enum client_in client_in_send(uint32_t uid, const struct stream *from, uint32_t *tokens,
                              uint32_t *at_ms, uint32_t now_ms, const void *data, uint32_t len,
                              int binary);

#endif
