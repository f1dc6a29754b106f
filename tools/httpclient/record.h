/* SPDX-License-Identifier: Apache-2.0 */
/* --record FILE: what each connection received, one line each, for a
 * checker that compares it with what was sent (scripts/cluster-sim.sh):
 *   m UID EPOCH:SEQ N   a message (its id; N from "n=N;" after the stamp,
 *                       -1 without one; the id 0:0 when it had none)
 *   g UID               a gap told (SSE "event: gap", a WebSocket gap
 *                       frame, a poll answer's "gap": true)
 * Each worker appends whole lines with one write (O_APPEND), from a 64 KB
 * buffer written out when full and with every progress report; lines of
 * one connection keep their order. */
#ifndef HTTPCLIENT_RECORD_H
#define HTTPCLIENT_RECORD_H

#include <stdint.h>

/* In a worker: opens path for appending (created if missing). -1 on error (errno). */
int record_open(const char *path);
void record_message(unsigned long uid, int has_id, uint32_t epoch, uint32_t seq, int has_n,
                    uint32_t n);
void record_gap(unsigned long uid);
/* Writes out what is buffered (a no-op without --record). */
void record_flush(void);

#endif
