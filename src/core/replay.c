/* SPDX-License-Identifier: Apache-2.0 */
/* Replays: see replay.h. */
#include "core/replay.h"
#include "core/backlog.h"
#include "core/framing.h"
#include "core/history.h"
#include "core/msg_id.h"
#include "core/topic.h"
#include "core/transport_ops.h"
#include "lib/log.h"
#include "obs/stats.h"

#include <stdio.h>
#include <string.h>

#define NO_MAX ((size_t)-1)        /* replay_room: see replay.h */

size_t replay_id_text(char *out, size_t size, uint32_t seq)
{
    return (size_t)snprintf(out, size, "%s:%u", history_epoch_hex(), seq);
}

char *replay_room(struct backlog **out, void *owner, size_t n)
{
    return backlog_room(out, owner, n, NO_MAX);
}

int replay_put(struct backlog **out, void *owner, const char *p, size_t n)
{
    char *at = replay_room(out, owner, n);
    if (!at)
        return -1;
    memcpy(at, p, n);
    backlog_commit(*out, n);
    return 0;
}

/* The history slot of topic t (0: the uid's) and the id of its message seq. */
static uint32_t slot_of(uint32_t t, uint32_t uid) { return t ? topic_slot(t) : uid; }

static struct msg_id id_of(uint32_t t, uint32_t uid, uint32_t seq)
{
    struct msg_id id = {.seq = seq, .epoch = history_slot_epoch(slot_of(t, uid))};
    if (t)
        id.topic = topic_name(t, &id.topic_len);
    return id;
}

/* A gap told the transport's way: the client missed what follows the id
 * asked in topic t (0: the uid); first is the oldest kept it gets (0:
 * none), next the id to come back with if it leaves now. */
static int put_gap(struct backlog **out, void *owner, const struct transport_replay *t,
                   struct replay *r, uint32_t topic, uint32_t uid, const char *asked,
                   uint32_t first, uint32_t next)
{
    char json[HISTORY_GAP_JSON_MAX + TOPIC_NAME_MAX + 16], gap[HISTORY_GAP_JSON_MAX];
    size_t n = 0;
    struct msg_id id = id_of(topic, uid, next);
    size_t k = history_gap_json(gap, slot_of(topic, uid), asked, first, next);
    if (topic) {                             /* {"topic":"NAME", then the rest */
        n = (size_t)snprintf(json, sizeof json, "{\"topic\":\"%.*s\",", (int)id.topic_len,
                             id.topic);
        memcpy(json + n, gap + 1, k - 1);
        n += k - 1;
    } else {
        memcpy(json, gap, k);
        n = k;
    }
    loop_stats.replay_gaps++;
    int w = t->gap ? t->gap(out, owner, r, json, n, &id) : 0;
    if (w > 0)
        r->given++;
    return w < 0 ? -1 : 0;
}

static const struct transport_replay *replay_of(uint8_t framing)
{
    const struct transport_ops *t = framing < FRAMING_KINDS ? transport_ops[framing] : NULL;
    return t ? t->replay : NULL;
}

/* Where topic t's client stands (asked: the id it saw there last): its
 * subscription's next id, and *gap when it missed more than is kept (the
 * oldest kept id it gets in *first, 0: none). */
static void resume_topic(uint32_t t, uint32_t sub, const char *asked, int *gap, uint32_t *first)
{
    uint32_t epoch = 0, seq = 0;
    if (history_parse_id(asked, &epoch, &seq) != 0)
        epoch = ~history_slot_epoch(topic_slot(t));     /* unreadable: a gap */
    struct history_cursor c;
    *gap = history_resume(topic_slot(t), 1, epoch, seq, &c, first);
    topic_sub_set_next(sub, c.seq);
}

/* Whether any of owner's topics has a message past its next id. */
static uint32_t topic_behind(void *owner)
{
    for (uint32_t i = topic_stream_first(owner); i; i = topic_stream_next(i)) {
        uint32_t t = topic_sub_at(i)->topic;
        if (topic_sub_next(i) <= history_last_seq(topic_slot(t)))
            return t;
    }
    return 0;
}

/* A replay of owner starts: each of its topics from now (caught up), and
 * what it joins while the replay goes on too (topic_replay_mark). -1 when
 * out of memory. */
