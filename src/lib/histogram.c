/* SPDX-License-Identifier: Apache-2.0 */
/* Log-linear latency histogram: see histogram.h. No libm: the unit test links
 * it without -lm. */
#include "lib/histogram.h"

#include <string.h>

void hist_reset(struct histogram *h)
{
    memset(h, 0, sizeof *h);
}

unsigned hist_bucket_of(uint64_t us)
{
    if (us > HIST_MAX_US)
        us = HIST_MAX_US;
    if (us < 2 * HIST_SUB)
        return (unsigned)us;
    unsigned msb = 63u - (unsigned)__builtin_clzll(us);
    unsigned shift = msb - HIST_SUB_BITS;
    /* us >> shift lies in [HIST_SUB, 2*HIST_SUB): buckets of successive
     * powers of two follow each other without gaps. */
    return shift * HIST_SUB + (unsigned)(us >> shift);
}

static unsigned bucket_shift(unsigned idx)
{
    return idx < 2 * HIST_SUB ? 0 : idx / HIST_SUB - 1;
}

uint64_t hist_bucket_low(unsigned idx)
{
    unsigned shift = bucket_shift(idx);
    return (uint64_t)(idx - shift * HIST_SUB) << shift;
}

uint64_t hist_bucket_high(unsigned idx)
{
    unsigned shift = bucket_shift(idx);
    return (((uint64_t)(idx - shift * HIST_SUB) + 1) << shift) - 1;
}

void hist_record(struct histogram *h, uint64_t us)
{
    h->counts[hist_bucket_of(us)]++;
    h->total++;
    if (us > h->max_us)
        h->max_us = us;
}

void hist_merge(struct histogram *dst, const struct histogram *src)
{
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        dst->counts[i] += src->counts[i];
    dst->total += src->total;
    if (src->max_us > dst->max_us)
        dst->max_us = src->max_us;
}

uint64_t hist_percentile(const struct histogram *h, double p)
{
    if (h->total == 0)
        return 0;
    if (p < 0)
        p = 0;
    if (p > 100)
        p = 100;
    /* Rank of the sample at percentile p, 1-based, rounded up. */
    double exact = p / 100.0 * (double)h->total;
    uint64_t rank = (uint64_t)exact;
    if ((double)rank < exact)
        rank++;
    if (rank == 0)
        rank = 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen >= rank) {
            /* The top bucket also holds the clamped values: only max is sure. */
            if (i == HIST_BUCKETS - 1)
                return h->max_us;
            uint64_t v = hist_bucket_high(i);
            return v < h->max_us ? v : h->max_us;
        }
    }
    return h->max_us;
}
