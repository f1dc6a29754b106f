/* SPDX-License-Identifier: Apache-2.0 */
/* erl_term_parse: every accepted and rejected message shape. Terms are built
 * with ei's own encoder, as Erlang would send them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core/cmd.h"
#include "erl/erl_term.h"

static const struct term_limits lim = {
    .max_users = 1000, .max_message = 64, .max_uids = 5, .max_record = 1 << 20};

static ei_x_buff x;

static int setup(void **state)
{
    (void)state;
    ei_init();
    return 0;
}

static void begin(void) { ei_x_new_with_version(&x); }

/* Parses x and keeps it, for tests that read the buffer through v after;
 * they free x themselves. */
static enum term_error parse_keep(struct term_view *v)
{
    int index = 0, version;
    ei_decode_version(x.buff, &index, &version);
    return erl_term_parse(x.buff, index, x.index, &lim, v);
}

static enum term_error parse(struct term_view *v)
{
    enum term_error e = parse_keep(v);
    ei_x_free(&x);
    return e;
}

/* Parses x, which must be accepted with payload want; frees x. */
static struct term_view parse_payload(const char *want)
{
    struct term_view v;
    char out[16];
    size_t n = strlen(want);
    assert_true(n <= sizeof out);
    assert_int_equal(parse_keep(&v), TERM_OK);
    assert_int_equal(v.payload_len, n);
    erl_term_copy_payload(x.buff, &v, out);
    assert_memory_equal(out, want, n);
    ei_x_free(&x);
    return v;
}

/* Parses x, which must be a multicast to n uids; copies them to uids
 * and frees x. */
