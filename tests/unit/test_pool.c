/* The record pool: reuse, distinct records, blocks as needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "pool.h"

static void records_are_distinct_and_writable_across_blocks(void **state)
{
    (void)state;
    struct pool p = POOL_INIT(40, 4);
    char *r[10];
    for (int i = 0; i < 10; i++) {
        r[i] = pool_alloc(&p);
        assert_non_null(r[i]);
        memset(r[i], i, 40);
    }
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 40; j++)
            assert_int_equal(r[i][j], i);     /* nothing overlapped */
}

static void freed_records_come_back_first(void **state)
{
    (void)state;
    struct pool p = POOL_INIT(16, 8);
    void *a = pool_alloc(&p), *b = pool_alloc(&p);
    pool_free(&p, a);
    pool_free(&p, b);
    assert_ptr_equal(pool_alloc(&p), b);
    assert_ptr_equal(pool_alloc(&p), a);
    void *c = pool_alloc(&p);
    assert_ptr_not_equal(c, a);
    assert_ptr_not_equal(c, b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(records_are_distinct_and_writable_across_blocks),
        cmocka_unit_test(freed_records_come_back_first),
    };
    return cmocka_run_group_tests_name("pool", tests, NULL, NULL);
}
