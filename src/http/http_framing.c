/* SPDX-License-Identifier: Apache-2.0 */
/* A request's framing headers: see http_framing.h.
 *
 * evhttp has read the body by then, as it understood it (the first
 * Content-Length, or chunked when Transfer-Encoding says so, whatever the
 * Content-Length): within its bounds, and nothing of it acted on before
 * this check. RFC 9112 6.3: conflicting lengths are an unrecoverable
 * error; Transfer-Encoding with Content-Length may be refused, and the
 * connection must close. Repeated identical lengths may be taken, but are
 * refused here too (as nginx does): no client sends them. */
#include "http/http_framing.h"
#include "http/http_reply.h"
#include "obs/stats.h"

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <strings.h>

static int digits_only(const char *v)
{
    if (!*v)
        return 0;
    for (; *v; v++)
        if (*v < '0' || *v > '9')
            return 0;
    return 1;
}

/* What is wrong with req's framing, or NULL. */
static const char *framing_fault(struct evhttp_request *req)
{
    int lengths = 0, codings = 0;
    for (const struct evkeyval *h = evhttp_request_get_input_headers(req)->tqh_first; h;
         h = h->next.tqe_next) {
        if (strcasecmp(h->key, "Content-Length") == 0) {
            if (++lengths > 1)
                return "Content-Length given more than once: send it once";
            if (!digits_only(h->value))
                return "Content-Length must be a number of digits only";
        } else if (strcasecmp(h->key, "Transfer-Encoding") == 0) {
            if (++codings > 1 || strcasecmp(h->value, "chunked") != 0)
                return "Only one Transfer-Encoding, chunked, is understood";
        }
    }
    if (lengths && codings)
        return "Transfer-Encoding and Content-Length together: send one of them";
    return NULL;
}

int http_framing_ok(struct evhttp_request *req)
{
    const char *fault = framing_fault(req);
    if (!fault)
        return 1;
    loop_stats.http_bad_framing++;
    evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
    http_reply_text(req, 400, "Bad Request", fault);
    return 0;
}
