/* SPDX-License-Identifier: Apache-2.0 */
/* A hot upgrade, the taking side: see upgrade.h. */
#include "upgrade/upgrade.h"
#include "upgrade/upgrade_parts.h"
#include "upgrade/upgrade_wire.h"
#include "core/backlog.h"
#include "core/conn.h"
#include "core/expiry.h"
#include "core/history.h"
#include "core/presence.h"
#include "core/stream.h"
#include "core/topic.h"
#include "core/topic_join.h"
#include "core/topic_presence.h"
#include "erl/erl_cnode.h"
#include "http/admin.h"
#include "http/http_front.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "obs/stats.h"
#include "transport/ws_reader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

static int conn_fd = -1;         /* to the running process */
static int peer_pid;
static int taking;
static struct carry_out got;     /* the descriptors received */
static struct carry_in state;
static int control_fd = -1;      /* the control socket handed over */
static int64_t t0;

int upgrade_taking(void) { return taking; }

int upgrade_take_control_fd(void)
{
    int fd = control_fd;
    control_fd = -1;
    return fd;
}

/* ---------------------------------------------------------------- receiving */

static int send_hello(int argc, char **argv)
{
    static char options[65536];
    struct rlimit rl = {0, 0};
    getrlimit(RLIMIT_NOFILE, &rl);
    size_t n = upgrade_options(argc, argv, options, sizeof options);
    struct carry_out h;
    carry_out_init(&h);
    carry_u8(&h, MSG_HELLO);
    carry_u32(&h, upgrade_format());
    carry_u32(&h, rl.rlim_cur > UINT32_MAX ? UINT32_MAX : (uint32_t)rl.rlim_cur);
    carry_u16(&h, (uint16_t)upgrade_nparts);
    for (size_t i = 0; i < upgrade_nparts; i++) {
        carry_u32(&h, upgrade_parts[i].tag);
        carry_u16(&h, upgrade_parts[i].version);
    }
    carry_put(&h, options, n <= sizeof options ? n : 0);
    int r = h.failed || h.len > UPGRADE_MSG_MAX
                ? -1
                : upgrade_wire_send(conn_fd, h.buf, h.len, NULL, 0,
                                    clock_now_ms() + UPGRADE_HELLO_MS);
    carry_out_free(&h);
    return r;
}

/* The state, mapped from its memory file (read in place, unmapped at the
 * commit). */
static const char *mapped;
static size_t mapped_len;

static int map_state(int fd, uint64_t len)
{
    void *p = len ? mmap(NULL, (size_t)len, PROT_READ, MAP_PRIVATE, fd, 0) : NULL;
    close(fd);
    if (p == MAP_FAILED)
        return -1;
    mapped = p;
    mapped_len = (size_t)len;
    return 0;
}

/* The descriptors and the state, until their end: 0, or -1 and why. */
static int receive_state(const char **why)
{
    char msg[1024];
    int fds[UPGRADE_FDS_MAX];
    int64_t deadline = clock_now_ms() + UPGRADE_QUIET_MS + UPGRADE_SEND_MS;
    int have_state = 0;
    for (;;) {
        uint32_t nfds;
        ssize_t n = upgrade_wire_recv(conn_fd, msg, sizeof msg - 1, fds, UPGRADE_FDS_MAX, &nfds,
                                      deadline);
        if (n <= 0) {
            for (uint32_t i = 0; i < nfds; i++)
                close(fds[i]);
            *why = errno == EMSGSIZE ? "descriptors were lost on the way (ulimit -n?)"
                                     : "the running process went away";
            return -1;
        }
        uint64_t len = 0;
        if (msg[0] == MSG_STATE && n == 1 + (ssize_t)sizeof len && nfds == 1 && !have_state) {
            memcpy(&len, msg + 1, sizeof len);
            if (map_state(fds[0], len) != 0) {
                *why = "its state could not be mapped";
                return -1;
            }
            have_state = 1;
            continue;
        }
        if (msg[0] == MSG_FDS) {
            for (uint32_t i = 0; i < nfds; i++)
                carry_fd(&got, fds[i]);
            continue;
        }
        for (uint32_t i = 0; i < nfds; i++)
            close(fds[i]);
        if (msg[0] == MSG_END) {
            struct carry_in end;
            carry_in_init(&end, msg + 1, (size_t)n - 1);
            uint64_t bytes = carry_get_u64(&end);
            uint32_t count = carry_get_u32(&end);
            if (end.failed || !have_state || bytes != mapped_len || count != got.nfds ||
                got.failed) {
                *why = "the state came incomplete";
                return -1;
            }
            return 0;
        }
        if (msg[0] == MSG_FAILED) {
            msg[n] = '\0';
            log_msg(LOG_ERROR, "takeover: the running process could not hand over: %s", msg + 1);
            *why = NULL;
            return -1;
        }
        *why = "the running process said something else";
        return -1;
    }
}

