/* SPDX-License-Identifier: Apache-2.0 */
/* The socket leaves evhttp. Why each step:
 *   1. disable the bufferevent, so its epoll registration goes before the
 *      descriptor number changes meaning (the epoll changelist, which would
 *      defer that, is never enabled: main.c);
 *   2. dup2() /dev/null over evhttp's number, because evhttp_connection_free
 *      calls shutdown(SHUT_WR), which acts on the socket, not the number;
 *   3. clear the close callback and free the connection (and the request). */
#include "http/socket_export.h"
#include "lib/log.h"

#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <fcntl.h>
#include <unistd.h>

static int devnull_fd = -1;

int socket_export_init(void)
{
    devnull_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (devnull_fd < 0) {
        log_msg(LOG_ERROR, "cannot open /dev/null: %m");
        return -1;
    }
    return 0;
}

void socket_export_free(void)
{
    if (devnull_fd >= 0)
        close(devnull_fd);
    devnull_fd = -1;
}

int socket_export_reserve(struct evhttp_connection *evcon)
{
    int fd = bufferevent_getfd(evhttp_connection_get_bufferevent(evcon));
    /* dup, not fcntl(F_DUPFD_CLOEXEC): ThreadSanitizer follows a
     * descriptor number through dup only, and would take a number reused
     * here for another thread's old socket. */
    int own = dup(fd);
    if (own >= 0)
        fcntl(own, F_SETFD, FD_CLOEXEC);
    return own;
}

int socket_export(struct evhttp_connection *evcon)
{
    struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
    int fd = bufferevent_getfd(bev), r = 0;

    bufferevent_disable(bev, EV_READ | EV_WRITE);
    if (dup2(devnull_fd, fd) < 0) {
        /* Cannot happen with valid descriptors: evhttp closes it all. */
        log_msg(LOG_ERROR, "dup2 over a stream socket failed: %m");
        r = -1;
    }
    evhttp_connection_set_closecb(evcon, NULL, NULL);
    evhttp_connection_free(evcon);
    return r;
}
