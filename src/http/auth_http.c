/* SPDX-License-Identifier: Apache-2.0 */
/* Subscriber tokens at the HTTP door: the request's query and Authorization
 * header go to the pure check (auth_token.c); a refusal is a 403. */
#include "http/auth_http.h"
#include "http/http_reply.h"
#include "auth/auth_secret.h"
#include "auth/auth_token.h"
#include "core/expiry.h"
#include "core/topic_join.h"
#include "lib/log.h"
#include "obs/stats.h"

#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static struct auth_key *key;    /* NULL: open mode */

static int is_loopback(const char *host)
{
    struct in_addr a;
    return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

int auth_http_configure(const char *secret_file, const char *listen_host, uint16_t listen_port)
{
    if (secret_file[0] == '\0') {
        if (!is_loopback(listen_host))
            log_msg(LOG_INFO, "open mode: anyone who can reach %s:%u can read any uid; "
                    "use --auth-secret-file", listen_host, listen_port);
        return 0;
    }
    unsigned char secret[AUTH_SECRET_MAX];
    size_t len;
    if (auth_secret_read(secret_file, secret, &len) != 0)
        return -1;
    key = auth_key_new(secret, len);
    explicit_bzero(secret, sizeof secret);
    if (!key) {
        fprintf(stderr, "httpdcnode: libcrypto cannot set up HMAC-SHA256 "
                        "(is OpenSSL 3 installed?)\n");
        return -1;
    }
    return 0;
}

void auth_http_free(void)
{
    auth_key_free(key);
    key = NULL;
}

static void count(enum auth_outcome outcome)
{
    switch (outcome) {
    case AUTH_MISSING: loop_stats.auth_missing++; break;
    case AUTH_EXPIRED: loop_stats.auth_expired++; break;
    case AUTH_BAD: loop_stats.auth_bad++; break;
    case AUTH_OK: break;
    }
}

static void reply_forbidden(struct evhttp_request *req, const char *reason)
{
    evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
    http_reply_text(req, 403, "Forbidden", reason);
}

int auth_admit(struct evhttp_request *req, uint32_t uid)
{
    if (!key)
        return 1;
    const char *query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    const char *authz = evhttp_find_header(evhttp_request_get_input_headers(req),
                                           "Authorization");
    struct auth_verdict v = auth_token_check(key, uid, query, authz, (int64_t)time(NULL));
    if (v.outcome == AUTH_OK) {
        expiry_next_stream(v.exp);      /* the stream it opens ends at exp */
        topic_grants_next(v.has_topics ? v.topics : NULL);   /* and may join these */
        return 1;
    }
    count(v.outcome);
    reply_forbidden(req, v.reason);
    return 0;
}
