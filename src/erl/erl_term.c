/* SPDX-License-Identifier: Apache-2.0 */
/* Validation and extraction of the message terms listed in erl_term.h. */
#include "erl/erl_term.h"
#include "core/cmd.h"
#include "lib/topic_name.h"
#include "lib/utf8.h"

#include <string.h>

/* The atom at index is name (ASCII), whole: an atom may hold a NUL, so its
 * encoded length is compared too ('drain\0x' is not drain). */
static int atom_is(const char *buf, int index, const char *name)
{
    char atom[MAXATOMLEN_UTF8];
    int type, size;
    return ei_get_type(buf, &index, &type, &size) == 0 && (size_t)size == strlen(name) &&
           ei_decode_atom(buf, &index, atom) == 0 && strcmp(atom, name) == 0;
}

/* An integer uid in 1..max at *index; advances past it. */
static enum term_error decode_uid(const char *buf, int *index, uint32_t max, uint32_t *out)
{
    int type, size;
    long long v;
    if (ei_get_type(buf, index, &type, &size) != 0)
        return TERM_BAD_SHAPE;
    if (type != ERL_SMALL_INTEGER_EXT && type != ERL_INTEGER_EXT &&
        type != ERL_SMALL_BIG_EXT && type != ERL_LARGE_BIG_EXT) {
        if (ei_skip_term(buf, index) != 0)
            return TERM_BAD_SHAPE;
        return TERM_BAD_UID;
    }
    if (ei_decode_longlong(buf, index, &v) != 0) {     /* a bignum past 64 bits */
        ei_skip_term(buf, index);
        return TERM_BAD_UID;
    }
    if (v < 1 || (unsigned long long)v > max)
        return TERM_BAD_UID;
    *out = (uint32_t)v;
    return TERM_OK;
}

/* {drain, Seconds}: an integer 0..TERM_MAX_DRAIN_SECONDS, anything else a
 * bad shape (counted as bad_terms). */
static enum term_error decode_seconds(const char *buf, int *index, uint32_t *out)
{
    long long v;
    if (ei_decode_longlong(buf, index, &v) != 0 || v < 0 || v > TERM_MAX_DRAIN_SECONDS)
        return TERM_BAD_SHAPE;
    *out = (uint32_t)v;
    return TERM_OK;
}

/* A proper list of uids (or the string form Erlang uses when all are < 256). */
static enum term_error decode_uid_list(const char *buf, int *index, const struct term_limits *lim,
                                       struct term_view *v)
{
    int type, size, arity;
    uint32_t uid;

    if (ei_get_type(buf, index, &type, &size) != 0)
        return TERM_BAD_SHAPE;
    v->uids_index = *index;
    if (type == ERL_STRING_EXT) {
        const unsigned char *s = (const unsigned char *)buf + *index + 3;
        for (int i = 0; i < size; i++)
            if (s[i] == 0 || s[i] > lim->max_users)
                return TERM_BAD_UID;
        if ((uint32_t)size > lim->max_uids)
            return TERM_TOO_BIG;
        v->nuids = (uint32_t)size;
        return ei_skip_term(buf, index) == 0 ? TERM_OK : TERM_BAD_SHAPE;
    }
    if (ei_decode_list_header(buf, index, &arity) != 0)
        return TERM_BAD_SHAPE;
    if ((uint32_t)arity > lim->max_uids)
        return TERM_TOO_BIG;
    for (int i = 0; i < arity; i++) {
        enum term_error e = decode_uid(buf, index, lim->max_users, &uid);
        if (e != TERM_OK)
            return e;
    }
    if (arity > 0 && (ei_get_type(buf, index, &type, &size) != 0 || type != ERL_NIL_EXT ||
                      ei_skip_term(buf, index) != 0))
        return TERM_BAD_SHAPE;                           /* improper list */
    v->nuids = (uint32_t)arity;
    return TERM_OK;
}

/* What Data says it is: {binary, Data}, {text, Data}, or untagged. */
enum data_type { DATA_UNTAGGED, DATA_TEXT, DATA_BINARY };

/* Past the tag of {binary | text, Data} at *index, to Data; an untagged
 * Data (any other term) is left where it is. */
