/* SPDX-License-Identifier: Apache-2.0 */
/* Client frames and payloads sent up: see ws_send.h. */
#include "ws_send.h"

#include <string.h>

size_t ws_client_frame(uint8_t *out, size_t cap, unsigned op, const uint8_t *payload, size_t n,
                       uint32_t mask)
{
    size_t hl = n < 126 ? 2 : n < 65536 ? 4 : 10;
    if (cap < hl + 4 || cap - hl - 4 < n)
        return 0;
    out[0] = (uint8_t)(0x80u | (op & 0x0fu));       /* FIN, no RSV bits */
    if (hl == 2) {
        out[1] = (uint8_t)(0x80u | n);
    } else if (hl == 4) {
        out[1] = 0x80u | 126u;
        out[2] = (uint8_t)(n >> 8);
        out[3] = (uint8_t)n;
    } else {
        out[1] = 0x80u | 127u;
        for (unsigned i = 0; i < 8; i++)
            out[2 + i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
    }
    uint8_t *m = out + hl;
    for (unsigned i = 0; i < 4; i++)
        m[i] = (uint8_t)(mask >> (24 - 8 * i));
    for (size_t i = 0; i < n; i++)
        m[4 + i] = payload[i] ^ m[i % 4];
    return hl + 4 + n;
}

/* v in decimal at out, returning past its last digit. */
static char *put_decimal(char *out, uint64_t v)
{
    char tmp[20];
    size_t n = 0;
    do
        tmp[n++] = (char)('0' + v % 10);
    while (v /= 10);
    while (n)
        *out++ = tmp[--n];
    return out;
}

size_t ws_up_payload(char *out, size_t cap, int request, uint32_t seq, uint64_t ns)
{
    /* Built in a buffer of the longest, then copied if it fits with its NUL. */
    char b[WS_UP_PAYLOAD_MAX], *e = b;
    *e++ = request ? 'r' : 'q';
    *e++ = '=';
    e = put_decimal(e, seq);
    memcpy(e, ";t=", 3);
    e = put_decimal(e + 3, ns);
    *e++ = ';';
    size_t n = (size_t)(e - b);
    if (n >= cap)
        return 0;
    memcpy(out, b, n);
    out[n] = '\0';
    return n;
}
