/* SPDX-License-Identifier: Apache-2.0 */
/* Totals and their printing: see report.h. */
#include "report.h"

#include "clock.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void min_nonzero(uint64_t *dst, uint64_t v)
{
    if (v && (!*dst || v < *dst))
        *dst = v;
}

static void max_of(uint64_t *dst, uint64_t v)
{
    if (v > *dst)
        *dst = v;
}

void report_sum(struct worker_stats *out, const struct worker_stats *ws, unsigned n)
{
    memset(out, 0, sizeof *out);
    out->magic = STATS_MAGIC;
    for (unsigned i = 0; i < n; i++) {
        const struct worker_stats *w = &ws[i];
        out->planned += w->planned;
        out->signalled |= w->signalled;
        out->attempted += w->attempted;
        out->connected += w->connected;
        out->welcomed += w->welcomed;
        out->failed += w->failed;
        out->fail_connect += w->fail_connect;
        out->fail_status += w->fail_status;
        out->fail_timeout += w->fail_timeout;
        out->fail_closed += w->fail_closed;
        out->closed_by_server += w->closed_by_server;
        out->stream_errors += w->stream_errors;
        out->churn_closed += w->churn_closed;
        out->churn_reset += w->churn_reset;
        out->reconnects += w->reconnects;
        out->parked += w->parked;
        out->retries += w->retries;
        out->retrying += w->retrying;
        out->up += w->up;
        out->id_errors += w->id_errors;
        out->gaps += w->gaps;
        out->dup += w->dup;
        out->polls += w->polls;
        out->pongs += w->pongs;
        out->open += w->open;
        out->chunks += w->chunks;
        out->msgs += w->msgs;
        out->bytes += w->bytes;
        out->rss_bytes += w->rss_bytes;
        out->cpu_us += w->cpu_us;
        if (w->first_msg_ns)
            out->msgs_cpu_us += w->cpu_us - w->first_msg_cpu_us;
        min_nonzero(&out->first_connect_ns, w->first_connect_ns);
        max_of(&out->last_connect_ns, w->last_connect_ns);
        min_nonzero(&out->first_msg_ns, w->first_msg_ns);
        max_of(&out->last_msg_ns, w->last_msg_ns);
        hist_merge(&out->lat, &w->lat);
        hist_merge(&out->rtt, &w->rtt);
        out->up_sent += w->up_sent;
        out->up_requests += w->up_requests;
        out->up_blocked += w->up_blocked;
        out->replies += w->replies;
        min_nonzero(&out->first_up_ns, w->first_up_ns);
        max_of(&out->last_up_ns, w->last_up_ns);
    }
}

double report_msg_rate(const struct worker_stats *s, double elapsed_s)
{
    if (s->msgs > 1 && s->last_msg_ns > s->first_msg_ns)
        return (double)s->msgs / ((double)(s->last_msg_ns - s->first_msg_ns) / 1e9);
    return elapsed_s > 0 ? (double)s->msgs / elapsed_s : 0;
}

double report_up_rate(const struct worker_stats *s)
{
    if (s->up_sent < 2 || s->last_up_ns <= s->first_up_ns)
        return 0;
    return (double)s->up_sent / ((double)(s->last_up_ns - s->first_up_ns) / 1e9);
}

double report_connect_rate(const struct worker_stats *s)
{
    if (s->connected == 0 || s->last_connect_ns <= s->first_connect_ns)
        return 0;
    return (double)s->connected / ((double)(s->last_connect_ns - s->first_connect_ns) / 1e9);
}

/* When the last message arrived, as CLOCK_REALTIME ms (0: none yet), so
 * that a script can compare it with the time it sent something (the last
 * delivery of a broadcast) to the ms, although lines come once a second. */
uint64_t report_last_msg_real_ms(const struct worker_stats *s, uint64_t mono_now,
                                 uint64_t real_now)
{
    if (!s->last_msg_ns || s->last_msg_ns > mono_now)
        return 0;
    return (real_now - (mono_now - s->last_msg_ns)) / 1000000u;
}

