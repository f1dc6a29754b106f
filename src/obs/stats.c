/* Counters and their collection into name/value pairs. */
#include "obs/stats.h"

#include <stdio.h>
#include <unistd.h>

struct loop_stats loop_stats;
struct cnode_stats cnode_stats;

/* Resident set size from /proc/self/statm, 0 when unreadable. */
static uint64_t rss_bytes(void)
{
    unsigned long long pages_total, pages_rss;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    int ok = fscanf(f, "%llu %llu", &pages_total, &pages_rss) == 2;
    fclose(f);
    return ok ? (uint64_t)pages_rss * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

size_t stats_collect(struct stat_pair out[STATS_MAX_PAIRS])
{
    size_t n = 0;
#define X(name) out[n++] = (struct stat_pair){#name, loop_stats.name};
    LOOP_STATS(X)
#undef X
#define X(name) out[n++] = (struct stat_pair){#name, atomic_load(&cnode_stats.name)};
    CNODE_STATS(X)
#undef X
    out[n++] = (struct stat_pair){"memory", rss_bytes()};   /* resident set, bytes */
    return n;
}

size_t stats_format_json(char *buf, size_t size)
{
    struct stat_pair pairs[STATS_MAX_PAIRS];
    size_t n = stats_collect(pairs), len = 0;
    for (size_t i = 0; i < n && len < size; i++) {
        int k = snprintf(buf + len, size - len, "%s\"%s\":%llu", i ? "," : "{", pairs[i].name,
                         (unsigned long long)pairs[i].value);
        if (k < 0)
            return 0;
        len += (size_t)k;
    }
    if (len + 3 > size)
        return 0;
    len += (size_t)snprintf(buf + len, size - len, "}\n");
    return len;
}
