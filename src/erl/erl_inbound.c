/* C-node side of the inbox: Erlang messages become command records. */
#include "erl/erl_inbound.h"
#include "lib/clock.h"
#include "core/cmd.h"
#include "erl/erl_link.h"
#include "lib/log.h"
#include "obs/stats.h"
#include "erl/erl_term.h"

#include <stdatomic.h>
#include <string.h>

/* While the loop is behind, the links are ticked this often. */
#define RESERVE_TMO_MS 1000

static struct handoff *inbox;
static const char *inbox_name;     /* --inbox */
static struct term_limits limits;
static struct log_ratelimit bad_term_rl;

void erl_inbound_init(struct handoff *ring, uint32_t max_users, uint32_t max_message,
                      const char *inbox_process)
{
    inbox = ring;
    inbox_name = inbox_process;
    erl_term_limits_init(&limits, max_users, max_message, handoff_max_record(ring));
}

static void count_bad_term(enum term_error e)
{
    switch (e) {
    case TERM_BAD_UID: atomic_fetch_add(&cnode_stats.bad_uid, 1); break;
    case TERM_TOO_BIG: atomic_fetch_add(&cnode_stats.too_big, 1); break;
    case TERM_EMPTY: atomic_fetch_add(&cnode_stats.empty, 1); break;
    case TERM_NOT_UTF8: atomic_fetch_add(&cnode_stats.not_utf8, 1); break;
    case TERM_BAD_TOPIC: atomic_fetch_add(&cnode_stats.bad_topic, 1); break;
    default: atomic_fetch_add(&cnode_stats.bad_terms, 1); break;
    }
    log_limited(&bad_term_rl, LOG_INFO, "dropped a message: %s", erl_term_error_str(e));
}

/* Room in the inbox; while the loop is behind, keep the links ticking so
 * that no peer drops us for silence. NULL once the inbox is closed (we
 * are stopping), or (a bug: erl_term_parse bounds every record) when size can
 * never fit, which must not be waited for: the ring would refuse it for
 * ever. */
static struct cmd *reserve(size_t size)
{
    void *rec;
    if (size > handoff_max_record(inbox)) {
        atomic_fetch_add(&cnode_stats.too_big, 1);
        log_limited(&bad_term_rl, LOG_ERROR, "dropped a message: its record (%zu bytes) "
                    "exceeds the hand-off's largest (%zu)", size, handoff_max_record(inbox));
        return NULL;
    }
    while (!(rec = handoff_reserve(inbox, size, RESERVE_TMO_MS))) {
        if (handoff_is_closed(inbox))
            return NULL;
        atomic_fetch_add(&cnode_stats.backpressure, 1);
        erl_link_tick_all();
    }
    return rec;
}

int erl_inbound_message(const char *buf, int len, uint32_t *acked)
{
    int index = 0, version;
    struct term_view v;
    enum term_error e;

    atomic_fetch_add(&cnode_stats.msgs_in, 1);
    if (len < 1 || ei_decode_version(buf, &index, &version) != 0)
        e = TERM_BAD_SHAPE;
    else
        e = erl_term_parse(buf, index, len, &limits, &v);
    if (e != TERM_OK) {
        count_bad_term(e);
        return 0;
    }
    if (v.kind == CMD_IN_ACK) {
        *acked = v.uid;             /* the C-node thread's: erl_send.c */
        return CMD_IN_ACK;
    }
    if (v.kind == CMD_IN_RESET)     /* another name's inbox: not ours to reset */
        return inbox_name[0] && erl_term_atom_is(buf, v.payload_index, inbox_name)
                   ? CMD_IN_RESET : 0;
    uint32_t reply_len = v.has_reply ? (uint32_t)v.reply_len : 0;
    struct cmd *c = reserve(cmd_size(v.nuids, v.payload_len, reply_len));
    if (!c)
        return 0;
    *c = (struct cmd){
        .kind = (uint8_t)v.kind,
        .binary = v.binary,
        .reply_len = (uint16_t)reply_len,
        .uid = v.uid,
        .nuids = v.nuids,
        .payload_len = v.payload_len,
        .received_ns = clock_now_ns(),     /* for httpdcnode_delivery_seconds */
        .conn = v.conn,
    };
    if (cmd_is_topic((uint8_t)v.kind)) {
        c->uid = v.topic_len;              /* the topic where the uids go */
        erl_term_copy_topic(buf, &v, cmd_topic(c));
    } else if (v.nuids) {
        erl_term_copy_uids(buf, &v, cmd_uids(c));
    }
    if (v.payload_len)
        erl_term_copy_payload(buf, &v, cmd_payload(c));
    if (reply_len)
        memcpy(cmd_reply(c), buf + v.reply_index, reply_len);
    handoff_commit(inbox);
    return v.kind;    /* erl_cnode.c routes a snapshot asked for to the asker */
}

void erl_inbound_snapshot(void)
{
    struct cmd *c = reserve(cmd_size(0, 0, 0));
    if (!c)
        return;
    *c = (struct cmd){.kind = CMD_SNAPSHOT};
    handoff_commit(inbox);
}
