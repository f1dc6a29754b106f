/* SPDX-License-Identifier: Apache-2.0 */
/* The load client's id checks (tools/httpclient/ids.c): +1 within an epoch,
 * any jump right after a gap, duplicates, and the id a reconnection gives. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "../../../tools/httpclient/ids.c"

static void ids_go_up_by_one(void **state)
{
    (void)state;
    struct id_track t;
    ids_init(&t);
    assert_int_equal(ids_next(&t, 7, 40), ID_OK);       /* the first: any */
    assert_int_equal(ids_next(&t, 7, 41), ID_OK);
    assert_int_equal(ids_next(&t, 7, 41), ID_DUP);
    assert_int_equal(ids_next(&t, 7, 12), ID_DUP);
    assert_int_equal(ids_next(&t, 7, 42), ID_OK);       /* a duplicate keeps the last */
    assert_int_equal(ids_next(&t, 7, 44), ID_SKIPPED);
    assert_int_equal(ids_next(&t, 7, 45), ID_OK);       /* from the new last */
    assert_int_equal(ids_next(&t, 8, 46), ID_EPOCH);
}

static void a_gap_allows_one_jump(void **state)
{
    (void)state;
    struct id_track t;
    ids_init(&t);
    ids_next(&t, 7, 1);
    ids_gap(&t);
    assert_int_equal(ids_next(&t, 7, 30), ID_OK);
    assert_int_equal(ids_next(&t, 7, 32), ID_SKIPPED);  /* only once */
    ids_gap(&t);
    assert_int_equal(ids_next(&t, 9, 1), ID_OK);        /* another epoch */
    assert_int_equal(ids_next(&t, 9, 2), ID_OK);
}

static void the_last_id_is_what_a_reconnection_sends(void **state)
{
    (void)state;
    struct id_track t;
    char buf[32];
    ids_init(&t);
    assert_int_equal(ids_format(&t, buf, sizeof buf), 0);
    ids_next(&t, 0x4fb91385u, 4294967295u);
    assert_int_equal(ids_format(&t, buf, sizeof buf), 19);
    assert_string_equal(buf, "4fb91385:4294967295");
    ids_next(&t, 0xau, 1);
    ids_format(&t, buf, sizeof buf);
    assert_string_equal(buf, "0000000a:1");
    assert_int_equal(ids_format(&t, buf, 8), 0);        /* too small: nothing */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ids_go_up_by_one),
        cmocka_unit_test(a_gap_allows_one_jump),
        cmocka_unit_test(the_last_id_is_what_a_reconnection_sends),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
