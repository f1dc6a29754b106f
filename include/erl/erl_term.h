/* SPDX-License-Identifier: Apache-2.0 */
/* Decoding of the Erlang terms the C-node accepts. Pure: no I/O, no
 * allocation, so every accepted and rejected shape is unit-tested.
 *
 *   {Uid, Data}             Data to every stream of Uid
 *   {[Uid, ...], Data}      the same to each listed uid
 *   {broadcast, Data}       to every stream
 *   {kick, Uid}             end Uid's streams
 *   {drain, Seconds}        end every stream over Seconds (0..3600) and
 *                           refuse new ones (503): drain.h
 *   {drain, cancel}         stop that, take new streams again
 *   {Pid, Ref, Uid | [Uid], Data}   as {Uid, Data}, replies {Ref, N} to Pid
 *   {Pid, Ref, stats}       replies {Ref, #{...}} to Pid
 *   {Pid, Ref, snapshot}    presence snapshot to the master, then {Ref, N} to Pid
 *   {conn, Conn, Data}      Data to the one connection Conn (an integer id
 *                           from {httpdcnode_in, ...}, 0 for none); {Pid,
 *                           Ref, conn, Conn, Data} replies {Ref, 0 | 1} to Pid
 *   {topic, Topic, Data}    Data to the topic's streams (core/topic.h);
 *                           {Pid, Ref, topic, Topic, Data} replies {Ref, N}
 *   {subscribe, Conn, Topic}, {unsubscribe, Conn, Topic}   the connection
 *                           joins or leaves the topic; {Pid, Ref, ...}
 *                           replies {Ref, 1 | 0} (done, or not)
 *   {subscribe, Conn, Topic, Since}, {refuse_join, Conn, Topic, Reason}
 *                           the handler's answers to a join it was asked
 *                           about (core/topic_join.h); Since the id to
 *                           resume from (<<>>: none), Reason printable
 *   {httpdcnode_in_ack, N}  the --inbox process handled N more client
 *                           messages (its window, erl_send.c)
 *   {httpdcnode_in_reset, Name}  a new inbox process registered as Name
 *                           started: what the old one did not acknowledge
 *                           is gone
 *   {httpdcnode_seq, Master, Inc, Seq, Inner}  Inner numbered Seq in the
 *                           stream of master Master's run Inc (erl_seq.h);
 *                           Inner is {Uid | [Uid], Data}, {Pid, Ref, Uid |
 *                           [Uid], Data}, {topic, Topic, Data}, {Pid, Ref,
 *                           topic, Topic, Data}, or {httpdcnode_gap, Last,
 *                           [Uid]} or {httpdcnode_gap, Last, [Uid], [Topic]}:
 *                           Seq..Last were lost, tell those uids and topics
 *                           a gap
 *   {httpdcnode_seq_base, Master, Inc, Base, AckTo}  that stream goes on
 *                           after Base; acknowledge it to the name AckTo
 *
 * Data is a binary, a string or any iolist; it must not be empty (an empty
 * chunk would end a chunked stream), except in {conn, ...}: the stream's
 * transport says there (dispatch.c). Data may say what the message is:
 * {binary, Data} goes as binary (a WebSocket binary frame, SSE's event:
 * base64, long-poll's data_base64) whatever its bytes; {text, Data} as
 * text, refused (TERM_NOT_UTF8) unless valid UTF-8. Untagged, it is text
 * when valid UTF-8, else binary. A term nested deeper than
 * TERM_MAX_DEPTH, or whose encoding runs past the message, is refused as a
 * bad shape. */
#ifndef HTTPDCNODE_ERL_TERM_H
#define HTTPDCNODE_ERL_TERM_H

#include <ei.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cmd.h"

enum term_error {
    TERM_OK = 0,
    TERM_BAD_SHAPE,   /* not one of the shapes above */
    TERM_BAD_UID,     /* uid not an integer in 1..max_users */
    TERM_TOO_BIG,     /* payload over max_message, uid list too long, or the whole
                         record (cmd_size) over max_record */
    TERM_EMPTY,       /* empty payload */
    TERM_NOT_UTF8,    /* {text, Data} whose Data is not valid UTF-8 */
    TERM_BAD_TOPIC,   /* a topic that is no topic name (lib/topic_name.h) */
};

/* The longest id a handler's {subscribe, Conn, Topic, Since} carries back. */
#define TERM_MAX_SINCE 31