void report_progress(FILE *out, const struct worker_stats *s, const struct run_info *ri,
                     double msg_rate)
{
    fprintf(out,
            "httpclient %.0fs: conns %llu/%lu welcomed %llu failed %llu closed %llu "
            "up %llu retries %llu msgs %llu msg/s %.0f lat p50 %llu p99 %llu us "
            "max %llu us last_msg_ms %llu\n",
            ri->elapsed_s, (unsigned long long)s->connected, ri->conns,
            (unsigned long long)s->welcomed, (unsigned long long)s->failed,
            (unsigned long long)s->closed_by_server, (unsigned long long)s->up,
            (unsigned long long)s->retries, (unsigned long long)s->msgs, msg_rate,
            (unsigned long long)hist_percentile(&s->lat, 50),
            (unsigned long long)hist_percentile(&s->lat, 99),
            (unsigned long long)s->lat.max_us,
            (unsigned long long)report_last_msg_real_ms(s, mono_ns(), real_ns()));
    fflush(out);
}

int report_histogram(const char *path, const struct histogram *h)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    for (unsigned i = 0; i < HIST_BUCKETS; i++)
        if (h->counts[i])
            fprintf(f, "%llu %llu\n", (unsigned long long)hist_bucket_high(i),
                    (unsigned long long)h->counts[i]);
    fprintf(f, "max %llu\n", (unsigned long long)h->max_us);
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

