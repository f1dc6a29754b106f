/* The built-in files: see web.h. */
#include "http/web.h"

#include <event2/buffer.h>
#include <event2/http.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
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
    const size_t *len;
    char etag[24];          /* "<16 hex digits>", filled on first use */
};

static struct web_file files[] = {
    {"/", "text/html; charset=utf-8", web_index_html, &web_index_html_len, ""},
    {"/httpdcnode.js", "text/javascript; charset=utf-8", web_httpdcnode_js,
     &web_httpdcnode_js_len, ""},
};

/* FNV-1a of the content: the ETag changes whenever a file does. */
static const char *etag_of(struct web_file *f)
{
    if (!f->etag[0]) {
        uint64_t h = 0xcbf29ce484222325u;
        for (size_t i = 0; i < *f->len; i++)
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
    snprintf(len, sizeof len, "%zu", *f->len);
    evhttp_add_header(out, "Content-Length", len);
    /* evhttp 2.1 would send a body after HEAD too. */
    if (evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
        evhttp_send_reply(req, HTTP_OK, "OK", NULL);
        return;
    }
    struct evbuffer *body = evbuffer_new();
    if (!body || evbuffer_add_reference(body, f->data, *f->len, NULL, NULL) != 0) {
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
        if (strcmp(path, files[i].path) == 0) {
            reply_file(req, &files[i]);
            return 1;
        }
    return 0;
}
