/* SPDX-License-Identifier: Apache-2.0 */
/* Framings that look at the payload (WebSocket: frame headers of each
 * length form, text or binary by UTF-8 validity, the ws+meta id prefix;
 * SSE bodies: data: lines, or base64 for a
 * payload that is not UTF-8), the UTF-8 validator whole and piece by
 * piece, and the WebSocket handshake's accept key and header tokens. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/framing.h"
#include "core/history.h"
#include "lib/utf8.h"
#include "transport/ws_handshake.h"

static void ws_headers_take_each_length_form(void **state)
{
    (void)state;
    struct framing_prefix p;
    framing_prefix_utf8(FRAMING_WS, 5, 1, 1, &p);
    assert_int_equal(p.len, 2);
    assert_memory_equal(p.bytes, "\x81\x05", 2);
    framing_prefix_utf8(FRAMING_WS, 125, 1, 0, &p);
    assert_memory_equal(p.bytes, "\x82\x7d", 2);             /* binary */
    framing_prefix_utf8(FRAMING_WS, 126, 1, 1, &p);
    assert_int_equal(p.len, 4);
    assert_memory_equal(p.bytes, "\x81\x7e\x00\x7e", 4);
    framing_prefix_utf8(FRAMING_WS, 65535, 1, 1, &p);
    assert_memory_equal(p.bytes, "\x81\x7e\xff\xff", 4);
    framing_prefix_utf8(FRAMING_WS, 70000, 1, 0, &p);
    assert_int_equal(p.len, 10);
    assert_memory_equal(p.bytes, "\x82\x7f\x00\x00\x00\x00\x00\x01\x11\x70", 10);
}

static void ws_frames_are_whole_messages(void **state)
{
    (void)state;
    struct framing_prefix p;
    struct iovec iov[FRAMING_IOV_MAX];
    size_t bytes = 0;
    framing_prefix_utf8(FRAMING_WS, 5, 3, 1, &p);
    int n = framing_iov(FRAMING_WS, &p, "hello", 5, iov, &bytes);
    assert_int_equal(n, 2);
    assert_int_equal(bytes, 7);
    assert_false(framing_encodes_body(FRAMING_WS));
    assert_true(framing_checks_utf8(FRAMING_WS_META));
    assert_false(framing_checks_utf8(FRAMING_SSE));
}

static void ws_meta_prefixes_the_id(void **state)
{
    (void)state;
    struct framing_prefix p;
    framing_prefix_utf8(FRAMING_WS_META, 5, 42, 1, &p);
    char want[64];
    int id = snprintf(want + 2, sizeof want - 2, "id: %s:42\n\n", history_epoch_hex());
    want[0] = '\x81';
    want[1] = (char)(id + 5);              /* the id is part of the payload */
    assert_int_equal(p.len, 2 + id);
    assert_memory_equal(p.bytes, want, p.len);
    /* The longest: a 64-bit length and the largest seq fit. */
    framing_prefix_utf8(FRAMING_WS_META, 8u << 20, UINT32_MAX, 0, &p);
    assert_int_equal(p.len, 10 + strlen("id: 01234567:4294967295\n\n"));
    assert_true(p.len <= FRAMING_PREFIX_MAX);
    assert_int_equal((uint8_t)p.bytes[0], 0x82);
}

/* permessage-deflate: RSV1 and the compressed length; ws_meta's id as a
 * stored deflate block (BFINAL 0, type 00, LEN, NLEN) ahead of it, at the
 * longest within FRAMING_PREFIX_MAX; the plain prefixes of those framings
 * (replays) have no RSV1. */
static void ws_deflate_prefixes(void **state)
{
    (void)state;
    struct framing_prefix p;
    framing_prefix_deflate(FRAMING_WS_DEFLATE, 300, 1, 1, &p);
    assert_int_equal(p.len, 4);
    assert_memory_equal(p.bytes, "\xc1\x7e\x01\x2c", 4);
    framing_prefix_deflate(FRAMING_WS_DEFLATE, 10, 1, 0, &p);
    assert_memory_equal(p.bytes, "\xc2\x0a", 2);
    framing_prefix_deflate(FRAMING_WS_META_DEFLATE, 10, 42, 1, &p);
    char id[64];
    int n = snprintf(id, sizeof id, "id: %s:42\n\n", history_epoch_hex());
    assert_int_equal(p.len, 2 + 5 + n);
    assert_int_equal((uint8_t)p.bytes[0], 0xc1);
    assert_int_equal(p.bytes[1], 5 + n + 10);
    assert_int_equal(p.bytes[2], 0);
    assert_int_equal((uint8_t)p.bytes[3], n);
    assert_int_equal((uint8_t)p.bytes[4], 0);
    assert_int_equal((uint8_t)p.bytes[5], (uint8_t)~n);
    assert_int_equal((uint8_t)p.bytes[6], 0xff);
    assert_memory_equal(p.bytes + 7, id, (size_t)n);
    framing_prefix_deflate(FRAMING_WS_META_DEFLATE, 8u << 20, UINT32_MAX, 0, &p);
    assert_int_equal(p.len, FRAMING_PREFIX_MAX);
    framing_prefix_utf8(FRAMING_WS_META_DEFLATE, 5, 42, 1, &p);
    assert_int_equal((uint8_t)p.bytes[0], 0x81);
    framing_prefix_utf8(FRAMING_WS_DEFLATE, 5, 42, 0, &p);
    assert_memory_equal(p.bytes, "\x82\x05", 2);
    assert_true(framing_is_websocket(FRAMING_WS_META_DEFLATE));
    assert_true(framing_ws_meta(FRAMING_WS_META_DEFLATE));
    assert_false(framing_ws_deflate(FRAMING_WS_META));
}

