/* SPDX-License-Identifier: Apache-2.0 */
/* What every way up to Erlang shares (WebSocket messages, POST /send/N):
 * the --client-rate bucket and the bound on bytes waiting for Erlang.
 * Loop thread only. */
#ifndef HTTPDCNODE_CLIENT_RATE_H
#define HTTPDCNODE_CLIENT_RATE_H

#include <stdint.h>
#include <time.h>

/* Client messages waiting for Erlang (outbound_in_pending: their bytes
 * and 40 bytes each) past which no client message is taken: WebSockets
 * pause, POSTs get 503. One more read or POST may pass it (erl_park.c
 * asserts that the park holds it all): nothing is dropped while clients
 * can be paused. */
#define CLIENT_IN_PENDING_MAX (1u << 20)

/* Largest --max-client-message: a WebSocket message in flight grows to
 * this much at most (under --max-input-total with all the others). */
#define CLIENT_MESSAGE_LIMIT (1u << 20)

/* What the options make of client messages, for every way up to Erlang. */
struct client_msg_config {
    int inbox;                 /* --inbox given: client messages are taken */
    uint32_t max_message;      /* --max-client-message, bytes */
    uint32_t rate;             /* --client-rate, messages a second per connection */
    int topics;                /* --max-topics not 0: clients may join and leave topics */
};

/* The clock of every bucket: ms of the coarse monotonic clock (a vDSO
 * read, no syscall), never 0. */
static inline uint32_t client_rate_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &t);
    return (uint32_t)((uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000) | 1;
}

/* The bucket's size, in thousandths of a message, for rate a second. */
static inline uint32_t rate_burst_milli(uint32_t rate) { return (rate / 4 + 8) * 1000; }

/* Takes a message from a bucket (tokens in thousandths, at_ms the time
 * it was last looked at, 0: never, a full bucket) refilled at rate a
 * second up to burst_milli. now_ms: client_rate_now_ms(). 0: none
 * left (the bucket keeps what it had). 8 bytes of the caller's a bucket. */
static inline int rate_take(uint32_t *tokens, uint32_t *at_ms, uint32_t now_ms, uint32_t rate,
                            uint32_t burst_milli)
{
    int32_t dt = (int32_t)(now_ms - *at_ms);   /* never back: a refill from a wrap */
    uint64_t t = *at_ms ? *tokens + (uint64_t)(dt > 0 ? dt : 0) * rate : burst_milli;
    *at_ms = now_ms;
    if (t > burst_milli)
        t = burst_milli;
    if (t < 1000) {
        *tokens = (uint32_t)t;
        return 0;
    }
    *tokens = (uint32_t)(t - 1000);
    return 1;
}

#endif
