/* SPDX-License-Identifier: Apache-2.0 */
/* The latency histogram (src/lib/histogram.c) of the load client and the
 * server's latency probe:
 * bucket layout, precision, percentiles, merging. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lib/histogram.h"

static struct histogram h1, h2, h3;

static void small_values_are_exact(void **state)
{
    (void)state;
    for (uint64_t v = 0; v < 2 * HIST_SUB; v++) {
        unsigned b = hist_bucket_of(v);
        assert_int_equal(b, v);
        assert_int_equal(hist_bucket_low(b), v);
        assert_int_equal(hist_bucket_high(b), v);
    }
}

static void buckets_tile_the_range_without_gaps(void **state)
{
    (void)state;
    assert_int_equal(HIST_BUCKETS, hist_bucket_of(HIST_MAX_US) + 1);
    for (unsigned b = 1; b < HIST_BUCKETS; b++) {
        assert_int_equal(hist_bucket_low(b), hist_bucket_high(b - 1) + 1);
        assert_int_equal(hist_bucket_of(hist_bucket_low(b)), b);
        if (b + 1 < HIST_BUCKETS)
            assert_int_equal(hist_bucket_of(hist_bucket_high(b)), b);
    }
    assert_true(hist_bucket_high(HIST_BUCKETS - 1) >= HIST_MAX_US);
}

static void bucket_width_is_within_one_64th(void **state)
{
    (void)state;
    for (unsigned b = 2 * HIST_SUB; b < HIST_BUCKETS; b++) {
        uint64_t lo = hist_bucket_low(b), width = hist_bucket_high(b) - lo + 1;
        assert_true(width * 64 <= lo);
    }
}

static void values_past_the_top_are_clamped_but_max_is_exact(void **state)
{
    (void)state;
    hist_reset(&h1);
    hist_record(&h1, 50000000);     /* 50 s */
    hist_record(&h1, 3);
    assert_int_equal(h1.total, 2);
    assert_int_equal(h1.counts[HIST_BUCKETS - 1], 1);
    assert_int_equal(h1.counts[3], 1);
    assert_int_equal(h1.max_us, 50000000);
    assert_int_equal(hist_percentile(&h1, 100), 50000000);
}

static void percentiles_of_a_uniform_spread(void **state)
{
    (void)state;
    hist_reset(&h1);
    assert_int_equal(hist_percentile(&h1, 50), 0);
    for (uint64_t v = 1; v <= 10000; v++)
        hist_record(&h1, v);
    uint64_t p50 = hist_percentile(&h1, 50), p90 = hist_percentile(&h1, 90),
             p99 = hist_percentile(&h1, 99);
    /* The bucket's highest value: at or above the exact answer, within 1/64. */
    assert_true(p50 >= 5000 && p50 <= 5000 + 5000 / 64);
    assert_true(p90 >= 9000 && p90 <= 9000 + 9000 / 64);
    assert_true(p99 >= 9900 && p99 <= 10000);
    assert_int_equal(hist_percentile(&h1, 100), 10000);
    assert_int_equal(hist_percentile(&h1, 0), 1);
}

static void a_percentile_never_exceeds_the_max(void **state)
{
    (void)state;
    hist_reset(&h1);
    hist_record(&h1, 1000);
    assert_int_equal(hist_percentile(&h1, 50), 1000);
    assert_int_equal(hist_percentile(&h1, 99.9), 1000);
}

static void merging_equals_recording_everything_in_one(void **state)
{
    (void)state;
    hist_reset(&h1);
    hist_reset(&h2);
    hist_reset(&h3);
    for (uint64_t v = 1; v < 3000000; v = v * 3 / 2 + 1) {
        hist_record(&h1, v);
        hist_record(&h3, v);
        hist_record(&h2, v * 2);
        hist_record(&h3, v * 2);
    }
    hist_merge(&h1, &h2);
    assert_int_equal(h1.total, h3.total);
    assert_int_equal(h1.max_us, h3.max_us);
    assert_memory_equal(h1.counts, h3.counts, sizeof h1.counts);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(small_values_are_exact),
        cmocka_unit_test(buckets_tile_the_range_without_gaps),
        cmocka_unit_test(bucket_width_is_within_one_64th),
        cmocka_unit_test(values_past_the_top_are_clamped_but_max_is_exact),
        cmocka_unit_test(percentiles_of_a_uniform_spread),
        cmocka_unit_test(a_percentile_never_exceeds_the_max),
        cmocka_unit_test(merging_equals_recording_everything_in_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
