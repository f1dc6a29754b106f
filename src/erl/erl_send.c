/* Encoding and sending of what the loop queued for Erlang. Replies go to
 * the asker's node; presence goes to every master link, each on its own:
 * a master asked for a snapshot (it connected, or sent {Pid, Ref,
 * snapshot}) gets the next snapshot and no change before it; one whose
 * socket has no room gets nothing until it has, then a snapshot of its
 * own (erl_send_repair), so one slow master never holds the others. */
#include "erl/erl_send.h"
#include "erl/erl_link.h"
#include "core/history.h"
#include "lib/log.h"
#include "core/outbound.h"
#include "obs/stats.h"

#include <stdatomic.h>
#include <string.h>

static ei_cnode *cnode;
static struct handoff *outbox;
static const struct options *opts;
static const char *presence_to;
static const char *inbox_to;
static int left_blocked;         /* erl_send_drain stopped at a full window */
static ei_x_buff x;
static struct log_ratelimit send_rl, room_rl;

void erl_send_init(ei_cnode *ec, struct handoff *out, const struct options *o)
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

static void send_ack(struct out_rec *r)
{
    erlang_pid pid;
    int fd = begin_reply((const char *)(r + 1), r->reply_len, &pid);
    if (fd < 0)
        return;
    ei_x_encode_ulong(&x, r->count);
    send_reply(fd, &pid);
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

/* {httpdcnode, Node, hello, #{history_ttl, history, epoch, max_users}}:
 * what a master needs to know of this C-node before its snapshot. */
static void send_hello(struct erl_link *l)
{
    x.index = 0;
    ei_x_encode_version(&x);
    ei_x_encode_tuple_header(&x, 4);
    ei_x_encode_atom(&x, "httpdcnode");
    ei_x_encode_atom(&x, ei_thisnodename(cnode));
    ei_x_encode_atom(&x, "hello");
    ei_x_encode_map_header(&x, 4);
    ei_x_encode_atom(&x, "history_ttl");
    ei_x_encode_ulong(&x, opts->history_ttl);
    ei_x_encode_atom(&x, "history");
    ei_x_encode_ulong(&x, opts->history);
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

int erl_send_blocked(void)
{
    for (int i = 0; i < erl_link_count(); i++) {
        const struct erl_link *l = erl_link_at(i);
        if (l->is_master && !l->broken && l->in_unacked >= ERL_SEND_IN_WINDOW)
            return 1;
    }
    return 0;
}

void erl_send_in_acked(struct erl_link *l, uint32_t n)
{
    l->in_unacked = n >= l->in_unacked ? 0 : l->in_unacked - n;
}

void erl_send_resume(void)
{
    if (left_blocked && !erl_send_blocked())
        erl_send_drain();
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

/* {httpdcnode_in, Node, Uid, Conn, Data} to the uid's master's inbox. */
static void send_in(struct out_rec *r)
{
    const struct out_in *in = (const struct out_in *)(r + 1);
    struct erl_link *l = inbox_to[0] ? inbox_master(in->uid) : NULL;
    if (!l) {
        atomic_fetch_add(&cnode_stats.in_no_master, 1);
    } else {
        x.index = 0;
        ei_x_encode_version(&x);
        ei_x_encode_tuple_header(&x, 5);
        ei_x_encode_atom(&x, "httpdcnode_in");
        ei_x_encode_atom(&x, ei_thisnodename(cnode));
        ei_x_encode_ulong(&x, in->uid);
        ei_x_encode_ulonglong(&x, in->conn);
        ei_x_encode_binary(&x, in + 1, (long)r->count);
        /* A blocking send: the inbox's window bounds what waits there. */
        if (ei_reg_send(cnode, l->fd, (char *)inbox_to, x.buff, x.index) < 0)
            send_failed(l, "client message");
        else
            l->in_unacked++;
    }
    atomic_fetch_sub_explicit(&outbound_in_pending, r->count, memory_order_relaxed);
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
 * {httpdcnode, Node, conn_down, Uid, Conn, Reason} to every linked
 * master's presence process (conn events are no part of the snapshots, so
 * one awaiting a snapshot gets them too); a WebSocket's conn_down also to
 * its uid's inbox, the process that had its messages (after them: the
 * same link, in the outbox's order). */
static void send_conn(struct out_rec *r)
{
    const struct out_conn *c = (const struct out_conn *)(r + 1);
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
    for (int i = 0; presence_to[0] && i < erl_link_count(); i++) {
        struct erl_link *l = erl_link_at(i);
        if (l->is_master && !l->broken)
            send_to_master(l, "conn presence");
    }
    struct erl_link *in = !c->up && inbox_to[0] && strcmp(c->transport, "ws") == 0
                              ? inbox_master(c->uid) : NULL;
    if (in && !erl_link_has_room(in))
        atomic_fetch_add(&cnode_stats.presence_dropped, 1);
    else if (in && ei_reg_send(cnode, in->fd, (char *)inbox_to, x.buff, x.index) < 0)
        send_failed(in, "conn_down");
    atomic_fetch_sub_explicit(&outbound_conn_pending, 1, memory_order_relaxed);
}

static int send_one(void *body, size_t size, void *ctx)
{
    (void)size;
    (void)ctx;
    struct out_rec *r = body;
    switch (r->kind) {
    case OUT_ACK: send_ack(r); break;
    case OUT_STATS: send_stats(r); break;
    case OUT_PRESENCE:
        if (presence_to[0])
            send_presence(r);
        break;
    case OUT_CONN: send_conn(r); break;
    case OUT_IN:
        send_in(r);
        return erl_send_blocked();
    }
    return 0;
}

void erl_send_drain(void)
{
    handoff_clear_wakeup(outbox);
    left_blocked = 0;
    while (!(left_blocked = erl_send_blocked()) &&
           handoff_drain(outbox, 1024, send_one, NULL, NULL) > 0)
        ;
}
