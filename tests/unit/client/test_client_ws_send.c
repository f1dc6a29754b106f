/* SPDX-License-Identifier: Apache-2.0 */
/* What the load client sends up a WebSocket (tools/httpclient/ws_send.c):
 * client frames, masked as RFC 6455 section 5.3 wants, in each length
 * form, read back by wslay's frame parser as a server reads them (it
 * checks the mask bit and unmasks); too small a buffer is refused; the
 * payloads "q=SEQ;t=NS;" and "r=SEQ;t=NS;" at their longest. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <wslay/wslay.h>

#include "../../../tools/httpclient/ws_send.c"

/* The bytes wslay's server side reads. */
static struct {
    const uint8_t *p;
    size_t left;
} g_in;

static ssize_t in_recv(uint8_t *buf, size_t len, int flags, void *user)
{
    (void)flags;
    (void)user;
    size_t n = len < g_in.left ? len : g_in.left;
    if (!n)
        return -1;          /* WSLAY_ERR_WANT_READ would be set by a real callback */
    memcpy(buf, g_in.p, n);
    g_in.p += n;
    g_in.left -= n;
    return (ssize_t)n;
}

static ssize_t no_send(const uint8_t *d, size_t l, int f, void *u)
{
    (void)d; (void)l; (void)f; (void)u;
    return -1;
}

static int no_mask(uint8_t *b, size_t l, void *u)
{
    (void)b; (void)l; (void)u;
    return -1;
}

/* Decodes frame[0..len) as a server: the payload, unmasked, into out. */
static size_t server_reads(const uint8_t *frame, size_t len, uint8_t *out, size_t cap,
                           struct wslay_frame_iocb *io)
{
    static const struct wslay_frame_callbacks cb = {no_send, in_recv, no_mask};
    wslay_frame_context_ptr ctx;
    assert_int_equal(wslay_frame_context_init(&ctx, &cb, NULL), 0);
    g_in.p = frame;
    g_in.left = len;
    size_t got = 0;
    while (g_in.left) {
        ssize_t r = wslay_frame_recv(ctx, io);
        assert_true(r >= 0);
        assert_true(got + io->data_length <= cap);
        memcpy(out + got, io->data, io->data_length);
        got += io->data_length;
    }
    wslay_frame_context_free(ctx);
    return got;
}

static void every_length_form_is_masked_and_reads_back(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 33, 125, 126, 127, 65535, 65536, 70000};
    static uint8_t payload[70000], frame[70000 + 14], back[70000];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (uint8_t)(i * 31 + 7);
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        size_t hl = n < 126 ? 2 : n < 65536 ? 4 : 10;
        uint32_t mask = 0xa1b2c3d4u + (uint32_t)k;
        size_t len = ws_client_frame(frame, sizeof frame, WS_OP_TEXT, payload, n, mask);
        assert_int_equal(len, hl + 4 + n);
        assert_int_equal(frame[0], 0x81);               /* FIN, text, no RSV */
        assert_true(frame[1] & 0x80);                   /* masked */
        assert_int_equal(frame[1] & 0x7f, n < 126 ? n : n < 65536 ? 126 : 127);
        assert_int_equal(frame[hl], 0xa1);              /* the mask, first byte first */
        assert_int_equal(frame[hl + 3], (0xd4 + k) & 0xff);
        if (n >= 4)                                     /* the payload is not sent in clear */
            assert_memory_not_equal(frame + hl + 4, payload, 4);
        struct wslay_frame_iocb io;
        memset(back, 0, n ? n : 1);
        assert_int_equal(server_reads(frame, len, back, sizeof back, &io), n);
        assert_int_equal(io.mask, 1);
        assert_int_equal(io.fin, 1);
        assert_int_equal(io.opcode, WSLAY_TEXT_FRAME);
        assert_int_equal(io.payload_length, n);
        if (n)
            assert_memory_equal(back, payload, n);
    }
}

static void too_small_a_buffer_is_refused(void **state)
{
    (void)state;
    uint8_t frame[64], payload[60] = {0};
    assert_int_equal(ws_client_frame(frame, 5, WS_OP_TEXT, payload, 0, 1), 0);
    assert_int_equal(ws_client_frame(frame, 6, WS_OP_TEXT, payload, 0, 1), 6);
    assert_int_equal(ws_client_frame(frame, 6 + 57, WS_OP_TEXT, payload, 58, 1), 0);
    assert_int_equal(ws_client_frame(frame, 6 + 58, WS_OP_TEXT, payload, 58, 1), 64);
    /* 126 bytes take the 16-bit length: 8 bytes before the payload. */
    uint8_t big[200], pl[126] = {0};
    assert_int_equal(ws_client_frame(big, 8 + 125, WS_OP_TEXT, pl, 126, 1), 0);
    assert_int_equal(ws_client_frame(big, 8 + 126, WS_OP_TEXT, pl, 126, 1), 134);
}

static void payloads_carry_the_sequence_and_stamp(void **state)
{
    (void)state;
    char out[WS_UP_PAYLOAD_MAX];
    assert_int_equal(ws_up_payload(out, sizeof out, 0, 0, 5), 8);
    assert_string_equal(out, "q=0;t=5;");
    size_t n = ws_up_payload(out, sizeof out, 1, UINT32_MAX, UINT64_MAX);
    assert_string_equal(out, "r=4294967295;t=18446744073709551615;");
    assert_int_equal(n, strlen(out));
    assert_true(n + 6 <= WS_UP_FRAME_MAX);
    assert_int_equal(ws_up_payload(out, 8, 0, 0, 5), 0);   /* no room for the NUL */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_length_form_is_masked_and_reads_back),
        cmocka_unit_test(too_small_a_buffer_is_refused),
        cmocka_unit_test(payloads_carry_the_sequence_and_stamp),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
