/* SPDX-License-Identifier: Apache-2.0 */
/* Joining topics: see topic_join.h. */
#include "core/topic_join.h"
#include "core/conn.h"
#include "core/framing.h"
#include "core/outbound.h"
#include "core/stream.h"
#include "core/topic_fanout.h"
#include "lib/log.h"
#include "lib/ptrmap.h"
#include "obs/stats.h"

#include <stdlib.h>
#include <string.h>

static enum topic_auth mode;

/* The token claim of the request at the door, for the stream it opens. */
static char next_grants[TOPIC_GRANTS_MAX + 1];
static int have_next_grants;

/* A WebSocket's claim, kept for the joins it may ask later: stream ->
 * its copy (malloc), only in token and handler modes. */
static struct ptrmap grants_of = PTRMAP_INIT;

void topic_join_configure(enum topic_auth m) { mode = m; }

void topic_join_free(void)
{
    for (uint32_t i = 0; grants_of.e && i <= grants_of.mask; i++)
        if (grants_of.e[i].key)
            free((void *)(uintptr_t)grants_of.e[i].value);
    ptrmap_free(&grants_of);
}

void topic_grants_next(const char *grants)
{
    have_next_grants = grants != NULL;
    if (grants)
        snprintf(next_grants, sizeof next_grants, "%s", grants);
}

int topic_granted(const char *grants, const char *name, size_t len)
{
    for (const char *p = grants; p && *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n && p[n - 1] == '*' ? len >= n - 1 && memcmp(p, name, n - 1) == 0
                                  : n == len && memcmp(p, name, len) == 0)
            return 1;
        p = end ? end + 1 : NULL;
    }
    return 0;
}

/* Whether a join of name needs the handler (1), is allowed (0), or is
 * refused (-1), for a stream whose claim is grants. */
static int decide(const char *grants, const char *name, size_t len)
{
    if (mode == TOPIC_AUTH_OPEN || topic_granted(grants, name, len))
        return 0;
    return mode == TOPIC_AUTH_HANDLER ? 1 : -1;
}

enum topic_refusal topic_requests_admit(const struct topic_request *r, uint32_t n, int poll,
                                        uint32_t *bad)
{
    static struct topic_request kept[256];
    uint32_t fresh = 0, nkept = 0;
    topic_requests_set(NULL, 0);
    const char *grants = have_next_grants ? next_grants : NULL;
    for (uint32_t i = 0; i < n && i < sizeof kept / sizeof kept[0]; i++) {
        *bad = i;
        if (!topic_name_ok(r[i].name, r[i].len))
            return TOPIC_BAD_NAME;
        int repeated = 0;
        for (uint32_t j = 0; j < i && !repeated; j++)
            repeated = r[j].len == r[i].len && memcmp(r[j].name, r[i].name, r[i].len) == 0;
        if (repeated)
            continue;
        int d = decide(grants, r[i].name, r[i].len);
        if (d < 0 || (d > 0 && poll))
            return TOPIC_DENIED;
        enum topic_refusal why = d ? TOPIC_OK : topic_would_take(r[i].name, r[i].len, &fresh);
        if (why != TOPIC_OK)
            return why;
        kept[nkept] = r[i];
        kept[nkept++].ask = (uint8_t)d;
    }
    topic_requests_set(kept, nkept);
    return TOPIC_OK;
}

/* The join of name goes to the handler (through the inbox, with the id it
 * resumes from): its answer comes as a subscribe or a refusal. One that
 * cannot go is refused ("busy"), told when tell (not before a head). */
static void ask_handler(struct stream *s, const char *name, size_t len, const char *since,
                        size_t since_len, int tell)
{
    const struct conn *c = conn_of(s);
    if (!c || outbound_in_topic(IN_JOIN, s->uid, c->id, name, (uint8_t)len, since,
                                (uint8_t)since_len) != 0) {
        loop_stats.topic_asks_dropped++;
        if (tell)
            topic_tell(s, TOPIC_EV_REFUSED, name, len, "busy", NULL);
        return;
    }
    loop_stats.topic_asks++;
}

