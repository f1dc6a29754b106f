/* SPDX-License-Identifier: Apache-2.0 */
/* The head of a stream's reply: evhttp sends the headers and the welcome
 * chunk; once they are flushed the socket leaves evhttp (socket_export.c)
 * for a lean stream (stream.c). */
#ifndef HTTPDCNODE_CHUNKED_H
#define HTTPDCNODE_CHUNKED_H

/* Registers GET /test/uid: its start replies with a new stream, already
 * in the uid table, or -1, with nothing sent, when no descriptor or
 * memory is left for one (the front door answers 503). */
int chunked_init(void);

struct stream;
/* A hot upgrade (upgrade/): a stream evhttp is still welcoming leaves it
 * now, what evhttp had not sent going first in its backlog; then the
 * stream is handed over as any other. -1 when it could not (the client
 * left meanwhile, or out of memory: it is closed). */
int chunked_hurry(struct stream *s);

#endif
