/* SPDX-License-Identifier: Apache-2.0 */
/* Backlogs: see backlog.h. */
#include "core/backlog.h"
#include "lib/carry.h"
#include "lib/log.h"
#include "core/replay-t.h"
#include "obs/stats.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* 64 bytes of header plus the data; exists only while backlogged, or
 * while a replay rides on it (then possibly empty). */
struct backlog {
    struct backlog *prev, *next;   /* all backlogs */
    void *owner;
    uint32_t off;                  /* first unsent byte */
    uint32_t len;                  /* end of unsent bytes */
    uint32_t cap;
    struct replay replay;          /* 24: active while a replay is under way */
    char data[];
};

static struct backlog *all_backlogs;

static void link_backlog(struct backlog *b)
{
    b->prev = NULL;
    b->next = all_backlogs;
    if (all_backlogs)
        all_backlogs->prev = b;
    all_backlogs = b;
}

static void unlink_backlog(struct backlog *b)
{
    if (b->prev)
        b->prev->next = b->next;
    else
        all_backlogs = b->next;
    if (b->next)
        b->next->prev = b->prev;
}

static uint32_t pending(const struct backlog *b) { return b ? b->len - b->off : 0; }

/* Room for n more bytes at the end: slides unsent bytes to the front,
 * grows by doubling up to max. -1 when out of memory. */
static int make_room(struct backlog **bp, void *owner, size_t n, size_t max)
{
    struct backlog *b = *bp;
    size_t have = pending(b);
    if (b && b->len + n <= b->cap)
        return 0;
    if (b && b->off > 0) {
        memmove(b->data, b->data + b->off, have);
        b->len = (uint32_t)have;
        b->off = 0;
    }
    size_t cap = b ? b->cap : 0;
    if (have + n <= cap)
        return 0;
    size_t want = cap ? cap * 2 : 4096;
    while (want < have + n)
        want *= 2;
    if (want > max)
        want = max;
    if (b)
        unlink_backlog(b);
    struct backlog *grown = realloc(b, sizeof *b + want);
    if (!grown) {
        if (b)
            link_backlog(b);
        return -1;
    }
    if (!b) {
        grown->off = grown->len = 0;
        grown->owner = owner;
        grown->replay = (struct replay){0};
    }
    grown->cap = (uint32_t)want;
    link_backlog(grown);
    *bp = grown;
    return 0;
}

size_t backlog_pending(const struct backlog *b) { return pending(b); }

char *backlog_room(struct backlog **bp, void *owner, size_t n, size_t max)
{
    if (pending(*bp) + n > max || make_room(bp, owner, n, max) != 0)
        return NULL;
    return (*bp)->data + (*bp)->len;
}

void backlog_commit(struct backlog *b, size_t n)
{
    b->len += (uint32_t)n;
    loop_stats.backlog_bytes += n;
}

int backlog_prepend(struct backlog **bp, void *owner, const struct iovec *iov, int iovcnt,
                    size_t max)
{
    struct backlog *b = NULL, *old = *bp;
    if (backlog_append(&b, owner, iov, iovcnt, 0, max) != 0)
        return -1;
    if (old) {
        struct iovec rest = {old->data + old->off, pending(old)};
        if (backlog_append(&b, owner, &rest, 1, 0, max) != 0) {
            backlog_free(&b);
            return -1;
        }
        b->replay = old->replay;
        backlog_free(bp);
    }
    *bp = b;
    return 0;
}

struct replay *backlog_replay(struct backlog *b) { return b && b->replay.active ? &b->replay : NULL; }

int backlog_start_replay(struct backlog **bp, void *owner, const struct replay *r)
{
    if (!*bp && make_room(bp, owner, 1, 4096) != 0)
        return -1;
    (*bp)->replay = *r;
    (*bp)->replay.active = 1;
    return 0;
}

int backlog_append(struct backlog **bp, void *owner, const struct iovec *iov, int iovcnt,
                   size_t skip, size_t max)
{
    size_t n = 0;
    for (int i = 0; i < iovcnt; i++)
        n += iov[i].iov_len;
    n -= skip;
    if (pending(*bp) + n > max || make_room(bp, owner, n, max) != 0)
        return -1;
    struct backlog *b = *bp;
    for (int i = 0; i < iovcnt; i++) {
        size_t len = iov[i].iov_len;
        if (skip >= len) {
            skip -= len;
            continue;
        }
        memcpy(b->data + b->len, (const char *)iov[i].iov_base + skip, len - skip);
        b->len += (uint32_t)(len - skip);
        skip = 0;
    }
    loop_stats.backlog_bytes += n;
    return 0;
}

