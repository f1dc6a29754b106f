/* SPDX-License-Identifier: Apache-2.0 */
/* Encoding and sending of what the loop queued for Erlang. Replies go to
 * the asker's node; presence goes to every master link, each on its own:
 * a master asked for a snapshot (it connected, or sent {Pid, Ref,
 * snapshot}) gets the next snapshot and no change before it; one whose
 * socket has no room gets nothing until it has, then a snapshot of its
 * own (erl_send_repair), so one slow master never holds the others.
 * Client messages go to their uid's master's inbox; while that inbox's
 * window is full they (and a WebSocket's conn_down behind them) are
 * parked on its link (erl_park.h) and the outbox goes on: one slow inbox
 * holds back its own client messages, nothing else. The single `up`
 * records one drain finds one after the other (the loop tells a uid's
 * first stream at once, presence.c) go as one message. */
#include "erl/erl_send.h"
#include "erl/erl_link.h"
#include "erl/erl_park.h"
#include "erl/erl_send_topics.h"
#include "erl/erl_seq.h"
#include "core/history.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "core/outbound.h"
#include "obs/stats.h"

#include <stdatomic.h>
#include <string.h>

static ei_cnode *cnode;
static struct handoff *outbox;
static const struct erl_config *opts;
static const char *presence_to;
static const char *inbox_to;
static ei_x_buff x;
static struct log_ratelimit send_rl, room_rl, park_rl, reset_rl;

void erl_send_init(ei_cnode *ec, struct handoff *out, const struct erl_config *o)
{
    cnode = ec;
    outbox = out;
    opts = o;
    presence_to = o->presence;
    inbox_to = o->inbox;
    ei_x_new(&x);
}

void erl_send_free(void) { ei_x_free(&x); }

/* {Ref, ...} to Pid: reply holds the encoded Pid then Ref. Starts x with
 * the tuple and Ref; returns the pid's link fd, or -1 if not connected. */
static int begin_reply(const char *reply, int reply_len, erlang_pid *pid)
{
    int index = 0;
    if (ei_decode_pid(reply, &index, pid) != 0)
        return -1;
    struct erl_link *l = erl_link_find(pid->node);
    if (!l || l->broken) {
        log_limited(&send_rl, LOG_INFO, "reply to %s dropped: node not connected", pid->node);
        return -1;
    }
    x.index = 0;
    ei_x_encode_version(&x);
    ei_x_encode_tuple_header(&x, 2);
    ei_x_append_buf(&x, reply + index, reply_len - index);
    return l->fd;
}

/* A send that failed or timed out may have left half a packet on the link,
 * and a peer that does not read would hold this thread at every send: the
 * link is dropped (the C-node thread does it after the drain). */
static void send_failed(struct erl_link *l, const char *what)
{
    log_msg(LOG_INFO, "%s to %s failed (%s): dropping the connection", what, l->node,
            strerror(erl_errno));
    l->broken = 1;
}

static void send_reply(int fd, erlang_pid *pid)
{
    if (ei_send(fd, pid, x.buff, x.index) < 0)
        send_failed(erl_link_find(pid->node), "reply");
}

void erl_send_count_reply(const char *reply, int reply_len, uint32_t n)
{
    erlang_pid pid;
    int fd = begin_reply(reply, reply_len, &pid);
    if (fd < 0)
        return;
    ei_x_encode_ulong(&x, n);
    send_reply(fd, &pid);
}

static void send_ack(struct out_rec *r)
{
    erl_send_count_reply((const char *)(r + 1), r->reply_len, r->count);
}

/* A master link to send an acknowledgement for origin by: via's if it
 * is linked, else the origin's, else any master's; NULL for none. */
static struct erl_link *ack_link(const char *via, const char *origin)
{
    struct erl_link *l = erl_link_find(via);
    if (!l || l->broken)
        l = erl_link_find(origin);
    for (int i = 0; (!l || l->broken || !l->is_master) && i < erl_link_count(); i++)
        l = erl_link_at(i);
    return l && !l->broken && l->is_master ? l : NULL;
}

