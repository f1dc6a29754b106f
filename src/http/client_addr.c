/* SPDX-License-Identifier: Apache-2.0 */
/* The client's address behind a trusted proxy: see client_addr.h. */
#include "http/client_addr.h"
#include "obs/stats.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <sys/queue.h>
#include <string.h>
#include <strings.h>

static const struct peer_net *nets;    /* --trusted-proxy */
static uint32_t n_nets;

/* X-Forwarded-For headers looked at, the last ones: a request's head is
 * at most 8 KB, and a proxy appends to the last one. */
#define XFF_HEADERS_MAX 16

void client_addr_configure(const struct peer_net *trusted, uint32_t n)
{
    nets = trusted;
    n_nets = n;
}

static int trusted(const struct peer_addr *a)
{
    for (uint32_t i = 0; i < n_nets; i++)
        if (peer_net_contains(&nets[i], a))
            return 1;
    return 0;
}

/* Walks one X-Forwarded-For value from its right end. 1: *at is the
 * client (an untrusted entry), or an entry was bad (*bad set, *at the
 * address before it); 0: all its entries were trusted (*at the leftmost). */
static int walk(const char *v, struct peer_addr *at, int *bad)
{
    size_t end = strlen(v);
    while (end > 0) {
        size_t start = end;
        while (start > 0 && v[start - 1] != ',')
            start--;
        struct peer_addr a;
        if (peer_addr_parse(v + start, end - start, &a) != 0) {
            *bad = 1;
            return 1;
        }
        *at = a;
        if (!trusted(&a))
            return 1;
        end = start ? start - 1 : 0;
    }
    return 0;
}

void client_addr_of(struct evhttp_request *req, struct peer_addr *out)
{
    struct evhttp_connection *c = evhttp_request_get_connection(req);
    peer_addr_from_sockaddr(c ? evhttp_connection_get_addr(c) : NULL, out);
    if (n_nets == 0 || !trusted(out))
        return;
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *xff[XFF_HEADERS_MAX];
    unsigned n = 0;
    struct evkeyval *h;
    TAILQ_FOREACH(h, in, next) {
        if (strcasecmp(h->key, "X-Forwarded-For") != 0)
            continue;
        if (n == XFF_HEADERS_MAX)
            memmove(xff, xff + 1, (--n) * sizeof xff[0]);
        xff[n++] = h->value;
    }
    int bad = 0;
    struct peer_addr at = *out;
    for (unsigned i = n; i-- > 0;)
        if (walk(xff[i], &at, &bad))
            break;
    if (n == 0) {
        const char *real = evhttp_find_header(in, "X-Real-IP");
        if (real && peer_addr_parse(real, strlen(real), &at) != 0)
            bad = 1;
    }
    if (bad)
        loop_stats.proxy_bad_forwarded++;
    *out = at;
}