static void parse_uids(uint32_t n, uint32_t *uids)
{
    struct term_view v;
    assert_int_equal(parse_keep(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_MULTICAST);
    assert_int_equal(v.nuids, n);
    erl_term_copy_uids(x.buff, &v, uids);
    ei_x_free(&x);
}

/* {Uid, <<Bin>>} */
static enum term_error pair_int_bin(long long uid, const char *bin, struct term_view *v)
{
    begin();
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_longlong(&x, uid);
    ei_x_encode_binary(&x, bin, (long)strlen(bin));
    return parse(v);
}

static void unicast_binary(void **state)
{
    (void)state;
    begin();
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_long(&x, 123);
    ei_x_encode_binary(&x, "Hello", 5);
    struct term_view v = parse_payload("Hello");
    assert_int_equal(v.kind, CMD_UNICAST);
    assert_int_equal(v.uid, 123);
    assert_false(v.has_reply);
}

static void unicast_string_and_iolist(void **state)
{
    (void)state;

    begin();                                   /* {7, "abc"} */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_long(&x, 7);
    ei_x_encode_string(&x, "abc");
    parse_payload("abc");

    begin();                                   /* {7, [<<"ab">>, "cd", [$e]]} */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_long(&x, 7);
    ei_x_encode_list_header(&x, 3);
    ei_x_encode_binary(&x, "ab", 2);
    ei_x_encode_string(&x, "cd");
    ei_x_encode_list_header(&x, 1);
    ei_x_encode_long(&x, 'e');
    ei_x_encode_empty_list(&x);
    ei_x_encode_empty_list(&x);
    parse_payload("abcde");
}

static void multicast_list_and_string_forms(void **state)
{
    (void)state;
    struct term_view v;
    uint32_t uids[5];

    begin();                                   /* {[1, 300, 999], <<"m">>} */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_list_header(&x, 3);
    ei_x_encode_long(&x, 1);
    ei_x_encode_long(&x, 300);
    ei_x_encode_long(&x, 999);
    ei_x_encode_empty_list(&x);
    ei_x_encode_binary(&x, "m", 1);
    parse_uids(3, uids);
    assert_int_equal(uids[0], 1);
    assert_int_equal(uids[1], 300);
    assert_int_equal(uids[2], 999);

    begin();                                   /* {[1,2,3], ...}: Erlang sends "\1\2\3" */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_string_len(&x, "\1\2\3", 3);
    ei_x_encode_binary(&x, "m", 1);
    parse_uids(3, uids);
    assert_int_equal(uids[0], 1);
    assert_int_equal(uids[2], 3);

    begin();                                   /* {[], ...}: nobody, but valid */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_empty_list(&x);
    ei_x_encode_binary(&x, "m", 1);
    assert_int_equal(parse(&v), TERM_OK);
    assert_int_equal(v.nuids, 0);
}

static void broadcast_kick_stats_and_acknowledged(void **state)
{
    (void)state;
    struct term_view v;
    ei_cnode ec;
    erlang_pid pid;
    erlang_ref ref;

    begin();
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_atom(&x, "broadcast");
    ei_x_encode_binary(&x, "all", 3);
    assert_int_equal(parse(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_BROADCAST);
    assert_int_equal(v.payload_len, 3);

    begin();
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_atom(&x, "kick");
    ei_x_encode_long(&x, 42);
    assert_int_equal(parse(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_KICK);
    assert_int_equal(v.uid, 42);

    assert_true(ei_connect_init(&ec, "unit", "cookie", 1) >= 0);
    assert_int_equal(ei_make_pid(&ec, &pid), 0);
    assert_int_equal(ei_make_ref(&ec, &ref), 0);

    begin();
    ei_x_encode_tuple_header(&x, 3);
    ei_x_encode_pid(&x, &pid);
    ei_x_encode_ref(&x, &ref);
    ei_x_encode_atom(&x, "stats");
    assert_int_equal(parse(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_STATS);
    assert_true(v.has_reply);

    begin();
    ei_x_encode_tuple_header(&x, 4);
    ei_x_encode_pid(&x, &pid);
    ei_x_encode_ref(&x, &ref);
    ei_x_encode_long(&x, 9);
    ei_x_encode_binary(&x, "ack", 3);
    assert_int_equal(parse_keep(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_UNICAST);
    assert_int_equal(v.uid, 9);
    assert_true(v.has_reply);
    /* The recorded bytes decode back to the same pid and ref. */
    erlang_pid pid2;
    erlang_ref ref2;
    int at = v.reply_index;
    assert_int_equal(ei_decode_pid(x.buff, &at, &pid2), 0);
    assert_int_equal(ei_decode_ref(x.buff, &at, &ref2), 0);
    assert_int_equal(at - v.reply_index, v.reply_len);
    assert_int_equal(ei_cmp_pids(&pid, &pid2), 0);
    assert_int_equal(ei_cmp_refs(&ref, &ref2), 0);
    ei_x_free(&x);
}

/* {conn, Conn, Data}, {Pid, Ref, conn, Conn, Data}, {httpdcnode_in_ack, N},
 * {httpdcnode_in_reset, Name}; Conn 0 (names no stream) and an empty Data
 * taken there (the stream says whether it can carry it); a Conn not a
 * non-negative integer, a bad N, a Name not an atom: refused. */
static void conn_and_ack_terms(void **state)
{
    (void)state;
    struct term_view v;
    ei_cnode ec;
    erlang_pid pid;
    erlang_ref ref;

    begin();
    ei_x_encode_tuple_header(&x, 3);
    ei_x_encode_atom(&x, "conn");
    ei_x_encode_ulonglong(&x, 1ull << 40);
    ei_x_encode_binary(&x, "hi", 2);
    assert_int_equal(parse(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_CONN);
    assert_true(v.conn == 1ull << 40);
    assert_int_equal(v.payload_len, 2);
    assert_false(v.has_reply);

    assert_true(ei_connect_init(&ec, "unit", "cookie", 1) >= 0);
    assert_int_equal(ei_make_pid(&ec, &pid), 0);
    assert_int_equal(ei_make_ref(&ec, &ref), 0);
    begin();
    ei_x_encode_tuple_header(&x, 5);
    ei_x_encode_pid(&x, &pid);
    ei_x_encode_ref(&x, &ref);
    ei_x_encode_atom(&x, "conn");
    ei_x_encode_long(&x, 7);
    ei_x_encode_binary(&x, "yo", 2);
    assert_int_equal(parse(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_CONN);
    assert_true(v.conn == 7);
    assert_true(v.has_reply);

    begin();
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_atom(&x, "httpdcnode_in_ack");
    ei_x_encode_long(&x, 32);
    assert_int_equal(parse(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_IN_ACK);
    assert_int_equal(v.uid, 32);

    begin();
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_atom(&x, "httpdcnode_in_reset");
    ei_x_encode_atom(&x, "inbox");
    assert_int_equal(parse_keep(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_IN_RESET);
    assert_true(erl_term_atom_is(x.buff, v.payload_index, "inbox"));
    assert_false(erl_term_atom_is(x.buff, v.payload_index, "inbo"));
    assert_false(erl_term_atom_is(x.buff, v.payload_index, "inbox2"));
    ei_x_free(&x);
    begin();
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_atom(&x, "httpdcnode_in_reset");
    ei_x_encode_pid(&x, &pid);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);

    /* Conn 0 and the largest id: taken (the first is counted as naming no stream). */
    static const unsigned long long ids[] = {0, UINT64_MAX};
    for (size_t i = 0; i < 2; i++) {
        begin();
        ei_x_encode_tuple_header(&x, 3);
        ei_x_encode_atom(&x, "conn");
        ei_x_encode_ulonglong(&x, ids[i]);
        ei_x_encode_binary(&x, "hi", 2);
        assert_int_equal(parse(&v), TERM_OK);
        assert_true(v.conn == ids[i]);
    }
    begin();
    ei_x_encode_tuple_header(&x, 3);
    ei_x_encode_atom(&x, "conn");
    ei_x_encode_longlong(&x, -1);
    ei_x_encode_binary(&x, "hi", 2);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);
    begin();
    ei_x_encode_tuple_header(&x, 3);
    ei_x_encode_atom(&x, "conn");
    ei_x_encode_long(&x, 3);
    ei_x_encode_binary(&x, "", 0);
    assert_int_equal(parse(&v), TERM_OK);
    assert_int_equal(v.payload_len, 0);
    begin();                                   /* an empty iolist too */
    ei_x_encode_tuple_header(&x, 3);
    ei_x_encode_atom(&x, "conn");
    ei_x_encode_long(&x, 3);
    ei_x_encode_empty_list(&x);
    assert_int_equal(parse(&v), TERM_OK);
    assert_int_equal(v.payload_len, 0);
    begin();                                   /* a uid's message may not be empty */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_long(&x, 3);
    ei_x_encode_binary(&x, "", 0);
    assert_int_equal(parse(&v), TERM_EMPTY);
    begin();
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_atom(&x, "httpdcnode_in_ack");
    ei_x_encode_atom(&x, "many");
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);
    begin();
    ei_x_encode_tuple_header(&x, 5);
    ei_x_encode_pid(&x, &pid);
    ei_x_encode_ref(&x, &ref);
    ei_x_encode_atom(&x, "stats");
    ei_x_encode_long(&x, 7);
    ei_x_encode_binary(&x, "yo", 2);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);
}

static enum term_error parse_message(const char *msg, int len);

/* Data tagged {binary, Data} or {text, Data} inside {Uid, _}, after x's
 * tuple header and uid: begins x up to there. */
/* {Atom, Conn | Topic, Topic | Data [, Last]}: a topic term of 3 or 4
 * elements, conn omitted (< 0) for {topic, Topic, Data}. */
static enum term_error topic_term(const char *atom, long long conn, const char *topic,
                                  const char *third, struct term_view *v)
{
    begin();
    ei_x_encode_tuple_header(&x, 2 + (conn >= 0) + (third != NULL));
    ei_x_encode_atom(&x, atom);
    if (conn >= 0)
        ei_x_encode_longlong(&x, conn);
    ei_x_encode_binary(&x, topic, (long)strlen(topic));
    if (third)
        ei_x_encode_binary(&x, third, (long)strlen(third));
    return parse_keep(v);
}

static void topic_terms(void **state)
{
    (void)state;
    struct term_view v;
    char name[64];

    assert_int_equal(topic_term("topic", -1, "room:lobby", "hello", &v), TERM_OK);
    assert_int_equal(v.kind, CMD_TOPIC);
    assert_int_equal(v.topic_len, 10);
    assert_int_equal(v.nuids, 3);              /* the words the name takes in the record */
    assert_int_equal(v.payload_len, 5);
    erl_term_copy_topic(x.buff, &v, name);
    assert_memory_equal(name, "room:lobby", 10);
    ei_x_free(&x);

    assert_int_equal(topic_term("subscribe", 99, "a/b.c-d_e", NULL, &v), TERM_OK);
    assert_int_equal(v.kind, CMD_SUBSCRIBE);
    assert_true(v.conn == 99);
    ei_x_free(&x);
    assert_int_equal(topic_term("unsubscribe", 99, "t", NULL, &v), TERM_OK);
    assert_int_equal(v.kind, CMD_UNSUBSCRIBE);
    ei_x_free(&x);
    /* the handler's answers: the id to resume from (maybe none), a reason */
    assert_int_equal(topic_term("subscribe", 5, "t", "0badc0de:7", &v), TERM_OK);
    assert_int_equal(v.kind, CMD_JOIN_ALLOWED);
    assert_int_equal(v.payload_len, 10);
    ei_x_free(&x);
    assert_int_equal(topic_term("subscribe", 5, "t", "", &v), TERM_OK);
    assert_int_equal(v.payload_len, 0);
    ei_x_free(&x);
    assert_int_equal(topic_term("refuse_join", 5, "t", "room full", &v), TERM_OK);
    assert_int_equal(v.kind, CMD_JOIN_REFUSED);
    ei_x_free(&x);

    /* topics that are no names, reasons a client cannot be told, shapes */
    char long_name[66];
    memset(long_name, 'a', 65);
    long_name[65] = '\0';
    const char *bad_topics[] = {"", "with space", "a,b", "a@b", "caf\xc3\xa9", "\"q\"", long_name};
    for (size_t i = 0; i < sizeof bad_topics / sizeof *bad_topics; i++) {
        assert_int_equal(topic_term("topic", -1, bad_topics[i], "x", &v), TERM_BAD_TOPIC);
        ei_x_free(&x);
        assert_int_equal(topic_term("subscribe", 1, bad_topics[i], NULL, &v), TERM_BAD_TOPIC);
        ei_x_free(&x);
    }
    assert_int_equal(topic_term("topic", -1, "t", "", &v), TERM_EMPTY);
    ei_x_free(&x);
    assert_int_equal(topic_term("refuse_join", 5, "t", "\"}, {\"x", &v), TERM_BAD_SHAPE);
    ei_x_free(&x);
    assert_int_equal(topic_term("subscribe", 5, "t", "0123456789012345678901234567890123", &v),
                     TERM_BAD_SHAPE);            /* an id longer than any */
    ei_x_free(&x);
    assert_int_equal(topic_term("unsubscribe", 5, "t", "x", &v), TERM_BAD_SHAPE);
    ei_x_free(&x);
    assert_int_equal(topic_term("topic", 5, "t", "x", &v), TERM_BAD_SHAPE);   /* 4 elements */
    ei_x_free(&x);
    begin();                                    /* the topic an atom: not taken */
    ei_x_encode_tuple_header(&x, 3);
    ei_x_encode_atom(&x, "topic");
    ei_x_encode_atom(&x, "lobby");
    ei_x_encode_binary(&x, "x", 1);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);
}

static void begin_tagged(const char *tag)
{
    begin();
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_long(&x, 5);
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_atom(&x, tag);
}

/* Untagged Data is text when valid UTF-8, else binary; {binary, Data} is
 * binary whatever its bytes, {text, Data} text and must be UTF-8. */
static void data_says_binary_or_text(void **state)
{
    (void)state;
    struct term_view v;
    assert_int_equal(pair_int_bin(5, "hello", &v), TERM_OK);
    assert_false(v.binary);
    assert_int_equal(pair_int_bin(5, "caf\xe9", &v), TERM_OK);
    assert_true(v.binary);

    begin_tagged("binary");
    ei_x_encode_binary(&x, "hello", 5);
    v = parse_payload("hello");
    assert_int_equal(v.kind, CMD_UNICAST);
    assert_int_equal(v.uid, 5);
    assert_true(v.binary);

    begin_tagged("binary");
    ei_x_encode_binary(&x, "\xff\x01", 2);
    assert_true(parse_payload("\xff\x01").binary);

    begin_tagged("text");
    ei_x_encode_binary(&x, "caf\xc3\xa9", 5);
    assert_false(parse_payload("caf\xc3\xa9").binary);

    begin_tagged("text");
    ei_x_encode_string(&x, "abc");
    assert_false(parse_payload("abc").binary);

    begin_tagged("text");
    ei_x_encode_binary(&x, "caf\xe9", 4);
    assert_int_equal(parse(&v), TERM_NOT_UTF8);
    begin_tagged("text");
    ei_x_encode_binary(&x, "\xed\xa0\x80", 3);      /* a surrogate */
    assert_int_equal(parse(&v), TERM_NOT_UTF8);

    /* An iolist is judged as its bytes flattened: a character split
     * across parts is whole, a part ending mid-character is not. */
    begin_tagged("text");                     /* {5, {text, [<<"caf", 195>>, [169]]}} */
    ei_x_encode_list_header(&x, 2);
    ei_x_encode_binary(&x, "caf\xc3", 4);
    ei_x_encode_list_header(&x, 1);
    ei_x_encode_long(&x, 0xa9);
    ei_x_encode_empty_list(&x);
    ei_x_encode_empty_list(&x);
    assert_false(parse_payload("caf\xc3\xa9").binary);
    begin();                                  /* {5, [<<195>>, "x"]}: not UTF-8 */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_long(&x, 5);
    ei_x_encode_list_header(&x, 2);
    ei_x_encode_binary(&x, "\xc3", 1);
    ei_x_encode_string(&x, "x");
    ei_x_encode_empty_list(&x);
    assert_true(parse_payload("\xc3x").binary);
    begin();                                  /* {5, [<<"a">> | <<195>>]}: cut at the end */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_long(&x, 5);
    ei_x_encode_list_header(&x, 1);
    ei_x_encode_binary(&x, "a", 1);
    ei_x_encode_binary(&x, "\xc3", 1);
    assert_true(parse_payload("a\xc3").binary);
    /* {5, {text, [195 | [169]]}} with 195 as INTEGER_EXT, as ei accepts. */
    static const char int_ext[] = "\x83\x68\x02\x61\x05\x68\x02\x77\x04text"
                                  "\x6c\x00\x00\x00\x02\x62\x00\x00\x00\xc3\x61\xa9\x6a";
    assert_int_equal(parse_message(int_ext, (int)sizeof int_ext - 1), TERM_OK);

    /* Refused: an empty, a nested, an unknown or a malformed tag. */
    begin_tagged("binary");
    ei_x_encode_binary(&x, "", 0);
    assert_int_equal(parse(&v), TERM_EMPTY);
    begin_tagged("binary");
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_atom(&x, "text");
    ei_x_encode_binary(&x, "x", 1);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);
    begin_tagged("bytes");
    ei_x_encode_binary(&x, "x", 1);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);
    begin_tagged("binary");
    ei_x_encode_long(&x, 7);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);
    begin();                                  /* {5, {binary, <<"x">>, extra}} */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_long(&x, 5);
    ei_x_encode_tuple_header(&x, 3);
    ei_x_encode_atom(&x, "binary");
    ei_x_encode_binary(&x, "x", 1);
    ei_x_encode_atom(&x, "extra");
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);
    begin();                                  /* {5, {<<"binary">>, <<"x">>}} */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_long(&x, 5);
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_binary(&x, "binary", 6);
    ei_x_encode_binary(&x, "x", 1);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);
    char big[66];
    memset(big, 'a', 65);
    big[65] = '\0';
    begin_tagged("binary");
    ei_x_encode_binary(&x, big, 65);
    assert_int_equal(parse(&v), TERM_TOO_BIG);
}

