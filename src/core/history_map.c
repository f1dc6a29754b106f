/* SPDX-License-Identifier: Apache-2.0 */
/* Where the history lives: see history_map.h.
 *
 * One mapping, laid out as history_layout.h says: the head's page, the
 * slots (uids, then topics), the topics' names, the arena, the room. In memory it is anonymous; with a file it is
 * the file mapped shared, its whole size reserved (posix_fallocate), so
 * that a full tmpfs is one clear line at start and never a SIGBUS later.
 * Nothing is flushed to a disk: the file outlives the process, not the
 * machine (which is why a file from an earlier boot is started afresh). */
#include "core/history_map.h"
#include "lib/log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* What the map was asked for, to start it afresh. */
static struct {
    char node[HISTORY_NODE_MAX];
    char boot_id[40];
    uint32_t max_users;
    uint32_t max_topics;
    uint64_t arena_size;
    size_t room_size;
} want;

static size_t page_up(uint64_t n) { return (size_t)((n + 4095) & ~(uint64_t)4095); }

static size_t names_at(void)
{
    uint64_t slots = (uint64_t)want.max_users + want.max_topics + 1;
    return HISTORY_HEAD_BYTES + page_up(slots * sizeof(struct uid_history));
}

static size_t arena_at(void)
{
    return names_at() + page_up((uint64_t)want.max_topics * sizeof(struct topic_name));
}

static size_t room_at(void) { return arena_at() + page_up(want.arena_size); }

static size_t total_bytes(void) { return room_at() + page_up(want.room_size); }

static void point(struct history_map *m, char *base)
{
    m->head = (struct history_head *)base;
    m->uids = (struct uid_history *)(base + HISTORY_HEAD_BYTES);
    m->names = (struct topic_name *)(base + names_at());
    m->arena = base + arena_at();
    m->room = base + room_at();
    m->bytes = total_bytes();
}

/* A new head: who made it, a new epoch; its check last, so that a head
 * half written is found damaged. The state after it is all zero. */
static int make_head(struct history_map *m)
{
    struct history_head *h = m->head;
    uint32_t epoch;
    if (getrandom(&epoch, sizeof epoch, 0) != sizeof epoch) {
        log_msg(LOG_ERROR, "cannot draw the message id epoch: %m");
        return -1;
    }
    memcpy(h->magic, HISTORY_MAGIC, sizeof h->magic);
    h->version = HISTORY_VERSION;
    h->max_users = want.max_users;
    h->max_topics = want.max_topics;
    h->arena_size = want.arena_size;
    memcpy(h->node, want.node, sizeof h->node);
    memcpy(h->boot_id, want.boot_id, sizeof h->boot_id);
    h->epoch = epoch;
    h->made_s = (uint64_t)time(NULL);
    atomic_signal_fence(memory_order_seq_cst);
    h->check = history_head_check(h);
    return 0;
}

static int read_boot_id(char out[40])
{
    memset(out, 0, 40);
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, out, 39);
    close(fd);
    if (n < 32)
        return -1;
    out[strcspn(out, "\n")] = '\0';
    return 0;
}

/* Why the head h cannot be this run's, NULL when it can. */
static const char *foreign(const struct history_head *h)
{
    static char why[600];
    if (h->version < HISTORY_VERSION_OLDEST || h->version > HISTORY_VERSION)
        snprintf(why, sizeof why, "it is of another format (version %u; this build reads %u "
                 "to %u)", h->version, HISTORY_VERSION_OLDEST, HISTORY_VERSION);
    else if (h->check != history_head_check(h))
        snprintf(why, sizeof why, "its head is damaged");
    else if (strncmp(h->node, want.node, sizeof h->node) != 0)
        snprintf(why, sizeof why, "it is node %.*s's, not %s's", HISTORY_NODE_MAX - 1, h->node,
                 want.node);
    else if (h->arena_size != want.arena_size || h->max_users != want.max_users ||
             h->max_topics != want.max_topics)
        snprintf(why, sizeof why,
                 "it was made for %ju bytes of history, %u uids and %u topics, not %ju, %u "
                 "and %u (--history-bytes, --history 0, --max-users, --max-topics)",
                 (uintmax_t)h->arena_size, h->max_users, h->max_topics,
                 (uintmax_t)want.arena_size, want.max_users, want.max_topics);
    else if (strncmp(h->boot_id, want.boot_id, sizeof h->boot_id) != 0)
        snprintf(why, sizeof why, "it was made before the machine last started");
    else
        return NULL;
    return why;
}

