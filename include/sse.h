/* GET /sse/N: Server-Sent Events (text/event-stream). The socket leaves
 * evhttp at once: the head, the retry advice, a gap event when the client
 * missed more than is kept, and what it missed (after the id it gives in
 * Last-Event-ID, or ?since=EPOCH:SEQ on a first connect) are written by
 * the stream itself; then every message as an event with its id. */
#ifndef HTTPDCNODE_SSE_H
#define HTTPDCNODE_SSE_H

#include <event2/event.h>
#include <stdint.h>

struct evhttp_request;

struct stream;

/* The comment line an SSE stream gets at each heartbeat (heartbeat.c). */
void sse_heartbeat(struct stream *s);

/* Starts the SSE stream of uid; -1, with nothing sent, when no descriptor
 * or memory is left: the caller answers 503. */
int sse_start(struct evhttp_request *req, uint32_t uid);

#endif
