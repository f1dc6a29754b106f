/* SPDX-License-Identifier: Apache-2.0 */
/* Topics: named channels a stream subscribes to, beside its uid. A
 * message published to a topic goes to every stream subscribed to it on
 * this node (core/topic_fanout.h), gets the topic's next id and is kept
 * in the topic's history (history.h: each topic has a slot of its own,
 * after the uids'), so that a client resumes each topic where it left it.
 *
 * The index, topic -> streams and stream -> topics, costs per
 * subscription 12 bytes on the topic's side (a stream pointer and the
 * index of the subscription record, in one block that grows by half and
 * shrinks below a third: 15 bytes on average) and a 12-byte subscription
 * record (topic, place in the topic's block, the link to the stream's
 * next one) from blocks of 16 Ki records; a stream with any subscription
 * also has a 16-byte entry in a side table kept at most three quarters
 * full (lib/ptrmap.h): 21 to 43 bytes a stream. A stream without topics costs
 * nothing here. Removal is O(1) on the topic's side (the last member takes
 * the leaver's place, its record told where), O(the stream's topics) on
 * the stream's, which --max-topics-per-stream bounds. While a stream
 * replays, each of its subscriptions' next id is in another side table
 * (topic_sub_next).
 *
 * A topic is held while a stream is subscribed, and for linger_s after
 * its last one left (its history's TTL: a client that comes back within
 * it resumes; the masters keep sending it meanwhile). Then it is given
 * up, its index free for another name. A topic costs 40 bytes in the
 * table, 8 in its hash, 16 for its history slot, 72 for its name (kept
 * by the history, in the --history-file: the one copy) and 4 for its
 * bytes kept (history.h), 140 in all; an
 * unused one nothing but address space: they are touched only as indices
 * are used, lowest first.
 *
 * Loop thread only. */
#ifndef HTTPDCNODE_TOPIC_H
#define HTTPDCNODE_TOPIC_H

#include "lib/topic_name.h"
#include "lib/carry.h"

#include <event2/event.h>
#include <stddef.h>
#include <stdint.h>

struct stream;

struct topic_config {
    struct event_base *base;
    uint32_t max_users;         /* topic t's history slot is max_users + t */
    uint32_t max_topics;        /* --max-topics: topics held at once */
    uint32_t per_stream;        /* --max-topics-per-stream */
    uint32_t per_topic;         /* --max-streams-per-topic */
    uint32_t linger_s;          /* a topic with no stream is held this long; 0: given up at once */
    /* Who hears of changes (topic_presence.h), NULL: none: t's streams
     * changed in number (or it was made), t is about to be given up, s
     * joined or left t. */
    void (*changed)(uint32_t t);
    void (*gone)(uint32_t t);
    void (*member)(uint32_t t, const struct stream *s, int joined);
};

/* With a history that a restart resumed (history_resumed), the topics it
 * kept are held again, lingering. With one taken over (a hot upgrade:
 * history_taken_over) they are held again at once, silently: the record
 * below says which streams hold them. -1 when out of memory (logged). */
int topic_init(const struct topic_config *cfg);
void topic_free(void);
extern struct topic_config topic_cfg;

/* Why a subscription is refused; its name is what the client is told. */
enum topic_refusal {
    TOPIC_OK = 0,
    TOPIC_BAD_NAME,             /* not a topic name (topic_name.h) */
    TOPIC_STREAM_FULL,          /* the stream has --max-topics-per-stream */
    TOPIC_FULL,                 /* the topic has --max-streams-per-topic */
    TOPIC_NO_ROOM,              /* --max-topics are held */
    TOPIC_DENIED,               /* neither its token nor the handler allows it */
    TOPIC_NO_MEMORY,
    TOPIC_REFUSALS
};
const char *topic_refusal_name(enum topic_refusal r);
/* Counts the refusal (stats.h). */
void topic_count_refusal(enum topic_refusal r);

