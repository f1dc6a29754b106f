/* SPDX-License-Identifier: Apache-2.0 */
/* The Prometheus exposition of /metrics, the delivery-time histogram and
 * its observation at a batch flush. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "core/batch.h"
#include "lib/clock.h"
#include "obs/delivery_time.h"
#include "obs/metrics.h"
#include "obs/stats.h"

static char text[METRICS_MAX_BYTES];

static int reset(void **state)
{
    (void)state;
    memset(&loop_stats, 0, sizeof loop_stats);
    memset(&delivery_time, 0, sizeof delivery_time);
    return 0;
}

static const char *format(void)
{
    size_t n = metrics_format(text, sizeof text);
    assert_true(n > 0);
    assert_int_equal(strlen(text), n);
    return text;
}

static void has_line(const char *line)
{
    char want[256];
    snprintf(want, sizeof want, "\n%s\n", line);
    if (!strstr(text, want))
        fail_msg("no line '%s' in:\n%s", line, text);
}

static void every_table_entry_names_a_counter(void **state)
{
    (void)state;
    assert_null(metrics_unknown_stat());
}

static void values_and_labels(void **state)
{
    (void)state;
    loop_stats.streams_open = 7;
    loop_stats.dropped_no_conn = 3;
    loop_stats.slow_closed = 2;
    loop_stats.http_header_timeout = 5;
    loop_stats.deliveries = 123456789012ull;
    atomic_store(&cnode_stats.msgs_in, 11);
    atomic_store(&cnode_stats.bad_terms, 4);
    format();
    has_line("httpdcnode_streams_open 7");
    has_line("httpdcnode_messages_dropped_total{reason=\"no_conn\"} 3");
    has_line("httpdcnode_messages_dropped_total{reason=\"bad_term\"} 4");
    has_line("httpdcnode_streams_closed_total{reason=\"slow\"} 2");
    has_line("httpdcnode_http_rejected_total{reason=\"header_timeout\"} 5");
    has_line("httpdcnode_deliveries_total 123456789012");
    has_line("httpdcnode_messages_received_total 11");
    has_line("# TYPE httpdcnode_streams_open gauge");
    has_line("# TYPE httpdcnode_deliveries_total counter");
    has_line("# TYPE httpdcnode_delivery_seconds histogram");
    atomic_store(&cnode_stats.msgs_in, 0);
    atomic_store(&cnode_stats.bad_terms, 0);
}

/* Every client-message counter of /stats is a metric with a HELP line. */
static void client_message_counters(void **state)
{
    (void)state;
    loop_stats.ws_ignored = 1;
    loop_stats.client_in = 2;
    loop_stats.client_in_dropped = 3;
    loop_stats.client_rate_closed = 4;
    loop_stats.client_paused = 5;
    loop_stats.conn_sent = 6;
    loop_stats.conn_dropped = 7;
    loop_stats.conn_events_dropped = 8;
    loop_stats.ws_policy_closed = 9;
    atomic_store(&cnode_stats.in_no_master, 10);
    atomic_store(&cnode_stats.presence_dropped, 11);
    format();
    has_line("httpdcnode_websocket_client_messages_total 1");
    has_line("httpdcnode_client_messages_total 2");
    has_line("httpdcnode_client_messages_dropped_total{reason=\"outbox_full\"} 3");
    has_line("httpdcnode_client_messages_dropped_total{reason=\"no_master\"} 10");
    has_line("httpdcnode_streams_closed_total{reason=\"client_rate\"} 4");
    has_line("httpdcnode_streams_closed_total{reason=\"ws_policy\"} 9");
    has_line("httpdcnode_client_pauses_total 5");
    has_line("httpdcnode_conn_messages_sent_total 6");
    has_line("httpdcnode_conn_messages_dropped_total 7");
    has_line("httpdcnode_conn_events_dropped_total 8");
    has_line("httpdcnode_presence_dropped_total 11");
    static const char *const helped[] = {
        "client_messages_total", "client_messages_dropped_total", "client_pauses_total",
        "conn_messages_sent_total", "conn_messages_dropped_total", "conn_events_dropped_total",
        "presence_dropped_total", "websocket_client_messages_total"};
    for (size_t i = 0; i < sizeof helped / sizeof helped[0]; i++) {
        char help[96];
        snprintf(help, sizeof help, "\n# HELP httpdcnode_%s ", helped[i]);
        if (!strstr(text, help))
            fail_msg("no HELP for %s", helped[i]);
    }
    atomic_store(&cnode_stats.in_no_master, 0);
    atomic_store(&cnode_stats.presence_dropped, 0);
}

