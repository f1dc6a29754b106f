/* SPDX-License-Identifier: Apache-2.0 */
/* permessage-deflate's messages: compressed and inflated back, one after
 * another through the same contexts (each on its own); inflating stops at
 * its bound however much the input would make; data that is not deflate,
 * or goes on after a final block, is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "lib/deflate_msg.h"

static void round_trips_each_on_its_own(void **state)
{
    (void)state;
    static char in[20000], z[32000], out[20001];
    for (size_t i = 0; i < sizeof in; i++)
        in[i] = "abcabcabd"[i % 9];
    for (int round = 0; round < 3; round++) {
        size_t len = round == 2 ? 0 : sizeof in / (size_t)(round + 1);
        size_t zn = deflate_msg(in, len, z, deflate_msg_bound(len));
        assert_true(zn > 0);
        if (len)
            assert_true(zn < len / 10);
        size_t n;
        assert_int_equal(inflate_msg(z, zn, out, sizeof out - 1, &n), INFLATE_MSG_OK);
        assert_int_equal(n, len);
        assert_memory_equal(out, in, len);
    }
    /* too little room: 0, not a cut message */
    assert_int_equal(deflate_msg(in, sizeof in, z, 8), 0);
    deflate_msg_free();
}

static void inflating_stops_at_its_bound(void **state)
{
    (void)state;
    static char z[16384];
    char *zeros = calloc(1, 1 << 20), out[1001];
    assert_non_null(zeros);
    size_t zn = deflate_msg(zeros, 1 << 20, z, sizeof z);
    assert_true(zn > 0 && zn < sizeof z);
    size_t n;
    memset(out, 'x', sizeof out);
    assert_int_equal(inflate_msg(z, zn, out, 1000, &n), INFLATE_MSG_TOO_BIG);
    assert_int_equal(n, 1000);
    /* exactly the bound passes */
    zn = deflate_msg(zeros, 1000, z, sizeof z);
    assert_int_equal(inflate_msg(z, zn, out, 1000, &n), INFLATE_MSG_OK);
    assert_int_equal(n, 1000);
    free(zeros);
    deflate_msg_free();
}

static void refuses_what_is_not_one_message(void **state)
{
    (void)state;
    char out[100];
    size_t n;
    static const unsigned char junk[] = {0xff, 0xff, 0xff, 0xff, 1, 2, 3};
    assert_int_equal(inflate_msg(junk, sizeof junk, out, 99, &n), INFLATE_MSG_BAD);
    /* "ab" in a final fixed-Huffman block (zlib's own), then more */
    static const unsigned char final[] = {0x4b, 0x4c, 0x02, 0x00, 'z', 'z'};
    assert_int_equal(inflate_msg(final, 4, out, 99, &n), INFLATE_MSG_OK);
    assert_int_equal(n, 2);
    assert_memory_equal(out, "ab", 2);
    assert_int_equal(inflate_msg(final, sizeof final, out, 99, &n), INFLATE_MSG_BAD);
    /* and the contexts are fine for the next message */
    char z[64];
    size_t zn = deflate_msg("hello", 5, z, sizeof z);
    assert_int_equal(inflate_msg(z, zn, out, 99, &n), INFLATE_MSG_OK);
    assert_memory_equal(out, "hello", 5);
    deflate_msg_free();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(round_trips_each_on_its_own),
        cmocka_unit_test(inflating_stops_at_its_bound),
        cmocka_unit_test(refuses_what_is_not_one_message),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
