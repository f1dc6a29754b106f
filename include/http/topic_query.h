/* SPDX-License-Identifier: Apache-2.0 */
/* The topics a stream's request names: ?topics=a,b@EPOCH:SEQ (comma
 * separated, percent-decoded; each a topic name, topic_name.h, and after
 * an '@' the id its client saw there last, to resume from), checked at the
 * door before the stream exists (core/topic_join.h), and refused whole
 * when one is: 400 for a name that is none, more than
 * --max-topics-per-stream, or an id where the transport cannot resume;
 * 403 for a topic the token (or, for a long-poll, the mode) does not
 * allow; 503 (Retry-After) when a bound is reached: the topic has
 * --max-streams-per-topic, or --max-topics are held. An SSE reconnect's
 * Last-Event-ID that names a topic (NAME@EPOCH:SEQ) resumes that topic, if
 * the request lists it without an id. Loop thread only. */
#ifndef HTTPDCNODE_TOPIC_QUERY_H
#define HTTPDCNODE_TOPIC_QUERY_H

struct evhttp_request;

enum topic_query_ids {
    TOPIC_IDS_NONE,             /* chunked: ids are not kept (nothing replays) */
    TOPIC_IDS_REFUSED,          /* a WebSocket without ids (not ws+meta): 400 */
    TOPIC_IDS_TAKEN,            /* SSE, ws+meta, long-poll */
};

/* 1 when the request may open its stream (its topics kept for it), 0
 * when it was answered with a refusal. poll: a long-poll. */
int topic_query_admit(struct evhttp_request *req, int poll, enum topic_query_ids ids);

#endif
