/* SPDX-License-Identifier: Apache-2.0 */
/* The --probe-latency stamp parser and its /probe JSON. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "lib/clock.h"
#include "core/cmd.h"
#include "obs/probe.h"

static uint64_t sent(const char *s) { return probe_sent_ns(s, (uint32_t)strlen(s)); }

static void reads_the_stamp_msggen_writes(void **state)
{
    (void)state;
    assert_int_equal(sent("t=1764505200123456789;"), 1764505200123456789ull);
    assert_int_equal(sent("t=5;padding"), 5);
    /* Only the payload's length counts, not a terminating NUL. */
    assert_int_equal(probe_sent_ns("t=42;", 5), 42);
    assert_int_equal(probe_sent_ns("t=42;", 4), 0);
}

static void anything_else_is_no_stamp(void **state)
{
    (void)state;
    const char *bad[] = {"", "t", "t=", "t=;", "t=12", "t=12x;", "x=12;", "T=12;", " t=1;",
                         "t=-1;", "t=12345678901234567890;", "hello"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(sent(bad[i]), 0);
}

/* The p50_us of hop in the JSON, or -1. */
static long p50_of(const char *json, const char *hop)
{
    char key[64];
    snprintf(key, sizeof key, "\"%s\":{\"n\":1,\"p50_us\":", hop);
    const char *at = strstr(json, key);
    return at ? strtol(at + strlen(key), NULL, 10) : -1;
}

/* A message stamped 5 ms ago (the epoch's clock), received 2 ms ago (the
 * monotonic clock, as the C-node thread stamps it) and written 5 ms after
 * its send. */
static void hops_are_counted_and_reset(void **state)
{
    (void)state;
    assert_int_equal(probe_start(), 0);
    static uint64_t rec[8];
    struct cmd *c = (struct cmd *)rec;
    uint64_t sent_ns = probe_now_ns() - 5000000ull;
    char payload[32];
    int len = snprintf(payload, sizeof payload, "t=%llu;", (unsigned long long)sent_ns);
    memset(rec, 0, sizeof rec);
    c->kind = CMD_UNICAST;
    c->payload_len = (uint32_t)len;
    memcpy(cmd_payload(c), payload, (size_t)len);
    c->received_ns = clock_now_ns() - 2000000ull;
    probe_applied(cmd_payload(c), c->payload_len, c->received_ns);
    probe_written(payload, (uint32_t)len, sent_ns + 5000000ull);
    probe_written("no stamp", 8, sent_ns + 5000000ull);

    char json[1024];
    probe_format_json(json, sizeof json, 1);
    long received = p50_of(json, "received"), applied = p50_of(json, "applied");
    assert_in_range(received, 2900, 4500);   /* 3 ms; 1.6 % buckets, a moment between reads */
    assert_in_range(applied, 4900, 6500);
    assert_non_null(strstr(json, "\"written\":{\"n\":1,\"p50_us\":5000,"));
    probe_format_json(json, sizeof json, 0);
    assert_non_null(strstr(json, "\"received\":{\"n\":0,"));
    assert_non_null(strstr(json, "\"written\":{\"n\":0,"));
    probe_free();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_the_stamp_msggen_writes),
        cmocka_unit_test(anything_else_is_no_stamp),
        cmocka_unit_test(hops_are_counted_and_reset),
    };
    return cmocka_run_group_tests_name("latency_probe", tests, NULL, NULL);
}