static int topics_from_now(void *owner)
{
    for (uint32_t i = topic_stream_first(owner); i; i = topic_stream_next(i)) {
        uint32_t t = topic_sub_at(i)->topic;
        if (topic_sub_set_next(i, history_last_seq(topic_slot(t)) + 1) != 0)
            return -1;
    }
    return topic_replay_mark(owner, 1);
}

enum replay_result replay_open(struct backlog **out, void *owner, uint8_t framing, uint32_t uid,
                               const char *asked, uint32_t budget)
{
    const struct transport_replay *t = replay_of(framing);
    if (!t)
        return REPLAY_NONE;
    uint32_t epoch = 0, seq = 0, first = 0;
    if (asked && history_parse_id(asked, &epoch, &seq) != 0)
        epoch = ~history_epoch();            /* unreadable: not ours, a gap */
    struct replay r = {.budget = budget, .active = 1};
    r.gap = (uint8_t)history_resume(uid, asked != NULL, epoch, seq, &r.at, &first);
    r.first = first;
    r.uid_next = r.at.seq;
    /* The topics it opened with: each from the id it named, else from now. */
    uint32_t nreq = 0, ngaps = 0;
    const struct topic_request *req = topic_stream_requests(owner, &nreq);
    struct pending_gap {
        uint32_t topic, first;
        uint8_t index;
    } gaps[256];
    if (topics_from_now(owner) != 0)
        return REPLAY_FAILED;
    for (uint32_t i = 0; req && i < nreq; i++) {
        uint32_t tp = topic_find(req[i].name, req[i].len), sub = topic_sub_of(owner, tp);
        if (!req[i].since_len || !sub)
            continue;                        /* none asked, or the handler decides first */
        int gap;
        uint32_t f;
        resume_topic(tp, sub, req[i].since, &gap, &f);
        if (gap && ngaps < sizeof gaps / sizeof gaps[0])
            gaps[ngaps++] = (struct pending_gap){tp, f, (uint8_t)i};
    }
    if (!r.gap && r.at.seq > history_last_seq(uid) && !ngaps && !topic_behind(owner)) {
        topic_replay_mark(owner, 0);
        return REPLAY_NONE;
    }
    loop_stats.replays++;
    if (t->open && t->open(out, owner) != 0)
        return REPLAY_FAILED;
    if (r.gap && put_gap(out, owner, t, &r, 0, uid, asked, first, r.at.seq - 1) != 0)
        return REPLAY_FAILED;
    for (uint32_t i = 0; i < ngaps; i++) {
        uint32_t sub = topic_sub_of(owner, gaps[i].topic);
        if (put_gap(out, owner, t, &r, gaps[i].topic, uid, req[gaps[i].index].since,
                    gaps[i].first, topic_sub_next(sub) - 1) != 0)
            return REPLAY_FAILED;
    }
    return backlog_start_replay(out, owner, &r) == 0 ? REPLAY_STARTED : REPLAY_FAILED;
}

enum replay_result replay_topic(struct backlog **out, void *owner, uint8_t framing, uint32_t uid,
                                uint32_t sub, const char *asked)
{
    const struct transport_replay *t = replay_of(framing);
    if (!t || t->end)                        /* a long-poll's answer: from now, next poll */
        return REPLAY_NONE;
    uint32_t topic = topic_sub_at(sub)->topic, first;
    struct replay *live = backlog_replay(*out);
    if (!live && topics_from_now(owner) != 0)   /* all it had came live so far */
        return REPLAY_FAILED;
    int gap;
    resume_topic(topic, sub, asked, &gap, &first);
    if (!live && !gap && topic_sub_next(sub) > history_last_seq(topic_slot(topic))) {
        topic_replay_mark(owner, 0);
        return REPLAY_NONE;
    }
    struct replay r = {.budget = UINT32_MAX, .active = 1,
                       .at = {.pos = 0, .seq = history_last_seq(uid) + 1}};
    r.uid_next = r.at.seq;
    if (!live)
        loop_stats.replays++;
    if (gap && put_gap(out, owner, t, live ? live : &r, topic, uid, asked, first,
                       topic_sub_next(sub) - 1) != 0)
        return REPLAY_FAILED;
    if (live)
        return REPLAY_STARTED;               /* its next id is set: the replay gets to it */
    return backlog_start_replay(out, owner, &r) == 0 ? REPLAY_STARTED : REPLAY_FAILED;
}

