/* Counters and their JSON form (for GET /stats). */
#include "stats.h"

#include <stdio.h>
#include <unistd.h>

struct loop_stats loop_stats;
struct cnode_stats cnode_stats;

/* Resident set size from /proc/self/statm, 0 when unreadable. */
static unsigned long long rss_bytes(void)
{
    unsigned long long pages_total, pages_rss;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    int ok = fscanf(f, "%llu %llu", &pages_total, &pages_rss) == 2;
    fclose(f);
    return ok ? pages_rss * (unsigned long long)sysconf(_SC_PAGESIZE) : 0;
}

#define U(x) ((unsigned long long)(x))
#define A(x) ((unsigned long long)atomic_load(&cnode_stats.x))

size_t stats_format_json(char *buf, size_t size)
{
    const struct loop_stats *l = &loop_stats;
    int n = snprintf(buf, size,
        "{\"streams_open\":%llu,\"streams_total\":%llu,\"uids_online\":%llu,"
        "\"client_closed\":%llu,\"evicted\":%llu,\"slow_closed\":%llu,\"kicked\":%llu,"
        "\"msgs_in\":%llu,\"msgs_applied\":%llu,\"deliveries\":%llu,\"bytes_out\":%llu,"
        "\"dropped_no_conn\":%llu,\"bad_terms\":%llu,\"bad_uid\":%llu,\"too_big\":%llu,"
        "\"empty\":%llu,\"http_not_found\":%llu,\"http_too_big\":%llu,"
        "\"http_bad_method\":%llu,\"http_no_fds\":%llu,\"erl_nodes\":%llu,"
        "\"erl_connects\":%llu,\"backpressure\":%llu,\"rss_bytes\":%llu}\n",
        U(l->streams_open), U(l->streams_total), U(l->uids_online), U(l->client_closed),
        U(l->evicted), U(l->slow_closed), U(l->kicked), A(msgs_in), U(l->msgs_applied),
        U(l->deliveries), U(l->bytes_out), U(l->dropped_no_conn), A(bad_terms), A(bad_uid),
        A(too_big), A(empty), U(l->http_not_found), U(l->http_too_big),
        U(l->http_bad_method), U(l->http_no_fds), A(erl_nodes), A(erl_connects),
        A(backpressure), rss_bytes());
    return n < 0 ? 0 : ((size_t)n < size ? (size_t)n : size - 1);
}
