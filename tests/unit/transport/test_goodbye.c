/* SPDX-License-Identifier: Apache-2.0 */
/* Why a stream ended, as each transport's goodbye tells its client (the
 * WebSocket close code, the long-poll's "ended", the SSE end event, the
 * last chunk), and as the reasons' one table names and counts it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "core/framing.h"
#include "core/transport_ops.h"
#include "obs/end_reason.h"
#include "obs/stats.h"
#include "transport/chunked.h"
#include "transport/poll.h"
#include "transport/sse.h"
#include "transport/ws.h"

static void said(uint8_t framing, uint8_t why, const char *bytes, size_t n)
{
    struct iovec t = transport_goodbye(framing, why);
    assert_int_equal(t.iov_len, n);
    if (n)
        assert_memory_equal(t.iov_base, bytes, n);
}

#define SAID(framing, why, lit) said(framing, why, lit, sizeof lit - 1)

static void websocket_close_codes(void **state)
{
    (void)state;
    SAID(FRAMING_WS_META, END_DRAIN, "\x88\x02\x03\xf4");      /* 1012 */
    SAID(FRAMING_WS, END_KICKED, "\x88\x02\x0f\xa1");          /* 4001 */
    SAID(FRAMING_WS_DEFLATE, END_REPLACED, "\x88\x02\x0f\xa2"); /* 4002 */
    SAID(FRAMING_WS, END_EXPIRED, "\x88\x02\x0f\xa3");         /* 4003 */
    /* A reason the client is not told of: drain's. */
    SAID(FRAMING_WS, END_SLOW, "\x88\x02\x03\xf4");
}

static void endings_say_why(void **state)
{
    (void)state;
    SAID(FRAMING_POLL, END_KICKED, "{\"messages\":[],\"gap\":false,\"ended\":\"kicked\"}\n");
    SAID(FRAMING_POLL, END_REPLACED, "{\"messages\":[],\"gap\":false,\"ended\":\"replaced\"}\n");
    SAID(FRAMING_SSE, END_DRAIN, "event: end\ndata: {\"reason\":\"drain\"}\n\n");
    SAID(FRAMING_SSE, END_EXPIRED, "event: end\ndata: {\"reason\":\"expired\"}\n\n");
    SAID(FRAMING_CHUNKED, END_EXPIRED, "0\r\n\r\n");
    said(FRAMING_RAW, END_DRAIN, NULL, 0);                      /* the close says it */
}

/* The labels the masters and /metrics read, the words clients read, and
 * each reason's counter. */
static void one_table_names_and_counts(void **state)
{
    (void)state;
    assert_string_equal(end_reason_label(END_KICKED), "kick");
    assert_string_equal(end_reason_label(END_REPLACED), "evicted");
    assert_string_equal(end_reason_label(END_WS_SHED), "ws_shed");
    assert_string_equal(end_reason_label(END_FINISHED), "finished");
    assert_string_equal(end_reason_word(END_EXPIRED), "expired");
    assert_string_equal(end_reason_word(END_CLIENT), "drain");
    assert_true(end_reason_told(END_EXPIRED) && !end_reason_told(END_CLIENT));
    memset(&loop_stats, 0, sizeof loop_stats);
    end_reason_count(END_CLIENT_RATE);
    end_reason_count(END_DRAIN);
    end_reason_count(END_FINISHED);
    assert_int_equal(loop_stats.client_rate_closed, 1);
    assert_int_equal(loop_stats.drained, 1);
}

int main(void)
{
    static struct ws_config ws;
    if (chunked_init() != 0 || sse_init() != 0 || poll_init(30, 65536) != 0 || ws_init(&ws) != 0)
        return 1;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(websocket_close_codes),
        cmocka_unit_test(endings_say_why),
        cmocka_unit_test(one_table_names_and_counts),
    };
    return cmocka_run_group_tests_name("goodbye", tests, NULL, NULL);
}
