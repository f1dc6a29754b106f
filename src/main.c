/* httpdcnode: start-up, signals and shutdown. */
#include "http/admin.h"
#include "auth/auth_http.h"
#include "erl/erl_cnode.h"
#include "core/inflight.h"
#include "core/dispatch.h"
#include "core/drain.h"
#include "core/expiry.h"
#include "lib/deflate_msg.h"
#include "lib/handoff.h"
#include "core/history.h"
#include "http/http_front.h"
#include "obs/metrics.h"
#include "obs/probe.h"
#include "lib/log.h"
#include "options.h"
#include "core/outbound.h"
#include "core/presence.h"
#include "core/heartbeat.h"
#include "transport/sse.h"
#include "transport/poll.h"
#include "http/client_addr.h"
#include "http/cors.h"
#include "core/stream.h"
#include "core/topic.h"
#include "core/topic_join.h"
#include "core/topic_presence.h"
#include "core/uidtable.h"
#include "core/write_pool.h"
#include "transport/chunked.h"
#include "transport/ws.h"
#include "upgrade/upgrade.h"

#include <event2/event.h>
#include <signal.h>
#include <stdlib.h>

/* Room for messages the loop has not applied yet; past it the C-node stops
 * reading and Erlang's distribution buffers hold the rest. */
#define HANDOFF_BYTES (32u << 20)
/* Replies and presence going out to Erlang. */
#define OUTBOUND_BYTES (8u << 20)

static struct event_base *base;
/* File-scope, as base: what a start-up that stops half-way leaves is
 * still reachable at exit, not a leak. */
static struct handoff *inbox, *outbox;
static int shutting_down;
static int cnode_joined;

static uint32_t drain_seconds;      /* --drain-seconds */

/* The drain is over: the C-node goes, then the loop. */
static void on_drained(void)
{
    cnode_joined = erl_cnode_stop() == 0;
    event_base_loopbreak(base);
}

/* The first SIGTERM or SIGINT drains (the C-node still delivers to the
 * streams not ended yet), a second ends the rest at once. */
static void on_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    if (shutting_down) {
        log_msg(LOG_INFO, "signal %d again: ending the streams left now", (int)sig);
        drain_now();
        return;
    }
    shutting_down = 1;
    upgrade_serve_draining();
    log_msg(LOG_INFO, "signal %d: draining the streams over %u s, then exiting", (int)sig,
            drain_seconds);
    http_front_stop();
    admin_stop();
    drain_start(drain_seconds, on_drained);
}

/* SIGUSR2: a new process takes over (upgrade.h); SIGCHLD: it ended. */
static void on_upgrade_signal(evutil_socket_t sig, short what, void *arg)
{
    (void)what;
    (void)arg;
    if (sig == SIGUSR2 && !shutting_down)
        upgrade_spawn();
    else if (sig == SIGCHLD)
        upgrade_reap();
}

static struct event_base *new_base(void)
{
    /* Ignore EVENT_* variables: the epoll changelist they can enable defers
     * deletes, which the stream detach relies on being immediate. */
    struct event_config *cfg = event_config_new();
    event_config_set_flag(cfg, EVENT_BASE_FLAG_IGNORE_ENV);
    struct event_base *b = event_base_new_with_config(cfg);
    event_config_free(cfg);
    return b;
}

