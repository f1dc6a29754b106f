/* SPDX-License-Identifier: Apache-2.0 */
/* Presence batching. A uid's first stream is told at once: an `up` of its
 * own, queued to the outbox before anything that stream can send, so the
 * masters know the uid before its first client message reaches an inbox,
 * and an application's send right after the connect finds it. At most
 * IMMEDIATE_MAX such ups go per window, and none in a storm (while windows
 * are long); the others wait for the window as every other change does,
 * but a client message of a uid not told yet sends its up first
 * (presence_known). An up told at once sends what waits in the window
 * before it, so the masters hear of changes in the order they happened.
 * The C-node thread puts the ups it finds together into one message
 * (erl_send.c).
 *
 * The other changes collect for a window (PRESENCE_WINDOW_MS from the
 * first one) and then go out as their net effect against what the masters
 * were told (a bit a uid, `told`): a uid that went down and came back
 * within the window is not mentioned at all, the others in one `down` and
 * one `up` message (each cut in pieces of BATCH_MAX). A window that had
 * many changes makes the next one longer (presence_window.h), so that a
 * reconnect storm of any size costs each master a handful of messages; a
 * quiet one brings it back to PRESENCE_WINDOW_MS. A change lost to a full
 * outbound queue is repaired by a snapshot (sent to every master) a
 * second later.
 *
 * Snapshots go in pieces of BATCH_MAX uids: the first is `snapshot`
 * (replaces what the master knew), the rest `snapshot_more` (adds). Which
 * masters get one is the C-node thread's business (erl_send.c): those that
 * asked for it, or every one for a repair.
 *
 * Connection presence (--presence-conns) is apart: no window, each stream's
 * open and end is one record at once (so a conn_up and conn_down never
 * cancel out), bounded by OUTBOUND_CONN_MAX queued (outbound.h); one lost
 * is counted (conn_events_dropped) and not repaired: no snapshot has
 * connections. It gives every stream its conn id at open (conn.h: 40 to
 * 80 bytes a stream) and drops it at the end, with the reason the call
 * that ended it gave (end_reason.h). */
#include "core/presence.h"
#include "core/presence_window.h"
#include "core/conn.h"
#include "core/framing.h"
#include "lib/carry.h"
#include "lib/log.h"
#include "core/outbound.h"
#include "obs/end_reason.h"
#include "obs/stats.h"
#include "core/stream-t.h"
#include "core/transport_ops.h"
#include "core/uidtable.h"
#include "lib/peer_addr.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define BATCH_MAX 4096         /* uids per message */
#define PENDING_MAX 16384      /* changes per window before it is cut short */
#define IMMEDIATE_MAX 16       /* first ups told at once in a quiet window */

static int enabled;
static int conns;              /* --presence-conns */
static struct presence_window win = PRESENCE_WINDOW_INIT;
static struct event *repair_ev;
/* The uids of this window's changes, a uid once per change (64 KB): sorted
 * at the flush, each is compared with what the masters were told. */
static uint32_t pending[PENDING_MAX];
static uint32_t npending;
/* What the masters were told (or will be by what is queued): 1 bit a uid,
 * 136 KB for 1.1M uids, its pages touched only where uids are used. It
 * differs from the uid table only for uids of this window's changes. */
static uint64_t *told;
static uint32_t told_words;    /* its size */
static uint32_t batch[BATCH_MAX];   /* one message being built (16 KB) */
static void (*after_snapshot)(int to_all);

void presence_on_snapshot(void (*fn)(int to_all)) { after_snapshot = fn; }

void presence_repair_later(void)
{
    static const struct timeval one_second = {1, 0};
    if (repair_ev && !evtimer_pending(repair_ev, NULL))
        evtimer_add(repair_ev, &one_second);
}

/* Sends one part; on a full queue, schedules the repairing snapshot. */
static void send_part(enum presence_op op, int to_all, const uint32_t *uids, uint32_t n)
{
    if (outbound_presence(op, to_all, uids, n) != 0)
        presence_repair_later();
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static int told_of(uint32_t uid) { return (int)(told[uid / 64] >> (uid % 64) & 1); }

static void set_told(uint32_t uid, int online)
{
    if (online)
        told[uid / 64] |= 1ull << (uid % 64);
    else
        told[uid / 64] &= ~(1ull << (uid % 64));
}

/* The uids of the window (sorted pending) that are `online` now and were
 * told otherwise, as messages of op; they are told so. */
static void send_net(int online, enum presence_op op)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < npending; i++) {
        uint32_t uid = pending[i];
        if (i > 0 && pending[i - 1] == uid)
            continue;                          /* seen already */
        int now = uidtable_first(uid) != NULL;
        if (now != online || told_of(uid) == now)
            continue;
        set_told(uid, now);
        batch[n++] = uid;
        if (n == BATCH_MAX) {
            send_part(op, 0, batch, n);
            n = 0;
        }
    }
    if (n)
        send_part(op, 0, batch, n);
}

/* This window's changes so far, as their net effect. */
static void send_pending(void)
{
    qsort(pending, npending, sizeof pending[0], cmp_u32);
    send_net(0, PRESENCE_DOWN);
    send_net(1, PRESENCE_UP);
    npending = 0;
}

/* The window ends: what it holds goes. */
static void flush(void) { presence_window_flush(&win); }

