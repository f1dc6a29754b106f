/* SPDX-License-Identifier: Apache-2.0 */
/* The delivery-time histogram: see delivery_time.h. */
#include "obs/delivery_time.h"

/* From 50 us (a drain that found the loop idle) to 2.5 s (a loop stalled
 * behind a huge fan-out); past it is +Inf. */
const struct delivery_bound delivery_bounds[DELIVERY_BUCKETS] = {
    {50000, "0.00005"},     {100000, "0.0001"},   {250000, "0.00025"},
    {500000, "0.0005"},     {1000000, "0.001"},   {2500000, "0.0025"},
    {5000000, "0.005"},     {10000000, "0.01"},   {25000000, "0.025"},
    {50000000, "0.05"},     {100000000, "0.1"},   {250000000, "0.25"},
    {500000000, "0.5"},     {1000000000, "1"},    {2500000000u, "2.5"},
};

struct delivery_time delivery_time;

void delivery_time_observe(uint64_t age_ns, uint32_t n)
{
    unsigned i = 0;
    while (i < DELIVERY_BUCKETS && age_ns > delivery_bounds[i].ns)
        i++;
    delivery_time.bucket[i] += n;
    delivery_time.count += n;
    delivery_time.sum_ns += age_ns * n;
}
