/* SPDX-License-Identifier: Apache-2.0 */
/* POST /send/N: a client message up to Erlang over plain HTTP, for clients
 * on SSE, long-poll or chunked (a WebSocket sends its own frames). The
 * message goes to the --inbox process as a WebSocket's does:
 * {httpdcnode_in, Node, N, Conn, Data}, Conn the ?conn=ID it named, else 0.
 * Codes: docs/protocol.md, "Client messages over HTTP". Loop thread only. */
#ifndef HTTPDCNODE_CLIENT_POST_H
#define HTTPDCNODE_CLIENT_POST_H

#include "http/http_config.h"

struct evhttp;
struct evhttp_request;

#define CLIENT_POST_PREFIX "/send/"

#include <stddef.h>

/* At startup: the bounds of the options; evhttp is told the body bound
 * of every request (8 KB, or a larger --max-client-message with --inbox),
 * which is returned: the read-ahead must hold a head and such a body. */
size_t client_post_configure(struct evhttp *http, const struct http_config *cfg);

/* Any request for CLIENT_POST_PREFIX<uid_text>: POST, an OPTIONS
 * preflight, or 405. Always answers. */
void client_post_serve(struct evhttp_request *req, const char *uid_text);

#endif
