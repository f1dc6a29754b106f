/* SPDX-License-Identifier: Apache-2.0 */
/* Message ids as text: see msg_id.h. */
#include "core/msg_id.h"
#include "core/history.h"

#include <string.h>

size_t msg_id_text(char *out, const struct msg_id *id)
{
    static const char hex[] = "0123456789abcdef";
    size_t n = 0;
    if (id->topic) {
        memcpy(out, id->topic, id->topic_len);
        n = id->topic_len;
        out[n++] = '@';
    }
    for (int i = 7; i >= 0; i--)
        out[n++] = hex[id->epoch >> (4 * i) & 15];
    out[n++] = ':';
    char digits[10];
    int k = 0;
    uint32_t s = id->seq;
    do {
        digits[k++] = (char)('0' + s % 10);
        s /= 10;
    } while (s);
    while (k)
        out[n++] = digits[--k];
    out[n] = '\0';
    return n;
}

struct msg_id msg_id_uid(uint32_t seq)
{
    return (struct msg_id){.seq = seq, .epoch = history_epoch()};
}
