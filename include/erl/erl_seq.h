/* SPDX-License-Identifier: Apache-2.0 */
/* The numbered streams of the masters ({httpdcnode_seq, Master, Inc, Seq,
 * Inner}, erl_term.h): each master numbers what it sends this node, per
 * run of its own (Inc), and keeps a copy until acknowledged; it may send a
 * message again, on its link or through another master. Here, per origin
 * (the master's node name and run), every number is applied once and in
 * order: a number already applied is a duplicate, dropped and counted; one
 * past the next due waits here (a copy, bounded) until the numbers before
 * it came. What the loop has applied (handoff_consumed) is acknowledged to
 * the origin in batches, on the link its last message came by. A master's
 * runs are told apart by Inc, which grows from one to the next (it is the
 * master's clock when the run began).
 *
 * A hole no message fills within ERL_SEQ_HOLE_MS is given up (counted in
 * seq_skipped): a master keeps everything until acknowledged and sends in
 * the place of what it had to drop a gap for its uids (a CMD_GAP), so only
 * a master that died with messages on their way leaves one. While the
 * hole's own master has no link to this node (a link that died silently,
 * what was on it lost, and that master's later messages came through
 * another), the hole waits up to ERL_SEQ_HOLE_UNLINKED_MS: that master
 * still holds the missing numbers and sends them again once its link is
 * back; from then, ERL_SEQ_HOLE_MS. Whose they
 * were nobody knows: every uid is told a gap (CMD_GAP_ALL, erl_inbound.c).
 * A message of a master's older run, late, is told as a gap to its uids.
 *
 * With a --history-file the loop keeps where each origin's stream stands
 * with the messages (core/history_origins.h), in the record of the same
 * slot: it is told each slot's master and run (CMD_SEQ_RUN) before the
 * first message of it, and each message carries its slot and number
 * (cmd_mark). A restart takes back what the file held (erl_seq_restore):
 * each master found there has its slot again, its numbers going on after
 * the last the file holds all of, which its hello tells it.
 * C-node thread only. */
#ifndef HTTPDCNODE_ERL_SEQ_H
#define HTTPDCNODE_ERL_SEQ_H

#include "core/cmd.h"
#include "lib/carry.h"

#include <ei.h>
#include <stddef.h>
#include <stdint.h>

/* Origins tracked at most: masters, each named once (a new run replaces
 * its old one). A numbered message of one more is applied unnumbered
 * (counted in seq_untracked). */
#define ERL_SEQ_ORIGINS 16
/* Bytes of messages waiting for a number before them, all origins: past
 * this a message is not kept (nor acknowledged: its master sends it again). */
#define ERL_SEQ_HELD_MAX (16u << 20)
/* How long a hole may wait for the messages that fill it. */
#define ERL_SEQ_HOLE_MS 10000
/* ... while the hole's own master is not linked to this node: the
 * masters' unacked_max_ms (30 s by default), what they keep at most. A
 * master linked again within it sends the missing numbers at once; the
 * hole then waits ERL_SEQ_HOLE_MS more from its link at most. So a hole
 * waits 40 s at most in all, and the messages behind it as long. */
#define ERL_SEQ_HOLE_UNLINKED_MS 30000
/* Acknowledgements go at most this long after the loop applied a message,
 * or at once after ERL_SEQ_ACK_EVERY of them. */
#define ERL_SEQ_ACK_MS 5
#define ERL_SEQ_ACK_EVERY 256

/* A message that came before its turn: a copy of the whole Erlang message. */
struct erl_seq_held {
    struct erl_seq_held *prev, *next;
    uint64_t seq, last;
    uint32_t len;
    uint32_t pad;
    char term[];           /* version byte first */
};

/* One origin: about 900 bytes, ERL_SEQ_ORIGINS of them. */
struct erl_seq_origin {
    char master[MAXATOMLEN];    /* the master's node name, "" for a free slot */
    uint64_t name_hash;         /* XXH3 of it (history_origins.h) */
    char ack_to[MAXATOMLEN];    /* where acknowledgements go there, "" before the base */
    char path[MAXNODELEN + 1];  /* the link its last message came by */
    uint64_t inc;               /* its run */
    uint64_t next;              /* the number applied next; 0: no base yet */
    uint64_t applied;           /* the loop applied every number up to this */
    uint64_t acked;             /* last number acknowledged */
    uint64_t mark_seq, mark_rec;  /* a number committed as record mark_rec, awaited */
    uint64_t last_seq, last_rec;  /* the newest committed */
    int64_t ack_ms;             /* when last acknowledged */
    int64_t hole_ms;            /* since when a hole waits, 0: none */
    int64_t link_ms;            /* when its master's own link last came up, 0: not seen */
    int64_t used_ms;            /* last heard of */
    int ack_again;              /* a duplicate came: its master has not heard */
    int ack_failed;             /* the last try found no way to it */
    int run_told;               /* the loop knows this slot's master and run */
    int restored;               /* master "": a restart's, for the master of
                                   name_hash when it is heard of */
    struct erl_seq_held *head, *tail;   /* waiting, by number */
};

/* Sends {httpdcnode_ack, Node, Origin, Inc, Seq} to ack_to on the link of
 * node via (or, that one gone, the origin's or any master's:
 * {httpdcnode_ack_via, ...} on another master than the origin); 0 when sent. */
