/* SPDX-License-Identifier: Apache-2.0 */
/* Peer addresses from text (X-Forwarded-For entries, --trusted-proxy)
 * and networks: the forms accepted, those refused, IPv4-mapped IPv6. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "lib/peer_addr.h"

static int parse(const char *s, struct peer_addr *a) { return peer_addr_parse(s, strlen(s), a); }

static void addresses_and_ports(void **state)
{
    (void)state;
    struct peer_addr a;
    assert_int_equal(parse(" 203.0.113.7 ", &a), 0);
    assert_int_equal(a.family, 4);
    assert_int_equal(a.port, 0);
    assert_memory_equal(a.addr, "\xcb\x00\x71\x07", 4);
    assert_int_equal(parse("203.0.113.7:4711", &a), 0);
    assert_int_equal(a.port, 4711);
    assert_int_equal(parse("2001:db8::1", &a), 0);
    assert_int_equal(a.family, 6);
    assert_int_equal(a.addr[0], 0x20);
    assert_int_equal(a.addr[15], 1);
    assert_int_equal(parse("[2001:db8::1]:443", &a), 0);
    assert_int_equal(a.family, 6);
    assert_int_equal(a.port, 443);
    assert_int_equal(parse("[2001:db8::1]", &a), 0);
    /* ::ffff:a.b.c.d is the IPv4 address */
    assert_int_equal(parse("::ffff:10.1.2.3", &a), 0);
    assert_int_equal(a.family, 4);
    assert_memory_equal(a.addr, "\x0a\x01\x02\x03", 4);
}

static void not_addresses(void **state)
{
    (void)state;
    struct peer_addr a;
    const char *bad[] = {"", "  ", "unknown", "203.0.113", "203.0.113.7:", "203.0.113.7:0",
                         "203.0.113.7:65536", "203.0.113.7:8x", "[203.0.113.7]",
                         "[2001:db8::1", "[2001:db8::1]x", "2001:db8::1:443:x",
                         "_hidden", "1.2.3.4, 5.6.7.8", "example.org"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(parse(bad[i], &a), -1);
        assert_int_equal(a.family, 0);
    }
}

static void networks(void **state)
{
    (void)state;
    struct peer_net n;
    struct peer_addr a;
    assert_int_equal(peer_net_parse("10.0.0.0/8", &n), 0);
    parse("10.200.3.4", &a);
    assert_true(peer_net_contains(&n, &a));
    parse("11.0.0.1", &a);
    assert_false(peer_net_contains(&n, &a));
    assert_int_equal(peer_net_parse("192.168.4.0/22", &n), 0);
    parse("192.168.7.255", &a);
    assert_true(peer_net_contains(&n, &a));
    parse("192.168.8.0", &a);
    assert_false(peer_net_contains(&n, &a));
    assert_int_equal(peer_net_parse("127.0.0.1", &n), 0);
    assert_int_equal(n.bits, 32);
    parse("127.0.0.1", &a);
    assert_true(peer_net_contains(&n, &a));
    parse("127.0.0.2", &a);
    assert_false(peer_net_contains(&n, &a));
    /* an IPv6 network never holds an IPv4 address, nor the reverse */
    assert_int_equal(peer_net_parse("::/0", &n), 0);
    assert_false(peer_net_contains(&n, &a));
    parse("2001:db8::5", &a);
    assert_true(peer_net_contains(&n, &a));
    assert_int_equal(peer_net_parse("0.0.0.0/0", &n), 0);
    assert_false(peer_net_contains(&n, &a));
    const char *bad[] = {"10.0.0.0/33", "::/129", "10.0.0.0/", "10.0.0.0/x", "10.0.0.1:80",
                         "[::1]", "", "/8"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(peer_net_parse(bad[i], &n), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(addresses_and_ports),
        cmocka_unit_test(not_addresses),
        cmocka_unit_test(networks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
