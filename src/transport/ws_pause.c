/* SPDX-License-Identifier: Apache-2.0 */
/* WebSockets not read while Erlang is behind: see ws_pause.h. */
#include "transport/ws_pause.h"
#include "core/client_rate.h"
#include "core/outbound.h"
#include "core/stream.h"

#include <stdlib.h>

static struct stream **paused;
static uint32_t npaused, paused_cap;
static struct event *resume_ev;
static void (*resume_fn)(struct stream *s, uint32_t now_ms);

static void on_resume(evutil_socket_t fd, short what, void *arg);

static void resume_later(void)
{
    const struct timeval tv = {0, WS_RESUME_MS * 1000};
    event_add(resume_ev, &tv);
}

void ws_pause_init(void (*resume)(struct stream *s, uint32_t now_ms)) { resume_fn = resume; }

int ws_pause_due(void)
{
    return atomic_load_explicit(&outbound_in_pending, memory_order_relaxed) > CLIENT_IN_PENDING_MAX;
}

int ws_pause_add(struct stream *s)
{
    if (!resume_ev && !(resume_ev = evtimer_new(event_get_base(&s->u.ev), on_resume, NULL)))
        return -1;
    if (npaused == paused_cap) {
        uint32_t n = paused_cap ? paused_cap * 2 : 64;
        struct stream **p = realloc(paused, n * sizeof *p);
        if (!p)
            return -1;
        paused = p;
        paused_cap = n;
    }
    paused[npaused++] = s;
    if (npaused == 1)
        resume_later();
    return 0;
}

static void on_resume(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (atomic_load_explicit(&outbound_in_pending, memory_order_relaxed) > CLIENT_IN_PENDING_MAX / 2) {
        resume_later();
        return;
    }
    uint32_t n = npaused, now_ms = client_rate_now_ms();
    npaused = 0;
    for (uint32_t i = 0; i < n; i++)
        resume_fn(paused[i], now_ms);
}

void ws_pause_drop(const struct stream *s)
{
    for (uint32_t i = 0; i < npaused; i++)
        if (paused[i] == s) {
            paused[i] = paused[--npaused];
            return;
        }
}

void ws_pause_free(void)
{
    if (resume_ev)
        event_free(resume_ev);
    resume_ev = NULL;
    free(paused);
    paused = NULL;
    npaused = paused_cap = 0;
}
