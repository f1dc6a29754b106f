/* Replays: see replay.h. */
#include "core/replay.h"
#include "core/backlog.h"
#include "core/framing.h"
#include "core/history.h"
#include "lib/json_text.h"
#include "lib/log.h"
#include "obs/stats.h"
#include "lib/utf8.h"

#include <stdio.h>
#include <string.h>

/* Replay bytes are bounded by REPLAY_CHUNK and one message, not by
 * --max-backlog (which a long message in SSE's encoding may pass). */
#define NO_MAX ((size_t)-1)

static size_t id_text(char *out, size_t size, uint32_t seq)
{
    return (size_t)snprintf(out, size, "%s:%u", history_epoch_hex(), seq);
}

static int put(struct backlog **out, void *owner, const char *p, size_t n)
{
    char *at = backlog_room(out, owner, n, NO_MAX);
    if (!at)
        return -1;
    memcpy(at, p, n);
    backlog_commit(*out, n);
    return 0;
}

/* A gap told the transport's way: the client missed what follows the id
 * asked; first is the oldest kept it gets (0: none), next the id to come
 * back with if it leaves now. A long-poll says it in its answer's end. */
static int put_gap(struct backlog **out, void *owner, uint8_t framing, const char *asked,
                   uint32_t first, uint32_t next)
{
    char json[HISTORY_GAP_JSON_MAX], buf[HISTORY_GAP_JSON_MAX + 64];
    size_t n = history_gap_json(json, asked, first, next), k;
    loop_stats.replay_gaps++;
    if (framing == FRAMING_SSE) {
        /* id: too, so that an EventSource coming back asks from there
         * and is not told the same gap again. */
        char id[32];
        id_text(id, sizeof id, next);
        k = (size_t)snprintf(buf, sizeof buf, "id: %s\nevent: gap\ndata: %s\n\n", id, json);
        return put(out, owner, buf, k);
    }
    if (framing_is_websocket(framing)) {
        static const char event[] = "event: gap\n\n";
        k = framing_ws_header(buf, 1, sizeof event - 1 + n);
        memcpy(buf + k, event, sizeof event - 1);
        memcpy(buf + k + sizeof event - 1, json, n);
        return put(out, owner, buf, k + sizeof event - 1 + n);
    }
    return 0;
}

/* One message as the framing puts it; its size, 0 when out of memory.
 * A long-poll answer takes it only within budget bytes (the first message
 * always): past it, nothing is written and *over is set. */
static size_t put_message(struct backlog **out, void *owner, uint8_t framing, const char *data,
                          uint32_t len, uint32_t seq, int comma, uint32_t budget, int *over)
{
    struct framing_prefix prefix;
    size_t n;
    char *at;
    switch (framing) {
    case FRAMING_SSE:
        framing_prefix(framing, len, seq, &prefix);
        n = prefix.len + framing_sse_body_len(data, len);
        if (!(at = backlog_room(out, owner, n, NO_MAX)))
            return 0;
        memcpy(at, prefix.bytes, prefix.len);
        framing_sse_body(data, len, at + prefix.len);
        break;
    case FRAMING_POLL:
        if (!(at = backlog_room(out, owner, 1 + json_message_max(len), NO_MAX)))
            return 0;
        if (comma)
            *at = ',';
        n = (size_t)comma + json_message(at + comma, history_epoch_hex(), seq, data, len);
        if (comma && n > budget) {
            *over = 1;              /* encoded, not committed: the next poll gets it */
            return 0;
        }
        break;
    default:                                /* WebSocket */
        framing_prefix_utf8(framing, len, seq, utf8_valid(data, len), &prefix);
        n = prefix.len + len;
        if (!(at = backlog_room(out, owner, n, NO_MAX)))
            return 0;
        memcpy(at, prefix.bytes, prefix.len);
        memcpy(at + prefix.len, data, len);
        break;
    }
    backlog_commit(*out, n);
    return n;
}

/* A long-poll answer's end: whether anything was missed, and the id to
 * poll from next. */
static int put_poll_end(struct backlog **out, void *owner, const struct replay *r)
{
    char buf[160], first[32], next[32];
    id_text(next, sizeof next, r->at.seq - 1);
    size_t n;
    if (r->gap) {
        if (r->first)
            snprintf(first, sizeof first, "\"%s:%u\"", history_epoch_hex(), r->first);
        else
            strcpy(first, "null");
        n = (size_t)snprintf(buf, sizeof buf, "],\"gap\":true,\"first\":%s,\"next\":\"%s\"}\n",
                             first, next);
    } else {
        n = (size_t)snprintf(buf, sizeof buf, "],\"gap\":false,\"next\":\"%s\"}\n", next);
    }
    return put(out, owner, buf, n);
}

enum replay_result replay_open(struct backlog **out, void *owner, uint8_t framing, uint32_t uid,
                               const char *asked, uint32_t budget)
{
    uint32_t epoch = 0, seq = 0, first = 0;
    if (asked && history_parse_id(asked, &epoch, &seq) != 0)
        epoch = ~history_epoch();            /* unreadable: not ours, a gap */
    struct replay r = {.budget = budget, .active = 1};
    r.gap = (uint8_t)history_resume(uid, asked != NULL, epoch, seq, &r.at, &first);
    r.first = first;
    if (!r.gap && r.at.seq > history_last_seq(uid))
        return REPLAY_NONE;
    loop_stats.replays++;
    static const char poll_start[] = "{\"messages\":[";
    if (framing == FRAMING_POLL && put(out, owner, poll_start, sizeof poll_start - 1) != 0)
        return REPLAY_FAILED;
    if (r.gap && put_gap(out, owner, framing, asked, first, r.at.seq - 1) != 0)
        return REPLAY_FAILED;
    return backlog_start_replay(out, owner, &r) == 0 ? REPLAY_STARTED : REPLAY_FAILED;
}

/* The replay is over: the backlog goes when it has nothing left to send. */
static void replay_end(struct backlog **out)
{
    backlog_replay(*out)->active = 0;
    if (backlog_pending(*out) == 0)
        backlog_free(out);
}

int replay_fill(struct backlog **out, void *owner, uint8_t framing, uint32_t uid, int *finished)
{
    struct replay *live = backlog_replay(*out);
    if (!live)
        return 0;
    /* A copy: the backlog moves as it grows. */
    struct replay r = *live;
    size_t made = 0;
    int result = 1;
    *finished = 0;
    while (made < REPLAY_CHUNK) {
        struct history_cursor before = r.at;
        const char *data;
        uint32_t len, seq;
        int k = history_next(uid, &r.at, &data, &len, &seq);
        if (k < 0) {                         /* pushed out before we got to it */
            char asked[32];
            id_text(asked, sizeof asked, before.seq - 1);
            uint32_t first = r.at.seq <= history_last_seq(uid) ? r.at.seq : 0;
            r.gap = 1;
            if (put_gap(out, owner, framing, asked, first, r.at.seq - 1) != 0) {
                result = -1;
                break;
            }
            continue;
        }
        int full = 0;
        size_t n = k > 0 ? put_message(out, owner, framing, data, len, seq, r.given > 0, r.budget,
                                       &full)
                         : 0;
        if (k > 0 && n == 0 && !full) {
            result = -1;
            break;
        }
        if (k == 0 || full) {
            if (full)
                r.at = before;               /* the client polls again for it */
            if (framing == FRAMING_POLL) {
                if (put_poll_end(out, owner, &r) != 0) {
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
        replay_end(out);
    }
    return result;
}
