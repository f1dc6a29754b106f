/* SPDX-License-Identifier: Apache-2.0 */
/* Draining: see drain.h. A timer every DRAIN_TICK_MS ends the next
 * per_tick streams in uid order: a cursor on the uid table, so the whole
 * drain walks the online uids once (no work quadratic in streams). New
 * streams are refused meanwhile, so none appears behind the cursor. */
#include "core/drain.h"
#include "core/framing.h"
#include "lib/log.h"
#include "obs/stats.h"
#include "core/stream.h"
#include "core/uidtable.h"

#define DRAIN_TICK_MS 100

static struct event *tick_ev;
static int refusing;
static int active;
static uint32_t cursor;           /* uids up to it are done */
static uint64_t per_tick;
static void (*on_done)(void);

/* Ends the streams of the next uids until at least budget streams went
 * (a uid's streams all go together). 1 when none is left. */
static int end_some(uint64_t budget)
{
    uint64_t ended = 0;
    while (ended < budget) {
        uint32_t uid = uidtable_next_online(cursor);
        if (!uid)
            return 1;
        /* next first: the stream leaves the uid's list as it ends */
        for (struct stream *s = uidtable_first(uid), *next; s; s = next) {
            next = s->next;
            stream_end_why(s, END_DRAIN);
            ended++;
        }
        cursor = uid;
    }
    return 0;
}

static void finished(void)
{
    active = 0;
    if (tick_ev)
        event_del(tick_ev);
    log_msg(LOG_INFO, "drain: every stream ended");
    void (*done)(void) = on_done;
    on_done = NULL;
    if (done)
        done();
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    if (end_some(per_tick))
        finished();
}

/* Streams to end a tick so that those open now are all ended within
 * seconds (0: all at once), DRAIN_MIN_PER_TICK at least. */
static uint64_t pace(uint32_t seconds)
{
    uint64_t open = loop_stats.streams_open, ticks = (uint64_t)seconds * (1000 / DRAIN_TICK_MS);
    uint64_t n = ticks ? (open + ticks - 1) / ticks : UINT64_MAX;
    return n < DRAIN_MIN_PER_TICK ? DRAIN_MIN_PER_TICK : n;
}

/* A drain under way is asked to be over within seconds: the shortest
 * drain asked for wins, so it goes faster if that is sooner than its own
 * pace would end it (SIGTERM during a long {drain, N}: systemd would not
 * wait). 0 ends the rest now; the drain finishes (and done is called) at
 * the next tick, not from inside the caller. */
static void hasten(uint32_t seconds)
{
    if (seconds == 0) {
        log_msg(LOG_INFO, "drain: 0 s asked during the drain: ending the %llu streams left now",
                (unsigned long long)loop_stats.streams_open);
        end_some(UINT64_MAX);
        static const struct timeval now = {0, 0};
        event_add(tick_ev, &now);
        return;
    }
    uint64_t n = pace(seconds);
    if (n <= per_tick)
        return;
    log_msg(LOG_INFO, "drain: %u s asked during the drain: ending the %llu streams left "
            "%llu every %d ms (was %llu)", seconds, (unsigned long long)loop_stats.streams_open,
            (unsigned long long)n, DRAIN_TICK_MS, (unsigned long long)per_tick);
    per_tick = n;
}

void drain_start(uint32_t seconds, void (*done)(void))
{
    refusing = 1;
    if (done)
        on_done = done;
    if (active) {
        hasten(seconds);
        return;
    }
    active = 1;
    cursor = 0;
    per_tick = pace(seconds);
    log_msg(LOG_INFO, "drain: ending %llu streams over %u s at most, %llu every %d ms",
            (unsigned long long)loop_stats.streams_open, seconds, (unsigned long long)per_tick,
            DRAIN_TICK_MS);
    /* The first share at once: a drain of few streams (or of 0 s) is over now. */
    if (end_some(per_tick)) {
        finished();
        return;
    }
    static const struct timeval every = {0, DRAIN_TICK_MS * 1000};
    event_add(tick_ev, &every);
}

void drain_now(void)
{
    if (!active)
        return;
    end_some(UINT64_MAX);
    finished();
}

int drain_cancel(void)
{
    if (on_done)
        return -1;                    /* the exit's drain goes on */
    refusing = 0;
    active = 0;
    event_del(tick_ev);
    return 0;
}

int drain_refusing(void) { return refusing; }

int drain_init(struct event_base *base)
{
    tick_ev = event_new(base, -1, EV_PERSIST, on_tick, NULL);
    if (!tick_ev) {
        log_msg(LOG_ERROR, "cannot create the drain timer: out of memory");
        return -1;
    }
    return 0;
}

void drain_free(void)
{
    if (tick_ev)
        event_free(tick_ev);
    tick_ev = NULL;
}
