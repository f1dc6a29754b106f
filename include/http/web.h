/* SPDX-License-Identifier: Apache-2.0 */
/* GET / (the demo page) and GET /httpdcnode.js (the browser client), both
 * from web/ and built into the binary (the Makefile generates
 * build/web_assets.c), so a running server needs no files beside it. */
#ifndef HTTPDCNODE_WEB_H
#define HTTPDCNODE_WEB_H

struct evhttp_request;

/* At startup: the demo page with node (--name) in place of each @NODE@
 * (its hint to send from Erlang names this node), HTML-escaped. -1 when
 * out of memory. */
int web_configure(const char *node);
void web_free(void);

/* Answers req when path is one of the built-in files (200, or 304 when
 * If-None-Match names its ETag) and returns 1; returns 0, with nothing
 * sent, for any other path. */
int web_serve(struct evhttp_request *req, const char *path);

#endif
