/* The replay's record (replay.h says how a replay runs). Apart, so that
 * the backlog, which carries it, needs the type and none of the replay's
 * functions. */
#ifndef HTTPDCNODE_REPLAY_T_H
#define HTTPDCNODE_REPLAY_T_H

#include "core/history.h"

#include <stdint.h>

/* 32 bytes, inside the backlog of a replaying stream. */
struct replay {
    struct history_cursor at;   /* 16: the id to give next */
    uint32_t budget;            /* bytes of messages still allowed (a long-poll's answer) */
    uint32_t first;             /* the oldest kept id when the client came back (0: none) */
    uint32_t given;             /* messages given so far */
    uint8_t active;
    uint8_t gap;                /* a gap was told (a long-poll answer's "gap") */
};

#endif
