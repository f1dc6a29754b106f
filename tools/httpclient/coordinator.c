/* SPDX-License-Identifier: Apache-2.0 */
/* Parent process: see coordinator.h. */
#include "coordinator.h"

#include <errno.h>
#include <event2/event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "options.h"
#include "report.h"
#include "stats.h"
#include "worker.h"

/* How long workers get to send their last report once told to stop. */
#define GRACE_S 5
/* How long exited workers get to be reaped before SIGKILL. */
#define REAP_WAIT_MS 2000

struct child {
    pid_t pid;
    int sock;
    int ended;
    struct event *ev;
};

struct coord {
    const struct client_opts *o;
    struct event_base *base;
    unsigned n, ended;
    struct child *kids;
    struct worker_stats *last;  /* latest report of each worker */
    struct worker_stats sum;
    uint64_t start_ns, stop_ns, all_up_ns;
    uint64_t resume_ns;         /* the first SIGUSR1 */
    uint64_t tick_msgs, tick_ns;
    const char *stopped_by;
    int stopping;
    int hist_warned;            /* --hist-out failed once: said so */
    struct event *hold_ev, *grace_ev;
};

static double since_start(const struct coord *c, uint64_t now)
{
    return (double)(now - c->start_ns) / 1e9;
}

static void arm(struct coord *c, struct event **ev, double seconds, event_callback_fn cb)
{
    struct timeval tv = {(time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)};
    if (!*ev)
        *ev = evtimer_new(c->base, cb, c);
    if (*ev)
        evtimer_add(*ev, &tv);
}

static void on_grace(evutil_socket_t fd, short what, void *arg)
{
    struct coord *c = arg;
    (void)fd;
    (void)what;
    for (unsigned i = 0; i < c->n; i++)
        if (!c->kids[i].ended) {
            fprintf(stderr, "httpclient: worker %u (pid %ld) sent no last report\n", i,
                    (long)c->kids[i].pid);
            kill(c->kids[i].pid, SIGKILL);
        }
    event_base_loopbreak(c->base);
}

/* Tells every worker to stop; the loop ends when all have reported. */
static void finish(struct coord *c, const char *why)
{
    if (c->stopping)
        return;
    c->stopping = 1;
    c->stopped_by = why;
    c->stop_ns = mono_ns();
    for (unsigned i = 0; i < c->n; i++)
        if (!c->kids[i].ended)
            kill(c->kids[i].pid, SIGTERM);
    arm(c, &c->grace_ev, GRACE_S, on_grace);
}

static void on_hold(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    finish(arg, "hold");
}

static void evaluate(struct coord *c)
{
    const struct client_opts *o = c->o;
    report_sum(&c->sum, c->last, c->n);
    if (o->until_msgs && c->sum.msgs >= o->until_msgs)
        finish(c, "until-msgs");
    if (!c->all_up_ns && c->sum.welcomed + c->sum.failed >= o->conns) {
        c->all_up_ns = mono_ns();
        if (o->hold_set || !o->until_msgs)
            arm(c, &c->hold_ev, o->hold, on_hold);
    }
    if (c->ended == c->n) {
        if (!c->stopping) {
            c->stopping = 1;
            c->stopped_by = c->sum.signalled ? "signal" : "done";
            c->stop_ns = mono_ns();
        }
        event_base_loopbreak(c->base);
    }
}

static void child_ended(struct coord *c, unsigned i)
{
    if (c->kids[i].ended)
        return;
    c->kids[i].ended = 1;
    c->ended++;
    event_del(c->kids[i].ev);
}

