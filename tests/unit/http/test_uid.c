/* SPDX-License-Identifier: Apache-2.0 */
/* uid_parse: the user id in /test/N. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "http/uid.h"

static void accepts_plain_positive_decimals(void **state)
{
    (void)state;
    uint32_t uid = 0;
    assert_int_equal(uid_parse("1", 100, &uid), UID_OK);
    assert_int_equal(uid, 1);
    assert_int_equal(uid_parse("123", 1000, &uid), UID_OK);
    assert_int_equal(uid, 123);
    assert_int_equal(uid_parse("1114112", 1114112, &uid), UID_OK);
    assert_int_equal(uid, 1114112);
}

static void rejects_what_is_not_a_plain_number(void **state)
{
    (void)state;
    uint32_t uid = 7;
    const char *bad[] = {"", "0", "-3", "+3", "12abc", "abc", "1 ", " 1", "0123", "1.5",
                         "99999999999999999999", "18446744073709551616", "1/2", "%31"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(uid_parse(bad[i], 1000, &uid), UID_INVALID);
    assert_int_equal(uid, 7);
}

static void numbers_above_max_are_too_big(void **state)
{
    (void)state;
    uint32_t uid;
    assert_int_equal(uid_parse("101", 100, &uid), UID_TOO_BIG);
    assert_int_equal(uid_parse("4294967296", 100, &uid), UID_TOO_BIG);
    assert_int_equal(uid_parse("1844674407370955161", 100, &uid), UID_TOO_BIG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(accepts_plain_positive_decimals),
        cmocka_unit_test(rejects_what_is_not_a_plain_number),
        cmocka_unit_test(numbers_above_max_are_too_big),
    };
    return cmocka_run_group_tests_name("uid", tests, NULL, NULL);
}
