/* SPDX-License-Identifier: Apache-2.0 */
/* The history in a --history-file (src/core/history.c, included for its
 * clock; history_map.c and history_check.c as built): a child process
 * writing messages is killed with SIGKILL by a timer it sets, at random
 * ops, or single-stepped with ptrace through chosen ops (one of each way
 * an op goes: moves, wraps, push-outs by TTL, topics) with the file
 * checked at every instruction that changed it, and the parent opens the
 * file as the next run would. It must resume with the same epoch, and what each uid's and
 * topic's returning client can get must be what the history held before
 * the interrupted call or after it: the same ids, the same bytes, no
 * message given without its predecessors, none lost beyond what the call
 * itself would push out. The parent knows both by running the same
 * program in memory. Every state between two calls is checked as a
 * restart would, over long programs. Damaged and foreign files are
 * refused and started afresh; a file in use or not a history is not used.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../../src/core/history.c"
#include "kill_steps.h"

#define UIDS 12
#define TOPICS 2                /* slots UIDS + 1.. */
#define SLOTS (UIDS + TOPICS)
#define PER_UID 12
#define PER_TOPIC 8
#define ARENA 16384             /* small: it wraps, moves and pushes out all the time */
#define TTL 30
#define SEQ_MAX 16384           /* ids per slot the model holds; the program stops before */
#define LEN_MAX 3000

static uint32_t fake_now;
static uint32_t fake_clock(void) { return fake_now; }

static char path[256];
static char copy_path[272];     /* what a kill left, copied: opened as the next run */

static struct history_config config_of(const char *file, const char *node)
{
    return (struct history_config){.max_users = UIDS, .max_topics = TOPICS, .per_uid = PER_UID,
                                   .per_topic = PER_TOPIC, .ttl_s = TTL, .bytes = ARENA,
                                   .file = file, .node = node};
}

static int open_file_at(const char *file)
{
    struct history_config c = config_of(file, "test@localhost");
    return history_init(&c);
}

static int open_file(void) { return open_file_at(path); }

/* ------------------------------------------------------------ the program */

/* A program of calls, the same wherever it runs: appends of 1..200 bytes
 * (at times up to 3,000) to 12 uids and 2 topics, multicasts (one
 * payload, then one call per uid), the clock moving (at times past the
 * TTL), and a topic made again (a new epoch, its ids going on). Each op is
 * made from the random state alone, so the parent knows op N without
 * running ops 1..N. */
enum { OP_CLOCK, OP_APPEND, OP_SHARE, OP_SHARED, OP_OPEN };

struct op {
    int kind;
    uint32_t uid, len, tag, clock;  /* uid: a slot, a topic's past UIDS */
};

struct program {
    uint64_t rng;
    uint32_t clock, tags, bits;     /* bits: uids still to get the multicast */
    uint32_t done;
};

static uint64_t next_rand(struct program *p)
{
    uint64_t z = (p->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint32_t message_len(uint64_t r)
{
    return (r >> 20) % 8 == 0 ? 500 + (uint32_t)(r >> 24) % (LEN_MAX - 500)
                              : 1 + (uint32_t)(r >> 24) % 200;
}

static void next_op(struct program *p, struct op *o)
{
    *o = (struct op){.kind = OP_CLOCK};
    if (p->done < TOPICS) {
        *o = (struct op){.kind = OP_OPEN, .uid = UIDS + 1 + p->done};   /* the topics made */
    } else if (p->bits) {
        uint32_t u = (uint32_t)__builtin_ctz(p->bits);
        p->bits &= p->bits - 1;
        *o = (struct op){.kind = OP_SHARED, .uid = u + 1};
    } else {
        uint64_t r = next_rand(p);
        uint32_t what = (uint32_t)(r % 128);
        if (what < 8)
            p->clock += (uint32_t)(r >> 8) % 4;
        else if (what == 8)
            p->clock += TTL / 2 + (uint32_t)(r >> 8) % TTL;         /* a pause: old ones stale */
        else if (what < 24) {
            *o = (struct op){.kind = OP_SHARE, .len = 1 + (uint32_t)(r >> 8) % 120, .tag = ++p->tags};
            p->bits = (uint32_t)(r >> 20) & ((1u << UIDS) - 1);
        } else if (what == 24)
            *o = (struct op){.kind = OP_OPEN, .uid = UIDS + 1 + (uint32_t)(r >> 8) % TOPICS};
        else if (what < 40)
            *o = (struct op){.kind = OP_APPEND, .uid = UIDS + 1 + (uint32_t)(r >> 8) % TOPICS,
                             .len = message_len(r)};
        else
            *o = (struct op){.kind = OP_APPEND, .uid = 1 + (uint32_t)(r >> 8) % UIDS,
                             .len = message_len(r)};
    }
    o->clock = p->clock;
    p->done++;
}

/* Bytes of their own for each message: a stale or crossed byte shows. */
static void make_payload(char *out, uint32_t len, uint32_t a, uint32_t b)
{
    for (uint32_t i = 0; i < len; i++)
        out[i] = (char)('a' + (a * 7 + b * 13 + i) % 26);
}

static uint32_t hash(const char *d, uint32_t len)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)d[i]) * 16777619u;
    return h;
}

