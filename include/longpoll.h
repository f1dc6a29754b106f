/* GET /poll/N?since=EPOCH:SEQ: long-poll. Answered at once, through evhttp,
 * when anything newer than since is kept (or since is from another epoch,
 * or older than what is kept: then "gap" is true); else the socket leaves
 * evhttp and waits as a lean stream, with its head already written, for
 * the next message or --poll-timeout. The body, one JSON object:
 *   {"messages":[{"id":"EPOCH:SEQ","data":"..."},...],"gap":false}
 * (a payload that is not UTF-8 comes as "data_base64"). The client polls
 * again with since= the last id it got. */
#ifndef HTTPDCNODE_LONGPOLL_H
#define HTTPDCNODE_LONGPOLL_H

#include <event2/event.h>
#include <stdint.h>

struct evhttp_request;
struct stream;

void poll_init(uint32_t timeout_s);

/* -1, with nothing sent, when no descriptor or memory is left (503). */
int poll_start(struct evhttp_request *req, uint32_t uid);

/* A message for a waiting poll (batch.c): its answer, then its end. */
void poll_answer(struct stream *s, const char *data, uint32_t len, uint32_t seq);

#endif