/* Each family: "# HELP name", then "# TYPE name", then only its samples;
 * no family twice; every line ends with a newline. */
static void families_are_announced_once_before_their_samples(void **state)
{
    (void)state;
    format();
    assert_int_equal(text[strlen(text) - 1], '\n');
    char family[128] = "", seen[4096] = " ";
    for (char *line = text, *end; *line; line = end + 1) {
        end = strchr(line, '\n');
        assert_non_null(end);
        *end = '\0';
        char name[128], word[32];
        if (sscanf(line, "# HELP %127s", name) == 1) {
            char key[140];
            snprintf(key, sizeof key, " %s ", name);
            assert_null(strstr(seen, key));            /* once */
            strncat(seen, key + 1, sizeof seen - strlen(seen) - 1);
            snprintf(family, sizeof family, "%s", name);
            assert_true(strncmp(name, "httpdcnode_", 11) == 0);
        } else if (sscanf(line, "# TYPE %127s %31s", name, word) == 2) {
            assert_string_equal(name, family);
            assert_true(strcmp(word, "gauge") == 0 || strcmp(word, "counter") == 0 ||
                        strcmp(word, "histogram") == 0);
        } else {
            size_t len = strlen(family);
            assert_true(strncmp(line, family, len) == 0);
            const char *rest = line + len;
            if (strncmp(rest, "_bucket{", 8) == 0 || strncmp(rest, "_sum ", 5) == 0 ||
                strncmp(rest, "_count ", 7) == 0)
                assert_string_equal(family, "httpdcnode_delivery_seconds");
            else
                assert_true(*rest == ' ' || *rest == '{');
        }
        *end = '\n';
    }
}

static void histogram_buckets_are_cumulative(void **state)
{
    (void)state;
    delivery_time_observe(30000, 2);         /* 30 us, twice */
    delivery_time_observe(50000, 1);         /* on a bound: le is inclusive */
    delivery_time_observe(3000000, 1);       /* 3 ms */
    delivery_time_observe(10000000000ull, 1); /* 10 s: only +Inf */
    format();
    has_line("httpdcnode_delivery_seconds_bucket{le=\"0.00005\"} 3");
    has_line("httpdcnode_delivery_seconds_bucket{le=\"0.0025\"} 3");
    has_line("httpdcnode_delivery_seconds_bucket{le=\"0.005\"} 4");
    has_line("httpdcnode_delivery_seconds_bucket{le=\"2.5\"} 4");
    has_line("httpdcnode_delivery_seconds_bucket{le=\"+Inf\"} 5");
    has_line("httpdcnode_delivery_seconds_count 5");
    has_line("httpdcnode_delivery_seconds_sum 10.003110000");
}

static void too_small_a_buffer_gives_nothing(void **state)
{
    (void)state;
    char small[512];
    assert_int_equal(metrics_format(small, sizeof small), 0);
}

/* A message received 3 ms before the flush: its deliveries are observed
 * once the batch is written, at least 3 ms old. */
static void a_flush_observes_the_batch_receipts(void **state)
{
    (void)state;
    batch_delivered(clock_now_ns() - 3000000ull, 4);
    assert_int_equal(delivery_time.count, 0);   /* not before the writes */
    batch_flush();
    assert_int_equal(delivery_time.count, 4);
    assert_true(delivery_time.sum_ns >= 4 * 3000000ull);
    for (int i = 0; delivery_bounds[i].ns < 3000000ull; i++)
        assert_int_equal(delivery_time.bucket[i], 0);
    batch_flush();                               /* observed once */
    assert_int_equal(delivery_time.count, 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_table_entry_names_a_counter),
        cmocka_unit_test_setup(values_and_labels, reset),
        cmocka_unit_test_setup(client_message_counters, reset),
        cmocka_unit_test_setup(families_are_announced_once_before_their_samples, reset),
        cmocka_unit_test_setup(histogram_buckets_are_cumulative, reset),
        cmocka_unit_test_setup(too_small_a_buffer_gives_nothing, reset),
        cmocka_unit_test_setup(a_flush_observes_the_batch_receipts, reset),
    };
    return cmocka_run_group_tests_name("metrics", tests, NULL, NULL);
}
