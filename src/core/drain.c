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
            loop_stats.drained++;       /* first: presence.c reads the reason off it */
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

void drain_start(uint32_t seconds, void (*done)(void))
{
    refusing = 1;
    if (done)
        on_done = done;
    if (active)
        return;
    active = 1;
    cursor = 0;
    uint64_t open = loop_stats.streams_open, ticks = (uint64_t)seconds * (1000 / DRAIN_TICK_MS);
    per_tick = ticks ? (open + ticks - 1) / ticks : UINT64_MAX;
    if (per_tick < DRAIN_MIN_PER_TICK)
        per_tick = DRAIN_MIN_PER_TICK;
    log_msg(LOG_INFO, "drain: ending %llu streams over %u s at most, %llu every %d ms",
            (unsigned long long)open, seconds, (unsigned long long)per_tick, DRAIN_TICK_MS);
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
