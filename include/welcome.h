/* The head of a stream's reply: evhttp sends the headers and the welcome
 * chunk; once they are flushed the socket leaves evhttp (socket_export.c)
 * for a lean stream (stream.c). */
#ifndef HTTPDCNODE_WELCOME_H
#define HTTPDCNODE_WELCOME_H

#include <stdint.h>

struct evhttp_request;

/* Starts the reply to GET /test/uid with a new stream, already in the uid
 * table. -1, with nothing sent, when no descriptor or memory is left for
 * one: the caller answers 503. */
int welcome_start(struct evhttp_request *req, uint32_t uid);

#endif
