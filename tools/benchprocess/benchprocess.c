/* SPDX-License-Identifier: Apache-2.0 */
/* benchprocess: the server's own code paths for N streams in one process,
 * with no network (make bench-process; scripts/bench-process.sh runs it at
 * 10,000, 100,000 and 1,000,000 streams and checks that each figure per
 * stream stays flat).
 *
 *   benchprocess STREAMS [REPEATS]     one JSON object on stdout
 *   BENCH_PROCESS_HISTORY_FILE=FILE benchprocess ...   the history in FILE
 *                                      (--history-file), made afresh
 *   BENCH_PROCESS_TOPICS=T:K benchprocess ...   topics instead: T topics,
 *                                      each stream subscribed to K of them
 *                                      (stream i to topics (i*K + j) mod T,
 *                                      so each has N*K/T streams); the
 *                                      phases are open, subscribe (memory
 *                                      and CPU per subscription), publish
 *                                      (a message to every topic a round:
 *                                      CPU per delivery), close
 *   BENCH_PROCESS_FRAMING=ws|ws_deflate benchprocess ...   the streams are
 *                                      WebSockets (ws_deflate: with
 *                                      permessage-deflate, --ws-deflate),
 *                                      not chunked
 *   BENCH_PROCESS_PAYLOAD=BYTES benchprocess ...   each message this long
 *                                      (default 32), text cut from a
 *                                      JSON-like sample (what deflate is
 *                                      for), 1..65536
 *
 * Linked with the server's objects (the Makefile's SRV_LIB_OBJ, as the unit
 * tests are), it starts the server's core as main.c does, with server.c's
 * server_start (SERVER_CORE: the event loop, uid table with presence,
 * history, writers, streams, the inbox and outbox rings, presence,
 * dispatch) and then plays the C-node thread and the masters itself:
 *   open       stream_open + stream_import + the head through stream_send,
 *              which is what transport_open does once the socket left
 *              evhttp (evhttp's part of a chunked welcome is left out);
 *   deliver    CMD_UNICAST records pushed into the inbox by a producer
 *              thread (the C-node thread's place), applied by dispatch.c
 *              on the loop (this main thread): history, batch, writev;
 *   broadcast  CMD_BROADCAST records, the same way;
 *   snapshot   presence_snapshot(), the function CMD_SNAPSHOT calls, timed
 *              alone; its pieces are read off the outbox by a reader thread
 *              (the C-node thread's other half), each checked to be at most
 *              4096 uids, in order, all uids once;
 *   close      stream_end on every stream (terminator, close, out of the
 *              uid table, presence down), then the reaper.
 *
 * The seam. A million descriptors are not to be had (20,000 per process
 * here), so the streams share SINKS socketpairs, drained by one reader
 * thread that counts what arrives. The stream code allows that: a LIVE
 * stream is a libevent event on its fd, and libevent keeps several events
 * per fd (up to 65,535 per direction: hence 32 sinks for a million). Two
 * things are adapted, neither in the server's code:
 *   - close(): stream.c closes its fd when a stream closes. The link wraps
 *     close (-Wl,--wrap=close, the server's objects only; libevent and libc
 *     are untouched) so that a sink fd is not closed; any other fd is.
 *   - the sink ends the streams write to are blocking, so that the kernel
 *     always takes a write (the reader thread keeps up or the loop waits):
 *     what is measured is the steady path without a backlog. A backlog on a
 *     shared fd would arm EV_WRITE there, and libevent would then walk all
 *     of that fd's events on every wakeup: a cost of the harness, not of
 *     the server (whose streams have a socket each).
 * Writers: 0 helper threads (--writers 1), so that all of a phase's CPU,
 * the kernel's writes included, is the loop thread's.
 *
 * Measured per stream: RssAnon growth over the opens (/proc/self/status,
 * exact to the page) beside sizeof(struct stream) + the uid slot; loop
 * thread CPU (CLOCK_THREAD_CPUTIME_ID, user + kernel) per stream opened,
 * per message delivered to one uid, per stream of a broadcast, per uid of
 * a snapshot, per stream closed. The CPU figures are the median of
 * REPEATS runs (default 5), each of at least MIN_WORK deliveries (rounds
 * of N, see the job) or a million snapshot uids, so that a small N is not
 * all fixed costs. Exit status 0 when every phase ran and
 * delivered exactly what it should and the memory per stream is within
 * MAX_BYTES_PER_STREAM; the JSON says which check failed. */
#include "server.h"
#include "core/cmd.h"
#include "core/dispatch.h"
#include "core/framing.h"
#include "lib/deflate_msg.h"
#include "core/history.h"
#include "core/outbound.h"
#include "core/presence.h"
#include "core/stream.h"
#include "core/transport_ops.h"
#include "core/topic.h"
#include "core/topic_presence.h"
#include "core/uidtable.h"
#include "core/write_pool.h"
#include "lib/clock.h"
#include "lib/handoff.h"
#include "obs/stats.h"
#include "transport/chunked.h"

