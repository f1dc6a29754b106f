/* SPDX-License-Identifier: Apache-2.0 */
/* A hot upgrade, the running side: see upgrade.h. A hand-over runs in
 * one loop callback, from the hello to the exit (or back to serving):
 * nothing else of the loop runs meanwhile, so no stream is read or
 * written but by the steps below. */
#include "upgrade/upgrade.h"
#include "upgrade/upgrade_parts.h"
#include "upgrade/upgrade_wire.h"
#include "core/backlog.h"
#include "core/conn.h"
#include "core/dispatch.h"
#include "core/expiry.h"
#include "core/history.h"
#include "core/presence.h"
#include "core/stream.h"
#include "core/topic.h"
#include "core/topic_join.h"
#include "core/topic_presence.h"
#include "core/uidtable.h"
#include "erl/erl_cnode.h"
#include "http/admin.h"
#include "http/http_front.h"
#include "http/http_guard.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "obs/stats.h"
#include "transport/chunked.h"
#include "transport/ws_reader.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static int control_fd = -1;
static struct event *control_ev;
static int draining;
static int my_argc;
static char **my_argv;

/* ---------------------------------------------------------------- the hello */

struct hello {
    uint32_t format;
    uint32_t fd_room;            /* descriptors the new process may open */
    struct carry_in parts;       /* (tag u32, version u16) each */
    uint16_t nparts;
    const char *options;
    size_t options_len;
};

static int parse_hello(const char *buf, size_t n, struct hello *h)
{
    struct carry_in in;
    carry_in_init(&in, buf, n);
    if (carry_get_u8(&in) != MSG_HELLO)
        return -1;
    h->format = carry_get_u32(&in);
    h->fd_room = carry_get_u32(&in);
    h->nparts = carry_get_u16(&in);
    const void *parts = carry_view(&in, (size_t)h->nparts * 6);
    if (in.failed)
        return -1;
    carry_in_init(&h->parts, parts, (size_t)h->nparts * 6);
    h->options_len = carry_left(&in);
    h->options = carry_view(&in, h->options_len);
    return 0;
}

/* The version of tag the new process reads, 0 when it knows none. */
static uint16_t reads(const struct hello *h, uint32_t tag)
{
    struct carry_in walk = h->parts;
    for (uint16_t i = 0; i < h->nparts; i++) {
        uint32_t t = carry_get_u32(&walk);
        uint16_t v = carry_get_u16(&walk);
        if (t == tag)
            return v;
    }
    return 0;
}

/* The first option that differs, in why. */
static void option_difference(const struct hello *h, const char *mine, size_t mine_len,
                              char *why, size_t size)
{
    const char *a = mine, *b = h->options;
    const char *a_end = mine + mine_len, *b_end = h->options + h->options_len;
    while (a < a_end && b < b_end && strcmp(a, b) == 0) {
        a += strlen(a) + 1;
        b += strnlen(b, (size_t)(b_end - b)) + 1;
    }
    const char *here = a < a_end ? a : "(end)", *there = b < b_end ? b : "(end)";
    int there_len = b < b_end ? (int)strnlen(b, (size_t)(b_end - b)) : 5;
    snprintf(why, size, "it was started with other options than this process (here '%.200s', "
             "there '%.*s'): start it with the same ones", here, there_len > 200 ? 200 : there_len,
             there);
}

/* Why the hand-over cannot be, in why; 0 when it can. */
static int refusal(const struct hello *h, char *why, size_t size)
{
    static char mine[65536];
    size_t mine_len = upgrade_options(my_argc, my_argv, mine, sizeof mine);
    uint32_t streams = loop_stats.streams_open;
    if (h->format != upgrade_format()) {
        snprintf(why, size, "it reads state format %u, this process writes format %u: "
                 "upgrade through a version that reads both", h->format, upgrade_format());
        return -1;
    }
    for (size_t i = 0; i < upgrade_nparts; i++)
        if (reads(h, upgrade_parts[i].tag) < upgrade_parts[i].version) {
            char tag[5];
            snprintf(why, size, "it reads %s (%s) up to version %u, this process writes "
                     "version %u", upgrade_parts[i].what, carry_tag_name(upgrade_parts[i].tag, tag),
                     reads(h, upgrade_parts[i].tag), upgrade_parts[i].version);
            return -1;
        }
    if (mine_len != h->options_len || memcmp(mine, h->options, mine_len) != 0) {
        option_difference(h, mine, mine_len, why, size);
        return -1;
    }
    if (draining) {
        snprintf(why, size, "this process is draining (SIGTERM): it is going away anyway");
        return -1;
    }
    if ((uint64_t)streams + 64 > h->fd_room) {
        snprintf(why, size, "it may open %u descriptors, and %u streams are open here: raise "
                 "its limit (ulimit -n)", h->fd_room, streams);
        return -1;
    }
    return 0;
}

