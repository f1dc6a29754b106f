/* SPDX-License-Identifier: Apache-2.0 */
/* Incremental parser for one long-poll answer, a JSON object such as
 *   {"messages":[{"id":"4fb91385:8","data":"t=1;hello"}],"gap":false}
 * It walks any well-formed JSON (strings with escapes, numbers, literals,
 * nested containers up to depth 8) and never buffers: each byte is looked
 * at once, in pieces of any size. It reports each object of the
 * "messages" array (its "id", and whether its "data" starts with
 * "t=<ns>;"), then the end of the answer with its "gap" flag (and its
 * "next", the id to poll from, for pollp_next). Anything that
 * is not one JSON object with "messages" an array of objects is an error. */
#ifndef HTTPCLIENT_POLL_PARSER_H
#define HTTPCLIENT_POLL_PARSER_H

#include <stddef.h>
#include <stdint.h>

#include "stamp.h"

struct poll_message {
    int has_id;             /* "id" was a well-formed EPOCH:SEQ string */
    int bad_id;             /* "id" was there but not that */
    uint32_t epoch, seq;
    int has_ts;
    uint64_t ts;
    int has_n;              /* "n=N;" after the stamp */
    uint32_t n;
};

struct poll_callbacks {
    void (*on_message)(void *ctx, const struct poll_message *m);
    /* The answer's object closed. gap: its "gap" was true. */
    void (*on_answer)(void *ctx, int gap);
};

struct poll_parser {
    struct stamp_scan ts;
    struct id_scan id;      /* a message's "id", then the answer's "next" */
    uint8_t state;
    uint8_t depth;          /* open containers */
    uint8_t arrays;         /* bit d: the container at depth d + 1 is an array */
    uint8_t key;            /* the member being read (K_*) */
    uint8_t pos;            /* position in a key or literal */
    uint8_t cand;           /* keys a key being read may still be */
    uint8_t flags;
    uint8_t lit;            /* the literal being matched */
};

enum poll_result { POLL_MORE = 0, POLL_DONE, POLL_ERROR };

void pollp_init(struct poll_parser *p);
/* Feeds len bytes; POLL_DONE once the object closed (whitespace may follow;
 * anything else is an error). */
enum poll_result pollp_feed(struct poll_parser *p, const char *buf, size_t len,
                           const struct poll_callbacks *cb, void *ctx);

/* The answer's "next" id, once on_answer came: 1 if it had a well-formed one. */
int pollp_next(const struct poll_parser *p, uint32_t *epoch, uint32_t *seq);

#endif
