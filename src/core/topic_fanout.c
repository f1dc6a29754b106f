/* SPDX-License-Identifier: Apache-2.0 */
/* Publishing to a topic: see topic_fanout.h. */
#include "core/topic_fanout.h"
#include "core/batch.h"
#include "core/framing.h"
#include "core/history.h"
#include "core/msg_id.h"
#include "core/stream.h"
#include "core/topic.h"
#include "lib/log.h"
#include "obs/stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The members of the topic being published to, copied: a write may end a
 * stream (a slow one, past --max-backlog) and so change the topic's
 * arrays, while the copy's records stay valid until the reaper runs, after
 * this loop callback. Grown to the largest topic, kept. */
static struct stream **copy;
static uint32_t copy_cap;

/* One message as each framing takes it, made on first need per publish
 * (and again after a flush, which frees the bodies). */
struct framed_all {
    struct batch_framed f[FRAMING_KINDS];
    uint8_t made[FRAMING_KINDS];
};

/* "id: NAME@EPOCH:SEQ\n" into out: its length. */
static size_t id_line(char *out, const struct msg_id *id)
{
    memcpy(out, "id: ", 4);
    size_t n = 4 + msg_id_text(out + 4, id);
    out[n++] = '\n';
    return n;
}

/* The message framed for kind: 0 when out of memory (logged). A
 * --ws-deflate WebSocket takes it as a plain frame (RSV1 clear), which
 * permessage-deflate allows message by message. */
static int frame_for(uint8_t kind, struct framed_all *a, const char *data, uint32_t len,
                     int binary, const struct msg_id *id)
{
    struct batch_framed *f = &a->f[kind];
    char line[4 + MSG_ID_TEXT_MAX + 1];
    int meta = framing_ws_meta(kind);
    f->prefix.len = 0;
    f->body = data;
    f->body_len = len;
    if (kind == FRAMING_CHUNKED) {
        framing_prefix(kind, len, 0, &f->prefix);
    } else if (framing_is_websocket(kind) && !meta) {
        framing_prefix_utf8(kind, len, 0, !binary, &f->prefix);
    } else if (kind == FRAMING_SSE || meta) {
        size_t k = id_line(line, id);
        if (meta)
            line[k++] = '\n';
        size_t n = k + (kind == FRAMING_SSE ? framing_sse_body_len(data, len, binary) : len);
        char *body = batch_body(n);
        if (!body)
            return 0;
        memcpy(body, line, k);
        if (kind == FRAMING_SSE)
            framing_sse_body(data, len, binary, body + k);
        else
            memcpy(body + k, data, len);
        f->body = body;
        f->body_len = (uint32_t)n;
        if (meta)
            f->prefix.len = (uint8_t)framing_ws_header(f->prefix.bytes, binary ? 2 : 1, n);
    }
    a->made[kind] = 1;
    return 1;
}

/* Rooms made this many deliveries at a time: a topic larger than the
 * batch flushes it on the way. */
#define ROOM_STEP 4096u

/* t's members, copied (see copy above): how many, 0 when out of memory (logged). */
static uint32_t copy_members(uint32_t t, const char *doing)
{
    uint32_t members = topic_members(t);
    if (members > copy_cap) {
        struct stream **grown = realloc(copy, members * sizeof *copy);
        if (!grown) {
            static struct log_ratelimit rl;
            log_limited(&rl, LOG_ERROR, "out of memory %s a topic of %u streams: its streams "
                        "are not told now (a client resuming it is)", doing, members);
            return 0;
        }
        copy = grown;
        copy_cap = members;
    }
    if (members)                       /* none: a lingering topic's block may be NULL */
        memcpy(copy, topic_member_array(t), members * sizeof *copy);
    return members;
}