void report_summary(FILE *out, const struct worker_stats *s, const struct run_info *ri, int json)
{
    unsigned long long p50 = hist_percentile(&s->lat, 50), p90 = hist_percentile(&s->lat, 90),
                       p99 = hist_percentile(&s->lat, 99), pmax = s->lat.max_us;
    double msg_rate = report_msg_rate(s, ri->elapsed_s);
    double conn_rate = report_connect_rate(s);
    char resume[32] = "null";
    if (ri->resume_ns && s->last_msg_ns > ri->resume_ns)
        snprintf(resume, sizeof resume, "%.3f", (double)(s->last_msg_ns - ri->resume_ns) / 1e9);
    if (json) {
        fprintf(out,
                "{\"conns\":%lu,\"connected\":%llu,\"welcomed\":%llu,\"failed\":%llu,"
                "\"fail_connect\":%llu,\"fail_status\":%llu,\"fail_timeout\":%llu,"
                "\"fail_closed\":%llu,\"closed_by_server\":%llu,\"stream_errors\":%llu,"
                "\"chunks\":%llu,\"msgs\":%llu,"
                "\"bytes\":%llu,\"elapsed_s\":%.3f,\"msgs_per_s\":%.1f,\"lat_samples\":%llu,"
                "\"lat_p50_us\":%llu,\"lat_p90_us\":%llu,\"lat_p99_us\":%llu,\"lat_max_us\":%llu,"
                "\"connect_rate\":%.1f,\"procs\":%u,\"client_rss_bytes\":%llu,"
                "\"cpu_us\":%llu,\"msgs_cpu_us\":%llu,\"churn_closed\":%llu,\"churn_reset\":%llu,"
                "\"proto\":\"%s\",\"id_errors\":%llu,\"gaps\":%llu,\"dup\":%llu,"
                "\"polls\":%llu,\"pongs\":%llu,\"reconnects\":%llu,\"resume_s\":%s,"
                "\"retries\":%llu,\"up\":%llu,"
                "\"up_sent\":%llu,\"up_requests\":%llu,\"up_blocked\":%llu,\"up_per_s\":%.1f,"
                "\"replies\":%llu,\"rtt_p50_us\":%llu,\"rtt_p99_us\":%llu,\"rtt_max_us\":%llu,"
                "\"stopped_by\":\"%s\"}\n",
                ri->conns, (unsigned long long)s->connected, (unsigned long long)s->welcomed,
                (unsigned long long)s->failed, (unsigned long long)s->fail_connect,
                (unsigned long long)s->fail_status, (unsigned long long)s->fail_timeout,
                (unsigned long long)s->fail_closed, (unsigned long long)s->closed_by_server,
                (unsigned long long)s->stream_errors, (unsigned long long)s->chunks,
                (unsigned long long)s->msgs, (unsigned long long)s->bytes, ri->elapsed_s, msg_rate,
                (unsigned long long)s->lat.total, p50, p90, p99, pmax, conn_rate, ri->procs,
                (unsigned long long)s->rss_bytes, (unsigned long long)s->cpu_us,
                (unsigned long long)s->msgs_cpu_us, (unsigned long long)s->churn_closed,
                (unsigned long long)s->churn_reset, ri->proto, (unsigned long long)s->id_errors,
                (unsigned long long)s->gaps, (unsigned long long)s->dup,
                (unsigned long long)s->polls, (unsigned long long)s->pongs,
                (unsigned long long)s->reconnects, resume, (unsigned long long)s->retries,
                (unsigned long long)s->up, (unsigned long long)s->up_sent,
                (unsigned long long)s->up_requests, (unsigned long long)s->up_blocked,
                report_up_rate(s), (unsigned long long)s->replies,
                (unsigned long long)hist_percentile(&s->rtt, 50),
                (unsigned long long)hist_percentile(&s->rtt, 99),
                (unsigned long long)s->rtt.max_us, ri->stopped_by);
    } else {
        fprintf(out, "connections: %lu requested, %llu connected, %llu welcomed, %llu failed\n",
                ri->conns, (unsigned long long)s->connected, (unsigned long long)s->welcomed,
                (unsigned long long)s->failed);
        fprintf(out, "  failed: connect %llu, status %llu, timeout %llu, closed %llu\n",
                (unsigned long long)s->fail_connect, (unsigned long long)s->fail_status,
                (unsigned long long)s->fail_timeout, (unsigned long long)s->fail_closed);
        fprintf(out, "  after the welcome: %llu closed by server, %llu malformed streams\n",
                (unsigned long long)s->closed_by_server, (unsigned long long)s->stream_errors);
        fprintf(out, "  connect rate: %.0f conn/s\n", conn_rate);
        if (s->churn_closed)
            fprintf(out, "  churn: %llu disconnects (%llu resets), each reconnected\n",
                    (unsigned long long)s->churn_closed, (unsigned long long)s->churn_reset);
        if (s->reconnects)
            fprintf(out, "  reconnect-after: %llu drops, each reconnected resuming; "
                         "from SIGUSR1 to the last message: %s s\n",
                    (unsigned long long)s->reconnects, resume);
        if (s->retries)
            fprintf(out, "  reconnect-lost: %llu waits for a reconnection after a loss or "
                         "failure; %llu up at the end\n",
                    (unsigned long long)s->retries, (unsigned long long)s->up);
        fprintf(out, "%s: ids %llu errors, %llu duplicates, %llu gaps reported; %llu poll answers; "
                     "%llu pings answered\n",
                ri->proto, (unsigned long long)s->id_errors, (unsigned long long)s->dup,
                (unsigned long long)s->gaps, (unsigned long long)s->polls,
                (unsigned long long)s->pongs);
        fprintf(out, "messages: %llu (%llu chunks, %llu bytes), %.0f msg/s\n",
                (unsigned long long)s->msgs, (unsigned long long)s->chunks,
                (unsigned long long)s->bytes, msg_rate);
        if (s->up_sent || s->up_blocked)
            fprintf(out, "sent up: %llu (%llu requests), %.0f msg/s, %llu refused by a full "
                         "socket; %llu answers, round trip us p50 %llu p99 %llu max %llu\n",
                    (unsigned long long)s->up_sent, (unsigned long long)s->up_requests,
                    report_up_rate(s), (unsigned long long)s->up_blocked,
                    (unsigned long long)s->replies,
                    (unsigned long long)hist_percentile(&s->rtt, 50),
                    (unsigned long long)hist_percentile(&s->rtt, 99),
                    (unsigned long long)s->rtt.max_us);
        fprintf(out, "latency us: p50 %llu p90 %llu p99 %llu max %llu (%llu samples)\n", p50,
                p90, p99, pmax, (unsigned long long)s->lat.total);
        fprintf(out, "run: %.2f s in %u procs, ended by %s, client RSS %.1f MB, CPU %.2f s\n",
                ri->elapsed_s, ri->procs, ri->stopped_by, (double)s->rss_bytes / 1e6,
                (double)s->cpu_us / 1e6);
    }
    fflush(out);
}
