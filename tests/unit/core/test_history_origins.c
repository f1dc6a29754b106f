/* SPDX-License-Identifier: Apache-2.0 */
/* Where the masters' numbered streams stand in a --history-file
 * (src/core/history_origins.c; history.c included for its entries): a
 * child applying numbered commands as the loop does (core/dispatch.c:
 * unicasts, multicasts that list a uid again, gaps) is killed with
 * SIGKILL, at random times and at chosen instructions of a multicast
 * (single-stepped with ptrace); publishes to topics (CMD_TOPIC: the list is
 * the topic's history slot, after the uids') and gaps naming topic slots
 * among them; the parent opens the file as the next run
 * would and, as a master told where its stream stands, sends again every
 * command past the last number the file holds all of. Each uid must then
 * and topic slot hold each message listed for it once, and one id for each gap: nothing
 * the file had is applied twice, nothing it lacked is lost. Also: a
 * master's new run on another slot replaces its older record, memory
 * keeps none, and a file of the previous format is taken.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../../src/core/history.c"
#include "core/cmd.h"
#include "core/history_origins.h"
#include "kill_steps.h"

#define UIDS 12
#define TOPICS 2
#define SLOTS (UIDS + TOPICS)    /* the uids', then the topics' */
#define CMDS 20000
#define LIST_MAX 12
#define ORIGINS 2
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KILL_POINTS 30
#else
#define KILL_POINTS 80
#endif

/* Two masters' streams, on slots of their own. */
static const uint32_t slot_of[ORIGINS] = {0, 5};
static const uint64_t master_hash[ORIGINS] = {0x1234567890abcdefull, 0xfedcba0987654321ull};
static const uint64_t master_inc[ORIGINS] = {1000, 2000};

static char path[256];

static int open_file(void)
{
    struct history_config c = {.max_users = UIDS, .max_topics = TOPICS, .per_uid = 100000,
                               .per_topic = 100000, .ttl_s = 1000000, .bytes = 8u << 20,
                               .file = path, .node = "test@localhost"};
    if (history_init(&c) != 0)
        return -1;
    history_origins_start(SLOTS);
    return 0;
}

static void close_file(void)
{
    history_origins_stop();
    history_free();
}

/* ------------------------------------------------------------ the program */

/* A numbered command of a master's stream: its numbers end at last. */
struct ncmd {
    uint8_t origin, kind, n;
    uint64_t last;
    uint32_t uids[LIST_MAX];
};

static struct ncmd *prog;

/* The same program for a seed wherever it runs: 6 in 10 unicasts (to a
 * uid or, 1 in 7, a publish to a topic), 3 multicasts of 2..12 uids drawn
 * at random (so some listed again), 1 gap of 1..4 numbers for 1..4 uids
 * or topics; each master numbering its own. */
static void make_program(uint64_t seed)
{
    uint64_t next[ORIGINS] = {0, 0}, z = seed;
    for (uint32_t j = 0; j < CMDS; j++) {
        z += 0x9E3779B97F4A7C15ull;
        uint64_t r = z;
        r = (r ^ (r >> 30)) * 0xBF58476D1CE4E5B9ull;
        r = (r ^ (r >> 27)) * 0x94D049BB133111EBull;
        r ^= r >> 31;
        struct ncmd *c = &prog[j];
        c->origin = (uint8_t)(r & 1);
        uint32_t what = (uint32_t)(r >> 1) % 10;
        c->kind = what == 0 ? CMD_GAP : what <= 3 ? CMD_MULTICAST : CMD_UNICAST;
        c->n = (uint8_t)(c->kind == CMD_UNICAST ? 1 : c->kind == CMD_GAP ? 1 + (r >> 8) % 4
                                                                          : 2 + (r >> 8) % 11);
        for (uint32_t i = 0; i < c->n; i++)
            c->uids[i] = 1 + (uint32_t)((r >> (12 + 4 * i)) ^ (r >> (40 + i))) %
                                 (c->kind == CMD_MULTICAST ? UIDS : SLOTS);
        if (c->kind == CMD_UNICAST && c->uids[0] > UIDS)
            c->kind = CMD_TOPIC;
        next[c->origin] += c->kind == CMD_GAP ? 1 + (r >> 60) % 4 : 1;
        c->last = next[c->origin];
    }
}