/* Every form that carries Data takes the tag. */
static void every_data_form_takes_the_tag(void **state)
{
    (void)state;
    struct term_view v;
    ei_cnode ec;
    erlang_pid pid;
    erlang_ref ref;
    assert_true(ei_connect_init(&ec, "unit", "cookie", 1) >= 0);
    assert_int_equal(ei_make_pid(&ec, &pid), 0);
    assert_int_equal(ei_make_ref(&ec, &ref), 0);
    for (int form = 0; form < 6; form++) {
        begin();
        if (form >= 3) {                      /* the acknowledged ones */
            ei_x_encode_tuple_header(&x, form == 5 ? 5 : 4);
            ei_x_encode_pid(&x, &pid);
            ei_x_encode_ref(&x, &ref);
        } else {
            ei_x_encode_tuple_header(&x, form == 2 ? 3 : 2);
        }
        switch (form) {
        case 0: ei_x_encode_atom(&x, "broadcast"); break;
        case 1: case 4:                        /* [1, 2]: a multicast */
            ei_x_encode_list_header(&x, 2);
            ei_x_encode_long(&x, 1);
            ei_x_encode_long(&x, 2);
            ei_x_encode_empty_list(&x);
            break;
        case 2: case 5:
            ei_x_encode_atom(&x, "conn");
            ei_x_encode_long(&x, 7);
            break;
        case 3: ei_x_encode_long(&x, 9); break;
        }
        ei_x_encode_tuple_header(&x, 2);
        ei_x_encode_atom(&x, "binary");
        ei_x_encode_binary(&x, "ok", 2);
        v = parse_payload("ok");
        static const enum cmd_kind kinds[] = {CMD_BROADCAST, CMD_MULTICAST, CMD_CONN,
                                              CMD_UNICAST, CMD_MULTICAST, CMD_CONN};
        assert_int_equal(v.kind, kinds[form]);
        assert_true(v.binary);
        assert_int_equal(v.has_reply, form >= 3);
    }
}

