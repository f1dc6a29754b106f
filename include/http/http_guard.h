/* SPDX-License-Identifier: Apache-2.0 */
/* Bounds on a connection while evhttp still reads its requests: how much
 * it may read ahead, and how long one request may take to arrive. */
#ifndef HTTPDCNODE_HTTP_GUARD_H
#define HTTPDCNODE_HTTP_GUARD_H

#include <event2/event.h>
#include <stddef.h>
#include <stdint.h>

struct evhttp;
struct evhttp_request;

/* Input evhttp may hold for one connection. A request (line and headers)
 * is at most 8 KB; the rest is read-ahead that a client sending faster
 * than we answer would otherwise grow without bound. At least a head and
 * a whole body: evhttp waits for a body in this buffer (http_guard_init). */
#define HTTP_READ_AHEAD_MAX (16u << 10)

/* Makes evhttp create each connection's bufferevent through us, so that it
 * has the read-ahead bound and a deadline for each request: header_timeout
 * seconds from its first byte, however slowly the rest trickles in; and
 * so that the bytes of each request count under --max-input-total
 * (core/inflight.h, configured by the caller) until it is whole.
 * max_fds: descriptors the process may hold (the table's size, 8 bytes
 * each); max_body: evhttp's body bound (the read-ahead holds 8 KB more). */
int http_guard_init(struct evhttp *http, struct event_base *base, unsigned header_timeout,
                    int idle_timeout, int max_fds, size_t max_body);
/* The request is complete (evhttp hands it to us): its deadline is over,
 * its bytes count no more. */
void http_guard_request_done(struct evhttp_request *req);
/* The connection becomes a stream and reads no more requests: the stream
 * bounds what comes next, and the close callback becomes the transport's.
 * Each transport calls it as it takes the connection over. */
void http_guard_release(struct evhttp_request *req);
void http_guard_free(void);
/* Requests begun (a byte came) and not yet whole: a hot upgrade lets them
 * finish before it hands over (upgrade/). */
uint32_t http_guard_reading(void);

#endif
