/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the Erlang term decoder (src/erl/erl_term.c), driven as
 * src/erl/erl_cnode.c's handle_message drives it: version byte, erl_term_parse, then
 * the copies into a record of exactly cmd_size() bytes. Each input is tried
 * under the server's default limits and under small ones, so that the
 * too-big paths are reachable with small inputs. */
#include <ei.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/cmd.h"
#include "guarded.h"
#include "erl/erl_term.h"
#include "lib/topic_name.h"
#include "lib/utf8.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Set as the server sets them (erl_term_limits_init): the defaults for the
 * 32 MiB hand-off (16 MiB records), and a small set whose too-big paths
 * are easy to reach. */
static struct term_limits limit_sets[2];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    ei_init();
    erl_term_limits_init(&limit_sets[0], 1114112, 65536, (16u << 20) - 8);
    erl_term_limits_init(&limit_sets[1], 1000, 64, 2200);
    return 0;
}

/* What an accepted view promises the loop thread. */
static void check_view(const struct term_view *v, const struct term_limits *lim)
{
    if (v->kind < CMD_UNICAST || v->kind > CMD_JOIN_REFUSED)
        abort();
    /* a handler's answer to a join carries an id or a reason, not a
     * message: bounded by their own sizes */
    uint32_t max_payload = v->kind == CMD_JOIN_ALLOWED   ? TERM_MAX_SINCE
                           : v->kind == CMD_JOIN_REFUSED ? TOPIC_NAME_MAX
                           : v->kind == CMD_GAP          ? v->gap_ntopics * (1 + TOPIC_NAME_MAX)
                                                         : lim->max_message;
    /* a topic's nuids are the words of its name (the record's size, which
     * erl_term_parse checks, bounds them with the rest) */
    uint32_t max_nuids = cmd_is_topic((uint8_t)v->kind) ? cmd_topic_words(TOPIC_NAME_MAX)
                                                          : lim->max_uids;
    if (v->payload_len > max_payload || v->nuids > max_nuids)
        abort();
    if ((v->kind == CMD_UNICAST || v->kind == CMD_KICK) &&
        (v->uid < 1 || v->uid > lim->max_users))
        abort();
    if (v->has_reply && (v->reply_len <= 0 || v->reply_len > UINT16_MAX))
        abort();
    if (v->binary > 1)
        abort();
}

/* The record handle_message fills, on the heap so ASan bounds it exactly. */
static void copy_like_handle_message(const char *buf, const struct term_view *v,
                                     const struct term_limits *lim)
{
    uint32_t reply_len = v->has_reply ? (uint32_t)v->reply_len : 0;
    struct cmd *c = malloc(cmd_size(v->nuids, v->payload_len, reply_len));
    if (!c)
        abort();
    c->reply_len = (uint16_t)reply_len;
    c->nuids = v->nuids;
    c->payload_len = v->payload_len;
    if (cmd_is_topic((uint8_t)v->kind)) {
        /* the topic's name where the uids go, a name as topic_name.h says */
        c->uid = v->topic_len;
        erl_term_copy_topic(buf, v, cmd_topic(c));
        if (!topic_name_ok(cmd_topic(c), v->topic_len))
            abort();
    } else if (v->nuids) {
        erl_term_copy_uids(buf, v, cmd_uids(c));
        for (uint32_t i = 0; i < v->nuids; i++)
            if (cmd_uids(c)[i] < 1 || cmd_uids(c)[i] > lim->max_users)
                abort();
    }
    if (v->kind == CMD_GAP) {
        /* a gap's topics: each its length in a byte, then a name */
        erl_term_copy_gap_topics(buf, v, cmd_payload(c));
        uint32_t at = 0, k = 0;
        for (; at < v->payload_len; k++) {
            uint8_t n = (uint8_t)cmd_payload(c)[at];
            if (at + 1 + n > v->payload_len || !topic_name_ok(cmd_payload(c) + at + 1, n))
                abort();
            at += 1 + (uint32_t)n;
        }
        if (k != v->gap_ntopics)
            abort();
    } else if (v->payload_len) {
        erl_term_copy_payload(buf, v, cmd_payload(c));
    }
    /* text goes out as text: it must be UTF-8 (a join's resume id is only
     * parsed, never written out: history_gap_json prints what it read) */
    if (!v->binary && v->kind != CMD_JOIN_ALLOWED && !utf8_valid(cmd_payload(c), v->payload_len))
        abort();
    if (reply_len)
        memcpy(cmd_reply(c), buf + v->reply_index, reply_len);
    free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = guarded_copy(data, size);
    for (size_t i = 0; i < sizeof limit_sets / sizeof limit_sets[0]; i++) {
        int index = 0, version;
        struct term_view v;
        if (size < 1 || ei_decode_version(buf, &index, &version) != 0)
            return 0;
        if (erl_term_parse(buf, index, (int)size, &limit_sets[i], &v) != TERM_OK)
            continue;
        check_view(&v, &limit_sets[i]);
        copy_like_handle_message(buf, &v, &limit_sets[i]);
    }
    return 0;
}
