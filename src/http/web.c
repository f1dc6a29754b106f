/* SPDX-License-Identifier: Apache-2.0 */
/* The built-in files: see web.h. */
#include "http/web.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Generated from web/ by the Makefile (build/web_assets.c). */
extern const unsigned char web_index_html[];
extern const size_t web_index_html_len;
extern const unsigned char web_httpdcnode_js[];
extern const size_t web_httpdcnode_js_len;

struct web_file {
    const char *path;
    const char *type;
    const unsigned char *data;
    size_t len;
    char etag[24];          /* "<16 hex digits>", filled on first use */
};

/* The data of each: set by web_configure. */
static struct web_file files[] = {
    {"/", "text/html; charset=utf-8", NULL, 0, ""},
    {"/httpdcnode.js", "text/javascript; charset=utf-8", NULL, 0, ""},
};

static unsigned char *index_page;   /* the page with this node's name */

#define NODE_MARK "@NODE@"

/* c as HTML text or attribute value: its escape, or NULL for itself. */
static const char *html_escape(char c)
{
    switch (c) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '"': return "&quot;";
    case '\'': return "&#39;";
    default: return NULL;
    }
}

/* Writes node escaped to out (when not NULL); returns its length. */
static size_t put_node(const char *node, unsigned char *out)
{
    size_t n = 0;
    for (const char *p = node; *p; p++) {
        const char *e = html_escape(*p);
        size_t k = e ? strlen(e) : 1;
        if (out)
            memcpy(out + n, e ? e : p, k);
        n += k;
    }
    return n;
}

/* The page with each mark replaced, written to out (when not NULL);
 * returns its length. */
static size_t fill_page(const char *node, unsigned char *out)
{
    const unsigned char *in = web_index_html, *end = in + web_index_html_len;
    const size_t mark = sizeof NODE_MARK - 1;
    size_t n = 0;
    while (in < end) {
        if ((size_t)(end - in) >= mark && memcmp(in, NODE_MARK, mark) == 0) {
            n += put_node(node, out ? out + n : NULL);
            in += mark;
        } else {
            if (out)
                out[n] = *in;
            n++;
            in++;
        }
    }
    return n;
}

int web_configure(const char *node)
{
    size_t n = fill_page(node, NULL);
    free(index_page);
    index_page = malloc(n ? n : 1);
    if (!index_page)
        return -1;
    fill_page(node, index_page);
    files[0] = (struct web_file){"/", "text/html; charset=utf-8", index_page, n, ""};
    files[1] = (struct web_file){"/httpdcnode.js", "text/javascript; charset=utf-8",
                                 web_httpdcnode_js, web_httpdcnode_js_len, ""};
    return 0;
}

void web_free(void)
{
    free(index_page);
    index_page = NULL;
    files[0].data = NULL;
}

/* FNV-1a of the content: the ETag changes whenever a file does. */
static const char *etag_of(struct web_file *f)
{
    if (!f->etag[0]) {
        uint64_t h = 0xcbf29ce484222325u;
        for (size_t i = 0; i < f->len; i++)
            h = (h ^ f->data[i]) * 0x100000001b3u;
        snprintf(f->etag, sizeof f->etag, "\"%016llx\"", (unsigned long long)h);
    }
    return f->etag;
}

static void reply_file(struct evhttp_request *req, struct web_file *f)
{
    struct evkeyvalq *out = evhttp_request_get_output_headers(req);
    const char *etag = etag_of(f);
    const char *match = evhttp_find_header(evhttp_request_get_input_headers(req),
                                           "If-None-Match");
    evhttp_add_header(out, "Cache-Control", "no-cache");
    evhttp_add_header(out, "ETag", etag);
    if (match && strstr(match, etag)) {
        evhttp_send_reply(req, HTTP_NOTMODIFIED, "Not Modified", NULL);
        return;
    }
    evhttp_add_header(out, "Content-Type", f->type);
    evhttp_add_header(out, "X-Content-Type-Options", "nosniff");
    /* Set here because evhttp adds none to a HEAD reply. */
    char len[24];
    snprintf(len, sizeof len, "%zu", f->len);
    evhttp_add_header(out, "Content-Length", len);
    /* evhttp 2.1 would send a body after HEAD too. */
    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
        evhttp_send_reply(req, HTTP_OK, "OK", NULL);
        return;
    }
    struct evbuffer *body = evbuffer_new();
    if (!body || evbuffer_add_reference(body, f->data, f->len, NULL, NULL) != 0) {
        if (body)
            evbuffer_free(body);
        evhttp_send_error(req, HTTP_SERVUNAVAIL, "Out of memory, try again later");
        return;
    }
    evhttp_send_reply(req, HTTP_OK, "OK", body);
    evbuffer_free(body);
}

int web_serve(struct evhttp_request *req, const char *path)
{
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        if (files[i].data && strcmp(path, files[i].path) == 0) {
            reply_file(req, &files[i]);
            return 1;
        }
    return 0;
}
