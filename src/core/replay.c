/* Replays: see replay.h. */
#include "core/replay.h"
#include "core/backlog.h"
#include "core/framing.h"
#include "core/history.h"
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

/* A gap told the transport's way: the client missed what follows the id
 * asked; first is the oldest kept it gets (0: none), next the id to come
 * back with if it leaves now. */
static int put_gap(struct backlog **out, void *owner, const struct transport_replay *t,
                   const char *asked, uint32_t first, uint32_t next)
{
    char json[HISTORY_GAP_JSON_MAX];
    size_t n = history_gap_json(json, asked, first, next);
    loop_stats.replay_gaps++;
    return t->gap ? t->gap(out, owner, json, n, next) : 0;
}

static const struct transport_replay *replay_of(uint8_t framing)
{
    const struct transport_ops *t = framing < FRAMING_KINDS ? transport_ops[framing] : NULL;
    return t ? t->replay : NULL;
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
    if (!r.gap && r.at.seq > history_last_seq(uid))
        return REPLAY_NONE;
    loop_stats.replays++;
    if (t->open && t->open(out, owner) != 0)
        return REPLAY_FAILED;
    if (r.gap && put_gap(out, owner, t, asked, first, r.at.seq - 1) != 0)
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
    const struct transport_replay *t = replay_of(framing);
    if (!live || !t)
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
        int binary, k = history_next(uid, &r.at, &data, &len, &seq, &binary);
        if (k < 0) {                         /* pushed out before we got to it */
            char asked[32];
            replay_id_text(asked, sizeof asked, before.seq - 1);
            uint32_t first = r.at.seq <= history_last_seq(uid) ? r.at.seq : 0;
            r.gap = 1;
            if (put_gap(out, owner, t, asked, first, r.at.seq - 1) != 0) {
                result = -1;
                break;
            }
            continue;
        }
        int full = 0;
        size_t n = k > 0 ? t->message(out, owner, framing, data, len, binary, seq, &r, &full) : 0;
        if (k > 0 && n == 0 && !full) {
            result = -1;
            break;
        }
        if (k == 0 || full) {
            if (full)
                r.at = before;               /* the client polls again for it */
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
        replay_end(out);
    }
    return result;
}
