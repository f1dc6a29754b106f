/* Connection ids: unique, never reused, found while the stream lives and
 * not after; the tables stay right through growth and deletions (their
 * backward shifts). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>

#include "core/conn.h"
#include "core/stream.h"

#define N 5000

static void ids_found_until_forgotten(void **state)
{
    (void)state;
    struct stream *s = calloc(N, sizeof *s);
    uint64_t *ids = calloc(N, sizeof *ids);
    assert_non_null(s);
    assert_non_null(ids);
    for (int i = 0; i < N; i++) {
        struct conn *c = conn_of(&s[i]);
        assert_non_null(c);
        ids[i] = c->id;
        assert_true(i == 0 || ids[i] > ids[i - 1]);
        c->tokens = (uint32_t)i;
    }
    /* The same entry again, with what its owner kept. */
    for (int i = 0; i < N; i++) {
        assert_true(conn_of(&s[i])->id == ids[i]);
        assert_int_equal(conn_of(&s[i])->tokens, (uint32_t)i);
        assert_ptr_equal(conn_find(ids[i]), &s[i]);
    }
    /* Every third forgotten: gone; the others still found. */
    for (int i = 0; i < N; i += 3)
        conn_forget(&s[i]);
    for (int i = 0; i < N; i++) {
        if (i % 3 == 0)
            assert_null(conn_find(ids[i]));
        else
            assert_ptr_equal(conn_find(ids[i]), &s[i]);
    }
    /* A stream at a forgotten address gets a new id, never an old one. */
    uint64_t again = conn_of(&s[0])->id;
    assert_true(again > ids[N - 1]);
    assert_null(conn_find(ids[0]));
    assert_ptr_equal(conn_find(again), &s[0]);
    assert_null(conn_find(0));
    assert_null(conn_find(again + 1));
    for (int i = 0; i < N; i++)
        conn_forget(&s[i]);
    for (int i = 0; i < N; i++)
        assert_null(conn_find(ids[i]));
    conn_forget(&s[1]);             /* twice: nothing */
    conn_free();
    free(s);
    free(ids);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ids_found_until_forgotten),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