/* A file of an older version this build reads is taken as this one
 * (history_layout.h: what it lacks is zero in it): its version, then its
 * check. A process killed in between leaves a head found damaged. */
static void upgrade_head(struct history_head *h)
{
    if (h->version == HISTORY_VERSION)
        return;
    h->version = HISTORY_VERSION;
    atomic_signal_fence(memory_order_seq_cst);
    h->check = history_head_check(h);
    atomic_signal_fence(memory_order_seq_cst);
}

static void *map_file(int fd, size_t bytes)
{
    void *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    return base == MAP_FAILED ? NULL : base;
}

int history_map_renew(struct history_map *m, const char *why)
{
    if (m->head)
        munmap(m->head, m->bytes);
    m->head = NULL;
    m->resumed = 0;
    size_t bytes = total_bytes();
    /* Emptied first, then the magic alone, then the rest: a process
     * killed on the way leaves a file still known as a history. */
    int err = 0;
    if (ftruncate(m->fd, 0) != 0 || pwrite(m->fd, HISTORY_MAGIC, 8, 0) != 8 ||
        (err = posix_fallocate(m->fd, 0, (off_t)bytes)) != 0) {
        if (err)
            errno = err;
        log_msg(LOG_ERROR, "cannot make --history-file %s %zu bytes: %m%s", m->file, bytes,
                errno == ENOSPC ? " (its filesystem is full: give it room, or lower "
                                  "--history-bytes, --max-users or --max-topics)" : "");
        return -1;
    }
    char *base = map_file(m->fd, bytes);
    if (!base) {
        log_msg(LOG_ERROR, "cannot map --history-file %s: %m", m->file);
        return -1;
    }
    point(m, base);
    if (make_head(m) != 0)
        return -1;
    if (why)
        log_msg(LOG_ERROR, "history: --history-file %s refused: %s; started afresh, epoch %08x: "
                           "clients coming back are told of a gap", m->file, why, m->head->epoch);
    else
        log_msg(LOG_INFO, "history: --history-file %s made, epoch %08x (%zu bytes)", m->file,
                m->head->epoch, bytes);
    return 0;
}

/* The file, open and locked, is ours to use: -1 (logged) when not. */
static int usable(struct history_map *m, const struct stat *st)
{
    if (!S_ISREG(st->st_mode))
        log_msg(LOG_ERROR, "--history-file %s is not a regular file", m->file);
    else if (st->st_uid != geteuid())
        log_msg(LOG_ERROR, "--history-file %s belongs to another user (uid %u)", m->file,
                (unsigned)st->st_uid);
    else if (st->st_mode & 077)
        log_msg(LOG_ERROR, "--history-file %s is open to other users (mode %03o) and holds "
                           "their messages: chmod 600 it", m->file, (unsigned)(st->st_mode & 0777));
    else if (flock(m->fd, LOCK_EX | LOCK_NB) != 0)
        log_msg(LOG_ERROR, errno == EWOULDBLOCK
                               ? "--history-file %s is in use by another process (a node "
                                 "running with the same file): give each node its own"
                               : "cannot lock --history-file %s: %m", m->file);
    else if (read_boot_id(want.boot_id) != 0)
        log_msg(LOG_ERROR, "cannot read /proc/sys/kernel/random/boot_id, which tells a "
                           "--history-file of an earlier boot: %m");
    else
        return 0;
    return -1;
}