/* {drain, Seconds} in 0..3600 and {drain, cancel}; anything else a bad shape. */
static void drain_terms(void **state)
{
    (void)state;
    struct term_view v;
    static const long long good[] = {0, 1, 3600};
    for (size_t i = 0; i < 3; i++) {
        begin();
        ei_x_encode_tuple_header(&x, 2);
        ei_x_encode_atom(&x, "drain");
        ei_x_encode_longlong(&x, good[i]);
        assert_int_equal(parse(&v), TERM_OK);
        assert_int_equal(v.kind, CMD_DRAIN);
        assert_int_equal(v.uid, (uint32_t)good[i]);
    }
    begin();
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_atom(&x, "drain");
    ei_x_encode_atom(&x, "cancel");
    assert_int_equal(parse(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_UNDRAIN);
    static const long long bad[] = {-1, 3601, 1ll << 40};
    for (size_t i = 0; i < 3; i++) {
        begin();
        ei_x_encode_tuple_header(&x, 2);
        ei_x_encode_atom(&x, "drain");
        ei_x_encode_longlong(&x, bad[i]);
        assert_int_equal(parse(&v), TERM_BAD_SHAPE);
    }
    begin();
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_atom(&x, "drain");
    ei_x_encode_binary(&x, "soon", 4);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);
    /* An atom may hold a NUL: 'drain\0\0\1d' is not drain (found by
     * tests/fuzz/fuzz_term): {'drain\0\0\1d', 115} as Erlang encodes it. */
    static const char nul_atom[] = "\x83\x68\x02\x77\x09" "drain\0\0\x01" "d" "\x61\x73";
    assert_int_not_equal(parse_message(nul_atom, (int)sizeof nul_atom - 1), TERM_OK);
}

