/* SPDX-License-Identifier: Apache-2.0 */
/* Applies hand-off records to streams, on the event-loop thread only. */
#include "core/dispatch.h"
#include "core/batch.h"
#include "core/cmd.h"
#include "core/conn.h"
#include "core/drain.h"
#include "core/framing.h"
#include "core/history.h"
#include "core/history_origins.h"
#include "obs/probe.h"
#include "lib/log.h"
#include "core/outbound.h"
#include "core/presence.h"
#include "core/replay.h"
#include "obs/stats.h"
#include "core/stream.h"
#include "core/topic.h"
#include "core/transport_ops.h"
#include "core/topic_fanout.h"
#include "core/topic_join.h"
#include "core/uidtable.h"

#include <stdlib.h>
#include <string.h>

/* Records applied per wakeup before the loop serves sockets again. Large,
 * so that under backlog a stream's many messages leave in one writev. */
#define DRAIN_BUDGET 16384
/* Deliveries per wakeup, likewise: a record is one delivery or a fan-out to
 * thousands of streams, and a loop turn must stay short either way. */
#define DELIVERY_BUDGET 65536

static uint64_t drain_deliveries;   /* this wakeup's so far */

static struct event *wakeup_ev;
static struct event *more_ev;     /* drains again once the sockets were polled */
static struct handoff *inbox;

/* Queues uid's message seq (binary or text: cmd.h) for every stream of uid
 * that takes it; returns how many. */
static uint32_t queue(uint32_t uid, const char *data, uint32_t len, int binary, uint32_t seq)
{
    uint32_t n = 0;
    batch_room(uidtable_count(uid));
    /* next first: a stream may leave the uid's list as it is given its
     * message (a long-poll whose answer goes out at once). */
    for (struct stream *s = uidtable_first(uid), *next; s; s = next) {
        next = s->next;
        n += (uint32_t)batch_add(s, data, len, binary, seq);
    }
    return n;
}

/* Gives the message its id for uid (kept in its history, online or not)
 * and queues it; returns to how many streams. */
static uint32_t deliver(uint32_t uid, const char *data, uint32_t len, int binary)
{
    return queue(uid, data, len, binary, history_append(uid, data, len, binary));
}

/* One bit per uid: the uids a multicast has given its message so far, so
 * that a uid listed many times gets it once. (max_users + 1) / 8 bytes,
 * cleared after each multicast by the same walk: O(uids listed). */
static uint64_t *multicast_seen;
static uint32_t max_uid;           /* --max-users */

/* A numbered command's origin slot (history_origins.h), -1 for none, and
 * the index in its list of uids it is applied from (0 but after a restart
 * that found it cut short: those before have it). */
struct numbered {
    int origin;
    uint32_t from;
};

/* Whether the uid at index i of a command's list is to be given it, which
 * a uid listed before it (seen: counted in *repeats unless NULL) or a
 * restart (n->from) says not. */
static int first_time(uint32_t uid, uint32_t i, const struct numbered *n, uint64_t *repeats)
{
    uint64_t bit = 1ull << (uid % 64);
    int seen = (multicast_seen[uid / 64] & bit) != 0;
    multicast_seen[uid / 64] |= bit;
    if (i < n->from)
        return 0;
    if (n->origin >= 0)
        history_origin_at((uint32_t)n->origin, i, uid);
    if (seen && repeats)
        (*repeats)++;
    return !seen;
}

/* The same for each of uids (a multicast), the payload kept once. */
static uint32_t deliver_many(const uint32_t *uids, uint32_t nuids, const char *data,
                             uint32_t len, int binary, const struct numbered *num)
{
    uint64_t shared = history_share(data, len, binary);
    uint32_t n = 0;
    for (uint32_t i = 0; i < nuids; i++) {
        uint32_t uid = uids[i];
        if (!first_time(uid, i, num, &loop_stats.multicast_repeats))
            continue;
        uint32_t k = queue(uid, data, len, binary, history_append_shared(uid, shared));
        if (k == 0 && !uidtable_first(uid))
            loop_stats.dropped_no_conn++;
        n += k;
    }
    for (uint32_t i = 0; i < nuids; i++)
        multicast_seen[uids[i] / 64] = 0;
    return n;
}