#include <errno.h>
#include <event2/event.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#ifndef SINKS
#define SINKS 32
#endif
#define MAX_USERS 1114112             /* --max-users' default, at every N */
#define PAYLOAD 32                    /* bytes of each message, by default */
#define PAYLOAD_MAX 65536
#define MIN_WORK 200000               /* deliveries per measured repeat, at least */
#define MAX_REPEATS 15
#define SNAPSHOT_PIECE_MAX 4096       /* presence.c's BATCH_MAX */
#define MAX_BYTES_PER_STREAM 256      /* BENCHMARKS.md's target per idle stream */
/* A sanitizer's shadow memory is RssAnon too (TSan: ~6x): no bound then. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#else
#define SANITIZED 0
#endif
#define WAIT_S 120                    /* bound of every wait on another thread */

static uint8_t framing = FRAMING_CHUNKED;    /* BENCH_PROCESS_FRAMING */
static uint32_t payload_len = PAYLOAD;        /* BENCH_PROCESS_PAYLOAD */
static char payload[PAYLOAD_MAX];             /* every message's bytes */

static struct server server;
static struct event_base *base;
static struct handoff *inbox, *outbox;
static int sink_w[SINKS], sink_r[SINKS];   /* the streams' ends, the reader's */
static int is_sink[4096];
static int done_efd;                  /* the outbox reader saw OUT_STATS */
static atomic_int stopping;

/* ---------------------------------------------------------------- close wrap */

int __real_close(int fd);
int __wrap_close(int fd);

/* The server's objects call this for close (see the opening comment). */
int __wrap_close(int fd)
{
    if (fd >= 0 && fd < (int)(sizeof is_sink / sizeof is_sink[0]) && is_sink[fd])
        return 0;
    return __real_close(fd);
}

/* ---------------------------------------------------------------- helpers */

/* The loop thread's user CPU (the rest of thread_cpu_ns is the kernel's). */
static uint64_t thread_user_ns(void)
{
    struct rusage ru;
    getrusage(RUSAGE_THREAD, &ru);
    return (uint64_t)ru.ru_utime.tv_sec * 1000000000u + (uint64_t)ru.ru_utime.tv_usec * 1000u;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A field of /proc/self/status in kB (RssAnon, VmHWM). */
static long status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = -1;
    size_t n = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':')
            kb = strtol(line + n + 1, NULL, 10);
    if (f)
        fclose(f);
    return kb;
}

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static uint64_t median(uint64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_u64);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---------------------------------------------------------------- checks */

#define CHECKS_MAX 32
static struct {
    const char *name;
    int ok;
    char detail[160];
} checks[CHECKS_MAX];
static int nchecks;