int backlog_send(struct backlog **bp, int fd)
{
    struct backlog *b = *bp;
    while (b->off < b->len) {
        ssize_t n = send(fd, b->data + b->off, b->len - b->off, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (errno == EINTR)
                continue;
            return -1;
        }
        b->off += (uint32_t)n;
        loop_stats.backlog_bytes -= (uint64_t)n;
    }
    if (b->replay.active)
        b->off = b->len = 0;       /* kept, empty, for the replay's next bytes */
    else
        backlog_free(bp);
    return 1;
}

void backlog_free(struct backlog **bp)
{
    struct backlog *b = *bp;
    if (!b)
        return;
    loop_stats.backlog_bytes -= pending(b);
    unlink_backlog(b);
    free(b);
    *bp = NULL;
}

static int by_pending_desc(const void *x, const void *y)
{
    uint32_t a = pending(*(struct backlog *const *)x), b = pending(*(struct backlog *const *)y);
    return a < b ? 1 : a > b ? -1 : 0;
}

void **backlog_owners_largest_first(size_t *n)
{
    size_t count = 0;
    for (struct backlog *b = all_backlogs; b; b = b->next)
        count++;
    *n = 0;
    if (count == 0)
        return NULL;
    struct backlog **sorted = malloc(count * sizeof *sorted);
    void **owners = malloc(count * sizeof *owners);
    if (!sorted || !owners) {
        log_msg(LOG_ERROR, "cannot sort %zu backlogs: out of memory", count);
        free(sorted);
        free(owners);
        return NULL;
    }
    size_t i = 0;
    for (struct backlog *b = all_backlogs; b; b = b->next)
        sorted[i++] = b;
    qsort(sorted, count, sizeof *sorted, by_pending_desc);
    for (i = 0; i < count; i++)
        owners[i] = sorted[i]->owner;
    free(sorted);
    *n = count;
    return owners;
}

/* ---------------------------------------------------------------- hand-over */

size_t backlog_count(void)
{
    size_t n = 0;
    for (struct backlog *b = all_backlogs; b; b = b->next)
        n++;
    return n;
}

int backlog_carry_export(struct carry_out *o, uint32_t (*index_of)(const void *owner))
{
    uint32_t n = 0;
    for (struct backlog *b = all_backlogs; b; b = b->next)
        n += index_of(b->owner) != UINT32_MAX;
    size_t at = carry_begin(o, BACKLOG_CARRY_TAG, BACKLOG_CARRY_VERSION);
    carry_u32(o, n);
    for (struct backlog *b = all_backlogs; b; b = b->next) {
        uint32_t i = index_of(b->owner);
        if (i == UINT32_MAX)
            continue;
        const struct replay *r = &b->replay;
        carry_u32(o, i);
        carry_u32(o, pending(b));
        carry_put(o, b->data + b->off, pending(b));
        carry_u8(o, r->active);
        carry_u64(o, r->at.pos);
        carry_u32(o, r->at.seq);
        carry_u32(o, r->budget);
        carry_u32(o, r->first);
        carry_u32(o, r->given);
        carry_u8(o, r->gap);
        carry_u32(o, r->uid_next);
        carry_u32(o, r->topic);
        carry_u32(o, r->topic_epoch);
    }
    carry_end(o, at);
    return o->failed ? -1 : 0;
}

int backlog_carry_take(struct carry_in *rec, uint16_t version,
                       struct backlog **(*slot_of)(uint32_t i, void **owner))
{
    if (version < 2)                 /* 1: replays without topics */
        return -1;
    uint32_t n = carry_get_u32(rec);
    for (uint32_t k = 0; k < n && !rec->failed; k++) {
        uint32_t i = carry_get_u32(rec), len = carry_get_u32(rec);
        const void *bytes = carry_view(rec, len);
        struct replay r = {0};
        r.active = carry_get_u8(rec);
        r.at.pos = carry_get_u64(rec);
        r.at.seq = carry_get_u32(rec);
        r.budget = carry_get_u32(rec);
        r.first = carry_get_u32(rec);
        r.given = carry_get_u32(rec);
        r.gap = carry_get_u8(rec);
        r.uid_next = carry_get_u32(rec);
        r.topic = carry_get_u32(rec);
        r.topic_epoch = carry_get_u32(rec);
        void *owner;
        struct backlog **b = rec->failed ? NULL : slot_of(i, &owner);
        if (!b || *b)
            return -1;
        struct iovec iov = {(void *)bytes, len};
        if ((len && backlog_append(b, owner, &iov, 1, 0, SIZE_MAX) != 0) ||
            (r.active && backlog_start_replay(b, owner, &r) != 0))
            return -1;
    }
    return rec->failed ? -1 : 0;
}
