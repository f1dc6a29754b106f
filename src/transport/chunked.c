/* SPDX-License-Identifier: Apache-2.0 */
/* A stream's welcome through evhttp, then its socket leaves evhttp. */
#include "transport/chunked.h"
#include "transport/transport.h"
#include "http/topic_query.h"
#include "core/conn.h"
#include "core/transport_ops.h"
#include "core/framing.h"
#include "http/http_front.h"
#include "http/http_guard.h"
#include "http/socket_export.h"
#include "core/stream.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* {conn, Conn, Data}: a chunk (HTTP/1.0: the bytes as they are), which
 * cannot be empty (an empty chunk ends the stream, nothing would show). */
static int chunked_reply(struct stream *s, const char *data, uint32_t len, int binary)
{
    (void)binary;
    if (len == 0)
        return TRANSPORT_REPLY_EMPTY;
    struct framing_prefix prefix;
    struct iovec iov[FRAMING_IOV_MAX];
    size_t bytes = 0;
    framing_prefix(s->framing, len, 0, &prefix);
    return stream_send(s, iov, framing_iov(s->framing, &prefix, data, len, iov, &bytes), bytes);
}

/* ?conn=1: once live, the stream's conn id as the chunk after the
 * welcome, {"conn":"ID"}, for POST /send/N?conn=ID (client_post.h). */
static void send_conn_id(struct stream *s)
{
    const struct conn *c = conn_of(s);
    if (!c)
        return;                        /* out of memory: the stream goes on without one */
    char json[40];
    int n = snprintf(json, sizeof json, "{\"conn\":\"%llu\"}", (unsigned long long)c->id);
    chunked_reply(s, json, (uint32_t)n, 0);
}

static void on_welcome_flushed_conn(struct evhttp_connection *evcon, void *arg)
{
    struct stream *s = arg;
    on_welcome_flushed(evcon, arg);
    if (s->state == STREAM_LIVE)
        send_conn_id(s);
}

static int wants_conn(struct evhttp_request *req)
{
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    struct evkeyvalq query = {0};
    if (!q || !strstr(q, "conn="))
        return 0;                      /* the common case parses nothing */
    evhttp_parse_query_str(q, &query);
    const char *v = evhttp_find_header(&query, "conn");
    int yes = v && strcmp(v, "1") == 0;
    evhttp_clear_headers(&query);
    return yes;
}

static void chunked_closing(struct stream *s) { conn_forget(s); }

/* The terminating chunk, whatever the reason (HTTP/1.0: the close). */
static struct iovec chunked_goodbye(uint8_t framing, uint8_t why)
{
    static const char last_chunk[] = "0\r\n\r\n";
    (void)why;
    if (framing == FRAMING_RAW)
        return (struct iovec){NULL, 0};
    return (struct iovec){(void *)last_chunk, sizeof last_chunk - 1};
}

static const struct transport_ops chunked_ops = {
    .name = "chunked", .reply = chunked_reply, .goodbye = chunked_goodbye,
    .closing = chunked_closing};

static int chunked_start(struct evhttp_request *req, uint32_t uid)
{
    if (!topic_query_admit(req, 0, TOPIC_IDS_NONE))
        return 0;
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
    evhttp_send_reply_chunk_with_cb(req, body, wants_conn(req) ? on_welcome_flushed_conn
                                                               : on_welcome_flushed, s);
    evbuffer_free(body);
    return 0;
}

int chunked_hurry(struct stream *s)
{
    struct evhttp_request *req = s->u.w.req;
    struct evhttp_connection *evcon = req ? evhttp_request_get_connection(req) : NULL;
    if (s->state != STREAM_WELCOMING || !evcon)
        return -1;                     /* the client left: evhttp tells us soon */
    int conn = wants_conn(req);
    /* What evhttp has not sent (its head and the welcome), copied before
     * the connection and its buffers are freed. */
    struct evbuffer *out = bufferevent_get_output(evhttp_connection_get_bufferevent(evcon));
    size_t n = evbuffer_get_length(out);
    char *copy = malloc(n ? n : 1);
    if (!copy || evbuffer_copyout(out, copy, n) != (ev_ssize_t)n) {
        free(copy);
        return -1;
    }
    if (socket_export(evcon) != 0) {
        free(copy);
        stream_release(s, 0);
        return -1;
    }
    struct iovec iov = {copy, n};
    int r = stream_import_with(s, &iov, 1);
    free(copy);
    if (r != 0) {
        if (s->state == STREAM_ABANDONED)
            stream_release(s, 0);      /* evhttp holds it no more */
        return -1;
    }
    if (conn)
        send_conn_id(s);
    return 0;
}

int chunked_init(void)
{
    transport_ops_register(FRAMING_CHUNKED, &chunked_ops);
    transport_ops_register(FRAMING_RAW, &chunked_ops);
    return http_front_route("/test/", chunked_start, 0);
}