/* The model: what each slot's message of each id was (filled by the
 * parent's run in memory). */
static struct model_msg {
    uint32_t hash;
    uint16_t len;
    uint8_t binary, known;
} (*model)[SEQ_MAX];
static int recording;

static void record(uint32_t uid, uint32_t seq, const char *d, uint32_t len)
{
    assert_true(seq < SEQ_MAX);
    model[uid][seq] = (struct model_msg){.hash = hash(d, len), .len = (uint16_t)len,
                                         .binary = (uint8_t)(len & 1), .known = 1};
}

static uint64_t shared_now;
static uint32_t shared_len, shared_tag;

static void apply(const struct op *o)
{
    static char buf[LEN_MAX];
    fake_now = o->clock;
    switch (o->kind) {
    case OP_APPEND: {
        uint32_t seq = history_last_seq(o->uid) + 1;
        make_payload(buf, o->len, o->uid, seq);
        uint32_t got = history_append(o->uid, buf, o->len, (int)(o->len & 1));
        if (recording)
            record(o->uid, got, buf, o->len);
        break;
    }
    case OP_SHARE:
        make_payload(buf, o->len, 0, o->tag);
        shared_now = history_share(buf, o->len, (int)(o->len & 1));
        shared_len = o->len;
        shared_tag = o->tag;
        break;
    case OP_SHARED: {
        uint32_t got = history_append_shared(o->uid, shared_now);
        if (recording) {
            make_payload(buf, shared_len, 0, shared_tag);
            record(o->uid, got, buf, shared_len);
        }
        break;
    }
    case OP_OPEN: {
        char name[16];
        int n = snprintf(name, sizeof name, "topic-%u", o->uid);
        history_topic_open(o->uid, name, (uint8_t)n);
        break;
    }
    default:
        break;
    }
}

/* Whether op can run without an id past the model. */
static int room_for(const struct op *o)
{
    return o->kind != OP_APPEND && o->kind != OP_SHARED ? 1
                                                         : history_last_seq(o->uid) + 2 < SEQ_MAX;
}

/* ------------------------------------------------------- what a client sees */

/* A slot's history as its returning clients find it: the last id, and the
 * oldest id from which all up to the last can be replayed (last + 1:
 * none). Every message a resume gives is checked against the model. */
struct seen {
    uint32_t last, first;
};

static struct {
    struct history_replay r;
    uint64_t room[64];
} rep;

static void check_replay(uint32_t uid, uint32_t from, uint32_t last)
{
    uint32_t expect = rep.r.gap ? rep.r.first_seq : from + 1;
    if (rep.r.gap && rep.r.n)
        assert_true(rep.r.first_seq > from + 1);
    for (uint32_t i = 0; i < rep.r.n; i++, expect++) {
        uint32_t len, seq;
        int binary;
        const char *m = history_message(rep.r.pos[i], &len, &seq, &binary);
        assert_int_equal(seq, expect);                /* contiguous up to the last */
        assert_true(seq < SEQ_MAX && model[uid][seq].known);
        assert_int_equal(len, model[uid][seq].len);
        assert_int_equal(hash(m, len), model[uid][seq].hash);
        assert_int_equal(binary, model[uid][seq].binary);
    }
    if (rep.r.n)
        assert_int_equal(expect, last + 1);
}

static struct seen observe(uint32_t uid)
{
    struct seen s = {.last = history_last_seq(uid)};
    s.first = s.last + 1;
    for (uint32_t from = s.last;; from--) {
        history_since(uid, 1, history_slot_epoch(uid), from, &rep.r, 64);
        check_replay(uid, from, s.last);
        if (rep.r.gap)
            break;
        assert_int_equal(rep.r.n, s.last - from);
        s.first = from + 1;
        if (from == 0)
            break;
    }
    return s;
}

