/* What the event loop asks the C-node thread to send to Erlang: replies
 * ({Ref, N}, {Ref, Stats}) and presence, through the outbox ring (the
 * inbox is erl_inbound.h's, the other way); the loop never waits on it: when full, the record is dropped and
 * counted (replies_dropped). */
#ifndef HTTPDCNODE_OUTBOUND_H
#define HTTPDCNODE_OUTBOUND_H

#include <stddef.h>
#include <stdint.h>

#include "lib/handoff.h"
#include "obs/stats.h"

enum out_kind { OUT_ACK = 1, OUT_STATS, OUT_PRESENCE };
/* PRESENCE_SNAPSHOT is a snapshot's first piece (replaces), the others are
 * PRESENCE_SNAPSHOT_MORE (add), right after it. */
enum presence_op { PRESENCE_UP = 1, PRESENCE_DOWN, PRESENCE_SNAPSHOT, PRESENCE_SNAPSHOT_MORE };

/* Record layout: header, then the kind's body. */
struct out_rec {
    uint8_t kind;          /* enum out_kind */
    uint8_t op;            /* enum presence_op, OUT_PRESENCE */
    union {
        uint16_t reply_len; /* encoded {Pid, Ref} bytes, OUT_ACK and OUT_STATS */
        uint16_t to_all;    /* OUT_PRESENCE snapshot: for every master, not who asked */
    };
    uint32_t count;        /* N for OUT_ACK, pairs for OUT_STATS, uids for OUT_PRESENCE */
    /* OUT_ACK:      reply bytes
     * OUT_STATS:    struct stat_pair[count], then reply bytes
     * OUT_PRESENCE: uint32_t uids[count] */
};

void outbound_init(struct handoff *outbox);

void outbound_ack(const char *reply, uint16_t reply_len, uint32_t n);
void outbound_stats(const char *reply, uint16_t reply_len);
/* -1 when the queue was full (counted): the caller must repair the view. */
int outbound_presence(enum presence_op op, int to_all, const uint32_t *uids, uint32_t n);

#endif
