/* SPDX-License-Identifier: Apache-2.0 */
/* Carried state (lib/carry.c): records written are read back, found by
 * tag; a read past a record's end, a length past the buffer, never reads
 * out of bounds: it fails, with zeros. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "lib/carry.h"

#define T1 CARRY_TAG('O', 'N', 'E', '1')
#define T2 CARRY_TAG('T', 'W', 'O', '2')

static void records_round_trip_and_are_found_by_tag(void **state)
{
    (void)state;
    struct carry_out o;
    carry_out_init(&o);
    size_t at = carry_begin(&o, T1, 3);
    carry_u8(&o, 7);
    carry_u16(&o, 0xbeef);
    carry_u32(&o, carry_fd(&o, 41));
    carry_u64(&o, 1ull << 40);
    carry_end(&o, at);
    at = carry_begin(&o, T2, 1);
    carry_put(&o, "hello", 5);
    carry_end(&o, at);
    assert_false(o.failed);
    assert_int_equal(o.nfds, 1);
    assert_int_equal(o.fds[0], 41);

    struct carry_in all, rec;
    uint16_t version;
    carry_in_init(&all, o.buf, o.len);
    assert_int_equal(carry_find(&all, T2, &version, &rec), 1);
    assert_int_equal(version, 1);
    assert_memory_equal(carry_view(&rec, 5), "hello", 5);
    assert_int_equal(carry_left(&rec), 0);
    assert_int_equal(carry_find(&all, T1, &version, &rec), 1);
    assert_int_equal(version, 3);
    assert_int_equal(carry_get_u8(&rec), 7);
    assert_int_equal(carry_get_u16(&rec), 0xbeef);
    assert_int_equal(carry_get_u32(&rec), 0);
    assert_true(carry_get_u64(&rec) == 1ull << 40);
    assert_false(rec.failed);
    assert_int_equal(carry_find(&all, CARRY_TAG('N', 'O', 'N', 'E'), &version, &rec), 0);
    char name[5];
    assert_string_equal(carry_tag_name(T1, name), "ONE1");
    carry_out_free(&o);
}

static void reads_past_the_end_fail_with_zeros(void **state)
{
    (void)state;
    struct carry_out o;
    carry_out_init(&o);
    size_t at = carry_begin(&o, T1, 1);
    carry_u16(&o, 5);
    carry_end(&o, at);
    struct carry_in all, rec;
    uint16_t version;
    carry_in_init(&all, o.buf, o.len);
    assert_int_equal(carry_find(&all, T1, &version, &rec), 1);
    assert_int_equal(carry_get_u32(&rec), 0);          /* 2 bytes left, 4 asked */
    assert_true(rec.failed);
    assert_null(carry_view(&rec, 1));
    assert_int_equal(carry_get_u8(&rec), 0);
    /* A record that says it is longer than the buffer: malformed. */
    uint32_t too_long = 1000;
    memcpy(o.buf + at + 8, &too_long, 4);
    carry_in_init(&all, o.buf, o.len);
    uint32_t tag;
    assert_int_equal(carry_next(&all, &tag, &version, &rec), -1);
    assert_int_equal(carry_find(&all, T1, &version, &rec), 0);
    /* A header cut short. */
    carry_in_init(&all, o.buf, 5);
    assert_int_equal(carry_next(&all, &tag, &version, &rec), -1);
    carry_out_free(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(records_round_trip_and_are_found_by_tag),
        cmocka_unit_test(reads_past_the_end_fail_with_zeros),
    };
    return cmocka_run_group_tests_name("carry", tests, NULL, NULL);
}
