/* Presence batching. Changes accumulate in runs of one kind (up or down)
 * and go out once per loop iteration, or when a run fills: thousands of
 * connects in a burst become a few messages, and order is kept. A change
 * lost to a full outbound queue is repaired by a snapshot a second later. */
#include "presence.h"
#include "outbound.h"
#include "stats.h"
#include "stream.h"
#include "uidtable.h"

#define BATCH_MAX 4096

static int enabled;
static struct event *flush_ev;
static struct event *repair_ev;
static uint32_t batch[BATCH_MAX];
static uint32_t batch_len;
static enum presence_op batch_op;

/* Sends one part; on a full queue, schedules the repairing snapshot. */
static void send_part(enum presence_op op, const uint32_t *uids, uint32_t n)
{
    static const struct timeval one_second = {1, 0};
    if (outbound_presence(op, uids, n) != 0 && !evtimer_pending(repair_ev, NULL))
        evtimer_add(repair_ev, &one_second);
}

static void flush(void)
{
    if (batch_len)
        send_part(batch_op, batch, batch_len);
    batch_len = 0;
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
    presence_snapshot();
}

int presence_init(struct event_base *base, int on)
{
    enabled = on;
    if (!enabled)
        return 0;
    flush_ev = event_new(base, -1, 0, on_flush, NULL);
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
    enum presence_op op = online ? PRESENCE_UP : PRESENCE_DOWN;
    if (batch_len && (op != batch_op || batch_len == BATCH_MAX))
        flush();
    if (batch_len == 0)
        event_active(flush_ev, 0, 0);     /* runs after this iteration's callbacks */
    batch_op = op;
    batch[batch_len++] = uid;
}

uint32_t presence_snapshot(void)
{
    uint32_t online = 0;
    if (!enabled)
        return (uint32_t)loop_stats.uids_online;
    flush();
    /* First part replaces what the master knew; the rest adds to it. */
    enum presence_op op = PRESENCE_SNAPSHOT;
    for (uint32_t uid = uidtable_next_online(0); uid; uid = uidtable_next_online(uid)) {
        online++;
        batch[batch_len++] = uid;
        if (batch_len == BATCH_MAX) {
            send_part(op, batch, batch_len);
            op = PRESENCE_UP;
            batch_len = 0;
        }
    }
    if (batch_len || op == PRESENCE_SNAPSHOT)
        send_part(op, batch, batch_len);
    batch_len = 0;
    return online;
}
