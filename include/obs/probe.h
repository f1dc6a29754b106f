/* SPDX-License-Identifier: Apache-2.0 */
/* --probe-latency: how old a message is at each hop inside the server, for
 * benchmarks. A publisher that starts a payload with "t=<ns since the epoch>;"
 * (as msggen does) gets, in GET /probe, the age of its messages when the
 * C-node thread decoded them, when the event loop took them from the
 * hand-off, and when each write to a stream returned. Off by default: then
 * the only cost is one predictable branch per message and per write. */
#ifndef HTTPDCNODE_PROBE_H
#define HTTPDCNODE_PROBE_H

#include <stddef.h>
#include <stdint.h>


/* Set once at start-up, before the threads; read-only afterwards. */
extern int probe_enabled;

/* Allocates the histograms (28 KB); -1 when memory is short. */
int probe_start(void);
void probe_free(void);

/* CLOCK_REALTIME in ns: the publisher's clock (same host). */
uint64_t probe_now_ns(void);

/* The send time in a payload starting with "t=<digits>;", or 0. */
uint64_t probe_sent_ns(const char *payload, uint32_t len);

/* Loop thread: a command's payload was taken from the hand-off
 * (received_ns: the C-node thread's stamp, clock_now_ns). Records its
 * received and applied ages. */
void probe_applied(const char *payload, uint32_t len, uint64_t received_ns);

/* Loop thread: a write of this payload to a stream returned at now_ns. */
void probe_written(const char *payload, uint32_t len, uint64_t now_ns);

/* GET /probe: the three histograms as one JSON line; resets them after
 * reading when reset is set. Returns the length. */
size_t probe_format_json(char *buf, size_t size, int reset);

#endif