/* Command j applied as core/dispatch.c applies a numbered command. */
static void apply_cmd(uint32_t j)
{
    const struct ncmd *c = &prog[j];
    uint32_t k = slot_of[c->origin];
    char body[16];
    uint32_t len = (uint32_t)snprintf(body, sizeof body, "m%u", j);
    uint32_t from = history_origin_begin(k, c->last, c->kind, c->n);
    if (c->kind == CMD_UNICAST || c->kind == CMD_TOPIC) {
        if (!from) {
            history_origin_at(k, 0, c->uids[0]);
            history_append(c->uids[0], body, len, 0);
        }
    } else {
        uint64_t shared = c->kind == CMD_MULTICAST ? history_share(body, len, 0) : 0;
        uint32_t seen = 0;
        for (uint32_t i = 0; i < c->n; i++) {
            uint32_t uid = c->uids[i], was = seen & (1u << uid);
            seen |= 1u << uid;
            if (i < from)
                continue;
            history_origin_at(k, i, uid);
            if (was)
                continue;
            if (c->kind == CMD_MULTICAST)
                history_append_shared(uid, shared);
            else
                history_skip(uid);
        }
    }
    history_origin_end(k, c->last);
}

/* ------------------------------------------------------------ the children */

struct shared_page {
    _Atomic uint32_t ready;
    _Atomic uint32_t done;      /* commands the child finished */
    uint32_t epoch;
    int trace_refused;
};

static struct shared_page *page;

/* The child: a new file, both masters' runs, then the commands until
 * killed; traced, it stops before command stop_at and after it. */
static void child(int traced, uint32_t stop_at)
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
    for (int o = 0; o < ORIGINS; o++)
        history_origin_run(slot_of[o], master_hash[o], master_inc[o], 0);
    for (uint32_t t = 1; t <= TOPICS; t++)
        history_topic_open(UIDS + t, t == 1 ? "t1" : "t2", 2);
    atomic_store(&page->ready, 1);
    for (uint32_t j = 0; j < CMDS; j++) {
        if (traced && j == stop_at)
            raise(SIGSTOP);
        apply_cmd(j);
        atomic_store(&page->done, j + 1);
        if (traced && j == stop_at)
            raise(SIGSTOP);
    }
    for (;;)
        pause();
}

/* ------------------------------------------------------------ the check */

static uint8_t (*got)[CMDS];        /* per uid, how often each command's message is in */
static int refused;                 /* files the history itself refused (test_history_file's) */

/* The file after a kill: resumed, each master told where its stream
 * stands sends the rest again, and then each uid has every message listed
 * for it once and an id for every gap once. */
