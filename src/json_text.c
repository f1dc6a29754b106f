/* JSON text of messages: see json_text.h. */
#include "json_text.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>

int utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        unsigned c = *p;
        size_t n;
        unsigned min;
        if (c < 0x80) {
            p++;
            continue;
        } else if ((c & 0xe0) == 0xc0) {
            n = 1, min = 0x80, c &= 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            n = 2, min = 0x800, c &= 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            n = 3, min = 0x10000, c &= 0x07;
        } else {
            return 0;
        }
        if ((size_t)(end - p) <= n)
            return 0;
        for (size_t i = 1; i <= n; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return 0;
            c = c << 6 | (p[i] & 0x3f);
        }
        if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
            return 0;
        p += n + 1;
    }
    return 1;
}

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
                    uint32_t len)
{
    int text = utf8_valid(data, len);
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