static uint32_t deliver_all(const char *data, uint32_t len, int binary)
{
    uint64_t shared = history_share(data, len, binary);
    uint32_t n = 0;
    for (uint32_t uid = uidtable_next_online(0); uid; uid = uidtable_next_online(uid))
        n += queue(uid, data, len, binary, history_append_shared(uid, shared));
    return n;
}

/* A master could not keep messages for these uids: each gets an id that
 * names no message (history_skip), so that a client resuming across it
 * is told a gap; a live stream with ids is told now, as a resume from the
 * id before would tell it (a replay under way meets the missing id
 * itself). What was sent before goes first. */
static void gap_for_uid(uint32_t uid)
{
    uint32_t seq = history_skip(uid);
    loop_stats.seq_gap_uids++;
    for (struct stream *s = uidtable_first(uid), *next; s; s = next) {
        next = s->next;
        if (s->state != STREAM_LIVE || !framing_tells_gaps(s->framing) || stream_replaying(s))
            continue;
        char asked[32];
        replay_id_text(asked, sizeof asked, seq - 1);
        stream_replay(s, asked, UINT32_MAX);
    }
}

static void tell_gap(const uint32_t *uids, uint32_t nuids, const struct numbered *num)
{
    batch_flush();
    for (uint32_t i = 0; i < nuids; i++)
        if (first_time(uids[i], i, num, NULL))
            gap_for_uid(uids[i]);
    for (uint32_t i = 0; i < nuids; i++)
        multicast_seen[uids[i] / 64] = 0;
}

/* The same for every uid that had a message or has a stream: O(--max-users),
 * for what a master that died left (erl_seq.h), which is rare. */
static void tell_gap_all(void)
{
    batch_flush();
    for (uint32_t uid = 1; uid <= max_uid; uid++)
        if (history_last_seq(uid) || uidtable_first(uid))
            gap_for_uid(uid);
}

static void kick(uint32_t uid)
{
    batch_flush();                    /* what was sent before the kick goes first */
    struct stream *s = uidtable_first(uid), *next;
    for (; s; s = next) {
        next = s->next;
        stream_end_why(s, END_KICKED);
    }
}

/* {conn, Conn, Data}: to that connection only, through its transport's
 * reply (transport_ops.h), after what came before it. 1 when written (or
 * queued), 0 when Conn names no open connection, its framing has no reply
 * (a long-poll's), or Data is empty and the stream cannot carry that. */
static uint32_t to_conn(uint64_t id, const char *data, uint32_t len, int binary)
{
    batch_flush();
    struct stream *s = conn_find(id);
    const struct transport_ops *t = s ? transport_ops[s->framing] : NULL;
    if (!s || s->state != STREAM_LIVE || !t || !t->reply) {
        loop_stats.conn_dropped++;
        return 0;
    }
    int r = t->reply(s, data, len, binary);
    if (r == TRANSPORT_REPLY_EMPTY)
        loop_stats.conn_empty_dropped++;
    if (r != 0)
        return 0;
    loop_stats.conn_sent++;
    return 1;
}

/* A topic's subscription changes ({subscribe, ...}, a handler's answer):
 * after what was sent before it. 1 when done (a reply's N). */
static uint32_t topic_change(struct cmd *c)
{
    const char *name = cmd_topic(c), *p = cmd_payload(c);
    batch_flush();
    switch (c->kind) {
    case CMD_SUBSCRIBE: return (uint32_t)topic_conn_subscribe(c->conn, name, c->uid, NULL, 0, 0);
    case CMD_UNSUBSCRIBE: return (uint32_t)topic_conn_unsubscribe(c->conn, name, c->uid);
    case CMD_JOIN_ALLOWED:
        return (uint32_t)topic_conn_subscribe(c->conn, name, c->uid, p, c->payload_len, 1);
    default:
        return (uint32_t)topic_conn_refuse(c->conn, name, c->uid, p, c->payload_len);
    }
}