static void on_repair(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    presence_snapshot_to(1);
}

int presence_init(struct event_base *base, int on, uint32_t max_users)
{
    enabled = on;
    if (!enabled)
        return 0;
    told_words = max_users / 64 + 1;
    told = calloc(told_words, sizeof *told);
    repair_ev = evtimer_new(base, on_repair, NULL);
    return told && presence_window_init(&win, base, send_pending) == 0 && repair_ev ? 0 : -1;
}

void presence_free(void)
{
    presence_window_free(&win);
    if (repair_ev)
        event_free(repair_ev);
    repair_ev = NULL;
    free(told);
    told = NULL;
    npending = 0;
}

/* uid's up, now, after what waits in the window: the masters hear of the
 * changes in the order they happened. */
static void up_now(uint32_t uid)
{
    if (npending)
        send_pending();
    if (told_of(uid))
        return;                        /* it was among them */
    set_told(uid, 1);
    send_part(PRESENCE_UP, 0, &uid, 1);
}

void presence_changed(uint32_t uid, int online)
{
    if (!enabled)
        return;
    if (npending == PENDING_MAX)
        flush();
    presence_window_change(&win);
    if (online && !told_of(uid) && presence_window_at_once(&win, IMMEDIATE_MAX)) {
        up_now(uid);
        return;
    }
    pending[npending++] = uid;
}

void presence_known(uint32_t uid)
{
    if (enabled && !told_of(uid) && uidtable_first(uid))
        up_now(uid);
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
    if (after_snapshot)
        after_snapshot(to_all);         /* the topics', to the same masters */
    return online;
}

uint32_t presence_snapshot(void) { return presence_snapshot_to(0); }

/* ---------------------------------------------------------------- hand-over */

void presence_flush_now(void)
{
    if (enabled)
        flush();
}

int presence_carry_export(struct carry_out *o)
{
    size_t at = carry_begin(o, PRESENCE_CARRY_TAG, PRESENCE_CARRY_VERSION);
    carry_u8(o, (uint8_t)enabled);
    carry_u8(o, enabled && evtimer_pending(repair_ev, NULL));
    carry_u32(o, enabled ? told_words : 0);
    if (enabled)
        carry_put(o, told, told_words * sizeof *told);
    carry_end(o, at);
    return o->failed ? -1 : 0;
}

int presence_carry_take(struct carry_in *rec, uint16_t version)
{
    (void)version;                   /* 1: the only one yet */
    int was = carry_get_u8(rec), repair = carry_get_u8(rec);
    uint32_t words = carry_get_u32(rec);
    const void *bits = carry_view(rec, (size_t)words * sizeof *told);
    if (rec->failed || was != enabled || (enabled && words != told_words)) {
        log_msg(LOG_ERROR, "takeover: presence is %s in the running process: start this one "
                "with the same --presence and --max-users", was ? "on" : "off");
        return -1;
    }
    if (!enabled)
        return 0;
    memcpy(told, bits, (size_t)words * sizeof *told);
    static const struct timeval one_second = {1, 0};
    if (repair)
        evtimer_add(repair_ev, &one_second);
    return 0;
}

void presence_carry_settle(void)
{
    for (uint32_t w = 0; enabled && w < told_words; w++)
        for (uint64_t bits = told[w]; bits; bits &= bits - 1) {
            uint32_t uid = w * 64 + (uint32_t)__builtin_ctzll(bits);
            if (!uidtable_first(uid))
                presence_changed(uid, 0);    /* told up, gone meanwhile: a down */
        }
}

/* ---------------------------------------------------------------- connections */

/* The name its transport gives itself (transport_ops.h). */
static const char *transport_name(uint8_t framing)
{
    const struct transport_ops *t = framing < FRAMING_KINDS ? transport_ops[framing] : NULL;
    return t && t->name ? t->name : "unknown";
}

/* The client's address (peer, else the peer of fd), as out_conn has it
 * (family 0 when unknown). */
static void peer_of(int fd, const struct peer_addr *peer, struct out_conn *c)
{
    struct peer_addr a;
    if (!peer) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0 ||
            peer_addr_from_sockaddr((struct sockaddr *)&ss, &a) != 0)
            return;
        peer = &a;
    }
    c->family = peer->family;
    c->port = peer->port;
    memcpy(c->addr, peer->addr, sizeof c->addr);
}

void presence_conns_enable(int on) { conns = on; }

int presence_conns_on(void) { return conns; }

void presence_conn_up(const struct stream *s, int fd, const struct peer_addr *peer)
{
    if (!conns)
        return;
    struct conn *id = conn_of(s);
    if (!id)
        return;                        /* out of memory: the stream has no name */
    struct out_conn c = {.conn = id->id, .transport = transport_name(s->framing),
                         .uid = s->uid, .up = 1};
    peer_of(fd, peer, &c);
    outbound_conn(&c);
}

void presence_conn_down(const struct stream *s, uint8_t why)
{
    if (!conns)
        return;
    uint64_t id = conn_id_of(s);
    if (!id)
        return;                        /* out of memory at its open: the stream has no name */
    struct out_conn c = {.conn = id, .transport = transport_name(s->framing),
                         .reason = end_reason_label(why), .uid = s->uid};
    outbound_conn(&c);
    conn_forget(s);
}
