/* SPDX-License-Identifier: Apache-2.0 */
/* Pausing a listener: see listener_pause.h. */
#include "http/listener_pause.h"

#include <event2/event.h>
#include <event2/listener.h>

static void on_listen_again(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    evconnlistener_enable(arg);
}

void listener_pause(struct evconnlistener *l, const struct timeval *pause)
{
    evconnlistener_disable(l);
    event_base_once(evconnlistener_get_base(l), -1, EV_TIMEOUT, on_listen_again, l, pause);
}

void listener_hold(struct evconnlistener *l, int held)
{
    if (l && held)
        evconnlistener_disable(l);
    else if (l)
        evconnlistener_enable(l);
}
