/* SPDX-License-Identifier: Apache-2.0 */
/* Batching of deliveries: entries in arrival order, grouped per stream
 * at flush time by a stable sort (a stream's messages keep their order). */
#include "core/batch.h"
#include "lib/clock.h"
#include "obs/delivery_time.h"
#include "core/framing.h"
#include "core/history.h"
#include "obs/probe.h"
#include "lib/log.h"
#include "core/outbound.h"
#include "core/transport_ops.h"
#include "core/stream.h"
#include "core/write_pool.h"
#include "lib/deflate_msg.h"
#include "obs/stats.h"

#include <assert.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

/* Deliveries held at once; a flush makes room. 64K * 32 B = 2 MB, twice. */
#define BATCH_MAX 65536
/* iovecs per writev, within the kernel's IOV_MAX. */
#define IOV_PER_WRITE 1023

struct entry {
    struct stream *s;
    const char *data;
    uint32_t len;
    struct framing_prefix prefix;
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

/* Receipt times of the messages in this batch: each is observed into
 * httpdcnode_delivery_seconds at the flush, against one clock read taken
 * once the batch's writes are done. 16 B each, 256 KB at most. */
struct receipt {
    uint64_t received_ns;
    uint32_t n;                  /* deliveries of the message */
};
#define RECEIPTS_MAX 16384
static struct receipt receipts[RECEIPTS_MAX];
static uint32_t nreceipts;

int batch_room(uint32_t n)
{
    if (BATCH_MAX - count >= n && ACKS_MAX != nacks)
        return 0;
    batch_flush();
    return 1;
}

/* Payloads re-encoded for a framing (SSE data lines), once per payload and
 * batch: the blocks are kept for the next batches. */
struct body_block {
    struct body_block *next;
    size_t cap, used;
    char data[];
};
#define BODY_BLOCK_MIN (256u << 10)
static struct body_block *blocks, *current;
static struct {
    const char *payload;     /* the last payload encoded */
    const char *body;
    uint32_t body_len;
} last_body;

static char *body_alloc(size_t n)
{
    for (; current; current = current->next)
        if (current->cap - current->used >= n) {
            char *p = current->data + current->used;
            current->used += n;
            return p;
        }
    size_t cap = n > BODY_BLOCK_MIN ? n : BODY_BLOCK_MIN;
    struct body_block *b = malloc(sizeof *b + cap);
    if (!b)
        return NULL;
    b->cap = cap;
    b->used = n;
    b->next = blocks;          /* reused from the next batch on */
    blocks = current = b;
    return b->data;
}

/* Gives back the end of the last body_alloc, which took n and used k. */
static void body_shrink(size_t n, size_t k)
{
    current->used -= n - k;
}

/* permessage-deflate: the last payload compressed (or found not worth it). */
static struct {
    const char *payload;
    const char *deflated;        /* NULL: sent uncompressed */
    uint32_t deflated_len;
} last_deflated;

static void body_reset(void)
{
    for (struct body_block *b = blocks; b; b = b->next)
        b->used = 0;
    current = blocks;
    last_body.payload = NULL;
    last_deflated.payload = NULL;
}

/* data[0..len) as the framing's body; 0 when out of memory (logged). */
static int encoded_body(const char **data, uint32_t *len, int binary)
{
    if (last_body.payload != *data) {
        size_t n = framing_sse_body_len(*data, *len, binary);
        char *body = body_alloc(n);
        if (!body) {
            static struct log_ratelimit rl;
            log_limited(&rl, LOG_ERROR, "out of memory encoding a message: dropped");
            return 0;
        }
        framing_sse_body(*data, *len, binary, body);
        last_body.payload = *data;
        last_body.body = body;
        last_body.body_len = (uint32_t)n;
    }
    *data = last_body.body;
    *len = last_body.body_len;
    return 1;
}

char *batch_body(size_t n) { return body_alloc(n); }
/* Payloads shorter than this go uncompressed: deflate's block header and
 * the codes it must send cost more than such a payload could save. */
#define DEFLATE_MIN 64

/* data[0..len) compressed for permessage-deflate, once per payload and
 * batch (the same bytes for every stream that takes it); 0 when it goes
 * uncompressed: short, not smaller compressed (the 5-byte id block of
 * ws_meta counted), or out of memory. */
static int deflated_body(const char **data, uint32_t *len)
{
    if (last_deflated.payload != *data) {
        last_deflated.payload = *data;
        last_deflated.deflated = NULL;
        if (*len < DEFLATE_MIN)
            return 0;
        size_t cap = deflate_msg_bound(*len);
        char *out = body_alloc(cap);
        if (!out)
            return 0;
        size_t n = deflate_msg(*data, *len, out, cap);
        if (n == 0 || n + 5 >= *len) {
            body_shrink(cap, 0);
            return 0;
        }
        body_shrink(cap, n);
        last_deflated.deflated = out;
        last_deflated.deflated_len = (uint32_t)n;
        loop_stats.ws_deflated++;
        loop_stats.ws_deflate_in_bytes += *len;
        loop_stats.ws_deflate_out_bytes += n;
    }
    if (!last_deflated.deflated)
        return 0;
    *data = last_deflated.deflated;
    *len = last_deflated.deflated_len;
    return 1;
}

int batch_add(struct stream *s, const char *data, uint32_t len, int binary, uint32_t seq)
{
    assert(count < BATCH_MAX);          /* batch_room came first */
    if (s->out && stream_replaying(s))
        return 0;
    const struct transport_ops *t = transport_ops[s->framing];
    if (t && t->deliver)                /* a long-poll: a whole answer, at once */
        return t->deliver(s, data, len, binary, &(struct msg_id){seq, history_epoch(), NULL, 0});
    if (framing_encodes_body(s->framing) && !encoded_body(&data, &len, binary))
        return 0;
    struct entry *e = &entries[count++];
    e->s = s;
    if (framing_ws_deflate(s->framing) && deflated_body(&data, &len)) {
        e->data = data;
        e->len = len;
        framing_prefix_deflate(s->framing, len, seq, !binary, &e->prefix);
        return 1;
    }
    e->data = data;
    e->len = len;
    if (framing_checks_utf8(s->framing))
        framing_prefix_utf8(s->framing, len, seq, !binary, &e->prefix);
    else
        framing_prefix(s->framing, len, seq, &e->prefix);
    return 1;
}

int batch_add_framed(struct stream *s, const struct batch_framed *f, const char *data,
                     uint32_t len, int binary, const struct msg_id *id)
{
    assert(count < BATCH_MAX);
    if (s->out && stream_replaying(s))
        return 0;
    const struct transport_ops *t = transport_ops[s->framing];
    if (t && t->deliver)
        return t->deliver(s, data, len, binary, id);
    struct entry *e = &entries[count++];
    e->s = s;
    e->data = f->body;
    e->len = f->body_len;
    e->prefix = f->prefix;
    return 1;
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

/* Frames entries[from, to) into iov: as many whole messages as max iovecs
 * hold. Sets *n and *total; returns the first entry not taken. */
static uint32_t frame(uint32_t from, uint32_t to, struct iovec *iov, int max, int *n,
                      size_t *total)
{
    int k = 0;
    size_t bytes = 0;
    for (; from < to && k + FRAMING_IOV_MAX <= max; from++) {
        struct entry *e = &entries[from];
        k += framing_iov(e->s->framing, &e->prefix, e->data, e->len, iov + k, &bytes);
    }
    *n = k;
    *total = bytes;
    return from;
}

/* Writes entries[from, to), all for one stream, through stream_send (which
 * queues them when the stream has a backlog or is still welcoming), in as
 * few writevs as the iovec limit allows. Stops once the stream is closed. */
static void write_run(uint32_t from, uint32_t to)
{
    struct iovec iov[IOV_PER_WRITE];
    while (from < to) {
        int n;
        size_t total;
        struct stream *s = entries[from].s;
        uint32_t first = from;
        from = frame(from, to, iov, IOV_PER_WRITE, &n, &total);
        int closed = stream_send(s, iov, n, total);
        if (probe_enabled)
            probe_entries_written(first, from, probe_now_ns());
        if (closed)
            return;
    }
}

/* One write job per stream that can take a plain writev, made here and run
 * by write_pool_run: on this thread for a few, spread over the writer
 * threads for many. 48 + 16 * 3 + 16 bytes per stream at most, touched
 * only as far as the largest fan-out went. */
struct job_owner {
    struct stream *s;
    uint32_t taken, to;          /* entries the job carries end at taken */
    uint32_t from;
};
static struct write_job jobs[BATCH_MAX];
static struct job_owner owners[BATCH_MAX];
static struct iovec job_iov[BATCH_MAX * FRAMING_IOV_MAX];

/* Writes entries[0, n), sorted by stream. Streams with a backlog or still
 * welcoming queue theirs at once; the others become jobs, and what a job
 * could not carry (more messages than one writev takes) follows it. The
 * results are handled here, on the loop thread, after every job ran. */
static void write_all(uint32_t n)
{
    uint32_t njobs = 0, niov = 0;
    for (uint32_t from = 0, i = 1; i <= n; i++) {
        if (i < n && entries[i].s == entries[from].s)
            continue;
        struct stream *s = entries[from].s;
        int fd = stream_direct_fd(s);
        if (fd < 0) {
            write_run(from, i);
        } else {
            struct write_job *j = &jobs[njobs];
            *j = (struct write_job){.iov = &job_iov[niov], .fd = fd};
            uint32_t taken = frame(from, i, &job_iov[niov], IOV_PER_WRITE, &j->iovcnt, &j->total);
            niov += (uint32_t)j->iovcnt;
            owners[njobs++] = (struct job_owner){.s = s, .from = from, .taken = taken, .to = i};
        }
        from = i;
    }
    write_pool_run(jobs, njobs);
    for (uint32_t k = 0; k < njobs; k++) {
        struct write_job *j = &jobs[k];
        struct job_owner *o = &owners[k];
        if (probe_enabled)
            probe_entries_written(o->from, o->taken, j->done_ns);
        if (stream_write_done(o->s, j->iov, j->iovcnt, j->total, j->result, j->error) == 0 &&
            o->taken < o->to)
            write_run(o->taken, o->to);
    }
}

void batch_ack(const char *reply, uint16_t reply_len, uint32_t n)
{
    if (nacks == ACKS_MAX)       /* no stream pointer is held by callers here */
        batch_flush();
    acks[nacks++] = (struct ack){reply, reply_len, n};
}

void batch_delivered(uint64_t received_ns, uint32_t n)
{
    receipts[nreceipts++] = (struct receipt){received_ns, n};
    if (nreceipts == RECEIPTS_MAX)
        batch_flush();
}

static void observe_receipts(void)
{
    uint64_t now = clock_now_ns();
    for (uint32_t i = 0; i < nreceipts; i++) {
        uint64_t at = receipts[i].received_ns;
        delivery_time_observe(now > at ? now - at : 0, receipts[i].n);
    }
    nreceipts = 0;
}

void batch_flush(void)
{
    if (count > 1)
        sort_by_stream();
    uint32_t n = count;
    count = 0;
    if (n)
        write_all(n);
    if (nreceipts)
        observe_receipts();
    body_reset();
    for (uint32_t i = 0; i < nacks; i++)
        outbound_ack(acks[i].reply, acks[i].reply_len, acks[i].n);
    nacks = 0;
}
