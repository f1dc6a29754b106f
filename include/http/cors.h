/* SPDX-License-Identifier: Apache-2.0 */
/* Cross-origin reads of the streams (CORS). Without --allow-origin, only a
 * plain EventSource without credentials may read /sse/N from another
 * origin (Access-Control-Allow-Origin: *); with it, the listed origins (or
 * any, for "*") may, with credentials when an origin is named. */
#ifndef HTTPDCNODE_CORS_H
#define HTTPDCNODE_CORS_H

#include "http/http_config.h"

#include <stddef.h>

struct evhttp_request;

/* At startup: --allow-origin (the list must outlive the server). */
void cors_configure(const struct http_origins *origins);

/* The one origin check of the streams (SSE, long-poll, WebSocket):
 * whether origin (an Origin header's value) is listed in list[n]
 * (--allow-origin; "*" any), compared exactly, as browsers send it; or,
 * with host (a Host header's value; NULL: no such rule), is the
 * request's own host: its host[:port] after the scheme is host, case
 * aside. Only a WebSocket passes host: a browser sends Origin on a
 * same-origin WebSocket, never a CORS request on a same-origin read. */
int origin_allowed(const char *origin, const char *host, const char (*list)[256], size_t n);

/* origin_allowed for a CORS request, against --allow-origin. */
int cors_origin_allowed(const char *origin);

/* The response header lines (each ending CRLF) for req's Origin into
 * out[size]; any_origin: without --allow-origin, allow every origin
 * without credentials (SSE). Returns their length (0: none). */
size_t cors_headers(struct evhttp_request *req, int any_origin, char *out, size_t size);

/* Answers an OPTIONS preflight for a stream path: 204 with the methods and
 * headers a client may use (Last-Event-ID, Authorization) when its origin
 * is allowed, 403 otherwise. */
void cors_preflight(struct evhttp_request *req);
/* The same for another path, with the methods and headers it allows. */
void cors_preflight_for(struct evhttp_request *req, const char *methods, const char *headers);

#endif