/* Topics are 1..max_topics; 0 is none. */
uint32_t topic_find(const char *name, size_t len);
/* Whether t is a topic held now. */
int topic_held(uint32_t t);
static inline uint32_t topic_slot(uint32_t t) { return topic_cfg.max_users + t; }
/* t's name (not NUL-terminated) and its length. */
const char *topic_name(uint32_t t, uint8_t *len);
/* Streams subscribed to t now. */
uint32_t topic_members(uint32_t t);
/* t's members, in an array that holds until the next subscription change
 * (topic_fanout.c copies it before writing). */
struct stream *const *topic_member_array(uint32_t t);

/* Whether s could subscribe to name now (the checks of topic_subscribe,
 * nothing changed): for the HTTP door, before the stream exists. Topics
 * named more than once count once; *fresh (may be NULL) counts the names
 * that would make a topic. */
enum topic_refusal topic_would_take(const char *name, size_t len, uint32_t *fresh);

/* s subscribes to name (held from now on, made if needed): *t is the
 * topic. A stream already subscribed is OK, nothing changes. */
enum topic_refusal topic_subscribe(struct stream *s, const char *name, size_t len, uint32_t *t);
/* s leaves t: 1, or 0 when it was not subscribed. */
int topic_unsubscribe(struct stream *s, uint32_t t);
/* Every subscription of s goes (when it closes: topic_join.h). */
void topic_leave_all(struct stream *s);

/* A stream's subscriptions, for the replay (replay.c) and long-poll
 * answers: 12 bytes each. */
struct topic_sub {
    uint32_t topic;
    uint32_t pos;               /* its place in the topic's block */
    uint32_t link;              /* the stream's next subscription, 0: none */
};
/* s's first subscription (0: none), and the one after sub. */
uint32_t topic_stream_first(const struct stream *s);
struct topic_sub *topic_sub_at(uint32_t sub);
static inline uint32_t topic_stream_next(uint32_t sub) { return topic_sub_at(sub)->link; }
/* s's subscription to t, 0 when none. */
uint32_t topic_sub_of(const struct stream *s, uint32_t t);
/* A replay of s is under way (on), or over: from the mark on, a
 * subscription s makes is given what comes from then (its next id), and
 * each of its subscriptions' next id is kept (the replay's); they go when
 * it is over. -1 when out of memory. */
int topic_replay_mark(struct stream *s, int on);
/* While s replays: sub's next id (0: none set), and setting it (-1: out
 * of memory). */
uint32_t topic_sub_next(uint32_t sub);
int topic_sub_set_next(uint32_t sub, uint32_t next);
/* Topics s is subscribed to. */
uint32_t topic_stream_count(const struct stream *s);

/* A topic a request names, and the id its client saw last there. */
struct topic_request {
    char name[TOPIC_NAME_MAX];
    uint8_t len;
    uint8_t since_len;          /* 0: none given */
    uint8_t ask;                /* the handler decides, once the stream is open */
    char since[32];
};
/* The topics the request at the door named (at most 255), kept for the
 * stream it opens (topic_requests_own), for its replay in the same loop
 * callback (replay.c): topic_stream_requests. */
void topic_requests_set(const struct topic_request *r, uint32_t n);
const struct topic_request *topic_requests(uint32_t *n);
void topic_requests_own(const struct stream *s);
const struct topic_request *topic_stream_requests(const struct stream *s, uint32_t *n);

/* A hot upgrade (upgrade/): the topics held (the names are the history's,
 * handed over with it) with the time each lingering one has left, and
 * each carried stream's subscriptions in the order it made them, with
 * their next ids while it replays (index_of: UINT32_MAX for a stream not
 * carried). take, after the streams: each stream subscribed again at the
 * topic index it had (so at its history slot), with no presence told nor
 * handler asked (the masters know it: topic_presence's record). -1 when
 * malformed, or out of memory. */
#define TOPIC_CARRY_TAG CARRY_TAG('T', 'O', 'P', 'C')
#define TOPIC_CARRY_VERSION 1
int topic_carry_export(struct carry_out *o, uint32_t (*index_of)(const void *s));
int topic_carry_take(struct carry_in *rec, uint16_t version, struct stream *(*at)(uint32_t i));

/* Held topics: the first after t (0: from the start), 0 at the end. */
uint32_t topic_next_held(uint32_t t);
/* Bytes the index takes now (the table's touched part aside). */
size_t topic_index_bytes(void);

#endif
