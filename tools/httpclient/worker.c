/* SPDX-License-Identifier: Apache-2.0 */
/* Worker process main loop: see worker.h. */
#include "worker.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"
#include "record.h"
#include "stats.h"

/* Opening pace: the schedule is checked every tick against the start time,
 * so late ticks catch up and the rate does not drift. */
#define PACE_TICK_US 5000
/* Beyond the parent's --max-time, in case the parent cannot stop us. */
#define ORPHAN_SLACK_S 10
/* Told to stop with requests unanswered: how long to wait for their answers
 * (well within the parent's 5 s for the last report). */
#define ANSWER_WAIT_S 2.0

struct worker {
    struct event_base *base;
    struct conn_set cs;
    struct worker_stats st;
    int sock;
    size_t next;                /* next connection to open */
    size_t max_pending;
    double rate;                /* this worker's connections per second, 0: no limit */
    uint64_t start_ns;
    double churn_rate;          /* this worker's --churn share, 0: none */
    uint64_t churn_start_ns;    /* 0 until every connection of the worker is resolved */
    uint64_t churned;           /* disconnects done (or skipped) */
    size_t churn_next;          /* connection to end next, in turn */
    size_t resume_next;         /* next parked connection to reconnect after SIGUSR1 */
    double send_rate, request_rate; /* this worker's --send-rate, --request-rate shares */
    uint64_t up_start_ns;       /* 0 until every connection of the worker is resolved */
    uint64_t up_done, req_done; /* sends due so far that were made (or skipped) */
    size_t up_next, req_next;   /* the stream to send to next, in turn */
    struct event *pace_ev, *report_ev, *stop_ev, *sigint_ev, *sigterm_ev, *sigusr1_ev, *bound_ev;
    int stopping;
    int draining;               /* stop came: no more sends, waiting for the answers */
    struct event *drain_ev;
    int told_up;                /* the report with every connection resolved went */
};

size_t worker_share(const struct client_opts *o, unsigned id, unsigned procs)
{
    return id < o->conns ? (size_t)((o->conns - id + procs - 1) / procs) : 0;
}

