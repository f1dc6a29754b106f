/* SPDX-License-Identifier: Apache-2.0 */
/* Loop side of the outbox: replies and presence for Erlang. */
#include "core/outbound.h"

#include <string.h>

static struct handoff *outbox;
atomic_uint_fast64_t outbound_in_pending;
atomic_uint_fast32_t outbound_conn_pending;

void outbound_init(struct handoff *ring) { outbox = ring; }

/* Room for a record, or NULL (counted) when the C-node thread is behind. */
static struct out_rec *reserve(size_t body)
{
    struct out_rec *r = handoff_reserve(outbox, sizeof *r + body, 0);
    if (!r)
        loop_stats.replies_dropped++;
    return r;
}

void outbound_ack(const char *reply, uint16_t reply_len, uint32_t n)
{
    struct out_rec *r = reserve(reply_len);
    if (!r)
        return;
    *r = (struct out_rec){.kind = OUT_ACK, .reply_len = reply_len, .count = n};
    memcpy(r + 1, reply, reply_len);
    handoff_commit(outbox);
}

void outbound_stats(const char *reply, uint16_t reply_len)
{
    struct stat_pair pairs[STATS_MAX_PAIRS];
    size_t n = stats_collect(pairs);
    struct out_rec *r = reserve(n * sizeof pairs[0] + reply_len);
    if (!r)
        return;
    *r = (struct out_rec){.kind = OUT_STATS, .reply_len = reply_len, .count = (uint32_t)n};
    memcpy(r + 1, pairs, n * sizeof pairs[0]);
    memcpy((char *)(r + 1) + n * sizeof pairs[0], reply, reply_len);
    handoff_commit(outbox);
}

int outbound_presence(enum presence_op op, int to_all, const uint32_t *uids, uint32_t n)
{
    struct out_rec *r = reserve((size_t)n * sizeof *uids);
    if (!r)
        return -1;
    *r = (struct out_rec){.kind = OUT_PRESENCE, .op = (uint8_t)op, .to_all = (uint16_t)to_all,
                          .count = n};
    memcpy(r + 1, uids, (size_t)n * sizeof *uids);
    handoff_commit(outbox);
    return 0;
}

int outbound_in(uint32_t uid, uint64_t conn, const void *data, uint32_t len, int binary)
{
    struct out_rec *r = handoff_reserve(outbox, sizeof *r + sizeof(struct out_in) + len, 0);
    if (!r)
        return -1;
    *r = (struct out_rec){.kind = OUT_IN, .count = len};
    struct out_in *in = (struct out_in *)(r + 1);
    *in = (struct out_in){.conn = conn, .uid = uid, .binary = binary != 0};
    memcpy(in + 1, data, len);
    atomic_fetch_add_explicit(&outbound_in_pending, outbound_in_cost(len), memory_order_relaxed);
    handoff_commit(outbox);
    return 0;
}

int outbound_in_topic(enum in_what what, uint32_t uid, uint64_t conn, const char *topic,
                      uint8_t topic_len, const char *since, uint8_t since_len)
{
    uint32_t len = (uint32_t)topic_len + since_len;
    struct out_rec *r = handoff_reserve(outbox, sizeof *r + sizeof(struct out_in) + len, 0);
    if (!r)
        return -1;
    *r = (struct out_rec){.kind = OUT_IN, .count = len};
    struct out_in *in = (struct out_in *)(r + 1);
    *in = (struct out_in){.conn = conn, .uid = uid, .what = (uint8_t)what, .topic_len = topic_len};
    memcpy(in + 1, topic, topic_len);
    if (since_len)                     /* none: since may be NULL */
        memcpy((char *)(in + 1) + topic_len, since, since_len);
    atomic_fetch_add_explicit(&outbound_in_pending, outbound_in_cost(len), memory_order_relaxed);
    handoff_commit(outbox);
    return 0;
}

int outbound_topics(enum topic_op op, int to_all, const void *bytes, uint32_t len, uint32_t n)
{
    struct out_rec *r = reserve(len);
    if (!r)
        return -1;
    *r = (struct out_rec){.kind = OUT_TOPICS, .op = (uint8_t)op, .to_all = (uint16_t)to_all,
                          .count = n};
    memcpy(r + 1, bytes, len);
    handoff_commit(outbox);
    return 0;
}

int outbound_conn(const struct out_conn *c)
{
    struct out_rec *r = NULL;
    if (atomic_load_explicit(&outbound_conn_pending, memory_order_relaxed) < OUTBOUND_CONN_MAX)
        r = handoff_reserve(outbox, sizeof *r + sizeof *c, 0);
    if (!r) {
        loop_stats.conn_events_dropped++;
        return -1;
    }
    *r = (struct out_rec){.kind = OUT_CONN, .count = 1};
    memcpy(r + 1, c, sizeof *c);
    atomic_fetch_add_explicit(&outbound_conn_pending, 1, memory_order_relaxed);
    handoff_commit(outbox);
    return 0;
}
