/* SPDX-License-Identifier: Apache-2.0 */
/* A client message up to Erlang: see client_in.h. */
#include "core/client_in.h"
#include "core/client_rate.h"
#include "core/conn.h"
#include "core/outbound.h"
#include "core/presence.h"
#include "core/stream-t.h"
#include "obs/stats.h"

static uint32_t rate = 50, burst_milli = (50 / 4 + 8) * 1000;

void client_in_configure(uint32_t r)
{
    rate = r;
    burst_milli = rate_burst_milli(r);
}

enum client_in client_in_charge(const struct stream *from, uint32_t *tokens, uint32_t *at_ms,
                                uint32_t now_ms)
{
    struct conn *c = from ? conn_of(from) : NULL;
    if (from && !c)
        return CLIENT_IN_NO_MEMORY;
    if (c) {
        tokens = &c->tokens;
        at_ms = &c->at_ms;
    }
    return rate_take(tokens, at_ms, now_ms, rate, burst_milli) ? CLIENT_IN_QUEUED : CLIENT_IN_RATE;
}

enum client_in client_in_send(uint32_t uid, const struct stream *from, uint32_t *tokens,
                              uint32_t *at_ms, uint32_t now_ms, const void *data, uint32_t len,
                              int binary)
{
    enum client_in r = client_in_charge(from, tokens, at_ms, now_ms);
    if (r != CLIENT_IN_QUEUED)
        return r;
    struct conn *c = from ? conn_of(from) : NULL;
    presence_known(uid);
    if (outbound_in(uid, c ? c->id : 0, data, len, binary) != 0) {
        loop_stats.client_in_dropped++;
        return CLIENT_IN_FULL;
    }
    loop_stats.client_in++;
    return CLIENT_IN_QUEUED;
}
