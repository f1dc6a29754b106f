/* Adding up the workers' stats and printing them: progress lines and the
 * final summary (text or one JSON line). */
#ifndef HTTPCLIENT_REPORT_H
#define HTTPCLIENT_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "stats.h"

struct run_info {
    unsigned long conns;        /* requested */
    unsigned procs;
    double elapsed_s;
    const char *stopped_by;     /* until-msgs, hold, done, signal, max-time */
    const char *proto;          /* --proto */
    uint64_t resume_ns;         /* when SIGUSR1 came (CLOCK_MONOTONIC), 0: never */
};

/* out = the sum of n workers' stats (earliest first_*, latest last_*). */
void report_sum(struct worker_stats *out, const struct worker_stats *ws, unsigned n);
/* Messages per second from the first to the last message (over elapsed_s
 * when they are not apart). */
double report_msg_rate(const struct worker_stats *s, double elapsed_s);
/* Successful connects per second from the first connect() to the last success. */
double report_connect_rate(const struct worker_stats *s);
/* One progress line; msg_rate is the rate since the previous line. */
void report_progress(FILE *out, const struct worker_stats *s, const struct run_info *ri,
                     double msg_rate);
void report_summary(FILE *out, const struct worker_stats *s, const struct run_info *ri, int json);

#endif