static int say(int c, int kind, const char *text)
{
    char msg[1024];
    msg[0] = (char)kind;
    size_t n = strlen(text);
    if (n > sizeof msg - 1)
        n = sizeof msg - 1;
    memcpy(msg + 1, text, n);
    return upgrade_wire_send(c, msg, n + 1, NULL, 0, clock_now_ms() + UPGRADE_HELLO_MS);
}

/* ---------------------------------------------------------------- quiet */

/* The C-node may wait for room in the inbox while the loop waits for it. */
static void empty_inbox(void) { dispatch_drain_all(); }

/* The streams evhttp is still welcoming leave it now. */
static void hurry_welcoming(void)
{
    size_t n = 0, cap = 0;
    struct stream **w = NULL;
    for (uint32_t uid = uidtable_next_online(0); uid; uid = uidtable_next_online(uid))
        for (struct stream *s = uidtable_first(uid); s; s = s->next) {
            if (s->state != STREAM_WELCOMING)
                continue;
            if (n == cap) {
                size_t k = cap ? cap * 2 : 64;
                struct stream **g = realloc(w, k * sizeof *g);
                if (!g)
                    break;
                w = g;
                cap = k;
            }
            w[n++] = s;
        }
    for (size_t i = 0; i < n; i++)
        chunked_hurry(w[i]);
    free(w);
}

/* Nothing more comes in: the C-node reads no link, the inbox is applied,
 * what the loop owes Erlang is queued. */
static int quiet(int64_t deadline)
{
    if (erl_cnode_hold(deadline, empty_inbox) != 0)
        return -1;
    dispatch_drain_all();
    hurry_welcoming();
    presence_flush_now();
    return 0;
}

static int put_control(struct carry_out *o)
{
    size_t at = carry_begin(o, UPGRADE_CARRY_TAG, UPGRADE_CARRY_VERSION);
    carry_u32(o, carry_fd(o, control_fd));
    carry_end(o, at);
    return o->failed ? -1 : 0;
}

/* Every record, the C-node's first (it sends what the loop queued). */
static int export_all(struct carry_out *o, int64_t deadline)
{
    return erl_cnode_carry_export(o, deadline) == 0 && put_control(o) == 0 &&
                   history_carry_export(o) == 0 && http_front_carry_export(o) == 0 &&
                   admin_carry_export(o) == 0 && presence_carry_export(o) == 0 &&
                   stream_carry_export(o) == 0 &&
                   backlog_carry_export(o, stream_carry_index) == 0 &&
                   conn_carry_export(o, stream_carry_index) == 0 &&
                   expiry_carry_export(o, stream_carry_index) == 0 &&
                   topic_carry_export(o, stream_carry_index) == 0 &&
                   topic_join_carry_export(o, stream_carry_index) == 0 &&
                   topic_presence_carry_export(o) == 0 &&
                   ws_reader_carry_export(o) == 0 && stats_carry_export(o) == 0
               ? 0
               : -1;
}

/* ---------------------------------------------------------------- sending */

/* The state's bytes go in a memory file (written once, read in place on
 * the other side), not through the socket. */
