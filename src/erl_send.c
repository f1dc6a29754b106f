/* Encoding and sending of what the loop queued for Erlang. */
#include "erl_send.h"
#include "erl_link.h"
#include "log.h"
#include "outbound.h"
#include "stats.h"

#include <string.h>

static ei_cnode *cnode;
static struct handoff *outbox;
static const char *master_node;
static const char *presence_to;
static ei_x_buff x;
static struct log_ratelimit send_rl;

void erl_send_init(ei_cnode *ec, struct handoff *out, const char *master,
                   const char *presence_name)
{
    cnode = ec;
    outbox = out;
    master_node = master;
    presence_to = presence_name;
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

/* {httpdcnode, Node, up | down | snapshot, Uid | [Uid]} to the master. */
static void send_presence(struct out_rec *r)
{
    static const char *const ops[] = {
        [PRESENCE_UP] = "up", [PRESENCE_DOWN] = "down", [PRESENCE_SNAPSHOT] = "snapshot"};
    struct erl_link *l = master_node[0] ? erl_link_find(master_node) : NULL;
    if (!l || l->broken)
        return;                    /* the snapshot on reconnect repairs the view */
    const uint32_t *uids = (const uint32_t *)(r + 1);
    x.index = 0;
    ei_x_encode_version(&x);
    ei_x_encode_tuple_header(&x, 4);
    ei_x_encode_atom(&x, "httpdcnode");
    ei_x_encode_atom(&x, ei_thisnodename(cnode));
    ei_x_encode_atom(&x, ops[r->op]);
    if (r->count == 1 && r->op != PRESENCE_SNAPSHOT) {
        ei_x_encode_ulong(&x, uids[0]);
    } else {
        if (r->count)
            ei_x_encode_list_header(&x, r->count);
        for (uint32_t i = 0; i < r->count; i++)
            ei_x_encode_ulong(&x, uids[i]);
        ei_x_encode_empty_list(&x);
    }
    if (ei_reg_send(cnode, l->fd, (char *)presence_to, x.buff, x.index) < 0)
        send_failed(l, "presence");
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
    }
    return 0;
}

void erl_send_drain(void)
{
    handoff_clear_wakeup(outbox);
    while (handoff_drain(outbox, 1024, send_one, NULL, NULL) > 0)
        ;
}