static enum data_type decode_type(const char *buf, int *index)
{
    int at = *index, arity;
    enum data_type t = DATA_UNTAGGED;
    if (ei_decode_tuple_header(buf, &at, &arity) != 0 || arity != 2)
        return t;
    if (atom_is(buf, at, "binary"))
        t = DATA_BINARY;
    else if (atom_is(buf, at, "text"))
        t = DATA_TEXT;
    if (t != DATA_UNTAGGED && ei_skip_term(buf, &at) == 0)
        *index = at;
    return t;
}

/* Whether the iodata encoded at buf[index..end), which ei_decode_iodata
 * took, is valid UTF-8 once flattened: its encoding lists the bytes in
 * order (binaries, strings, byte integers between list headers), so they
 * are fed to one validation as they lie, without a copy or recursion. */
static int iodata_utf8(const char *buf, int index, int end)
{
    struct utf8_state st = {0};
    int type, size, ok = 1;
    long byte = 0;
    while (ok && index < end && ei_get_type(buf, &index, &type, &size) == 0) {
        const uint8_t *p = (const uint8_t *)buf + index;
        if (type == ERL_BINARY_EXT) {
            ok = utf8_feed(&st, p + 5, (size_t)size);
            index += 5 + size;
        } else if (type == ERL_STRING_EXT) {
            ok = utf8_feed(&st, p + 3, (size_t)size);
            index += 3 + size;
        } else if (type == ERL_SMALL_INTEGER_EXT || type == ERL_INTEGER_EXT) {
            ok = ei_decode_long(buf, &index, &byte) == 0;
            uint8_t b = (uint8_t)byte;
            ok = ok && utf8_feed(&st, &b, 1);
        } else {
            ok = ei_decode_list_header(buf, &index, NULL) == 0;   /* a list's or nil */
        }
    }
    return ok && index == end && utf8_complete(&st);
}

/* v->binary for the Data just decoded (it ends at end): as its tag says,
 * else by its bytes. */
static enum term_error decide_type(const char *buf, int end, enum data_type type,
                                   struct term_view *v)
{
    if (type == DATA_BINARY) {
        v->binary = 1;
        return TERM_OK;
    }
    int utf8 = iodata_utf8(buf, v->payload_index, end);
    if (type == DATA_TEXT && !utf8)
        return TERM_NOT_UTF8;
    v->binary = !utf8;
    return TERM_OK;
}

/* Data: binary, string or iolist, maybe tagged; at most max_message
 * bytes, and not empty unless may_be_empty. */
static enum term_error decode_data(const char *buf, int *index, const struct term_limits *lim,
                                   int may_be_empty, struct term_view *v)
{
    int size;
    enum data_type type = decode_type(buf, index);
    v->payload_index = *index;
    if (ei_decode_iodata(buf, index, &size, NULL) != 0)
        return TERM_BAD_SHAPE;
    if (size == 0 && !may_be_empty)
        return TERM_EMPTY;
    if ((uint32_t)size > lim->max_message)
        return TERM_TOO_BIG;
    v->payload_len = (uint32_t)size;
    return decide_type(buf, *index, type, v);
}

/* A message for uids: an empty one would end a chunked stream. */
static enum term_error decode_payload(const char *buf, int *index, const struct term_limits *lim,
                                      struct term_view *v)
{
    return decode_data(buf, index, lim, 0, v);
}

/* Uid | [Uid] then Data, the tail shared by {Uid, Data} and {Pid, Ref, Uid, Data}. */
static enum term_error decode_target_and_payload(const char *buf, int *index,
                                                 const struct term_limits *lim,
                                                 struct term_view *v)
{
    int type, size;
    enum term_error e;
    if (ei_get_type(buf, index, &type, &size) != 0)
        return TERM_BAD_SHAPE;
    if (type == ERL_LIST_EXT || type == ERL_STRING_EXT || type == ERL_NIL_EXT) {
        v->kind = CMD_MULTICAST;
        e = decode_uid_list(buf, index, lim, v);
    } else {
        v->kind = CMD_UNICAST;
        e = decode_uid(buf, index, lim->max_users, &v->uid);
    }
    if (e != TERM_OK)
        return e;
    return decode_payload(buf, index, lim, v);
}