/* Every record is one this build reads, in a version it reads. */
static int check_records(const char **why)
{
    static char text[256];
    struct carry_in walk = state, rec;
    uint32_t tag;
    uint16_t version;
    int r;
    while ((r = carry_next(&walk, &tag, &version, &rec)) == 1) {
        const struct upgrade_part *p = upgrade_part_find(tag);
        char name[5];
        if (!p || version > p->version) {
            snprintf(text, sizeof text, "its record %s (version %u) is not one this build reads",
                     carry_tag_name(tag, name), version);
            *why = text;
            return -1;
        }
    }
    if (r < 0) {
        *why = "its state is malformed";
        return -1;
    }
    return 0;
}

static void fail(const char *why)
{
    char msg[512];
    msg[0] = MSG_FAILED;
    size_t n = (size_t)snprintf(msg + 1, sizeof msg - 1, "%s", why);
    (void)upgrade_wire_send(conn_fd, msg, n + 1, NULL, 0, clock_now_ms() + UPGRADE_HELLO_MS);
    log_msg(LOG_ERROR, "takeover: failed (%s); the running process serves on", why);
}

int upgrade_take_receive(const char *node, int argc, char **argv)
{
    t0 = clock_now_ms();
    carry_out_init(&got);
    conn_fd = upgrade_wire_connect(node);
    if (conn_fd < 0) {
        log_msg(LOG_ERROR, "takeover: no process of node %s to take over from (%s): is it "
                "running on this host, with this --name?", node, strerror(errno));
        return -1;
    }
    /* (The pid SO_PEERCRED gives is the one that first listened.) */
    if (upgrade_wire_peer_ok(conn_fd, &peer_pid) != 0) {
        log_msg(LOG_ERROR, "takeover: the process listening as node %s is another user's: "
                "not taking over from it", node);
        return -1;
    }
    char msg[1024];
    uint32_t nfds;
    ssize_t n = send_hello(argc, argv) != 0 ? -1
                : upgrade_wire_recv(conn_fd, msg, sizeof msg - 1, NULL, 0, &nfds,
                                    clock_now_ms() + UPGRADE_HELLO_MS + UPGRADE_QUIET_MS);
    if (n > 0)
        msg[n] = '\0';
    if (n > 0 && msg[0] == MSG_REFUSED) {
        log_msg(LOG_ERROR, "takeover: refused by the running process of node %s: %s", node,
                msg + 1);
        return -1;
    }
    if (n <= 0 || msg[0] != MSG_ACCEPTED) {
        log_msg(LOG_ERROR, "takeover: the running process of node %s did not answer (%s)",
                node, n < 0 ? strerror(errno) : "something else");
        return -1;
    }
    peer_pid = atoi(msg + 1);
    const char *why;
    if (receive_state(&why) != 0 || (carry_in_init(&state, mapped, mapped_len),
                                     check_records(&why) != 0)) {
        if (why)
            fail(why);
        return -1;
    }
    taking = 1;
    log_msg(LOG_INFO, "takeover: pid %d handed over %zu bytes of state and %u descriptors",
            peer_pid, mapped_len, got.nfds);
    return 0;
}

/* ---------------------------------------------------------------- taking */

/* rec: the record tagged so, and its version; 0 when absent. */
static int find(uint32_t tag, struct carry_in *rec, uint16_t *version)
{
    return carry_find(&state, tag, version, rec);
}

