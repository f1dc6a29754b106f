/* SPDX-License-Identifier: Apache-2.0 */
/* Read-ahead bound, request deadlines and the bytes of requests being
 * read, for connections still in evhttp.
 *
 * evhttp 2.1 keeps reading a connection while its reply waits to be
 * written, with no limit: a read high-water mark on the bufferevent stops
 * that. Its timeout restarts on every byte, so a client trickling a header
 * a byte at a time holds its descriptor for ever: here the first byte of a
 * request sets a deadline, and each later read shortens the bufferevent's
 * timeout to what is left of it. When it passes, evhttp closes the
 * connection as on any timeout, and its close callback counts it.
 *
 * Every byte a request brings (its body above all, which evhttp holds
 * until it is whole) counts under --max-input-total (core/inflight.h)
 * until the request is handed to us. A connection shed for it cannot be
 * freed in the callback that is reading it: it is doomed there and freed
 * by shed_ev, which runs in the same turn of the loop. */
#include "http/http_guard.h"
#include "core/inflight.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "obs/stats.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

/* What a descriptor's connection is reading, 8 bytes per descriptor: the
 * deadline of its request in progress, in ms of a 32-bit monotonic clock
 * (compared by difference, so wrapping is harmless; 0: none), and the
 * bytes that request brought. */
struct reading {
    uint32_t deadline;
    struct inflight held;
};

static struct reading *reading_of_fd;
static int table_size;
static struct event *shed_ev;
static uint32_t header_ms;
/* libevent times a timeout from its loop's cached time on the coarse
 * monotonic clock (one tick, 4 ms here, behind the real one): the slack
 * added so that the connection is never closed before its deadline, when
 * on_connection_closed would not count it. */
static int32_t timer_slack_ms;
static struct timeval idle_tv;
static size_t read_ahead = HTTP_READ_AHEAD_MAX;

static uint32_t now_ms32(void) { return (uint32_t)clock_now_ms(); }

static uint32_t reading_now;       /* requests begun and not yet whole */

static void clear_deadline(struct reading *r)
{
    if (r->deadline)
        reading_now--;
    r->deadline = 0;
}

uint32_t http_guard_reading(void) { return reading_now; }

static struct reading *reading_slot(struct bufferevent *bev)
{
    int fd = bufferevent_getfd(bev);
    return fd >= 0 && fd < table_size ? &reading_of_fd[fd] : NULL;
}

static struct evhttp_connection *connection_of(struct bufferevent *bev)
{
    void *evcon;
    bufferevent_getcb(bev, NULL, NULL, NULL, &evcon);
    return evcon;
}

static void on_connection_closed(struct evhttp_connection *evcon, void *arg)
{
    (void)arg;
    struct reading *r = reading_slot(evhttp_connection_get_bufferevent(evcon));
    if (!r)
        return;
    inflight_drop(&r->held);
    if (!r->deadline)
        return;
    if ((int32_t)(now_ms32() - r->deadline) >= 0)
        loop_stats.http_header_timeout++;
    clear_deadline(r);
}

static void start_deadline(struct bufferevent *bev, struct reading *r)
{
    if (!r->deadline)
        reading_now++;
    r->deadline = now_ms32() + header_ms;
    if (!r->deadline)
        r->deadline = 1;
    /* Clears the slot however the connection ends. */
    evhttp_connection_set_closecb(connection_of(bev), on_connection_closed, NULL);
}

/* inflight's way to shed a connection (and that of inflight_add's -1 for
 * the one being read): freed by on_shed, out of any of its callbacks. */
static void shed_later(void *owner)
{
    (void)owner;
    event_active(shed_ev, EV_TIMEOUT, 0);
}

/* n more bytes of the request being read on bev, under --max-input-total. */
static void hold(struct bufferevent *bev, struct reading *r, size_t n)
{
    if (inflight_add(&r->held, bev, INFLIGHT_HTTP, (uint32_t)n) != 0)
        shed_later(bev);
}

/* The connections doomed for --max-input-total: a 503 when nothing else is
 * being written to them (they may not read it: they are sending), and
 * closed. */