/* The replay is over: the backlog goes when it has nothing left to send. */
static void replay_end(struct backlog **out, void *owner)
{
    topic_replay_mark(owner, 0);
    backlog_replay(*out)->active = 0;
    if (backlog_pending(*out) == 0)
        backlog_free(out);
}

/* r's cursor goes back where it belongs: the uid's next id, or its
 * topic's subscription's (if owner still has it). */
static void park_cursor(struct replay *r, void *owner)
{
    uint32_t sub = r->topic ? topic_sub_of(owner, r->topic) : 0;
    if (!r->topic)
        r->uid_next = r->at.seq;
    else if (sub && history_slot_epoch(topic_slot(r->topic)) == r->topic_epoch)
        topic_sub_set_next(sub, r->at.seq);
}

/* The cursor moves to the first slot behind (the uid, then owner's
 * topics); 0 when all are caught up. */
static int next_behind(struct replay *r, void *owner, uint32_t uid)
{
    park_cursor(r, owner);
    uint32_t t = 0, next = r->uid_next;
    if (next > history_last_seq(uid) && (t = topic_behind(owner)) == 0)
        return 0;
    if (t) {
        next = topic_sub_next(topic_sub_of(owner, t));
        r->topic_epoch = history_slot_epoch(topic_slot(t));
    }
    r->topic = t;
    r->at = (struct history_cursor){.pos = 0, .seq = next};
    return 1;
}

/* The cursor is still good: its topic neither left nor made again since
 * the last refill (else it goes back to the uid's, from where the
 * search for what is behind starts). */
static void check_cursor(struct replay *r, void *owner)
{
    if (!r->topic)
        return;
    uint32_t sub = topic_sub_of(owner, r->topic);
    if (sub && history_slot_epoch(topic_slot(r->topic)) == r->topic_epoch)
        return;
    r->topic = 0;
    r->at = (struct history_cursor){.pos = 0, .seq = r->uid_next};
}

int replay_fill(struct backlog **out, void *owner, uint8_t framing, uint32_t uid, int *finished)
{
    struct replay *live = backlog_replay(*out);
    const struct transport_replay *t = replay_of(framing);
    if (!live || !t)
        return 0;
    /* A copy: the backlog moves as it grows. */
    struct replay r = *live;
    size_t made = 0;
    int result = 1;
    *finished = 0;
    check_cursor(&r, owner);
    while (made < REPLAY_CHUNK) {
        struct history_cursor before = r.at;
        uint32_t slot = slot_of(r.topic, uid);
        const char *data;
        uint32_t len, seq;
        int binary, k = history_next(slot, &r.at, &data, &len, &seq, &binary);
        if (k < 0) {                         /* pushed out before we got to it */
            char asked[24];
            snprintf(asked, sizeof asked, "%08x:%u", history_slot_epoch(slot), before.seq - 1);
            uint32_t first = r.at.seq <= history_last_seq(slot) ? r.at.seq : 0;
            if (!r.topic)
                r.gap = 1;
            if (put_gap(out, owner, t, &r, r.topic, uid, asked, first, r.at.seq - 1) != 0) {
                result = -1;
                break;
            }
            continue;
        }
        int full = 0;
        size_t n = 0;
        if (k > 0) {
            struct msg_id id = id_of(r.topic, uid, seq);
            n = t->message(out, owner, framing, data, len, binary, &id, &r, &full);
        }
        if (k > 0 && n == 0 && !full) {
            result = -1;
            break;
        }
        if (k == 0 && next_behind(&r, owner, uid))
            continue;                        /* caught up here: on to a slot behind */
        if (k == 0 || full) {
            if (full) {
                r.at = before;               /* the client polls again for it */
                park_cursor(&r, owner);
            }
            if (t->end) {
                if (t->end(out, owner, &r) != 0) {
                    result = -1;
                    break;
                }
                *finished = 1;
            }
            result = 0;
            break;
        }
        made += n;
        r.given++;
        r.budget = n < r.budget ? r.budget - (uint32_t)n : 0;
        loop_stats.replayed++;
    }
    *backlog_replay(*out) = r;
    if (result < 0) {
        static struct log_ratelimit rl;
        log_limited(&rl, LOG_ERROR, "out of memory replaying a stream's history: it is closed");
    } else if (result == 0) {
        replay_end(out, owner);
    }
    return result;
}