typedef int (*erl_seq_ack_fn)(const char *via, const char *ack_to, const char *origin,
                              uint64_t inc, uint64_t seq);

/* Whether master has a live link to this node now (the C-node's links). */
typedef int (*erl_seq_linked_fn)(const char *master);

/* linked NULL: every master counts as linked (a hole waits ERL_SEQ_HOLE_MS). */
void erl_seq_init(erl_seq_ack_fn send_ack, erl_seq_linked_fn linked);
void erl_seq_free(void);

/* Slot k as a restart found it in the history file (history_origin_found):
 * the stream of the master whose name hashes to name_hash, run inc, every
 * number up to applied in. After erl_seq_init, before the thread starts. */
void erl_seq_restore(uint32_t k, uint64_t name_hash, uint64_t inc, uint64_t applied);

/* This run's number, drawn at start: a master that sees another knows the
 * node kept nothing of its streams (but what its hello says applied). */
uint64_t erl_seq_instance(void);
/* Whether any master's stream is tracked (else nothing below has work). */
int erl_seq_active(void);

enum erl_seq_verdict {
    ERL_SEQ_APPLY,         /* its turn: apply it, then erl_seq_committed */
    ERL_SEQ_DUPLICATE,     /* applied before: dropped (counted) */
    ERL_SEQ_HELD,          /* kept until its turn */
    ERL_SEQ_DROPPED,       /* not its turn and no room: its master sends it again */
    ERL_SEQ_UNTRACKED,     /* no origin slot free: apply it unnumbered */
    ERL_SEQ_STALE,         /* of a run older than the one known: dropped (counted) */
};

/* Numbers seq..last of master's run inc, the message term[0..len), came by
 * the link of node from. *o is its origin (NULL when untracked). */
enum erl_seq_verdict erl_seq_admit(const char *master, uint64_t inc, uint64_t seq, uint64_t last,
                                   const char *from, const char *term, uint32_t len,
                                   struct erl_seq_origin **o, int64_t now_ms);
/* Before o's first message goes to the loop, and after a base: 1 and what
 * to tell the loop of o's run (CMD_SEQ_RUN) when it does not know it yet,
 * which it then does; 0 when it does. */
int erl_seq_run_untold(struct erl_seq_origin *o, struct cmd_seq_run *run);
/* o's slot, for cmd_mark. */
uint32_t erl_seq_slot(const struct erl_seq_origin *o);

/* What erl_seq_admit said to apply is record rec of the inbox (handoff_committed);
 * up to last is applied. */
void erl_seq_committed(struct erl_seq_origin *o, uint64_t last, uint64_t rec);
/* The held message of o whose turn it is, taken off (the caller frees it),
 * or NULL. One that became a duplicate meanwhile is dropped here. Call it
 * until NULL after each erl_seq_committed: a hole left then waits from now. */
struct erl_seq_held *erl_seq_take_due(struct erl_seq_origin *o);
/* {httpdcnode_seq_base, Master, Inc, Base, AckTo} by the link of from: the
 * stream goes on after Base (a new run of Master, a greater Inc, replaces
 * the old, whose held messages are given up). Returns the origin, whose
 * held messages may be due now; NULL when no slot is free or Inc is of an
 * older run. */
struct erl_seq_origin *erl_seq_base(const char *master, uint64_t inc, uint64_t base,
                                    const char *ack_to, const char *from, int64_t now_ms);
/* Acknowledges what the loop applied (consumed: handoff_consumed). */
void erl_seq_ack(int64_t now_ms, uint64_t consumed);
/* Master's own link to this node came up at now_ms: a hole of its stream
 * waits ERL_SEQ_HOLE_MS from now for what it sends again (bounded as above). */
void erl_seq_master_linked(const char *master, int64_t now_ms);
/* An origin whose hole waited its time (ERL_SEQ_HOLE_MS, or
 * ERL_SEQ_HOLE_UNLINKED_MS while its master is not linked), now given up:
 * its next held message is due; *skipped: how many numbers were given up
 * (0 when it waited for its base, which nothing is lost for). NULL when none. */
struct erl_seq_origin *erl_seq_hole_expired(int64_t now_ms, uint64_t *skipped);
/* Milliseconds until erl_seq_ack or erl_seq_hole_expired has work; -1: none. */
int erl_seq_wait_ms(int64_t now_ms);
/* For the hello to master: *inc and *seq of the last applied number of its
 * stream (0: none yet), a restart's taken as master's; 0 when it has no
 * base here. */
int erl_seq_applied_for(const char *master, uint64_t *inc, uint64_t *seq);

/* A hot upgrade (upgrade/): every master's stream goes to the process
 * taking over as it stands here (its numbers, what waits for its turn,
 * where acknowledgements go), and this run's number with it: the streams
 * are kept, so a master sees the same node. Export on the C-node thread,
 * the inbox emptied first (every number committed is applied); take
 * after erl_seq_init, before the thread starts. -1 when out of memory or
 * malformed. */
#define ERL_SEQ_CARRY_TAG CARRY_TAG('E', 'S', 'E', 'Q')
#define ERL_SEQ_CARRY_VERSION 2       /* 2: each origin's slot, kept ones too */
struct carry_out;
struct carry_in;
int erl_seq_carry_export(struct carry_out *out);
int erl_seq_carry_take(struct carry_in *in, uint16_t version);

#endif
