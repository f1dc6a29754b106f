/* SPDX-License-Identifier: Apache-2.0 */
/* A message's id as a client sees it: EPOCH:SEQ for a uid's message
 * (history.h), NAME@EPOCH:SEQ for a topic's, NAME its topic (topic_name.h:
 * never an '@'), EPOCH the topic's own. The same text is what a client
 * gives back to resume. */
#ifndef HTTPDCNODE_MSG_ID_H
#define HTTPDCNODE_MSG_ID_H

#include "lib/topic_name.h"

#include <stddef.h>
#include <stdint.h>

struct msg_id {
    uint32_t seq;
    uint32_t epoch;
    const char *topic;      /* NULL: a uid's message */
    uint8_t topic_len;
};

/* "NAME@" + 8 hex digits + ':' + a decimal, and a NUL. */
#define MSG_ID_TEXT_MAX (TOPIC_NAME_MAX + 1 + 8 + 1 + 10 + 1)

/* The id's text into out (MSG_ID_TEXT_MAX), NUL-terminated: its length. */
size_t msg_id_text(char *out, const struct msg_id *id);

/* The id of uid's message seq. */
struct msg_id msg_id_uid(uint32_t seq);

#endif
