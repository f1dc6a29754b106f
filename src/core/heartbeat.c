/* SPDX-License-Identifier: Apache-2.0 */
/* Heartbeats: see heartbeat.h. */
#include "core/heartbeat.h"
#include "lib/log.h"
#include "core/stream-t.h"
#include "core/transport_ops.h"
#include "core/uidtable.h"

static struct event *heartbeat_ev;

static void on_heartbeat(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    for (uint32_t uid = uidtable_next_online(0); uid; uid = uidtable_next_online(uid)) {
        /* next first: a heartbeat may close the stream (too slow, dead) */
        for (struct stream *s = uidtable_first(uid), *next; s; s = next) {
            next = s->next;
            const struct transport_ops *t = transport_ops[s->framing];
            if (s->state == STREAM_LIVE && t && t->heartbeat)
                t->heartbeat(s);
        }
    }
}

int heartbeat_start(struct event_base *base, uint32_t seconds)
{
    if (!seconds)
        return 0;
    heartbeat_ev = event_new(base, -1, EV_PERSIST, on_heartbeat, NULL);
    struct timeval every = {seconds, 0};
    if (!heartbeat_ev || event_add(heartbeat_ev, &every) != 0) {
        log_msg(LOG_ERROR, "cannot start the heartbeat: out of memory");
        return -1;
    }
    return 0;
}

void heartbeat_stop(void)
{
    if (heartbeat_ev)
        event_free(heartbeat_ev);
    heartbeat_ev = NULL;
}