static void bad_uids(void **state)
{
    (void)state;
    struct term_view v;
    assert_int_equal(pair_int_bin(0, "x", &v), TERM_BAD_UID);
    assert_int_equal(pair_int_bin(-1, "x", &v), TERM_BAD_UID);
    assert_int_equal(pair_int_bin(1001, "x", &v), TERM_BAD_UID);
    assert_int_equal(pair_int_bin(1LL << 40, "x", &v), TERM_BAD_UID);
    assert_int_equal(pair_int_bin(1000, "x", &v), TERM_OK);

    begin();                                   /* {1.5, <<"x">>} */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_double(&x, 1.5);
    ei_x_encode_binary(&x, "x", 1);
    assert_int_equal(parse(&v), TERM_BAD_UID);

    begin();                                   /* {[1, abc], <<"x">>} */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_list_header(&x, 2);
    ei_x_encode_long(&x, 1);
    ei_x_encode_atom(&x, "abc");
    ei_x_encode_empty_list(&x);
    ei_x_encode_binary(&x, "x", 1);
    assert_int_equal(parse(&v), TERM_BAD_UID);

    begin();                                   /* {[1, 0], ...} in string form */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_string_len(&x, "\1\0", 2);
    ei_x_encode_binary(&x, "x", 1);
    assert_int_equal(parse(&v), TERM_BAD_UID);

    begin();                                   /* {kick, abc} */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_atom(&x, "kick");
    ei_x_encode_atom(&x, "abc");
    assert_int_equal(parse(&v), TERM_BAD_UID);

    begin();                                   /* a bignum uid */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_ulonglong(&x, 18446744073709551615ULL);
    ei_x_encode_binary(&x, "x", 1);
    assert_int_equal(parse(&v), TERM_BAD_UID);
}

static void bad_payloads(void **state)
{
    (void)state;
    struct term_view v;
    char big[65];
    memset(big, 'a', 64);
    big[64] = '\0';
    assert_int_equal(pair_int_bin(5, "", &v), TERM_EMPTY);
    assert_int_equal(pair_int_bin(5, big, &v), TERM_OK);    /* exactly max_message */
    begin();
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_long(&x, 5);
    ei_x_encode_binary(&x, big, 65 - 1 + 1);                /* 65 bytes: over */
    assert_int_equal(parse(&v), TERM_TOO_BIG);

    begin();                                   /* {5, 123} */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_long(&x, 5);
    ei_x_encode_long(&x, 123456);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);

    begin();                                   /* {5, <<1:3>>} */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_long(&x, 5);
    ei_x_encode_bitstring(&x, "\x20", 0, 3);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);

    begin();                                   /* {5, []} */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_long(&x, 5);
    ei_x_encode_empty_list(&x);
    assert_int_equal(parse(&v), TERM_EMPTY);

    begin();                                   /* six uids, one over max_uids */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_list_header(&x, 6);
    for (int i = 1; i <= 6; i++)
        ei_x_encode_long(&x, 100 + i);
    ei_x_encode_empty_list(&x);
    ei_x_encode_binary(&x, "x", 1);
    assert_int_equal(parse(&v), TERM_TOO_BIG);
}

static void bad_shapes(void **state)
{
    (void)state;
    struct term_view v;

    begin();                                   /* hello */
    ei_x_encode_atom(&x, "hello");
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);

    begin();                                   /* [1,2] */
    ei_x_encode_string(&x, "\1\2");
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);

    begin();                                   /* {abc, <<"x">>} */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_atom(&x, "abc");
    ei_x_encode_binary(&x, "x", 1);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);

    begin();                                   /* {5, <<"x">>, extra} */
    ei_x_encode_tuple_header(&x, 3);
    ei_x_encode_long(&x, 5);
    ei_x_encode_binary(&x, "x", 1);
    ei_x_encode_atom(&x, "extra");
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);

    begin();                                   /* {} */
    ei_x_encode_tuple_header(&x, 0);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);

    begin();                                   /* {[1 | 2], <<"x">>}: improper */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_list_header(&x, 1);
    ei_x_encode_long(&x, 1);
    ei_x_encode_long(&x, 2);
    ei_x_encode_binary(&x, "x", 1);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);

    begin();                                   /* {broadcast, 5} */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_atom(&x, "broadcast");
    ei_x_encode_long(&x, 5);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);

    begin();                                   /* {self, ref, stats} with atoms */
    ei_x_encode_tuple_header(&x, 3);
    ei_x_encode_atom(&x, "self");
    ei_x_encode_atom(&x, "ref");
    ei_x_encode_atom(&x, "stats");
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);

    /* A binary whose length header claims 1 GB: its bytes are not in the
     * message, refused before anything is copied. */
    begin();
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_long(&x, 5);
    x.buff[x.index++] = (char)ERL_BINARY_EXT;   /* length claims 1 GB */
    x.buff[x.index++] = 0x40;
    x.buff[x.index++] = 0;
    x.buff[x.index++] = 0;
    x.buff[x.index++] = 0;
    struct term_view w;
    assert_int_equal(parse(&w), TERM_BAD_SHAPE);
}

/* Parses the message msg[0..len) (version byte first); the bytes after it
 * in msg are there to be read by mistake. */
static enum term_error parse_message(const char *msg, int len)
{
    struct term_view v;
    int index = 0, version;
    assert_int_equal(ei_decode_version(msg, &index, &version), 0);
    return erl_term_parse(msg, index, len, &lim, &v);
}

/* Messages whose encoding runs past their end (found by tests/fuzz/fuzz_term):
 * they were read, and copied to clients, from whatever followed them. */