void topic_stream_open(struct stream *s)
{
    if (have_next_grants && framing_is_websocket(s->framing) && mode != TOPIC_AUTH_OPEN) {
        char *copy = strdup(next_grants);
        if (!copy || ptrmap_put(&grants_of, s, (uintptr_t)copy) != 0) {
            free(copy);
            log_msg(LOG_ERROR, "out of memory keeping a token's topics: its later joins "
                    "are refused");
        }
    }
    have_next_grants = 0;
    uint32_t n;
    const struct topic_request *r = topic_requests(&n);
    topic_requests_own(n ? s : NULL);
    for (uint32_t i = 0; i < n; i++) {
        const struct topic_request *q = &r[i];
        if (q->ask) {
            /* its answer comes after the head: told then */
            ask_handler(s, q->name, q->len, q->since, q->since_len, 0);
            continue;
        }
        uint32_t t;
        enum topic_refusal why = topic_subscribe(s, q->name, q->len, &t);
        if (why != TOPIC_OK) {
            topic_count_refusal(why);         /* out of memory: the door checked the rest */
            log_msg(LOG_ERROR, "a stream could not subscribe to %.*s: %s", (int)q->len,
                    q->name, topic_refusal_name(why));
        }
    }
}

void topic_stream_close(struct stream *s)
{
    uint64_t g;
    if (grants_of.used && ptrmap_remove(&grants_of, s, &g))
        free((void *)(uintptr_t)g);
    uint32_t n;
    if (topic_stream_requests(s, &n))
        topic_requests_own(NULL);
    topic_leave_all(s);
}

int topic_tell_open(struct stream *s)
{
    uint32_t n;
    const struct topic_request *r = topic_stream_requests(s, &n);
    for (uint32_t i = topic_stream_first(s); i; i = topic_stream_next(i)) {
        uint32_t t = topic_sub_at(i)->topic;
        uint8_t len;
        const char *name = topic_name(t, &len);
        int resumes = 0;
        for (uint32_t k = 0; k < n && !resumes; k++)
            resumes = r[k].since_len && r[k].len == len && memcmp(r[k].name, name, len) == 0;
        if ((resumes ? topic_tell(s, TOPIC_EV_JOINED, name, len, NULL, NULL)
                     : topic_tell_joined(s, t)) < 0)
            return -1;
    }
    return 0;
}

/* s subscribes to name (since: what to resume from), told of it: 1 when
 * subscribed, 0 when refused (told and counted), -1 when s ended. */
static int join(struct stream *s, const char *name, size_t len, const char *since,
                size_t since_len)
{
    uint32_t t = topic_find(name, len);
    int had = t && topic_sub_of(s, t);
    enum topic_refusal why = topic_subscribe(s, name, len, &t);
    if (why != TOPIC_OK) {
        topic_count_refusal(why);
        return topic_tell(s, TOPIC_EV_REFUSED, name, len, topic_refusal_name(why), NULL) < 0 ? -1 : 0;
    }
    if ((since_len ? topic_tell(s, TOPIC_EV_JOINED, name, len, NULL, NULL)
                   : topic_tell_joined(s, t)) < 0)
        return -1;
    if (since_len && !had) {
        char asked[32];
        size_t k = since_len < sizeof asked ? since_len : 0;  /* longer: unreadable, a gap */
        memcpy(asked, since, k);
        asked[k] = '\0';
        if (stream_replay_topic(s, topic_sub_of(s, t), asked) < 0)
            return -1;
    }
    return 1;
}

void topic_client_join(struct stream *s, const char *name, size_t len, const char *since,
                       size_t since_len)
{
    if (!topic_name_ok(name, len)) {
        topic_count_refusal(TOPIC_BAD_NAME);
        topic_tell(s, TOPIC_EV_REFUSED, "", 0, topic_refusal_name(TOPIC_BAD_NAME), NULL);
        return;
    }
    uint64_t *g = grants_of.used ? ptrmap_get(&grants_of, s) : NULL;
    int d = decide(g ? (const char *)(uintptr_t)*g : NULL, name, len);
    if (d < 0) {
        topic_count_refusal(TOPIC_DENIED);
        topic_tell(s, TOPIC_EV_REFUSED, name, len, topic_refusal_name(TOPIC_DENIED), NULL);
    } else if (d > 0) {
        ask_handler(s, name, len, since, since_len, 1);
    } else {
        join(s, name, len, since, since_len);
    }
}

#define JOIN "event: join\n\n"
#define LEAVE "event: leave\n\n"

int topic_control_is(const char *m, size_t n)
{
    return n <= TOPIC_CONTROL_MAX &&
           ((n >= sizeof JOIN - 1 && memcmp(m, JOIN, sizeof JOIN - 1) == 0) ||
            (n >= sizeof LEAVE - 1 && memcmp(m, LEAVE, sizeof LEAVE - 1) == 0));
}

void topic_control_apply(struct stream *s, const char *m, size_t n)
{
    if (m[7] == 'l') {
        topic_client_leave(s, m + sizeof LEAVE - 1, n - (sizeof LEAVE - 1));
        return;
    }
    const char *name = m + sizeof JOIN - 1;
    size_t len = n - (sizeof JOIN - 1);
    const char *at = memchr(name, '@', len);
    size_t k = at ? (size_t)(at - name) : len;
    topic_client_join(s, name, k, at ? at + 1 : NULL, at ? len - k - 1 : 0);
}

