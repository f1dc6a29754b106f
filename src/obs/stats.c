/* SPDX-License-Identifier: Apache-2.0 */
/* Counters and their collection into name/value pairs. */
#include "obs/stats.h"

#include "lib/carry.h"

#include <stdio.h>
#include <string.h>
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
#define X(name, ...) out[n++] = (struct stat_pair){#name, loop_stats.name};
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

/* ---------------------------------------------------------------- hand-over */

/* Gauges say what is now: the process taking over counts them itself. */
static int is_gauge(const char *name)
{
    static const char *const gauges[] = {
        "streams_open", "uids_online", "backlog_bytes", "input_bytes", "history_bytes",
        "history_entries", "erl_nodes", "erl_masters", "in_windows_stuck", "topics",
        "topic_subscriptions", "lingering"};
    for (size_t i = 0; i < sizeof gauges / sizeof gauges[0]; i++)
        if (strcmp(name, gauges[i]) == 0)
            return 1;
    return 0;
}

int stats_carry_export(struct carry_out *o)
{
    struct stat_pair pairs[STATS_MAX_PAIRS];
    size_t n = stats_collect(pairs) - 1;          /* memory is this process's */
    size_t at = carry_begin(o, STATS_CARRY_TAG, STATS_CARRY_VERSION);
    carry_u32(o, (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        carry_u8(o, (uint8_t)strlen(pairs[i].name));
        carry_put(o, pairs[i].name, strlen(pairs[i].name));
        carry_u64(o, pairs[i].value);
    }
    carry_end(o, at);
    return o->failed ? -1 : 0;
}

int stats_carry_take(struct carry_in *rec, uint16_t version)
{
    (void)version;                   /* 1: the only one yet */
    uint32_t n = carry_get_u32(rec);
    for (uint32_t i = 0; i < n && !rec->failed; i++) {
        char name[256];
        uint8_t len = carry_get_u8(rec);
        carry_get(rec, name, len);
        name[len] = '\0';
        uint64_t v = carry_get_u64(rec);
        if (rec->failed || is_gauge(name))
            continue;
        /* A counter this build does not have is dropped. */
#define X(field, ...)                                                          \
        if (strcmp(name, #field) == 0)                                         \
            loop_stats.field = v;
        LOOP_STATS(X)
#undef X
#define X(field)                                                               \
        if (strcmp(name, #field) == 0)                                         \
            atomic_store(&cnode_stats.field, v);
        CNODE_STATS(X)
#undef X
    }
    return rec->failed ? -1 : 0;
}