static void observe_all(struct seen out[SLOTS + 1], uint32_t now)
{
    uint32_t was = fake_now;
    fake_now = now;
    for (uint32_t u = 1; u <= SLOTS; u++)
        out[u] = observe(u);
    fake_now = was;
}

static int in(uint32_t seq, const struct seen *s) { return seq >= s->first && seq <= s->last; }

/* What each slot's clients find before op k + 1 of seed's program and
 * after it (the program run in memory): the clock of that op. */
static uint32_t expected(uint64_t seed, uint32_t k, struct seen before[SLOTS + 1],
                         struct seen after[SLOTS + 1])
{
    struct program p = {.rng = seed, .clock = 1000};
    struct op o;
    struct history_config mem = config_of(NULL, NULL);
    assert_int_equal(history_init(&mem), 0);
    recording = 1;
    for (uint32_t i = 0; i < k; i++) {
        next_op(&p, &o);
        apply(&o);
    }
    next_op(&p, &o);
    observe_all(before, o.clock);
    apply(&o);
    observe_all(after, o.clock);
    recording = 0;
    history_free();
    return o.clock;
}

/* The file left by a kill during an op (file, or a copy of it) against
 * what its clients found before the op and after it: opened as the next
 * run would, the same epoch, and per slot what lies between (an append's
 * push-outs may be done and its message not in). */
static void check_file(const char *file, uint32_t epoch_was, uint32_t now,
                       const struct seen before[SLOTS + 1], const struct seen after[SLOTS + 1])
{
    struct seen got[SLOTS + 1], again[SLOTS + 1];
    assert_int_equal(open_file_at(file), 0);
    assert_int_equal(history_epoch(), epoch_was);           /* resumed, not started afresh */
    observe_all(got, now);
    history_free();
    assert_int_equal(open_file_at(file), 0);                /* a stopped run resumes alike */
    assert_int_equal(history_epoch(), epoch_was);
    observe_all(again, now);
    for (uint32_t u = 1; u <= SLOTS; u++) {
        assert_true(got[u].last == before[u].last || got[u].last == after[u].last);
        for (uint32_t seq = 1; seq <= after[u].last; seq++) {
            if (in(seq, &got[u]))
                assert_true(in(seq, &before[u]) || in(seq, &after[u]));
            if (in(seq, &after[u]) && seq <= before[u].last)
                assert_true(in(seq, &got[u]));
        }
        assert_memory_equal(&got[u], &again[u], sizeof got[u]);
    }
    /* It goes on: each slot's next message comes next, from any id. */
    for (uint32_t u = 1; u <= SLOTS; u++) {
        assert_int_equal(history_append(u, "next", 4, 0), got[u].last + 1);
        history_since(u, 1, history_slot_epoch(u), got[u].last, &rep.r, 64);
        assert_false(rep.r.gap);
        assert_int_equal(rep.r.n, 1);
    }
    history_free();
}

/* The file after a kill during op k + 1 (k ops done). */
static void check_resumed(uint64_t seed, uint32_t k, uint32_t epoch_was)
{
    struct seen before[SLOTS + 1], after[SLOTS + 1];
    uint32_t now = expected(seed, k, before, after);
    check_file(path, epoch_was, now, before, after);
}

/* ------------------------------------------------------------ the children */

struct shared_page {
    _Atomic uint32_t ready;
    _Atomic uint32_t done;      /* ops the child finished */
    uint32_t epoch;
    int trace_refused;
};

static struct shared_page *page;
static pid_t stepped;           /* a child stopped under ptrace: killed by teardown */

/* How a child is stopped in an op: killed by a timer it sets, or
 * stopped before and after it for its parent to step it through. */
enum stop { TIMED, TRACED };

/* The child: a new file, ops_before ops, then (traced) a stop before and
 * after the next op, else (timed) a SIGKILL in delay_ns while it goes on.
 * Never returns. */