static void on_child(evutil_socket_t fd, short what, void *arg)
{
    struct coord *c = arg;
    static struct worker_stats buf;
    (void)what;
    unsigned i = 0;
    while (i < c->n && c->kids[i].sock != fd)
        i++;
    if (i == c->n)
        return;
    ssize_t n = recv(fd, &buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return;
    if (n == (ssize_t)sizeof buf && buf.magic == STATS_MAGIC) {
        c->last[i] = buf;
        if (buf.final)
            child_ended(c, i);
    } else if (n <= 0) {
        fprintf(stderr, "httpclient: worker %u (pid %ld) ended without its last report\n", i,
                (long)c->kids[i].pid);
        child_ended(c, i);
    }
    evaluate(c);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct coord *c = arg;
    (void)fd;
    (void)what;
    uint64_t now = mono_ns();
    report_sum(&c->sum, c->last, c->n);
    double dt = (double)(now - c->tick_ns) / 1e9;
    double rate = dt > 0 ? (double)(c->sum.msgs - c->tick_msgs) / dt : 0;
    c->tick_ns = now;
    c->tick_msgs = c->sum.msgs;
    if (!c->o->quiet) {
        struct run_info ri = {c->o->conns, c->n, since_start(c, now), "",
                              opts_proto_name(c->o->proto), c->resume_ns};
        report_progress(stderr, &c->sum, &ri, rate);
    }
    if (c->o->hist_out && report_histogram(c->o->hist_out, &c->sum.lat) != 0 && !c->hist_warned) {
        fprintf(stderr, "httpclient: cannot write --hist-out %s: %s\n", c->o->hist_out,
                strerror(errno));
        c->hist_warned = 1;
    }
}

static void on_signal(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    finish(arg, "signal");
}

/* --reconnect-on-signal: the workers reconnect what they parked. */
static void on_resume(evutil_socket_t fd, short what, void *arg)
{
    struct coord *c = arg;
    (void)fd;
    (void)what;
    if (!c->resume_ns)
        c->resume_ns = mono_ns();
    for (unsigned i = 0; i < c->n; i++)
        if (!c->kids[i].ended)
            kill(c->kids[i].pid, SIGUSR1);
}

static void on_max_time(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    finish(arg, "max-time");
}

/* Forks the workers; returns -1 if one could not be started. */
static int spawn(struct coord *c)
{
    fflush(NULL);
    for (unsigned i = 0; i < c->n; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
            perror("httpclient: socketpair");
            return -1;
        }
        /* Room for a few reports so a busy parent does not stall a worker. */
        int sz = (int)sizeof(struct worker_stats) * 8;
        setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
        pid_t pid = fork();
        if (pid < 0) {
            perror("httpclient: fork");
            close(sv[0]);
            close(sv[1]);
            return -1;
        }
        if (pid == 0) {
            for (unsigned j = 0; j < i; j++)
                close(c->kids[j].sock);
            close(sv[0]);
            _exit(worker_run(c->o, i, c->n, sv[1]));
        }
        close(sv[1]);
        c->kids[i].pid = pid;
        c->kids[i].sock = sv[0];
        c->last[i].magic = STATS_MAGIC;
        c->last[i].planned = worker_share(c->o, i, c->n);
    }
    return 0;
}

static void reap(struct coord *c, unsigned started)
{
    unsigned left = started;
    for (int waited = 0; left && waited < REAP_WAIT_MS; waited += 10) {
        for (unsigned i = 0; i < started; i++)
            if (c->kids[i].pid > 0 && waitpid(c->kids[i].pid, NULL, WNOHANG) == c->kids[i].pid) {
                c->kids[i].pid = 0;
                left--;
            }
        if (left)
            usleep(10000);
    }
    for (unsigned i = 0; i < started; i++)
        if (c->kids[i].pid > 0) {
            kill(c->kids[i].pid, SIGKILL);
            waitpid(c->kids[i].pid, NULL, 0);
        }
}

int coordinator_run(const struct client_opts *o)
{
    static struct coord c;
    memset(&c, 0, sizeof c);
    c.o = o;
    c.n = o->procs;
    c.kids = calloc(c.n, sizeof *c.kids);
    c.last = calloc(c.n, sizeof *c.last);
    if (!c.kids || !c.last)
        return 1;
    for (unsigned i = 0; i < c.n; i++)
        c.kids[i].sock = -1;
    signal(SIGPIPE, SIG_IGN);
    c.start_ns = c.tick_ns = mono_ns();
    /* Blocked until each process has its handlers: see worker_run. */
    sigset_t stops;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGUSR1);
    sigprocmask(SIG_BLOCK, &stops, NULL);

    if (spawn(&c)) {
        for (unsigned i = 0; i < c.n; i++)
            if (c.kids[i].pid > 0)
                kill(c.kids[i].pid, SIGTERM);
        reap(&c, c.n);
        return 1;
    }

    c.base = event_base_new();
    if (!c.base)
        return 1;
    for (unsigned i = 0; i < c.n; i++) {
        c.kids[i].ev = event_new(c.base, c.kids[i].sock, EV_READ | EV_PERSIST, on_child, &c);
        event_add(c.kids[i].ev, NULL);
    }
    struct timeval one = {1, 0};
    struct event *tick = event_new(c.base, -1, EV_PERSIST, on_tick, &c);
    event_add(tick, &one);
    struct event *sigint = evsignal_new(c.base, SIGINT, on_signal, &c);
    struct event *sigterm = evsignal_new(c.base, SIGTERM, on_signal, &c);
    struct event *sigusr1 = evsignal_new(c.base, SIGUSR1, on_resume, &c);
    event_add(sigint, NULL);
    event_add(sigterm, NULL);
    event_add(sigusr1, NULL);
    sigprocmask(SIG_UNBLOCK, &stops, NULL);
    struct event *bound = NULL;
    arm(&c, &bound, o->max_time, on_max_time);

    event_base_dispatch(c.base);

    if (!c.stop_ns) {
        c.stop_ns = mono_ns();
        c.stopped_by = "signal";
    }
    for (unsigned i = 0; i < c.n; i++)
        close(c.kids[i].sock);
    reap(&c, c.n);

    report_sum(&c.sum, c.last, c.n);
    struct run_info ri = {o->conns, c.n, since_start(&c, c.stop_ns), c.stopped_by,
                          opts_proto_name(o->proto), c.resume_ns};
    if (o->hist_out && report_histogram(o->hist_out, &c.sum.lat) != 0)
        fprintf(stderr, "httpclient: cannot write --hist-out %s: %s\n", o->hist_out,
                strerror(errno));
    report_summary(stdout, &c.sum, &ri, o->json);
    return strcmp(c.stopped_by, "max-time") == 0 ? 3 : 0;
}