int erl_send_seq_ack(const char *via, const char *ack_to, const char *origin, uint64_t inc,
                     uint64_t seq)
{
    struct erl_link *l = ack_link(via, origin);
    if (!l || !erl_link_has_room(l))
        return -1;                       /* tried again at the next turn */
    x.index = 0;
    ei_x_encode_version(&x);
    ei_x_encode_tuple_header(&x, 5);
    ei_x_encode_atom(&x, strcmp(l->node, origin) == 0 ? "httpdcnode_ack" : "httpdcnode_ack_via");
    ei_x_encode_atom(&x, ei_thisnodename(cnode));
    ei_x_encode_atom(&x, origin);
    ei_x_encode_ulonglong(&x, inc);
    ei_x_encode_ulonglong(&x, seq);
    if (ei_reg_send(cnode, l->fd, (char *)ack_to, x.buff, x.index) < 0) {
        send_failed(l, "acknowledgement");
        return -1;
    }
    return 0;
}

static void send_stats(struct out_rec *r)
{
    const struct stat_pair *pairs = (const struct stat_pair *)(r + 1);
    erlang_pid pid;
    int fd = begin_reply((const char *)(pairs + r->count), r->reply_len, &pid);
    if (fd < 0)
        return;
    ei_x_encode_map_header(&x, r->count);
    for (uint32_t i = 0; i < r->count; i++) {
        ei_x_encode_atom(&x, pairs[i].name);
        ei_x_encode_ulonglong(&x, pairs[i].value);
    }
    send_reply(fd, &pid);
}

/* x to the presence process on l, if l has room; else nothing more
 * until it has (erl_send_repair). */
static void send_to_master(struct erl_link *l, const char *what)
{
    if (!erl_link_has_room(l)) {
        atomic_fetch_add(&cnode_stats.presence_dropped, 1);
        log_limited(&room_rl, LOG_INFO, "master %s is not reading: presence to it dropped "
                    "until it does, then a snapshot", l->node);
        l->repair = 1;
        l->in_snapshot = 0;
        return;
    }
    if (ei_reg_send(cnode, l->fd, (char *)presence_to, x.buff, x.index) < 0)
        send_failed(l, what);
}

/* Whether l gets this record: see the top of the file. Updates its state. */
static int wants(struct erl_link *l, const struct out_rec *r)
{
    switch (r->op) {
    case PRESENCE_SNAPSHOT:
        l->in_snapshot = l->awaiting || r->to_all;
        if (l->in_snapshot)
            l->awaiting = l->repair = 0;
        return l->in_snapshot;
    case PRESENCE_SNAPSHOT_MORE:
        return l->in_snapshot;
    default:
        return !l->awaiting && !l->repair;
    }
}

/* {httpdcnode, Node, up | down | snapshot | snapshot_more, Uid | [Uid]}
 * to the masters that want it. */
static void send_presence(struct out_rec *r)
{
    static const char *const ops[] = {
        [PRESENCE_UP] = "up", [PRESENCE_DOWN] = "down", [PRESENCE_SNAPSHOT] = "snapshot",
        [PRESENCE_SNAPSHOT_MORE] = "snapshot_more"};
    const uint32_t *uids = (const uint32_t *)(r + 1);
    int encoded = 0;
    for (int i = 0; i < erl_link_count(); i++) {
        struct erl_link *l = erl_link_at(i);
        if (!l->is_master || l->broken || !wants(l, r))
            continue;
        if (!encoded) {
            x.index = 0;
            ei_x_encode_version(&x);
            ei_x_encode_tuple_header(&x, 4);
            ei_x_encode_atom(&x, "httpdcnode");
            ei_x_encode_atom(&x, ei_thisnodename(cnode));
            ei_x_encode_atom(&x, ops[r->op]);
            if (r->count == 1 && (r->op == PRESENCE_UP || r->op == PRESENCE_DOWN)) {
                ei_x_encode_ulong(&x, uids[0]);
            } else {
                if (r->count)
                    ei_x_encode_list_header(&x, r->count);
                for (uint32_t j = 0; j < r->count; j++)
                    ei_x_encode_ulong(&x, uids[j]);
                ei_x_encode_empty_list(&x);
            }
            encoded = 1;
        }
        send_to_master(l, "presence");
    }
}