static int open_file(struct history_map *m)
{
    m->fd = open(m->file, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (m->fd < 0) {
        log_msg(LOG_ERROR, "cannot open --history-file %s: %m", m->file);
        return -1;
    }
    struct stat st;
    if (fstat(m->fd, &st) != 0 || usable(m, &st) != 0)
        return -1;
    if (st.st_size == 0)
        return history_map_renew(m, NULL);
    struct history_head h;
    memset(&h, 0, sizeof h);
    ssize_t got = pread(m->fd, &h, sizeof h, 0);
    if (got < 8 || memcmp(h.magic, HISTORY_MAGIC, sizeof h.magic) != 0) {
        log_msg(LOG_ERROR, "--history-file %s holds something else than a history (it does not "
                           "start as one): remove it or name another file", m->file);
        return -1;
    }
    char why[128];
    const char *bad = got < (ssize_t)sizeof h ? "it is cut short" : foreign(&h);
    size_t bytes = total_bytes();
    if (!bad && (uint64_t)st.st_size != bytes) {
        snprintf(why, sizeof why, "it is %jd bytes, not %zu (cut short or grown)",
                 (intmax_t)st.st_size, bytes);
        bad = why;
    }
    if (bad)
        return history_map_renew(m, bad);
    int err = posix_fallocate(m->fd, 0, (off_t)bytes);     /* its room kept, as when made */
    char *base = err ? NULL : map_file(m->fd, bytes);
    if (!base) {
        if (err)
            errno = err;
        log_msg(LOG_ERROR, "cannot map --history-file %s: %m", m->file);
        return -1;
    }
    point(m, base);
    upgrade_head(m->head);
    m->resumed = 1;
    return 0;
}

/* m empty, for fd and file; what is asked of it in want. */
static void start(struct history_map *m, int fd, const char *file, const char *node,
                  uint32_t max_users, uint32_t max_topics, uint64_t arena_size, size_t room_size)
{
    memset(m, 0, sizeof *m);
    m->fd = fd;
    m->file = file;
    memset(&want, 0, sizeof want);
    snprintf(want.node, sizeof want.node, "%s", node ? node : "");
    want.max_users = max_users;
    want.max_topics = max_topics;
    want.arena_size = arena_size;
    want.room_size = room_size;
}

int history_map_open(struct history_map *m, const char *file, const char *node,
                     uint32_t max_users, uint32_t max_topics, uint64_t arena_size,
                     size_t room_size)
{
    start(m, -1, file, node, max_users, max_topics, arena_size, room_size);
    if (file)
        return open_file(m);
    size_t bytes = total_bytes();
    char *base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        log_msg(LOG_ERROR, "cannot allocate %zu bytes of history for %u uids and %u topics; "
                           "lower --history-bytes, --max-users or --max-topics", bytes,
                max_users, max_topics);
        return -1;
    }
    point(m, base);
    return make_head(m);
}

int history_map_adopt(struct history_map *m, int fd, const char *file, const char *node,
                      uint32_t max_users, uint32_t max_topics, uint64_t arena_size,
                      size_t room_size)
{
    start(m, fd, file, node, max_users, max_topics, arena_size, room_size);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        log_msg(LOG_ERROR, "takeover: cannot look at the history handed over: %m");
        return -1;
    }
    /* A file is checked as at an open (its lock is the previous process's,
     * shared through the descriptor); memory comes from that process. */
    if (file && usable(m, &st) != 0)
        return -1;
    struct history_head h;
    size_t bytes = total_bytes();
    const char *bad = NULL;
    if ((uint64_t)st.st_size != bytes)
        bad = "its size is not what these options make";
    else if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h ||
             memcmp(h.magic, HISTORY_MAGIC, sizeof h.magic) != 0)
        bad = "it is not a history";
    else
        bad = foreign(&h);
    char *base = bad ? NULL : map_file(fd, bytes);
    if (!base) {
        log_msg(LOG_ERROR, "takeover: the history handed over cannot be used: %s",
                bad ? bad : strerror(errno));
        return -1;
    }
    point(m, base);
    upgrade_head(m->head);
    return 0;
}

int history_map_copy(const struct history_map *m)
{
    int fd = memfd_create("httpdcnode-history", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)m->bytes) != 0) {
        log_msg(LOG_ERROR, "takeover: cannot make a memory file for the history: %m");
        if (fd >= 0)
            close(fd);
        return -1;
    }
    /* Pages never written stay holes: an unused uid's slot costs nothing. */
    static const char zero[4096];
    const char *base = (const char *)m->head;
    for (size_t at = 0; at < m->bytes; at += 4096) {
        size_t n = m->bytes - at < 4096 ? m->bytes - at : 4096;
        if (memcmp(base + at, zero, n) == 0)
            continue;
        if (pwrite(fd, base + at, n, (off_t)at) != (ssize_t)n) {
            log_msg(LOG_ERROR, "takeover: cannot copy the history to a memory file: %m");
            close(fd);
            return -1;
        }
    }
    return fd;
}

void history_map_close(struct history_map *m)
{
    if (m->head)
        munmap(m->head, m->bytes);
    if (m->fd >= 0)
        close(m->fd);
    m->head = NULL;
    m->fd = -1;
}