static void check_resumed(uint32_t epoch_was)
{
    assert_int_equal(open_file(), 0);
    if (history_epoch() != epoch_was) {
        refused++;               /* a history the restart refused: a new epoch, not ours */
        close_file();
        return;
    }
    uint64_t applied[ORIGINS];
    for (int o = 0; o < ORIGINS; o++) {
        uint64_t hash, inc;
        assert_true(history_origin_found(slot_of[o], &hash, &inc, &applied[o]));
        assert_int_equal(hash, master_hash[o]);
        assert_int_equal(inc, master_inc[o]);
    }
    for (uint32_t j = 0; j < CMDS; j++)
        if (prog[j].last > applied[prog[j].origin])
            apply_cmd(j);
    memset(got, 0, (SLOTS + 1) * sizeof *got);
    for (uint32_t u = 1; u <= SLOTS; u++) {
        const struct entry *e;
        uint32_t messages = 0;
        for (uint64_t p = uids[u].newest; (e = kept_entry(p, u)) != NULL;
             p = entry_link(p - 1, e->prev)) {
            uint32_t len, seq, j;
            int binary;
            const char *m = history_message(p - 1, &len, &seq, &binary);
            assert_true(len > 1 && m[0] == 'm');
            j = (uint32_t)strtoul(m + 1, NULL, 10);
            assert_true(j < CMDS);
            got[u][j]++;
            messages++;
        }
        uint32_t want_messages = 0, want_ids = 0;
        for (uint32_t j = 0; j < CMDS; j++) {
            const struct ncmd *c = &prog[j];
            int listed = 0;
            for (uint32_t i = 0; i < c->n; i++)
                listed |= c->uids[i] == u;
            if (!listed)
                continue;
            want_ids++;
            if (c->kind != CMD_GAP) {
                want_messages++;
                if (got[u][j] != 1)
                    fail_msg("slot %u has command %u's message %u times", u, j, got[u][j]);
            }
        }
        assert_int_equal(messages, want_messages);
        assert_int_equal(history_last_seq(u), want_ids);
    }
    close_file();
    /* Opened again, each stream stands at its end. */
    assert_int_equal(open_file(), 0);
    for (int o = 0; o < ORIGINS; o++) {
        uint64_t hash, inc, at, end = 0;
        for (uint32_t j = 0; j < CMDS; j++)
            if (prog[j].origin == o)
                end = prog[j].last;
        assert_true(history_origin_found(slot_of[o], &hash, &inc, &at));
        assert_int_equal(at, end);
    }
    close_file();
}

/* ------------------------------------------------------------ the tests */