static void truncated_terms(void **state)
{
    (void)state;
    /* {1, <<50 bytes>>} with 1 byte of them in an 11-byte message: was
     * accepted, and 49 bytes after it went out as the payload. */
    static const char binary[] = "\x83\x68\x02\x61\x01\x6d\x00\x00\x00\x32x"
                                 "next message's bytes, not this one's .............";
    assert_int_equal(parse_message(binary, 11), TERM_BAD_SHAPE);
    assert_int_equal(parse_message(binary, 10 + 50), TERM_OK);

    /* Only the version byte. */
    assert_int_equal(parse_message("\x83\x68\x02", 1), TERM_BAD_SHAPE);

    /* {[1, 2, 3], <<"x">>}, the uid string cut after its first uid. */
    static const char string[] = "\x83\x68\x02\x6b\x00\x03\x01\x02\x03\x6d\x00\x00\x00\x01x";
    assert_int_equal(parse_message(string, 7), TERM_BAD_SHAPE);
    assert_int_equal(parse_message(string, (int)sizeof string - 1), TERM_OK);

    /* {kick, 5} cut inside the atom, and a list header counting more
     * elements than there are bytes. */
    static const char kick[] = "\x83\x68\x02\x77\x04kick\x61\x05";
    assert_int_equal(parse_message(kick, 6), TERM_BAD_SHAPE);
    assert_int_equal(parse_message(kick, (int)sizeof kick - 1), TERM_OK);
    static const char list[] = "\x83\x68\x02\x6c\x7f\xff\xff\xff\x61\x01\x6a\x6d\x00\x00\x00\x01x";
    assert_int_equal(parse_message(list, (int)sizeof list - 1), TERM_BAD_SHAPE);

    /* A binary length that would wrap the index round. */
    static const char wrap[] = "\x83\x68\x02\x61\x01\x6d\xff\xff\xff\xf8x";
    assert_int_equal(parse_message(wrap, (int)sizeof wrap - 1), TERM_BAD_SHAPE);
}

/* {[1.5], <<"x">>} with an old-style float (FLOAT_EXT, 31 characters, no
 * NUL): ei skips it with sscanf, which reads on past the message. Refused
 * before ei sees it (found by tests/fuzz/fuzz_term). */
/* {httpdcnode_seq, Master, Inc, Seq, ...} around what follows. */
static void begin_numbered(unsigned long long inc, unsigned long long seq)
{
    begin();
    ei_x_encode_tuple_header(&x, 5);
    ei_x_encode_atom(&x, "httpdcnode_seq");
    ei_x_encode_atom(&x, "m1@host");
    ei_x_encode_ulonglong(&x, inc);
    ei_x_encode_ulonglong(&x, seq);
}

/* {httpdcnode_seq, Master, 3, Seq, {5, <<"hi">>}} (Master an atom or not),
 * numbered again inside when nested. */
static void encode_numbered(int master_atom, long long seq, int nested)
{
    begin();
    for (int i = 0; i <= nested; i++) {
        ei_x_encode_tuple_header(&x, 5);
        ei_x_encode_atom(&x, "httpdcnode_seq");
        if (master_atom)
            ei_x_encode_atom(&x, "m1@host");
        else
            ei_x_encode_binary(&x, "m1@host", 7);
        ei_x_encode_ulong(&x, 3);
        ei_x_encode_longlong(&x, seq);
    }
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_long(&x, 5);
    ei_x_encode_binary(&x, "hi", 2);
}

/* {httpdcnode_seq_base, m1@host, 3, 0, AckTo}, AckTo an atom or not. */
static void encode_base(int ack_to_atom)
{
    begin();
    ei_x_encode_tuple_header(&x, 5);
    ei_x_encode_atom(&x, "httpdcnode_seq_base");
    ei_x_encode_atom(&x, "m1@host");
    ei_x_encode_ulong(&x, 3);
    ei_x_encode_ulong(&x, 0);
    if (ack_to_atom)
        ei_x_encode_atom(&x, "httpdcnode_outq");
    else
        ei_x_encode_long(&x, 1);
}

/* Numbered messages: the inner message as it would be alone (to uids or a
 * topic), with the master's atom, run and number; a gap for uids and
 * topics over a range of numbers; the base. Nothing else is numbered, nor
 * nested. */
