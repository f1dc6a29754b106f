/* SPDX-License-Identifier: Apache-2.0 */
/* Where a request's body ends must be read one way only: a proxy in front
 * that reads it another way (the last Content-Length, or Transfer-Encoding
 * over Content-Length) would take the rest of the body for a request of
 * its own (request smuggling). Loop thread only. */
#ifndef HTTPDCNODE_HTTP_FRAMING_H
#define HTTPDCNODE_HTTP_FRAMING_H

struct evhttp_request;

/* 1 when req has at most one Content-Length, of digits only, or one
 * Transfer-Encoding: chunked without a Content-Length. Else it is answered
 * 400 with Connection: close (so that nothing after it is read as a
 * request), counted in http_bad_framing, and 0 returned. */
int http_framing_ok(struct evhttp_request *req);

#endif
