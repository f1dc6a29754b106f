/* SPDX-License-Identifier: Apache-2.0 */
/* What the C-node is configured with: server.c makes it from the options
 * once. Apart (a header with no source) so that erl_cnode.c and
 * erl_send.c share it without including each other. Strings point into
 * the options, which outlive the server. */
#ifndef HTTPDCNODE_ERL_CONFIG_H
#define HTTPDCNODE_ERL_CONFIG_H

#include <stdint.h>

struct erl_config {
    const char *name;           /* --name alive@host, this C-node */
    const char *cookie;
    const char (*masters)[256]; /* --master: nodes to connect out to */
    uint32_t n_masters;         /* at most ERL_SETUP_MASTERS_MAX */
    uint32_t tick_seconds;      /* --erl-tick-seconds: a silent master is dropped */
    const char *presence;       /* --presence on each master, "" for none */
    const char *inbox;          /* --inbox, "" for none */
    uint32_t max_users;         /* uids 1..max_users */
    uint32_t max_message;       /* bytes per message payload */
    uint32_t history;           /* the hello tells these (messages per uid, */
    uint32_t history_ttl;       /*   and seconds, */
    uint32_t topic_linger;      /*   and how long a topic no stream holds is kept) */
};

#endif