/* The body in a buffer of exactly framing_sse_body_len bytes (ASan sees
 * a write past it), compared with want. */
#define SSE_BODY_IS(data, binary, want) \
    sse_body_is(data, sizeof data - 1, binary, want, sizeof want - 1)
static void sse_body_is(const char *data, uint32_t len, int binary, const char *want,
                        size_t want_len)
{
    size_t n = framing_sse_body_len(data, len, binary);
    assert_int_equal(n, want_len);
    char *out = malloc(n);
    assert_non_null(out);
    framing_sse_body(data, len, binary, out);
    assert_memory_equal(out, want, n);
    free(out);
}

static void sse_bodies_are_lines_or_base64(void **state)
{
    (void)state;
    SSE_BODY_IS("", 0, "data: \n\n");
    SSE_BODY_IS("caf\xc3\xa9\r\nx\ry\n", 0, "data: caf\xc3\xa9\ndata: x\ndata: y\ndata: \n\n");
    SSE_BODY_IS("a\0b", 0, "data: a\0b\n\n");               /* NUL is UTF-8 */
    /* Binary: each length modulo 3, and bytes that are line breaks. */
    SSE_BODY_IS("\xff", 1, "event: base64\ndata: /w==\n\n");
    SSE_BODY_IS("\xff\x00", 1, "event: base64\ndata: /wA=\n\n");
    SSE_BODY_IS("\xff\x00\x01", 1, "event: base64\ndata: /wAB\n\n");
    SSE_BODY_IS("\xff\xfe\x00\x01", 1, "event: base64\ndata: //4AAQ==\n\n");
    SSE_BODY_IS("\n\xc3\r", 1, "event: base64\ndata: CsMN\n\n");
    SSE_BODY_IS("\xed\xa0\x80", 1, "event: base64\ndata: 7aCA\n\n");     /* a surrogate */
    /* Binary whatever its bytes: valid UTF-8 too. */
    SSE_BODY_IS("hello", 1, "event: base64\ndata: aGVsbG8=\n\n");
    SSE_BODY_IS("caf\xc3\xa9\n", 1, "event: base64\ndata: Y2Fmw6kK\n\n");
    SSE_BODY_IS("", 1, "event: base64\ndata: \n\n");
}

static void utf8_is_checked_strictly(void **state)
{
    (void)state;
    static const char *valid[] = {
        "", "plain ASCII, longer than eight bytes at a time", "caf\xc3\xa9",
        "\xe2\x82\xac", "\xed\x9f\xbf", "\xee\x80\x80", "\xf0\x90\x80\x80", "\xf4\x8f\xbf\xbf",
    };
    static const char *invalid[] = {
        "\x80", "\xc0\x80", "\xc1\xbf", "\xe0\x80\x80", "\xed\xa0\x80", "\xf0\x80\x80\x80",
        "\xf4\x90\x80\x80", "\xf5\x80\x80\x80", "\xff", "caf\xe9", "caf\xc3", "\xe2\x82",
        "0123456789\xc3(",
    };
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++)
        assert_true(utf8_valid(valid[i], strlen(valid[i])));
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
        assert_false(utf8_valid(invalid[i], strlen(invalid[i])));
    assert_true(utf8_valid("a\0b", 3));
}

static void utf8_pieces_split_characters(void **state)
{
    (void)state;
    const uint8_t text[] = "x\xf0\x9f\x98\x80y\xe2\x82\xac";
    for (size_t cut = 0; cut <= sizeof text - 1; cut++) {
        struct utf8_state st = {0};
        assert_true(utf8_feed(&st, text, cut));
        assert_true(utf8_feed(&st, text + cut, sizeof text - 1 - cut));
        assert_true(utf8_complete(&st));
    }
    struct utf8_state st = {0};
    assert_true(utf8_feed(&st, (const uint8_t *)"\xe0", 1));
    assert_false(utf8_complete(&st));
    assert_false(utf8_feed(&st, (const uint8_t *)"\x80", 1));   /* overlong, seen late */
}

static void the_handshake_answers_as_the_rfc_says(void **state)
{
    (void)state;
    char accept[29];
    ws_handshake_accept("dGhlIHNhbXBsZSBub25jZQ==", accept);       /* RFC 6455, 1.3 */
    assert_string_equal(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    assert_true(ws_header_has_token("keep-alive, Upgrade", "upgrade"));
    assert_true(ws_header_has_token("websocket", "websocket"));
    assert_true(ws_header_has_token("chat ,  ws+meta.httpdcnode ", WS_META_PROTOCOL));
    assert_false(ws_header_has_token("ws+meta.httpdcnodex", WS_META_PROTOCOL));
    assert_false(ws_header_has_token("notupgrade", "upgrade"));
    assert_false(ws_header_has_token(NULL, "upgrade"));
}

int main(void)
{
    history_init(&(struct history_config){.max_users = 10, .per_uid = 0});
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ws_headers_take_each_length_form),
        cmocka_unit_test(ws_frames_are_whole_messages),
        cmocka_unit_test(ws_meta_prefixes_the_id),
        cmocka_unit_test(ws_deflate_prefixes),
        cmocka_unit_test(sse_bodies_are_lines_or_base64),
        cmocka_unit_test(utf8_is_checked_strictly),
        cmocka_unit_test(utf8_pieces_split_characters),
        cmocka_unit_test(the_handshake_answers_as_the_rfc_says),
    };
    int r = cmocka_run_group_tests(tests, NULL, NULL);
    history_free();
    return r;
}
