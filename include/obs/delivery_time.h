/* SPDX-License-Identifier: Apache-2.0 */
/* httpdcnode_delivery_seconds: how long a message spent inside the server,
 * from the C-node thread's receipt to the write of the batch that carried
 * it. Fixed Prometheus buckets, plain counters: observing allocates nothing
 * and reads no clock (the caller passes the age). Loop thread only. */
#ifndef HTTPDCNODE_DELIVERY_TIME_H
#define HTTPDCNODE_DELIVERY_TIME_H

#include <stdint.h>

/* Upper bounds of the buckets, ascending; a last one, +Inf, follows. */
#define DELIVERY_BUCKETS 15
struct delivery_bound {
    uint64_t ns;
    const char *le;            /* the same in seconds, as the label says it */
};
extern const struct delivery_bound delivery_bounds[DELIVERY_BUCKETS];

struct delivery_time {
    uint64_t bucket[DELIVERY_BUCKETS + 1];  /* per bucket, not cumulative; last +Inf */
    uint64_t count;
    uint64_t sum_ns;
};
extern struct delivery_time delivery_time;

/* n deliveries of one message, age_ns after its receipt. */
void delivery_time_observe(uint64_t age_ns, uint32_t n);

#endif