/* Conn then Data: {conn, Conn, Data} after its atom. Conn 0 (a POST
 * /send/N that named no stream) is taken, to be counted as naming none
 * (conn_dropped); Data may be empty where the stream can carry it
 * (dispatch.c). */
static enum term_error decode_conn(const char *buf, int *index, const struct term_limits *lim,
                                   struct term_view *v)
{
    unsigned long long id;
    if (ei_decode_ulonglong(buf, index, &id) != 0)
        return TERM_BAD_SHAPE;
    v->kind = CMD_CONN;
    v->conn = id;
    return decode_data(buf, index, lim, 1, v);
}

/* ---------------------------------------------------------------- topics */

/* A topic name at *index: a binary, string or iolist of a topic name's
 * bytes (topic_name.h); *size its bytes. Advances past it. */
static enum term_error decode_topic_name(const char *buf, int *index, int *size)
{
    int at = *index;
    char name[TOPIC_NAME_MAX];
    if (ei_decode_iodata(buf, index, size, NULL) != 0)
        return TERM_BAD_SHAPE;
    if (*size < 1 || *size > TOPIC_NAME_MAX || ei_decode_iodata(buf, &at, NULL, name) != 0 ||
        !topic_name_ok(name, (size_t)*size))
        return TERM_BAD_TOPIC;
    return TERM_OK;
}

/* Topic at *index; the view keeps where it lies. */
static enum term_error decode_topic(const char *buf, int *index, struct term_view *v)
{
    int size;
    enum term_error e = decode_topic_name(buf, index, &size);
    if (e != TERM_OK)
        return e;
    v->topic_len = (uint32_t)size;
    v->nuids = cmd_topic_words((uint32_t)size);
    return TERM_OK;
}

/* A short text (iodata of at most max bytes, maybe empty) as the payload:
 * a resume's id, a refusal's reason. printable: only topic name
 * characters and spaces (a reason is told to the client as it is). */
static enum term_error decode_short(const char *buf, int *index, uint32_t max, int printable,
                                    struct term_view *v)
{
    int size, at = *index;
    char text[TOPIC_NAME_MAX];
    v->payload_index = *index;
    if (ei_decode_iodata(buf, index, &size, NULL) != 0)
        return TERM_BAD_SHAPE;
    if ((uint32_t)size > max || (uint32_t)size > sizeof text ||
        ei_decode_iodata(buf, &at, NULL, text) != 0)
        return TERM_BAD_SHAPE;
    for (int i = 0; printable && i < size; i++)
        if (!topic_name_char(text[i]) && text[i] != ' ')
            return TERM_BAD_SHAPE;
    v->payload_len = (uint32_t)size;
    return TERM_OK;
}

/* {topic, Topic, Data}, {subscribe | unsubscribe, Conn, Topic} and the
 * handler's answers {subscribe, Conn, Topic, Since}, {refuse_join, Conn,
 * Topic, Reason}: the atom at index is known to be one of them. */
static enum term_error parse_topic_term(const char *buf, int index, int arity,
                                        const struct term_limits *lim, struct term_view *v)
{
    enum term_error e;
    unsigned long long conn = 0;
    int publish = atom_is(buf, index, "topic"), refuse = atom_is(buf, index, "refuse_join");
    int unsub = atom_is(buf, index, "unsubscribe");
    ei_skip_term(buf, &index);
    if (!publish && ei_decode_ulonglong(buf, &index, &conn) != 0)
        return TERM_BAD_SHAPE;
    v->conn = conn;
    v->topic_index = index;
    if ((e = decode_topic(buf, &index, v)) != TERM_OK)
        return e;
    if (publish) {
        if (arity != 3)
            return TERM_BAD_SHAPE;
        v->kind = CMD_TOPIC;
        return decode_payload(buf, &index, lim, v);
    }
    if (arity == 3 && !refuse) {
        v->kind = unsub ? CMD_UNSUBSCRIBE : CMD_SUBSCRIBE;
        return TERM_OK;
    }
    if (arity != 4 || unsub)
        return TERM_BAD_SHAPE;
    v->kind = refuse ? CMD_JOIN_REFUSED : CMD_JOIN_ALLOWED;
    return decode_short(buf, &index, refuse ? TOPIC_NAME_MAX : TERM_MAX_SINCE, refuse, v);
}