static void child(uint64_t seed, uint32_t ops_before, enum stop how, long delay_ns)
{
    if (how == TRACED && ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) {
        page->trace_refused = 1;
        _exit(0);
    }
    unlink(path);
    log_set_level(LOG_ERROR);
    if (open_file() != 0)
        _exit(3);
    page->epoch = history_epoch();
    struct program p = {.rng = seed, .clock = 1000};
    struct op o;
    atomic_store(&page->ready, 1);
    for (uint32_t i = 0; i < ops_before; i++) {
        next_op(&p, &o);
        apply(&o);
        atomic_store(&page->done, i + 1);
    }
    if (how == TRACED) {
        next_op(&p, &o);
        raise(SIGSTOP);
        apply(&o);
        raise(SIGSTOP);
    } else {
        /* A timer to the nanosecond (no slack): the kill lands at an
         * instruction of the next op or of one soon after. */
        timer_t t;
        struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGKILL};
        struct itimerspec at = {.it_value = {.tv_nsec = delay_ns + 1}};
        if (prctl(PR_SET_TIMERSLACK, 1ul) != 0 || timer_create(CLOCK_MONOTONIC, &ev, &t) != 0 ||
            timer_settime(t, 0, &at, NULL) != 0)
            _exit(4);
        for (uint32_t i = ops_before;; i++) {
            struct program was = p;
            next_op(&p, &o);
            if (!room_for(&o)) {
                p = was;
                break;
            }
            apply(&o);
            atomic_store(&page->done, i + 1);
        }
    }
    for (;;)
        pause();
}

static void wait_ready(void)
{
    for (int i = 0; i < 50000 && !atomic_load(&page->ready); i++)
        usleep(100);
    assert_true(atomic_load(&page->ready));
}

static int setup(void **state)
{
    (void)state;
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, sizeof path, "%s/httpdcnode-test-history-%d", dir, (int)getpid());
    snprintf(copy_path, sizeof copy_path, "%s-copy", path);
    page = mmap(NULL, sizeof *page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    model = calloc(SLOTS + 1, sizeof *model);
    assert_true(page != MAP_FAILED && model);
    log_set_level(LOG_ERROR);
    now_s = fake_clock;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (stepped > 0)
        reap(stepped);
    stepped = 0;
    history_free();
    unlink(path);
    unlink(copy_path);
    free(model);
    munmap(page, sizeof *page);
    return 0;
}

static void killed_at_random_times_resumes_between_two_calls(void **state)
{
    (void)state;
    uint64_t seed0 = kill_seed();
    /* HISTORY_KILLS=N: that many kills (300 in make test). */
    const char *kills_env = getenv("HISTORY_KILLS");
    int kills = kills_env ? atoi(kills_env) : 300;
    double end = seconds_now() + (kills_env ? 3600 : 20);   /* bounded: the kills, or the time */
    int runs = 0;
    for (; runs < kills && (runs < 5 || seconds_now() < end); runs++) {
        uint64_t seed = seed0 + (uint64_t)runs * 7919;
        struct program r = {.rng = seed ^ 0x5eed};
        uint64_t when = next_rand(&r);
        /* Past the arena's first fill, up to 3,000 ops; then 0 to 20 us. */
        uint32_t ops = 100 + (uint32_t)(when % 2900);
        memset(page, 0, sizeof *page);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            child(seed, ops, TIMED, (long)(when >> 32) % 20000);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        memset(model, 0, (SLOTS + 1) * sizeof *model);
        check_resumed(seed, atomic_load(&page->done), page->epoch);
    }
    printf("%d kills, each resumed between two calls\n", runs);
}

/* A child at the stop before op k + 1 of seed's program. */
static pid_t stopped_before(uint64_t seed, uint32_t k)
{
    memset(page, 0, sizeof *page);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        child(seed, k, TRACED, 0);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (page->trace_refused)
        return 0;
    assert_true(WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP);
    return pid;
}

/* The ways an op goes that each get an op killed at every instruction. */
enum way {
    MOVES,              /* an entry moved ahead (the longest way) and one pushed out */
    MOVES_LINKED,       /* the message moved has its previous and next kept: both mended */
    WRAPS,              /* the rest of a lap skipped, what the lap before left there out */
    STALE,              /* a message within --history pushed out: past the TTL */
    LOSES_NEWEST,       /* the slot's newest pushed out to make room for its next */
    REOPENS,            /* a topic made again, its messages kept */
};

static const struct {
    int kind, topic;
    enum way way;
    const char *what;
} ways[] = {
    {OP_APPEND, 0, MOVES, "an append that moves and pushes out"},
    {OP_SHARED, 0, MOVES, "a multicast's uid entry that does"},
    {OP_SHARE, 0, MOVES, "a multicast's payload that does"},
    {OP_APPEND, 1, MOVES, "a topic's message that does"},
    {OP_APPEND, 0, MOVES_LINKED, "an append moving a message between two"},
    {OP_APPEND, 0, WRAPS, "an append past the arena's end"},
    {OP_APPEND, 0, STALE, "an append pushing out stale messages"},
    {OP_APPEND, 0, LOSES_NEWEST, "an append pushing out its uid's newest"},
    {OP_OPEN, 1, REOPENS, "a topic made again"},
};