/* A record that must be there, given to take. */
#define TAKE(tag, call)                                                        \
    do {                                                                       \
        struct carry_in rec;                                                   \
        uint16_t version;                                                      \
        if (find(tag, &rec, &version) != 1 || (call) != 0) {                   \
            char name_[5];                                                     \
            snprintf(why, sizeof why, "its record %s could not be taken",      \
                     carry_tag_name(tag, name_));                              \
            fail(why);                                                         \
            return -1;                                                         \
        }                                                                      \
    } while (0)

static int take_control(struct carry_in *rec)
{
    uint32_t i = carry_get_u32(rec);
    if (rec->failed || i >= got.nfds)
        return -1;
    control_fd = got.fds[i];
    return 0;
}

int upgrade_take_early(void)
{
    char why[128];
    TAKE(UPGRADE_CARRY_TAG, take_control(&rec));
    TAKE(HISTORY_CARRY_TAG, history_carry_take(&rec, version, got.fds, got.nfds));
    TAKE(HTTP_FRONT_CARRY_TAG, http_front_carry_take(&rec, version, got.fds, got.nfds));
    TAKE(ADMIN_CARRY_TAG, admin_carry_take(&rec, version, got.fds, got.nfds));
    TAKE(ERL_CNODE_CARRY_TAG, erl_cnode_carry_take(&state, got.fds, got.nfds));
    return 0;
}

static struct backlog **backlog_of(uint32_t i, void **owner)
{
    struct stream *s = stream_carried(i);
    *owner = s;
    return s ? &s->out : NULL;
}

int upgrade_take_late(void)
{
    char why[128];
    TAKE(PRESENCE_CARRY_TAG, presence_carry_take(&rec, version));
    TAKE(STREAM_CARRY_TAG, stream_carry_take(&rec, version, got.fds, got.nfds));
    TAKE(BACKLOG_CARRY_TAG, backlog_carry_take(&rec, version, backlog_of));
    TAKE(CONN_CARRY_TAG, conn_carry_take(&rec, version, stream_carried));
    TAKE(EXPIRY_CARRY_TAG, expiry_carry_take(&rec, version, stream_carried));
    TAKE(TOPIC_CARRY_TAG, topic_carry_take(&rec, version, stream_carried));
    TAKE(TOPIC_JOIN_CARRY_TAG, topic_join_carry_take(&rec, version, stream_carried));
    TAKE(TOPIC_PRESENCE_CARRY_TAG, topic_presence_carry_take(&rec, version));
    TAKE(WS_READER_CARRY_TAG, ws_reader_carry_take(&rec, version));
    TAKE(STATS_CARRY_TAG, stats_carry_take(&rec, version));
    presence_carry_settle();
    return 0;
}

int upgrade_take_commit(void)
{
    char msg[64];
    uint32_t nfds, streams = stream_carry_count();
    msg[0] = MSG_TAKEN;
    ssize_t n = upgrade_wire_send(conn_fd, msg, 1, NULL, 0, clock_now_ms() + UPGRADE_GO_MS) != 0
                    ? -1
                    : upgrade_wire_recv(conn_fd, msg, sizeof msg, NULL, 0, &nfds,
                                        clock_now_ms() + UPGRADE_GO_MS);
    if (n <= 0 || msg[0] != MSG_GO) {
        log_msg(LOG_ERROR, "takeover: pid %d did not let go (%s); exiting without serving",
                peer_pid, n < 0 ? strerror(errno) : "it said something else");
        return -1;
    }
    stream_carry_arm();
    close(conn_fd);
    conn_fd = -1;
    log_msg(LOG_INFO, "takeover: took over from pid %d in %lld ms: %u streams", peer_pid,
            (long long)(clock_now_ms() - t0), streams);
    /* The descriptors are the modules' now; the state's bytes are not
     * needed any more (erl_cnode_prepare has read its records). */
    carry_out_free(&got);
    if (mapped)
        munmap((void *)mapped, mapped_len);
    mapped = NULL;
    taking = 0;
    return 0;
}