static void numbered_terms(void **state)
{
    (void)state;
    struct term_view v;
    char master[MAXATOMLEN];
    int at;

    begin_numbered(1ull << 40, 7);                 /* {5, <<"hi">>} */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_long(&x, 5);
    ei_x_encode_binary(&x, "hi", 2);
    assert_int_equal(parse_keep(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_UNICAST);
    assert_int_equal(v.uid, 5);
    assert_int_equal(v.payload_len, 2);
    assert_true(v.numbered);
    assert_true(v.seq_inc == 1ull << 40);
    assert_int_equal(v.seq, 7);
    assert_int_equal(v.seq_last, 7);
    at = v.seq_master_index;
    assert_int_equal(ei_decode_atom(x.buff, &at, master), 0);
    assert_string_equal(master, "m1@host");
    ei_x_free(&x);

    ei_cnode ec;                                   /* {Pid, Ref, [1, 2], Data} */
    erlang_pid pid;
    erlang_ref ref;
    assert_true(ei_connect_init(&ec, "unit", "cookie", 1) >= 0);
    assert_int_equal(ei_make_pid(&ec, &pid), 0);
    assert_int_equal(ei_make_ref(&ec, &ref), 0);
    begin_numbered(3, 8);
    ei_x_encode_tuple_header(&x, 4);
    ei_x_encode_pid(&x, &pid);
    ei_x_encode_ref(&x, &ref);
    ei_x_encode_list_header(&x, 2);
    ei_x_encode_long(&x, 1);
    ei_x_encode_long(&x, 2);
    ei_x_encode_empty_list(&x);
    ei_x_encode_binary(&x, "m", 1);
    assert_int_equal(parse(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_MULTICAST);
    assert_int_equal(v.nuids, 2);
    assert_true(v.has_reply && v.numbered);

    begin_numbered(3, 9);                          /* {httpdcnode_gap, 12, [4, 6]} */
    ei_x_encode_tuple_header(&x, 3);
    ei_x_encode_atom(&x, "httpdcnode_gap");
    ei_x_encode_ulong(&x, 12);
    ei_x_encode_list_header(&x, 2);
    ei_x_encode_long(&x, 4);
    ei_x_encode_long(&x, 600);
    ei_x_encode_empty_list(&x);
    assert_int_equal(parse_keep(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_GAP);
    assert_int_equal(v.seq, 9);
    assert_int_equal(v.seq_last, 12);
    uint32_t uids[2];
    erl_term_copy_uids(x.buff, &v, uids);
    assert_int_equal(uids[0], 4);
    assert_int_equal(uids[1], 600);
    ei_x_free(&x);

    begin_numbered(3, 9);                          /* a gap ending before it starts */
    ei_x_encode_tuple_header(&x, 3);
    ei_x_encode_atom(&x, "httpdcnode_gap");
    ei_x_encode_ulong(&x, 8);
    ei_x_encode_empty_list(&x);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);

    begin_numbered(3, 9);                          /* a gap's uid out of range */
    ei_x_encode_tuple_header(&x, 3);
    ei_x_encode_atom(&x, "httpdcnode_gap");
    ei_x_encode_ulong(&x, 9);
    ei_x_encode_list_header(&x, 1);
    ei_x_encode_long(&x, 1001);
    ei_x_encode_empty_list(&x);
    assert_int_equal(parse(&v), TERM_BAD_UID);

    begin_numbered(3, 9);                          /* {httpdcnode_gap, 10, [4], [a, bc]} */
    ei_x_encode_tuple_header(&x, 4);
    ei_x_encode_atom(&x, "httpdcnode_gap");
    ei_x_encode_ulong(&x, 10);
    ei_x_encode_list_header(&x, 1);
    ei_x_encode_long(&x, 4);
    ei_x_encode_empty_list(&x);
    ei_x_encode_list_header(&x, 2);
    ei_x_encode_binary(&x, "a", 1);
    ei_x_encode_binary(&x, "room:1", 6);
    ei_x_encode_empty_list(&x);
    assert_int_equal(parse_keep(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_GAP);
    assert_int_equal(v.seq_last, 10);
    assert_int_equal(v.nuids, 1);
    assert_int_equal(v.gap_ntopics, 2);
    assert_int_equal(v.payload_len, 2 + 7);       /* a length byte each, then the name */
    char names[9];
    erl_term_copy_gap_topics(x.buff, &v, names);
    assert_memory_equal(names, "\x01" "a" "\x06" "room:1", 9);
    ei_x_free(&x);

    begin_numbered(3, 9);                          /* no topic, then one not a name */
    ei_x_encode_tuple_header(&x, 4);
    ei_x_encode_atom(&x, "httpdcnode_gap");
    ei_x_encode_ulong(&x, 9);
    ei_x_encode_empty_list(&x);
    ei_x_encode_empty_list(&x);
    assert_int_equal(parse(&v), TERM_OK);
    assert_int_equal(v.payload_len, 0);
    begin_numbered(3, 9);
    ei_x_encode_tuple_header(&x, 4);
    ei_x_encode_atom(&x, "httpdcnode_gap");
    ei_x_encode_ulong(&x, 9);
    ei_x_encode_empty_list(&x);
    ei_x_encode_list_header(&x, 1);
    ei_x_encode_binary(&x, "no space", 8);
    ei_x_encode_empty_list(&x);
    assert_int_equal(parse(&v), TERM_BAD_TOPIC);

    begin_numbered(3, 11);                         /* {topic, <<"news">>, <<"hi">>} */
    ei_x_encode_tuple_header(&x, 3);
    ei_x_encode_atom(&x, "topic");
    ei_x_encode_binary(&x, "news", 4);
    ei_x_encode_binary(&x, "hi", 2);
    assert_int_equal(parse(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_TOPIC);
    assert_int_equal(v.topic_len, 4);
    assert_true(v.numbered && !v.has_reply);

    begin_numbered(3, 12);                         /* {Pid, Ref, topic, <<"news">>, <<"hi">>} */
    ei_x_encode_tuple_header(&x, 5);
    ei_x_encode_pid(&x, &pid);
    ei_x_encode_ref(&x, &ref);
    ei_x_encode_atom(&x, "topic");
    ei_x_encode_binary(&x, "news", 4);
    ei_x_encode_binary(&x, "hi", 2);
    assert_int_equal(parse(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_TOPIC);
    assert_true(v.numbered && v.has_reply);

    begin_numbered(3, 13);                         /* {subscribe, 7, <<"news">>}: not numbered */
    ei_x_encode_tuple_header(&x, 3);
    ei_x_encode_atom(&x, "subscribe");
    ei_x_encode_long(&x, 7);
    ei_x_encode_binary(&x, "news", 4);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);

    begin_numbered(3, 13);                         /* {Pid, Ref, conn, 7, <<"x">>}: nor this */
    ei_x_encode_tuple_header(&x, 5);
    ei_x_encode_pid(&x, &pid);
    ei_x_encode_ref(&x, &ref);
    ei_x_encode_atom(&x, "conn");
    ei_x_encode_long(&x, 7);
    ei_x_encode_binary(&x, "x", 1);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);

    begin_numbered(3, 10);                         /* {kick, 5}: not numbered */
    ei_x_encode_tuple_header(&x, 2);
    ei_x_encode_atom(&x, "kick");
    ei_x_encode_long(&x, 5);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);

    /* nested, the master not an atom, a negative number */
    encode_numbered(1, 11, 1);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);
    encode_numbered(0, 11, 0);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);
    encode_numbered(1, -1, 0);
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);

    encode_base(1);                                /* the base */
    assert_int_equal(parse_keep(&v), TERM_OK);
    assert_int_equal(v.kind, CMD_SEQ_BASE);
    assert_int_equal(v.seq, 0);
    assert_true(erl_term_atom_is(x.buff, v.seq_ack_to_index, "httpdcnode_outq"));
    ei_x_free(&x);
    encode_base(0);                                /* its AckTo not an atom */
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);
}

