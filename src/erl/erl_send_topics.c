/* SPDX-License-Identifier: Apache-2.0 */
/* Topic terms for Erlang: see erl_send_topics.h. */
#include "erl/erl_send_topics.h"

#include <string.h>

static void head(ei_x_buff *x, const char *node, const char *what, int arity)
{
    x->index = 0;
    ei_x_encode_version(x);
    ei_x_encode_tuple_header(x, arity);
    ei_x_encode_atom(x, "httpdcnode");
    ei_x_encode_atom(x, node);
    ei_x_encode_atom(x, what);
}

int erl_send_topics_snapshot_part(uint8_t op)
{
    return op == TOPICS_SNAPSHOT || op == TOPICS_SNAPSHOT_MORE || op == TOPIC_MEMBERS ||
           op == TOPIC_MEMBERS_MORE;
}

void erl_send_topics_encode(ei_x_buff *x, const char *node, const struct out_rec *r,
                            size_t size)
{
    static const char *const what[] = {
        [TOPICS_CHANGED] = "topics", [TOPICS_GONE] = "topics_gone",
        [TOPICS_SNAPSHOT] = "topic_snapshot", [TOPICS_SNAPSHOT_MORE] = "topic_snapshot_more",
        [TOPIC_MEMBERS] = "topic_members", [TOPIC_MEMBERS_MORE] = "topic_members_more",
        [TOPIC_JOINED] = "topic_joins", [TOPIC_LEFT] = "topic_leaves"};
    const uint8_t *p = (const uint8_t *)(r + 1), *end = (const uint8_t *)r + size;
    int members = r->op >= TOPIC_MEMBERS;
    head(x, node, what[r->op], 4);
    if (r->count)
        ei_x_encode_list_header(x, r->count);
    for (uint32_t i = 0; i < r->count && p < end; i++) {
        if (members) {                    /* u8 len, name, u32 uid, u64 conn */
            uint32_t uid;
            uint64_t conn;
            uint8_t len = p[0];
            memcpy(&uid, p + 1 + len, 4);
            memcpy(&conn, p + 5 + len, 8);
            ei_x_encode_tuple_header(x, 3);
            ei_x_encode_binary(x, p + 1, len);
            ei_x_encode_ulong(x, uid);
            ei_x_encode_ulonglong(x, conn);
            p += 13u + len;
        } else {                          /* u32 streams, u8 len, name */
            uint32_t n;
            memcpy(&n, p, 4);
            uint8_t len = p[4];
            if (r->op == TOPICS_GONE) {
                ei_x_encode_binary(x, p + 5, len);
            } else {
                ei_x_encode_tuple_header(x, 2);
                ei_x_encode_binary(x, p + 5, len);
                ei_x_encode_ulong(x, n);
            }
            p += 5u + len;
        }
    }
    ei_x_encode_empty_list(x);
}

void erl_send_topics_encode_in(ei_x_buff *x, const char *node, const struct out_rec *r)
{
    const struct out_in *in = (const struct out_in *)(r + 1);
    const char *topic = (const char *)(in + 1);
    int join = in->what == IN_JOIN;
    x->index = 0;
    ei_x_encode_version(x);
    ei_x_encode_tuple_header(x, join ? 6 : 5);
    ei_x_encode_atom(x, join ? "httpdcnode_join" : "httpdcnode_leave");
    ei_x_encode_atom(x, node);
    ei_x_encode_ulong(x, in->uid);
    ei_x_encode_ulonglong(x, in->conn);
    ei_x_encode_binary(x, topic, in->topic_len);
    if (join)
        ei_x_encode_binary(x, topic + in->topic_len, (long)(r->count - in->topic_len));
}