static int check(const char *name, int ok, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int check(const char *name, int ok, const char *fmt, ...)
{
    if (nchecks < CHECKS_MAX) {
        va_list ap;
        va_start(ap, fmt);
        checks[nchecks].name = name;
        checks[nchecks].ok = ok;
        vsnprintf(checks[nchecks].detail, sizeof checks[nchecks].detail, fmt, ap);
        va_end(ap);
        fprintf(stderr, "benchprocess: %s %s: %s\n", ok ? "ok" : "FAILED", name,
                checks[nchecks].detail);
        nchecks++;
    }
    return ok;
}

/* ---------------------------------------------------------------- sink reader */

static atomic_uint_fast64_t sink_bytes;   /* all bytes the streams wrote */

/* Reads every sink dry, then naps 200 us when nothing came. It never
 * sleeps in poll(), so that a write never has a sleeping reader to wake
 * (a scheduler wakeup in the writer's kernel time, a cost of this harness,
 * not of the server). An 8 MB sink holds some 10,000 small writes: far
 * more than one nap's worth. */
static void *sink_reader(void *arg)
{
    (void)arg;
    static char buf[1 << 20];
    while (!atomic_load(&stopping)) {
        int got = 0;
        for (int i = 0; i < SINKS; i++) {
            ssize_t n;
            while ((n = read(sink_r[i], buf, sizeof buf)) > 0) {
                atomic_fetch_add(&sink_bytes, (uint64_t)n);
                got = 1;
            }
        }
        if (!got) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

/* Waits (bounded) until the sinks have read want bytes in all. */
static int sinks_reach(uint64_t want)
{
    for (int i = 0; i < WAIT_S * 1000 && atomic_load(&sink_bytes) < want; i++)
        pause_ms(1);
    return atomic_load(&sink_bytes) == want;
}

/* ---------------------------------------------------------------- outbox reader */

/* What the outbox carried, by the reader thread; read by main after a wait. */
static struct {
    atomic_uint_fast64_t up, down;        /* uids in UP / DOWN pieces */
    atomic_uint_fast64_t snap_uids;       /* uids in snapshot pieces */
    atomic_uint_fast64_t snap_bytes;      /* their records' bytes */
    atomic_uint_fast64_t snap_pieces, snapshots;
    atomic_uint_fast64_t max_piece;       /* uids in the largest piece of any kind */
    atomic_uint_fast64_t bad_order;       /* a snapshot's uids not ascending, or a
                                           * MORE piece with no SNAPSHOT before */
    uint32_t last_uid;                    /* reader thread only */
    int in_snapshot;
} seen;

static int on_out(void *body, size_t size, void *ctx)
{
    (void)ctx;
    const struct out_rec *r = body;
    if (r->kind == OUT_STATS) {
        uint64_t one = 1;
        (void)!write(done_efd, &one, sizeof one);
        return 0;
    }
    if (r->kind != OUT_PRESENCE)
        return 0;
    const uint32_t *uids = (const uint32_t *)(r + 1);
    if (r->count > atomic_load(&seen.max_piece))
        atomic_store(&seen.max_piece, r->count);
    switch (r->op) {
    case PRESENCE_UP:
        atomic_fetch_add(&seen.up, r->count);
        break;
    case PRESENCE_DOWN:
        atomic_fetch_add(&seen.down, r->count);
        break;
    case PRESENCE_SNAPSHOT:
    case PRESENCE_SNAPSHOT_MORE:
        if (r->op == PRESENCE_SNAPSHOT) {
            atomic_fetch_add(&seen.snapshots, 1);
            seen.in_snapshot = 1;
            seen.last_uid = 0;
        } else if (!seen.in_snapshot) {
            atomic_fetch_add(&seen.bad_order, 1);
        }
        for (uint32_t i = 0; i < r->count; i++) {
            if (uids[i] <= seen.last_uid)
                atomic_fetch_add(&seen.bad_order, 1);
            seen.last_uid = uids[i];
        }
        atomic_fetch_add(&seen.snap_uids, r->count);
        atomic_fetch_add(&seen.snap_bytes, size);
        atomic_fetch_add(&seen.snap_pieces, 1);
        break;
    default:
        break;
    }
    return 0;
}

static void *outbox_reader(void *arg)
{
    (void)arg;
    struct pollfd p = {.fd = handoff_wakeup_fd(outbox), .events = POLLIN};
    while (!atomic_load(&stopping)) {
        if (poll(&p, 1, 100) <= 0)
            continue;
        handoff_clear_wakeup(outbox);
        while (handoff_drain(outbox, 4096, on_out, NULL, NULL) > 0)
            ;
    }
    return NULL;
}

static int wait_u64(atomic_uint_fast64_t *v, uint64_t want)
{
    for (int i = 0; i < WAIT_S * 1000 && atomic_load(v) < want; i++) {
        event_base_loop(base, EVLOOP_NONBLOCK);   /* presence's window timer */
        pause_ms(1);
    }
    return atomic_load(v) == want;
}

/* ---------------------------------------------------------------- producer */

/* A job: rounds of records, each round followed by a CMD_STATS, which
 * flushes the batch (dispatch.c: "the counters include what came before")
 * and whose reply (OUT_STATS on the outbox) says the round was applied.
 * A unicast round is one message to each uid, a broadcast round one
 * broadcast: so every delivery is one writev of one message, whatever N,
 * as on a server that keeps up. (Without the rounds, records piling up in
 * the ring would be coalesced, several messages a writev, more so at a
 * small N: the figures would not compare.) */
static struct {
    uint8_t kind;          /* CMD_UNICAST, CMD_BROADCAST or CMD_TOPIC */
    uint32_t rounds;
    uint32_t streams;      /* unicast: uids 1..streams */
    uint64_t stats_seen;   /* loop thread: rounds applied */
} job;

static void push(uint8_t kind, uint32_t uid, uint32_t len, uint16_t reply_len)
{
    size_t size = cmd_size(0, len, reply_len);
    struct cmd *c;
    while (!(c = handoff_reserve(inbox, size, 1000)))
        ;                                  /* full: the loop is behind */
    *c = (struct cmd){.kind = kind, .uid = uid, .payload_len = len,
                      .reply_len = reply_len, .received_ns = clock_now_ns()};
    memcpy(cmd_payload(c), payload, len);
    memset(cmd_reply(c), 'r', reply_len);
    handoff_commit(inbox);
}

/* A message to topic t:T (its name where the uids go, as erl_inbound.c lays it out). */
static void push_topic(uint32_t t)
{
    char name[16];
    uint32_t len = (uint32_t)snprintf(name, sizeof name, "t:%u", t);
    size_t size = cmd_size(cmd_topic_words(len), payload_len, 0);
    struct cmd *c;
    while (!(c = handoff_reserve(inbox, size, 1000)))
        ;
    *c = (struct cmd){.kind = CMD_TOPIC, .uid = len, .nuids = cmd_topic_words(len),
                      .payload_len = payload_len, .received_ns = clock_now_ns()};
    memcpy(cmd_topic(c), name, len);
    memcpy(cmd_payload(c), payload, payload_len);
    handoff_commit(inbox);
}

/* The C-node thread's place. */
static void *producer(void *arg)
{
    (void)arg;
    for (uint32_t r = 0; r < job.rounds; r++) {
        if (job.kind == CMD_BROADCAST)
            push(CMD_BROADCAST, 0, payload_len, 0);
        else if (job.kind == CMD_TOPIC)
            for (uint32_t t = 0; t < job.streams; t++)
                push_topic(t);
        else
            for (uint32_t uid = 1; uid <= job.streams; uid++)
                push(CMD_UNICAST, uid, payload_len, 0);
        push(CMD_STATS, 0, 0, 4);
    }
    return NULL;
}

static void on_done(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    (void)arg;
    uint64_t v;
    if (read(fd, &v, sizeof v) == sizeof v)
        job.stats_seen += v;
    if (job.stats_seen >= job.rounds)
        event_base_loopbreak(base);
}

/* Runs the loop while the producer pushes the job; the loop thread's CPU
 * (and its user part in *user). */
static uint64_t run_job(uint8_t kind, uint32_t rounds, uint32_t streams, uint64_t *user)
{
    job.kind = kind;
    job.rounds = rounds;
    job.streams = streams;
    job.stats_seen = 0;
    pthread_t t;
    uint64_t cpu = thread_cpu_ns(), u = thread_user_ns();
    pthread_create(&t, NULL, producer, NULL);
    event_base_dispatch(base);
    cpu = thread_cpu_ns() - cpu;
    *user = thread_user_ns() - u;
    pthread_join(t, NULL);
    return cpu;
}

/* ---------------------------------------------------------------- setup */

/* $BENCH_PROCESS_HISTORY_FILE: the history in that file (--history-file),
 * started afresh; else in memory. */
static const char *history_file;
static struct options opts;
/* $BENCH_PROCESS_TOPICS=T:K: topics, and topics per stream; 0: none. */
static uint32_t ntopics, per_stream;

/* The server's core with the options' defaults but these: no writer
 * thread (--writers 1), presence on, the node's name. */
static int setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    options_defaults(&opts);
    opts.max_users = MAX_USERS;
    opts.writers = 1;
    strcpy(opts.presence, "presence");
    strcpy(opts.name, "benchprocess@localhost");
    if (history_file && strlen(history_file) >= sizeof opts.history_file) {
        fprintf(stderr, "benchprocess: BENCH_PROCESS_HISTORY_FILE is too long\n");
        return -1;
    }
    if (history_file)
        strcpy(opts.history_file, history_file);
    /* Topics as the server wires them, a subscription's streams on the
     * topic's side unbounded here; anyone may join. */
    opts.max_topics = ntopics;
    opts.topics_per_stream = per_stream ? per_stream : 16;
    opts.streams_per_topic = MAX_USERS;
    opts.topic_history = opts.history;
    opts.topic_auth = 0;
    char *argv[] = {"benchprocess", NULL};
    if (server_start(&server, &opts, SERVER_CORE, 1, argv) != 0 ||
        chunked_init() != 0)           /* its goodbye: the last chunk */
        return -1;
    base = server.base;
    inbox = server.inbox;
    outbox = server.outbox;
    for (int i = 0; i < SINKS; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || sv[0] >= (int)(sizeof is_sink / sizeof is_sink[0]))
            return -1;
        int big = 4 << 20;
        setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
        setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
        fcntl(sv[1], F_SETFL, O_NONBLOCK);  /* the reader's end; the streams' blocks */
        sink_w[i] = sv[0];
        sink_r[i] = sv[1];
        is_sink[sv[0]] = 1;
    }
    done_efd = eventfd(0, EFD_NONBLOCK);
    struct event *done = done_efd < 0 ? NULL : event_new(base, done_efd, EV_READ | EV_PERSIST, on_done, NULL);
    return done && event_add(done, NULL) == 0 ? 0 : -1;
}

/* ---------------------------------------------------------------- phases */

static struct {
    uint32_t streams, repeats, rounds;
    long rss_before_kb, rss_open_kb, rss_peak_kb;
    double bytes_per_stream;
    uint64_t open_ns, close_ns;           /* loop CPU, whole phase */
    uint64_t deliver_ns[MAX_REPEATS], broadcast_ns[MAX_REPEATS];
    uint64_t deliver_user_ns[MAX_REPEATS], broadcast_user_ns[MAX_REPEATS];
    uint64_t snap_cpu_ns[MAX_REPEATS], snap_wall_ns[MAX_REPEATS];
    uint64_t snap_bytes, snap_pieces, max_piece;
    uint64_t reopen_ns;                   /* with a history file: opening it again */
    long rss_subscribed_kb;               /* topics: after every subscription */
    uint64_t subscriptions, subscribe_ns, publish_ns[MAX_REPEATS], publish_rounds;
    size_t index_bytes;                   /* topic_index_bytes() once subscribed */
} res;

/* Bytes of one framed message on a stream of the framing: compressed
 * when batch.c would (64 bytes and up, smaller so), as it does. */
static size_t framed_size(void)
{
    static char z[PAYLOAD_MAX + 1024];
    struct framing_prefix p;
    struct iovec iov[FRAMING_IOV_MAX];
    size_t bytes = 0, n = 0;
    if (framing_ws_deflate(framing) && payload_len >= 64)
        n = deflate_msg(payload, payload_len, z, sizeof z);
    if (n && n + 5 < payload_len) {
        framing_prefix_deflate(framing, (uint32_t)n, 1, 1, &p);
        framing_iov(framing, &p, z, (uint32_t)n, iov, &bytes);
    } else {
        if (framing_checks_utf8(framing))
            framing_prefix_utf8(framing, payload_len, 1, 1, &p);
        else
            framing_prefix(framing, payload_len, 1, &p);
        framing_iov(framing, &p, payload, payload_len, iov, &bytes);
    }
    return bytes;
}

static void phase_open(uint32_t n)
{
    uint64_t head_bytes = 0, before = atomic_load(&sink_bytes);
    res.rss_before_kb = status_kb("RssAnon");
    uint64_t cpu = thread_cpu_ns();
    for (uint32_t uid = 1; uid <= n; uid++) {
        struct stream *s = stream_open(uid, framing, NULL, sink_w[uid % SINKS]);
        if (!s || stream_import(s) != 0)
            break;
        char head[64];
        int k = snprintf(head, sizeof head, "Welcome, Url: '/test/%u' Id: %u\n", uid, uid);
        struct iovec iov = {head, (size_t)k};
        if (stream_send(s, &iov, 1, (size_t)k) != 0)
            break;
        head_bytes += (uint64_t)k;
    }
    res.open_ns = thread_cpu_ns() - cpu;
    res.rss_open_kb = status_kb("RssAnon");
    res.bytes_per_stream = (double)(res.rss_open_kb - res.rss_before_kb) * 1024.0 / n;
    int ok = sinks_reach(before + head_bytes);    /* first: the details are read after it */
    check("open", ok && loop_stats.streams_open == n && loop_stats.uids_online == n,
          "%" PRIu64 " streams open, %" PRIu64 " uids online, heads %" PRIu64 " of %" PRIu64 " B",
          loop_stats.streams_open, loop_stats.uids_online, atomic_load(&sink_bytes) - before,
          head_bytes);
    check("memory", SANITIZED || res.bytes_per_stream <= MAX_BYTES_PER_STREAM,
          "RssAnon grew %.1f B per stream (at most %d%s; struct stream %zu B + uid slot %zu B)",
          res.bytes_per_stream, MAX_BYTES_PER_STREAM, SANITIZED ? ", not checked: sanitized" : "",
          sizeof(struct stream), sizeof(void *));
    ok = wait_u64(&seen.up, n);
    check("presence up", ok, "%" PRIu64 " of %u uids announced up",
          (uint64_t)atomic_load(&seen.up), n);
}

static void phase_deliver(uint32_t n)
{
    uint64_t d0 = loop_stats.deliveries, b0 = atomic_load(&sink_bytes);
    for (uint32_t r = 0; r < res.repeats; r++)
        res.deliver_ns[r] = run_job(CMD_UNICAST, res.rounds, n, &res.deliver_user_ns[r]);
    uint64_t want = (uint64_t)res.repeats * res.rounds * n;
    int ok = sinks_reach(b0 + want * framed_size());
    check("deliver", ok && loop_stats.deliveries - d0 == want,
          "%" PRIu64 " of %" PRIu64 " delivered, %" PRIu64 " of %" PRIu64 " B read off the sinks",
          loop_stats.deliveries - d0, want, atomic_load(&sink_bytes) - b0, want * framed_size());
}

static void phase_broadcast(uint32_t n)
{
    uint64_t d0 = loop_stats.deliveries, b0 = atomic_load(&sink_bytes);
    for (uint32_t r = 0; r < res.repeats; r++)
        res.broadcast_ns[r] = run_job(CMD_BROADCAST, res.rounds, n, &res.broadcast_user_ns[r]);
    uint64_t want = (uint64_t)res.repeats * res.rounds * n;
    int ok = sinks_reach(b0 + want * framed_size());
    check("broadcast", ok && loop_stats.deliveries - d0 == want,
          "%" PRIu64 " of %" PRIu64 " delivered, %" PRIu64 " of %" PRIu64 " B read off the sinks",
          loop_stats.deliveries - d0, want, atomic_load(&sink_bytes) - b0, want * framed_size());
}

/* Snapshots back to back, as many as make a million uids (4 MB of pieces,
 * half the outbox) per repeat, so that a small N is timed over more than a
 * few microseconds; the next repeat once the reader took them all. */
static void phase_snapshot(uint32_t n)
{
    uint64_t u0 = atomic_load(&seen.snap_uids), by0 = atomic_load(&seen.snap_bytes);
    uint64_t p0 = atomic_load(&seen.snap_pieces), s0 = atomic_load(&seen.snapshots);
    uint64_t dropped = loop_stats.replies_dropped, done = 0;
    uint32_t per = 1000000 / n ? 1000000 / n : 1, got = n;
    int ok = 1;
    for (uint32_t r = 0; r < res.repeats && ok; r++) {
        uint64_t wall = clock_now_ns(), cpu = thread_cpu_ns();
        for (uint32_t k = 0; k < per && got == n; k++)
            got = presence_snapshot();
        res.snap_cpu_ns[r] = (thread_cpu_ns() - cpu) / per;
        res.snap_wall_ns[r] = (clock_now_ns() - wall) / per;
        done += per;
        ok = got == n && wait_u64(&seen.snap_uids, u0 + done * n);
    }
    res.snap_bytes = (atomic_load(&seen.snap_bytes) - by0) / done;
    res.snap_pieces = (atomic_load(&seen.snap_pieces) - p0) / done;
    res.max_piece = atomic_load(&seen.max_piece);
    ok = ok && atomic_load(&seen.snapshots) - s0 == done;
    check("snapshot", ok && atomic_load(&seen.bad_order) == 0 && loop_stats.replies_dropped == dropped,
          "%" PRIu64 " snapshots of %u uids (last counted %u), %" PRIu64 " pieces each, "
          "out of order %" PRIu64 ", dropped %" PRIu64,
          done, n, got, res.snap_pieces, (uint64_t)atomic_load(&seen.bad_order),
          loop_stats.replies_dropped - dropped);
    check("bounded pieces", res.max_piece <= SNAPSHOT_PIECE_MAX,
          "the largest presence piece held %" PRIu64 " uids (at most %d)", res.max_piece,
          SNAPSHOT_PIECE_MAX);
}

static void phase_close(uint32_t n)
{
    uint64_t b0 = atomic_load(&sink_bytes);
    struct iovec t = transport_goodbye(framing, END_DRAIN);
    uint64_t cpu = thread_cpu_ns();
    for (uint32_t uid = 1; uid <= n; uid++) {
        struct stream *s = uidtable_first(uid);
        if (s)
            stream_end(s);
    }
    stream_reap();
    res.close_ns = thread_cpu_ns() - cpu;
    int ok = sinks_reach(b0 + (uint64_t)n * t.iov_len);
    ok = wait_u64(&seen.down, n) && ok;
    check("close", ok && loop_stats.streams_open == 0 && loop_stats.uids_online == 0,
          "%" PRIu64 " streams left, %" PRIu64 " terminator bytes of %" PRIu64 ", %" PRIu64
          " of %u uids announced down",
          loop_stats.streams_open, atomic_load(&sink_bytes) - b0, (uint64_t)n * t.iov_len,
          (uint64_t)atomic_load(&seen.down), n);
}

/* Every stream subscribes to per_stream topics: stream i (uid i + 1) to
 * t:((i * K + j) mod T). */
static void phase_subscribe(uint32_t n)
{
    long before = status_kb("RssAnon");
    uint64_t cpu = thread_cpu_ns(), refused = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct stream *s = uidtable_first(i + 1);
        for (uint32_t j = 0; s && j < per_stream; j++) {
            char name[16];
            uint32_t t, len = (uint32_t)snprintf(name, sizeof name, "t:%u",
                                                 (uint32_t)(((uint64_t)i * per_stream + j) % ntopics));
            refused += topic_subscribe(s, name, len, &t) != TOPIC_OK;
        }
    }
    res.subscribe_ns = thread_cpu_ns() - cpu;
    res.rss_subscribed_kb = status_kb("RssAnon");
    res.subscriptions = loop_stats.topic_subscriptions;
    res.index_bytes = topic_index_bytes();
    double per = (double)(res.rss_subscribed_kb - before) * 1024.0 / (double)res.subscriptions;
    check("subscribe", refused == 0 && res.subscriptions == (uint64_t)n * per_stream &&
                           loop_stats.topics == (n * (uint64_t)per_stream < ntopics
                                                     ? n * (uint64_t)per_stream : ntopics),
          "%" PRIu64 " subscriptions to %" PRIu64 " topics, %" PRIu64 " refused; RssAnon grew "
          "%.1f B a subscription", res.subscriptions, loop_stats.topics, refused, per);
}

