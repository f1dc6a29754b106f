/* SPDX-License-Identifier: Apache-2.0 */
/* The window presence changes wait in before they go to the masters as
 * their net effect (presence.c: uids, topic_presence.c: topics). It opens
 * at its first change and lasts PRESENCE_WINDOW_MS; one that saw
 * PRESENCE_BUSY_WINDOW changes or more makes the next twice as long, up
 * to PRESENCE_WINDOW_MAX_MS, so that a storm of any size costs each master
 * a handful of messages; a quiet one brings it back. Loop thread only. */
#ifndef HTTPDCNODE_PRESENCE_WINDOW_H
#define HTTPDCNODE_PRESENCE_WINDOW_H

#include "core/presence.h"

#include <event2/event.h>
#include <stdint.h>

#define PRESENCE_WINDOW_MAX_MS 800
#define PRESENCE_BUSY_WINDOW 64

struct presence_window {
    struct event *ev;           /* its end */
    void (*send)(void);         /* sends what it holds */
    uint32_t changes;           /* in it so far, told at once or not */
    uint32_t immediate;         /* told at once in it */
    uint32_t ms;                /* its length */
};
#define PRESENCE_WINDOW_INIT {NULL, NULL, 0, 0, PRESENCE_WINDOW_MS}

/* w's end an event of base, which calls send: -1 when out of memory. */
int presence_window_init(struct presence_window *w, struct event_base *base, void (*send)(void));
void presence_window_free(struct presence_window *w);
/* A change joins the window (opened if none). */
void presence_window_change(struct presence_window *w);
/* The window ends now, when it holds a change: send, and the next one's
 * length from its changes. */
void presence_window_flush(struct presence_window *w);
/* Whether a first change may be told at once (counted then): fewer than
 * max so far, in a window at its shortest (none in a storm). */
int presence_window_at_once(struct presence_window *w, uint32_t max);

#endif
