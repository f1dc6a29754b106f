/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: the load client's response parser
 * (tools/httpclient/resp_parser.c), driven as tests/unit/client/test_client_parser.c
 * drives it. The first byte picks the size of the pieces the rest arrives
 * in (0: all at once) and whether on_headers stops on a non-200 status. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../tools/httpclient/resp_parser.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct seen {
    int headers;
    int stop_on_non_200;
    unsigned chunks;
};

static int on_headers(void *ctx, unsigned status, int chunked)
{
    struct seen *s = ctx;
    if (s->headers++ || status > 999 || (chunked != 0 && chunked != 1))
        abort();                   /* once per response, a 3-digit status */
    return s->stop_on_non_200 && status != 200;
}

static void on_chunk(void *ctx, int has_ts, uint64_t ts)
{
    struct seen *s = ctx;
    (void)ts;
    if (!s->headers || (has_ts != 0 && has_ts != 1))
        abort();                   /* no chunk before the headers */
    s->chunks++;
}

static const struct resp_callbacks cbs = {on_headers, on_chunk, NULL};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t step = data[0] & 0x7f;
    struct seen s = {.stop_on_non_200 = data[0] >> 7};
    struct resp_parser p;
    rp_init(&p);
    data++;
    size--;
    if (step == 0)
        step = size ? size : 1;
    enum rp_result r = RP_MORE;
    for (size_t i = 0; i < size && r == RP_MORE; i += step) {
        size_t n = size - i < step ? size - i : step;
        char *piece = malloc(n);   /* exact size: ASan sees any overread */
        if (!piece)
            abort();
        memcpy(piece, data + i, n);
        r = rp_feed(&p, piece, n, &cbs, &s);
        free(piece);
    }
    if (r == RP_STOPPED && (!s.stop_on_non_200 || !s.headers))
        abort();
    if (r == RP_MORE)
        r = rp_eof(&p);
    if (r != RP_DONE && r != RP_ERROR && r != RP_STOPPED)
        abort();
    return 0;
}