/* Topic presence (erl_send_topics.h) to the masters that want it: a
 * snapshot's parts to those that got the uid snapshot it follows, the
 * rest to those taking changes. */
static void send_topics(struct out_rec *r, size_t size)
{
    int encoded = 0;
    for (int i = 0; i < erl_link_count(); i++) {
        struct erl_link *l = erl_link_at(i);
        if (!l->is_master || l->broken ||
            !(erl_send_topics_snapshot_part(r->op) ? l->in_snapshot : !l->awaiting && !l->repair))
            continue;
        if (!encoded)
            erl_send_topics_encode(&x, ei_thisnodename(cnode), r, size);
        encoded = 1;
        send_to_master(l, "topic presence");
    }
}

/* {httpdcnode, Node, hello, #{history_ttl, history, topic_linger, epoch,
 * max_users, seq, topic_seq, instance, applied}}: what a master needs to
 * know of this C-node before its snapshot; topic_linger: seconds a topic
 * no stream holds is kept; seq: numbered messages are taken (1),
 * topic_seq: numbered topic messages too (1), instance: this run's
 * (erl_seq.h), applied: {Inc, Seq} of that master's stream, the last
 * number applied, or none. */
static void send_hello(struct erl_link *l)
{
    uint64_t inc, seq;
    x.index = 0;
    ei_x_encode_version(&x);
    ei_x_encode_tuple_header(&x, 4);
    ei_x_encode_atom(&x, "httpdcnode");
    ei_x_encode_atom(&x, ei_thisnodename(cnode));
    ei_x_encode_atom(&x, "hello");
    ei_x_encode_map_header(&x, 9);
    ei_x_encode_atom(&x, "seq");
    ei_x_encode_ulong(&x, 1);
    ei_x_encode_atom(&x, "topic_seq");
    ei_x_encode_ulong(&x, 1);
    ei_x_encode_atom(&x, "instance");
    ei_x_encode_ulonglong(&x, erl_seq_instance());
    ei_x_encode_atom(&x, "applied");
    if (erl_seq_applied_for(l->node, &inc, &seq)) {
        ei_x_encode_tuple_header(&x, 2);
        ei_x_encode_ulonglong(&x, inc);
        ei_x_encode_ulonglong(&x, seq);
    } else {
        ei_x_encode_atom(&x, "none");
    }
    ei_x_encode_atom(&x, "history_ttl");
    ei_x_encode_ulong(&x, opts->history_ttl);
    ei_x_encode_atom(&x, "history");
    ei_x_encode_ulong(&x, opts->history);
    ei_x_encode_atom(&x, "topic_linger");
    ei_x_encode_ulong(&x, opts->topic_linger);
    ei_x_encode_atom(&x, "epoch");
    ei_x_encode_binary(&x, history_epoch_hex(), 8);
    ei_x_encode_atom(&x, "max_users");
    ei_x_encode_ulong(&x, opts->max_users);
    if (ei_reg_send(cnode, l->fd, (char *)presence_to, x.buff, x.index) < 0)
        send_failed(l, "hello");
}

int erl_send_master_up(struct erl_link *l)
{
    if (!presence_to[0])
        return 0;
    send_hello(l);
    l->awaiting = 1;
    return 1;
}

int erl_send_repair(struct erl_link *l)
{
    if (!l->repair || l->broken || !erl_link_has_room(l))
        return 0;
    l->repair = 0;
    l->awaiting = 1;
    return 1;
}

