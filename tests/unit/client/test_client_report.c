/* SPDX-License-Identifier: Apache-2.0 */
/* The load client's progress line (tools/httpclient/report.c): the fields
 * scripts read by name, the last message's time on the wall clock, and the
 * --hist-out file (two clients' files add up to the histogram of both). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
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

/* Adds the "HIGH COUNT" lines of path into h (max from the "max" line). */
static void add_histogram_file(const char *path, struct histogram *h)
{
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char word[32];
    unsigned long long v;
    while (fscanf(f, "%31s %llu", word, &v) == 2) {
        if (strcmp(word, "max") == 0) {
            if (v > h->max_us)
                h->max_us = v;
            continue;
        }
        unsigned idx = hist_bucket_of(strtoull(word, NULL, 10));
        assert_true(idx < HIST_BUCKETS);
        h->counts[idx] += v;
        h->total += v;
    }
    fclose(f);
}

static void histogram_files_add_up(void **state)
{
    (void)state;
    struct histogram a, b, both, read;
    hist_reset(&a);
    hist_reset(&b);
    hist_reset(&both);
    hist_reset(&read);
    for (uint64_t us = 1; us < 200000; us = us * 3 / 2 + 1) {
        hist_record(&a, us);
        hist_record(&both, us);
    }
    for (int i = 0; i < 99; i++) {
        hist_record(&b, 900);
        hist_record(&both, 900);
    }
    hist_record(&b, 7654321);
    hist_record(&both, 7654321);
    char path[] = "/tmp/test_client_hist_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(report_histogram(path, &a), 0);
    add_histogram_file(path, &read);
    assert_int_equal(report_histogram(path, &b), 0);      /* replaces the file whole */
    add_histogram_file(path, &read);
    unlink(path);
    assert_int_equal(read.total, both.total);
    assert_int_equal(read.max_us, 7654321);
    for (double p = 1; p <= 100; p += 7)
        assert_int_equal(hist_percentile(&read, p), hist_percentile(&both, p));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(last_message_on_the_wall_clock),
        cmocka_unit_test(progress_line_has_max_and_last),
        cmocka_unit_test(histogram_files_add_up),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
