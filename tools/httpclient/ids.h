/* SPDX-License-Identifier: Apache-2.0 */
/* Checks the message ids one connection (or one poll loop) receives: within
 * an epoch each id is the previous one + 1, except right after a reported
 * gap, which allows any jump, also to another epoch. The last id seen is
 * also what a reconnection resumes from (since=, Last-Event-ID). */
#ifndef HTTPCLIENT_IDS_H
#define HTTPCLIENT_IDS_H

#include <stdint.h>

struct id_track {
    uint32_t epoch;
    uint32_t seq;
    uint8_t have;           /* an id was seen */
    uint8_t gap;            /* a gap was reported since the last id */
};

enum id_verdict {
    ID_OK = 0,      /* the previous + 1, or the first id, or after a gap */
    ID_DUP,         /* not after the previous one: a message seen twice or out of order */
    ID_SKIPPED,     /* ids missing, no gap reported */
    ID_EPOCH        /* another epoch, no gap reported */
};

void ids_init(struct id_track *t);
/* A gap was reported: the next id may jump. */
void ids_gap(struct id_track *t);
/* The server said where to resume (after a gap): the last id becomes that;
 * a gap told stays told. */
void ids_resume(struct id_track *t, uint32_t epoch, uint32_t seq);
/* Checks the next id and makes it the last one (a duplicate leaves the last
 * one as it is). */
enum id_verdict ids_next(struct id_track *t, uint32_t epoch, uint32_t seq);
/* "EPOCH:SEQ" of the last id into buf; returns its length, 0 when there
 * is none or buf has less than 20 bytes. */
int ids_format(const struct id_track *t, char *buf, unsigned size);

#endif