static int setup(void **state)
{
    (void)state;
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(path, sizeof path, "%s/httpdcnode-test-origins-%d", dir, (int)getpid());
    page = mmap(NULL, sizeof *page, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    prog = calloc(CMDS, sizeof *prog);
    got = calloc(SLOTS + 1, sizeof *got);
    assert_true(page != MAP_FAILED && prog && got);
    log_set_level(LOG_ERROR);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    close_file();
    unlink(path);
    free(prog);
    free(got);
    munmap(page, sizeof *page);
    return 0;
}

static void killed_at_random_times_applies_each_once(void **state)
{
    (void)state;
    uint64_t seed0 = kill_seed();
    double end = seconds_now() + 20;
    int runs = 0, mid = 0;
    for (; runs < 40 && (runs < 5 || seconds_now() < end); runs++) {
        uint64_t seed = seed0 + (uint64_t)runs * 7919;
        make_program(seed);
        memset(page, 0, sizeof *page);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
            child(0, 0);
        for (int i = 0; i < 50000 && !atomic_load(&page->ready); i++)
            usleep(100);
        assert_true(atomic_load(&page->ready));
        usleep((useconds_t)(seed % 8000));
        reap(pid);
        mid += atomic_load(&page->done) < CMDS;
        check_resumed(page->epoch);
    }
    printf("%d kills (%d before the last command), each message applied once; %d files "
           "refused by the history\n", runs, mid, refused);
}

/* A child stopped before command j; 0 when tracing is not allowed. */
static pid_t stopped_before(uint32_t j)
{
    memset(page, 0, sizeof *page);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        child(1, j);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (page->trace_refused)
        return 0;
    assert_true(WIFSTOPPED(st) && WSTOPSIG(st) == SIGSTOP);
    return pid;
}

static void killed_at_each_instruction_of_a_multicast_applies_each_once(void **state)
{
    (void)state;
    make_program(42);
    /* A multicast of many uids, one listed again, and a gap. */
    uint32_t picks[2] = {0, 0};
    for (uint32_t j = 1000; j < CMDS && (!picks[0] || !picks[1]); j++) {
        const struct ncmd *c = &prog[j];
        uint32_t seen = 0, again = 0;
        for (uint32_t i = 0; i < c->n; i++) {
            again |= (seen >> c->uids[i]) & 1;
            seen |= 1u << c->uids[i];
        }
        if (!picks[0] && c->kind == CMD_MULTICAST && c->n >= 8 && again)
            picks[0] = j;
        if (!picks[1] && c->kind == CMD_GAP && c->n >= 3)
            picks[1] = j;
    }
    assert_true(picks[0] && picks[1]);
    for (int t = 0; t < 2; t++) {
        pid_t pid = stopped_before(picks[t]);
        if (!pid)
            skip();                              /* ptrace is not allowed here */
        long n = step(pid, 400000);
        reap(pid);
        if (n == 400000)
            skip();                              /* an emulator (valgrind): too slow to step */
        long stride = n / KILL_POINTS + 1;
        for (long at = 0; at <= n; at += stride) {
            pid = stopped_before(picks[t]);
            assert_true(pid > 0);
            step(pid, at);
            reap(pid);
            check_resumed(page->epoch);
        }
        printf("command %u (%s of %u uids): %ld instructions, killed after %ld of them in "
               "turn\n", picks[t], t ? "a gap" : "a multicast", prog[picks[t]].n, n,
               n / stride + 1);
    }
    assert_int_equal(refused, 0);
}

static void a_new_run_replaces_the_older_record(void **state)
{
    (void)state;
    unlink(path);
    assert_int_equal(open_file(), 0);
    history_origin_run(0, 77, 5, 0);
    history_origin_run(1, 88, 9, 0);
    assert_int_equal(history_origin_begin(0, 3, CMD_UNICAST, 1), 0);
    history_origin_at(0, 0, 2);
    history_append(2, "x", 1, 0);
    history_origin_end(0, 3);
    history_origin_run(3, 77, 6, 10);       /* the master's next run, on another slot */
    close_file();
    assert_int_equal(open_file(), 0);
    uint64_t hash, inc, applied;
    assert_false(history_origin_found(0, &hash, &inc, &applied));
    assert_true(history_origin_found(3, &hash, &inc, &applied));
    assert_true(hash == 77 && inc == 6 && applied == 10);
    assert_true(history_origin_found(1, &hash, &inc, &applied));
    assert_true(hash == 88 && inc == 9 && applied == 0);
    close_file();
}

static void memory_keeps_none(void **state)
{
    (void)state;
    struct history_config c = {.max_users = UIDS, .per_uid = 10, .ttl_s = 100,
                               .bytes = 1u << 16};
    assert_int_equal(history_init(&c), 0);
    history_origins_start(UIDS);
    assert_null(history_origin_records());
    history_origin_run(0, 77, 5, 0);
    assert_int_equal(history_origin_begin(0, 3, CMD_UNICAST, 1), 0);
    uint64_t hash, inc, applied;
    assert_false(history_origin_found(0, &hash, &inc, &applied));
    close_file();
}

static void a_file_of_the_previous_format_is_taken(void **state)
{
    (void)state;
    unlink(path);
    assert_int_equal(open_file(), 0);
    history_append(4, "kept", 4, 0);
    uint32_t was = history_epoch();
    hd->version = 2;                        /* as a build before the origins left it */
    hd->check = history_head_check(hd);
    close_file();
    assert_int_equal(open_file(), 0);
    assert_int_equal(history_epoch(), was);
    assert_int_equal(history_last_seq(4), 1);
    assert_int_equal(hd->version, HISTORY_VERSION);
    assert_int_equal(hd->check, history_head_check(hd));
    close_file();
    assert_int_equal(open_file(), 0);       /* and is of this one now */
    assert_int_equal(history_epoch(), was);
    close_file();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(killed_at_random_times_applies_each_once, setup, teardown),
        cmocka_unit_test_setup_teardown(killed_at_each_instruction_of_a_multicast_applies_each_once,
                                        setup, teardown),
        cmocka_unit_test_setup_teardown(a_new_run_replaces_the_older_record, setup, teardown),
        cmocka_unit_test_setup_teardown(memory_keeps_none, setup, teardown),
        cmocka_unit_test_setup_teardown(a_file_of_the_previous_format_is_taken, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
