/* SPDX-License-Identifier: Apache-2.0 */
/* The server's parts started in one order and stopped in the reverse
 * (server.h). One row a part; a part's place is what it needs started
 * before it: the event loop before anything with an event, the rings
 * before outbound, presence and dispatch, the streams' table before the
 * transports register, the C-node last but the hand-over, which needs
 * everything else taken over first. */
#include "server.h"
#include "core/dispatch.h"
#include "core/drain.h"
#include "core/expiry.h"
#include "core/heartbeat.h"
#include "core/history_origins.h"
#include "core/inflight.h"
#include "core/outbound.h"
#include "core/presence.h"
#include "core/stream.h"
#include "core/topic.h"
#include "core/topic_join.h"
#include "core/topic_presence.h"
#include "core/uidtable.h"
#include "core/write_pool.h"
#include "erl/erl_cnode.h"
#include "http/admin.h"
#include "http/auth_http.h"
#include "http/http_front.h"
#include "lib/deflate_msg.h"
#include "lib/handoff.h"
#include "lib/log.h"
#include "obs/probe.h"
#include "transport/chunked.h"
#include "transport/poll.h"
#include "transport/sse.h"
#include "transport/ws.h"
#include "upgrade/upgrade.h"

#include <event2/event.h>

/* Room for messages the loop has not applied yet; past it the C-node stops
 * reading and Erlang's distribution buffers hold the rest. */
#define HANDOFF_BYTES (32u << 20)
/* Replies and presence going out to Erlang. */
#define OUTBOUND_BYTES (8u << 20)

/* Each layer's config from the options, once. */
static void configure(struct server *sv)
{
    const struct options *o = sv->opts;
    sv->history = (struct history_config){
        .max_users = o->max_users, .max_topics = o->max_topics, .per_uid = o->history,
        .per_topic = o->topic_history, .topic_bytes = (size_t)o->topic_history_bytes,
        .ttl_s = o->history_ttl, .topic_ttl_s = o->topic_history_ttl,
        .bytes = (size_t)o->history_bytes, .max_message = o->max_message,
        .file = o->history_file[0] ? o->history_file : NULL, .node = o->name};
    struct client_msg_config client = {.inbox = o->inbox[0] != '\0',
                                       .max_message = o->max_client_message,
                                       .rate = o->client_rate,
                                       .topics = o->max_topics > 0};
    struct http_origins origins = {o->allow_origin, o->n_allow_origin};
    sv->http = (struct http_config){
        .listen_host = o->listen_host, .listen_port = o->listen_port, .node = o->name,
        .max_users = o->max_users, .header_timeout = o->header_timeout,
        .keepalive = o->keepalive, .origins = origins, .trusted = o->trusted_proxy,
        .n_trusted = o->n_trusted_proxy, .client = client};
    sv->admin = (struct admin_config){.host = o->admin_host, .port = o->admin_port,
                                      .given = o->admin_explicit,
                                      .listen_host = o->listen_host,
                                      .listen_port = o->listen_port};
    sv->ws = (struct ws_config){.origins = origins, .deflate = o->ws_deflate, .client = client};
    sv->erl = (struct erl_config){
        .name = o->name, .cookie = o->cookie, .masters = o->masters,
        .n_masters = o->n_masters, .tick_seconds = o->erl_tick_seconds,
        .presence = o->presence, .inbox = o->inbox, .max_users = o->max_users,
        .max_message = o->max_message, .history = o->history, .history_ttl = o->history_ttl,
        .topic_linger = o->topic_history ? o->topic_history_ttl : 0};
}

/* ---------------------------------------------------------------- parts */

static int auth_start(struct server *sv)
{
    const struct options *o = sv->opts;
    return auth_http_configure(o->auth_secret_file, o->listen_host, o->listen_port) ? 2 : 0;
}
static void auth_stop(struct server *sv) { (void)sv; auth_http_free(); }

/* Taking over: what the running process hands over, before anything here
 * starts (each start below then takes its part). */
static int take_early(struct server *sv)
{
    if (!sv->opts->takeover)
        return 0;
    return upgrade_take_receive(sv->opts->name, sv->argc, sv->argv) != 0 ||
           upgrade_take_early() != 0;
}

static int base_start(struct server *sv)
{
    /* Ignore EVENT_* variables: the epoll changelist they can enable defers
     * deletes, which the stream detach relies on being immediate. */
    struct event_config *cfg = event_config_new();
    if (cfg)
        event_config_set_flag(cfg, EVENT_BASE_FLAG_IGNORE_ENV);
    sv->base = cfg ? event_base_new_with_config(cfg) : NULL;
    if (cfg)
        event_config_free(cfg);
    if (!sv->base)
        log_msg(LOG_ERROR, "cannot create the event loop");
    return !sv->base;
}
static void base_stop(struct server *sv) { event_base_free(sv->base); }

static int uids_start(struct server *sv)
{
    if (uidtable_init(sv->opts->max_users, presence_changed) == 0)
        return 0;
    log_msg(LOG_ERROR, "cannot allocate the uid table for %u users; lower --max-users",
            sv->opts->max_users);
    return 1;
}
static void uids_stop(struct server *sv) { (void)sv; uidtable_free(); }