static int state_file(const struct carry_out *o)
{
    int fd = memfd_create("httpdcnode-takeover", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    for (size_t at = 0; at < o->len;) {
        ssize_t n = write(fd, o->buf + at, o->len - at);
        if (n <= 0 && errno != EINTR) {
            close(fd);
            return -1;
        }
        at += n > 0 ? (size_t)n : 0;
    }
    return fd;
}

static int send_all(int c, const struct carry_out *o, int64_t deadline)
{
    char msg[16];
    for (uint32_t at = 0; at < o->nfds; at += UPGRADE_FDS_MAX) {
        uint32_t n = o->nfds - at < UPGRADE_FDS_MAX ? o->nfds - at : UPGRADE_FDS_MAX;
        msg[0] = MSG_FDS;
        if (upgrade_wire_send(c, msg, 1, o->fds + at, n, deadline) != 0)
            return -1;
    }
    int fd = state_file(o);
    if (fd < 0)
        return -1;
    uint64_t len = o->len;
    msg[0] = MSG_STATE;
    memcpy(msg + 1, &len, sizeof len);
    int r = upgrade_wire_send(c, msg, 1 + sizeof len, &fd, 1, deadline);
    close(fd);
    if (r != 0)
        return -1;
    msg[0] = MSG_END;
    memcpy(msg + 1, &len, sizeof len);
    memcpy(msg + 1 + sizeof len, &o->nfds, sizeof o->nfds);
    return upgrade_wire_send(c, msg, 1 + sizeof len + sizeof o->nfds, NULL, 0, deadline);
}

/* The new process's answer: 0 once it has taken all, else -1 and why. */
static int taken(int c, char *why, size_t size)
{
    char msg[1024];
    uint32_t nfds;
    ssize_t n = upgrade_wire_recv(c, msg, sizeof msg - 1, NULL, 0, &nfds,
                                  clock_now_ms() + UPGRADE_TAKE_MS);
    if (n > 0 && msg[0] == MSG_TAKEN)
        return 0;
    if (n > 0 && msg[0] == MSG_FAILED) {
        msg[n] = '\0';
        snprintf(why, size, "%s", msg + 1);
    } else {
        snprintf(why, size, "%s", n < 0 ? (errno == ECONNRESET ? "it went away"
                                                               : strerror(errno))
                                        : "it said something else");
    }
    return -1;
}

/* ---------------------------------------------------------------- a hand-over */

/* Back to serving: the hand-over failed before the new process went on. */
static void serve_on(int pid, const char *why)
{
    erl_cnode_release();
    history_carry_release();
    stream_carry_forget();
    http_front_pause(0);
    admin_pause(0);
    log_msg(LOG_ERROR, "takeover: the hand-over to pid %d failed (%s): this process serves on",
            pid, why);
}

/* The hand-over accepted, one loop turn later: see give. */
static struct {
    int fd, pid;
    int64_t t0;
    unsigned turns;
} giving = {-1, 0, 0, 0};
static struct event *give_ev;

/* Whether the requests being read are done (or have had their time):
 * after two turns of the loop at least, so that a connection accepted just
 * before the listening socket paused has its request read if it came. */
static int settled(void)
{
    return (++giving.turns >= 2 && http_guard_reading() == 0) ||
           clock_now_ms() - giving.t0 >= UPGRADE_SETTLE_MS;
}

static void hand_over(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    static const struct timeval a_moment = {0, 1000};
    if (!settled()) {
        event_add(give_ev, &a_moment);
        return;
    }
    int c = giving.fd, pid = giving.pid;
    int64_t t0 = giving.t0;
    giving.fd = -1;
    char why[1024];
    struct carry_out o;
    carry_out_init(&o);
    int64_t t[5] = {clock_now_ms()};      /* each step's end */
    int ok = quiet(t0 + UPGRADE_QUIET_MS) == 0;
    if (!ok)
        snprintf(why, sizeof why, "this process did not stop reading in time");
    t[1] = clock_now_ms();
    if (ok && !(ok = export_all(&o, t0 + UPGRADE_QUIET_MS) == 0))
        snprintf(why, sizeof why, "its state could not be written (out of memory?)");
    t[2] = clock_now_ms();
    if (ok && !(ok = send_all(c, &o, clock_now_ms() + UPGRADE_SEND_MS) == 0))
        snprintf(why, sizeof why, "sending it failed: %s", strerror(errno));
    t[3] = clock_now_ms();
    if (ok)
        ok = taken(c, why, sizeof why) == 0;
    if (ok && !(ok = say(c, MSG_GO, "") == 0))
        snprintf(why, sizeof why, "it went away before it was told to go on");
    t[4] = clock_now_ms();
    if (!ok) {
        (void)say(c, MSG_FAILED, why);
        close(c);
        carry_out_free(&o);
        serve_on(pid, why);
        return;
    }
    /* From here the new process serves: nothing more is done here. Its
     * copies of the descriptors keep every socket open as this process's
     * close with it (no FIN, no reset). */
    log_msg(LOG_INFO, "takeover: handed over to pid %d in %lld ms (%u streams, %zu of them with "
            "%llu bytes unsent; %zu bytes of state, %u descriptors; ms: requests read %lld, "
            "stopping %lld, state %lld, sending %lld, taking %lld); exiting", pid,
            (long long)(t[4] - t0), stream_carry_count(), backlog_count(),
            (unsigned long long)loop_stats.backlog_bytes, o.len, o.nfds, (long long)(t[0] - t0),
            (long long)(t[1] - t[0]), (long long)(t[2] - t[1]), (long long)(t[3] - t[2]),
            (long long)(t[4] - t[3]));
    _exit(0);
}

/* The new process's hello, answered: refused, or accepted. Then the
 * listening sockets stop accepting, and the hand-over itself waits a few
 * turns of the loop (settled), so that the requests whose bytes came (a
 * long-poll asking again, a stream being opened) are read and become
 * streams rather than cut. 0 when it goes on (c is taken). */
static int give(int c, int pid)
{
    static char buf[UPGRADE_MSG_MAX];
    char why[1024];
    uint32_t nfds;
    ssize_t n = upgrade_wire_recv(c, buf, sizeof buf, NULL, 0, &nfds,
                                  clock_now_ms() + UPGRADE_HELLO_MS);
    struct hello h;
    if (n <= 0 || parse_hello(buf, (size_t)n, &h) != 0) {
        log_msg(LOG_ERROR, "takeover: pid %d said no proper hello: ignored", pid);
        return -1;
    }
    if (giving.fd >= 0)
        snprintf(why, sizeof why, "another process is taking over already");
    if (giving.fd >= 0 || refusal(&h, why, sizeof why) != 0) {
        log_msg(LOG_ERROR, "takeover: refused pid %d: %s; this process serves on", pid, why);
        (void)say(c, MSG_REFUSED, why);
        return -1;
    }
    log_msg(LOG_INFO, "takeover: pid %d takes over: handing over %llu streams", pid,
            (unsigned long long)loop_stats.streams_open);
    char me[16];
    snprintf(me, sizeof me, "%d", (int)getpid());
    if (say(c, MSG_ACCEPTED, me) != 0)
        return -1;
    http_front_pause(1);
    admin_pause(1);
    giving.fd = c;
    giving.pid = pid;
    giving.t0 = clock_now_ms();
    giving.turns = 0;
    static const struct timeval now = {0, 0};
    event_add(give_ev, &now);
    return 0;
}

static void on_control(evutil_socket_t fd, short what, void *arg)
{
    (void)what;
    (void)arg;
    int pid = 0;
    int c = upgrade_wire_accept(fd, &pid);
    if (c >= 0 && give(c, pid) != 0)
        close(c);
}

/* ---------------------------------------------------------------- serving */

int upgrade_serve(struct event_base *base, const char *node, int argc, char **argv)
{
    my_argc = argc;
    my_argv = argv;
    control_fd = upgrade_take_control_fd();
    if (control_fd < 0)
        control_fd = upgrade_wire_listen(node);
    if (control_fd < 0) {
        log_msg(LOG_ERROR, "takeover: cannot listen for a process taking over from this one "
                "(%s): no hot upgrade for node %s", errno == EADDRINUSE
                    ? "another process holds its control socket" : strerror(errno), node);
        return 0;
    }
    control_ev = event_new(base, control_fd, EV_READ | EV_PERSIST, on_control, NULL);
    give_ev = evtimer_new(base, hand_over, NULL);
    if (!control_ev || !give_ev || event_add(control_ev, NULL) != 0) {
        log_msg(LOG_ERROR, "takeover: cannot watch the control socket: out of memory");
        return -1;
    }
    return 0;
}

void upgrade_serve_draining(void) { draining = 1; }

void upgrade_serve_stop(void)
{
    if (control_ev)
        event_free(control_ev);
    if (give_ev)
        event_free(give_ev);
    control_ev = give_ev = NULL;
    if (control_fd >= 0)
        close(control_fd);
    control_fd = -1;
}
