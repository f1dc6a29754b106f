/* SPDX-License-Identifier: Apache-2.0 */
/* GET /poll/N?since=EPOCH:SEQ: long-poll. The socket leaves evhttp as a
 * lean stream with its head written, counted in the uid's streams like any
 * other. Answered at once when anything newer than since is kept (or since
 * is from another epoch, or older than what is kept: then "gap" is true),
 * with at most --max-backlog bytes of messages, sent as the socket takes
 * them; else it waits for the next message or --poll-timeout. The body,
 * one JSON object:
 *   {"messages":[{"id":"EPOCH:SEQ","data":"..."},...],"gap":false,"next":"E:S"}
 * (a payload that is not UTF-8 comes as "data_base64"; a gap adds "first",
 * the oldest id kept, or null). The client polls again with since= next. */
#ifndef HTTPDCNODE_POLL_H
#define HTTPDCNODE_POLL_H

#include <event2/event.h>
#include <stdint.h>

/* Registers GET /poll/uid (its start: -1, with nothing sent, when no
 * descriptor or memory is left: 503) and the poll's transport_ops: a
 * message for a waiting poll is its answer, then its end (deliver). */
int poll_init(uint32_t timeout_s, uint32_t max_answer_bytes);

#endif