uint32_t topic_publish(uint32_t t, const char *data, uint32_t len, int binary)
{
    if (!t) {
        loop_stats.topic_no_subscribers++;
        return 0;
    }
    uint32_t slot = topic_slot(t);
    uint8_t tlen;
    const char *tname = topic_name(t, &tlen);
    struct msg_id id = {.seq = history_append(slot, data, len, binary),
                        .epoch = history_slot_epoch(slot), .topic = tname, .topic_len = tlen};
    loop_stats.topic_published++;
    uint32_t members = copy_members(t, "publishing to");
    struct framed_all all = {.made = {0}};
    uint32_t n = 0;
    for (uint32_t i = 0; i < members; i++) {
        if (i % ROOM_STEP == 0 && batch_room(members - i < ROOM_STEP ? members - i : ROOM_STEP))
            memset(all.made, 0, sizeof all.made);   /* the bodies went with the flush */
        struct stream *s = copy[i];
        if (s->state != STREAM_LIVE && s->state != STREAM_WELCOMING)
            continue;
        uint8_t k = s->framing;
        if (!all.made[k] && !frame_for(k, &all, data, len, binary, &id))
            continue;
        n += (uint32_t)batch_add_framed(s, &all.f[k], data, len, binary, &id);
    }
    return n;
}

void topic_gap(uint32_t t)
{
    uint32_t slot = topic_slot(t), seq = history_skip(slot);
    char asked[24];
    loop_stats.seq_gap_topics++;
    snprintf(asked, sizeof asked, "%08x:%u", history_slot_epoch(slot), seq - 1);
    uint32_t members = copy_members(t, "telling a gap to");
    for (uint32_t i = 0; i < members; i++) {
        struct stream *s = copy[i];
        uint32_t sub = topic_sub_of(s, t);      /* one the last ended has none */
        if (sub && s->state == STREAM_LIVE && framing_tells_gaps(s->framing) &&
            !stream_replaying(s))
            stream_replay_topic(s, sub, asked);
    }
}

int topic_gap_next(const char *names, uint32_t len, uint32_t *at, uint32_t *t)
{
    if (*at >= len)
        return 0;
    uint8_t n = (uint8_t)names[*at];
    *t = topic_find(names + *at + 1, n);
    *at += 1u + n;
    return 1;
}

void topic_gap_all(void)
{
    for (uint32_t t = topic_next_held(0); t; t = topic_next_held(t))
        topic_gap(t);
}

int topic_tell(struct stream *s, enum topic_event ev, const char *name, size_t len,
               const char *reason, const char *id)
{
    static const char *const events[] = {"joined", "refused", "left"};
    int ws = framing_ws_meta(s->framing);
    if (s->framing != FRAMING_SSE && !ws)
        return 0;
    char buf[256];
    size_t n = 0;
    if (ws)
        n = 10;                              /* room for the frame header */
    n += (size_t)snprintf(buf + n, sizeof buf - n, ws ? "event: %s\n\n" : "event: %s\ndata: ",
                          events[ev]);
    n += (size_t)snprintf(buf + n, sizeof buf - n, "{\"topic\":\"%.*s\"", (int)len, name);
    if (reason)
        n += (size_t)snprintf(buf + n, sizeof buf - n, ",\"reason\":\"%s\"", reason);
    if (id)
        n += (size_t)snprintf(buf + n, sizeof buf - n, ",\"id\":\"%s\"", id);
    n += (size_t)snprintf(buf + n, sizeof buf - n, ws ? "}" : "}\n\n");
    const char *start = buf;
    if (ws) {
        char head[10];
        size_t h = framing_ws_header(head, 1, n - 10);
        start = buf + 10 - h;
        memcpy((char *)start, head, h);
        n -= 10 - h;
    }
    struct iovec iov = {(void *)start, n};
    return stream_send(s, &iov, 1, n);
}

int topic_tell_joined(struct stream *s, uint32_t t)
{
    uint8_t len;
    const char *name = topic_name(t, &len);
    char id[24];
    snprintf(id, sizeof id, "%08x:%u", history_slot_epoch(topic_slot(t)),
             history_last_seq(topic_slot(t)));
    return topic_tell(s, TOPIC_EV_JOINED, name, len, NULL, id);
}