/* Whether the atom at index starts a topic term of this arity. */
static int is_topic_term(const char *buf, int index, int arity)
{
    if (arity == 3)
        return atom_is(buf, index, "topic") || atom_is(buf, index, "subscribe") ||
               atom_is(buf, index, "unsubscribe");
    return arity == 4 && (atom_is(buf, index, "subscribe") || atom_is(buf, index, "refuse_join"));
}

/* An atom at *index, whose place is kept in *at; advances past it. */
static enum term_error decode_atom_at(const char *buf, int *index, int *at)
{
    int type, size;
    if (ei_get_type(buf, index, &type, &size) != 0 ||
        (type != ERL_ATOM_EXT && type != ERL_SMALL_ATOM_EXT && type != ERL_ATOM_UTF8_EXT &&
         type != ERL_SMALL_ATOM_UTF8_EXT) ||
        size >= MAXATOMLEN)
        return TERM_BAD_SHAPE;
    *at = *index;
    return ei_skip_term(buf, index) == 0 ? TERM_OK : TERM_BAD_SHAPE;
}

/* Master, Inc, Seq of {httpdcnode_seq | httpdcnode_seq_base, Master, Inc, Seq, _}
 * at *index (past the tag); advances past them. */
static enum term_error decode_numbering(const char *buf, int *index, struct term_view *v)
{
    unsigned long long inc, seq;
    if (decode_atom_at(buf, index, &v->seq_master_index) != TERM_OK ||
        ei_decode_ulonglong(buf, index, &inc) != 0 || ei_decode_ulonglong(buf, index, &seq) != 0)
        return TERM_BAD_SHAPE;
    v->seq_inc = inc;
    v->seq = v->seq_last = seq;
    return TERM_OK;
}

static enum term_error parse_tuple(const char *buf, int index, const struct term_limits *lim,
                                   struct term_view *v);

/* The topics of a gap at *index, a proper list of topic names: their
 * place and number in the view, and the bytes they take in the record's
 * payload (each its length in a byte, then its name: cmd.h). */
static enum term_error decode_gap_topics(const char *buf, int *index, struct term_view *v)
{
    int type, size, n;
    if (ei_get_type(buf, index, &type, &size) != 0)
        return TERM_BAD_SHAPE;
    if (type == ERL_NIL_EXT)
        return ei_skip_term(buf, index) == 0 ? TERM_OK : TERM_BAD_SHAPE;
    if (type != ERL_LIST_EXT || ei_decode_list_header(buf, index, &n) != 0)
        return TERM_BAD_SHAPE;
    v->gap_topics_index = *index;
    v->gap_ntopics = (uint32_t)n;
    for (int i = 0; i < n; i++) {
        enum term_error e = decode_topic_name(buf, index, &size);
        if (e != TERM_OK)
            return e;
        v->payload_len += 1 + (uint32_t)size;
    }
    if (ei_get_type(buf, index, &type, &size) != 0 || type != ERL_NIL_EXT ||
        ei_skip_term(buf, index) != 0)
        return TERM_BAD_SHAPE;                           /* improper list */
    return TERM_OK;
}

/* {httpdcnode_gap, Last, [Uid]} or {httpdcnode_gap, Last, [Uid], [Topic]}
 * after its tag: Seq..Last lost for the uids and the topics. */
static enum term_error decode_gap(const char *buf, int *index, int arity,
                                  const struct term_limits *lim, struct term_view *v)
{
    unsigned long long last;
    if (ei_decode_ulonglong(buf, index, &last) != 0 || last < v->seq)
        return TERM_BAD_SHAPE;
    v->seq_last = last;
    v->kind = CMD_GAP;
    int type, size;
    if (ei_get_type(buf, index, &type, &size) != 0 ||
        (type != ERL_LIST_EXT && type != ERL_STRING_EXT && type != ERL_NIL_EXT))
        return TERM_BAD_SHAPE;
    enum term_error e = decode_uid_list(buf, index, lim, v);
    return e != TERM_OK || arity == 3 ? e : decode_gap_topics(buf, index, v);
}

/* {httpdcnode_seq, Master, Inc, Seq, Inner} past its tag: Inner is a
 * message for uids or a topic (with or without {Pid, Ref}) or a gap;
 * nothing else is numbered. */