static void old_float_refused(void **state)
{
    (void)state;
    char msg[64] = "\x83\x68\x02\x6c\x00\x00\x00\x01\x63";
    int len = 9;
    memset(msg + len, '1', 31);
    len += 31;
    memcpy(msg + len, "\x6a\x6d\x00\x00\x00\x01x", 7);
    len += 7;
    assert_int_equal(parse_message(msg, len), TERM_BAD_SHAPE);
}

/* A reference with more ids than erlang_ref holds would be decoded past it. */
static void long_reference_refused(void **state)
{
    (void)state;
    struct term_view v;
    erlang_pid pid = {.node = "a@b", .num = 1, .serial = 0, .creation = 1};
    erlang_ref ref = {.node = "a@b", .len = 3, .n = {1, 2, 3}, .creation = 1};

    begin();                                   /* {Pid, Ref, stats} */
    ei_x_encode_tuple_header(&x, 3);
    ei_x_encode_pid(&x, &pid);
    int ref_at = x.index;
    ei_x_encode_ref(&x, &ref);
    ei_x_encode_atom(&x, "stats");
    assert_int_equal(parse_keep(&v), TERM_OK);
    assert_int_equal(x.buff[ref_at], ERL_NEWER_REFERENCE_EXT);
    x.buff[ref_at + 2] = 6;                    /* 6 ids claimed */
    assert_int_equal(parse(&v), TERM_BAD_SHAPE);
}

/* A pid and a ref as large as ei decodes: a node name of 255 characters
 * of 4 UTF-8 bytes each, and a ref of 5 words. */
static void largest_pid_and_ref(erlang_pid *pid, erlang_ref *ref)
{
    memset(pid, 0, sizeof *pid);
    memset(ref, 0, sizeof *ref);
    for (int i = 0; i < 255; i++)
        memcpy(pid->node + 4 * i, "\xF0\x9F\x98\x80", 4);       /* U+1F600 */
    pid->node[4 * 255] = '\0';
    pid->num = 1;
    pid->creation = 7;
    memcpy(ref->node, pid->node, sizeof ref->node);
    ref->len = 5;
    ref->creation = 7;
}

/* {Pid, Ref, [Uid x nuids], Data} with the largest pid and ref. */
static void encode_largest_reply(uint32_t nuids, uint32_t payload_len)
{
    erlang_pid pid;
    erlang_ref ref;
    static char data[1 << 16];
    largest_pid_and_ref(&pid, &ref);
    memset(data, 'd', sizeof data);
    begin();
    ei_x_encode_tuple_header(&x, 4);
    ei_x_encode_pid(&x, &pid);
    ei_x_encode_ref(&x, &ref);
    ei_x_encode_list_header(&x, nuids);
    for (uint32_t i = 0; i < nuids; i++)
        ei_x_encode_long(&x, 300);                   /* not the string form */
    ei_x_encode_empty_list(&x);
    ei_x_encode_binary(&x, data, (long)payload_len);
}

static enum term_error parse_with(const struct term_limits *l, struct term_view *v)
{
    int index = 0, version;
    ei_decode_version(x.buff, &index, &version);
    enum term_error e = erl_term_parse(x.buff, index, x.index, l, v);
    ei_x_free(&x);
    return e;
}

/* Every message erl_term_parse accepts fits one hand-off record: a record that
 * did not would be refused by the ring for ever, and the C-node thread
 * would wait on it for ever. */
static void accepted_messages_fit_a_record(void **state)
{
    (void)state;
    struct term_limits l;
    struct term_view v;
    const size_t max_record = 8192;
    erl_term_limits_init(&l, 1000, 1024, max_record);

    /* The longest accepted uid list, the largest payload and {Pid, Ref}. */
    encode_largest_reply(l.max_uids, l.max_message);
    assert_int_equal(parse_with(&l, &v), TERM_OK);
    assert_int_equal(v.reply_len, TERM_MAX_REPLY_LEN);    /* the bound is ei's */
    assert_true(cmd_size(v.nuids, v.payload_len, (uint32_t)v.reply_len) <= max_record);

    /* One uid more is refused. */
    encode_largest_reply(l.max_uids + 1, l.max_message);
    assert_int_equal(parse_with(&l, &v), TERM_TOO_BIG);

    /* Whatever max_uids says, a message whose record would not fit is
     * refused by its size. */
    struct term_limits loose = l;
    loose.max_uids = l.max_uids + 100;
    encode_largest_reply(l.max_uids + 1, l.max_message);
    assert_int_equal(parse_with(&loose, &v), TERM_TOO_BIG);
    encode_largest_reply(l.max_uids + 1, l.max_message - 4);
    assert_int_equal(parse_with(&loose, &v), TERM_OK);      /* the same uids fit without */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(unicast_binary),
        cmocka_unit_test(unicast_string_and_iolist),
        cmocka_unit_test(multicast_list_and_string_forms),
        cmocka_unit_test(broadcast_kick_stats_and_acknowledged),
        cmocka_unit_test(drain_terms),
        cmocka_unit_test(conn_and_ack_terms),
        cmocka_unit_test(topic_terms),
        cmocka_unit_test(data_says_binary_or_text),
        cmocka_unit_test(every_data_form_takes_the_tag),
        cmocka_unit_test(bad_uids),
        cmocka_unit_test(bad_payloads),
        cmocka_unit_test(bad_shapes),
        cmocka_unit_test(truncated_terms),
        cmocka_unit_test(old_float_refused),
        cmocka_unit_test(long_reference_refused),
        cmocka_unit_test(accepted_messages_fit_a_record),
        cmocka_unit_test(numbered_terms),
    };
    return cmocka_run_group_tests_name("term", tests, setup, NULL);
}
