/* SPDX-License-Identifier: Apache-2.0 */
/* JSON text of messages: see json_text.h. */
#include "lib/json_text.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

size_t json_message_max(uint32_t len)
{
    /* \u00XX is 6 bytes per input byte at worst; base64 is less */
    return 64 + (size_t)len * 6;
}

static size_t json_escape(char *out, const char *s, uint32_t len)
{
    static const char hex[] = "0123456789abcdef";
    size_t k = 0;
    for (uint32_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            out[k++] = '\\';
            out[k++] = (char)c;
        } else if (c < 0x20 || c == 0x7f) {
            memcpy(out + k, "\\u00", 4);
            out[k + 4] = hex[c >> 4];
            out[k + 5] = hex[c & 15];
            k += 6;
        } else {
            out[k++] = (char)c;
        }
    }
    return k;
}

size_t json_message(char *out, const char *epoch_hex, uint32_t seq, const char *data,
                    uint32_t len, int binary)
{
    int text = !binary;
    size_t k = (size_t)sprintf(out, "{\"id\":\"%s:%u\",\"%s\":\"", epoch_hex, seq,
                               text ? "data" : "data_base64");
    if (text)
        k += json_escape(out + k, data, len);
    else
        k += (size_t)EVP_EncodeBlock((unsigned char *)out + k, (const unsigned char *)data,
                                     (int)len);
    memcpy(out + k, "\"}", 2);
    return k + 2;
}
