/* SPDX-License-Identifier: Apache-2.0 */
/* Per-hop message ages for --probe-latency: see probe.h. All
 * histograms belong to the loop thread; the C-node thread only stamps the
 * receive time into the hand-off record. */
#include "obs/probe.h"
#include "lib/clock.h"
#include "lib/histogram.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int probe_enabled;

enum hop { HOP_RECEIVED, HOP_APPLIED, HOP_WRITTEN, HOPS };

static const char *const hop_names[HOPS] = {"received", "applied", "written"};
static struct histogram *hops;      /* HOPS histograms, allocated only when enabled */

int probe_start(void)
{
    hops = calloc(HOPS, sizeof *hops);
    return hops ? 0 : -1;
}

void probe_free(void)
{
    free(hops);
    hops = NULL;
}

uint64_t probe_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

uint64_t probe_sent_ns(const char *p, uint32_t len)
{
    uint64_t v = 0;
    uint32_t i = 2;
    if (len < 4 || p[0] != 't' || p[1] != '=')
        return 0;
    /* 19 digits hold any time before the year 2286 without overflow. */
    for (; i < len && i < 2 + 19 && p[i] >= '0' && p[i] <= '9'; i++)
        v = v * 10 + (uint64_t)(p[i] - '0');
    return i > 2 && i < len && p[i] == ';' ? v : 0;
}

/* Age in us of a message sent at sent_ns, at now_ns (0 if the clock stepped). */
static void record(enum hop h, uint64_t sent_ns, uint64_t now_ns)
{
    hist_record(&hops[h], now_ns > sent_ns ? (now_ns - sent_ns) / 1000 : 0);
}

void probe_applied(const char *payload, uint32_t len, uint64_t received_ns)
{
    uint64_t sent = probe_sent_ns(payload, len);
    if (!sent)
        return;
    /* received_ns is monotonic; the publisher's stamp is the epoch's. */
    uint64_t now = probe_now_ns(), mono = clock_now_ns();
    uint64_t age = mono > received_ns ? mono - received_ns : 0;
    record(HOP_RECEIVED, sent, now > age ? now - age : 0);
    record(HOP_APPLIED, sent, now);
}

void probe_written(const char *payload, uint32_t len, uint64_t now_ns)
{
    uint64_t sent = probe_sent_ns(payload, len);
    if (sent)
        record(HOP_WRITTEN, sent, now_ns);
}

size_t probe_format_json(char *buf, size_t size, int reset)
{
    size_t n = 0;
    for (int h = 0; h < HOPS && n < size; h++) {
        const struct histogram *x = &hops[h];
        n += (size_t)snprintf(buf + n, size - n,
                              "%s\"%s\":{\"n\":%llu,\"p50_us\":%llu,\"p90_us\":%llu,"
                              "\"p99_us\":%llu,\"max_us\":%llu}",
                              h ? "," : "{", hop_names[h], (unsigned long long)x->total,
                              (unsigned long long)hist_percentile(x, 50),
                              (unsigned long long)hist_percentile(x, 90),
                              (unsigned long long)hist_percentile(x, 99),
                              (unsigned long long)x->max_us);
    }
    if (n < size)
        n += (size_t)snprintf(buf + n, size - n, "}\n");
    if (n >= size)
        n = size - 1;
    if (reset)
        for (int h = 0; h < HOPS; h++)
            hist_reset(&hops[h]);
    return n;
}
