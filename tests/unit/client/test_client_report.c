/* The load client's progress line (tools/httpclient/report.c): the fields
 * scripts read by name, and the last message's time on the wall clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../../tools/httpclient/report.c"

static void last_message_on_the_wall_clock(void **state)
{
    (void)state;
    struct worker_stats s;
    memset(&s, 0, sizeof s);
    assert_int_equal(report_last_msg_real_ms(&s, 5000000000ull, 9000000000ull), 0);
    s.last_msg_ns = 3000000000ull;      /* 2 s before mono_now */
    assert_int_equal(report_last_msg_real_ms(&s, 5000000000ull, 9000000000ull), 7000);
    s.last_msg_ns = 6000000000ull;      /* after now: not trusted */
    assert_int_equal(report_last_msg_real_ms(&s, 5000000000ull, 9000000000ull), 0);
}

static void progress_line_has_max_and_last(void **state)
{
    (void)state;
    struct worker_stats s;
    memset(&s, 0, sizeof s);
    s.msgs = 3;
    s.lat.max_us = 4321;
    s.last_msg_ns = mono_ns();
    struct run_info ri = {10, 1, 2.0, "", "chunked", 0};
    char buf[512] = {0};
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    assert_non_null(f);
    uint64_t before = real_ns() / 1000000u;
    report_progress(f, &s, &ri, 1.0);
    fclose(f);
    assert_non_null(strstr(buf, " msgs 3 "));
    assert_non_null(strstr(buf, " us max 4321 us last_msg_ms "));
    unsigned long long t = strtoull(strstr(buf, "last_msg_ms ") + 12, NULL, 10);
    assert_true(t + 1000 >= before && t <= before + 1000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(last_message_on_the_wall_clock),
        cmocka_unit_test(progress_line_has_max_and_last),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