/* The topics a gap's payload names (topic_gap_next). */
static uint32_t gap_topics(const struct cmd *c)
{
    uint32_t n = 0, at = 0, t;
    while (topic_gap_next(cmd_payload((struct cmd *)c), c->payload_len, &at, &t))
        n++;
    return n;
}

/* A numbered message's place in its master's stream, kept with the
 * history (history_origins.h). Its list: a unicast's uid; a multicast's
 * uids; a gap's uids, then its topics' history slots; a publish's topic's
 * slot. */
static struct numbered numbered_begin(const struct cmd *c)
{
    struct numbered num = {.origin = -1};
    if (!c->mark || !history_origins_kept())
        return num;
    uint32_t n;
    switch (c->kind) {
    case CMD_UNICAST:
    case CMD_TOPIC: n = 1; break;
    case CMD_MULTICAST: n = c->nuids; break;
    case CMD_GAP: n = c->nuids + gap_topics(c); break;
    default: return num;
    }
    num.origin = (int)cmd_mark_origin(c->mark);
    num.from = history_origin_begin((uint32_t)num.origin, cmd_mark_last(c->mark), c->kind, n);
    return num;
}

/* The history slot of topic t (0: not held here, none) is at index i of
 * a numbered command's list: 1 when it is to be given it (a restart may
 * say it has it). */
static int topic_first_time(uint32_t t, uint32_t i, const struct numbered *num)
{
    if (i < num->from)
        return 0;
    if (num->origin >= 0)
        history_origin_at((uint32_t)num->origin, i, t ? topic_slot(t) : 0);
    return 1;
}

/* A gap's topics, after its uids in its list. */
static void tell_topic_gaps(const struct cmd *c, const struct numbered *num)
{
    uint32_t i = c->nuids, at = 0, t;
    while (topic_gap_next(cmd_payload((struct cmd *)c), c->payload_len, &at, &t))
        if (topic_first_time(t, i++, num) && t)
            topic_gap(t);
}

static void seq_run(const struct cmd *c)
{
    struct cmd_seq_run r;
    if (c->payload_len != sizeof r)
        return;
    memcpy(&r, cmd_payload((struct cmd *)c), sizeof r);
    history_origin_run(c->uid, r.name_hash, r.inc, r.base);
}

static int apply(void *body, size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    struct cmd *c = body;
    uint32_t n = 0;

    if (c->kind == CMD_SEQ_RUN) {
        seq_run(c);
        return 0;
    }
    loop_stats.msgs_applied++;
    if (probe_enabled)
        probe_applied(cmd_payload(c), c->payload_len, c->received_ns);
    struct numbered num = numbered_begin(c);
    switch (c->kind) {
    case CMD_UNICAST:
        if (num.from)
            break;                     /* in before a restart */
        if (num.origin >= 0)
            history_origin_at((uint32_t)num.origin, 0, c->uid);
        n = deliver(c->uid, cmd_payload(c), c->payload_len, c->binary);
        if (n == 0 && !uidtable_first(c->uid))
            loop_stats.dropped_no_conn++;
        break;
    case CMD_MULTICAST:
        n = deliver_many(cmd_uids(c), c->nuids, cmd_payload(c), c->payload_len, c->binary, &num);
        break;
    case CMD_BROADCAST:
        n = deliver_all(cmd_payload(c), c->payload_len, c->binary);
        break;
    case CMD_KICK:
        kick(c->uid);
        break;
    case CMD_GAP:
        tell_gap(cmd_uids(c), c->nuids, &num);
        tell_topic_gaps(c, &num);
        break;
    case CMD_GAP_ALL:
        tell_gap_all();
        topic_gap_all();
        break;
    case CMD_CONN:
        n = to_conn(c->conn, cmd_payload(c), c->payload_len, c->binary);
        break;
    case CMD_TOPIC: {
        uint32_t t = topic_find(cmd_topic(c), c->uid);
        if (topic_first_time(t, 0, &num))
            n = topic_publish(t, cmd_payload(c), c->payload_len, c->binary);
        break;
    }
    case CMD_SUBSCRIBE:
    case CMD_UNSUBSCRIBE:
    case CMD_JOIN_ALLOWED:
    case CMD_JOIN_REFUSED:
        n = topic_change(c);
        if (c->reply_len)
            batch_ack(cmd_reply(c), c->reply_len, n);
        return 0;
    case CMD_DRAIN:
        batch_flush();            /* what was sent before goes first */
        log_msg(LOG_INFO, "{drain, %u} from Erlang: new streams are refused", c->uid);
        drain_start(c->uid, NULL);
        return 0;
    case CMD_UNDRAIN:
        if (drain_cancel() == 0)
            log_msg(LOG_INFO, "{drain, cancel} from Erlang: new streams are taken again");
        return 0;
    case CMD_STATS:
        batch_flush();            /* the counters include what came before */
        outbound_stats(cmd_reply(c), c->reply_len);
        return 0;
    case CMD_SNAPSHOT:
        n = presence_snapshot();
        if (c->reply_len)
            batch_ack(cmd_reply(c), c->reply_len, n);   /* after earlier acks */
        return 0;
    default:
        break;
    }
    if (num.origin >= 0)
        history_origin_end((uint32_t)num.origin, cmd_mark_last(c->mark));
    loop_stats.deliveries += n;
    loop_stats.bytes_out += (uint64_t)n * c->payload_len;
    if (n)
        batch_delivered(c->received_ns, n);
    if (c->reply_len)
        batch_ack(cmd_reply(c), c->reply_len, n);
    drain_deliveries += n;
    return drain_deliveries >= DELIVERY_BUDGET;
}

