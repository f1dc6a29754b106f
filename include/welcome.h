/* The handshake of a stream: evhttp sends the headers and the welcome
 * chunk; once they are flushed the socket leaves evhttp for a lean stream. */
#ifndef HTTPDCNODE_WELCOME_H
#define HTTPDCNODE_WELCOME_H

#include <stdint.h>

struct evhttp_request;
struct stream;

/* Opens /dev/null once: its descriptor is put over evhttp's socket number. */
int welcome_init(void);

/* Starts the reply to GET /test/uid with a new stream, already in the uid
 * table. -1, with nothing sent, when no descriptor or memory is left for
 * one: the caller answers 503. */
int welcome_start(struct evhttp_request *req, uint32_t uid);

/* Ends a stream still in its welcome: evhttp closes the connection. */
void welcome_abort(struct stream *s);

#endif
