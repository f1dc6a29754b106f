/* Batching of deliveries: entries in arrival order, grouped per stream
 * at flush time by a stable sort (a stream's messages keep their order). */
#include "batch.h"
#include "latency_probe.h"
#include "outbound.h"
#include "stream.h"
#include "write_pool.h"

#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

/* Deliveries held at once; a flush makes room. 64K * 32 B = 2 MB, twice. */
#define BATCH_MAX 65536
/* iovecs per writev: 3 per chunked message, within the kernel's IOV_MAX. */
#define IOV_PER_WRITE 1023

struct entry {
    struct stream *s;
    const char *data;
    uint32_t len;
    char hdr[10];          /* "%x\r\n" chunk size line: 8 hex digits at most */
    uint8_t hdr_len;
};

static struct entry entries[BATCH_MAX];
static uint32_t count;

/* Acknowledgements wait for the writes they count. */
struct ack {
    const char *reply;
    uint16_t reply_len;
    uint32_t n;
};
#define ACKS_MAX 4096
static struct ack acks[ACKS_MAX];
static uint32_t nacks;

void batch_room(uint32_t n)
{
    if (BATCH_MAX - count < n || ACKS_MAX == nacks)
        batch_flush();
}

void batch_add(struct stream *s, const char *data, uint32_t len)
{
    struct entry *e = &entries[count];
    e->s = s;
    e->data = data;
    e->len = len;
    count++;
    e->hdr_len = s->chunked ? (uint8_t)stream_chunk_header(e->hdr, len) : 0;
}

/* Stable bottom-up merge sort by stream, into a static buffer: the hot
 * path allocates nothing (glibc's qsort would, for arrays this large). */
static struct entry spare[BATCH_MAX];

static void sort_by_stream(void)
{
    struct entry *from = entries, *to = spare;
    for (uint32_t width = 1; width < count; width *= 2) {
        for (uint32_t lo = 0; lo < count; lo += 2 * width) {
            uint32_t mid = lo + width < count ? lo + width : count;
            uint32_t hi = lo + 2 * width < count ? lo + 2 * width : count;
            uint32_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi)
                to[k++] = (uintptr_t)from[j].s < (uintptr_t)from[i].s ? from[j++] : from[i++];
            while (i < mid)
                to[k++] = from[i++];
            while (j < hi)
                to[k++] = from[j++];
        }
        struct entry *t = from;
        from = to;
        to = t;
    }
    if (from != entries)
        memcpy(entries, from, count * sizeof entries[0]);
}

/* --probe-latency: entries[from, to) were written at now_ns. */
static void probe_entries_written(uint32_t from, uint32_t to, uint64_t now_ns)
{
    for (; from < to; from++)
        probe_written(entries[from].data, entries[from].len, now_ns);
}

static const struct iovec crlf = {(void *)"\r\n", 2};

/* Frames entries[from, to) into iov: as many whole messages as max iovecs
 * hold. Sets *n and *total; returns the first entry not taken. */
static uint32_t frame(uint32_t from, uint32_t to, struct iovec *iov, int max, int *n,
                      size_t *total)
{
    int k = 0;
    size_t bytes = 0;
    for (; from < to && k + 3 <= max; from++) {
        struct entry *e = &entries[from];
        if (e->hdr_len)
            iov[k++] = (struct iovec){e->hdr, e->hdr_len};
        iov[k++] = (struct iovec){(void *)e->data, e->len};
        if (e->hdr_len)
            iov[k++] = crlf;
        bytes += e->hdr_len + e->len + (e->hdr_len ? 2u : 0u);
    }
    *n = k;
    *total = bytes;
    return from;
}

/* Writes entries[from, to), all for one stream, in as few writevs as the
 * iovec limit allows. Stops if the stream is ended on the way. */
static void write_run(uint32_t from, uint32_t to)
{
    struct iovec iov[IOV_PER_WRITE];
    while (from < to) {
        int n;
        size_t total;
        struct stream *s = entries[from].s;
        uint32_t first = from;
        from = frame(from, to, iov, IOV_PER_WRITE, &n, &total);
        int ended = stream_write(s, iov, n, total);
        if (probe_enabled)
            probe_entries_written(first, from, probe_now_ns());
        if (ended)
            return;        /* ended (and freed): drop the rest of its run */
    }
}

/* A batch writing to fewer streams is not worth building jobs for. */
#define PARALLEL_MIN_STREAMS WRITE_POOL_MIN_JOBS

/* The writer threads' share of a batch: one job per stream, its iovecs,
 * and which entries it carries. 48 + 16 * 3 + 16 bytes per stream at most,
 * touched only as far as the largest fan-out went. */
struct job_owner {
    struct stream *s;
    uint32_t from, to;           /* entries[from, to) */
};
static struct write_job jobs[BATCH_MAX];
static struct job_owner owners[BATCH_MAX];
static struct iovec job_iov[BATCH_MAX * 3];

static uint32_t count_streams(uint32_t n)
{
    uint32_t k = n > 0;
    for (uint32_t i = 1; i < n; i++)
        k += entries[i].s != entries[i - 1].s;
    return k;
}

/* Streams that can take a plain writev become jobs for the writer threads;
 * the others (backlogged, still welcoming, or too many messages for one
 * writev) are written here first. Streams are only looked at again, and
 * ended if their write failed, after the join. */
static void write_parallel(uint32_t n)
{
    uint32_t njobs = 0, niov = 0;
    for (uint32_t from = 0, i = 1; i <= n; i++) {
        if (i < n && entries[i].s == entries[from].s)
            continue;
        struct stream *s = entries[from].s;
        int fd = stream_direct_fd(s);
        if (fd < 0 || 3 * (i - from) > IOV_PER_WRITE) {
            write_run(from, i);
        } else {
            struct write_job *j = &jobs[njobs];
            *j = (struct write_job){.iov = &job_iov[niov], .fd = fd};
            frame(from, i, &job_iov[niov], IOV_PER_WRITE, &j->iovcnt, &j->total);
            niov += (uint32_t)j->iovcnt;
            owners[njobs++] = (struct job_owner){s, from, i};
        }
        from = i;
    }
    write_pool_run(jobs, njobs);
    for (uint32_t k = 0; k < njobs; k++) {
        struct write_job *j = &jobs[k];
        if (probe_enabled)
            probe_entries_written(owners[k].from, owners[k].to, j->done_ns);
        stream_write_done(owners[k].s, j->iov, j->iovcnt, j->total, j->result, j->error);
    }
}

static void write_all(void)
{
    if (count > 1)
        sort_by_stream();
    uint32_t n = count, from = 0;
    count = 0;
    if (write_pool_helpers() > 0 && count_streams(n) >= PARALLEL_MIN_STREAMS) {
        write_parallel(n);
        return;
    }
    for (uint32_t i = 1; i <= n; i++)
        if (i == n || entries[i].s != entries[from].s) {
            write_run(from, i);
            from = i;
        }
}

void batch_ack(const char *reply, uint16_t reply_len, uint32_t n)
{
    if (nacks == ACKS_MAX)       /* no stream pointer is held by callers here */
        batch_flush();
    acks[nacks++] = (struct ack){reply, reply_len, n};
}

void batch_flush(void)
{
    if (count)
        write_all();
    for (uint32_t i = 0; i < nacks; i++)
        outbound_ack(acks[i].reply, acks[i].reply_len, acks[i].n);
    nacks = 0;
}