/* Whether the entry at the head is a slot's message, not past its
 * --history but past the TTL. */
static int head_is_stale(void)
{
    const struct entry *e = entry_at(head);
    return to_end(head) >= sizeof *e && e->len != FILLER && e->uid && !(e->len & SHARED_REF) &&
           last_seq(e->uid) - e->seq < kept_max(e->uid) && !head_is_live(e);
}

/* Whether the entry at the head is of use, its previous and next kept. */
static int head_is_linked(void)
{
    const struct entry *e = entry_at(head);
    return head_is_live(e) && kept_entry(entry_link(head, e->prev), e->uid) &&
           kept_entry(entry_link(head, e->next), e->uid);
}

/* The first op at or after k of seed's program that goes the way ways[w]
 * says (of at most 200 bytes: few instructions). */
static uint32_t op_that_goes(uint64_t seed, uint32_t k, size_t w)
{
    struct program p = {.rng = seed, .clock = 1000};
    struct op o;
    struct history_config mem = config_of(NULL, NULL);
    assert_int_equal(history_init(&mem), 0);
    for (uint32_t i = 0; i < 60000; i++) {
        next_op(&p, &o);
        fake_now = o.clock;
        uint64_t moved = loop_stats.history_moved, evicted = loop_stats.history_evicted;
        uint64_t head0 = head, tail0 = tail, newest = o.uid ? uids[o.uid].newest : 0;
        int stale = head_is_stale(), linked = head_is_linked();
        apply(&o);
        int went;
        switch (ways[w].way) {
        case MOVES:
            went = loop_stats.history_moved > moved && loop_stats.history_evicted > evicted;
            break;
        case MOVES_LINKED:
            went = linked && loop_stats.history_moved > moved;
            break;
        case WRAPS:                             /* 96 bytes or more skipped */
            went = tail0 % ARENA && tail0 % ARENA <= ARENA - 96 &&
                   (tail - 1) / ARENA > tail0 / ARENA && loop_stats.history_evicted > evicted;
            break;
        case STALE:
            went = stale && head > head0;
            break;
        case LOSES_NEWEST:
            went = newest && newest - 1 >= head0 && newest - 1 < head;
            break;
        default:
            went = newest && newest - 1 >= head0;
        }
        if (i >= k && went && o.kind == ways[w].kind && (o.uid > UIDS) == ways[w].topic &&
            o.len <= 200) {
            history_free();
            return i;
        }
    }
    fail_msg("no op is %s", ways[w].what);
    return 0;
}

/* Op k + 1 of seed's program, run by a child one instruction at a time:
 * wherever it changed the file, what a kill there leaves (a copy) is
 * opened as the next run would. The instructions stepped and the states
 * checked; 0 instructions when they cannot be stepped here. */