static void on_shed(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    static const char busy[] =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
        "Content-Length: 59\r\nRetry-After: 1\r\nConnection: close\r\n\r\n"
        "Too many bytes are being received at once, try again later";
    struct bufferevent *bev;
    while ((bev = inflight_take_doomed(INFLIGHT_HTTP))) {
        struct reading *r = reading_slot(bev);
        if (r)
            clear_deadline(r);              /* not a header timeout */
        loop_stats.http_shed++;
        if (evbuffer_get_length(bufferevent_get_output(bev)) == 0)
            (void)!send(bufferevent_getfd(bev), busy, sizeof busy - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        evhttp_connection_free(connection_of(bev));
    }
}

/* Bytes arrived: the request they belong to must be complete by its
 * deadline, whatever the pace, and they count until it is. */
static void on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    (void)buf;
    if (info->n_added == 0)
        return;
    struct bufferevent *bev = arg;
    struct reading *r = reading_slot(bev);
    if (!r)
        return;
    if (!r->deadline)
        start_deadline(bev, r);
    hold(bev, r, info->n_added);
    int32_t left = (int32_t)(r->deadline - now_ms32());
    if (left < 1)
        left = 1;
    left += timer_slack_ms;
    /* The timeout runs from now, not from when this loop turn began. */
    event_base_update_cache_time(bufferevent_get_base(bev));
    struct timeval tv = {left / 1000, (left % 1000) * 1000};
    bufferevent_set_timeouts(bev, &tv, &tv);
}

static struct bufferevent *new_connection_bev(struct event_base *base, void *arg)
{
    (void)arg;
    /* Options 0, as evhttp's own: the stream detach (chunked.c) relies on
     * the bufferevent not closing the socket when freed. */
    struct bufferevent *bev = bufferevent_socket_new(base, -1, 0);
    if (!bev) {
        log_msg(LOG_ERROR, "cannot allocate a connection buffer: out of memory");
        return NULL;
    }
    bufferevent_setwatermark(bev, EV_READ, 0, read_ahead);
    if (!evbuffer_add_cb(bufferevent_get_input(bev), on_input, bev)) {
        log_msg(LOG_ERROR, "cannot watch a connection's input: out of memory");
        bufferevent_free(bev);
        return NULL;
    }
    return bev;
}

int http_guard_init(struct evhttp *http, struct event_base *base, unsigned header_timeout,
                    int idle_timeout, int max_fds, size_t max_body)
{
    /* evhttp moves a body out of this buffer only once all of it is in. */
    if (max_body + 8192 > read_ahead)
        read_ahead = max_body + 8192;
    reading_of_fd = calloc((size_t)max_fds, sizeof *reading_of_fd);
    shed_ev = event_new(base, -1, 0, on_shed, NULL);
    if (!reading_of_fd || !shed_ev) {
        log_msg(LOG_ERROR, "cannot allocate request deadlines for %d descriptors", max_fds);
        return -1;
    }
    inflight_on_shed(INFLIGHT_HTTP, shed_later);
    table_size = max_fds;
    header_ms = header_timeout * 1000u;
    timer_slack_ms = 1 + clock_coarse_tick_ms();
    idle_tv = (struct timeval){idle_timeout, 0};
    evhttp_set_bevcb(http, new_connection_bev, NULL);
    return 0;
}

/* The request is over for the guard: no deadline, its bytes no longer
 * count. */
static struct reading *done_reading(struct bufferevent *bev)
{
    struct reading *r = reading_slot(bev);
    if (r) {
        clear_deadline(r);
        inflight_drop(&r->held);
    }
    return r;
}

void http_guard_request_done(struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    struct reading *r = done_reading(bev);
    /* The reply is written under the idle timeout, not what was left. */
    evhttp_connection_set_timeout_tv(evcon, &idle_tv);
    /* A pipelined request already read has started its clock and counts. */
    size_t ahead = evbuffer_get_length(bufferevent_get_input(bev));
    if (r && ahead > 0) {
        start_deadline(bev, r);
        hold(bev, r, ahead);
    }
}

void http_guard_release(struct evhttp_request *req)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evhttp_request_get_connection(req));
    done_reading(bev);
    evbuffer_remove_cb(bufferevent_get_input(bev), on_input, bev);
}

void http_guard_free(void)
{
    if (shed_ev)
        event_free(shed_ev);
    shed_ev = NULL;
    free(reading_of_fd);
    reading_of_fd = NULL;
    table_size = 0;
    reading_now = 0;
}