static uint64_t read_rss(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, resident = 0;
    if (!f)
        return 0;
    if (fscanf(f, "%lu %lu", &size, &resident) != 2)
        resident = 0;
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void send_report(struct worker *w, int final)
{
    w->st.final = (uint32_t)final;
    w->st.rss_bytes = read_rss();
    w->st.cpu_us = cpu_us();
    record_flush();
    /* Progress reports are skipped rather than waited for if the parent lags:
     * each one carries the totals. The final one is waited for. */
    ssize_t n;
    do
        n = send(w->sock, &w->st, sizeof w->st, MSG_NOSIGNAL | (final ? 0 : MSG_DONTWAIT));
    while (n < 0 && errno == EINTR);
}

static void on_stop(evutil_socket_t fd, short what, void *arg);

static void stop(struct worker *w)
{
    if (w->stopping)
        return;
    /* The answers to requests in flight still count in the round trips:
     * sends stop now, the answers get ANSWER_WAIT_S (the pace tick checks). */
    if (!w->draining && w->up_start_ns && w->st.up_requests > w->st.replies) {
        struct timeval tv = {(time_t)ANSWER_WAIT_S, 0};
        w->draining = 1;
        w->up_start_ns = 0;
        w->drain_ev = event_new(w->base, -1, 0, on_stop, w);
        if (w->drain_ev && event_add(w->drain_ev, &tv) == 0)
            return;
    }
    w->stopping = 1;
    send_report(w, 1);
    event_base_loopbreak(w->base);
}

/* Opens connections while the schedule, the pending limit and the plan allow. */
static void open_more(struct worker *w)
{
    if (w->stopping)
        return;
    size_t due = w->cs.n;
    if (w->rate > 0) {
        double t = (double)(mono_ns() - w->start_ns) / 1e9;
        double d = w->rate * t + 1;
        if (d < (double)due)
            due = (size_t)d;
    }
    while (w->next < due && w->cs.pending < w->max_pending)
        conn_open(&w->cs, w->next++);
    /* After SIGUSR1: the parked connections, within the pending limit. */
    while (w->cs.resume_signalled && w->resume_next < w->cs.n && w->cs.pending < w->max_pending)
        if (w->cs.conns[w->resume_next++].phase == CP_PARKED)
            conn_open(&w->cs, w->resume_next - 1);
    /* The tick also paces --churn. */
    if (w->next == w->cs.n && w->pace_ev && w->churn_rate <= 0 && w->send_rate <= 0 &&
        w->request_rate <= 0 &&
        !(w->cs.resume_signalled && w->resume_next < w->cs.n))
        event_del(w->pace_ev);
    /* Every connection opened and ended: nothing left to wait for. */
    if (w->next == w->cs.n && w->st.open == 0 && w->st.parked == 0 && w->st.retrying == 0)
        stop(w);
}

/* --churn: the disconnects due since the churn began, each connection in
 * turn; the reset share spread evenly (every other one at 50%). Connections
 * that are closed when their turn comes are opened again. */
static void churn_due(struct worker *w)
{
    if (!w->churn_start_ns || w->stopping)
        return;
    double t = (double)(mono_ns() - w->churn_start_ns) / 1e9;
    uint64_t due = (uint64_t)(w->churn_rate * t);
    uint64_t pct = w->cs.o->churn_reset_pct;
    size_t misses = 0;
    while (w->churned < due && misses < w->cs.n) {
        size_t i = w->churn_next++ % w->cs.n;
        /* A reconnection that failed (or a stream the server ended) is tried
         * again in its turn, as a browser would, so the count holds steady. */
        if (w->cs.conns[i].phase == CP_CLOSED && w->cs.pending < w->max_pending) {
            conn_open(&w->cs, i);
            misses++;
            continue;
        }
        int reset = w->churned * pct / 100 != (w->churned + 1) * pct / 100;
        if (conn_churn(&w->cs, i, reset) == 0) {
            w->churned++;
            misses = 0;
        } else {
            misses++;
        }
    }
    /* Nothing streaming to end: skip those rather than catch up in a burst. */
    if (w->churned < due)
        w->churned = due;
}

/* --send-rate, --request-rate: the sends due since the streams were up, each
 * stream in turn (so each gets rate / streams a second, evenly spaced, far
 * below the server's --client-rate bucket when the rate is). A stream that
 * is not streaming is passed over; when none is, or a socket is full, the
 * send is skipped rather than caught up in a burst. Requests start half the
 * streams further on, so that one stream's message and request rarely
 * share a tick. */
static void send_due(struct worker *w, double rate, uint64_t *done, size_t *next, int request)
{
    if (rate <= 0 || !w->up_start_ns || w->stopping || !w->cs.n)
        return;
    double t = (double)(mono_ns() - w->up_start_ns) / 1e9;
    uint64_t due = (uint64_t)(rate * t);
    size_t misses = 0;
    while (*done < due && misses < w->cs.n) {
        size_t i = (*next)++ % w->cs.n;
        int r = conn_send_up(&w->cs, i, request);
        if (r == 1) {
            misses++;
            continue;
        }
        (*done)++;
        misses = 0;
    }
    if (*done < due)
        *done = due;
}

static void on_change(void *arg)
{
    struct worker *w = arg;
    open_more(w);
    /* Tell the parent at once when all are up: --hold counts from then. */
    if (!w->told_up && !w->stopping && w->st.welcomed + w->st.failed == w->st.planned) {
        w->told_up = 1;
        if (w->churn_rate > 0 && w->cs.n)
            w->churn_start_ns = mono_ns();
        if (w->send_rate > 0 || w->request_rate > 0) {
            w->up_start_ns = mono_ns();
            w->req_next = w->cs.n / 2;
        }
        send_report(w, 0);
    }
}

static void on_pace(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    struct worker *w = arg;
    if (w->draining && w->st.replies >= w->st.up_requests) {
        stop(w);
        return;
    }
    open_more(w);
    churn_due(w);
    send_due(w, w->send_rate, &w->up_done, &w->up_next, 0);
    send_due(w, w->request_rate, &w->req_done, &w->req_next, 1);
}

static void on_report(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    send_report(arg, 0);
}

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    stop(arg);      /* while draining (the answers' wait is over): now */
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    struct worker *w = arg;
    (void)what;
    /* SIGTERM is the parent's stop; SIGINT reaches the workers together with
     * the parent when ^C hits the process group. */
    if (sig == SIGINT)
        w->st.signalled = 1;
    stop(w);
}