int main(int argc, char **argv)
{
    struct options opts;
    int r = options_parse(&opts, argc, argv);
    if (r != 0)
        return r > 0 ? 0 : 2;
    if (opts.list_counters) {
        metrics_list(stdout);
        return 0;
    }
    log_set_level(opts.verbosity);
    if (auth_http_configure(&opts) != 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);
    /* A reload (SIGUSR2) before the loop takes it must not kill us. */
    signal(SIGUSR2, SIG_IGN);
    /* Taking over: what the running process hands over, before anything
     * here starts (each start below then takes its part). */
    if (opts.takeover && (upgrade_take_receive(&opts, argc, argv) != 0 ||
                          upgrade_take_early() != 0))
        return 1;

    base = new_base();
    if (!base) {
        log_msg(LOG_ERROR, "cannot create the event loop");
        return 1;
    }
    if (uidtable_init(opts.max_users, presence_changed) != 0) {
        log_msg(LOG_ERROR, "cannot allocate the uid table for %u users; lower --max-users",
                opts.max_users);
        return 1;
    }
    /* The transports register their routes and their tables for the core. */
    if (chunked_init() != 0 || sse_init() != 0 || poll_init(opts.poll_timeout, opts.max_backlog) != 0)
        return 1;
    cors_configure(&opts);
    client_addr_configure(&opts);
    if (history_init(&(struct history_config){.max_users = opts.max_users,
                                              .max_topics = opts.max_topics,
                                              .per_uid = opts.history,
                                              .per_topic = opts.topic_history,
                                              .ttl_s = opts.history_ttl,
                                              .bytes = (size_t)opts.history_bytes,
                                              .max_message = opts.max_message,
                                              .file = opts.history_file[0] ? opts.history_file
                                                                           : NULL,
                                              .node = opts.name}) != 0)
        return 1;
    if (opts.probe_latency && probe_start() != 0) {
        log_msg(LOG_ERROR, "cannot allocate the latency probe; run without --probe-latency");
        return 1;
    }
    probe_enabled = opts.probe_latency;
    if (write_pool_start(opts.writers - 1) != 0) {
        log_msg(LOG_ERROR, "cannot start %u writer threads; lower --writers", opts.writers - 1);
        return 1;
    }
    if (stream_configure(&(struct stream_config){.base = base,
                                                  .max_backlog = opts.max_backlog,
                                                  .max_backlog_total = opts.max_backlog_total,
                                                  .max_conns_per_uid = opts.max_conns_per_uid,
                                                  .closing = topic_stream_close}) != 0)
        return 1;

    inbox = handoff_new(HANDOFF_BYTES);
    outbox = handoff_new(OUTBOUND_BYTES);
    if (!inbox || !outbox) {
        log_msg(LOG_ERROR, "cannot allocate the hand-off queues");
        return 1;
    }
    outbound_init(outbox);
    r = admin_start(base, &opts);       /* first: an unusable --admin-listen is its one line */
    if (r != 0)
        return r;
    /* Once nothing can refuse to start (a refusal is one line). Shown even
     * with -q: anyone on the host can read another's argv. */
    if (opts.cookie_in_argv)
        log_msg(LOG_ERROR, "warning: --cookie is visible to every user of this host in the "
                           "process list (ps); use --cookie-file FILE (mode 0600) instead");
    presence_conns_enable(opts.presence_conns);
    topic_join_configure((enum topic_auth)opts.topic_auth);
    /* A topic no stream holds lingers as long as its history may serve a
     * client coming back (and the masters keep sending it). */
    uint32_t linger = opts.topic_history ? opts.history_ttl : 0;
    if (topic_presence_init(base, opts.presence[0] != '\0', opts.presence_topics,
                            opts.max_topics) != 0 ||
        topic_init(&(struct topic_config){.base = base, .max_users = opts.max_users,
                                          .max_topics = opts.max_topics,
                                          .per_stream = opts.topics_per_stream,
                                          .per_topic = opts.streams_per_topic,
                                          .linger_s = linger,
                                          .changed = topic_presence_changed,
                                          .gone = topic_presence_gone,
                                          .member = topic_presence_member}) != 0)
        return 1;
    presence_on_snapshot(topic_presence_snapshot);
    inflight_configure(opts.max_input_total);
    if (presence_init(base, opts.presence[0] != '\0', opts.max_users) != 0 ||
        dispatch_start(base, inbox, opts.max_users) != 0 ||
        heartbeat_start(base, opts.heartbeat) != 0 || ws_init(&opts) != 0 || drain_init(base) != 0 ||
        expiry_init(base, opts.token_expiry && opts.auth_secret_file[0] != '\0', stream_end_why) != 0 ||
        http_front_start(base, &opts) != 0 || erl_cnode_prepare(&opts, inbox, outbox) != 0)
        return 1;
    /* The streams last; then the running process lets go, and only then is
     * a socket of it read or written here. */
    if (opts.takeover && (upgrade_take_late() != 0 || upgrade_take_commit() != 0))
        return 1;
    if (erl_cnode_run() != 0)
        return 1;
    if (opts.takeover)
        upgrade_notify_main_pid();
    upgrade_spawn_init(argc, argv);
    if (upgrade_serve(base, &opts, argc, argv) != 0)
        return 1;

    drain_seconds = opts.drain_seconds;
    struct event *sigint = evsignal_new(base, SIGINT, on_signal, NULL);
    struct event *sigterm = evsignal_new(base, SIGTERM, on_signal, NULL);
    struct event *sigusr2 = evsignal_new(base, SIGUSR2, on_upgrade_signal, NULL);
    struct event *sigchld = evsignal_new(base, SIGCHLD, on_upgrade_signal, NULL);
    evsignal_add(sigint, NULL);
    evsignal_add(sigterm, NULL);
    evsignal_add(sigusr2, NULL);
    evsignal_add(sigchld, NULL);

    event_base_dispatch(base);

    log_msg(LOG_INFO, "stopped");
    if (!cnode_joined)
        return 0;
    event_free(sigint);
    event_free(sigterm);
    event_free(sigusr2);
    event_free(sigchld);
    upgrade_serve_stop();
    dispatch_stop();
    drain_free();
    expiry_free();
    heartbeat_stop();
    ws_free();
    deflate_msg_free();
    stream_unconfigure();
    presence_free();
    topic_join_free();
    topic_free();
    topic_presence_free();
    event_base_free(base);
    handoff_free(inbox);
    handoff_free(outbox);
    uidtable_free();
    history_free();
    write_pool_stop();
    probe_free();
    auth_http_free();
    inflight_free();
    return 0;
}
