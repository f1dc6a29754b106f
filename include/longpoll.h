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
#ifndef HTTPDCNODE_LONGPOLL_H
#define HTTPDCNODE_LONGPOLL_H

#include <event2/event.h>
#include <stdint.h>

struct evhttp_request;
struct stream;

void poll_init(uint32_t timeout_s, uint32_t max_answer_bytes);

/* -1, with nothing sent, when no descriptor or memory is left (503). */
int poll_start(struct evhttp_request *req, uint32_t uid);

/* A message for a waiting poll (batch.c): its answer, then its end. 1 when
 * it took the message, 0 when it had answered already. */
int poll_answer(struct stream *s, const char *data, uint32_t len, uint32_t seq);

#endif