static void on_resume(evutil_socket_t sig, short what, void *arg)
{
    struct worker *w = arg;
    (void)sig;
    (void)what;
    w->cs.resume_signalled = 1;
    if (w->cs.o->read_on_signal)
        conn_read_all(&w->cs);
    /* The pace tick goes on until every parked connection is open again. */
    if (w->pace_ev && !event_pending(w->pace_ev, EV_TIMEOUT, NULL)) {
        struct timeval tv = {0, PACE_TICK_US};
        event_add(w->pace_ev, &tv);
    }
    open_more(w);
}

static struct event *add_timer(struct worker *w, double seconds, short flags, event_callback_fn cb)
{
    struct timeval tv = {(time_t)seconds, (suseconds_t)((seconds - (double)(time_t)seconds) * 1e6)};
    struct event *ev = event_new(w->base, -1, flags, cb, w);
    if (ev)
        event_add(ev, &tv);
    return ev;
}

int worker_run(const struct client_opts *o, unsigned id, unsigned procs, int sock)
{
    static struct worker w;     /* static: its stats hold a 9 KB histogram */
    memset(&w, 0, sizeof w);
    w.sock = sock;
    w.st.magic = STATS_MAGIC;
    w.st.worker = id;
    w.rate = o->rate / procs;
    w.churn_rate = o->churn / procs;
    w.send_rate = o->send_rate / procs;
    w.request_rate = o->request_rate / procs;
    w.max_pending = o->pending / procs ? o->pending / procs : 1;
    signal(SIGPIPE, SIG_IGN);

    w.base = event_base_new();
    if (!w.base)
        return 1;
    if (o->record && record_open(o->record) != 0) {
        fprintf(stderr, "httpclient: worker %u: cannot open --record %s: %s\n", id, o->record,
                strerror(errno));
        return 1;
    }
    size_t n = worker_share(o, id, procs);
    w.st.planned = n;
    if (conn_set_init(&w.cs, w.base, o, &w.st, n, id, procs)) {
        fprintf(stderr, "httpclient: worker %u: out of memory for %zu connections\n", id, n);
        return 1;
    }
    w.cs.on_change = on_change;
    w.cs.arg = &w;
    w.start_ns = mono_ns();

    w.pace_ev = add_timer(&w, PACE_TICK_US / 1e6, EV_PERSIST, on_pace);
    w.report_ev = add_timer(&w, o->until_msgs ? 0.1 : 1.0, EV_PERSIST, on_report);
    w.bound_ev = add_timer(&w, o->max_time + ORPHAN_SLACK_S, 0, on_stop);
    w.stop_ev = event_new(w.base, sock, EV_READ, on_stop, &w);
    w.sigint_ev = evsignal_new(w.base, SIGINT, on_signal, &w);
    w.sigterm_ev = evsignal_new(w.base, SIGTERM, on_signal, &w);
    w.sigusr1_ev = evsignal_new(w.base, SIGUSR1, on_resume, &w);
    if (!w.pace_ev || !w.report_ev || !w.bound_ev || !w.stop_ev || !w.sigint_ev ||
        !w.sigterm_ev || !w.sigusr1_ev)
        return 1;
    event_add(w.stop_ev, NULL);
    event_add(w.sigint_ev, NULL);
    event_add(w.sigterm_ev, NULL);
    event_add(w.sigusr1_ev, NULL);
    /* The parent forked us with these blocked: a stop sent before the
     * handlers existed is delivered now instead of killing us. */
    sigset_t stops;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGUSR1);
    sigprocmask(SIG_UNBLOCK, &stops, NULL);

    open_more(&w);
    if (!w.stopping)
        event_base_dispatch(w.base);
    conn_close_all(&w.cs);
    return 0;
}