void topic_client_leave(struct stream *s, const char *name, size_t len)
{
    uint32_t t = topic_find(name, len);
    if (!t || !topic_unsubscribe(s, t))
        return;
    if (topic_tell(s, TOPIC_EV_LEFT, name, len, NULL, NULL) < 0)
        return;
    /* the handler hears of it: it decided the join */
    const struct conn *c;
    if (mode == TOPIC_AUTH_HANDLER && (c = conn_of(s)) &&
        outbound_in_topic(IN_LEAVE, s->uid, c->id, name, (uint8_t)len, NULL, 0) != 0)
        loop_stats.topic_asks_dropped++;
}

/* The open stream conn names, else NULL (counted). */
static struct stream *stream_of(uint64_t conn)
{
    struct stream *s = conn_find(conn);
    if (!s || (s->state != STREAM_LIVE && s->state != STREAM_WELCOMING)) {
        loop_stats.topic_conn_unknown++;
        return NULL;
    }
    return s;
}

int topic_conn_subscribe(uint64_t conn, const char *name, size_t len, const char *since,
                         size_t since_len, int answer)
{
    struct stream *s = stream_of(conn);
    if (!s)
        return 0;
    if (answer)
        loop_stats.topic_asks_allowed++;
    return join(s, name, len, since, since_len) > 0;
}

int topic_conn_refuse(uint64_t conn, const char *name, size_t len, const char *reason,
                      size_t reason_len)
{
    struct stream *s = stream_of(conn);
    if (!s)
        return 0;
    char why[TOPIC_NAME_MAX + 1];
    size_t n = reason_len < sizeof why ? reason_len : sizeof why - 1;
    memcpy(why, reason, n);
    why[n] = '\0';
    loop_stats.topic_asks_refused++;
    loop_stats.topic_refused_denied++;
    topic_tell(s, TOPIC_EV_REFUSED, name, len, why, NULL);
    return 1;
}

int topic_conn_unsubscribe(uint64_t conn, const char *name, size_t len)
{
    struct stream *s = stream_of(conn);
    uint32_t t = s ? topic_find(name, len) : 0;
    if (!t || !topic_unsubscribe(s, t))
        return 0;
    topic_tell(s, TOPIC_EV_LEFT, name, len, NULL, NULL);
    return 1;
}

/* ---------------------------------------------------------------- hand-over */

int topic_join_carry_export(struct carry_out *o, uint32_t (*index_of)(const void *s))
{
    uint32_t n = 0;
    for (uint32_t i = 0; grants_of.e && i <= grants_of.mask; i++)
        n += grants_of.e[i].key && index_of(grants_of.e[i].key) != UINT32_MAX;
    size_t at = carry_begin(o, TOPIC_JOIN_CARRY_TAG, TOPIC_JOIN_CARRY_VERSION);
    carry_u8(o, (uint8_t)mode);
    carry_u32(o, n);
    for (uint32_t i = 0; grants_of.e && i <= grants_of.mask; i++) {
        const void *s = grants_of.e[i].key;
        uint32_t k = s ? index_of(s) : UINT32_MAX;
        if (k == UINT32_MAX)
            continue;
        const char *g = (const char *)(uintptr_t)grants_of.e[i].value;
        uint16_t len = (uint16_t)strlen(g);
        carry_u32(o, k);
        carry_u16(o, len);
        carry_put(o, g, len);
    }
    carry_end(o, at);
    return o->failed ? -1 : 0;
}

int topic_join_carry_take(struct carry_in *rec, uint16_t version, struct stream *(*at)(uint32_t i))
{
    (void)version;                   /* 1: the only one yet */
    uint8_t was = carry_get_u8(rec);
    uint32_t n = carry_get_u32(rec);
    if (rec->failed || was != mode) {
        log_msg(LOG_ERROR, "takeover: the running process has another --topic-auth: start this "
                "one with the same");
        return -1;
    }
    for (uint32_t k = 0; k < n; k++) {
        struct stream *s = at(carry_get_u32(rec));
        uint16_t len = carry_get_u16(rec);
        const char *g = carry_view(rec, len);
        char *copy = rec->failed || !s || len > TOPIC_GRANTS_MAX ? NULL : malloc(len + 1u);
        if (!copy)
            return -1;
        memcpy(copy, g, len);
        copy[len] = '\0';
        if (ptrmap_put(&grants_of, s, (uintptr_t)copy) != 0) {
            free(copy);
            return -1;
        }
    }
    return rec->failed ? -1 : 0;
}
