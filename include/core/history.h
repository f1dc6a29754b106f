/* SPDX-License-Identifier: Apache-2.0 */
/* Message ids and the recent messages of every uid, online or not, so that
 * a client coming back gets what it missed, or is told it cannot.
 *
 * Every message to a uid gets the id EPOCH:SEQ: SEQ counts the uid's
 * messages from 1, EPOCH is drawn when a history starts (a client coming
 * back to a restarted server, or to another node, sees its history is
 * gone). Copies are kept in one arena of fixed size, oldest out first
 * across all uids, at most N per uid and none older than the TTL. No
 * allocation per message; what a client missed is found by walking back
 * from the uid's newest message: O(messages missed). Loop thread only.
 *
 * With a file (--history-file), all of it (ids, messages, epoch) lives in
 * the file, mapped shared, and a process killed at any instruction leaves
 * it whole: the next run with the same file and node name goes on with
 * the same epoch and ids, and its clients resume with no gap. */
#ifndef HTTPDCNODE_HISTORY_H
#define HTTPDCNODE_HISTORY_H

#include "lib/carry.h"
#include "lib/topic_name.h"

#include <stddef.h>
#include <stdint.h>

/* The longest topic name (core/topic.h checks names against it). */
#define HISTORY_TOPIC_NAME_MAX TOPIC_NAME_MAX

struct history_config {
    uint32_t max_users;     /* uids 1..max_users */
    uint32_t max_topics;    /* topic slots, after the uids' (core/topic.h) */
    uint32_t per_uid;       /* messages kept per uid; 0: none (ids only) */
    uint32_t per_topic;     /* messages kept per topic; 0: none */
    size_t topic_bytes;     /* bytes kept per topic (headers counted) at most; 0: no bound */
    uint32_t ttl_s;         /* none older than this */
    uint32_t topic_ttl_s;   /* none of a topic older than this; 0: ttl_s */
    size_t bytes;           /* the arena (at most 16 GiB) */
    uint32_t max_message;   /* the largest payload (0: a quarter of the arena) */
    const char *file;       /* NULL: in memory; else where it lives, locked */
    const char *node;       /* who keeps it: a file of another node is not used */
};

/* -1 (logged) when it cannot start: no memory, or a file that cannot be
 * used (in use by another process, not a history, not writable). A file
 * that is damaged or not this run's is logged and started afresh. */
int history_init(const struct history_config *cfg);
/* Unmapped; a file stays, unlocked, for the next run. */
void history_free(void);

/* A hot upgrade (upgrade/): the history goes to the process taking over
 * as a descriptor, the --history-file's (locked through it) or, for a
 * history in memory, a memory file it is copied to; ids, epoch and kept
 * messages go on there as they were. The running process stops writing
 * it first. Export: -1 (logged) when the copy cannot be made; release
 * closes the copy (once the hand-over is over, either way). take, before
 * history_init (which then maps it): -1 when the record is malformed. */
#define HISTORY_CARRY_TAG CARRY_TAG('H', 'I', 'S', 'T')
#define HISTORY_CARRY_VERSION 2     /* 2: the topics' slots and names (layout 2) */
int history_carry_export(struct carry_out *o);
void history_carry_release(void);
int history_carry_take(struct carry_in *rec, uint16_t version, const int *fds, uint32_t nfds);

/* This run's epoch, and as the 8 hex digits of ids. */
uint32_t history_epoch(void);
const char *history_epoch_hex(void);

/* The next id of uid's message data[0..len), which is kept (when history
 * is on and the message is not larger than a quarter of the arena), and
 * with it whether it is binary (cmd.h): a replay sends it as it went live. */
uint32_t history_append(uint32_t uid, const char *data, uint32_t len, int binary);

/* A payload for many uids (a multicast, a broadcast), kept once: the
 * handle for history_append_shared, 0 when it is not kept. */
uint64_t history_share(const char *data, uint32_t len, int binary);
/* history_append for a payload kept by history_share. */
uint32_t history_append_shared(uint32_t uid, uint64_t shared);

/* The last id given to uid (0: none yet). */
uint32_t history_last_seq(uint32_t uid);

/* Gives uid its next id without a message: one lost before it reached
 * this node. A client resuming across it is told a gap (the id is never
 * kept); returns it. */
uint32_t history_skip(uint32_t uid);

/* What a client that saw up to EPOCH:SEQ missed. */
struct history_replay {
    int gap;                /* it missed more than is kept (or EPOCH is not ours) */
    uint32_t first_seq;     /* the oldest id still kept for the uid, 0: none */
    uint32_t n;             /* messages to replay, oldest first, in pos[] */
    uint64_t pos[];         /* history_message() reads each */
};

