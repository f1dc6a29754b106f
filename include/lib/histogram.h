/* SPDX-License-Identifier: Apache-2.0 */
/* Latency histogram with log-linear buckets (the HdrHistogram layout), in
 * microseconds from 1 us to 10 s, with ~1.6 % precision. Fixed size (9.3 KB),
 * so the load client's workers can send it whole to their parent and merging
 * is adding counts: no sample is ever stored. Used by the load client and by
 * the server's --probe-latency. */
#ifndef HTTPDCNODE_HISTOGRAM_H
#define HTTPDCNODE_HISTOGRAM_H

#include <stdint.h>

/* 64 linear sub-buckets per power of two: values below 128 are exact, above
 * that a bucket is 1/64 of its power of two wide. */
#define HIST_SUB_BITS 6
#define HIST_SUB (1u << HIST_SUB_BITS)
/* Values above this are counted in the top bucket; the exact max is kept apart. */
#define HIST_MAX_US 10000000ull
/* hist_bucket_of(HIST_MAX_US) + 1: 10^7 >> 17 = 76, so 17 * 64 + 76 + 1
 * (checked by the unit test). */
#define HIST_BUCKETS 1165u

struct histogram {
    uint64_t total;
    uint64_t max_us;      /* exact, not clamped */
    uint64_t counts[HIST_BUCKETS];
};

void hist_reset(struct histogram *h);
void hist_record(struct histogram *h, uint64_t us);
/* Adds src's counts into dst. */
void hist_merge(struct histogram *dst, const struct histogram *src);
/* Value at percentile p (0..100): the highest value equivalent to the bucket
 * holding that rank, never above the recorded max. 0 when empty. */
uint64_t hist_percentile(const struct histogram *h, double p);

/* Bucket arithmetic, exposed for tests. */
unsigned hist_bucket_of(uint64_t us);
uint64_t hist_bucket_low(unsigned idx);
uint64_t hist_bucket_high(unsigned idx);

#endif
