/* A stream's welcome through evhttp, then its socket leaves evhttp.
 *
 * evhttp keeps ~2 KB per connection; a detached stream keeps ~200 B. The
 * stream takes its own dup() of the socket when the request comes; the
 * detach, once the headers and welcome chunk are flushed:
 *   1. disable the bufferevent, so its epoll registration goes before the
 *      descriptor number changes meaning;
 *   2. dup2() /dev/null over evhttp's number, because evhttp_connection_free
 *      calls shutdown(SHUT_WR), which acts on the socket, not the descriptor;
 *   3. clear the close callback and free the connection (and the request). */
#include "welcome.h"
#include "log.h"
#include "stats.h"
#include "stream.h"
#include "uidtable.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <unistd.h>

static int devnull_fd = -1;

int welcome_init(void)
{
    devnull_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull_fd < 0) {
        log_msg(LOG_ERROR, "cannot open /dev/null: %m");
        return -1;
    }
    return 0;
}

/* The client left before the welcome was flushed. evhttp has orphaned the
 * request (no connection): it is ours to free. */
static void on_welcome_client_left(struct evhttp_connection *evcon, void *arg)
{
    struct stream *s = arg;
    (void)evcon;
    if (evhttp_request_get_connection(s->u.w.req) == NULL)
        evhttp_request_free(s->u.w.req);
    loop_stats.client_closed++;
    stream_free_welcoming(s);
}

static void free_evhttp_connection(struct evhttp_connection *evcon)
{
    evhttp_connection_set_closecb(evcon, NULL, NULL);
    evhttp_connection_free(evcon);   /* frees the request too */
}

static void on_welcome_flushed(struct evhttp_connection *evcon, void *arg)
{
    struct stream *s = arg;
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    int fd = bufferevent_getfd(bev);

    bufferevent_disable(bev, EV_READ | EV_WRITE);
    if (dup2(devnull_fd, fd) < 0) {
        /* Cannot happen with valid descriptors: let evhttp close it all. */
        log_msg(LOG_ERROR, "dup2 over a stream socket failed: %m");
        free_evhttp_connection(evcon);
        stream_free_welcoming(s);
        return;
    }
    free_evhttp_connection(evcon);
    /* Each message is one small write that must leave at once: without
     * NODELAY, Nagle holds the second of two quick messages until the
     * client's (delayed) ACK, tens of milliseconds later. */
    int one = 1;
    setsockopt(s->u.w.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    stream_attach(s);
}

int welcome_start(struct evhttp_request *req, uint32_t uid)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    int fd = bufferevent_getfd(evhttp_connection_get_bufferevent(evcon));

    /* The stream's own descriptor first: without one there is no stream,
     * and the client is better told so (503) than welcomed and dropped. */
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (own < 0)
        return -1;
    struct stream *s = stream_new_welcoming(uid, req, own);
    if (!s) {
        close(own);
        return -1;
    }
    /* An HTTP/1.0 "Connection: keep-alive" would make evhttp answer with
     * Content-Length: 0; a stream's length is unknown, its end a close. */
    evhttp_remove_header(evhttp_request_get_input_headers(req), "Connection");
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    evhttp_add_header(out, "Content-Type", "text/html; charset=utf-8");
    evhttp_add_header(out, "Cache-Control", "no-store");
    evhttp_send_reply_start(req, HTTP_OK, "OK");
    s->chunked = evhttp_find_header(out, "Transfer-Encoding") != NULL;

    struct evbuffer *body = evbuffer_new();
    evbuffer_add_printf(body, "Welcome, Url: '/test/%u' Id: %u\n", uid, uid);
    evhttp_connection_set_closecb(evcon, on_welcome_client_left, s);
    evhttp_send_reply_chunk_with_cb(req, body, on_welcome_flushed, s);
    evbuffer_free(body);
    uidtable_add(s);
    return 0;
}

void welcome_abort(struct stream *s)
{
    free_evhttp_connection(evhttp_request_get_connection(s->u.w.req));
    stream_free_welcoming(s);
}
