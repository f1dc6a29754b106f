/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target: a request URI as src/http/http_front.c sees it. evhttp
 * parses the request line's URI with evhttp_uri_parse_with_flags(...,
 * EVHTTP_URI_NONCONFORMANT); on_request routes on its path and hands the
 * text after "/test/" to uid_parse. */
#include <event2/http.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/uid.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* on_request's routing, minus the replies. */
static void route(const char *path)
{
    uint32_t uid = 0;
    if (path && strncmp(path, "/test/", 6) == 0) {
        if (uid_parse(path + 6, 1114112, &uid) == UID_OK && (uid < 1 || uid > 1114112))
            abort();
    } else if (path && (strcmp(path, "/stats") == 0 || strcmp(path, "/probe") == 0)) {
        return;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The request line reaches the parser as a C string. */
    char *s = malloc(size + 1);
    if (!s)
        abort();
    memcpy(s, data, size);
    s[size] = '\0';
    struct evhttp_uri *uri = evhttp_uri_parse_with_flags(s, EVHTTP_URI_NONCONFORMANT);
    if (uri) {
        route(evhttp_uri_get_path(uri));
        const char *query = evhttp_uri_get_query(uri);
        if (query && strcmp(query, "reset=1") == 0)    /* reply_probe's check */
            route(NULL);
        evhttp_uri_free(uri);
    }
    free(s);
    return 0;
}
