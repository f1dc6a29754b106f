/* SPDX-License-Identifier: Apache-2.0 */
/* The Erlang connections of the C-node thread (only that thread uses them). */
#ifndef HTTPDCNODE_ERL_LINK_H
#define HTTPDCNODE_ERL_LINK_H

#include <ei.h>
#include <stdint.h>

#include "erl/erl_park.h"
#include "lib/carry.h"

#define ERL_LINK_MAX 64

struct erl_socket;

/* About 336 bytes each, ERL_LINK_MAX of them (parked records apart). */
struct erl_link {
    int fd;
    const struct erl_socket *sock;   /* its buffered socket (erl_socket.h) */
    int is_master;
    int broken;          /* a send failed or timed out: drop it, send no more */
    int silent;          /* broken because nothing came from it (erl_link_judge_masters) */
    unsigned quiet;      /* judgements in a row that found nothing read from it */
    uint64_t rx_seen;    /* the socket's bytes read at the last judgement */
    /* Presence, masters only (erl_send.c): */
    int awaiting;        /* asked for a snapshot: gets the next one, no changes before it */
    int in_snapshot;     /* got this snapshot's first piece: gets the rest */
    int repair;          /* a message was dropped for want of room: nothing more
                          * until there is room, then a snapshot */
    unsigned in_unacked; /* client messages sent to its --inbox, not yet acked */
    int in_stuck;        /* its window stuck full (erl_send_check_windows), logged */
    int64_t in_full_ms;  /* when its window last became full (clock_now_ms) */
    struct erl_park park; /* what waits for its inbox's window (erl_send.c) */
    char node[MAXNODELEN + 1];
};

/* Returns the new link's index, or -1 when the table is full (logged). */
int erl_link_add(int fd, const char *node, int is_master);
/* Closes link i; the last link moves into slot i. Its parked records are
 * freed unsent: erl_send_link_gone first passes them on. */
void erl_link_remove(int i);
int erl_link_count(void);
struct erl_link *erl_link_at(int i);
struct erl_link *erl_link_find(const char *node);
/* Sends a distribution tick on every link (used while we cannot read). A
 * tick the socket takes only in part is completed within
 * ERL_LINK_TICK_REST_MS, or the link is shut down and marked broken: a
 * partial packet followed by anything else would corrupt the stream. */
void erl_link_tick_all(void);

#define ERL_LINK_TICK_REST_MS 1000
void erl_link_close_all(void);

/* A master link is judged as net_ticktime judges nodes: the C-node thread
 * calls this every 1/ERL_LINK_QUIET_JUDGEMENTS of the tick time
 * (--erl-tick-seconds). A master that sent nothing, not even a tick
 * (masters tick every net_ticktime/4 when they have nothing else to
 * send), over ERL_LINK_QUIET_JUDGEMENTS judgements in a row (a silence of
 * 1 to 1.25 tick times) is marked broken and silent, and counted: a
 * partition that drops packets, or a frozen peer, gives no reset, and
 * without this the link would be kept for ever. Bytes the kernel holds
 * for us unread (the reader was waiting on the event loop) clear it.
 * Returns the links so marked. */
#define ERL_LINK_QUIET_JUDGEMENTS 4
int erl_link_judge_masters(void);

/* Bytes sent to a link and not yet taken by its peer, past which nothing
 * optional (presence) is sent to it: a master that stops reading holds
 * this much of our memory at most, and no send to it can block the
 * C-node thread (and so the other masters). */
#define ERL_LINK_UNSENT_MAX (1u << 20)
/* 1 when l's socket takes more without waiting and holds less than
 * ERL_LINK_UNSENT_MAX unsent. */
int erl_link_has_room(const struct erl_link *l);

/* A hot upgrade (upgrade/): every link that is not broken goes to the
 * process taking over, its socket with it, and what is known of it: its
 * node, whether a master, its presence state, its inbox window and the
 * records parked for it, the bytes read from it and not yet taken by ei.
 * Nothing goes on the wire: its peer sees no change (no nodedown, no
 * hello, no snapshot). take adopts each socket with adopt (ei is told of
 * it, erl_socket.h) and makes its link as it was. C-node thread's (or
 * before it starts). -1 when out of memory or malformed. */
#define ERL_LINK_CARRY_TAG CARRY_TAG('E', 'L', 'N', 'K')
#define ERL_LINK_CARRY_VERSION 1
struct carry_out;
struct carry_in;
int erl_link_carry_export(struct carry_out *o);
int erl_link_carry_take(struct carry_in *rec, uint16_t version, const int *fds, uint32_t nfds,
                        int (*adopt)(int fd, const char *node, const void *unread, size_t n));

#endif