/* The transports register their routes and their tables for the core. */
static int transports_start(struct server *sv)
{
    return chunked_init() != 0 || sse_init() != 0 ||
           poll_init(sv->opts->poll_timeout, sv->opts->max_backlog) != 0;
}

/* The history, then where the masters' numbered streams stand in it. */
static int history_start(struct server *sv)
{
    if (history_init(&sv->history) != 0)
        return 1;
    history_origins_start(sv->history.max_users + sv->history.max_topics);
    return 0;
}

static void history_stop(struct server *sv)
{
    (void)sv;
    history_origins_stop();
    history_free();
}

static int probe_part_start(struct server *sv)
{
    probe_enabled = sv->opts->probe_latency;
    if (!probe_enabled || probe_start() == 0)
        return 0;
    log_msg(LOG_ERROR, "cannot allocate the latency probe; run without --probe-latency");
    return 1;
}
static void probe_part_stop(struct server *sv) { (void)sv; probe_free(); }

static int writers_start(struct server *sv)
{
    if (write_pool_start(sv->opts->writers - 1) == 0)
        return 0;
    log_msg(LOG_ERROR, "cannot start %u writer threads; lower --writers", sv->opts->writers - 1);
    return 1;
}
static void writers_stop(struct server *sv) { (void)sv; write_pool_stop(); }

static int streams_start(struct server *sv)
{
    const struct options *o = sv->opts;
    return stream_configure(&(struct stream_config){
               .base = sv->base, .max_backlog = o->max_backlog,
               .max_backlog_total = o->max_backlog_total,
               .max_conns_per_uid = o->max_conns_per_uid,
               .closing = topic_stream_close}) != 0;
}
static void streams_stop(struct server *sv) { (void)sv; stream_unconfigure(); }

/* Compressed messages (--ws-deflate): nothing to start, the deflater is
 * made at its first use; freed after everything that may use it. */
static void deflate_stop(struct server *sv) { (void)sv; deflate_msg_free(); }

static int rings_start(struct server *sv)
{
    sv->inbox = handoff_new(HANDOFF_BYTES);
    sv->outbox = handoff_new(OUTBOUND_BYTES);
    if (!sv->inbox || !sv->outbox) {
        log_msg(LOG_ERROR, "cannot allocate the hand-off queues");
        return 1;
    }
    outbound_init(sv->outbox);
    return 0;
}
static void rings_stop(struct server *sv)
{
    handoff_free(sv->inbox);
    handoff_free(sv->outbox);
    sv->inbox = sv->outbox = NULL;
}

/* First of the doors: an unusable --admin-listen is its one line. */
static int admin_part_start(struct server *sv) { return admin_start(sv->base, &sv->admin); }
static void admin_part_stop(struct server *sv) { (void)sv; admin_stop(); }

/* Once nothing can refuse to start (a refusal is one line). Shown even
 * with -q: anyone on the host can read another's argv. */
static int cookie_warning(struct server *sv)
{
    if (sv->opts->cookie_in_argv)
        log_msg(LOG_ERROR, "warning: --cookie is visible to every user of this host in the "
                           "process list (ps); use --cookie-file FILE (mode 0600) instead");
    return 0;
}

/* Topics: who may join what, the topic index, and topic presence (which
 * rides on uid presence's snapshots). */
static int topics_start(struct server *sv)
{
    const struct options *o = sv->opts;
    topic_join_configure((enum topic_auth)o->topic_auth);
    /* A topic no stream holds lingers as long as its history may serve a
     * client coming back (and the masters keep sending it). */
    uint32_t linger = sv->erl.topic_linger;
    if (topic_presence_init(sv->base, o->presence[0] != '\0', o->presence_topics,
                            o->max_topics) != 0 ||
        topic_init(&(struct topic_config){.base = sv->base, .max_users = o->max_users,
                                          .max_topics = o->max_topics,
                                          .per_stream = o->topics_per_stream,
                                          .per_topic = o->streams_per_topic,
                                          .linger_s = linger,
                                          .changed = topic_presence_changed,
                                          .gone = topic_presence_gone,
                                          .member = topic_presence_member}) != 0)
        return 1;
    presence_on_snapshot(topic_presence_snapshot);
    return 0;
}
static void topics_stop(struct server *sv)
{
    (void)sv;
    topic_join_free();
    topic_free();
    topic_presence_free();
}

static int inflight_start(struct server *sv)
{
    presence_conns_enable(sv->opts->presence_conns);
    inflight_configure(sv->opts->max_input_total);
    return 0;
}
static void inflight_stop(struct server *sv) { (void)sv; inflight_free(); }

static int presence_start(struct server *sv)
{
    return presence_init(sv->base, sv->opts->presence[0] != '\0', sv->opts->max_users) != 0;
}
static void presence_stop(struct server *sv) { (void)sv; presence_free(); }