static void killed_at_every_instruction(uint64_t seed, uint32_t k, long *instructions,
                                        long *states)
{
    struct seen before[SLOTS + 1], after[SLOTS + 1];
    memset(model, 0, (SLOTS + 1) * sizeof *model);
    uint32_t now = expected(seed, k, before, after);
    *instructions = *states = 0;
    pid_t pid = stepped = stopped_before(seed, k);
    if (!pid)
        return;                                  /* ptrace is not allowed here */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    assert_true(fd >= 0 && fstat(fd, &st) == 0);
    size_t size = (size_t)st.st_size;
    const char *file = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    char *seen = malloc(size);
    int copy = open(copy_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(file != MAP_FAILED && seen && copy >= 0);
    for (int done = 0; *instructions < 1000000;) {
        if (*states == 0 || memcmp(file, seen, size) != 0) {
            memcpy(seen, file, size);
            assert_int_equal(pwrite(copy, seen, size, 0), (ssize_t)size);
            check_file(copy_path, page->epoch, now, before, after);
            ++*states;
        }
        if (done)
            break;
        done = !step(pid, 1);
        *instructions += !done;
    }
    reap(pid);
    stepped = 0;
    if (*instructions == 1000000)
        *instructions = 0;                       /* an emulator (valgrind): too slow to step */
    close(copy);
    free(seen);
    munmap((void *)file, size);
    close(fd);
}

static void killed_at_every_instruction_of_each_way_an_op_goes_resumes(void **state)
{
    (void)state;
    uint64_t seed = 42;
    for (size_t w = 0; w < sizeof ways / sizeof ways[0]; w++) {
        uint32_t k = op_that_goes(seed, 3000, w);
        long n, states;
        killed_at_every_instruction(seed, k, &n, &states);
        if (!n)
            skip();
        printf("op %u, %s: %ld instructions, the file checked at each of the %ld states "
               "they left\n", k, ways[w].what, n, states);
    }
    /* HISTORY_STEP_OPS=N: every op from 3,000 on of N seeds' programs too
     * (HISTORY_SEED: the first), about 0.1 s an op. */
    const char *ops_env = getenv("HISTORY_STEP_OPS"), *seed_env = getenv("HISTORY_SEED");
    uint32_t ops = ops_env ? (uint32_t)atoi(ops_env) : 0;
    uint64_t seed0 = seed_env ? strtoull(seed_env, NULL, 10) : (uint64_t)time(NULL);
    long all = 0, all_states = 0;
    for (uint32_t i = 0; i < ops; i++) {
        long n, states;
        killed_at_every_instruction(seed0 + i % 16, 3000 + i / 16, &n, &states);
        all += n;
        all_states += states;
    }
    if (ops)
        printf("%u more ops from seed %llu: %ld instructions, %ld states checked\n", ops,
               (unsigned long long)seed0, all, all_states);
}

/* ----------------------------------------------- between two calls */

/* A restart may come between any two calls: after each op of long
 * programs, the file is checked as a restart checks it, and the bytes and
 * messages it counts are those counted while running. */
static void restarted_between_any_two_calls_resumes(void **state)
{
    (void)state;
    long states = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        unlink(path);
        assert_int_equal(open_file(), 0);
        uint32_t was = history_epoch();
        struct program p = {.rng = seed, .clock = 1000};
        struct op o;
        for (uint32_t i = 0; i < 25000; i++) {
            next_op(&p, &o);
            if (!room_for(&o))
                break;
            apply(&o);
            uint64_t bytes = loop_stats.history_bytes, entries = loop_stats.history_entries;
            const char *why = recover();            /* as history_init does with the file */
            if (why)
                fail_msg("seed %llu, after op %u: the file is refused: %s",
                         (unsigned long long)seed, i, why);
            assert_int_equal(loop_stats.history_bytes, bytes);
            assert_int_equal(loop_stats.history_entries, entries);
            states++;
        }
        history_free();
        assert_int_equal(open_file(), 0);
        assert_int_equal(history_epoch(), was);
        history_free();
    }
    printf("%ld states, each resumed\n", states);
}

/* Where the message seq of slot is kept: its position + 1, 0: nowhere. */
static uint64_t where_kept(uint32_t slot, uint32_t seq)
{
    for (uint64_t pos = head; pos < tail;) {
        const struct entry *e = entry_at(pos);
        if (to_end(pos) < sizeof *e || e->len == FILLER) {
            pos += to_end(pos);
            continue;
        }
        if (e->uid == slot && e->seq == seq)
            return pos + 1;
        pos += entry_size(e);
    }
    return 0;
}

/* The position after the head's entry (or the rest of a lap). */
static uint64_t after_head(void)
{
    const struct entry *e = entry_at(head);
    return to_end(head) < sizeof *e || e->len == FILLER ? head + to_end(head)
                                                        : head + entry_size(e);
}

/* A message moved ahead while a multicast is given (past its payload),
 * before its uid's entry of the multicast, and moved again once the
 * payload is out: its next entry, kept no more (its payload gone), was
 * not mended to follow it. A restart there resumes all the same. */