/* Rounds of a message to every topic: each stream gets per_stream a round. */
static void phase_publish(uint32_t n)
{
    uint64_t d0 = loop_stats.deliveries, b0 = atomic_load(&sink_bytes), u;
    uint32_t held = (uint32_t)(n * (uint64_t)per_stream < ntopics ? n * (uint64_t)per_stream
                                                                  : ntopics);
    res.publish_rounds = res.subscriptions >= MIN_WORK ? 1
                         : (MIN_WORK + res.subscriptions - 1) / res.subscriptions;
    for (uint32_t r = 0; r < res.repeats; r++)
        res.publish_ns[r] = run_job(CMD_TOPIC, (uint32_t)res.publish_rounds, held, &u);
    uint64_t want = (uint64_t)res.repeats * res.publish_rounds * res.subscriptions;
    int ok = sinks_reach(b0 + want * framed_size());
    check("publish", ok && loop_stats.deliveries - d0 == want,
          "%" PRIu64 " of %" PRIu64 " delivered, %" PRIu64 " of %" PRIu64 " B read off the sinks",
          loop_stats.deliveries - d0, want, atomic_load(&sink_bytes) - b0, want * framed_size());
}

/* With a history file: what a restart spends opening it again, all it
 * holds checked (core/history_check.c), and that it resumed. */
