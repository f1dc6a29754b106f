/* A stream's welcome through evhttp, then its socket leaves evhttp. */
#include "transport/chunked.h"
#include "transport/transport.h"
#include "core/framing.h"
#include "http/http_front.h"
#include "http/http_guard.h"
#include "http/socket_export.h"
#include "core/stream.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <unistd.h>

/* The client left before the welcome was flushed. evhttp has orphaned the
 * request (no connection): it is ours to free. */
static void on_welcome_client_left(struct evhttp_connection *evcon, void *arg)
{
    struct stream *s = arg;
    (void)evcon;
    if (evhttp_request_get_connection(s->u.w.req) == NULL)
        evhttp_request_free(s->u.w.req);
    stream_release(s, 1);
}

static void on_welcome_flushed(struct evhttp_connection *evcon, void *arg)
{
    struct stream *s = arg;
    if (s->state == STREAM_ABANDONED) {
        /* Closed meanwhile (evicted, too slow): evhttp closes the socket. */
        evhttp_connection_set_closecb(evcon, NULL, NULL);
        evhttp_connection_free(evcon);
        stream_release(s, 0);
        return;
    }
    if (socket_export(evcon) != 0) {
        stream_release(s, 0);
        return;
    }
    stream_import(s);
}

static int chunked_start(struct evhttp_request *req, uint32_t uid)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct evbuffer *body = evbuffer_new();
    struct stream *s = body ? transport_reserve(req, uid, FRAMING_CHUNKED, 1) : NULL;
    if (!s) {
        if (body)
            evbuffer_free(body);
        return -1;
    }
    /* An HTTP/1.0 "Connection: keep-alive" would make evhttp answer with
     * Content-Length: 0; a stream's length is unknown, its end a close. */
    evhttp_remove_header(evhttp_request_get_input_headers(req), "Connection");
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    evhttp_add_header(out, "Content-Type", "text/html; charset=utf-8");
    evhttp_add_header(out, "Cache-Control", "no-store");
    evhttp_send_reply_start(req, HTTP_OK, "OK");
    /* evhttp chose chunked for HTTP/1.1, raw bytes for HTTP/1.0. */
    if (!evhttp_find_header(out, "Transfer-Encoding"))
        s->framing = FRAMING_RAW;
    evbuffer_add_printf(body, "Welcome, Url: '/test/%u' Id: %u\n", uid, uid);
    http_guard_release(req);
    evhttp_connection_set_closecb(evcon, on_welcome_client_left, s);
    evhttp_send_reply_chunk_with_cb(req, body, on_welcome_flushed, s);
    evbuffer_free(body);
    return 0;
}

int chunked_init(void) { return http_front_route("/test/", chunked_start, 0); }
