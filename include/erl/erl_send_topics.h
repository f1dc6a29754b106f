/* SPDX-License-Identifier: Apache-2.0 */
/* How the C-node tells Erlang of topics (core/topic_presence.h,
 * core/topic_join.h): the terms, encoded into an ei_x_buff for
 * erl_send.c to send. C-node thread only.
 *   to each master's --presence process (core/outbound.h's enum topic_op):
 *     {httpdcnode, Node, topics, [{Topic, N}]}       N streams subscribed
 *                                 here now (0: none, but its history is
 *                                 kept: messages for it still come here)
 *     {httpdcnode, Node, topics_gone, [Topic]}       held here no more
 *     {httpdcnode, Node, topic_snapshot, [{Topic, N}]}   all held (replaces)
 *     {httpdcnode, Node, topic_snapshot_more, [...]} the rest (adds)
 *     {httpdcnode, Node, topic_members, [{Topic, Uid, Conn}]}  with
 *                                 --presence-topics: every subscription
 *                                 (replaces), then topic_members_more
 *     {httpdcnode, Node, topic_joins | topic_leaves, [{Topic, Uid, Conn}]}
 *   to the --inbox process (the handler decides a join):
 *     {httpdcnode_join, Node, Uid, Conn, Topic, Since}   Since the id the
 *                                 client resumes from, <<>> for none
 *     {httpdcnode_leave, Node, Uid, Conn, Topic}
 * Topic is a binary. */
#ifndef HTTPDCNODE_ERL_SEND_TOPICS_H
#define HTTPDCNODE_ERL_SEND_TOPICS_H

#include <ei.h>
#include <stddef.h>

#include "core/outbound.h"

/* The OUT_TOPICS record r (size bytes in all) as its term, from node. */
void erl_send_topics_encode(ei_x_buff *x, const char *node, const struct out_rec *r,
                            size_t size);
/* Whether op goes to the masters that got the uid snapshot before it
 * (a topic snapshot's part), not to those taking changes. */
int erl_send_topics_snapshot_part(uint8_t op);
/* The OUT_IN record r of a join or leave (its what) as its term. */
void erl_send_topics_encode_in(ei_x_buff *x, const char *node, const struct out_rec *r);

#endif
