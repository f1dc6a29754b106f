/* SPDX-License-Identifier: Apache-2.0 */
/* Topic presence: which topics this node holds and how many streams each
 * has, told to the masters (each master's --presence process) so that a
 * publish goes only to the nodes that hold its topic, once per node. As
 * uid presence (presence.h): a topic's first stream is told at once (a
 * few a window), the rest as net changes per 50-800 ms window, and every
 * snapshot of uids is followed by one of topics (once the node held a
 * topic: one that never did sends nothing of topics). With --presence-topics
 * also who: each subscription's uid and conn, as joins and leaves in the
 * same windows and in the snapshots. Loop thread only. */
#ifndef HTTPDCNODE_TOPIC_PRESENCE_H
#define HTTPDCNODE_TOPIC_PRESENCE_H

#include "lib/carry.h"

#include <event2/event.h>
#include <stdint.h>

struct stream;

/* enabled: --presence is set; members: --presence-topics. */
int topic_presence_init(struct event_base *base, int enabled, int members, uint32_t max_topics);
void topic_presence_free(void);

/* topic.c: t's streams changed in number (it was made, or not held by a
 * stream any more but still held: 0 streams), t is about to be given up
 * (its name still readable), s joined or left t. */
void topic_presence_changed(uint32_t t);
void topic_presence_gone(uint32_t t);
void topic_presence_member(uint32_t t, const struct stream *s, int joined);

/* presence.c, after a uid snapshot went to the same masters: every topic
 * held, and with --presence-topics every subscription. */
void topic_presence_snapshot(int to_all);

/* A hot upgrade (upgrade/): what the masters were told of each topic, and
 * what the window holds for them (gone names, joins and leaves). take,
 * after topic_carry_take: a topic whose streams differ from what was told
 * goes in the next window, so the masters hear every change once. -1 when
 * presence is not as here (--presence, --presence-topics) or malformed. */
#define TOPIC_PRESENCE_CARRY_TAG CARRY_TAG('T', 'P', 'R', 'S')
#define TOPIC_PRESENCE_CARRY_VERSION 1
int topic_presence_carry_export(struct carry_out *o);
int topic_presence_carry_take(struct carry_in *rec, uint16_t version);

#endif
