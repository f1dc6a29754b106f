/* SPDX-License-Identifier: Apache-2.0 */
/* The history in a --history-file (src/core/history.c, included for its
 * clock; history_map.c and history_check.c as built): a child process
 * writing messages is killed with SIGKILL, at random times and at chosen
 * instructions of an append (single-stepped with ptrace), and the parent
 * opens the file as the next run would. It must resume with the same
 * epoch, and what each uid's returning client can get must be what the
 * history held before the interrupted call or after it: the same ids, the
 * same bytes, no message given without its predecessors, none lost
 * beyond what the call itself would push out. The parent knows both by
 * running the same program in memory. Damaged and foreign files are
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
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../../src/core/history.c"
#include "kill_steps.h"

#define UIDS 12
#define PER_UID 12
#define ARENA 16384             /* small: it wraps, moves and pushes out all the time */
#define TTL 30
#define SEQ_MAX 65536           /* ids per uid the model holds; the program stops before */
#define LEN_MAX 3000
/* Instructions of an op a child is killed after, at most: each kill steps
 * the child there one instruction at a time (~10 us a step; sanitized
 * code has 5 times the instructions). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KILL_POINTS 30
#else
#define KILL_POINTS 80
#endif

static uint32_t fake_now;
static uint32_t fake_clock(void) { return fake_now; }

static char path[256];

static struct history_config config_of(const char *file, const char *node)
{
    return (struct history_config){.max_users = UIDS, .per_uid = PER_UID, .ttl_s = TTL,
                                   .bytes = ARENA, .file = file, .node = node};
}

static int open_file(void)
{
    struct history_config c = config_of(path, "test@localhost");
    return history_init(&c);
}

/* ------------------------------------------------------------ the program */

/* A program of calls, the same wherever it runs: appends of 1..200 bytes
 * (at times up to 3,000) to 12 uids, multicasts (one payload, then one
 * call per uid), and the clock moving. Each op is made from the random
 * state alone, so the parent knows op N without running ops 1..N. */
enum { OP_CLOCK, OP_APPEND, OP_SHARE, OP_SHARED };