/* Fills r (room for max messages) for uid after epoch:seq, as a cursor
 * from history_resume would give them; known = 0 when
 * the client gave no id (a first connect: nothing to replay, no gap). */
void history_since(uint32_t uid, int known, uint32_t epoch, uint32_t seq,
                   struct history_replay *r, uint32_t max);

/* Where a replay stands in a uid's history: the id it gives next. It
 * holds no reference: a message pushed out meanwhile is found missing. */
struct history_cursor {
    uint64_t pos;           /* position + 1 of that id's entry, 0: look it up */
    uint32_t seq;           /* that id */
};

/* A client that saw up to epoch:seq comes back (known = 0: it gave no id):
 * c is set at the first id to give it (past the newest when there is
 * nothing to replay), *first_seq to the oldest kept one it gets (0: none).
 * Returns 1 when it missed more than is kept (a gap), else 0. O(messages
 * kept for uid), at most --history steps; nothing is copied. */
int history_resume(uint32_t uid, int known, uint32_t epoch, uint32_t seq,
                   struct history_cursor *c, uint32_t *first_seq);

/* The message at c (data, len, seq, binary), and c moves past it: 1. 0 when c is
 * past the uid's newest id (caught up). -1 when c's id is no longer
 * kept (pushed out, or more than --history behind the newest): c moves to
 * the oldest still kept (past the newest when none), a gap to tell. */
int history_next(uint32_t uid, struct history_cursor *c, const char **data, uint32_t *len,
                 uint32_t *seq, int *binary);

/* Parses "EPOCH:SEQ" (8 hex digits, a decimal); -1 when malformed. */
int history_parse_id(const char *text, uint32_t *epoch, uint32_t *seq);

/* A gap told to a client, the same on every transport:
 * {"last":"E:S","first":"E:S","next":"E:S"} with the id it asked from
 * (null when unreadable), the oldest still kept that it gets (null when
 * none) and the id to come back with if it leaves before the rest (the one
 * before first, else the uid's newest); its length. */
#define HISTORY_GAP_JSON_MAX 128
size_t history_gap_json(char out[HISTORY_GAP_JSON_MAX], uint32_t slot, const char *asked,
                        uint32_t first_seq, uint32_t next_seq);

/* Topics (core/topic.h) have slots of their own after the uids', each
 * with its ids and kept messages, bounded by per_topic as a uid's by
 * per_uid, and by topic_ttl_s and topic_bytes: a topic keeps its newest
 * messages within topic_bytes (each counted as its entry, header and
 * payload padded to 8), so that a busy topic of large messages pushes out
 * its own older messages, not everyone else's (a message larger than
 * topic_bytes is not kept: a resume across it is a gap); its older ones
 * are pushed out as the arena needs room (counted: topic_history_trimmed).
 * 4 bytes per topic in memory (its bytes so far, rebuilt from the arena
 * when a history is resumed or taken over). Every call above takes a
 * slot for its uid. A topic's ids have
 * an epoch of their own, drawn when the topic is made: a topic made again
 * (after it was given up) starts a new epoch, so that an id of the one
 * before tells a gap. */

/* The epoch of the slot's ids: the history's for a uid, the topic's own. */
uint32_t history_slot_epoch(uint32_t slot);
/* Whether this run goes on with a file an earlier run left (its topics'
 * names are read back with history_topic_name). */
int history_resumed(void);

/* The masters' numbered streams kept in the file, one record per origin
 * slot (core/history_origins.h); NULL without a file. */
#define HISTORY_ORIGINS 16
struct history_origin;
struct history_origin *history_origin_records(void);

/* Whether this process took the history over from the running one (a hot
 * upgrade): its topics' names are there too, each topic as it was. */
int history_taken_over(void);
/* The topic slot starts for the topic name[len]: a new epoch (returned),
 * no message kept; ids go on from the slot's last. Its name is kept with
 * it (in the file: a restart finds the topic again). */
uint32_t history_topic_open(uint32_t slot, const char *name, uint8_t len);
/* The topic of the slot is given up: a restart finds none there. */
void history_topic_close(uint32_t slot);
/* The name of the topic of slot, as kept (a restart): its length, 0 when
 * the slot holds no topic. */
int history_topic_name(uint32_t slot, char name[HISTORY_TOPIC_NAME_MAX]);
/* The name of the topic open on slot (history_topic_open), where it is
 * kept, and its length: the topics' one copy of their names. */
const char *history_topic_name_ptr(uint32_t slot, uint8_t *len);

/* The kept message at pos (from a replay made in the same loop turn). */
const char *history_message(uint64_t pos, uint32_t *len, uint32_t *seq, int *binary);

#endif
