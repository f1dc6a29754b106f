/* Presence batching. Changes collect for a window (PRESENCE_WINDOW_MS
 * from the first one) and then go out as their net effect: a uid that went
 * down and came back within the window is not mentioned at all, the others
 * in one `down` and one `up` message (each cut in pieces of BATCH_MAX). A
 * window that had many changes makes the next one longer, up to
 * WINDOW_MAX_MS, so that a reconnect storm of any size costs each master a
 * handful of messages; a quiet one brings it back to PRESENCE_WINDOW_MS.
 * A change lost to a full outbound queue is repaired by a snapshot (sent
 * to every master) a second later.
 *
 * Snapshots go in pieces of BATCH_MAX uids: the first is `snapshot`
 * (replaces what the master knew), the rest `snapshot_more` (adds). Which
 * masters get one is the C-node thread's business (erl_send.c): those that
 * asked for it, or every one for a repair. */
#include "core/presence.h"
#include "core/outbound.h"
#include "obs/stats.h"
#include "core/stream.h"
#include "core/uidtable.h"

#include <stdlib.h>

#define BATCH_MAX 4096         /* uids per message */
#define PENDING_MAX 16384      /* changes per window before it is cut short */
#define WINDOW_MAX_MS 800
#define BUSY_WINDOW 64         /* changes that make the next window longer */

static int enabled;
static struct event *flush_ev;
static struct event *repair_ev;
/* Changes of this window, each (uid << 32) | (seq << 1) | online: sorted,
 * a uid's first change comes first (128 KB). */
static uint64_t pending[PENDING_MAX];
static uint32_t npending;
static uint32_t window_ms = PRESENCE_WINDOW_MS;
static uint32_t batch[BATCH_MAX];   /* one message being built (16 KB) */

/* Sends one part; on a full queue, schedules the repairing snapshot. */
static void send_part(enum presence_op op, int to_all, const uint32_t *uids, uint32_t n)
{
    static const struct timeval one_second = {1, 0};
    if (outbound_presence(op, to_all, uids, n) != 0 && !evtimer_pending(repair_ev, NULL))
        evtimer_add(repair_ev, &one_second);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The uids (sorted pending, first change of each) whose state now differs
 * from before the window, that is now `online`, as messages of op. */
static void send_net(int online, enum presence_op op)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < npending; i++) {
        uint32_t uid = (uint32_t)(pending[i] >> 32);
        if (i > 0 && (uint32_t)(pending[i - 1] >> 32) == uid)
            continue;                          /* not its first change */
        int before = !(pending[i] & 1);        /* its first change flipped it */
        int now = uidtable_first(uid) != NULL;
        if (now == before || now != online)
            continue;
        batch[n++] = uid;
        if (n == BATCH_MAX) {
            send_part(op, 0, batch, n);
            n = 0;
        }
    }
    if (n)
        send_part(op, 0, batch, n);
}

static void flush(void)
{
    if (npending == 0)
        return;
    if (evtimer_pending(flush_ev, NULL))
        evtimer_del(flush_ev);
    qsort(pending, npending, sizeof pending[0], cmp_u64);
    send_net(0, PRESENCE_DOWN);
    send_net(1, PRESENCE_UP);
    uint32_t changes = npending;
    npending = 0;
    if (changes >= BUSY_WINDOW)
        window_ms = window_ms * 2 > WINDOW_MAX_MS ? WINDOW_MAX_MS : window_ms * 2;
    else
        window_ms = PRESENCE_WINDOW_MS;
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    flush();
}

static void on_repair(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    presence_snapshot_to(1);
}

int presence_init(struct event_base *base, int on)
{
    enabled = on;
    if (!enabled)
        return 0;
    flush_ev = evtimer_new(base, on_flush, NULL);
    repair_ev = evtimer_new(base, on_repair, NULL);
    return flush_ev && repair_ev ? 0 : -1;
}

void presence_free(void)
{
    if (flush_ev)
        event_free(flush_ev);
    if (repair_ev)
        event_free(repair_ev);
    flush_ev = repair_ev = NULL;
}

void presence_changed(uint32_t uid, int online)
{
    if (!enabled)
        return;
    if (npending == PENDING_MAX)
        flush();
    if (npending == 0) {
        struct timeval tv = {0, (suseconds_t)window_ms * 1000};
        evtimer_add(flush_ev, &tv);
    }
    pending[npending] = (uint64_t)uid << 32 | (uint64_t)npending << 1 | (online != 0);
    npending++;
}

uint32_t presence_snapshot_to(int to_all)
{
    uint32_t online = 0, n = 0;
    if (!enabled)
        return (uint32_t)loop_stats.uids_online;
    flush();           /* the masters that get no snapshot need the changes */
    enum presence_op op = PRESENCE_SNAPSHOT;
    for (uint32_t uid = uidtable_next_online(0); uid; uid = uidtable_next_online(uid)) {
        online++;
        batch[n++] = uid;
        if (n == BATCH_MAX) {
            send_part(op, to_all, batch, n);
            op = PRESENCE_SNAPSHOT_MORE;
            n = 0;
        }
    }
    if (n || op == PRESENCE_SNAPSHOT)
        send_part(op, to_all, batch, n);
    return online;
}

uint32_t presence_snapshot(void) { return presence_snapshot_to(0); }
