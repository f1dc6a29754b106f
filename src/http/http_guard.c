/* Read-ahead bound and request deadlines for connections still in evhttp.
 *
 * evhttp 2.1 keeps reading a connection while its reply waits to be
 * written, with no limit: a read high-water mark on the bufferevent stops
 * that. Its timeout restarts on every byte, so a client trickling a header
 * a byte at a time holds its descriptor for ever: here the first byte of a
 * request sets a deadline, and each later read shortens the bufferevent's
 * timeout to what is left of it. When it passes, evhttp closes the
 * connection as on any timeout, and its close callback counts it. */
#include "http/http_guard.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "obs/stats.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* fd -> deadline of the request being read on it, in ms of a 32-bit
 * monotonic clock (compared by difference, so wrapping is harmless);
 * 0 when no request is in progress. 4 bytes per descriptor. */
static uint32_t *deadline_of_fd;
static int table_size;
static uint32_t header_ms;
/* libevent times a timeout from its loop's cached time on the coarse
 * monotonic clock (one tick, 4 ms here, behind the real one): the slack
 * added so that the connection is never closed before its deadline, when
 * on_connection_closed would not count it. */
static int32_t timer_slack_ms;
static struct timeval idle_tv;
static size_t read_ahead = HTTP_READ_AHEAD_MAX;

static uint32_t now_ms32(void) { return (uint32_t)clock_now_ms(); }

static uint32_t *deadline_slot(struct bufferevent *bev)
{
    int fd = bufferevent_getfd(bev);
    return fd >= 0 && fd < table_size ? &deadline_of_fd[fd] : NULL;
}

static void on_connection_closed(struct evhttp_connection *evcon, void *arg)
{
    (void)arg;
    uint32_t *d = deadline_slot(evhttp_connection_get_bufferevent(evcon));
    if (!d || !*d)
        return;
    if ((int32_t)(now_ms32() - *d) >= 0)
        loop_stats.http_header_timeout++;
    *d = 0;
}

static void start_deadline(struct bufferevent *bev, uint32_t *d)
{
    *d = now_ms32() + header_ms;
    if (!*d)
        *d = 1;
    void *evcon;
    bufferevent_getcb(bev, NULL, NULL, NULL, &evcon);
    /* Clears the slot however the connection ends. */
    evhttp_connection_set_closecb(evcon, on_connection_closed, NULL);
}

/* Bytes arrived: the request they belong to must be complete by its
 * deadline, whatever the pace. */
static void on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
    (void)buf;
    if (info->n_added == 0)
        return;
    struct bufferevent *bev = arg;
    uint32_t *d = deadline_slot(bev);
    if (!d)
        return;
    if (!*d)
        start_deadline(bev, d);
    int32_t left = (int32_t)(*d - now_ms32());
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

int http_guard_init(struct evhttp *http, unsigned header_timeout, int idle_timeout,
                    int max_fds, size_t max_body)
{
    /* evhttp moves a body out of this buffer only once all of it is in. */
    if (max_body + 8192 > read_ahead)
        read_ahead = max_body + 8192;
    deadline_of_fd = calloc((size_t)max_fds, sizeof *deadline_of_fd);
    if (!deadline_of_fd) {
        log_msg(LOG_ERROR, "cannot allocate request deadlines for %d descriptors", max_fds);
        return -1;
    }
    table_size = max_fds;
    header_ms = header_timeout * 1000u;
    timer_slack_ms = 1 + clock_coarse_tick_ms();
    idle_tv = (struct timeval){idle_timeout, 0};
    evhttp_set_bevcb(http, new_connection_bev, NULL);
    return 0;
}

void http_guard_request_done(struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    uint32_t *d = deadline_slot(bev);
    if (d)
        *d = 0;
    /* The reply is written under the idle timeout, not what was left. */
    evhttp_connection_set_timeout_tv(evcon, &idle_tv);
    /* A pipelined request already read has started its clock. */
    if (d && evbuffer_get_length(bufferevent_get_input(bev)) > 0)
        start_deadline(bev, d);
}

void http_guard_release(struct evhttp_request *req)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evhttp_request_get_connection(req));
    uint32_t *d = deadline_slot(bev);
    if (d)
        *d = 0;
    evbuffer_remove_cb(bufferevent_get_input(bev), on_input, bev);
}

void http_guard_free(void)
{
    free(deadline_of_fd);
    deadline_of_fd = NULL;
    table_size = 0;
}