static enum term_error parse_numbered(const char *buf, int index, const struct term_limits *lim,
                                      struct term_view *v)
{
    int at, arity;
    enum term_error e = decode_numbering(buf, &index, v);
    if (e != TERM_OK)
        return e;
    v->numbered = 1;
    at = index;
    if (ei_decode_tuple_header(buf, &at, &arity) != 0)
        return TERM_BAD_SHAPE;
    if ((arity == 3 || arity == 4) && atom_is(buf, at, "httpdcnode_gap")) {
        ei_skip_term(buf, &at);
        return decode_gap(buf, &at, arity, lim, v);
    }
    if ((e = parse_tuple(buf, index, lim, v)) != TERM_OK)
        return e;
    return v->kind == CMD_UNICAST || v->kind == CMD_MULTICAST || v->kind == CMD_TOPIC
               ? TERM_OK : TERM_BAD_SHAPE;
}

/* {httpdcnode_seq_base, Master, Inc, Base, AckTo} past its tag. */
static enum term_error parse_base(const char *buf, int index, struct term_view *v)
{
    enum term_error e = decode_numbering(buf, &index, v);
    if (e != TERM_OK)
        return e;
    v->kind = CMD_SEQ_BASE;
    return decode_atom_at(buf, &index, &v->seq_ack_to_index);
}

static enum term_error parse_pair(const char *buf, int index, const struct term_limits *lim,
                                  struct term_view *v)
{
    if (atom_is(buf, index, "httpdcnode_in_ack")) {
        unsigned long long n;
        ei_skip_term(buf, &index);
        if (ei_decode_ulonglong(buf, &index, &n) != 0 || n > UINT32_MAX)
            return TERM_BAD_SHAPE;
        v->kind = CMD_IN_ACK;
        v->uid = (uint32_t)n;
        return TERM_OK;
    }
    if (atom_is(buf, index, "httpdcnode_in_reset")) {
        int type, size;
        ei_skip_term(buf, &index);
        if (ei_get_type(buf, &index, &type, &size) != 0 ||
            (type != ERL_ATOM_EXT && type != ERL_SMALL_ATOM_EXT &&
             type != ERL_ATOM_UTF8_EXT && type != ERL_SMALL_ATOM_UTF8_EXT))
            return TERM_BAD_SHAPE;
        v->kind = CMD_IN_RESET;
        v->payload_index = index;          /* the inbox's name */
        return TERM_OK;
    }
    if (atom_is(buf, index, "broadcast")) {
        ei_skip_term(buf, &index);
        v->kind = CMD_BROADCAST;
        return decode_payload(buf, &index, lim, v);
    }
    if (atom_is(buf, index, "drain")) {
        ei_skip_term(buf, &index);
        if (atom_is(buf, index, "cancel")) {
            v->kind = CMD_UNDRAIN;
            return TERM_OK;
        }
        v->kind = CMD_DRAIN;
        return decode_seconds(buf, &index, &v->uid);
    }
    if (atom_is(buf, index, "kick")) {
        ei_skip_term(buf, &index);
        v->kind = CMD_KICK;
        return decode_uid(buf, &index, lim->max_users, &v->uid);
    }
    int type, size;
    if (ei_get_type(buf, &index, &type, &size) != 0 ||
        type == ERL_ATOM_EXT || type == ERL_SMALL_ATOM_EXT ||
        type == ERL_ATOM_UTF8_EXT || type == ERL_SMALL_ATOM_UTF8_EXT)
        return TERM_BAD_SHAPE;
    return decode_target_and_payload(buf, &index, lim, v);
}

/* {Pid, Ref, ...}: records where Pid and Ref lie so the reply can be built. */
static enum term_error parse_reply_to(const char *buf, int *index, struct term_view *v)
{
    erlang_pid pid;
    erlang_ref ref;
    v->reply_index = *index;
    if (ei_decode_pid(buf, index, &pid) != 0 || ei_decode_ref(buf, index, &ref) != 0)
        return TERM_BAD_SHAPE;
    v->reply_len = *index - v->reply_index;
    if (v->reply_len > TERM_MAX_REPLY_LEN)
        return TERM_BAD_SHAPE;         /* cannot be: the bound is ei's */
    v->has_reply = 1;
    return TERM_OK;
}

