/* SPDX-License-Identifier: Apache-2.0 */
/* CORS: see cors.h. */
#include "http/cors.h"
#include "http/http_reply.h"
#include "obs/stats.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static struct http_origins origins;     /* --allow-origin */

void cors_configure(const struct http_origins *o) { origins = *o; }

static int allow_any(void)
{
    for (uint32_t i = 0; i < origins.n; i++)
        if (strcmp(origins.list[i], "*") == 0)
            return 1;
    return 0;
}

int origin_allowed(const char *origin, const char *host, const char (*list)[256], size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(list[i], "*") == 0 || strcmp(list[i], origin) == 0)
            return 1;
    const char *sep = strstr(origin, "://");
    return sep && host && strcasecmp(sep + 3, host) == 0;
}

int cors_origin_allowed(const char *origin)
{
    return origin_allowed(origin, NULL, origins.list, origins.n);
}

size_t cors_headers(struct evhttp_request *req, int any_origin, char *out, size_t size)
{
    const char *origin = evhttp_find_header(evhttp_request_get_input_headers(req), "Origin");
    int n = 0;
    if (!origin)
        return 0;
    if (origins.n == 0) {
        if (any_origin)
            n = snprintf(out, size, "Access-Control-Allow-Origin: *\r\n");
    } else if (allow_any()) {
        n = snprintf(out, size, "Access-Control-Allow-Origin: *\r\n");
    } else if (cors_origin_allowed(origin) && strlen(origin) < 256) {
        n = snprintf(out, size,
                     "Access-Control-Allow-Origin: %s\r\n"
                     "Access-Control-Allow-Credentials: true\r\n"
                     "Vary: Origin\r\n", origin);
    }
    return n > 0 && (size_t)n < size ? (size_t)n : 0;
}

void cors_preflight(struct evhttp_request *req)
{
    cors_preflight_for(req, "GET", "Last-Event-ID, Authorization");
}

void cors_preflight_for(struct evhttp_request *req, const char *methods, const char *headers)
{
    const char *origin = evhttp_find_header(evhttp_request_get_input_headers(req), "Origin");
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    if (!origin || origins.n == 0 || !cors_origin_allowed(origin)) {
        loop_stats.http_bad_origin++;
        http_reply_text(req, 403, "Forbidden", "Origin not allowed: list it with --allow-origin");
        return;
    }
    if (allow_any()) {
        evhttp_add_header(h, "Access-Control-Allow-Origin", "*");
    } else {
        evhttp_add_header(h, "Access-Control-Allow-Origin", origin);
        evhttp_add_header(h, "Access-Control-Allow-Credentials", "true");
        evhttp_add_header(h, "Vary", "Origin");
    }
    evhttp_add_header(h, "Access-Control-Allow-Methods", methods);
    evhttp_add_header(h, "Access-Control-Allow-Headers", headers);
    evhttp_add_header(h, "Access-Control-Max-Age", "600");
    evhttp_send_reply(req, 204, "No Content", NULL);
}