/* The master of uid among those linked (see erl_send.h), or NULL. */
static struct erl_link *inbox_master(uint32_t uid)
{
    int n = 0;
    for (int i = 0; i < erl_link_count(); i++)
        n += erl_link_at(i)->is_master && !erl_link_at(i)->broken;
    if (n == 0)
        return NULL;
    int k = (int)(uid % (uint32_t)n);
    for (int i = 0; i < erl_link_count(); i++) {
        struct erl_link *l = erl_link_at(i);
        if (l->is_master && !l->broken && k-- == 0)
            return l;
    }
    return NULL;
}

/* A client message is off our hands: sent, or dropped and counted. */
static void in_done(const struct out_rec *r)
{
    atomic_fetch_sub_explicit(&outbound_in_pending, outbound_in_cost(r->count),
                              memory_order_relaxed);
}

/* {httpdcnode_in, Node, Uid, Conn, Data} to l's inbox, now: Data a binary for
 * text, {binary, Binary} for a binary message. */
static void send_in_to(struct erl_link *l, const struct out_rec *r)
{
    const struct out_in *in = (const struct out_in *)(r + 1);
    if (in->what != IN_MESSAGE) {           /* a join or leave for the handler */
        erl_send_topics_encode_in(&x, ei_thisnodename(cnode), r);
    } else {
        x.index = 0;
        ei_x_encode_version(&x);
        ei_x_encode_tuple_header(&x, 5);
        ei_x_encode_atom(&x, "httpdcnode_in");
        ei_x_encode_atom(&x, ei_thisnodename(cnode));
        ei_x_encode_ulong(&x, in->uid);
        ei_x_encode_ulonglong(&x, in->conn);
        if (in->binary) {                   /* as Erlang says it: {binary, Data} */
            ei_x_encode_tuple_header(&x, 2);
            ei_x_encode_atom(&x, "binary");
        }
        ei_x_encode_binary(&x, in + 1, (long)r->count);
    }
    /* A blocking send: the inbox's window bounds what waits there. */
    if (ei_reg_send(cnode, l->fd, (char *)inbox_to, x.buff, x.index) < 0) {
        send_failed(l, "client message");
    } else if (++l->in_unacked == ERL_SEND_IN_WINDOW) {
        l->in_full_ms = clock_now_ms();      /* full now: erl_send_check_windows */
        l->in_stuck = 0;
    }
    in_done(r);
}

/* r waits on l behind what is parked there; past ERL_PARK_MAX it is
 * dropped and counted (a client message's bytes stop counting then). */
static void park(struct erl_link *l, const struct out_rec *r, size_t size)
{
    if (erl_park_push(&l->park, r, size) == 0)
        return;
    if (r->kind == OUT_IN) {
        atomic_fetch_add(&cnode_stats.in_park_dropped, 1);
        in_done(r);
    } else {
        atomic_fetch_add(&cnode_stats.presence_dropped, 1);
    }
    log_limited(&park_rl, LOG_INFO, "inbox of master %s not acknowledging and %u bytes "
                "parked: client messages dropped", l->node, ERL_PARK_MAX);
}

/* A client message to its uid's master: now if its window has room and
 * nothing parked there comes first, else parked. */
static void route_in(const struct out_rec *r)
{
    const struct out_in *in = (const struct out_in *)(r + 1);
    struct erl_link *l = inbox_to[0] ? inbox_master(in->uid) : NULL;
    if (!l) {
        atomic_fetch_add(&cnode_stats.in_no_master, 1);
        in_done(r);
    } else if (erl_park_empty(&l->park) && l->in_unacked < ERL_SEND_IN_WINDOW) {
        send_in_to(l, r);
    } else {
        park(l, r, sizeof *r + sizeof *in + r->count);
    }
}

