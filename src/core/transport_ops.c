/* SPDX-License-Identifier: Apache-2.0 */
/* The transports' tables: see transport_ops.h. */
#include "core/transport_ops.h"
#include "obs/end_reason.h"

const struct transport_ops *transport_ops[FRAMING_KINDS];

void transport_ops_register(uint8_t framing, const struct transport_ops *ops)
{
    if (framing < FRAMING_KINDS)
        transport_ops[framing] = ops;
}

struct iovec transport_goodbye(uint8_t framing, uint8_t why)
{
    const struct transport_ops *t = framing < FRAMING_KINDS ? transport_ops[framing] : NULL;
    if (!t || !t->goodbye)
        return (struct iovec){NULL, 0};
    return t->goodbye(framing, end_reason_told(why) ? why : END_DRAIN);
}
