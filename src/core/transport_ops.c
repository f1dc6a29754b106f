/* The transports' tables: see transport_ops.h. */
#include "core/transport_ops.h"

const struct transport_ops *transport_ops[FRAMING_KINDS];

void transport_ops_register(uint8_t framing, const struct transport_ops *ops)
{
    if (framing < FRAMING_KINDS)
        transport_ops[framing] = ops;
}