static void a_message_moved_past_the_multicast_after_it_resumes(void **state)
{
    (void)state;
    static char buf[400];
    memset(buf, 'm', sizeof buf);
    unlink(path);
    assert_int_equal(open_file(), 0);
    uint32_t was = history_epoch();
    fake_now = 1000;
    /* uid 2 (200 bytes a message, 232 kept) fills the arena until the tail
     * is 600 to 832 bytes from a lap's end: all that follows fits in the
     * next lap's rest. */
    int i = 0;
    do
        history_append(2, buf, 200, 0);
    while (++i < 1000 && !(tail > ARENA && to_end(tail) >= 600 && to_end(tail) < 832));
    history_append(1, buf, 8, 0);
    uint64_t a = uids[1].newest - 1;
    /* uid 2 goes on until the entry before uid 1's is at the head; an
     * append pushes it out, leaving room for the multicast's payload
     * alone. */
    for (i = 0; i < 1000 && after_head() != a; i++)
        history_append(2, buf, 200, 0);
    assert_int_equal(uids[1].newest, a + 1);
    history_append(4, buf, (uint32_t)(ARENA - (tail - head)) + 232 - 40 - 32, 0);
    assert_int_equal(head, a);
    assert_int_equal(ARENA - (tail - head), 40);
    uint64_t shared = history_share(buf, 8, 0);
    history_append_shared(3, shared);          /* uid 1's message moves ahead, past the payload */
    history_append_shared(1, shared);          /* then its message 2 */
    uint64_t moved = where_kept(1, 1);
    assert_true(moved > shared && moved - 1 > a && uids[1].newest > moved);
    /* uid 2's small messages push out the payload, then move uid 1's
     * message 1 again. */
    uint64_t moves = loop_stats.history_moved;
    for (i = 0; i < 2000 && head < moved; i++)
        history_append(2, buf, 8, 0);
    assert_true(shared - 1 < head && uids[1].newest - 1 >= head);
    assert_true(where_kept(1, 1) > moved && loop_stats.history_moved > moves);
    history_free();
    assert_int_equal(open_file(), 0);
    assert_int_equal(history_epoch(), was);    /* resumed */
    assert_int_equal(history_last_seq(1), 2);
    history_since(1, 1, was, 1, &rep.r, 64);   /* message 2 is lost with its payload */
    assert_true(rep.r.gap);
    history_since(1, 1, was, 2, &rep.r, 64);
    assert_false(rep.r.gap);
    assert_int_equal(rep.r.n, 0);
    history_free();
}

/* ------------------------------------------------------ refused and kept */

/* A file of n ops of seed's program, closed: its epoch. */
static uint32_t file_of(uint64_t seed, uint32_t n)
{
    unlink(path);
    assert_int_equal(open_file(), 0);
    struct program p = {.rng = seed, .clock = 1000};
    struct op o;
    for (uint32_t i = 0; i < n; i++) {
        next_op(&p, &o);
        apply(&o);
    }
    uint32_t e = history_epoch();
    history_free();
    return e;
}

/* file_of, and each uid's last id in it. */
static uint32_t file_and_lasts(uint64_t seed, uint32_t n, uint32_t last[UIDS + 1])
{
    uint32_t was = file_of(seed, n);
    assert_int_equal(open_file(), 0);
    for (uint32_t u = 1; u <= UIDS; u++)
        last[u] = history_last_seq(u);
    history_free();
    return was;
}

/* Opened again, it was started afresh: another epoch, no id given yet. */
static void started_afresh(uint32_t was)
{
    assert_int_equal(open_file(), 0);
    assert_int_not_equal(history_epoch(), was);
    for (uint32_t u = 1; u <= UIDS; u++)
        assert_int_equal(history_last_seq(u), 0);
    assert_int_equal(loop_stats.history_entries, 0);
    history_free();
}

/* Opened again, each uid's last id is what it was. */
static void resumed(uint32_t was, const uint32_t last[UIDS + 1])
{
    assert_int_equal(open_file(), 0);
    assert_int_equal(history_epoch(), was);
    for (uint32_t u = 1; u <= UIDS; u++)
        assert_int_equal(history_last_seq(u), last[u]);
    history_free();
}

/* The oldest uid entry (a message of its own) of a file of n ops, open. */
static struct entry *oldest_message(void)
{
    for (uint64_t pos = head; pos < tail;) {
        struct entry *e = entry_at(pos);
        if (to_end(pos) < sizeof *e || e->len == FILLER) {
            pos += to_end(pos);
            continue;
        }
        if (e->uid && !(e->len & SHARED_REF) && (e->len & LEN_BYTES) > 0)
            return e;
        pos += entry_size(e);
    }
    fail_msg("no message kept");
    return NULL;
}

static void a_damaged_file_is_started_afresh(void **state)
{
    (void)state;
    for (int damage = 0; damage < 7; damage++) {
        uint32_t was = file_of(7, 5000);
        assert_int_equal(open_file(), 0);
        switch (damage) {
        case 0:                                     /* a byte of a message */
            ((char *)(oldest_message() + 1))[0] ^= 1;
            break;
        case 1:                                     /* an id */
            oldest_message()->seq ^= 4;
            break;
        case 2:                                     /* a link */
            oldest_message()->next = 3;
            break;
        case 3:                                     /* the epoch in the head */
            hd->epoch ^= 1;
            break;
        case 4:                                     /* a uid's newest past the tail */
            uids[5].newest = tail + 9;
            break;
        case 5:                                     /* the tail before the head */
            atomic_store(&hd->tail, head - 8);
            break;
        default:                                    /* another boot's, its head whole */
            hd->boot_id[0] ^= 1;
            hd->check = history_head_check(hd);
        }
        history_free();
        started_afresh(was);
    }
    /* Cut short. */
    uint32_t was = file_of(7, 100);
    assert_int_equal(truncate(path, ARENA), 0);
    started_afresh(was);
}

