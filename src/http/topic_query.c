/* SPDX-License-Identifier: Apache-2.0 */
/* Topics at the door: see topic_query.h. */
#include "http/topic_query.h"
#include "core/topic_join.h"
#include "http/http_reply.h"
#include "obs/stats.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdio.h>
#include <string.h>

static struct topic_request req[256];

static void refuse(struct evhttp_request *r, int code, const char *reason, const char *body)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(r);
    evhttp_add_header(h, "Cache-Control", "no-store");
    if (code == 503)
        evhttp_add_header(h, "Retry-After", "5");
    http_reply_text(r, code, reason, body);
}

/* The items of list into req: *n of them; -1 past max, -2 for an item that
 * is no name[@id] (its index in *n). */
static int split(const char *list, uint32_t max, uint32_t *n)
{
    *n = 0;
    for (const char *p = list; *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (*n == max)
            return -1;
        struct topic_request *q = &req[*n];
        const char *at = memchr(p, '@', len);
        size_t name = at ? (size_t)(at - p) : len, since = at ? len - name - 1 : 0;
        *q = (struct topic_request){.len = (uint8_t)(name <= TOPIC_NAME_MAX ? name : 0)};
        if (name > TOPIC_NAME_MAX || since >= sizeof q->since || (at && since == 0))
            return -2;
        memcpy(q->name, p, name);
        memcpy(q->since, at ? at + 1 : "", since);
        q->since_len = (uint8_t)since;
        ++*n;
        p = end ? end + 1 : p + len;
    }
    return 0;
}

/* Last-Event-ID NAME@ID: that topic resumes from ID, if listed without one. */
static void last_event_id(struct evhttp_request *r, uint32_t n)
{
    const char *id = evhttp_find_header(evhttp_request_get_input_headers(r), "Last-Event-ID");
    const char *at = id ? strrchr(id, '@') : NULL;
    if (!at || strlen(at + 1) >= sizeof req[0].since)
        return;
    for (uint32_t i = 0; i < n; i++)
        if (!req[i].since_len && req[i].len == (size_t)(at - id) &&
            memcmp(req[i].name, id, req[i].len) == 0) {
            req[i].since_len = (uint8_t)strlen(at + 1);
            memcpy(req[i].since, at + 1, req[i].since_len);
        }
}

int topic_query_admit(struct evhttp_request *r, int poll, enum topic_query_ids ids)
{
    struct evkeyvalq query = {0};
    const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(r));
    if (q)
        evhttp_parse_query_str(q, &query);
    const char *list = evhttp_find_header(&query, "topics");
    uint32_t n = 0, bad = 0;
    int split_r = list ? split(list, topic_cfg.per_stream, &n) : 0;
    evhttp_clear_headers(&query);
    char body[160];
    if (list && (!topic_cfg.max_topics || split_r == -1)) {
        topic_count_refusal(TOPIC_STREAM_FULL);
        snprintf(body, sizeof body, "Too many topics: a stream may name %u at most",
                 topic_cfg.max_topics ? topic_cfg.per_stream : 0);
        refuse(r, 400, "Bad Request", body);
        return 0;
    }
    if (split_r == -2) {
        topic_count_refusal(TOPIC_BAD_NAME);
        refuse(r, 400, "Bad Request", "Bad topic in topics=: a topic is 1 to 64 of A-Z a-z "
               "0-9 _ - . : /, maybe followed by @ and the id to resume from");
        return 0;
    }
    for (uint32_t i = 0; i < n && ids != TOPIC_IDS_TAKEN; i++) {
        if (req[i].since_len && ids == TOPIC_IDS_REFUSED) {
            refuse(r, 400, "Bad Request", "Resuming a topic needs the subprotocol "
                   "ws+meta.httpdcnode (frames without ids cannot tell a gap from data)");
            return 0;
        }
        req[i].since_len = 0;         /* chunked: nothing to resume */
    }
    if (ids == TOPIC_IDS_TAKEN && !poll)
        last_event_id(r, n);
    enum topic_refusal why = topic_requests_admit(req, n, poll, &bad);
    if (why == TOPIC_OK)
        return 1;
    topic_count_refusal(why);
    switch (why) {
    case TOPIC_BAD_NAME:
        snprintf(body, sizeof body, "Bad topic name %.*s: 1 to 64 of A-Z a-z 0-9 _ - . : /",
                 (int)req[bad].len, req[bad].name);
        refuse(r, 400, "Bad Request", body);
        break;
    case TOPIC_DENIED:
        snprintf(body, sizeof body, poll ? "Topic %.*s: a long-poll may name only the topics "
                 "its token allows" : "Topic %.*s is not allowed by the token",
                 (int)req[bad].len, req[bad].name);
        refuse(r, 403, "Forbidden", body);
        break;
    case TOPIC_FULL:
        snprintf(body, sizeof body, "Topic %.*s has all the streams it may have here: try "
                 "another node", (int)req[bad].len, req[bad].name);
        refuse(r, 503, "Service Unavailable", body);
        break;
    default:
        refuse(r, 503, "Service Unavailable", "This node holds all the topics it may: try "
               "another node");
        break;
    }
    return 0;
}
