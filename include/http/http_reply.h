/* SPDX-License-Identifier: Apache-2.0 */
/* Whole replies through evhttp, for errors and small bodies: the one
 * place that sets a reply's type and sends its body. Loop thread only. */
#ifndef HTTPDCNODE_HTTP_REPLY_H
#define HTTPDCNODE_HTTP_REPLY_H

#include <stddef.h>

struct evhttp_request;

/* body[n] with that Content-Type; other headers are the caller's, added
 * before. Out of memory, the reply goes out without its body. */
void http_reply(struct evhttp_request *req, int code, const char *reason,
                const char *content_type, const char *body, size_t n);

/* A text/plain (UTF-8) reply: body is a C string. */
void http_reply_text(struct evhttp_request *req, int code, const char *reason, const char *body);

#endif
