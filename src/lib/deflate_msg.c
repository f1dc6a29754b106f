/* SPDX-License-Identifier: Apache-2.0 */
/* permessage-deflate's messages through zlib: see deflate_msg.h. */
#include "lib/deflate_msg.h"
#include "lib/log.h"

#include <stdint.h>
#include <string.h>
#include <zlib.h>

/* Raw deflate (no zlib header), the largest window: what RFC 7692 sends
 * when no max_window_bits was agreed. memLevel 8 is zlib's default. */
#define WINDOW_BITS 15
#define MEM_LEVEL 8

static z_stream def, inf;
static int def_ready, inf_ready;

static const uint8_t tail[4] = {0x00, 0x00, 0xff, 0xff};

size_t deflate_msg_bound(size_t len)
{
    /* deflateBound is for Z_FINISH; a sync flush adds an empty stored
     * block (5 bytes) and may need a few more for the bits before it. */
    return (size_t)deflateBound(NULL, (uLong)len) + 16;
}

static int deflater(void)
{
    if (!def_ready) {
        if (deflateInit2(&def, Z_BEST_SPEED, Z_DEFLATED, -WINDOW_BITS, MEM_LEVEL,
                         Z_DEFAULT_STRATEGY) != Z_OK) {
            static struct log_ratelimit rl;
            log_limited(&rl, LOG_ERROR, "cannot make the deflate context: out of memory; "
                                        "messages go uncompressed");
            return -1;
        }
        def_ready = 1;
    } else if (deflateReset(&def) != Z_OK) {
        return -1;
    }
    return 0;
}

size_t deflate_msg(const void *in, size_t len, void *out, size_t cap)
{
    if (deflater() != 0)
        return 0;
    def.next_in = (Bytef *)(uintptr_t)in;
    def.avail_in = (uInt)len;
    def.next_out = out;
    def.avail_out = (uInt)cap;
    int r = deflate(&def, Z_SYNC_FLUSH);
    size_t n = cap - def.avail_out;
    /* All taken, room left (so the flush is whole), ending in the tail. */
    if ((r != Z_OK && r != Z_BUF_ERROR) || def.avail_in != 0 || def.avail_out == 0 || n < 4 ||
        memcmp((const uint8_t *)out + n - 4, tail, 4) != 0)
        return 0;
    return n - 4;
}

static int inflater(void)
{
    if (!inf_ready) {
        if (inflateInit2(&inf, -WINDOW_BITS) != Z_OK)
            return -1;
        inf_ready = 1;
    } else if (inflateReset(&inf) != Z_OK) {
        return -1;
    }
    return 0;
}

/* Feeds in[0..len) on, while there is room: 1 at the end of the deflate
 * stream (a final block), 0 when all is taken or the output is full, -1
 * for data that is not deflate. */
static int feed(const void *in, size_t len)
{
    inf.next_in = (Bytef *)(uintptr_t)in;
    inf.avail_in = (uInt)len;
    while (inf.avail_in && inf.avail_out) {
        int r = inflate(&inf, Z_SYNC_FLUSH);
        if (r == Z_STREAM_END)
            return 1;
        if (r == Z_BUF_ERROR)
            return 0;               /* no progress possible */
        if (r != Z_OK)
            return -1;
    }
    return 0;
}

enum inflate_msg_result inflate_msg(const void *in, size_t len, void *out, size_t cap, size_t *n)
{
    *n = 0;
    if (inflater() != 0)
        return INFLATE_MSG_NO_MEMORY;
    /* One byte more than may be kept: filling it says the message is larger. */
    inf.next_out = out;
    inf.avail_out = (uInt)cap + 1;
    int r = feed(in, len);
    /* Data after a final block: not one message. */
    if (r == 1 && inf.avail_in)
        return INFLATE_MSG_BAD;
    if (r == 0 && inf.avail_in == 0 && inf.avail_out)
        r = feed(tail, sizeof tail);
    if (r < 0)
        return INFLATE_MSG_BAD;
    *n = cap + 1 - inf.avail_out;
    if (*n > cap) {
        *n = cap;
        return INFLATE_MSG_TOO_BIG;
    }
    return INFLATE_MSG_OK;
}

void deflate_msg_free(void)
{
    if (def_ready)
        deflateEnd(&def);
    if (inf_ready)
        inflateEnd(&inf);
    def_ready = inf_ready = 0;
}
