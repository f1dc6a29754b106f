/* SPDX-License-Identifier: Apache-2.0 */
/* Command-line options of the server: src/options.c's table, one row an
 * option, reads them into struct options; server.c hands each layer its
 * own config struct made from them (no layer includes this file). */
#ifndef HTTPDCNODE_OPTIONS_H
#define HTTPDCNODE_OPTIONS_H

#include "core/client_rate.h"
#include "erl/erl_setup.h"
#include "http/http_config.h"
#include "lib/peer_addr.h"

#include <stddef.h>
#include <stdint.h>

/* Largest --max-message: a message must fit a hand-off record (main.c's
 * ring is 32 MB; records up to half of it) with its uid list. */
#define MAX_MESSAGE_LIMIT (8u << 20)

#define ALLOW_ORIGIN_MAX HTTP_ORIGIN_MAX
#define TRUSTED_PROXY_MAX HTTP_TRUSTED_MAX
/* --master a@h,b@h: masters linked at once, at most. */
#define MASTERS_MAX ERL_SETUP_MASTERS_MAX

struct options {
    char listen_host[64];      /* --listen ADDR:PORT */
    uint16_t listen_port;
    char admin_host[64];       /* --admin-listen ADDR:PORT: /stats, /metrics, /probe */
    uint16_t admin_port;       /* 0: no admin listener (--admin-listen "") */
    int admin_explicit;        /* given on the command line (else the default) */
    char name[256];            /* --name alive@host, this C-node */
    char masters[MASTERS_MAX][256]; /* --master: nodes to connect out to */
    uint32_t n_masters;        /* 0: none (--master "") */
    uint32_t erl_tick_seconds; /* a master silent this long is dropped (net_ticktime) */
    char cookie[256];          /* --cookie-file, --cookie, $ERLANG_COOKIE or ~/.erlang.cookie */
    char cookie_file[4096];    /* --cookie-file, "" for none */
    int cookie_in_argv;        /* --cookie: visible in ps, main warns once */
    char presence[256];        /* --presence NAME on the master, "" for none */
    char inbox[256];           /* --inbox NAME on the master, "" for none */
    int presence_conns;        /* --presence-conns: conn_up / conn_down too */
    int ws_deflate;            /* --ws-deflate: permessage-deflate for WebSockets that offer it */
    uint32_t max_client_message; /* bytes per client message */
    uint32_t client_rate;      /* client messages per second per connection */
    uint32_t max_users;        /* uids 1..max_users */
    uint32_t max_message;      /* bytes per message payload */
    uint32_t max_conns_per_uid;
    uint32_t max_backlog;      /* unsent bytes per stream before it is ended */
    uint64_t max_backlog_total; /* unsent bytes of all streams before the largest go */
    uint64_t max_input_total;  /* client bytes held until whole, all connections */
    uint32_t header_timeout;   /* seconds from a request's first byte to its end */
    uint32_t keepalive;        /* TCP keepalive idle seconds, 0 off */
    uint32_t history;          /* messages kept per uid, 0 off */
    uint32_t history_ttl;      /* seconds a kept message lives */
    uint64_t history_bytes;    /* all kept messages together */
    char history_file[4096];   /* --history-file: ids and history outlive the process; "" none */
    uint32_t heartbeat;        /* seconds between SSE comments / WebSocket pings, 0 off */
    uint32_t poll_timeout;     /* seconds a long-poll waits for a message */
    char allow_origin[ALLOW_ORIGIN_MAX][HTTP_ORIGIN_BYTES];   /* --allow-origin, repeatable; "*" any */
    uint32_t n_allow_origin;
    struct peer_net trusted_proxy[TRUSTED_PROXY_MAX]; /* --trusted-proxy, repeatable */
    uint32_t n_trusted_proxy;
    uint32_t writers;          /* --writers: threads writing large batches, loop included */
    int probe_latency;         /* --probe-latency */
    char auth_secret_file[4096]; /* --auth-secret-file, "" for open mode */
    uint32_t drain_seconds;    /* --drain-seconds: SIGTERM ends the streams over this long */
    int token_expiry;          /* a token's stream ends at its exp (--no-token-expiry: 0) */
    int takeover;              /* --takeover: from the process running as this --name */
    int verbosity;             /* 0 quiet, 1 default, 2 verbose */
    int list_counters;         /* --list-counters: print them and exit (main) */
    uint32_t max_topics;       /* --max-topics: topics held at once, 0 none */
    uint32_t topics_per_stream; /* --max-topics-per-stream */
    uint32_t streams_per_topic; /* --max-streams-per-topic */
    uint32_t topic_history;    /* --topic-history: messages kept per topic */
    uint64_t topic_history_bytes; /* --topic-history-bytes: a topic's kept messages together */
    uint32_t topic_history_ttl; /* --topic-history-ttl: seconds a topic's kept message lives */
    int topic_auth;            /* --topic-auth: enum topic_auth (core/topic_join.h) */
    int presence_topics;       /* --presence-topics: joins and leaves to --presence */
};

/* Parses argv into opts. Returns 0 to run (or, with opts->list_counters,
 * to list the counters: no cookie is looked for then), 1 when
 * --help, --list-options or --version was handled (exit 0), -1 after
 * printing one error line on stderr (exit 2). */
int options_parse(struct options *opts, int argc, char **argv);

/* Every option's default, as if none were given (no cookie looked for). */
void options_defaults(struct options *opts);

#endif