/* Peer as {IpTuple, Port}, or undefined. */
static void encode_peer(const struct out_conn *c)
{
    if (c->family != 4 && c->family != 6) {
        ei_x_encode_atom(&x, "undefined");
        return;
    }
    ei_x_encode_tuple_header(&x, 2);
    if (c->family == 4) {
        ei_x_encode_tuple_header(&x, 4);
        for (int i = 0; i < 4; i++)
            ei_x_encode_ulong(&x, c->addr[i]);
    } else {
        ei_x_encode_tuple_header(&x, 8);
        for (int i = 0; i < 16; i += 2)
            ei_x_encode_ulong(&x, (unsigned long)c->addr[i] << 8 | c->addr[i + 1]);
    }
    ei_x_encode_ulong(&x, c->port);
}

/* {httpdcnode, Node, conn_up, Uid, Conn, Transport, Peer} or
 * {httpdcnode, Node, conn_down, Uid, Conn, Reason}, into x. */
static void encode_conn(const struct out_conn *c)
{
    x.index = 0;
    ei_x_encode_version(&x);
    ei_x_encode_tuple_header(&x, c->up ? 7 : 6);
    ei_x_encode_atom(&x, "httpdcnode");
    ei_x_encode_atom(&x, ei_thisnodename(cnode));
    ei_x_encode_atom(&x, c->up ? "conn_up" : "conn_down");
    ei_x_encode_ulong(&x, c->uid);
    ei_x_encode_ulonglong(&x, c->conn);
    if (c->up) {
        ei_x_encode_atom(&x, c->transport);
        encode_peer(c);
    } else {
        ei_x_encode_atom(&x, c->reason);
    }
}

/* The conn_down in x to l's inbox, if l has room (it is optional). */
static void conn_to_inbox(struct erl_link *l)
{
    if (!erl_link_has_room(l))
        atomic_fetch_add(&cnode_stats.presence_dropped, 1);
    else if (ei_reg_send(cnode, l->fd, (char *)inbox_to, x.buff, x.index) < 0)
        send_failed(l, "conn_down");
}

/* A WebSocket's conn_down (record r) to its uid's inbox, after that
 * connection's messages: parked behind them when some are. encoded: x
 * holds it already. */
static void route_conn_down(const struct out_rec *r, int encoded)
{
    const struct out_conn *c = (const struct out_conn *)(r + 1);
    struct erl_link *l = inbox_master(c->uid);
    if (!l)
        return;
    if (!erl_park_empty(&l->park)) {
        park(l, r, sizeof *r + sizeof *c);
        return;
    }
    if (!encoded)
        encode_conn(c);
    conn_to_inbox(l);
}

/* A conn event to every linked master's presence process (conn events
 * are no part of the snapshots, so one awaiting a snapshot gets them
 * too); a WebSocket's conn_down also to its uid's inbox, the process that
 * had its messages (route_conn_down). */
static void send_conn(struct out_rec *r)
{
    const struct out_conn *c = (const struct out_conn *)(r + 1);
    encode_conn(c);
    for (int i = 0; presence_to[0] && i < erl_link_count(); i++) {
        struct erl_link *l = erl_link_at(i);
        if (l->is_master && !l->broken)
            send_to_master(l, "conn presence");
    }
    if (!c->up && inbox_to[0] && strcmp(c->transport, "ws") == 0)
        route_conn_down(r, 1);
    atomic_fetch_sub_explicit(&outbound_conn_pending, 1, memory_order_relaxed);
}

/* Ups of one drain, one after the other, sent as one message (16 KB). */
#define UPS_MAX 4096
static struct {
    struct out_rec h;
    uint32_t uids[UPS_MAX];
} ups = {.h = {.kind = OUT_PRESENCE, .op = PRESENCE_UP}};

static void send_ups(void)
{
    if (ups.h.count == 0)
        return;
    send_presence(&ups.h);
    ups.h.count = 0;
}

/* r's uids join the ups; 0 when r is no `up` for the masters that want changes. */
static int add_ups(const struct out_rec *r)
{
    if (r->kind != OUT_PRESENCE || r->op != PRESENCE_UP || r->to_all || r->count > UPS_MAX)
        return 0;
    if (ups.h.count + r->count > UPS_MAX)
        send_ups();
    memcpy(ups.uids + ups.h.count, r + 1, r->count * sizeof ups.uids[0]);
    ups.h.count += r->count;
    return 1;
}