static void phase_reopen(void)
{
    uint32_t epoch = history_epoch();
    uint64_t kept = loop_stats.history_entries, bytes = loop_stats.history_bytes;
    history_free();
    uint64_t t = clock_now_ns();
    int ok = history_init(&server.history) == 0;
    res.reopen_ns = clock_now_ns() - t;
    check("history reopen",
          ok && history_epoch() == epoch && loop_stats.history_entries == kept &&
              loop_stats.history_bytes == bytes,
          "epoch %08x resumed in %.1f ms (wall), %" PRIu64 " messages of %" PRIu64
          " kept, %" PRIu64 " bytes of %" PRIu64 " checked",
          history_epoch(), (double)res.reopen_ns / 1e6, loop_stats.history_entries, kept,
          loop_stats.history_bytes, bytes);
}

/* ---------------------------------------------------------------- report */

static void json_samples(const char *name, const uint64_t *v, uint32_t n, double per)
{
    printf(",\n  \"%s\": [", name);
    for (uint32_t i = 0; i < n; i++)
        printf("%s%.2f", i ? ", " : "", (double)v[i] / per);
    printf("]");
}

static int report(void)
{
    uint32_t n = res.streams, r = res.repeats;
    double per = (double)res.rounds * n;       /* deliveries of one repeat */
    uint64_t d[MAX_REPEATS], b[MAX_REPEATS], sc[MAX_REPEATS], sw[MAX_REPEATS];
    memcpy(d, res.deliver_ns, sizeof d);
    memcpy(b, res.broadcast_ns, sizeof b);
    memcpy(sc, res.snap_cpu_ns, sizeof sc);
    memcpy(sw, res.snap_wall_ns, sizeof sw);
    int failed = 0;
    printf("{\n  \"streams\": %u, \"sinks\": %d, \"repeats\": %u, \"payload_bytes\": %u,\n", n,
           SINKS, r, payload_len);
    printf("  \"framing\": \"%s\", \"ws_deflated\": %" PRIu64 ", \"ws_deflate_out_bytes\": %" PRIu64
           ",\n", framing == FRAMING_CHUNKED ? "chunked" : framing == FRAMING_WS ? "ws" : "ws_deflate",
           loop_stats.ws_deflated, loop_stats.ws_deflate_out_bytes);
    printf("  \"rounds_per_repeat\": %u, \"history_file\": %s, \"history_reopen_ms\": %.1f,\n",
           res.rounds, history_file ? "true" : "false", (double)res.reopen_ns / 1e6);
    printf("  \"struct_stream_bytes\": %zu, \"uid_slot_bytes\": %zu,\n", sizeof(struct stream),
           sizeof(void *));
    printf("  \"rss_anon_before_kb\": %ld, \"rss_anon_open_kb\": %ld, \"vm_hwm_kb\": %ld,\n",
           res.rss_before_kb, res.rss_open_kb, res.rss_peak_kb);
    printf("  \"bytes_per_stream\": %.2f,\n", res.bytes_per_stream);
    printf("  \"open_cpu_ns\": %.2f, \"close_cpu_ns\": %.2f,\n", (double)res.open_ns / n,
           (double)res.close_ns / n);
    printf("  \"deliver_cpu_ns\": %.2f, \"broadcast_cpu_ns\": %.2f,\n",
           (double)median(d, (int)r) / per, (double)median(b, (int)r) / per);
    printf("  \"snapshot_bytes_per_uid\": %.3f, \"snapshot_pieces\": %" PRIu64
           ", \"snapshot_max_piece_uids\": %" PRIu64 ",\n",
           (double)res.snap_bytes / n, res.snap_pieces, res.max_piece);
    printf("  \"snapshot_cpu_ns\": %.3f, \"snapshot_wall_ns\": %.3f",
           (double)median(sc, (int)r) / n, (double)median(sw, (int)r) / n);
    if (ntopics) {
        uint64_t p[MAX_REPEATS];
        memcpy(p, res.publish_ns, sizeof p);
        double subs = (double)res.subscriptions;
        printf(",\n  \"topics\": %u, \"topics_per_stream\": %u, \"subscriptions\": %" PRIu64,
               ntopics, per_stream, res.subscriptions);
        printf(",\n  \"rss_anon_subscribed_kb\": %ld, \"bytes_per_subscription\": %.2f",
               res.rss_subscribed_kb,
               (double)(res.rss_subscribed_kb - res.rss_open_kb) * 1024.0 / subs);
        printf(",\n  \"index_bytes_per_subscription\": %.2f", (double)res.index_bytes / subs);
        printf(",\n  \"subscribe_cpu_ns\": %.2f", (double)res.subscribe_ns / subs);
        printf(",\n  \"publish_cpu_ns_per_delivery\": %.2f",
               (double)median(p, (int)r) / ((double)res.publish_rounds * subs));
        json_samples("publish_cpu_ns_samples", res.publish_ns, r,
                     (double)res.publish_rounds * subs);
    }
    json_samples("deliver_cpu_ns_samples", res.deliver_ns, r, per);
    json_samples("broadcast_cpu_ns_samples", res.broadcast_ns, r, per);
    json_samples("deliver_user_ns_samples", res.deliver_user_ns, r, per);
    json_samples("broadcast_user_ns_samples", res.broadcast_user_ns, r, per);
    json_samples("snapshot_cpu_ns_samples", res.snap_cpu_ns, r, n);
    printf(",\n  \"checks\": [");
    for (int i = 0; i < nchecks; i++) {
        printf("%s\n    {\"name\": \"%s\", \"ok\": %s, \"detail\": \"%s\"}", i ? "," : "",
               checks[i].name, checks[i].ok ? "true" : "false", checks[i].detail);
        failed += !checks[i].ok;
    }
    printf("\n  ],\n  \"failed\": %d\n}\n", failed);
    return failed;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? strtol(argv[1], NULL, 10) : 0;
    long r = argc > 2 ? strtol(argv[2], NULL, 10) : 5;
    if (n < SINKS || n > MAX_USERS || n / SINKS >= 65535 || r < 1 || r > MAX_REPEATS) {
        fprintf(stderr, "usage: benchprocess STREAMS [REPEATS]   (%d..%d streams, 1..%d repeats)\n",
                SINKS, MAX_USERS, MAX_REPEATS);
        return 2;
    }
    const char *topics = getenv("BENCH_PROCESS_TOPICS");
    if (topics && *topics && (sscanf(topics, "%u:%u", &ntopics, &per_stream) != 2 ||
                              ntopics < 1 || per_stream < 1 || per_stream > 255)) {
        fprintf(stderr, "benchprocess: BENCH_PROCESS_TOPICS is T:K (T topics >= 1, K 1..255 "
                        "topics a stream)\n");
        return 2;
    }
    const char *f = getenv("BENCH_PROCESS_FRAMING"), *pl = getenv("BENCH_PROCESS_PAYLOAD");
    if (f && *f && strcmp(f, "chunked") != 0)
        framing = strcmp(f, "ws") == 0 ? FRAMING_WS
                  : strcmp(f, "ws_deflate") == 0 ? FRAMING_WS_DEFLATE : FRAMING_KINDS;
    if (pl && *pl)
        payload_len = (uint32_t)strtoul(pl, NULL, 10);
    if (framing == FRAMING_KINDS || payload_len < 1 || payload_len > PAYLOAD_MAX) {
        fprintf(stderr, "benchprocess: BENCH_PROCESS_FRAMING is chunked, ws or ws_deflate; "
                        "BENCH_PROCESS_PAYLOAD 1..%d bytes\n", PAYLOAD_MAX);
        return 2;
    }
    /* Text as applications send it: JSON of a few fields, cut to length. */
    static const char sample[] =
        "{\"id\":4711,\"from\":\"alice\",\"room\":\"lobby\",\"text\":\"see you at the station "
        "at nine, the train leaves at a quarter past\",\"at\":\"2024-05-01T08:55:12Z\"},";
    for (uint32_t i = 0; i < PAYLOAD_MAX; i++)
        payload[i] = sample[i % (sizeof sample - 1)];
    history_file = getenv("BENCH_PROCESS_HISTORY_FILE");
    if (history_file && !*history_file)
        history_file = NULL;
    if (history_file)
        unlink(history_file);
    if (setup() != 0) {
        fprintf(stderr, "benchprocess: setup failed: %s\n", strerror(errno));
        return 1;
    }
    res.streams = (uint32_t)n;
    res.repeats = (uint32_t)r;
    res.rounds = n >= MIN_WORK ? 1 : (uint32_t)((MIN_WORK + n - 1) / n);
    pthread_t sinks, outs;
    pthread_create(&sinks, NULL, sink_reader, NULL);
    pthread_create(&outs, NULL, outbox_reader, NULL);

    phase_open(res.streams);
    if (ntopics && checks[0].ok) {
        phase_subscribe(res.streams);
        phase_publish(res.streams);
        phase_close(res.streams);
    } else if (!nchecks || checks[0].ok) {
        phase_deliver(res.streams);
        phase_broadcast(res.streams);
        phase_snapshot(res.streams);
        phase_close(res.streams);
        if (history_file)
            phase_reopen();
    }
    res.rss_peak_kb = status_kb("VmHWM");
    atomic_store(&stopping, 1);
    pthread_join(sinks, NULL);
    pthread_join(outs, NULL);
    return report() ? 1 : 0;
}
