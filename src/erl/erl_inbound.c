/* SPDX-License-Identifier: Apache-2.0 */
/* C-node side of the inbox: Erlang messages become command records. */
#include "erl/erl_inbound.h"
#include "lib/clock.h"
#include "core/cmd.h"
#include "erl/erl_link.h"
#include "erl/erl_send.h"
#include "erl/erl_seq.h"
#include "lib/log.h"
#include "obs/stats.h"
#include "erl/erl_term.h"

#include <stdatomic.h>
#include <stdlib.h>
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

/* The message's view into a record of the inbox, with its mark (cmd.h:
 * a numbered one's slot and number, else 0); its kind, 0 when not (we are
 * stopping). */
static int commit(const char *buf, const struct term_view *v, uint64_t mark)
{
    uint32_t reply_len = v->has_reply ? (uint32_t)v->reply_len : 0;
    struct cmd *c = reserve(cmd_size(v->nuids, v->payload_len, reply_len));
    if (!c)
        return 0;
    *c = (struct cmd){
        .kind = (uint8_t)v->kind,
        .binary = v->binary,
        .reply_len = (uint16_t)reply_len,
        .uid = v->uid,
        .nuids = v->nuids,
        .payload_len = v->payload_len,
        .received_ns = clock_now_ns(),     /* for httpdcnode_delivery_seconds */
        .conn = mark ? mark : v->conn,     /* a numbered message is never to a conn */
    };
    if (cmd_is_topic((uint8_t)v->kind)) {
        c->uid = v->topic_len;             /* the topic where the uids go */
        erl_term_copy_topic(buf, v, cmd_topic(c));
    } else if (v->nuids) {
        erl_term_copy_uids(buf, v, cmd_uids(c));
    }
    if (v->kind == CMD_GAP)
        erl_term_copy_gap_topics(buf, v, cmd_payload(c));
    else if (v->payload_len)
        erl_term_copy_payload(buf, v, cmd_payload(c));
    if (reply_len)
        memcpy(cmd_reply(c), buf + v->reply_index, reply_len);
    handoff_commit(inbox);
    return v->kind;
}

static enum term_error parse(const char *buf, int len, struct term_view *v)
{
    int index = 0, version;
    if (len < 1 || ei_decode_version(buf, &index, &version) != 0)
        return TERM_BAD_SHAPE;
    return erl_term_parse(buf, index, len, &limits, v);
}

/* The atom at buf[index] into out, as UTF-8; 0 when it is not empty and
 * fits (a Latin-1 atom may grow past MAXATOMLEN bytes as UTF-8). */
static int atom_at(const char *buf, int index, char out[MAXATOMLEN])
{
    if (ei_decode_atom_as(buf, &index, out, MAXATOMLEN, ERLANG_UTF8, NULL, NULL) < 0)
        out[0] = '\0';
    return out[0] ? 0 : -1;
}

/* The loop keeps where o's stream stands with the history: it is told
 * o's master and run before the first message of it (erl_seq.h). 0 when
 * we are stopping. */
static int tell_run(struct erl_seq_origin *o)
{
    struct cmd_seq_run run;
    if (!erl_seq_run_untold(o, &run))
        return 1;
    struct cmd *c = reserve(cmd_size(0, sizeof run, 0));
    if (!c)
        return 0;
    *c = (struct cmd){.kind = CMD_SEQ_RUN, .uid = erl_seq_slot(o), .payload_len = sizeof run};
    memcpy(cmd_payload(c), &run, sizeof run);
    handoff_commit(inbox);
    return 1;
}

/* A numbered message of o that erl_seq said to apply, to the loop. */
static int commit_numbered(struct erl_seq_origin *o, const char *buf, const struct term_view *v)
{
    int kind = tell_run(o) ? commit(buf, v, cmd_mark(erl_seq_slot(o), v->seq_last)) : 0;
    if (kind)
        erl_seq_committed(o, v->seq_last, handoff_committed(inbox));
    return kind;
}

/* Applies o's held messages whose turn came, in order. */
static void apply_due(struct erl_seq_origin *o)
{
    struct erl_seq_held *h;
    struct term_view v;
    while ((h = erl_seq_take_due(o)) != NULL) {
        /* it was parsed when it came */
        if (parse(h->term, (int)h->len, &v) == TERM_OK)
            commit_numbered(o, h->term, &v);
        free(h);
    }
}

