/* SPDX-License-Identifier: Apache-2.0 */
/* The record pool: reuse, distinct records, blocks as needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "lib/pool.h"

/* A pool never returns its blocks: the pools below are static and their
 * records end up freed, so the blocks stay reachable (no LeakSanitizer
 * report), as in the server. */

#if defined(__SANITIZE_ADDRESS__)
#define ASAN_BUILD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN_BUILD 1
#endif
#endif
#ifdef ASAN_BUILD
#include <sanitizer/asan_interface.h>
#endif

static void records_are_distinct_and_writable_across_blocks(void **state)
{
    (void)state;
    static struct pool p = POOL_INIT(40, 4);
    char *r[10];
    for (int i = 0; i < 10; i++) {
        r[i] = pool_alloc(&p);
        assert_non_null(r[i]);
        memset(r[i], i, 40);
    }
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 40; j++)
            assert_int_equal(r[i][j], i);     /* nothing overlapped */
    for (int i = 0; i < 10; i++)
        pool_free(&p, r[i]);
}

static void freed_records_come_back_first(void **state)
{
    (void)state;
    static struct pool p = POOL_INIT(16, 8);
    void *a = pool_alloc(&p), *b = pool_alloc(&p);
    pool_free(&p, a);
    pool_free(&p, b);
    assert_ptr_equal(pool_alloc(&p), b);
    assert_ptr_equal(pool_alloc(&p), a);
    void *c = pool_alloc(&p);
    assert_ptr_not_equal(c, a);
    assert_ptr_not_equal(c, b);
}

/* ASan builds: a freed record (but its free-list link), and one not handed
 * out yet, are poisoned (a use after free is reported); a record handed out
 * again is not. */
static void freed_records_are_poisoned_under_asan(void **state)
{
    (void)state;
#ifdef ASAN_BUILD
    static struct pool p = POOL_INIT(40, 4);
    char *a = pool_alloc(&p);
    assert_false(__asan_region_is_poisoned(a, 40));
    assert_true(__asan_address_is_poisoned(a + 40));     /* the next, unused */
    pool_free(&p, a);
    assert_false(__asan_region_is_poisoned(a, sizeof(void *)));
    assert_true(__asan_address_is_poisoned(a + sizeof(void *)));
    assert_true(__asan_address_is_poisoned(a + 39));
    assert_ptr_equal(pool_alloc(&p), a);
    assert_false(__asan_region_is_poisoned(a, 40));
#else
    skip();
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(records_are_distinct_and_writable_across_blocks),
        cmocka_unit_test(freed_records_come_back_first),
        cmocka_unit_test(freed_records_are_poisoned_under_asan),
    };
    return cmocka_run_group_tests_name("pool", tests, NULL, NULL);
}