static void a_file_of_another_node_or_size_is_started_afresh(void **state)
{
    (void)state;
    uint32_t was = file_of(9, 1000);
    struct history_config other = config_of(path, "other@localhost");
    assert_int_equal(history_init(&other), 0);
    assert_int_not_equal(history_epoch(), was);
    assert_int_equal(history_last_seq(1), 0);
    history_free();
    was = file_of(9, 1000);
    other = config_of(path, "test@localhost");
    other.bytes = 2 * ARENA;
    assert_int_equal(history_init(&other), 0);
    assert_int_not_equal(history_epoch(), was);
    history_free();
    other.max_users = UIDS + 1;
    assert_int_equal(history_init(&other), 0);      /* and made for these sizes */
    history_free();
}

static void a_stopped_history_resumes_and_goes_on(void **state)
{
    (void)state;
    uint32_t last[UIDS + 1], was = file_and_lasts(11, 3000, last);
    assert_int_equal(open_file(), 0);
    assert_true(loop_stats.history_entries > 0);
    history_append(3, "more", 4, 1);
    last[3]++;
    history_free();
    resumed(was, last);
    assert_int_equal(open_file(), 0);
    uint32_t len, seq;
    int binary;
    history_since(3, 1, was, last[3] - 1, &rep.r, 64);
    assert_int_equal(rep.r.n, 1);
    assert_memory_equal(history_message(rep.r.pos[0], &len, &seq, &binary), "more", 4);
    assert_int_equal(binary, 1);
    history_free();
}

static void ids_alone_are_kept_too(void **state)
{
    (void)state;
    struct history_config ids = config_of(path, "test@localhost");
    ids.per_uid = ids.per_topic = 0;                /* --history 0: ids, no messages */
    unlink(path);
    assert_int_equal(history_init(&ids), 0);
    for (uint32_t i = 0; i < 5; i++)
        history_append(4, "x", 1, 0);
    uint32_t was = history_epoch();
    history_free();
    assert_int_equal(history_init(&ids), 0);
    assert_int_equal(history_epoch(), was);
    assert_int_equal(history_append(4, "y", 1, 0), 6);
    history_free();
    /* With messages kept, the file is another size: started afresh. */
    assert_int_equal(open_file(), 0);
    assert_int_not_equal(history_epoch(), was);
    assert_int_equal(history_last_seq(4), 0);
    history_free();
}

static void a_file_in_use_or_not_a_history_is_not_used(void **state)
{
    (void)state;
    uint32_t last[UIDS + 1], was = file_and_lasts(13, 10, last);
    /* Another process has it open: refused, the file untouched. */
    memset(page, 0, sizeof *page);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (open_file() != 0)
            _exit(3);
        atomic_store(&page->ready, 1);
        for (;;)
            pause();
    }
    wait_ready();
    assert_int_equal(open_file(), -1);
    reap(pid);
    resumed(was, last);
    /* Open to other users: refused, until it is not. */
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(open_file(), -1);
    assert_int_equal(chmod(path, 0600), 0);
    resumed(was, last);
    /* Something else than a history: refused and left as it is. */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("not a history\n", f);
    fclose(f);
    assert_int_equal(open_file(), -1);
    char text[32] = "";
    f = fopen(path, "r");
    assert_non_null(fgets(text, sizeof text, f));
    fclose(f);
    assert_string_equal(text, "not a history\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(killed_at_random_times_resumes_between_two_calls, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(killed_at_every_instruction_of_each_way_an_op_goes_resumes,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(restarted_between_any_two_calls_resumes, setup, teardown),
        cmocka_unit_test_setup_teardown(a_message_moved_past_the_multicast_after_it_resumes, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_stopped_history_resumes_and_goes_on, setup, teardown),
        cmocka_unit_test_setup_teardown(ids_alone_are_kept_too, setup, teardown),
        cmocka_unit_test_setup_teardown(a_damaged_file_is_started_afresh, setup, teardown),
        cmocka_unit_test_setup_teardown(a_file_of_another_node_or_size_is_started_afresh, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(a_file_in_use_or_not_a_history_is_not_used, setup,
                                        teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