/* Deepest nesting accepted (a left-nested iolist of this many parts);
 * the C-node thread's stack is sized for ei's recursion to this depth. */
#define TERM_MAX_DEPTH 100000

/* The largest encoded {Pid, Ref} pair ei decodes: a NEW_PID_EXT and a
 * NEWER_REFERENCE_EXT of 5 words, each naming its node with an atom of
 * 255 characters of 4 UTF-8 bytes (3 + 1020 bytes). Any node can make
 * such a pid (binary_to_term of hand-made bytes). */
#define TERM_MAX_PID_LEN (1 + 3 + 1020 + 4 + 4 + 4)
#define TERM_MAX_REF_LEN (1 + 2 + 3 + 1020 + 4 + 5 * 4)
#define TERM_MAX_REPLY_LEN (TERM_MAX_PID_LEN + TERM_MAX_REF_LEN)

/* The longest {drain, Seconds}, as --drain-seconds. */
#define TERM_MAX_DRAIN_SECONDS 3600

struct term_limits {
    uint32_t max_users;
    uint32_t max_message;
    uint32_t max_uids;     /* longest accepted uid list */
    size_t max_record;     /* largest cmd_size() of an accepted message */
};

/* Limits for records of at most max_record bytes: max_uids is what is left
 * once the largest payload and the largest {Pid, Ref} are in, so that every
 * accepted message fits (erl_term_parse checks the sum too). */
void erl_term_limits_init(struct term_limits *lim, uint32_t max_users, uint32_t max_message,
                      size_t max_record);

struct term_view {
    enum cmd_kind kind;    /* the command the term asks for */
    uint32_t uid;          /* CMD_UNICAST, CMD_KICK; CMD_DRAIN: the seconds */
    uint32_t nuids;        /* CMD_MULTICAST */
    uint64_t conn;         /* CMD_CONN */
    int uids_index;        /* where the uid list starts in buf */
    int topic_index;       /* topic kinds: where Topic starts in buf */
    uint32_t topic_len;    /* its bytes (nuids: the words it takes in the record) */
    int payload_index;     /* where Data starts in buf; CMD_IN_RESET: Name */
    uint32_t payload_len;
    uint8_t binary;        /* as struct cmd's: said by Erlang, else by the bytes */
    int has_reply;         /* the {Pid, Ref, ...} forms */
    int reply_index;       /* where Pid starts in buf */
    int reply_len;         /* bytes of Pid and Ref, encoded */
    /* {httpdcnode_seq, ...} and {httpdcnode_seq_base, ...}: */
    int numbered;          /* 1: the view is Inner's, numbered as below */
    int seq_master_index;  /* where Master (an atom) is in buf */
    int seq_ack_to_index;  /* CMD_SEQ_BASE: where AckTo (an atom) is */
    uint64_t seq_inc;      /* Inc */
    uint64_t seq;          /* Seq; CMD_SEQ_BASE: Base */
    uint64_t seq_last;     /* CMD_GAP: Last; else Seq */
    int gap_topics_index;  /* CMD_GAP: where its first topic is in buf */
    uint32_t gap_ntopics;  /* CMD_GAP: its topics (payload_len: their bytes in the record) */
};

/* Checks the term at buf[index] (index just past the version byte), which
 * must lie wholly before buf[end], and fills v. Everything is validated
 * here, so the copies below cannot fail nor read past end. */
enum term_error erl_term_parse(const char *buf, int index, int end, const struct term_limits *lim,
                           struct term_view *v);

/* Copies the topic of a topic kind's view (cmd_is_topic) into out[topic_len]. */
void erl_term_copy_topic(const char *buf, const struct term_view *v, char *out);

/* Copies the topics of a CMD_GAP view into out[payload_len], each its
 * length in a byte, then its name (cmd.h). */
void erl_term_copy_gap_topics(const char *buf, const struct term_view *v, char *out);

/* Copies the uid list of a CMD_MULTICAST view into out[nuids]. */
void erl_term_copy_uids(const char *buf, const struct term_view *v, uint32_t *out);

/* Whether the term at buf[index] (of a view erl_term_parse accepted) is
 * the atom name, whole. */
int erl_term_atom_is(const char *buf, int index, const char *name);

/* Copies the payload (flattening an iolist) into out[payload_len]. */
void erl_term_copy_payload(const char *buf, const struct term_view *v, char *out);

const char *erl_term_error_str(enum term_error e);

#endif