/* ei's decoders trust the bytes they are given: a length field pointing
 * past the message would make them read (and copy to clients) whatever
 * lies after it. So every term is first walked here, within its bytes,
 * before ei looks at it. */
static uint32_t be16(const unsigned char *p) { return (uint32_t)p[0] << 8 | p[1]; }

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Bytes of the atom at p, or 0 when it is not an atom or does not fit in avail. */
static uint64_t atom_size(const unsigned char *p, uint64_t avail)
{
    uint64_t n;
    if (avail < 2)
        return 0;
    if (p[0] == ERL_SMALL_ATOM_EXT || p[0] == ERL_SMALL_ATOM_UTF8_EXT)
        n = 2 + (uint64_t)p[1];
    else if ((p[0] == ERL_ATOM_EXT || p[0] == ERL_ATOM_UTF8_EXT) && avail >= 3)
        n = 3 + (uint64_t)be16(p + 1);
    else
        return 0;
    return n <= avail ? n : 0;
}

/* Pid, port or reference at p: tag, [id count,] node atom, fixed tail. */
static uint64_t node_term_size(const unsigned char *p, uint64_t avail)
{
    uint64_t head = 1, tail, a;
    switch (p[0]) {
    case ERL_PID_EXT: tail = 9; break;
    case ERL_NEW_PID_EXT: tail = 12; break;
    case ERL_PORT_EXT: tail = 5; break;
    case ERL_NEW_PORT_EXT: tail = 8; break;
    case ERL_V4_PORT_EXT: tail = 12; break;
    case ERL_REFERENCE_EXT: tail = 5; break;
    default:                               /* ERL_NEW(ER)_REFERENCE_EXT */
        if (avail < 3 || be16(p + 1) > 5)      /* erlang_ref holds 5 ids */
            return 0;
        head = 3;
        tail = (p[0] == ERL_NEW_REFERENCE_EXT ? 1 : 4) + 4 * (uint64_t)be16(p + 1);
    }
    if (avail < head || (a = atom_size(p + head, avail - head)) == 0)
        return 0;
    return head + a + tail <= avail ? head + a + tail : 0;
}

/* Bytes of the term at p when it has no subterms; 0 when it does not fit
 * in avail or is refused: funs (ei's skipping recurses), old-style floats
 * (ei reads their text with sscanf, past its 31 bytes: Erlang sends
 * NEW_FLOAT_EXT), compressed terms, unknown tags. */
static uint64_t leaf_size(const unsigned char *p, uint64_t avail)
{
    uint64_t n;
    switch (p[0]) {
    case ERL_SMALL_INTEGER_EXT: n = 2; break;
    case ERL_INTEGER_EXT: n = 5; break;
    case NEW_FLOAT_EXT: n = 9; break;
    case ERL_NIL_EXT: n = 1; break;
    case ERL_ATOM_EXT: case ERL_SMALL_ATOM_EXT:
    case ERL_ATOM_UTF8_EXT: case ERL_SMALL_ATOM_UTF8_EXT:
        return atom_size(p, avail);
    case ERL_STRING_EXT: n = avail < 3 ? 0 : 3 + (uint64_t)be16(p + 1); break;
    case ERL_BINARY_EXT: n = avail < 5 ? 0 : 5 + (uint64_t)be32(p + 1); break;
    case ERL_BIT_BINARY_EXT: n = avail < 6 ? 0 : 6 + (uint64_t)be32(p + 1); break;
    case ERL_SMALL_BIG_EXT: n = avail < 2 ? 0 : 3 + (uint64_t)p[1]; break;
    case ERL_LARGE_BIG_EXT: n = avail < 5 ? 0 : 6 + (uint64_t)be32(p + 1); break;
    case ERL_PID_EXT: case ERL_NEW_PID_EXT: case ERL_PORT_EXT: case ERL_NEW_PORT_EXT:
    case ERL_V4_PORT_EXT: case ERL_REFERENCE_EXT: case ERL_NEW_REFERENCE_EXT:
    case ERL_NEWER_REFERENCE_EXT:
        return node_term_size(p, avail);
    default:
        return 0;
    }
    return n <= avail ? n : 0;
}