/* A gap for the uids or the topic of the message v (a gap itself: its
 * uids and topics); a CMD_GAP_ALL when v is none: whose the messages
 * were nobody knows. */
static int gap_for(const char *buf, const struct term_view *v)
{
    if (v && v->kind == CMD_GAP)
        return commit(buf, v, 0);
    int topic = v && v->kind == CMD_TOPIC;
    uint32_t n = !v || topic ? 0 : v->kind == CMD_UNICAST ? 1 : v->nuids;
    uint32_t names = topic ? 1 + v->topic_len : 0;
    uint8_t kind = v ? CMD_GAP : CMD_GAP_ALL;
    struct cmd *c = reserve(cmd_size(n, names, 0));
    if (!c)
        return 0;
    *c = (struct cmd){.kind = kind, .nuids = n, .payload_len = names,
                      .received_ns = clock_now_ns()};
    if (topic) {
        cmd_payload(c)[0] = (char)v->topic_len;
        erl_term_copy_topic(buf, v, cmd_payload(c) + 1);
    } else if (v && v->kind == CMD_UNICAST) {
        cmd_uids(c)[0] = v->uid;
    } else if (n) {
        erl_term_copy_uids(buf, v, cmd_uids(c));
    }
    handoff_commit(inbox);
    return kind;
}

/* A numbered message: applied once, in its master's order (erl_seq.h). */
static int numbered(const char *buf, int len, const struct term_view *v, const char *from)
{
    char master[MAXATOMLEN];
    struct erl_seq_origin *o;
    if (atom_at(buf, v->seq_master_index, master) != 0) {
        count_bad_term(TERM_BAD_SHAPE);
        return 0;
    }
    switch (erl_seq_admit(master, v->seq_inc, v->seq, v->seq_last, from, buf, (uint32_t)len, &o,
                          clock_now_ms())) {
    case ERL_SEQ_UNTRACKED:
        return commit(buf, v, 0);
    case ERL_SEQ_DUPLICATE:
        if (v->has_reply)               /* no connection written by this copy */
            erl_send_count_reply(buf + v->reply_index, v->reply_len, 0);
        return 0;
    case ERL_SEQ_STALE:
        return gap_for(buf, v);
    case ERL_SEQ_HELD:
    case ERL_SEQ_DROPPED:
        return 0;
    case ERL_SEQ_APPLY:
        break;
    }
    int kind = commit_numbered(o, buf, v);
    if (kind)
        apply_due(o);
    return kind;
}

static void base(const char *buf, const struct term_view *v, const char *from)
{
    char master[MAXATOMLEN], ack_to[MAXATOMLEN];
    if (atom_at(buf, v->seq_master_index, master) != 0 ||
        atom_at(buf, v->seq_ack_to_index, ack_to) != 0) {
        count_bad_term(TERM_BAD_SHAPE);
        return;
    }
    struct erl_seq_origin *o = erl_seq_base(master, v->seq_inc, v->seq, ack_to, from,
                                            clock_now_ms());
    if (o && tell_run(o))              /* a new run: the loop knows it from its base */
        apply_due(o);
}

int erl_inbound_message(const char *buf, int len, const char *from, uint32_t *acked)
{
    struct term_view v;
    atomic_fetch_add(&cnode_stats.msgs_in, 1);
    enum term_error e = parse(buf, len, &v);
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
    if (v.kind == CMD_SEQ_BASE) {
        base(buf, &v, from);
        return CMD_SEQ_BASE;
    }
    if (v.numbered)
        return numbered(buf, len, &v, from);
    return commit(buf, &v, 0);    /* erl_cnode.c routes a snapshot asked for to the asker */
}

void erl_inbound_seq_tick(void)
{
    if (!erl_seq_active())
        return;                     /* raw terms only: nothing to do */
    int64_t now = clock_now_ms();
    struct erl_seq_origin *o;
    uint64_t skipped;
    while ((o = erl_seq_hole_expired(now, &skipped)) != NULL) {
        if (skipped)
            gap_for(NULL, NULL);
        apply_due(o);
    }
    erl_seq_ack(now, handoff_consumed(inbox));
}

void erl_inbound_snapshot(void)
{
    struct cmd *c = reserve(cmd_size(0, 0, 0));
    if (!c)
        return;
    *c = (struct cmd){.kind = CMD_SNAPSHOT};
    handoff_commit(inbox);
}