static int dispatch_part_start(struct server *sv)
{
    return dispatch_start(sv->base, sv->inbox, sv->opts->max_users) != 0;
}
static void dispatch_part_stop(struct server *sv) { (void)sv; dispatch_stop(); }

static int heartbeat_part_start(struct server *sv)
{
    return heartbeat_start(sv->base, sv->opts->heartbeat) != 0;
}
static void heartbeat_part_stop(struct server *sv) { (void)sv; heartbeat_stop(); }

static int ws_start(struct server *sv) { return ws_init(&sv->ws) != 0; }
static void ws_stop(struct server *sv) { (void)sv; ws_free(); }

static int drain_part_start(struct server *sv) { return drain_init(sv->base) != 0; }
static void drain_part_stop(struct server *sv) { (void)sv; drain_free(); }

static int expiry_start(struct server *sv)
{
    const struct options *o = sv->opts;
    return expiry_init(sv->base, o->token_expiry && o->auth_secret_file[0] != '\0',
                       stream_end_why) != 0;
}
static void expiry_stop(struct server *sv) { (void)sv; expiry_free(); }

static int front_start(struct server *sv) { return http_front_start(sv->base, &sv->http) != 0; }
static void front_stop(struct server *sv) { (void)sv; http_front_stop(); }

static int cnode_prepare(struct server *sv)
{
    return erl_cnode_prepare(&sv->erl, sv->inbox, sv->outbox) != 0;
}

/* The streams last; then the running process lets go, and only then is a
 * socket of it read or written here. */
static int take_late(struct server *sv)
{
    return sv->opts->takeover && (upgrade_take_late() != 0 || upgrade_take_commit() != 0);
}

/* From here the C-node thread uses the rings: a part that fails after it
 * leaves everything to the exit. */
static int cnode_run(struct server *sv)
{
    sv->cnode_running = 1;
    return erl_cnode_run() != 0;
}

static int upgrade_start(struct server *sv)
{
    if (sv->opts->takeover)
        upgrade_notify_main_pid();
    upgrade_spawn_init(sv->argc, sv->argv);
    return upgrade_serve(sv->base, sv->opts->name, sv->argc, sv->argv) != 0;
}
static void upgrade_stop(struct server *sv) { (void)sv; upgrade_serve_stop(); }

/* ---------------------------------------------------------------- the table */

struct part {
    unsigned parts;                         /* SERVER_CORE or SERVER_DOORS */
    int (*start)(struct server *sv);        /* 0, or the exit status; NULL: nothing */
    void (*stop)(struct server *sv);        /* NULL: nothing (or done by a signal) */
};

static const struct part table[] = {
    {SERVER_DOORS, auth_start, auth_stop},
    {SERVER_DOORS, take_early, NULL},
    {SERVER_CORE, base_start, base_stop},
    {SERVER_CORE, uids_start, uids_stop},
    {SERVER_DOORS, transports_start, NULL},
    {SERVER_CORE, history_start, history_stop},
    {SERVER_CORE, probe_part_start, probe_part_stop},
    {SERVER_CORE, writers_start, writers_stop},
    {SERVER_CORE, streams_start, streams_stop},
    {SERVER_CORE, NULL, deflate_stop},
    {SERVER_CORE, rings_start, rings_stop},
    {SERVER_DOORS, admin_part_start, admin_part_stop},  /* main.c's first signal stops it */
    {SERVER_DOORS, cookie_warning, NULL},
    {SERVER_CORE, topics_start, topics_stop},
    {SERVER_CORE, inflight_start, inflight_stop},
    {SERVER_CORE, presence_start, presence_stop},
    {SERVER_CORE, dispatch_part_start, dispatch_part_stop},
    {SERVER_DOORS, heartbeat_part_start, heartbeat_part_stop},
    {SERVER_DOORS, ws_start, ws_stop},
    {SERVER_DOORS, drain_part_start, drain_part_stop},
    {SERVER_DOORS, expiry_start, expiry_stop},
    {SERVER_DOORS, front_start, front_stop},        /* main.c's first signal stops it */
    {SERVER_DOORS, cnode_prepare, NULL},            /* erl_cnode_stop: when drained */
    {SERVER_DOORS, take_late, NULL},
    {SERVER_DOORS, cnode_run, NULL},
    {SERVER_DOORS, upgrade_start, upgrade_stop},
};

#define NPARTS (sizeof table / sizeof table[0])

int server_start(struct server *sv, const struct options *opts, unsigned parts, int argc,
                 char **argv)
{
    *sv = (struct server){.opts = opts, .parts = parts, .argc = argc, .argv = argv};
    configure(sv);
    for (; sv->started < NPARTS; sv->started++) {
        const struct part *p = &table[sv->started];
        int r = p->parts & parts && p->start ? p->start(sv) : 0;
        if (r != 0) {
            if (!sv->cnode_running)
                server_stop(sv);
            return r;
        }
    }
    return 0;
}

void server_stop(struct server *sv)
{
    while (sv->started > 0) {
        const struct part *p = &table[--sv->started];
        if (p->parts & sv->parts && p->stop)
            p->stop(sv);
    }
}