struct op {
    int kind;
    uint32_t uid, len, tag, clock;
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

static void next_op(struct program *p, struct op *o)
{
    *o = (struct op){.kind = OP_CLOCK};
    if (p->bits) {
        uint32_t u = (uint32_t)__builtin_ctz(p->bits);
        p->bits &= p->bits - 1;
        *o = (struct op){.kind = OP_SHARED, .uid = u + 1};
    } else {
        uint64_t r = next_rand(p);
        switch (r % 16) {
        case 0:
            p->clock += (uint32_t)(r >> 8) % 4;
            break;
        case 1:
        case 2:
            *o = (struct op){.kind = OP_SHARE, .len = 1 + (uint32_t)(r >> 8) % 120, .tag = ++p->tags};
            p->bits = (uint32_t)(r >> 20) & ((1u << UIDS) - 1);
            break;
        default:
            *o = (struct op){.kind = OP_APPEND, .uid = 1 + (uint32_t)(r >> 8) % UIDS,
                             .len = (r >> 20) % 8 == 0 ? 500 + (uint32_t)(r >> 24) % (LEN_MAX - 500)
                                                       : 1 + (uint32_t)(r >> 24) % 200};
        }
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

/* The model: what each uid's message of each id was (filled by the
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

/* A uid's history as its returning clients find it: the last id, and the
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
        history_since(uid, 1, history_epoch(), from, &rep.r, 64);
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

static void observe_all(struct seen out[UIDS + 1], uint32_t now)
{
    uint32_t was = fake_now;
    fake_now = now;
    for (uint32_t u = 1; u <= UIDS; u++)
        out[u] = observe(u);
    fake_now = was;
}

static int in(uint32_t seq, const struct seen *s) { return seq >= s->first && seq <= s->last; }

/* The file after a kill during op k + 1 (k ops done) against the program
 * run in memory to k and k + 1 ops: same epoch, and per uid what lies
 * between (an append's push-outs may be done and its message not in). */
static void check_resumed(uint64_t seed, uint32_t k, uint32_t epoch_was)
{
    struct seen before[UIDS + 1], after[UIDS + 1], got[UIDS + 1], again[UIDS + 1];
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
    uint32_t now = o.clock;
    observe_all(before, now);
    apply(&o);
    observe_all(after, now);
    recording = 0;
    history_free();

    assert_int_equal(open_file(), 0);
    assert_int_equal(history_epoch(), epoch_was);           /* resumed, not started afresh */
    observe_all(got, now);
    history_free();
    assert_int_equal(open_file(), 0);                       /* a stopped run resumes alike */
    assert_int_equal(history_epoch(), epoch_was);
    observe_all(again, now);
    for (uint32_t u = 1; u <= UIDS; u++) {
        assert_true(got[u].last == before[u].last || got[u].last == after[u].last);
        for (uint32_t seq = 1; seq <= after[u].last; seq++) {
            if (in(seq, &got[u]))
                assert_true(in(seq, &before[u]) || in(seq, &after[u]));
            if (in(seq, &after[u]) && seq <= before[u].last)
                assert_true(in(seq, &got[u]));
        }
        assert_memory_equal(&got[u], &again[u], sizeof got[u]);
    }
    /* It goes on: each uid's next message comes next, from any id. */
    for (uint32_t u = 1; u <= UIDS; u++) {
        assert_int_equal(history_append(u, "next", 4, 0), got[u].last + 1);
        history_since(u, 1, epoch_was, got[u].last, &rep.r, 64);
        assert_false(rep.r.gap);
        assert_int_equal(rep.r.n, 1);
    }
    history_free();
}

/* ------------------------------------------------------------ the children */

struct shared_page {
    _Atomic uint32_t ready;
    _Atomic uint32_t done;      /* ops the child finished */
    uint32_t epoch;
    int trace_refused;
};

static struct shared_page *page;

/* The child: a new file, ops_before ops, then (traced) a stop before and
 * after the next op, else ops until killed. Never returns. */
static void child(uint64_t seed, uint32_t ops_before, int traced)
{
    if (traced && ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0) {
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
    for (uint32_t i = 0; !traced || i < ops_before; i++) {
        struct program was = p;
        next_op(&p, &o);
        if (!room_for(&o)) {
            p = was;
            break;
        }
        apply(&o);
        atomic_store(&page->done, i + 1);
    }
    if (traced) {
        next_op(&p, &o);
        raise(SIGSTOP);
        apply(&o);
        raise(SIGSTOP);
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
    page = mmap(NULL, sizeof *page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    model = calloc(UIDS + 1, sizeof *model);
    assert_true(page != MAP_FAILED && model);
    log_set_level(LOG_ERROR);
    now_s = fake_clock;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    history_free();
    unlink(path);
    free(model);
    munmap(page, sizeof *page);
    return 0;
}

static void killed_at_random_times_resumes_between_two_calls(void **state)
{
    (void)state;
    /* HISTORY_SEED=N runs an earlier run's programs again (the kills land
     * where they land). */
    const char *again = getenv("HISTORY_SEED");
    uint64_t seed0 = again ? strtoull(again, NULL, 10) : (uint64_t)time(NULL);
    printf("seed %llu\n", (unsigned long long)seed0);
    /* HISTORY_KILLS=N: that many kills (60 in make test; one of about
     * 3,600 has been seen to leave a file the restart refused, and so a
     * gap, where it should resume: a defect not found yet, run
     * HISTORY_KILLS=3000 to look for it). */
    const char *kills_env = getenv("HISTORY_KILLS");
    int kills = kills_env ? atoi(kills_env) : 60;
    double end = seconds_now() + (kills_env ? 3600 : 20);   /* bounded: the kills, or the time */
    int runs = 0;
    for (; runs < kills && (runs < 5 || seconds_now() < end); runs++) {
        uint64_t seed = seed0 + (uint64_t)runs * 7919;
        memset(page, 0, sizeof *page);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            child(seed, 0, 0);
        wait_ready();
        usleep((useconds_t)(seed % 3000));
        reap(pid);
        memset(model, 0, (UIDS + 1) * sizeof *model);
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
        child(seed, k, 1);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (page->trace_refused)
        return 0;
    assert_true(WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP);
    return pid;
}

/* The first op at or after k whose run moves an entry ahead (a move is the
 * longest way an append goes), of a kind. */
static uint32_t op_that_moves(uint64_t seed, uint32_t k, int kind)
{
    struct program p = {.rng = seed, .clock = 1000};
    struct op o;
    struct history_config mem = config_of(NULL, NULL);
    assert_int_equal(history_init(&mem), 0);
    for (uint32_t i = 0; i < 100000; i++) {
        next_op(&p, &o);
        uint64_t moved = loop_stats.history_moved, evicted = loop_stats.history_evicted;
        apply(&o);
        if (i >= k && o.kind == kind && o.len <= 200 && loop_stats.history_moved > moved &&
            loop_stats.history_evicted > evicted) {
            history_free();
            return i;
        }
    }
    fail_msg("no op of kind %d moves", kind);
    return 0;
}

static void killed_at_each_instruction_of_an_append_resumes(void **state)
{
    (void)state;
    uint64_t seed = 42;
    /* An append that moves and pushes out, a multicast's uid entry that
     * does, and a multicast's payload. */
    uint32_t ops[] = {op_that_moves(seed, 3000, OP_APPEND), op_that_moves(seed, 3000, OP_SHARED),
                      op_that_moves(seed, 3000, OP_SHARE)};
    for (size_t t = 0; t < sizeof ops / sizeof ops[0]; t++) {
        pid_t pid = stopped_before(seed, ops[t]);
        if (!pid)
            skip();                              /* ptrace is not allowed here */
        long n = step(pid, 200000);
        reap(pid);
        if (n == 200000)
            skip();                              /* an emulator (valgrind): too slow to step */
        /* Every instruction when few, else KILL_POINTS spread over all of them. */
        long stride = n / KILL_POINTS + 1;
        for (long at = seed % (unsigned long)stride; at <= n; at += stride) {
            pid = stopped_before(seed, ops[t]);
            assert_true(pid > 0);
            step(pid, at);
            reap(pid);
            memset(model, 0, (UIDS + 1) * sizeof *model);
            check_resumed(seed, ops[t], page->epoch);
        }
        printf("op %u: %ld instructions, killed after %ld of them in turn\n", ops[t], n,
               stride == 1 ? n + 1 : n / stride + 1);
    }
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
    ids.per_uid = 0;                                /* --history 0: ids, no messages */
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
        cmocka_unit_test_setup_teardown(killed_at_each_instruction_of_an_append_resumes, setup,
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