/* Header bytes of a tuple, list or map at p and its subterm count (a
 * list's tail included); 0 when p is no container or its header does not fit. */
static uint64_t container_header(const unsigned char *p, uint64_t avail, uint64_t *count)
{
    switch (p[0]) {
    case ERL_SMALL_TUPLE_EXT:
        if (avail < 2)
            return 0;
        *count = p[1];
        return 2;
    case ERL_LARGE_TUPLE_EXT:
    case ERL_LIST_EXT:
    case ERL_MAP_EXT:
        if (avail < 5)
            return 0;
        *count = be32(p + 1);
        *count = p[0] == ERL_LIST_EXT ? *count + 1 : p[0] == ERL_MAP_EXT ? *count * 2 : *count;
        return 5;
    default:
        return 0;
    }
}

/* Also bounds the nesting: ei's decoders recurse once per level, and a
 * term nested deep enough would overflow the C-node thread's stack. */
static uint32_t outer_pending[TERM_MAX_DEPTH];

/* The term at buf[index] lies within buf[..end), nests at most
 * TERM_MAX_DEPTH deep and holds no fun. Iterative. */
static int well_formed(const char *buf, int index, int end)
{
    const unsigned char *p = (const unsigned char *)buf;
    uint64_t at = (uint64_t)index, stop = (uint64_t)end, pending = 1, n, count;
    uint32_t depth = 0;

    if (index < 0 || end < index)
        return 0;
    for (;;) {
        while (pending == 0) {
            if (depth == 0)
                return 1;
            pending = outer_pending[--depth];
        }
        pending--;
        if (at >= stop)
            return 0;
        if ((n = container_header(p + at, stop - at, &count)) != 0) {
            /* every subterm takes a byte at least: no count past the end */
            if (count > stop - at - n || depth == TERM_MAX_DEPTH)
                return 0;
            outer_pending[depth++] = (uint32_t)pending;
            pending = count;
        } else if ((n = leaf_size(p + at, stop - at)) == 0) {
            return 0;
        }
        at += n;
    }
}

void erl_term_limits_init(struct term_limits *lim, uint32_t max_users, uint32_t max_message,
                      size_t max_record)
{
    size_t fixed = cmd_size(0, max_message, TERM_MAX_REPLY_LEN);
    size_t uids = max_record > fixed ? (max_record - fixed) / 4 : 0;
    lim->max_users = max_users;
    lim->max_message = max_message;
    lim->max_uids = uids > UINT32_MAX ? UINT32_MAX : (uint32_t)uids;
    lim->max_record = max_record;
}

/* The decoded message must fit one hand-off record: a record that can never
 * fit would be refused by the ring for ever. */
static enum term_error check_record_size(const struct term_limits *lim,
                                         const struct term_view *v)
{
    size_t size = cmd_size(v->nuids, v->payload_len, v->has_reply ? (uint32_t)v->reply_len : 0);
    return size > lim->max_record ? TERM_TOO_BIG : TERM_OK;
}

static enum term_error parse_tuple(const char *buf, int index, const struct term_limits *lim,
                                   struct term_view *v)
{
    int arity;
    enum term_error e;

    if (ei_decode_tuple_header(buf, &index, &arity) != 0)
        return TERM_BAD_SHAPE;
    if (is_topic_term(buf, index, arity))
        return parse_topic_term(buf, index, arity, lim, v);
    switch (arity) {
    case 2:
        return parse_pair(buf, index, lim, v);
    case 3:
        if (atom_is(buf, index, "conn")) {
            ei_skip_term(buf, &index);
            return decode_conn(buf, &index, lim, v);
        }
        if ((e = parse_reply_to(buf, &index, v)) != TERM_OK)
            return e;
        if (atom_is(buf, index, "stats"))
            v->kind = CMD_STATS;
        else if (atom_is(buf, index, "snapshot"))
            v->kind = CMD_SNAPSHOT;
        else
            return TERM_BAD_SHAPE;
        return TERM_OK;
    case 4:
        if ((e = parse_reply_to(buf, &index, v)) != TERM_OK)
            return e;
        return decode_target_and_payload(buf, &index, lim, v);
    case 5:
        if (atom_is(buf, index, "httpdcnode_seq") && !v->numbered) {
            ei_skip_term(buf, &index);
            return parse_numbered(buf, index, lim, v);
        }
        if (atom_is(buf, index, "httpdcnode_seq_base")) {
            ei_skip_term(buf, &index);
            return parse_base(buf, index, v);
        }
        if ((e = parse_reply_to(buf, &index, v)) != TERM_OK)
            return e;
        if (is_topic_term(buf, index, 3))
            return parse_topic_term(buf, index, 3, lim, v);
        if (!atom_is(buf, index, "conn"))
            return TERM_BAD_SHAPE;
        ei_skip_term(buf, &index);
        return decode_conn(buf, &index, lim, v);
    default:
        return TERM_BAD_SHAPE;
    }
}

