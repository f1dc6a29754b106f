/* SPDX-License-Identifier: Apache-2.0 */
/* The records of a hot upgrade: see upgrade_parts.h. */
#include "upgrade/upgrade_parts.h"
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
#include "erl/erl_link.h"
#include "erl/erl_seq.h"
#include "http/admin.h"
#include "http/http_front.h"
#include "obs/stats.h"
#include "transport/ws_reader.h"
#include "upgrade/upgrade.h"

#include <stdlib.h>
#include <string.h>

const struct upgrade_part upgrade_parts[] = {
    {UPGRADE_CARRY_TAG, UPGRADE_CARRY_VERSION, "the control socket"},
    {HISTORY_CARRY_TAG, HISTORY_CARRY_VERSION, "the history"},
    {HTTP_FRONT_CARRY_TAG, HTTP_FRONT_CARRY_VERSION, "the listening socket"},
    {ADMIN_CARRY_TAG, ADMIN_CARRY_VERSION, "the admin listening socket"},
    {ERL_CNODE_CARRY_TAG, ERL_CNODE_CARRY_VERSION, "the Erlang node"},
    {ERL_LINK_CARRY_TAG, ERL_LINK_CARRY_VERSION, "the Erlang links"},
    {ERL_SEQ_CARRY_TAG, ERL_SEQ_CARRY_VERSION, "the masters' numbered streams"},
    {PRESENCE_CARRY_TAG, PRESENCE_CARRY_VERSION, "presence"},
    {STREAM_CARRY_TAG, STREAM_CARRY_VERSION, "the streams"},
    {BACKLOG_CARRY_TAG, BACKLOG_CARRY_VERSION, "the streams' unsent bytes"},
    {CONN_CARRY_TAG, CONN_CARRY_VERSION, "the connection ids"},
    {EXPIRY_CARRY_TAG, EXPIRY_CARRY_VERSION, "the token expiries"},
    {TOPIC_CARRY_TAG, TOPIC_CARRY_VERSION, "the topics and their streams"},
    {TOPIC_JOIN_CARRY_TAG, TOPIC_JOIN_CARRY_VERSION, "the WebSockets' topic claims"},
    {TOPIC_PRESENCE_CARRY_TAG, TOPIC_PRESENCE_CARRY_VERSION, "the topics' presence"},
    {WS_READER_CARRY_TAG, WS_READER_CARRY_VERSION, "the WebSocket frames in flight"},
    {STATS_CARRY_TAG, STATS_CARRY_VERSION, "the counters"},
};

const size_t upgrade_nparts = sizeof upgrade_parts / sizeof upgrade_parts[0];

const struct upgrade_part *upgrade_part_find(uint32_t tag)
{
    for (size_t i = 0; i < upgrade_nparts; i++)
        if (upgrade_parts[i].tag == tag)
            return &upgrade_parts[i];
    return NULL;
}

uint32_t upgrade_format(void)
{
    const char *s = getenv("HTTPDCNODE_TAKEOVER_FORMAT");
    return s && *s ? (uint32_t)strtoul(s, NULL, 10) : UPGRADE_FORMAT;
}

size_t upgrade_options(int argc, char **argv, char *out, size_t size)
{
    size_t len = 0;
    for (int i = 1; i < argc; i++) {
        size_t n = strlen(argv[i]) + 1;
        if (strcmp(argv[i], "--takeover") == 0)
            continue;
        if (len + n > size)
            return size + 1;             /* too long to compare: never equal */
        memcpy(out + len, argv[i], n);
        len += n;
    }
    return len;
}
