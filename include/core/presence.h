/* SPDX-License-Identifier: Apache-2.0 */
/* Presence: which uids came online or went offline, batched on the loop
 * thread (net changes per window) and sent to each master's --presence
 * process. */
#ifndef HTTPDCNODE_PRESENCE_H
#define HTTPDCNODE_PRESENCE_H

#include "lib/carry.h"

#include <event2/event.h>
#include <stdint.h>

/* Shortest wait from a change to its message (longer in a storm). */
#define PRESENCE_WINDOW_MS 50

/* enabled = 0 makes every call below a no-op (no --presence); max_users
 * sizes the bitmap of what the masters were told (1 bit a uid). */
int presence_init(struct event_base *base, int enabled, uint32_t max_users);
void presence_free(void);

/* uidtable callback: uid got its first stream (online) or lost its last. */
void presence_changed(uint32_t uid, int online);

/* Before a client message of uid goes to the outbox: if uid is online and
 * the masters were not told yet, its up goes first. */
void presence_known(uint32_t uid);

/* Sends everything online now as a snapshot (after pending changes), for
 * the masters that asked (to_all = 0) or for every master (a repair);
 * returns how many uids are online. presence_snapshot() is for those that
 * asked. */
uint32_t presence_snapshot_to(int to_all);
uint32_t presence_snapshot(void);
/* fn(to_all) follows every snapshot (topic_presence.h's). */
void presence_on_snapshot(void (*fn)(int to_all));
/* A change was lost to a full outbox: every master gets a snapshot a
 * second from now (one for all that are lost meanwhile). */
void presence_repair_later(void);

/* A hot upgrade (upgrade/): what the masters were told goes to the
 * process taking over, so that the streams it takes make no presence
 * message (the masters see nothing). flush_now sends what waits in the
 * window first; settle, once the streams are in, turns uids told online
 * and not carried into downs. take: -1 when the options differ. */
#define PRESENCE_CARRY_TAG CARRY_TAG('P', 'R', 'E', 'S')
#define PRESENCE_CARRY_VERSION 1
struct carry_out;
struct carry_in;
void presence_flush_now(void);
int presence_carry_export(struct carry_out *o);
int presence_carry_take(struct carry_in *rec, uint16_t version);
void presence_carry_settle(void);

/* --presence-conns (on = 1): the two calls below report each stream. */
void presence_conns_enable(int on);
/* Whether they do (a stream's opener needs its client's address then). */
int presence_conns_on(void);

struct stream;
struct peer_addr;
/* stream.c: s opened on socket fd (gives s its conn id), its client at
 * *peer (NULL: the socket's peer), and s ended for why (enum end_reason,
 * obs/end_reason.h: reported once, and its id dropped). No-ops when not
 * enabled. */
void presence_conn_up(const struct stream *s, int fd, const struct peer_addr *peer);
void presence_conn_down(const struct stream *s, uint8_t why);

#endif