enum term_error erl_term_parse(const char *buf, int index, int end, const struct term_limits *lim,
                           struct term_view *v)
{
    memset(v, 0, sizeof *v);
    if (!well_formed(buf, index, end))
        return TERM_BAD_SHAPE;
    enum term_error e = parse_tuple(buf, index, lim, v);
    return e != TERM_OK ? e : check_record_size(lim, v);
}

void erl_term_copy_topic(const char *buf, const struct term_view *v, char *out)
{
    int index = v->topic_index;
    ei_decode_iodata(buf, &index, NULL, out);
}

void erl_term_copy_gap_topics(const char *buf, const struct term_view *v, char *out)
{
    int index = v->gap_topics_index, size;
    for (uint32_t i = 0; i < v->gap_ntopics; i++) {
        int at = index;
        ei_decode_iodata(buf, &index, &size, NULL);
        *out++ = (char)size;
        ei_decode_iodata(buf, &at, NULL, out);
        out += size;
    }
}

void erl_term_copy_uids(const char *buf, const struct term_view *v, uint32_t *out)
{
    int index = v->uids_index, type, size;
    long long uid;

    ei_get_type(buf, &index, &type, &size);
    if (type == ERL_STRING_EXT) {
        const unsigned char *s = (const unsigned char *)buf + index + 3;
        for (uint32_t i = 0; i < v->nuids; i++)
            out[i] = s[i];
        return;
    }
    ei_decode_list_header(buf, &index, &size);
    for (uint32_t i = 0; i < v->nuids; i++) {
        ei_decode_longlong(buf, &index, &uid);
        out[i] = (uint32_t)uid;
    }
}

int erl_term_atom_is(const char *buf, int index, const char *name)
{
    return atom_is(buf, index, name);
}

void erl_term_copy_payload(const char *buf, const struct term_view *v, char *out)
{
    int index = v->payload_index;
    ei_decode_iodata(buf, &index, NULL, out);
}

const char *erl_term_error_str(enum term_error e)
{
    switch (e) {
    case TERM_OK: return "ok";
    case TERM_BAD_SHAPE:
        return "not {Uid, Data}, {[Uid], Data}, {broadcast, Data}, {kick, Uid}, "
               "{drain, Seconds (0..3600)}, {drain, cancel}, "
               "{Pid, Ref, Uid, Data}, {Pid, Ref, stats}, {Pid, Ref, snapshot}, "
               "{conn, Conn, Data}, {Pid, Ref, conn, Conn, Data}, {topic, Topic, Data}, "
               "{subscribe | unsubscribe, Conn, Topic} (each also with Pid, Ref first), "
               "{subscribe, Conn, Topic, Since}, {refuse_join, Conn, Topic, Reason}, "
               "{httpdcnode_in_ack, N}, {httpdcnode_in_reset, Name}, "
               "{httpdcnode_seq, Master, Inc, Seq, Inner} "
               "or {httpdcnode_seq_base, Master, Inc, Base, AckTo}";
    case TERM_BAD_UID: return "uid is not an integer in 1..max-users";
    case TERM_TOO_BIG:
        return "payload over --max-message, or uid list too long for one hand-off record";
    case TERM_EMPTY: return "empty payload (it would end the chunked stream)";
    case TERM_NOT_UTF8: return "{text, Data} whose Data is not valid UTF-8 (send {binary, Data})";
    case TERM_BAD_TOPIC:
        return "topic is not 1 to 64 bytes of A-Z a-z 0-9 _ - . : / (a binary or a string)";
    }
    return "?";
}