static int send_one(void *body, size_t size, void *ctx)
{
    (void)ctx;
    struct out_rec *r = body;
    if (presence_to[0] && add_ups(r))
        return 0;
    send_ups();                 /* before anything behind them */
    switch (r->kind) {
    case OUT_ACK: send_ack(r); break;
    case OUT_STATS: send_stats(r); break;
    case OUT_PRESENCE:
        if (presence_to[0])
            send_presence(r);
        break;
    case OUT_CONN: send_conn(r); break;
    case OUT_IN: route_in(r); break;
    case OUT_TOPICS:
        if (presence_to[0])
            send_topics(r, size);
        break;
    }
    return 0;
}

void erl_send_drain(void)
{
    handoff_clear_wakeup(outbox);
    while (handoff_drain(outbox, 1024, send_one, NULL, NULL) > 0)
        ;
    send_ups();
}

/* l's parked records, oldest first, while its window takes them (a
 * conn_down takes none of it). */
static void send_parked(struct erl_link *l)
{
    struct erl_parked *p;
    while (!l->broken && (p = erl_park_head(&l->park))) {
        const struct out_rec *r = (const struct out_rec *)p->rec;
        if (r->kind == OUT_IN && l->in_unacked >= ERL_SEND_IN_WINDOW)
            return;
        erl_park_take(&l->park);
        if (r->kind == OUT_IN) {
            send_in_to(l, r);
        } else {
            encode_conn((const struct out_conn *)(r + 1));
            conn_to_inbox(l);
        }
        erl_park_free(p);
    }
}

void erl_send_in_acked(struct erl_link *l, uint32_t n)
{
    l->in_unacked = n >= l->in_unacked ? 0 : l->in_unacked - n;
    send_parked(l);
}

void erl_send_in_reset(struct erl_link *l)
{
    atomic_fetch_add(&cnode_stats.in_resets, 1);
    if (l->in_unacked) {
        atomic_fetch_add(&cnode_stats.in_reset_unacked, l->in_unacked);
        log_limited(&reset_rl, LOG_INFO, "the inbox on %s started again with %u client "
                    "messages unacknowledged: taken as lost with the old one", l->node,
                    l->in_unacked);
    }
    l->in_unacked = 0;
    send_parked(l);
}

void erl_send_check_windows(void)
{
    int64_t now = 0;
    uint64_t stuck = 0;
    for (int i = 0; i < erl_link_count(); i++) {
        struct erl_link *l = erl_link_at(i);
        if (l->in_unacked < ERL_SEND_IN_WINDOW)
            continue;
        if (!now)
            now = clock_now_ms();         /* only while a window is full */
        if (now - l->in_full_ms < ERL_SEND_IN_STUCK_MS)
            continue;
        stuck++;
        if (!l->in_stuck)
            log_msg(LOG_ERROR, "the inbox on %s has acknowledged none of its %u client "
                    "messages for %d s: its clients' messages wait, then are dropped. Is "
                    "the --inbox process registered there and handling them?", l->node,
                    l->in_unacked, ERL_SEND_IN_STUCK_MS / 1000);
        l->in_stuck = 1;
    }
    if (stuck != atomic_load_explicit(&cnode_stats.in_windows_stuck, memory_order_relaxed))
        atomic_store(&cnode_stats.in_windows_stuck, stuck);
}

void erl_send_link_gone(struct erl_link *l)
{
    l->broken = 1;              /* inbox_master passes it over from now on */
    struct erl_park moved = l->park;
    l->park = (struct erl_park){0};
    struct erl_parked *p;
    while ((p = erl_park_take(&moved))) {
        const struct out_rec *r = (const struct out_rec *)p->rec;
        if (r->kind == OUT_IN)
            route_in(r);
        else
            route_conn_down(r, 0);
        erl_park_free(p);
    }
}