static void flush(void *ctx)
{
    (void)ctx;
    batch_flush();
}

static void drain(void)
{
    size_t budget = DRAIN_BUDGET, n;
    drain_deliveries = 0;
    while (budget > 0 && drain_deliveries < DELIVERY_BUDGET &&
           (n = handoff_drain(inbox, budget, apply, flush, NULL)) > 0)
        budget -= n;
    /* More is waiting, and no wakeup will come for it. Not event_active:
     * an event activated from its own callback runs again before libevent
     * polls the sockets, so a busy inbox would starve every client (no
     * accept, no EOF, no /stats) for as long as it stays busy. A timer that
     * is due at once runs after the next poll. */
    static const struct timeval now = {0, 0};
    if (budget == 0 || drain_deliveries >= DELIVERY_BUDGET)
        event_add(more_ev, &now);
}

void dispatch_drain_all(void)
{
    handoff_clear_wakeup(inbox);
    drain_deliveries = 0;
    while (handoff_drain(inbox, DRAIN_BUDGET, apply, flush, NULL) > 0)
        drain_deliveries = 0;
}

static void on_wakeup(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    handoff_clear_wakeup(inbox);
    drain();
}

static void on_more(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    drain();
}

int dispatch_start(struct event_base *base, struct handoff *ring, uint32_t max_users)
{
    inbox = ring;
    max_uid = max_users;
    multicast_seen = calloc((size_t)max_users / 64 + 1, sizeof *multicast_seen);
    if (!multicast_seen) {
        log_msg(LOG_ERROR, "cannot allocate the multicast bitmap for %u uids; lower --max-users",
                max_users);
        return -1;
    }
    wakeup_ev = event_new(base, handoff_wakeup_fd(inbox), EV_READ | EV_PERSIST, on_wakeup, NULL);
    more_ev = evtimer_new(base, on_more, NULL);
    if (!wakeup_ev || !more_ev || event_add(wakeup_ev, NULL) != 0) {
        log_msg(LOG_ERROR, "cannot watch the hand-off eventfd");
        return -1;
    }
    return 0;
}

void dispatch_stop(void)
{
    free(multicast_seen);
    multicast_seen = NULL;
    if (wakeup_ev) {
        event_free(wakeup_ev);
        wakeup_ev = NULL;
    }
    if (more_ev) {
        event_free(more_ev);
        more_ev = NULL;
    }
}
