/* SPDX-License-Identifier: Apache-2.0 */
/* The --client-rate bucket (client_rate.h) that a WebSocket's messages and
 * POST /send/N share: a full burst at first, refilled at the rate, never
 * above the burst, and never refilled by a clock that went back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "core/client_rate.h"

/* Messages the bucket gives at now, until it refuses. */
static int drain(uint32_t *tokens, uint32_t *at, uint32_t now, uint32_t rate, uint32_t burst)
{
    int n = 0;
    while (n < 100000 && rate_take(tokens, at, now, rate, burst))
        n++;
    return n;
}

static void burst_then_rate(void **state)
{
    (void)state;
    uint32_t rate = 10, burst = rate_burst_milli(rate), tokens = 0, at = 0;
    assert_int_equal(burst, 10000);             /* 10 / 4 + 8 messages */
    assert_int_equal(drain(&tokens, &at, 1001, rate, burst), 10);
    /* 10 a second: one every 100 ms, not before. */
    assert_int_equal(drain(&tokens, &at, 1100, rate, burst), 0);
    assert_int_equal(drain(&tokens, &at, 1101, rate, burst), 1);
    assert_int_equal(drain(&tokens, &at, 1601, rate, burst), 5);
    /* A long pause refills the burst, no more. */
    assert_int_equal(drain(&tokens, &at, 901601, rate, burst), 10);
}

static void clock_back_refills_nothing(void **state)
{
    (void)state;
    uint32_t rate = 50, burst = rate_burst_milli(rate), tokens = 0, at = 0;
    assert_int_equal(drain(&tokens, &at, 5001, rate, burst), 20);
    /* Another clock a few ms behind (or a wrap) gives nothing back. */
    assert_int_equal(drain(&tokens, &at, 4997, rate, burst), 0);
    assert_int_equal(drain(&tokens, &at, 5001, rate, burst), 0);
    assert_int_equal(drain(&tokens, &at, 5021, rate, burst), 1);
}

static void now_is_never_zero(void **state)
{
    (void)state;
    assert_true(client_rate_now_ms() != 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(burst_then_rate),
        cmocka_unit_test(clock_back_refills_nothing),
        cmocka_unit_test(now_is_never_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
