/* SPDX-License-Identifier: Apache-2.0 */
/* erl_cnode_trim_xbuf: the C-node's receive buffer is given back after a large
 * message and kept after a small one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "erl/erl_cnode.h"

static void grow(ei_x_buff *x, size_t bytes)
{
    char *junk = calloc(1, bytes);
    assert_non_null(junk);
    assert_int_equal(ei_x_append_buf(x, junk, (int)bytes), 0);
    free(junk);
    x->index = 0;               /* as after a message was handled */
}

static void a_large_buffer_is_given_back(void **state)
{
    (void)state;
    ei_x_buff x;
    ei_x_new(&x);
    grow(&x, 8u << 20);
    assert_true(x.buffsz >= 8 << 20);
    erl_cnode_trim_xbuf(&x);
    assert_true(x.buffsz < 1 << 20);
    assert_int_equal(x.index, 0);
    ei_x_free(&x);
}

static void a_small_buffer_is_kept(void **state)
{
    (void)state;
    ei_x_buff x;
    ei_x_new(&x);
    grow(&x, 64u << 10);
    char *before = x.buff;
    erl_cnode_trim_xbuf(&x);
    assert_ptr_equal(x.buff, before);
    ei_x_free(&x);
}

int main(void)
{
    ei_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_large_buffer_is_given_back),
        cmocka_unit_test(a_small_buffer_is_kept),
    };
    return cmocka_run_group_tests_name("cnode", tests, NULL, NULL);
}
