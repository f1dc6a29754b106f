/* SPDX-License-Identifier: Apache-2.0 */
/* The windows of presence changes: see presence_window.h. */
#include "core/presence_window.h"

static void on_end(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    presence_window_flush(arg);
}

int presence_window_init(struct presence_window *w, struct event_base *base, void (*send)(void))
{
    *w = (struct presence_window)PRESENCE_WINDOW_INIT;
    w->send = send;
    w->ev = evtimer_new(base, on_end, w);
    return w->ev ? 0 : -1;
}

void presence_window_free(struct presence_window *w)
{
    if (w->ev)
        event_free(w->ev);
    *w = (struct presence_window)PRESENCE_WINDOW_INIT;
}

void presence_window_change(struct presence_window *w)
{
    if (w->changes++ == 0) {
        struct timeval tv = {0, (suseconds_t)w->ms * 1000};
        evtimer_add(w->ev, &tv);
    }
}

void presence_window_flush(struct presence_window *w)
{
    if (w->changes == 0)
        return;
    if (evtimer_pending(w->ev, NULL))
        evtimer_del(w->ev);
    w->send();
    if (w->changes >= PRESENCE_BUSY_WINDOW)
        w->ms = w->ms * 2 > PRESENCE_WINDOW_MAX_MS ? PRESENCE_WINDOW_MAX_MS : w->ms * 2;
    else
        w->ms = PRESENCE_WINDOW_MS;
    w->changes = w->immediate = 0;
}

int presence_window_at_once(struct presence_window *w, uint32_t max)
{
    if (w->immediate >= max || w->ms != PRESENCE_WINDOW_MS)
        return 0;
    w->immediate++;
    return 1;
}
