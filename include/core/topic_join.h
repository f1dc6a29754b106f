/* SPDX-License-Identifier: Apache-2.0 */
/* Who may subscribe to what (--topic-auth), and the ways in:
 *   - a request names topics (?topics=a,b@EPOCH:SEQ): checked at the door,
 *     before the stream exists (topic_requests_admit), subscribed when it
 *     opens (topic_stream_open); the ids are its replay's (replay.c);
 *   - a WebSocket client asks to join or leave (ws_reader.c);
 *   - Erlang subscribes or unsubscribes a connection ({subscribe, Conn,
 *     Topic}), or answers a join the handler was asked about.
 * Modes:
 *   open     any stream may subscribe to any topic
 *   token    only to the topics its subscriber token's "topics" claim
 *            lists (names, or prefixes ending in '*'; auth_jwt.c)
 *   handler  those, and the others if the --inbox handler's
 *            authorize_join says so: the join goes to the inbox with the
 *            id to resume from, and its answer comes back as
 *            {subscribe, Conn, Topic, Since} or {refuse_join, Conn,
 *            Topic, Reason}. A long-poll cannot wait for that: its topics
 *            must be the token's.
 * Erlang's own {subscribe, Conn, Topic} is never checked: it is the
 * application's word. Loop thread only. */
#ifndef HTTPDCNODE_TOPIC_JOIN_H
#define HTTPDCNODE_TOPIC_JOIN_H

#include "core/topic.h"

#include <stddef.h>
#include <stdint.h>

enum topic_auth { TOPIC_AUTH_OPEN = 0, TOPIC_AUTH_TOKEN, TOPIC_AUTH_HANDLER };

void topic_join_configure(enum topic_auth mode);
void topic_join_free(void);

/* A hot upgrade (upgrade/): each carried WebSocket's token claim, kept for
 * the joins it asks later (index_of, at: as topic.h's). -1 when
 * malformed, or out of memory. */
#define TOPIC_JOIN_CARRY_TAG CARRY_TAG('T', 'J', 'O', 'N')
#define TOPIC_JOIN_CARRY_VERSION 1
int topic_join_carry_export(struct carry_out *o, uint32_t (*index_of)(const void *s));
int topic_join_carry_take(struct carry_in *rec, uint16_t version, struct stream *(*at)(uint32_t i));

/* The longest "topics" claim a token may carry, its patterns joined by
 * commas (auth_jwt.c refuses longer ones). */
#define TOPIC_GRANTS_MAX 1024

/* The token of the request now at the door allows these topics (its
 * claim, patterns joined by commas; NULL: it has none). */
void topic_grants_next(const char *grants);
/* Whether grants (as above, NULL: none) allow name[len]. */
int topic_granted(const char *grants, const char *name, size_t len);

/* The topics a request for a stream names (n at most
 * --max-topics-per-stream: the caller checks), checked as subscribing
 * would be, and by the mode (poll: a long-poll, which cannot wait for the
 * handler). TOPIC_OK, and they are kept for the stream the request
 * opens; else why not, and *bad is the topic refused. */
enum topic_refusal topic_requests_admit(const struct topic_request *r, uint32_t n, int poll,
                                        uint32_t *bad);

/* s opens with the topics its request named (subscribed, or asked of
 * the handler: transport.c); s closes, its subscriptions go (stream.c's
 * closing hook). */
void topic_stream_open(struct stream *s);
void topic_stream_close(struct stream *s);
/* Once s's head is out: s is told of each topic it holds (joined), so
 * that its client knows what its request's topics came to. -1 when s
 * ended. */
int topic_tell_open(struct stream *s);

/* A WebSocket client asks to join name (since[since_len]: the id it
 * resumes from, none when 0), or to leave it. What comes of it is told
 * (topic_fanout.h: joined, refused, left). */
void topic_client_join(struct stream *s, const char *name, size_t len, const char *since,
                       size_t since_len);
void topic_client_leave(struct stream *s, const char *name, size_t len);

/* How a client asks it, in a text message of its own (a WebSocket's, or
 * the body of POST /send/N?conn=ID for the stream ID: docs/protocol.md):
 *   event: join\n\nTOPIC[@ID]   ID: the last it saw there, to resume from
 *   event: leave\n\nTOPIC
 * never passed to the inbox. */
#define TOPIC_CONTROL_MAX (sizeof "event: leave\n\n" - 1 + TOPIC_NAME_MAX + 1 + 31)
/* Whether m[n] is such a message. */
int topic_control_is(const char *m, size_t n);
/* Does what it asks (it is one) for s. */
void topic_control_apply(struct stream *s, const char *m, size_t n);

/* Erlang: conn subscribes to name (since: as above; answer: it is the
 * handler's answer to a join, which is counted as such), is refused it
 * (reason: printable, topic_name.h's characters and spaces), or leaves
 * it. 1 when done, 0 when conn is no open stream (or, subscribing, a
 * bound refused it: told to the client). */
int topic_conn_subscribe(uint64_t conn, const char *name, size_t len, const char *since,
                         size_t since_len, int answer);
int topic_conn_refuse(uint64_t conn, const char *name, size_t len, const char *reason,
                      size_t reason_len);
int topic_conn_unsubscribe(uint64_t conn, const char *name, size_t len);

#endif
