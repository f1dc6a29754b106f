/* SPDX-License-Identifier: Apache-2.0 */
/* The replay's record (replay.h says how a replay runs). Apart, so that
 * the backlog, which carries it, needs the type and none of the replay's
 * functions. */
#ifndef HTTPDCNODE_REPLAY_T_H
#define HTTPDCNODE_REPLAY_T_H

#include "core/history.h"

#include <stdint.h>

/* 48 bytes, inside the backlog of a replaying stream. */
struct replay {
    struct history_cursor at;   /* 16: the id to give next, of the uid or of topic */
    uint32_t budget;            /* bytes of messages still allowed (a long-poll's answer) */
    uint32_t first;             /* the uid's oldest kept id when the client came back (0: none) */
    uint32_t given;             /* messages (and a long-poll's gap entries) given so far */
    uint32_t uid_next;          /* the uid's next id while a topic's are given */
    uint32_t topic;             /* the topic at is in (topic.h), 0: the uid */
    uint32_t topic_epoch;       /* its epoch then: a topic given up and made again is another */
    uint8_t active;
    uint8_t gap;                /* a gap of the uid's was told (a long-poll answer's "gap") */
};

#endif
