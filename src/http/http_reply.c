/* SPDX-License-Identifier: Apache-2.0 */
/* Whole replies: see http_reply.h. */
#include "http/http_reply.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <string.h>

void http_reply(struct evhttp_request *req, int code, const char *reason,
                const char *content_type, const char *body, size_t n)
{
    struct evbuffer *buf = evbuffer_new();
    if (buf)
        evbuffer_add(buf, body, n);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", content_type);
    evhttp_send_reply(req, code, reason, buf);
    if (buf)
        evbuffer_free(buf);
}

void http_reply_text(struct evhttp_request *req, int code, const char *reason, const char *body)
{
    http_reply(req, code, reason, "text/plain; charset=utf-8", body, strlen(body));
}
